//! A store over a fast and a capacity volume (SpanDB's tiers):
//! - random writes against a model while the head thread moves the level pointer both ways
//!   and the store is reopened: every read answers as the model does, SSTs live on both
//!   tiers, `check` passes;
//! - a crash at every write of the fast device between an SST written on the capacity volume
//!   and the version that names it: every synced write survives, no capacity slot leaks;
//! - EIO on the capacity device during a compaction stops the store (P5) and loses nothing
//!   acknowledged;
//! - by path: a missing, swapped or foreign capacity volume is refused and nothing is written.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::*;
use shale_io::{Damage, DeviceRef, Fault, FaultPlan, MemoryDevice, OpKind, SimDevice};
use shale_lsm::{Db, Error, Options, WriteOptions};
use shale_space::Tier;

fn tiered_options() -> Options {
    let mut o = small_options();
    o.tiers.head_period_ms = 10;
    o
}

fn check_model(db: &Db, model: &BTreeMap<u16, Vec<u8>>) {
    for n in 0..KEYS {
        assert_eq!(db.get(&key(n)).unwrap().as_ref(), model.get(&n), "key {n}");
    }
    let scanned = scan_state(db, VALUE_MAX).unwrap();
    let expected: State =
        model.iter().map(|(&n, v)| (n, stamp_of(n, v, VALUE_MAX).unwrap())).collect();
    assert_eq!(scanned, expected);
    db.check().unwrap();
}

const KEYS: u16 = 400;
/// Longest filler of the model test's values: 400 keys of about 600 bytes outgrow its
/// 256 KiB of fast volume.
const VALUE_MAX: usize = 1100;

#[test]
fn a_tiered_store_matches_a_model_while_the_pointer_moves() {
    let fast = Arc::new(MemoryDevice::new(DEVICE_BYTES, 4096).unwrap());
    let capacity = Arc::new(MemoryDevice::new(4 * DEVICE_BYTES, 4096).unwrap());
    let mut opts = tiered_options();
    // The writes come in bursts with pauses between them: busy above 100 KB/s, the pointer
    // moves shallower during a burst and deeper during a pause.
    opts.tiers.bandwidth_low = 100_000;
    opts.tiers.bandwidth_high = 100_000;
    let open = || {
        let (f, c): (DeviceRef, DeviceRef) = (fast.clone(), capacity.clone());
        Db::open_tiered_devices(f, c, opts.clone()).unwrap()
    };
    let mut db = open();
    let mut model = BTreeMap::new();
    let (mut deeper, mut shallower, mut on_both) = (0, 0, false);
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for w in 0..6000u32 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let n = (rng % u64::from(KEYS)) as u16;
        if rng % 7 == 0 {
            db.delete(&key(n)).unwrap();
            model.remove(&n);
        } else {
            let v = value(n, (w, 0), VALUE_MAX);
            db.put(&key(n), &v).unwrap();
            model.insert(n, v);
        }
        if w % 400 == 399 {
            // Let the head thread look a few times.
            std::thread::sleep(std::time::Duration::from_millis(30));
            let s = db.stats();
            on_both |= s.tiers.iter().all(|t| t.ssts > 0);
            check_model(&db, &model);
        }
        if w % 2000 == 1999 {
            let s = db.stats();
            deeper += s.level_pointer_deeper;
            shallower += s.level_pointer_shallower;
            drop(db);
            db = open();
            check_model(&db, &model);
        }
    }
    assert!(on_both, "SSTs never lived on both tiers at once");
    assert!(
        deeper > 0 && shallower > 0,
        "the pointer moved {deeper} deeper, {shallower} shallower"
    );
    assert_eq!(db.stats().tiers.len(), 2);
}

/// Synced puts of keys 0..count, each value naming its round.
fn synced_puts(db: &Db, round: u32, count: u16) {
    for n in 0..count {
        let mut b = shale_lsm::WriteBatch::new();
        b.put(&key(n), &value(n, (round, 0), 200));
        db.write(&b, &WriteOptions { sync: true }).unwrap();
    }
}

