//! Digest collisions are resolved by the full key: with the index keeping 3 bits of each
//! digest (8 digests for hundreds of keys), stores, overwrites and deletes in random order
//! still give every key its own value, before and after a reopen, and exist tells each key's
//! presence.

mod common;

use std::collections::HashMap;

use common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shale_hash::{HashOptions, StoreMode};

#[test]
fn keys_sharing_digests_keep_their_own_values() {
    each_mode(|| {
        let d = sim(4, 11);
        let opts = HashOptions { digest_bits: 3, ..small_options() };
        let mut store = open(&d, &opts);
        let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
        let mut rng = SmallRng::seed_from_u64(11);
        for step in 0..1500u64 {
            let key = format!("key-{}", rng.gen_range(0..200)).into_bytes();
            if rng.gen_bool(0.2) {
                assert_eq!(
                    store.delete(&key).unwrap(),
                    model.remove(&key).is_some(),
                    "step {step}"
                );
            } else {
                let v = value(&key, step, rng.gen_range(0..64));
                store.store(&key, &v, StoreMode::Overwrite).unwrap();
                model.insert(key, v);
            }
            if step % 500 == 499 {
                drop(store);
                store = open(&d, &opts);
            }
        }
        for i in 0..200 {
            let key = format!("key-{i}").into_bytes();
            assert_eq!(store.retrieve(&key).unwrap(), model.get(&key).cloned(), "key-{i}");
        }
        assert_eq!(store.stats().keys as usize, model.len());
        // Exist, one key at a time (its record read on the caller's thread where the digest
        // entry may be another key's) and all at once (past a few keys the worker reads).
        let keys: Vec<Vec<u8>> = (0..200).map(|i| format!("key-{i}").into_bytes()).collect();
        for key in &keys {
            let got = store.exist(&[key]).unwrap()[0] & 1 == 1;
            assert_eq!(got, model.contains_key(key), "{}", String::from_utf8_lossy(key));
        }
        let all: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let bits = store.exist(&all).unwrap();
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(bits[i / 8] >> (i % 8) & 1 == 1, model.contains_key(key), "key-{i}");
        }
    });
}
