/*
 * The table engine from C: open a store in the directory argv[1], create a table, insert
 * rows, read a row and a cell, update a cell, meet the typed errors (a duplicate key, a
 * cell of the wrong size, a missing column), run transactions that commit and abort, scan
 * a key range in batches, drop a table, and reopen the store to find what was committed.
 * Prints what it sees; exits 0 when every step went as expected.
 *
 *   cc -I crates/capi/include table_example.c -L target/release -lshale -o table_example
 *   LD_LIBRARY_PATH=target/release ./table_example /tmp/table-store
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shale.h"

#define BYTES(s) (const uint8_t *)(s), strlen(s)

static int failures = 0;

static void check(const char *what, int rc, shale_error *err) {
    if (rc != SHALE_OK) {
        fprintf(stderr, "FAIL %s: %s: %s\n", what, shale_status_name(rc),
                shale_error_message(err));
        failures++;
    }
    shale_error_free(err);
}

/* Expects `rc` to be `want`, and prints the status's name. */
static void expect(const char *what, int rc, int want, shale_error *err) {
    printf("%s: %s\n", what, shale_status_name(rc));
    if (rc != want) {
        fprintf(stderr, "FAIL %s: %s, not %s: %s\n", what, shale_status_name(rc),
                shale_status_name(want), shale_error_message(err));
        failures++;
    }
    shale_error_free(err);
}

/* Inserts (id, city, population) in `txn` (NULL: alone). */
static int insert(shale_table_store *store, shale_table_txn *txn, uint32_t table,
                  const char *id, const char *city, const char *population,
                  shale_error **err) {
    const uint8_t *cells[3] = {(const uint8_t *)id, (const uint8_t *)city,
                               (const uint8_t *)population};
    size_t lens[3] = {strlen(id), strlen(city), strlen(population)};
    return shale_table_insert(store, txn, table, cells, lens, 3, err);
}

static void show_cell(shale_table_store *store, uint32_t table, const char *id,
                      const char *column) {
    uint8_t *value = NULL;
    size_t len = 0;
    shale_error *err = NULL;
    check("select_cell",
          shale_table_select_cell(store, NULL, table, BYTES(id), column, &value, &len, &err),
          err);
    if (value == NULL) {
        printf("%s of %s: (absent)\n", column, id);
    } else {
        printf("%s of %s: %.*s\n", column, id, (int)len, (const char *)value);
    }
    shale_free(value);
}

