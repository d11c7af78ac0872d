//! Several compaction threads under a write load: compactions run at once on disjoint SSTs and
//! key ranges, and nothing is lost.
//!
//! Four writers put and delete over their own key ranges on a store with four compaction
//! threads (`max_background_jobs = 5`) on a throttled device, so compactions take long enough
//! to overlap in time. At the end every writer's last write is what `get` returns (also after
//! reopening), a scan sees exactly the live keys, `check` passes (levels sorted and disjoint,
//! every slot accounted for), and at least two compactions ran at once.
//!
//! Why: a picker that let two compactions take the same SST, or write overlapping ranges into
//! one level, loses or resurrects keys, or leaves a level that `check` refuses.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shale_io::{Profile, SimDevice, ThrottledDevice};
use shale_lsm::{Db, Options, ReadOptions, WriteBatch, WriteOptions};

const WRITERS: u32 = 4;
const KEYS_PER_WRITER: u32 = 1500;
const WRITES_PER_WRITER: u32 = 3000;

fn options() -> Options {
    let mut o = Options::small_for_tests();
    o.write_buffer_bytes = 64 << 10;
    o.target_file_size_base = 64 << 10;
    o.max_bytes_for_level_base = 256 << 10;
    o.level0_file_num_compaction_trigger = 2;
    o.max_background_jobs = 5;
    o
}

fn key(w: u32, k: u32) -> Vec<u8> {
    format!("w{w}/{k:06}").into_bytes()
}

fn value(w: u32, k: u32, version: u32) -> Vec<u8> {
    let mut v = format!("w{w}/{k:06}={version};").into_bytes();
    v.resize(200 + (k as usize * 7) % 200, b'.');
    v
}

/// One writer; returns the last version of each of its keys (`None`: deleted).
fn writer(db: &Db, w: u32) -> BTreeMap<u32, Option<u32>> {
    let mut rng = SmallRng::seed_from_u64(u64::from(w));
    let mut last = BTreeMap::new();
    for i in 1..=WRITES_PER_WRITER {
        let mut b = WriteBatch::new();
        for _ in 0..rng.gen_range(1..4) {
            let k = rng.gen_range(0..KEYS_PER_WRITER);
            if rng.gen_bool(0.1) {
                b.delete(&key(w, k));
                last.insert(k, None);
            } else {
                b.put(&key(w, k), &value(w, k, i));
                last.insert(k, Some(i));
            }
        }
        db.write(&b, &WriteOptions::default()).unwrap();
    }
    last
}

fn verify(db: &Db, last: &[BTreeMap<u32, Option<u32>>], when: &str) {
    let mut live = 0;
    for (w, keys) in last.iter().enumerate() {
        let w = w as u32;
        for (&k, &version) in keys {
            let got = db.get(&key(w, k)).unwrap();
            assert_eq!(got, version.map(|v| value(w, k, v)), "{when}: writer {w} key {k}");
            live += usize::from(version.is_some());
        }
    }
    let mut it = db.iter(&ReadOptions::default());
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next();
    }
    it.status().unwrap();
    assert_eq!(n, live, "{when}: scan count");
}

#[test]
fn several_compactions_run_at_once_and_lose_nothing() {
    let started = Instant::now();
    let sim = SimDevice::new(256 << 20, 4096, 1).unwrap();
    let profile = Profile {
        name: "slow".into(),
        bandwidth_bytes_per_s: 40_000_000,
        iops: 20_000,
        latency: Duration::from_micros(200),
    };
    let dev = Arc::new(ThrottledDevice::new(Arc::new(sim.clone()), profile.clone()).unwrap());
    let db = Arc::new(Db::open_device(dev, options()).unwrap());
    assert_eq!(db.stats().background_jobs, 5);
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let db = db.clone();
            thread::spawn(move || writer(&db, w))
        })
        .collect();
    let last: Vec<_> = writers.into_iter().map(|h| h.join().unwrap()).collect();
    db.wait_for_compaction().unwrap();
    let stats = db.stats();
    verify(&db, &last, "after the run");
    let report = db.check().unwrap();
    println!(
        "compaction pool: {WRITERS} writers x {WRITES_PER_WRITER} batches, {} flushes, {} \
         compactions, at most {} at once, {:?} SSTs per level, {} SSTs checked, {:?}",
        stats.flushes,
        stats.compactions,
        stats.peak_running_compactions,
        stats.files_per_level,
        report.ssts,
        started.elapsed()
    );
    assert!(stats.compactions > 10, "too little compaction: {stats:?}");
    assert!(stats.peak_running_compactions >= 2, "compactions never overlapped: {stats:?}");
    assert_eq!((stats.running_compactions, stats.compaction_threads), (0, 4));
    Arc::into_inner(db).expect("writers are done").close().unwrap();
    let dev = Arc::new(ThrottledDevice::new(Arc::new(sim), profile).unwrap());
    let db = Db::open_device(dev, options()).unwrap();
    verify(&db, &last, "after reopening");
    db.check().unwrap();
}
