//! Index checkpoints: an open loads the newest checkpoint and replays only the log written
//! after it, and the store equals a model through checkpoints, collections, reopens and power
//! cuts; a damaged checkpoint is Corruption, never a wrong index.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::value;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shale_hash::{Error, HashOptions, HashStore, SEGMENT_BYTES_MIN, StoreMode};
use shale_io::SimDevice;

/// 64 KiB segments, a checkpoint every 128 KiB of log: a fixed cadence (no scaling by the
/// checkpoint's size), which these scenarios are sized for.
fn opts() -> HashOptions {
    HashOptions {
        segment_bytes: SEGMENT_BYTES_MIN,
        version_log_bytes: 64 << 10,
        checkpoint_bytes: 128 << 10,
        checkpoint_log_ratio: 0,
        index: common::mode(),
        ..HashOptions::default()
    }
}

fn sim(seed: u64) -> SimDevice {
    SimDevice::new((2 << 20) + 96 * SEGMENT_BYTES_MIN, 4096, seed).unwrap()
}

fn open(d: &SimDevice) -> HashStore {
    HashStore::open_device(Arc::new(d.clone()), opts()).expect("open")
}

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:03}").into_bytes()
}

fn contents(store: &HashStore, keys: u32) -> BTreeMap<Vec<u8>, Vec<u8>> {
    (0..keys).filter_map(|i| store.retrieve(&key(i)).unwrap().map(|v| (key(i), v))).collect()
}

#[test]
fn an_open_loads_the_checkpoint_and_replays_only_the_log_after_it() {
    common::each_mode(|| {
        let d = sim(51);
        let mut store = open(&d);
        let mut model = BTreeMap::new();
        let mut rng = SmallRng::seed_from_u64(51);
        let mut checkpoints = 0;
        for step in 0..2400u64 {
            let k = key(rng.gen_range(0..200));
            if rng.gen_bool(0.1) {
                store.delete(&k).unwrap();
                model.remove(&k);
            } else {
                let v = value(&k, step, rng.gen_range(0..1500));
                store.store(&k, &v, StoreMode::Overwrite).unwrap();
                model.insert(k, v);
            }
            if step % 600 == 599 {
                checkpoints += store.stats().checkpoints;
                drop(store);
                store = open(&d);
                let s = store.stats();
                assert!(s.checkpoint_entries_loaded > 0, "step {step}: {s:?}");
                assert!(
                    s.recovered_records < 600,
                    "step {step}: replayed {} records",
                    s.recovered_records
                );
                assert_eq!(contents(&store, 200), model, "step {step}");
            }
        }
        assert!(checkpoints >= 4, "{checkpoints} checkpoints");
    });
}

#[test]
fn a_damaged_checkpoint_is_corruption() {
    common::each_mode(|| {
        let d = sim(52);
        let store = open(&d);
        for i in 0..400u32 {
            store.store(&key(i % 150), &[i as u8; 700], StoreMode::Overwrite).unwrap();
        }
        assert!(store.stats().checkpoints > 0);
        drop(store);
        // Find the newest checkpoint's first page: a page of the slot area that is neither a
        // segment's nor empty, found by flipping candidates until an open says "checkpoint".
        let image = d.current_image();
        let slot_area = 2 << 20;
        let mut found = false;
        for page in (0..(image.len() - slot_area) / 4096).map(|p| slot_area + p * 4096) {
            if image[page..page + 4096].iter().all(|&b| b == 0) {
                continue;
            }
            let mut bad = image.clone();
            bad[page + 100] ^= 0x04;
            let dev = SimDevice::from_image(bad, 4096, 0).unwrap();
            match HashStore::open_device(Arc::new(dev), opts()) {
                Err(Error::Corruption { what, .. }) if what.contains("checkpoint") => {
                    found = true;
                    break;
                }
                _ => continue,
            }
        }
        assert!(found, "no flipped byte was reported as a damaged checkpoint");
    });
}