#[test]
fn a_crash_between_a_capacity_sst_and_its_version_loses_nothing() {
    let fast = Arc::new(SimDevice::new(DEVICE_BYTES, 4096, 1).unwrap());
    let capacity = Arc::new(SimDevice::new(2 * DEVICE_BYTES, 4096, 2).unwrap());
    let mut opts = tiered_options();
    // Every SST on the capacity volume, the pointer fixed there.
    opts.tiers.fast_levels = 0;
    opts.tiers.adaptive = false;
    let db = Db::open_tiered_devices(fast.clone(), capacity.clone(), opts.clone()).unwrap();
    synced_puts(&db, 1, 150);
    let (fast_before, cap_before) = (fast.writes(), capacity.writes());
    db.flush().unwrap();
    let (fast_after, cap_after) = (fast.writes(), capacity.writes());
    assert!(cap_after > cap_before, "the flush wrote its SST on the capacity volume");
    let s = db.stats();
    assert!(s.tiers[0].ssts == 0 && s.tiers[1].ssts > 0, "{:?}", s.tiers);
    drop(db);
    // The SST is durable on the capacity volume before the commit's first write on the fast
    // one: every crash point of the fast device across the flush goes with the capacity
    // device as the flush left it (an SST written that the version may not name yet), and
    // every crash point of the capacity device with the fast device as it was before the
    // flush (an SST written in part).
    let points = (fast_before..=fast_after)
        .map(|k| (k, cap_after))
        .chain((cap_before..cap_after).map(|j| (fast_before, j)));
    let mut images = 0;
    for (k, cap_writes) in points {
        {
            for damage in [Damage::Lose, Damage::Keep] {
                let f = SimDevice::from_image(fast.crash_image(k, damage), 4096, 3).unwrap();
                let c = SimDevice::from_image(capacity.crash_image(cap_writes, damage), 4096, 4)
                    .unwrap();
                let (f, c): (DeviceRef, DeviceRef) = (Arc::new(f), Arc::new(c));
                let db = Db::open_tiered_devices(f, c, opts.clone())
                    .unwrap_or_else(|e| panic!("crash at fast write {k}: {e}"));
                for n in 0..150 {
                    let v = db.get(&key(n)).unwrap();
                    assert_eq!(v, Some(value(n, (1, 0), 200)), "key {n}, crash at {k}");
                }
                // No capacity slot leaked: the capacity volume's live slots are the SSTs'.
                db.check().unwrap();
                let s = db.stats();
                let live = db.volume().tier_slot_usage(Tier::Capacity);
                assert_eq!(live.pending, 0);
                let slot = db.volume().layout().slot_bytes;
                assert_eq!(u64::from(live.live) * slot, s.tiers[1].live_bytes, "crash at {k}");
                images += 1;
            }
        }
    }
    assert!(images >= 8);
}

