//! A batch's last, partial page carried into the next batch while writes stream in
//! (`crates/hash/src/log.rs`, module comment): the log then writes each page once, full, where
//! padding every batch's last page cost up to a page a batch; and a crash between the two
//! writes loses only the records ending in the carried page, never acknowledged, even once
//! work goes on and a later segment seals the one that ends in the middle of a record.

mod common;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shale_hash::{HashStore, StoreMode};
use shale_io::{Damage, Profile, SimDevice, ThrottledDevice};

/// Stores `n` values of `len` bytes under distinct keys, `depth` in flight: a new store is
/// submitted as soon as the oldest is acknowledged.
fn stream(store: &HashStore, n: u32, len: usize, depth: usize) {
    let mut window = VecDeque::new();
    for i in 0..n {
        let key = format!("key-{i:06}").into_bytes();
        let v = value(&key, 1, len);
        window.push_back(store.submit_store(&key, &v, StoreMode::Overwrite).unwrap());
        if window.len() >= depth {
            window.pop_front().unwrap().wait().unwrap();
        }
    }
    for t in window {
        t.wait().unwrap();
    }
}

/// 5,000 stores of 4 KiB streamed 32 at a time, on a device that writes at once (memory)
/// and on an NVMe-like one (80 us a request, where the callers a batch answers write again
/// while the next is written).
#[test]
fn streamed_stores_write_each_page_once_full() {
    each_mode(|| {
        for nvme in [false, true] {
            let d = sim(8, 1);
            let dev: shale_io::DeviceRef = if nvme {
                let profile = Profile::named("nvme").unwrap();
                Arc::new(ThrottledDevice::new(device(&d), profile).unwrap())
            } else {
                device(&d)
            };
            let store = HashStore::open_device(dev, small_options()).unwrap();
            stream(&store, 5000, 4096, 32);
            let s = store.stats();
            // A 4,120-byte record (14-byte header, 10-byte key, 4 KiB value) with its
            // fragment headers fills 1.015 pages of 4,068 payload bytes: 1.013 of the key and
            // value bytes. Padding each batch's last page instead cost 1.030 (memory) and
            // 1.066 (NVMe-like) here. On memory the callers race the worker, and how often a
            // carried page waits out its linger varies with the machine's load (1.012 to
            // 1.027 measured on 2 busy cores), so only the NVMe-like figure is held to it.
            let framing = s.log_bytes_written as f64 / s.user_bytes as f64;
            println!("nvme {nvme}: framing {framing:.4}, {s:?}");
            assert!(s.batch_tails_carried > 0, "{s:?}");
            if nvme {
                assert!(framing < 1.02, "log bytes / user bytes {framing:.4}: {s:?}");
            }
            // Every value reads back, the carried ones included, and after a reopen.
            for i in (0..5000).step_by(7) {
                let key = format!("key-{i:06}").into_bytes();
                assert_eq!(store.retrieve(&key).unwrap(), Some(value(&key, 1, 4096)), "key {i}");
            }
            drop(store);
            let store = open(&d, &small_options());
            assert_eq!(store.stats().keys, 5000);
        }
    });
}

/// A lone store (nothing streaming in) is written at once, whole: no carried page waits
/// for a write that may never come.
#[test]
fn a_lone_store_carries_nothing() {
    each_mode(|| {
        let d = sim(2, 2);
        let store = open(&d, &small_options());
        for i in 0..20u32 {
            let key = format!("key-{i:06}").into_bytes();
            store.store(&key, &value(&key, 1, 5000), StoreMode::Overwrite).unwrap();
        }
        let s = store.stats();
        assert_eq!(s.batch_tails_carried, 0, "{s:?}");
        assert_eq!(s.batches, 20, "{s:?}");
    });
}

type State = BTreeMap<Vec<u8>, Vec<u8>>;
/// Waits for a submitted store or delete.
type Wait = Box<dyn FnOnce() -> Result<(), shale_hash::Error>>;