#[test]
fn every_crash_point_with_checkpoints_and_collection_recovers_an_acknowledged_prefix() {
    common::each_mode(|| {
        let d = sim(53);
        let (stats, images) = common::every_crash_point_of_a_scripted_run(&d, &opts(), 53);
        assert!(stats.checkpoints > 2 && stats.segments_freed > 2, "{stats:?}");
        println!("{images} crash images with checkpoints recovered and checked");
    });
}

/// With `checkpoint_log_ratio`, the log written between two checkpoints is at least the ratio
/// times what the earlier one wrote, so checkpoints cost at most 1/ratio of the log however
/// large the index is; at a fixed 16 KiB interval the same run writes more checkpoint than log.
///
/// Garbage collection is off, on a device that holds the whole log: its copies go on in the
/// worker's thread after a store returns (its victim's read is asynchronous), so with it a
/// store could be followed by two checkpoints before the next one looks, and the pairs of
/// (log, checkpoint) bytes seen here would not be consecutive checkpoints'.
#[test]
fn checkpoints_wait_for_their_ratio_of_log() {
    common::each_mode(|| {
        let run = |ratio: u32| {
            let o = HashOptions {
                checkpoint_bytes: 16 << 10,
                checkpoint_log_ratio: ratio,
                gc_live_ratio: 0.0,
                ..opts()
            };
            // 3,000 stores of a page each, and the fixed interval's checkpoints.
            let device = SimDevice::new((2 << 20) + 512 * SEGMENT_BYTES_MIN, 4096, 54).unwrap();
            let store = HashStore::open_device(Arc::new(device), o).expect("open");
            let mut rng = SmallRng::seed_from_u64(54);
            // (log bytes, checkpoint bytes) when each checkpoint was first seen.
            let mut seen: Vec<(u64, u64)> = Vec::new();
            let mut last_checkpoints = 0;
            for step in 0..3_000u64 {
                let k = key(rng.gen_range(0..1000));
                let v = value(&k, step, rng.gen_range(100..300));
                store.store(&k, &v, StoreMode::Overwrite).unwrap();
                let s = store.stats();
                if s.checkpoints > last_checkpoints {
                    assert_eq!(s.checkpoints, last_checkpoints + 1, "one checkpoint per store");
                    last_checkpoints = s.checkpoints;
                    seen.push((
                        s.log_bytes_written + s.gc_bytes_written,
                        s.checkpoint_bytes_written,
                    ));
                }
            }
            // Each store is a batch of its own, one or two pages of log.
            (seen, 2 * 4096, store.stats())
        };

        let (seen, slack, s) = run(8);
        assert!(seen.len() >= 2, "{} checkpoints: {s:?}", seen.len());
        let mut written_before = 0;
        for pair in seen.windows(2) {
            let ((log0, written0), (log1, _)) = (pair[0], pair[1]);
            let cost = written0 - written_before;
            written_before = written0;
            // A checkpoint may be seen one store late: a batch more or less of log between.
            assert!(
                log1 - log0 + slack >= 8 * cost,
                "{} bytes of log after a checkpoint of {cost}: {seen:?}",
                log1 - log0
            );
        }
        // Every checkpoint but the newest was paid for by 8 times its bytes of log.
        let log = s.log_bytes_written + s.gc_bytes_written;
        let all_but_newest = seen[seen.len() - 2].1;
        assert!(all_but_newest <= log / 8, "{all_but_newest} checkpoint bytes for {log} of log");

        // The fixed interval: checkpoints every 16 KiB of log, each of the whole index.
        let (_, _, fixed) = run(0);
        assert!(
            fixed.checkpoint_bytes_written > 4 * s.checkpoint_bytes_written,
            "fixed {} vs scaled {}",
            fixed.checkpoint_bytes_written,
            s.checkpoint_bytes_written
        );
    });
}