#[test]
fn eio_on_the_capacity_volume_during_compaction_stops_the_store_without_loss() {
    let fast = Arc::new(SimDevice::new(DEVICE_BYTES, 4096, 5).unwrap());
    let capacity = Arc::new(SimDevice::new(2 * DEVICE_BYTES, 4096, 6).unwrap());
    let mut opts = tiered_options();
    // L0 on the fast volume: only compactions write the capacity volume.
    opts.tiers.fast_levels = 1;
    opts.tiers.adaptive = false;
    opts.level0_file_num_compaction_trigger = 10;
    let db = Db::open_tiered_devices(fast.clone(), capacity.clone(), opts.clone()).unwrap();
    synced_puts(&db, 1, 200);
    db.flush().unwrap();
    synced_puts(&db, 2, 200);
    db.flush().unwrap();
    capacity.set_faults(FaultPlan {
        faults: vec![Fault::Eio { op: OpKind::Write, nth: 1, sticky: true }],
    });
    // A third round lands in L0 on the fast volume, which is fine; compacting it must write
    // the capacity volume, which fails (in the background or in `compact_range`).
    let mut acked = Vec::new();
    for n in 0..200 {
        let mut b = shale_lsm::WriteBatch::new();
        b.put(&key(n), &value(n, (3, 0), 200));
        if db.write(&b, &WriteOptions { sync: true }).is_err() {
            break;
        }
        acked.push(n);
    }
    let compacted = db.compact_range();
    assert!(compacted.is_err(), "a compaction onto a failing capacity volume succeeded");
    assert!(db.stats().stopped.is_some(), "the store did not stop");
    let mut b = shale_lsm::WriteBatch::new();
    b.put(b"after", b"x");
    assert!(matches!(db.write(&b, &WriteOptions { sync: true }), Err(Error::Stopped(_))));
    drop(db);
    capacity.set_faults(FaultPlan::default());
    let db = Db::open_tiered_devices(fast, capacity, opts).unwrap();
    for n in 0..200 {
        let got = db.get(&key(n)).unwrap();
        let round3 = Some(value(n, (3, 0), 200));
        if acked.contains(&n) {
            assert_eq!(got, round3, "key {n}: an acknowledged write was lost");
        } else {
            assert!(got == round3 || got == Some(value(n, (2, 0), 200)), "key {n}");
        }
    }
    db.check().unwrap();
    db.compact_range().unwrap();
    assert!(db.stats().tiers[1].ssts > 0, "the reopened store compacts onto the capacity volume");
}

#[test]
fn by_path_the_wrong_capacity_volume_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let (fast, cap, other) =
        (dir.path().join("fast"), dir.path().join("cap"), dir.path().join("o"));
    let mut opts = tiered_options();
    opts.tiers.capacity_path = Some(cap.clone());
    opts.tiers.fast_levels = 1;
    opts.tiers.adaptive = false;
    let db = Db::open(&fast, opts.clone()).unwrap();
    for n in 0..KEYS {
        db.put(&key(n), &value(n, (1, 0), 200)).unwrap();
    }
    db.compact_range().unwrap();
    assert!(db.stats().tiers[1].ssts > 0);
    // The capacity volume is locked with the store.
    let mut cap_as_fast = opts.clone();
    cap_as_fast.tiers.capacity_path = None;
    assert!(Db::open(&cap, cap_as_fast.clone()).is_err());
    drop(db);

    let bytes = |p: &std::path::Path| std::fs::read(shale_space::volume_file(p)).unwrap();
    let (fast_bytes, cap_bytes) = (bytes(&fast), bytes(&cap));
    let tiers_error = |r: shale_lsm::Result<Db>| match r {
        Err(Error::Space(shale_space::Error::Tiers(why))) => why,
        Err(e) => panic!("not a tiers error: {e}"),
        Ok(_) => panic!("the open was not refused"),
    };
    // Without its capacity volume; the capacity volume alone; the two swapped.
    let mut alone = opts.clone();
    alone.tiers.capacity_path = None;
    tiers_error(Db::open(&fast, alone.clone()));
    tiers_error(Db::open(&cap, alone));
    let mut swapped = opts.clone();
    swapped.tiers.capacity_path = Some(fast.clone());
    tiers_error(Db::open(&cap, swapped));
    // Another store's capacity volume.
    let mut second = opts.clone();
    second.tiers.capacity_path = Some(other.clone());
    drop(Db::open(dir.path().join("fast2"), second).unwrap());
    let mut foreign = opts.clone();
    foreign.tiers.capacity_path = Some(other);
    tiers_error(Db::open(&fast, foreign));
    // A capacity path that is gone.
    let moved = dir.path().join("moved");
    std::fs::rename(&cap, &moved).unwrap();
    tiers_error(Db::open(&fast, opts.clone()));
    assert!(!cap.exists(), "a missing capacity volume is never made anew");
    std::fs::rename(&moved, &cap).unwrap();
    assert_eq!((bytes(&fast), bytes(&cap)), (fast_bytes, cap_bytes), "a refused open wrote");

    let db = Db::open(&fast, opts).unwrap();
    for n in 0..KEYS {
        assert_eq!(db.get(&key(n)).unwrap(), Some(value(n, (1, 0), 200)));
    }
    db.check().unwrap();
}