/* Prints every row of the scan, batch by batch. */
static void scan(shale_table_store *store, uint32_t table, const char *start,
                 const char *end) {
    shale_table_scan *sc = NULL;
    shale_error *err = NULL;
    check("scan_create",
          shale_table_scan_create(store, table, (const uint8_t *)start,
                                  start ? strlen(start) : 0, (const uint8_t *)end,
                                  end ? strlen(end) : 0, &sc, &err),
          err);
    printf("scan %s..%s:", start ? start : "", end ? end : "");
    for (;;) {
        shale_table_rows *rows = NULL;
        err = NULL;
        int rc = shale_table_scan_next(sc, &rows, &err);
        check("scan_next", rc, err);
        if (rc != SHALE_OK || rows == NULL) {
            break;
        }
        for (size_t r = 0; r < shale_table_rows_count(rows); r++) {
            size_t klen = 0, clen = 0;
            const uint8_t *k = shale_table_rows_cell(rows, r, 0, &klen);
            const uint8_t *c = shale_table_rows_cell(rows, r, 1, &clen);
            printf(" %.*s=%.*s", (int)klen, (const char *)k, (int)clen, (const char *)c);
        }
        shale_table_rows_free(rows);
    }
    printf("\n");
    shale_table_scan_destroy(sc);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s STORE_DIR\n", argv[0]);
        return 2;
    }
    shale_table_options opts = shale_table_options_default();
    opts.undo_log_bytes = 1 << 20;
    shale_table_store *store = NULL;
    shale_error *err = NULL;
    check("open", shale_table_open(argv[1], &opts, &store, &err), err);
    if (store == NULL) {
        return 1;
    }

    shale_table_column columns[3] = {
        {"id", false, 4},
        {"city", true, 40},
        {"population", false, 8},
    };
    uint32_t cities = 0, scratch = 0;
    err = NULL;
    check("create", shale_table_create(store, "cities", columns, 3, &cities, &err), err);
    err = NULL;
    check("create", shale_table_create(store, "scratch", columns, 3, &scratch, &err), err);
    err = NULL;
    expect("create cities again", shale_table_create(store, "cities", columns, 3, &scratch, &err),
           SHALE_TABLE_EXISTS, err);

    const char *rows[][3] = {
        {"0001", "Lyon", "00522250"},
        {"0002", "Kyoto", "01463723"},
        {"0003", "Quito", "02800388"},
        {"0004", "Oslo", "00709037"},
    };
    for (size_t i = 0; i < 4; i++) {
        err = NULL;
        check("insert", insert(store, NULL, cities, rows[i][0], rows[i][1], rows[i][2], &err),
              err);
    }
    err = NULL;
    expect("insert 0001 again", insert(store, NULL, cities, "0001", "Paris", "02102650", &err),
           SHALE_KEY_EXISTS, err);
    err = NULL;
    expect("insert a 5-byte id", insert(store, NULL, cities, "00005", "Paris", "02102650", &err),
           SHALE_WRONG_SIZE, err);

    shale_table_rows *row = NULL;
    err = NULL;
    check("select", shale_table_select(store, NULL, cities, BYTES("0002"), &row, &err), err);
    size_t len = 0;
    const uint8_t *city = shale_table_rows_cell(row, 0, 1, &len);
    printf("select 0002: %zu row, city %.*s\n", shale_table_rows_count(row), (int)len,
           (const char *)city);
    shale_table_rows_free(row);
    row = NULL;
    err = NULL;
    check("select", shale_table_select(store, NULL, cities, BYTES("0009"), &row, &err), err);
    printf("select 0009: %s\n", row == NULL ? "(absent)" : "present");

    err = NULL;
    check("update",
          shale_table_update(store, NULL, cities, BYTES("0001"), "city", BYTES("Lyon (Rhone)"),
                             &err),
          err);
    show_cell(store, cities, "0001", "city");
    err = NULL;
    expect("update a missing column",
           shale_table_update(store, NULL, cities, BYTES("0001"), "mayor", BYTES("x"), &err),
           SHALE_NO_SUCH_COLUMN, err);

    /* A transaction that aborts: nothing of it stays. */
    shale_table_txn *txn = shale_table_begin(store, SHALE_TABLE_REPEATABLE_READ);
    err = NULL;
    check("erase in txn", shale_table_erase(store, txn, cities, BYTES("0003"), &err), err);
    err = NULL;
    check("insert in txn", insert(store, txn, cities, "0005", "Perth", "02192229", &err), err);
    err = NULL;
    check("abort", shale_table_abort(txn, &err), err);
    show_cell(store, cities, "0003", "city");
    show_cell(store, cities, "0005", "city");

    /* A transaction that commits. */
    txn = shale_table_begin(store, SHALE_TABLE_SERIALIZABLE);
    err = NULL;
    check("erase in txn", shale_table_erase(store, txn, cities, BYTES("0004"), &err), err);
    err = NULL;
    check("insert in txn", insert(store, txn, cities, "0006", "Accra", "02388000", &err), err);
    err = NULL;
    check("update in txn",
          shale_table_update(store, txn, cities, BYTES("0002"), "population",
                             BYTES("01464890"), &err),
          err);
    err = NULL;
    check("commit", shale_table_commit(txn, &err), err);

    /* A transaction that declares its rows: all locked, in one order, before it starts, so
     * transactions that declare theirs never deadlock on them. */
    shale_table_declared_row declared[2] = {
        {cities, (const uint8_t *)"0002", 4, false},
        {cities, (const uint8_t *)"0003", 4, true},
    };
    txn = NULL;
    err = NULL;
    check("begin declared",
          shale_table_begin_declared(store, SHALE_TABLE_REPEATABLE_READ, declared, 2, &txn,
                                     &err),
          err);
    err = NULL;
    check("update declared",
          shale_table_update(store, txn, cities, BYTES("0003"), "population", BYTES("02011388"),
                             &err),
          err);
    err = NULL;
    check("commit declared", shale_table_commit(txn, &err), err);
    show_cell(store, cities, "0003", "population");

    scan(store, cities, NULL, NULL);
    scan(store, cities, "0002", "0004");

    err = NULL;
    check("drop", shale_table_drop(store, "scratch", &err), err);
    err = NULL;
    expect("drop scratch again", shale_table_drop(store, "scratch", &err), SHALE_NO_SUCH_TABLE,
           err);
    shale_table_close(store);

    /* Reopen: every committed change is there. */
    store = NULL;
    err = NULL;
    check("reopen", shale_table_open(argv[1], &opts, &store, &err), err);
    if (store == NULL) {
        return 1;
    }
    uint32_t id = 0;
    err = NULL;
    check("table id", shale_table_id(store, "cities", &id, &err), err);
    printf("reopened: cities is table %u\n", id);
    show_cell(store, id, "0002", "population");
    scan(store, id, NULL, NULL);
    shale_table_close(store);

    if (failures == 0) {
        printf("table example: ok\n");
    }
    return failures == 0 ? 0 : 1;
}
