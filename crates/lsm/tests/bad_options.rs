//! Bad options get a clear, typed error at open, and nothing already stored is touched (P6).
//!
//! Before: `Options::validate` let `sst.block_bytes = 0` through, the flush thread panicked on
//! it and `flush()` never returned (`shale bench --block_size=0` hung). Now every option has a
//! range checked at open, named as a const in `options.rs`, `sst/builder.rs` or the space
//! layer's `layout.rs` (docs/lsm.md, "Option limits").
//!
//! For every option, at zero, one past its limit and absurdly large, through `Db::open` on a
//! directory that holds a store: the open returns `Error::InvalidArgument` whose message names
//! the option, within a timeout and without a panic, and the store's files are byte for byte
//! what they were; the store then reopens with good options and reads its keys back. Values
//! that are odd but work (a 0 that turns something off, an unreachable trigger) open a new
//! store that takes a write, a flush and a read. A proptest draws whole `Options` from edge
//! and random values: each either fails `validate()` (and then `Db::open` fails the same way,
//! creating nothing) or opens and round-trips.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hasher};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use proptest::prelude::*;
use shale_lsm::options::{
    ASYNC_QUEUE_DEPTH_MAX, ASYNC_WORKERS_MAX, BACKGROUND_JOBS_MAX, BLOCK_CACHE_BYTES_MAX,
    L0_TRIGGER_MAX, SST_BYTES_MAX, VOLUME_STEP_BYTES_MAX, WRITE_BUFFER_BYTES_MAX,
    WRITE_BUFFER_BYTES_MIN, WRITE_BUFFER_NUMBER_MAX,
};
use shale_lsm::sst::Compression;
use shale_lsm::sst::builder::{BLOCK_BYTES_MAX, BLOOM_BITS_PER_KEY_MAX, RESTART_INTERVAL_MAX};
use shale_lsm::{Db, Error, Options, WalTail};

/// Longest an open may take before the test calls it hung.
const HANG: Duration = Duration::from_secs(30);
/// `shale_space`'s limits, which that crate does not export.
const SLOT_BYTES_MAX: u64 = 1 << 30;
const VERSION_LOG_BYTES_MAX: u64 = 1 << 30;
const VERSION_LOG_BYTES_MIN: u64 = 64 << 10;

/// Opens on a thread of its own, catching a panic, failing the test on a hang.
fn open_guarded(path: &Path, opts: Options) -> Result<shale_lsm::Result<Db>, String> {
    let (tx, rx) = mpsc::channel();
    let path = path.to_path_buf();
    std::thread::spawn(move || {
        let r = catch_unwind(AssertUnwindSafe(|| Db::open(&path, opts)));
        let _ = tx.send(r.map_err(|p| {
            p.downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default()
        }));
    });
    rx.recv_timeout(HANG).unwrap_or_else(|_| panic!("Db::open hung for {HANG:?}"))
}

/// Every file under `dir` with a hash of its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, u64> {
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let mut h = DefaultHasher::new();
        h.write(&std::fs::read(&path).unwrap());
        out.insert(path, h.finish());
    }
    out
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    format!("value{i}").repeat(20).into_bytes()
}

/// One bad option: what it is called in messages (which start with its name), and how to
/// set it.
struct Bad {
    name: &'static str,
    set: Box<dyn Fn(&mut Options)>,
}

fn bad(name: &'static str, set: impl Fn(&mut Options) + 'static) -> Bad {
    Bad { name, set: Box::new(set) }
}

