/*
 * The lsm engine from C: open a store in the directory argv[1], put, get, delete, apply a
 * write batch atomically, read through a snapshot and iterate, forward and backward,
 * within bounds. Prints what it sees; exits 0 when every step went as expected.
 *
 *   cc -I crates/capi/include db_example.c -L target/release -lshale -o db_example
 *   LD_LIBRARY_PATH=target/release ./db_example /tmp/db-store
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shale.h"

#define KEY(s) (const uint8_t *)(s), strlen(s)

static int failures = 0;

static void check(const char *what, int rc, shale_error *err) {
    if (rc != SHALE_OK) {
        fprintf(stderr, "FAIL %s: %s: %s\n", what, shale_status_name(rc),
                shale_error_message(err));
        failures++;
    }
    shale_error_free(err);
}

/* Prints the value of `key` as of `snap` (NULL: now), or "(absent)". */
static void show(shale_db *db, const shale_snapshot *snap, const char *key) {
    uint8_t *value = NULL;
    size_t len = 0;
    shale_error *err = NULL;
    check("get", shale_db_get(db, snap, KEY(key), &value, &len, &err), err);
    if (value == NULL) {
        printf("get %s%s: (absent)\n", key, snap ? " at snapshot" : "");
    } else {
        printf("get %s%s: %.*s\n", key, snap ? " at snapshot" : "", (int)len, (char *)value);
    }
    shale_free(value);
}

static void scan(shale_iterator *it, const char *label, int backward) {
    printf("%s:", label);
    if (backward) {
        shale_db_iter_seek_to_last(it);
    } else {
        shale_db_iter_seek_to_first(it);
    }
    while (shale_db_iter_valid(it)) {
        size_t klen = 0, vlen = 0;
        const uint8_t *k = shale_db_iter_key(it, &klen);
        const uint8_t *v = shale_db_iter_value(it, &vlen);
        printf(" %.*s=%.*s", (int)klen, (const char *)k, (int)vlen, (const char *)v);
        if (backward) {
            shale_db_iter_prev(it);
        } else {
            shale_db_iter_next(it);
        }
    }
    printf("\n");
    shale_error *err = NULL;
    check("iterator status", shale_db_iter_status(it, &err), err);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIRECTORY\n", argv[0]);
        return 2;
    }
    shale_db_options opts = shale_db_options_default();
    opts.write_buffer_size = 1 << 20;
    opts.block_cache_size = 1 << 20;
    shale_db *db = NULL;
    shale_error *err = NULL;
    int rc = shale_db_open(argv[1], &opts, &db, &err);
    if (rc != SHALE_OK) {
        fprintf(stderr, "open: %s\n", shale_error_message(err));
        shale_error_free(err);
        return 1;
    }

    err = NULL;
    check("put apple", shale_db_put(db, KEY("apple"), KEY("red"), false, &err), err);
    err = NULL;
    check("put banana", shale_db_put(db, KEY("banana"), KEY("yellow"), true, &err), err);
    err = NULL;
    check("put cherry", shale_db_put(db, KEY("cherry"), KEY("dark red"), false, &err), err);
    show(db, NULL, "banana");
    show(db, NULL, "durian");

    /* A batch: all of it or none of it. */
    shale_writebatch *batch = shale_writebatch_create();
    err = NULL;
    check("batch put", shale_writebatch_put(batch, KEY("durian"), KEY("green"), &err), err);
    err = NULL;
    check("batch delete", shale_writebatch_delete(batch, KEY("apple"), &err), err);
    printf("batch of %zu\n", shale_writebatch_count(batch));
    err = NULL;
    check("write batch", shale_db_write(db, batch, true, &err), err);
    shale_writebatch_destroy(batch);
    show(db, NULL, "apple");
    show(db, NULL, "durian");

    /* A snapshot sees the store as it was. */
    shale_snapshot *snap = shale_db_snapshot_create(db);
    err = NULL;
    check("put elderberry", shale_db_put(db, KEY("elderberry"), KEY("black"), false, &err), err);
    err = NULL;
    check("delete banana", shale_db_delete(db, KEY("banana"), false, &err), err);
    show(db, snap, "elderberry");
    show(db, snap, "banana");
    show(db, NULL, "banana");

    shale_iterator *it = NULL;
    err = NULL;
    check("iterator at snapshot", shale_db_iter_create(db, snap, NULL, 0, NULL, 0, &it, &err),
          err);
    scan(it, "snapshot", 0);
    shale_db_iter_destroy(it);
    shale_db_snapshot_release(snap);

    err = NULL;
    check("iterator now", shale_db_iter_create(db, NULL, NULL, 0, NULL, 0, &it, &err), err);
    scan(it, "now", 0);
    scan(it, "now backward", 1);
    shale_db_iter_seek(it, KEY("d"));
    size_t klen = 0;
    const uint8_t *k = shale_db_iter_key(it, &klen);
    printf("seek d: %.*s\n", (int)klen, k ? (const char *)k : "");
    shale_db_iter_destroy(it);

    err = NULL;
    check("iterator [cherry, elderberry)",
          shale_db_iter_create(db, NULL, KEY("cherry"), KEY("elderberry"), &it, &err), err);
    scan(it, "bounded", 0);
    shale_db_iter_destroy(it);

    err = NULL;
    check("close", shale_db_close(db, &err), err);
    if (failures != 0) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("db example: ok\n");
    return 0;
}
