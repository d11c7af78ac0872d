//! The value cache (`HashOptions::value_cache_bytes`): reads of values stored or read are
//! answered from memory,
//! and no read ever answers a value older than the newest acknowledged store or delete of its
//! key, also when a read is in flight while a store of its key applies, and under evictions.

mod common;

use std::collections::HashMap;

use common::*;
use shale_hash::{HashOptions, StoreMode};

fn cached(bytes: usize) -> HashOptions {
    HashOptions { value_cache_bytes: bytes, ..small_options() }
}

#[test]
fn repeated_reads_are_answered_from_memory() {
    each_mode(|| {
        let d = sim(4, 71);
        let store = open(&d, &cached(1 << 20));
        store.store(b"hot-key", b"hot value", StoreMode::Overwrite).unwrap();
        for _ in 0..10 {
            assert_eq!(store.retrieve(b"hot-key").unwrap().as_deref(), Some(&b"hot value"[..]));
        }
        assert_eq!(store.stats().value_cache_hits, 10, "the store filled the cache");
        let off = open_fresh_without_cache();
        assert_eq!(off.stats().value_cache_hits, 0);
    });
}

fn open_fresh_without_cache() -> shale_hash::HashStore {
    let d = sim(4, 72);
    let store = open(&d, &cached(0));
    store.store(b"key!", b"v", StoreMode::Overwrite).unwrap();
    for _ in 0..5 {
        store.retrieve(b"key!").unwrap();
    }
    store
}

#[test]
fn reads_in_flight_beside_stores_never_bring_an_old_value_back() {
    each_mode(|| {
        let d = sim(8, 73);
        // A small cache: evictions as well as hits.
        let store = open(&d, &cached(8 << 10));
        let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        for round in 0..600u64 {
            let key = format!("key-{:03}", round % 37).into_bytes();
            let new = value(&key, round, 40 + (round as usize * 13) % 200);
            // Reads of the key around a store (or a delete) of it, all in flight together: a
            // read may complete before or after the store applies, and one that read the old
            // record and completes after must not leave it in the cache.
            let before = store.submit_retrieve(&key).unwrap();
            let write_is_delete = round % 11 == 0;
            let (delete, put) = if write_is_delete {
                model.remove(&key);
                (Some(store.submit_delete(&key).unwrap()), None)
            } else {
                model.insert(key.clone(), new.clone());
                (None, Some(store.submit_store(&key, &new, StoreMode::Overwrite).unwrap()))
            };
            let after: Vec<_> = (0..3).map(|_| store.submit_retrieve(&key).unwrap()).collect();
            if let Some(t) = delete {
                t.wait().unwrap();
            }
            if let Some(t) = put {
                t.wait().unwrap();
            }
            before.wait().unwrap();
            for r in after {
                r.wait().unwrap();
            }
            // Every read after the write's answer sees it, repeatedly (the second from the
            // cache when the first filled it).
            for _ in 0..2 {
                assert_eq!(
                    store.retrieve(&key).unwrap(),
                    model.get(&key).cloned(),
                    "round {round}"
                );
            }
        }
        for (k, v) in &model {
            assert_eq!(store.retrieve(k).unwrap().as_ref(), Some(v));
        }
        assert!(store.stats().value_cache_hits > 0);
    });
}