/// Every option at zero, one past each end of its range, and absurdly large, plus the
/// combinations that cannot work together.
fn bad_options() -> Vec<Bad> {
    let mut v = Vec::new();
    for x in [0, 1, WRITE_BUFFER_BYTES_MIN - 1, WRITE_BUFFER_BYTES_MAX + 1, usize::MAX] {
        v.push(bad("write_buffer_bytes", move |o| o.write_buffer_bytes = x));
    }
    for x in [0, 1, WRITE_BUFFER_NUMBER_MAX + 1, usize::MAX] {
        v.push(bad("max_write_buffer_number", move |o| o.max_write_buffer_number = x));
    }
    for x in [0, L0_TRIGGER_MAX + 1, usize::MAX] {
        v.push(bad("level0_file_num_compaction_trigger", move |o| {
            o.level0_file_num_compaction_trigger = x
        }));
    }
    for x in [0, 3, L0_TRIGGER_MAX + 1, usize::MAX] {
        v.push(bad("level0_slowdown_writes_trigger", move |o| {
            o.level0_slowdown_writes_trigger = x
        }));
    }
    for x in [0, 19, L0_TRIGGER_MAX + 1, usize::MAX] {
        v.push(bad("level0_stop_writes_trigger", move |o| o.level0_stop_writes_trigger = x));
    }
    v.push(bad("max_bytes_for_level_base", |o| o.max_bytes_for_level_base = 0));
    for x in [0, 1] {
        v.push(bad("max_bytes_for_level_multiplier", move |o| {
            o.max_bytes_for_level_multiplier = x
        }));
    }
    for x in [0, (64 << 10) - 1, SST_BYTES_MAX + 1, u64::MAX] {
        v.push(bad("target_file_size_base", move |o| o.target_file_size_base = x));
    }
    v.push(bad("target_file_size_base", |o| {
        // Below one slot of a volume with larger slots.
        o.volume.layout.slot_bytes = 1 << 20;
        o.target_file_size_base = 512 << 10;
    }));
    for x in [0, 1, BACKGROUND_JOBS_MAX + 1, usize::MAX] {
        v.push(bad("max_background_jobs", move |o| o.max_background_jobs = x));
    }
    for x in [1, (16 << 10) - 1] {
        v.push(bad("delayed_write_rate", move |o| o.delayed_write_rate = x));
    }
    v.push(bad("soft_pending_compaction_bytes_limit", |o| {
        o.soft_pending_compaction_bytes_limit = 2 << 30;
        o.hard_pending_compaction_bytes_limit = 1 << 30;
    }));
    for x in [0, BLOCK_BYTES_MAX + 1, usize::MAX] {
        v.push(bad("sst.block_bytes", move |o| o.sst.block_bytes = x));
    }
    for x in [0, RESTART_INTERVAL_MAX + 1, usize::MAX] {
        v.push(bad("sst.restart_interval", move |o| o.sst.restart_interval = x));
    }
    for x in [BLOOM_BITS_PER_KEY_MAX + 1, u32::MAX] {
        v.push(bad("sst.bloom_bits_per_key", move |o| o.sst.bloom_bits_per_key = x));
    }
    for x in [BLOCK_CACHE_BYTES_MAX + 1, usize::MAX] {
        v.push(bad("block_cache_bytes", move |o| o.block_cache_bytes = x));
    }
    for x in [0, 1000, 4095, 4097, SLOT_BYTES_MAX + 4096, u64::MAX] {
        v.push(bad("volume.layout.slot_bytes", move |o| o.volume.layout.slot_bytes = x));
    }
    for x in [0, VERSION_LOG_BYTES_MIN - 4096, 100_000, VERSION_LOG_BYTES_MAX + 4096, u64::MAX] {
        v.push(bad("volume.layout.version_log_bytes", move |o| {
            o.volume.layout.version_log_bytes = x
        }));
    }
    // 4096: explicit, and too small for the metadata and the groups.
    for x in [5, 4096, 16 << 10, u64::MAX - 4095, u64::MAX] {
        v.push(bad("volume.layout.wal_bytes", move |o| o.volume.layout.wal_bytes = x));
    }
    v.push(bad("volume.layout.wal_bytes", |o| {
        // Room for 3 groups of 2 pages, not for the 5 that 4 memtables need.
        o.max_write_buffer_number = 4;
        o.volume.layout.wal_bytes = (2 + 3 * 2) * 4096;
    }));
    let slots_max = (VOLUME_STEP_BYTES_MAX / (64 << 10)) as u32;
    for x in [0, slots_max + 1, u32::MAX] {
        v.push(bad("volume.initial_slots", move |o| o.volume.initial_slots = x));
        v.push(bad("volume.grow_slots_min", move |o| o.volume.grow_slots_min = x));
    }
    v.push(bad("wal_tail", |o| o.wal_tail = WalTail::Dir("/nonexistent/shale-tail".into())));
    for x in [0, ASYNC_QUEUE_DEPTH_MAX + 1, usize::MAX] {
        v.push(bad("async_queue_depth", move |o| o.async_queue_depth = x));
    }
    for x in [0, ASYNC_WORKERS_MAX + 1, usize::MAX] {
        v.push(bad("async_workers", move |o| o.async_workers = x));
    }
    for x in [shale_lsm::wal::pipeline::LOGGERS_MAX + 1, usize::MAX] {
        v.push(bad("wal_loggers", move |o| o.wal_loggers = x));
    }
    v
}

#[test]
fn block_size_zero_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let mut o = Options::small_for_tests();
    o.sst.block_bytes = 0;
    match open_guarded(&path, o).expect("no panic") {
        Err(Error::InvalidArgument(why)) => {
            assert!(why.contains("sst.block_bytes 0 outside 1..="), "{why}")
        }
        other => panic!("{:?}", other.map(|_| "opened")),
    }
    assert!(!path.exists(), "a refused open created the store's directory");
}

