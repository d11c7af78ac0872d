//! Digest collisions are resolved by the full key: with the index keeping 3 bits of each
//! digest (8 digests for hundreds of keys), stores, overwrites and deletes in random order
//! still give every key its own value, before and after a reopen.

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
    });
}
