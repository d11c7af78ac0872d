//! Garbage collection: segments whose records were mostly overwritten or deleted are
//! collected, their live records copied and counted apart from the user's writes, and the
//! store stays equal to a model through collections, reopens and power cuts:
//! - an overwrite-heavy run on small segments keeps the volume bounded;
//! - a deleted key stays deleted when the segment holding its tombstone is collected while an
//!   older segment still holds a store of it;
//! - a power cut after every device write of a collecting run recovers an acknowledged prefix;
//! - a failed read of a victim (read on the worker's queue, beside the writes) stops the store
//!   and loses nothing it acknowledged;
//! - victims larger than a turn's scan (`GC_SCAN_PAGES`) and than a read's chunk, read a chunk
//!   at a time and scanned over several turns while writers store and delete their keys,
//!   lose nothing, before and after a reopen.

mod common;

use std::collections::BTreeMap;

use common::{each_mode, value};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shale_hash::{Error, GC_SCAN_PAGES, HashOptions, HashStore, SEGMENT_BYTES_MIN, StoreMode};
use shale_io::{Fault, FaultPlan, OpKind, SimDevice};

/// 64 KiB segments (16 pages), so a few hundred writes fill several.
fn tiny() -> HashOptions {
    HashOptions {
        segment_bytes: SEGMENT_BYTES_MIN,
        version_log_bytes: 64 << 10,
        index: common::mode(),
        ..HashOptions::default()
    }
}

fn sim(seed: u64) -> SimDevice {
    SimDevice::new((2 << 20) + 96 * SEGMENT_BYTES_MIN, 4096, seed).unwrap()
}

fn open(d: &SimDevice) -> HashStore {
    HashStore::open_device(std::sync::Arc::new(d.clone()), tiny()).expect("open")
}

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:03}").into_bytes()
}

fn check(store: &HashStore, model: &BTreeMap<Vec<u8>, Vec<u8>>, keys: u32, what: &str) {
    for i in 0..keys {
        assert_eq!(
            store.retrieve(&key(i)).unwrap().as_ref(),
            model.get(&key(i)),
            "{what}: key {i}"
        );
    }
    assert_eq!(store.stats().keys as usize, model.len(), "{what}");
}

#[test]
fn overwrites_on_small_segments_are_collected_and_nothing_is_lost() {
    each_mode(|| {
        let d = sim(41);
        let mut store = open(&d);
        let mut model = BTreeMap::new();
        let mut rng = SmallRng::seed_from_u64(41);
        let (mut freed, mut copied) = (0, 0);
        for step in 0..3000u64 {
            let k = key(rng.gen_range(0..40));
            if rng.gen_bool(0.1) {
                assert_eq!(store.delete(&k).unwrap(), model.remove(&k).is_some(), "step {step}");
            } else {
                let v = value(&k, step, rng.gen_range(0..3000));
                store.store(&k, &v, StoreMode::Overwrite).unwrap();
                model.insert(k, v);
            }
            if step % 1000 == 999 {
                check(&store, &model, 40, &format!("before reopen at step {step}"));
                let s = store.stats();
                assert!(s.gc_bytes_written > 0 || s.gc_records_copied == 0);
                freed += s.segments_freed;
                copied += s.gc_records_copied;
                drop(store);
                store = open(&d);
                check(&store, &model, 40, &format!("after reopen at step {step}"));
            }
        }
        let s = store.stats();
        assert!(freed > 10 && copied > 0, "{freed} segments freed, {copied} records copied");
        // 3000 writes of up to 3 KB would fill hundreds of 64 KiB segments; collected, the
        // live data (40 keys) needs a handful.
        assert!(s.segments < 30, "{} segments live after collection", s.segments);
    });
}

#[test]
fn a_collected_tombstone_keeps_its_key_deleted() {
    each_mode(|| {
        let d = sim(42);
        let store = open(&d);
        // Segment 1 (16 pages, a page a store): the key, among 15 keys that stay live, so it is
        // never collected.
        store.store(b"doomed", b"old value", StoreMode::Overwrite).unwrap();
        for i in 0..15 {
            store.store(&key(i), &[1; 3000], StoreMode::Overwrite).unwrap();
        }
        // Segment 2: the tombstone, among writes that are overwritten at once (garbage), so it is
        // collected while segment 1 still holds the store it hides.
        assert!(store.delete(b"doomed").unwrap());
        for round in 0..60u32 {
            store.store(b"churn", &[round as u8; 3000], StoreMode::Overwrite).unwrap();
        }
        let s = store.stats();
        assert!(s.segments_freed > 0, "{s:?}");
        assert_eq!(store.retrieve(b"doomed").unwrap(), None);
        drop(store);
        let store = open(&d);
        assert_eq!(store.retrieve(b"doomed").unwrap(), None, "the tombstone outlived its segment");
        for i in 0..15 {
            assert_eq!(store.retrieve(&key(i)).unwrap(), Some(vec![1; 3000]));
        }
    });
}