#[test]
fn every_bad_option_is_refused_at_open_and_the_store_is_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let good = Options::small_for_tests();
    let db = Db::open(dir.path(), good.clone()).unwrap();
    for i in 0..300 {
        db.put(&key(i), &value(i)).unwrap();
    }
    db.flush().unwrap();
    for i in 300..400 {
        db.put(&key(i), &value(i)).unwrap(); // some in the WAL only
    }
    drop(db);
    let before = snapshot(dir.path());
    let cases = bad_options();
    for case in &cases {
        let mut o = Options::small_for_tests();
        (case.set)(&mut o);
        let what = format!("{} ({:?})", case.name, o);
        assert!(
            matches!(o.validate(), Err(Error::InvalidArgument(ref m)) if m.starts_with(case.name)),
            "validate: {what}: {:?}",
            o.validate()
        );
        match open_guarded(dir.path(), o) {
            Err(panic) => panic!("{what}: Db::open panicked: {panic}"),
            Ok(Err(Error::InvalidArgument(why))) => {
                assert!(why.starts_with(case.name), "{what}: the message does not name it: {why}")
            }
            Ok(Err(e)) => panic!("{what}: {e:?} instead of InvalidArgument"),
            Ok(Ok(_)) => panic!("{what}: opened"),
        }
        assert_eq!(snapshot(dir.path()), before, "{what}: a refused open changed the store");
    }
    eprintln!("{} bad options refused", cases.len());
    let db = Db::open(dir.path(), good).unwrap();
    for i in 0..400 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "key {i}");
    }
    db.check().unwrap();
    db.close().unwrap();
}

/// Opens a new store at `path` with `o`, writes, flushes, reads back, reopens and reads again.
fn round_trip(path: &Path, o: Options) {
    let db = match open_guarded(path, o.clone()) {
        Ok(Ok(db)) => db,
        other => panic!("{o:?}: {:?}", other.map(|r| r.map(|_| ()))),
    };
    for i in 0..50 {
        db.put(&key(i), &value(i)).unwrap();
    }
    db.flush().unwrap();
    db.put(&key(50), &value(50)).unwrap();
    for i in 0..=50 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "{o:?}: key {i}");
    }
    db.close().unwrap();
    let db = Db::open(path, o).unwrap();
    assert_eq!(db.get(&key(50)).unwrap(), Some(value(50)));
    db.check().unwrap();
    db.close().unwrap();
}

#[test]
fn odd_but_workable_options_open_and_round_trip() {
    type Set = fn(&mut Options);
    let cases: [(&str, Set); 14] = [
        ("pending limits off", |o| {
            o.soft_pending_compaction_bytes_limit = 0;
            o.hard_pending_compaction_bytes_limit = 0;
        }),
        ("soft limit without hard", |o| o.hard_pending_compaction_bytes_limit = 0),
        ("huge level base", |o| o.max_bytes_for_level_base = u64::MAX),
        ("huge multiplier", |o| o.max_bytes_for_level_multiplier = u64::MAX),
        ("unreachable L0 triggers", |o| {
            o.level0_file_num_compaction_trigger = L0_TRIGGER_MAX;
            o.level0_slowdown_writes_trigger = L0_TRIGGER_MAX;
            o.level0_stop_writes_trigger = L0_TRIGGER_MAX;
        }),
        ("no block cache", |o| o.block_cache_bytes = 0),
        ("largest block cache budget", |o| o.block_cache_bytes = BLOCK_CACHE_BYTES_MAX),
        ("no bloom filter", |o| o.sst.bloom_bits_per_key = 0),
        ("most bloom bits", |o| o.sst.bloom_bits_per_key = BLOOM_BITS_PER_KEY_MAX),
        ("one-byte blocks, lz4", |o| {
            o.sst.block_bytes = 1;
            o.sst.compression = Compression::Lz4;
        }),
        ("largest restart interval", |o| o.sst.restart_interval = RESTART_INTERVAL_MAX),
        ("derived WAL, smallest slot", |o| {
            o.volume.layout.wal_bytes = 0;
            o.volume.layout.slot_bytes = 4096;
            o.target_file_size_base = 4096;
        }),
        ("slot not a power of two", |o| {
            o.volume.layout.slot_bytes = 12 << 10;
            o.target_file_size_base = 12 << 10;
        }),
        ("one initial slot, growing one at a time", |o| {
            o.volume.initial_slots = 1;
            o.volume.grow_slots_min = 1;
        }),
    ];
    for (what, set) in cases {
        let dir = tempfile::tempdir().unwrap();
        let mut o = Options::small_for_tests();
        set(&mut o);
        o.validate().unwrap_or_else(|e| panic!("{what}: {e}"));
        round_trip(dir.path(), o);
    }
}