/// Power cut after every device write of a streamed run of stores and deletes whose records
/// span pages (1 to 6,000-byte values, 8 in flight): each image opens to the state after a
/// prefix of the submissions that holds every acknowledged one; then a store goes to a new
/// segment (sealing the recovered one, possibly in the middle of a record that lost its
/// tail), and a reopen keeps everything.
#[test]
fn every_crash_point_of_streamed_writes_recovers_an_acknowledged_prefix() {
    each_mode(|| {
        let d = sim(4, 3);
        let opts = small_options();
        // Each write takes 300 us, so that the submissions of a window meet a batch in flight
        // and the next batch holds several of them (and may carry), however busy the machine.
        let slow = Profile {
            name: "slow".into(),
            bandwidth_bytes_per_s: 1 << 40,
            iops: 1 << 30,
            latency: Duration::from_micros(300),
        };
        let throttled = Arc::new(ThrottledDevice::new(device(&d), slow).unwrap());
        let store = HashStore::open_device(throttled, opts.clone()).unwrap();
        let mut rng = SmallRng::seed_from_u64(3);
        let key = |i: u32| format!("key-{i:02}").into_bytes();
        let mut state = State::new();
        let mut states = vec![state.clone()];
        let (mut began, mut acked) = (Vec::new(), Vec::new());
        let mut window: VecDeque<Wait> = VecDeque::new();
        let ops = 90;
        for n in 0..ops {
            began.push(d.writes());
            let k = key(rng.gen_range(0..16));
            let done = if rng.gen_bool(0.15) {
                state.remove(&k);
                let t = store.submit_delete(&k).unwrap();
                Box::new(move || t.wait().map(|_| ())) as Wait
            } else {
                let v = value(&k, n, rng.gen_range(1..6000));
                state.insert(k.clone(), v.clone());
                let t = store.submit_store(&k, &v, StoreMode::Overwrite).unwrap();
                Box::new(move || t.wait())
            };
            states.push(state.clone());
            window.push_back(done);
            if window.len() >= 8 {
                window.pop_front().unwrap()().unwrap();
                acked.push(d.writes());
            }
        }
        for done in window {
            done().unwrap();
            acked.push(d.writes());
        }
        let carried = store.stats().batch_tails_carried;
        println!("{carried} batch tails carried");
        assert!(carried > 0, "no batch tail carried: the scenario does not test the carry");
        drop(store);
        let mut images = 0;
        for k in 0..=d.writes() {
            // Acknowledged by write k (as observed: each op's wait returned after it).
            let lo = acked.iter().filter(|&&w| w <= k).count();
            let hi = began.iter().filter(|&&w| w < k).count().max(lo);
            for damage in [Damage::Lose, Damage::Keep, Damage::TornLast { seed: k, torn_unit: 512 }]
            {
                let crashed = SimDevice::from_image(d.crash_image(k, damage), 4096, k).unwrap();
                let store = HashStore::open_device(device(&crashed), opts.clone())
                    .unwrap_or_else(|e| panic!("write {k} {damage:?}: open: {e}"));
                let got: State = (0..16)
                    .filter_map(|i| store.retrieve(&key(i)).unwrap().map(|v| (key(i), v)))
                    .collect();
                assert!(
                    (lo..=hi).any(|p| states[p] == got),
                    "write {k} {damage:?}: not the state after any of ops {lo}..={hi}"
                );
                store.store(b"after", b"crash", StoreMode::Overwrite).unwrap();
                drop(store);
                let again = HashStore::open_device(device(&crashed), opts.clone())
                    .unwrap_or_else(|e| panic!("write {k} {damage:?}: reopen: {e}"));
                assert_eq!(again.retrieve(b"after").unwrap(), Some(b"crash".to_vec()));
                let kept: State = (0..16)
                    .filter_map(|i| again.retrieve(&key(i)).unwrap().map(|v| (key(i), v)))
                    .collect();
                assert_eq!(kept, got, "write {k} {damage:?}: the reopen");
                images += 1;
            }
        }
        println!("{images} crash images of streamed writes recovered and checked");
    });
}
