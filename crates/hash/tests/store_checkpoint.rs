//! Checkpoints of the hash engine (`HashStore::checkpoint`): a copy taken while writers go
//! on, and while garbage collection moves records, holds one instant of the index: a
//! prefix of each writer's acknowledged stores; a destination that holds anything is
//! refused untouched. (Not the index checkpoints of `checkpoints.rs`.)

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::{Rng, SeedableRng, rngs::StdRng};
use shale_hash::{HashOptions, HashStore, SEGMENT_BYTES_MIN, StoreMode};
use shale_testkit::prefix_writers::{Plan, Writers, check_copy};

/// Small segments, so that overwrites keep garbage collection busy during the copy.
fn options() -> HashOptions {
    HashOptions { segment_bytes: SEGMENT_BYTES_MIN, ..common::small_options() }
}

/// Filler keys (`f.....`) with random values, some deleted; returns what is left.
fn fill(store: &HashStore, seed: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = BTreeMap::new();
    // Submitted 64 at a time: the worker makes each group one durable write.
    for chunk in (0..2_000u32).collect::<Vec<_>>().chunks(64) {
        let mut tickets = Vec::new();
        for i in chunk {
            let key = format!("f{i:06}").into_bytes();
            let value: Vec<u8> = (0..rng.gen_range(1..400)).map(|_| rng.r#gen::<u8>()).collect();
            tickets.push(store.submit_store(&key, &value, StoreMode::Overwrite).unwrap());
            model.insert(key, value);
        }
        for t in tickets {
            t.wait().unwrap();
        }
    }
    let deleted: Vec<u32> = (0..2_000u32).step_by(7).collect();
    for chunk in deleted.chunks(64) {
        let tickets: Vec<_> = chunk
            .iter()
            .map(|i| {
                let key = format!("f{i:06}").into_bytes();
                model.remove(&key);
                store.submit_delete(&key).unwrap()
            })
            .collect();
        for t in tickets {
            assert!(t.wait().unwrap());
        }
    }
    model
}

#[test]
fn a_checkpoint_taken_while_writers_go_on_holds_a_prefix_of_every_writer() {
    common::each_mode(|| {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(HashStore::open(dir.path().join("live"), options()).unwrap());
        let filler = fill(&store, 5);
        let plan = Plan { writers: 4, keys_per_writer: 25, group: 1 };
        let writer_store = store.clone();
        let writers = Writers::start(plan, move |_, group| {
            let (k, v) = &group[0];
            writer_store.store(k, v, StoreMode::Overwrite).unwrap();
            true
        });
        writers.wait_for_acked(60);
        let before = writers.acked();
        let dst = dir.path().join("copy");
        let copied = store.checkpoint(&dst).unwrap();
        let after = writers.started();
        writers.wait_for_acked(after.iter().copied().max().unwrap() + 20);
        writers.stop();

        let copy = HashStore::open(&dst, options()).unwrap();
        let prefixes = check_copy(plan, &before, &after, |k| copy.retrieve(k).unwrap());
        for (k, v) in &filler {
            assert_eq!(copy.retrieve(k).unwrap().as_ref(), Some(v), "filler key {k:?}");
        }
        let writer_keys: u64 = prefixes.iter().map(|&p| p.min(plan.keys_per_writer as u64)).sum();
        assert_eq!(copied, filler.len() as u64 + writer_keys, "keys copied");
        assert_eq!(copy.stats().keys as u64, copied, "and nothing else");
    });
}

#[test]
fn a_destination_that_holds_anything_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let store = HashStore::open(dir.path().join("live"), options()).unwrap();
    store.store(b"key-1", b"v", StoreMode::Overwrite).unwrap();

    let full = dir.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("theirs"), b"keep me").unwrap();
    assert!(store.checkpoint(&full).is_err());
    assert_eq!(std::fs::read(full.join("theirs")).unwrap(), b"keep me");
    assert_eq!(std::fs::read_dir(&full).unwrap().count(), 1);

    let file = dir.path().join("file");
    std::fs::write(&file, b"a file").unwrap();
    assert!(store.checkpoint(&file).is_err());
    assert_eq!(std::fs::read(&file).unwrap(), b"a file");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3, "no staging directory left");

    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert_eq!(store.checkpoint(&empty).unwrap(), 1);
    let copy = HashStore::open(&empty, options()).unwrap();
    assert_eq!(copy.retrieve(b"key-1").unwrap(), Some(b"v".to_vec()));
}