/// A field's value: mostly one that works, drawn from `valid`, now and then one of `edges`
/// (each end of its range, one past it, absurd), so that about a third of the options drawn
/// pass `validate` whole and the rest are refused for one or two fields.
fn field<T: Clone + std::fmt::Debug + 'static>(
    valid: impl Strategy<Value = T> + 'static,
    edges: Vec<T>,
) -> BoxedStrategy<T> {
    prop_oneof![12 => valid, 1 => proptest::sample::select(edges)].boxed()
}

fn arb_options() -> impl Strategy<Value = Options> {
    let sizes = (
        field(
            WRITE_BUFFER_BYTES_MIN..(512usize << 10),
            vec![0, WRITE_BUFFER_BYTES_MIN - 1, WRITE_BUFFER_BYTES_MIN, usize::MAX],
        ),
        field(2usize..6, vec![0, 1, 2, 65, usize::MAX]),
        field(1usize..40, vec![0, 1, L0_TRIGGER_MAX, usize::MAX]),
        field(2usize..6, vec![0, 1, 2, 65, usize::MAX]),
        field(64u64 << 10..(1 << 20), vec![0, 4095, 4096, SST_BYTES_MAX + 1, u64::MAX]),
        field(
            proptest::sample::select(vec![4096, 12 << 10, 64 << 10]),
            vec![0, 1, 1000, 4097, SLOT_BYTES_MAX + 4096, u64::MAX],
        ),
    );
    let sst = (
        field(1usize..20_000, vec![0, 1, BLOCK_BYTES_MAX + 1, usize::MAX]),
        field(1usize..100, vec![0, 1, RESTART_INTERVAL_MAX, RESTART_INTERVAL_MAX + 1, usize::MAX]),
        field(0u32..20, vec![0, BLOOM_BITS_PER_KEY_MAX, BLOOM_BITS_PER_KEY_MAX + 1, u32::MAX]),
        proptest::sample::select(vec![Compression::None, Compression::Lz4, Compression::Zstd]),
        field(
            0usize..(4 << 20),
            vec![0, BLOCK_CACHE_BYTES_MAX, BLOCK_CACHE_BYTES_MAX + 1, usize::MAX],
        ),
    );
    let volume = (
        field(
            proptest::sample::select(vec![64u64 << 10, 128 << 10, 256 << 10]),
            vec![0, 4096, 100_000, VERSION_LOG_BYTES_MAX + 4096, u64::MAX],
        ),
        field(
            proptest::sample::select(vec![0u64, 1 << 20, 4 << 20]),
            vec![5, 4096, 16 << 10, u64::MAX - 4095, u64::MAX],
        ),
        field(1u32..8, vec![0, 1, u32::MAX]),
        field(1u32..64, vec![0, 1, u32::MAX]),
        (0u64..3, 0u64..3, any::<bool>(), any::<bool>()),
    );
    (sizes, sst, volume).prop_map(|(sizes, sst, volume)| {
        let (wb, n, l0, jobs, target, slot) = sizes;
        let (block, restart, bloom, compression, cache) = sst;
        let (vlog, wal, initial, grow, (soft, hard, dynamic, prepopulate)) = volume;
        let mut o = Options::small_for_tests();
        o.write_buffer_bytes = wb;
        o.max_write_buffer_number = n;
        o.level0_file_num_compaction_trigger = l0;
        o.level0_slowdown_writes_trigger = l0.saturating_mul(2);
        o.level0_stop_writes_trigger = l0.saturating_mul(3);
        o.max_background_jobs = jobs;
        o.target_file_size_base = target;
        o.volume.layout.slot_bytes = slot;
        o.sst.block_bytes = block;
        o.sst.restart_interval = restart;
        o.sst.bloom_bits_per_key = bloom;
        o.sst.compression = compression;
        o.block_cache_bytes = cache;
        o.volume.layout.version_log_bytes = vlog;
        o.volume.layout.wal_bytes = wal;
        o.volume.initial_slots = initial;
        o.volume.grow_slots_min = grow;
        o.soft_pending_compaction_bytes_limit = soft << 20;
        o.hard_pending_compaction_bytes_limit = hard << 20;
        o.dynamic_level_bytes = dynamic;
        o.prepopulate_block_cache = prepopulate;
        o
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_options_are_refused_or_round_trip(o in arb_options()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store");
        match o.validate() {
            Err(Error::InvalidArgument(_)) => {
                let opened = open_guarded(&path, o.clone()).expect("Db::open panicked");
                prop_assert!(matches!(opened, Err(Error::InvalidArgument(_))), "{o:?}");
                prop_assert!(!path.exists(), "a refused open created {}", path.display());
            }
            Err(e) => prop_assert!(false, "validate: {e:?} is not InvalidArgument"),
            Ok(()) => round_trip(&path, o),
        }
    }
}