#[test]
fn every_crash_point_of_a_collecting_run_recovers_an_acknowledged_prefix() {
    each_mode(|| {
        let d = sim(43);
        let (stats, images) = common::every_crash_point_of_a_scripted_run(&d, &tiny(), 43);
        assert!(stats.segments_freed > 3, "{stats:?}");
        println!("{images} crash images of a collecting run recovered and checked");
    });
}

#[test]
fn a_failed_read_of_a_victim_stops_the_store_and_loses_nothing() {
    // The index in memory: the only reads are confirmations (of overwrites) and victims.
    let d = sim(43);
    let mut model = BTreeMap::new();
    {
        // Garbage, with collection off: 40 keys written over and over.
        let o = HashOptions { gc_live_ratio: 0.0, ..tiny() };
        let store = HashStore::open_device(std::sync::Arc::new(d.clone()), o).expect("open");
        for step in 0..480u64 {
            let k = key((step % 40) as u32);
            let v = value(&k, step, 2000);
            store.store(&k, &v, StoreMode::Overwrite).unwrap();
            model.insert(k, v);
        }
    }
    // Reopened with collection on (recovery's reads done), and from here every read fails.
    // New keys need no read (the index proves them absent), so the first read is
    // collection's, of a victim, which its first look finds.
    let store = open(&d);
    d.set_faults(FaultPlan { faults: vec![Fault::Eio { op: OpKind::Read, nth: 1, sticky: true }] });
    let mut stopped = None;
    for i in 0..200u64 {
        let k = format!("new-{i:05}").into_bytes();
        let v = value(&k, i, 2000);
        match store.store(&k, &v, StoreMode::Overwrite) {
            Ok(()) => {
                model.insert(k, v);
            }
            Err(e) => {
                stopped = Some(e);
                break;
            }
        }
    }
    let e = stopped.expect("a victim was read, and its failed read stopped the store");
    assert!(matches!(&e, Error::Stopped(why) if why.contains("read")), "{e:?}");
    drop(store);
    // The device reads again: everything acknowledged is there.
    d.set_faults(FaultPlan::default());
    let store = open(&d);
    for (k, v) in &model {
        assert_eq!(store.retrieve(k).unwrap().as_ref(), Some(v));
    }
    assert_eq!(store.stats().keys as usize, model.len());
}

#[test]
fn victims_scanned_over_several_turns_beside_writers_lose_nothing() {
    // Segments of twice a turn's scan, so every victim is scanned in at least two slices,
    // with the writers' batches built and answered between them.
    let segment_pages = 2 * GC_SCAN_PAGES;
    let opts = HashOptions {
        segment_bytes: u64::from(segment_pages) * 4096,
        index: common::mode(),
        ..HashOptions::default()
    };
    each_mode(|| {
        let opts = HashOptions { index: common::mode(), ..opts.clone() };
        let d = SimDevice::new(64 << 20, 4096, 44).unwrap();
        let store = HashStore::open_device(std::sync::Arc::new(d.clone()), opts.clone()).unwrap();
        let (writers, keys) = (4u32, 16u32);
        let key = |w: u32, i: u32| format!("w{w}-key-{i:02}").into_bytes();
        let models: Vec<BTreeMap<Vec<u8>, Vec<u8>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..writers)
                .map(|w| {
                    let store = &store;
                    scope.spawn(move || {
                        let mut rng = SmallRng::seed_from_u64(u64::from(w));
                        let mut model = BTreeMap::new();
                        for step in 0..1500u64 {
                            let k = key(w, rng.gen_range(0..keys));
                            if rng.gen_bool(0.1) {
                                let had = model.remove(&k).is_some();
                                assert_eq!(
                                    store.delete(&k).unwrap(),
                                    had,
                                    "writer {w} step {step}"
                                );
                            } else {
                                let v = value(&k, step, rng.gen_range(2000..3000));
                                store.store(&k, &v, StoreMode::Overwrite).unwrap();
                                model.insert(k, v);
                            }
                        }
                        model
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let s = store.stats();
        assert!(s.segments_freed >= 2 && s.gc_records_copied > 0, "{s:?}");
        let check_all = |store: &HashStore, what: &str| {
            for (w, model) in models.iter().enumerate() {
                for i in 0..keys {
                    let k = key(w as u32, i);
                    assert_eq!(
                        store.retrieve(&k).unwrap().as_ref(),
                        model.get(&k),
                        "{what}: {k:?}"
                    );
                }
            }
        };
        check_all(&store, "before reopen");
        drop(store);
        let store = HashStore::open_device(std::sync::Arc::new(d.clone()), opts.clone()).unwrap();
        check_all(&store, "after reopen");
    });
}
