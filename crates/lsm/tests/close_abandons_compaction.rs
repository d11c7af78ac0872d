//! `Db::close` abandons a running compaction instead of waiting for it: nothing of it is
//! committed, its outputs go back to the volume, and the next open finds every key and a slot
//! map that accounts for every slot.
//!
//! Why: a close that finished a large compaction first wrote gigabytes after the caller was
//! done (a 5-minute fillrandom on a 368 MB/s device closed for over a minute, and its device
//! wrote 1.3x the engine's own count of SST bytes), work the next open redoes anyway. RocksDB's
//! close abandons its compactions too.

use std::sync::Arc;
use std::time::{Duration, Instant};

use shale_io::{Profile, SimDevice, ThrottledDevice};
use shale_lsm::{Db, Options};

const KEYS: u32 = 24_000;

/// `compact`: whether compactions start (the L0 file count and the level sizes trigger them);
/// else neither does.
fn options(compact: bool) -> Options {
    let mut o = Options::small_for_tests();
    o.write_buffer_bytes = 1 << 20;
    o.target_file_size_base = 1 << 20;
    o.max_bytes_for_level_base = if compact { 4 << 20 } else { 1 << 30 };
    o.volume.layout.wal_bytes = 8 << 20;
    o.level0_file_num_compaction_trigger = if compact { 4 } else { 1000 };
    o.level0_slowdown_writes_trigger = 1000;
    o.level0_stop_writes_trigger = 1000;
    o
}

fn key(i: u32) -> Vec<u8> {
    format!("key{:08}", i.wrapping_mul(2_654_435_761) % 100_000_000).into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    format!("{i}:").into_bytes().into_iter().cycle().take(1000).collect()
}

#[test]
fn close_abandons_a_running_compaction_and_loses_nothing() {
    let sim = SimDevice::new(256 << 20, 4096, 1).unwrap();

    // About 24 MiB in L0, no compaction yet.
    let db = Db::open_device(Arc::new(sim.clone()), options(false)).unwrap();
    for i in 0..KEYS {
        db.put(&key(i), &value(i)).unwrap();
    }
    db.flush().unwrap();
    let l0 = db.stats().files_per_level[0];
    assert!(l0 >= 16, "{l0} L0 SSTs: {:?}", db.stats());
    assert_eq!(db.stats().compactions, 0);
    db.close().unwrap();

    // Reopened on a 4 MB/s device with a trigger the L0 passes: a compaction of all of it
    // starts, which takes seconds there (reading and writing 24 MiB).
    let profile = Profile {
        name: "slow".into(),
        bandwidth_bytes_per_s: 4_000_000,
        iops: 100_000,
        latency: Duration::from_micros(50),
    };
    let slow = Arc::new(ThrottledDevice::new(Arc::new(sim.clone()), profile).unwrap());
    let db = Db::open_device(slow, options(true)).unwrap();
    let started = Instant::now();
    while db.stats().running_compactions == 0 {
        assert!(started.elapsed() < Duration::from_secs(30), "no compaction started");
        std::thread::sleep(Duration::from_millis(5));
    }
    let before = sim.stats().bytes_written;
    db.close().unwrap();
    let during_close = sim.stats().bytes_written - before;
    assert!(
        during_close < 8 << 20,
        "close wrote {during_close} bytes: it finished the compaction of {l0} SSTs"
    );

    // Nothing was committed half-way: every key reads back, the levels and the slot map check.
    let db = Db::open_device(Arc::new(sim), options(false)).unwrap();
    assert_eq!(db.stats().files_per_level[0], l0, "the abandoned compaction committed");
    for i in (0..KEYS).step_by(7) {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "key {i}");
    }
    db.check().unwrap();
}
