/*
 * The kvs API of shale's hash engine from C: open a store in the directory argv[1],
 * store, retrieve (whole, from an offset, into a buffer too small), exist, delete, then
 * submit requests asynchronously and reap their completions through poll(2) on the
 * store's completion fd; then a set of two stores (argv[1]-a and argv[1]-b) used as one,
 * reopened in its order. Prints what it sees; exits 0 when every step went as expected.
 *
 *   cc -I crates/capi/include kvs_example.c -L target/release -lshale -o kvs_example
 *   LD_LIBRARY_PATH=target/release ./kvs_example /tmp/kvs-store
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shale.h"

#define KEY(s) (const uint8_t *)(s), strlen(s)

static int failures = 0;

/* Checks that a call returned `want`; reports and frees its error either way. */
static void expect(const char *what, int got, int want, shale_error *err) {
    if (got != want) {
        fprintf(stderr, "FAIL %s: %s (%s), wanted %s\n", what, shale_status_name(got),
                shale_error_message(err), shale_status_name(want));
        failures++;
    } else if (err != NULL) {
        printf("%s: %s: %s\n", what, shale_status_name(got), shale_error_message(err));
    }
    shale_error_free(err);
}

/* Reaps completions until `want` have come, waiting in poll(2) on the completion fd. */
static size_t drain(shale_kvs_store *store, size_t want, int *ok, int *not_found) {
    struct pollfd pfd = {.fd = shale_kvs_completion_fd(store), .events = POLLIN};
    size_t got = 0;
    while (got < want) {
        if (poll(&pfd, 1, 5000) <= 0) {
            fprintf(stderr, "FAIL no completion within 5 s\n");
            failures++;
            return got;
        }
        shale_kvs_event events[8];
        size_t n = shale_kvs_get_ioevents(store, events, 8);
        for (size_t i = 0; i < n; i++) {
            shale_kvs_event *ev = &events[i];
            if (ev->status == SHALE_OK) {
                (*ok)++;
            } else if (ev->status == SHALE_KEY_NOT_FOUND) {
                (*not_found)++;
            } else {
                fprintf(stderr, "FAIL completion %llu: %s\n", (unsigned long long)ev->tag,
                        shale_error_message(ev->error));
                failures++;
            }
            if (ev->op == SHALE_KVS_OP_RETRIEVE && ev->value != NULL) {
                printf("async retrieve tag %llu: %.*s\n", (unsigned long long)ev->tag,
                       (int)ev->value_len, (const char *)ev->value);
            }
            if (ev->op == SHALE_KVS_OP_EXIST) {
                printf("async exist tag %llu: bits 0x%02x\n", (unsigned long long)ev->tag,
                       ev->value[0]);
            }
            if (ev->op == SHALE_KVS_OP_DELETE) {
                printf("async delete tag %llu: existed %d\n", (unsigned long long)ev->tag,
                       ev->existed);
            }
            shale_kvs_free_value(ev->value);
            shale_error_free(ev->error);
        }
        got += n;
    }
    return got;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIRECTORY\n", argv[0]);
        return 2;
    }
    shale_kvs_options opts = shale_kvs_options_default();
    opts.queue_depth = 4;
    shale_kvs_store *store = NULL;
    shale_error *err = NULL;
    int rc = shale_kvs_open(argv[1], &opts, &store, &err);
    if (rc != SHALE_OK) {
        fprintf(stderr, "open: %s\n", shale_error_message(err));
        shale_error_free(err);
        return 1;
    }

    /* Synchronous calls: each store is durable when it returns. */
    err = NULL;
    rc = shale_kvs_store_tuple(store, KEY("user:1"), KEY("ada lovelace"),
                               SHALE_KVS_STORE_OVERWRITE, &err);
    expect("store user:1", rc, SHALE_OK, err);
    err = NULL;
    rc = shale_kvs_store_tuple(store, KEY("user:1"), KEY("bob"), SHALE_KVS_STORE_NO_OVERWRITE,
                               &err);
    expect("store user:1 without overwrite", rc, SHALE_KEY_EXISTS, err);

    char buf[64];
    size_t len = 0;
    err = NULL;
    rc = shale_kvs_retrieve_tuple(store, KEY("user:1"), 0, (uint8_t *)buf, sizeof buf, &len,
                                  &err);
    expect("retrieve user:1", rc, SHALE_OK, err);
    printf("retrieve user:1: %.*s\n", (int)len, buf);

    /* A buffer too small says how big it must be; from offset 4 on, 8 bytes are left. */
    char small[4];
    err = NULL;
    rc = shale_kvs_retrieve_tuple(store, KEY("user:1"), 4, (uint8_t *)small, sizeof small, &len,
                                  &err);
    expect("retrieve user:1 from 4 into 4 bytes", rc, SHALE_BUFFER_TOO_SMALL, err);
    printf("buffer too small: %zu bytes needed\n", len);
    uint8_t *big = malloc(len);
    err = NULL;
    rc = shale_kvs_retrieve_tuple(store, KEY("user:1"), 4, big, len, &len, &err);
    expect("retrieve user:1 from 4", rc, SHALE_OK, err);
    printf("retrieve user:1 from 4: %.*s\n", (int)len, (const char *)big);
    free(big);

    const uint8_t *keys[] = {(const uint8_t *)"user:1", (const uint8_t *)"user:2"};
    size_t key_lens[] = {6, 6};
    uint8_t bits = 0;
    err = NULL;
    rc = shale_kvs_exist_tuples(store, keys, key_lens, 2, &bits, 1, &err);
    expect("exist user:1 user:2", rc, SHALE_OK, err);
    printf("exist user:1 user:2: bits 0x%02x\n", bits);

    bool existed = false;
    err = NULL;
    rc = shale_kvs_delete_tuple(store, KEY("user:1"), &existed, &err);
    expect("delete user:1", rc, SHALE_OK, err);
    printf("delete user:1: existed %d\n", existed);
    err = NULL;
    rc = shale_kvs_retrieve_tuple(store, KEY("user:1"), 0, (uint8_t *)buf, sizeof buf, &len,
                                  &err);
    expect("retrieve deleted user:1", rc, SHALE_KEY_NOT_FOUND, err);
    err = NULL;
    rc = shale_kvs_store_tuple(store, KEY("k"), KEY("v"), SHALE_KVS_STORE_OVERWRITE, &err);
    expect("store a 1-byte key", rc, SHALE_KEY_LENGTH, err);

    /* Asynchronous calls: submit, and when the queue is full (queue_depth 4), reap. */
    int ok = 0, not_found = 0;
    size_t outstanding = 0, busy = 0;
    for (uint64_t tag = 0; tag < 16; tag++) {
        char key[16], value[16];
        snprintf(key, sizeof key, "item:%02llu", (unsigned long long)tag);
        snprintf(value, sizeof value, "value-%llu", (unsigned long long)tag);
        for (;;) {
            rc = shale_kvs_submit_store(store, KEY(key), KEY(value), SHALE_KVS_STORE_OVERWRITE,
                                        tag, NULL);
            if (rc != SHALE_BUSY) {
                break;
            }
            busy++;
            outstanding -= drain(store, 1, &ok, &not_found);
        }
        expect("submit store", rc, SHALE_OK, NULL);
        outstanding++;
    }
    drain(store, outstanding, &ok, &not_found);
    printf("async stores: %d ok\n", ok);

    ok = 0;
    expect("submit retrieve item:07",
           shale_kvs_submit_retrieve(store, KEY("item:07"), 100, NULL), SHALE_OK, NULL);
    expect("submit retrieve absent",
           shale_kvs_submit_retrieve(store, KEY("item:99"), 101, NULL), SHALE_OK, NULL);
    const uint8_t *items[] = {(const uint8_t *)"item:00", (const uint8_t *)"item:99",
                              (const uint8_t *)"item:15"};
    size_t item_lens[] = {7, 7, 7};
    expect("submit exist", shale_kvs_submit_exist(store, items, item_lens, 3, 102, NULL),
           SHALE_OK, NULL);
    drain(store, 3, &ok, &not_found);
    expect("submit delete item:00", shale_kvs_submit_delete(store, KEY("item:00"), 103, NULL),
           SHALE_OK, NULL);
    drain(store, 1, &ok, &not_found);
    printf("async: %d ok, %d not found\n", ok, not_found);
    if (busy > 0) {
        printf("async: busy seen, resubmitted\n");
    }

    /* Iterate the keys beginning with "item", with their values, 4 at a time. */
    struct shale_kvs_iterator *it = NULL;
    const uint8_t prefix[4] = {'i', 't', 'e', 'm'};
    const uint8_t mask[4] = {0xff, 0xff, 0xff, 0xff};
    expect("open iterator", shale_kvs_open_iterator(store, prefix, mask, true, &it, NULL),
           SHALE_OK, NULL);
    struct shale_kvs_entry batch[4];
    size_t n = 0, found = 0, value_bytes = 0;
    do {
        expect("iterator next", shale_kvs_iterator_next(it, batch, 4, &n, NULL), SHALE_OK,
               NULL);
        for (size_t i = 0; i < n; i++) {
            if (batch[i].key_len != 7 || memcmp(batch[i].key, "item:", 5) != 0) {
                failures++;
            }
            value_bytes += batch[i].value_len;
        }
        found += n;
        shale_kvs_free_entries(batch, n);
    } while (n > 0);
    shale_kvs_iterator_close(it);
    printf("iterate item: %zu keys, %zu value bytes\n", found, value_bytes);

    shale_kvs_close(store);

    /* The index in pages on the volume behind a 64 KiB cache, and a 1 MiB value cache: the
       mode is the store's for good, and an open in the other mode is refused. */
    char path_bounded[4096];
    snprintf(path_bounded, sizeof path_bounded, "%s-bounded", argv[1]);
    shale_kvs_options bounded = shale_kvs_options_default();
    bounded.index_mode = SHALE_KVS_INDEX_BOUNDED;
    bounded.index_cache_bytes = 64 << 10;
    bounded.value_cache_bytes = 1 << 20;
    shale_kvs_store *paged = NULL;
    expect("open bounded", shale_kvs_open(path_bounded, &bounded, &paged, NULL), SHALE_OK, NULL);
    if (paged == NULL) {
        return 1;
    }
    for (int i = 0; i < 100; i++) {
        char key[16], value[16];
        snprintf(key, sizeof key, "key:%03d", i);
        snprintf(value, sizeof value, "value-%d", i);
        expect("bounded store",
               shale_kvs_store_tuple(paged, KEY(key), KEY(value), SHALE_KVS_STORE_OVERWRITE,
                                     NULL),
               SHALE_OK, NULL);
    }
    shale_kvs_close(paged);
    shale_kvs_options in_memory = bounded;
    in_memory.index_mode = SHALE_KVS_INDEX_IN_MEMORY;
    paged = NULL;
    expect("open a bounded store in memory",
           shale_kvs_open(path_bounded, &in_memory, &paged, NULL), SHALE_INVALID_ARGUMENT, NULL);
    expect("reopen bounded", shale_kvs_open(path_bounded, &bounded, &paged, NULL), SHALE_OK,
           NULL);
    if (paged == NULL) {
        return 1;
    }
    char got42[16] = {0};
    size_t got42_len = 0;
    for (int read = 0; read < 2; read++) { /* the second from the value cache */
        expect("bounded retrieve",
               shale_kvs_retrieve_tuple(paged, KEY("key:042"), 0, (uint8_t *)got42,
                                        sizeof got42 - 1, &got42_len, NULL),
               SHALE_OK, NULL);
    }
    shale_kvs_close(paged);
    printf("bounded index: key:042=%s, in-memory open refused\n", got42);

    /* Two stores used as one: each key goes to the store its hash picks. */
    char path_a[4096], path_b[4096];
    snprintf(path_a, sizeof path_a, "%s-a", argv[1]);
    snprintf(path_b, sizeof path_b, "%s-b", argv[1]);
    const char *set_paths[] = {path_a, path_b};
    for (int round = 0; round < 2; round++) {
        shale_kvs_shards *set = NULL;
        expect("open set", shale_kvs_shards_open(set_paths, 2, NULL, &set, NULL), SHALE_OK, NULL);
        if (set == NULL) {
            return 1;
        }
        if (round == 0) {
            for (int i = 0; i < 40; i++) {
                char key[16], value[16];
                snprintf(key, sizeof key, "set:%02d", i);
                snprintf(value, sizeof value, "v%d", i);
                expect("set store", shale_kvs_shards_store_tuple(set, KEY(key), KEY(value),
                                                                  SHALE_KVS_STORE_OVERWRITE, NULL),
                       SHALE_OK, NULL);
            }
            bool existed = false;
            expect("set delete", shale_kvs_shards_delete_tuple(set, KEY("set:00"), &existed, NULL),
                   SHALE_OK, NULL);
        }
        char got[16] = {0};
        size_t got_len = 0;
        expect("set retrieve",
               shale_kvs_shards_retrieve_tuple(set, KEY("set:17"), 0, (uint8_t *)got,
                                               sizeof got - 1, &got_len, NULL),
               SHALE_OK, NULL);
        struct shale_kvs_iterator *all = NULL;
        const uint8_t set_prefix[4] = {'s', 'e', 't', ':'};
        const uint8_t set_mask[4] = {0xff, 0xff, 0xff, 0xff};
        expect("open set iterator",
               shale_kvs_shards_open_iterator(set, set_prefix, set_mask, false, &all, NULL),
               SHALE_OK, NULL);
        size_t keys = 0;
        do {
            expect("set iterator next", shale_kvs_iterator_next(all, batch, 4, &n, NULL),
                   SHALE_OK, NULL);
            keys += n;
            shale_kvs_free_entries(batch, n);
        } while (n > 0);
        shale_kvs_iterator_close(all);
        printf("set of %zu, round %d: set:17=%s, %zu keys\n", shale_kvs_shards_count(set), round,
               got, keys);
        shale_kvs_shards_close(set);
    }

    if (failures != 0) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("kvs example: ok\n");
    return 0;
}
