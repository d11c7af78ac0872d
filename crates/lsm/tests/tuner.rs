//! ADOC's tuner on a running store:
//! - a burst of writes overflows the memtables, and the tuner reacts within two windows
//!   (counted in its own windows, not in wall time, so a loaded machine cannot fail it);
//! - an L0 past the slowdown trigger, answered within two windows: more threads below their
//!   cap, a larger batch at it (ADOC, ADOC-B), threads only and nothing at the cap (ADOC-T);
//! - random writes against a model while the tuner and the test turn the knobs, reopened in
//!   between: nothing lost, every read as the model;
//! - the tuner thread ends on close, and stops tuning once the store has stopped (P5).

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use shale_io::{
    DeviceRef, Fault, FaultPlan, MemoryDevice, OpKind, Profile, SimDevice, ThrottledDevice,
};
use shale_lsm::{Db, MemoryLimit, Options, TunerMode, WriteBatch, WriteOptions};

/// Small options with the tuner in `mode`, and a WAL area derived for its largest batch
/// (eight memtables' worth a group: a group that fills seals its memtable, so the batch grows
/// only as far as the groups hold).
fn tuned(mode: TunerMode) -> Options {
    let mut o = small_options();
    o.tuner.mode = mode;
    o.tuner.window_ms = 20;
    o.volume.layout.wal_bytes = 0;
    o
}

/// Polls `f` until it holds, for at most a minute.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(60);
    while !f() {
        assert!(Instant::now() < until, "never: {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn a_memtable_overflow_is_answered_within_two_windows() {
    let grown = memtable_overflow_answer(tuned(TunerMode::Full));
    assert!(grown.is_none_or(|(before, after)| after > before), "MMO grows the batch");
    // A volume whose WAL groups hold one write buffer (made with the tuner off, say): the
    // overflow is answered, the batch stays what the groups hold.
    let mut small_wal = tuned(TunerMode::Full);
    small_wal.volume.layout.wal_bytes = 256 << 10;
    let kept = memtable_overflow_answer(small_wal);
    assert!(kept.is_none_or(|(before, after)| after == before), "{kept:?}");
    // A memory limit whose half the block cache takes: the overflow is answered, the batch
    // stays the write buffer its owner chose.
    let mut no_memory = tuned(TunerMode::Full);
    no_memory.memory_limit = MemoryLimit::Bytes(2 * no_memory.block_cache_bytes as u64);
    let kept = memtable_overflow_answer(no_memory);
    assert!(kept.is_none_or(|(before, after)| after == before), "{kept:?}");
}

/// Writes until the memtables overflow, then waits two of the tuner's windows: some overflow
/// must have been answered. Returns the batch before and after where the answer was to a
/// memory overflow.
fn memtable_overflow_answer(mut opts: Options) -> Option<(u64, u64)> {
    let dev: DeviceRef = Arc::new(MemoryDevice::new(4 * DEVICE_BYTES, 4096).unwrap());
    // L0 may grow a lot before it counts as an overflow: the burst is a memtable overflow.
    opts.level0_slowdown_writes_trigger = 36;
    opts.level0_stop_writes_trigger = 36;
    let db = Arc::new(Db::open_device(dev, opts.clone()).unwrap());
    let initial = db.stats().write_buffer_bytes;
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            let mut w = 0u32;
            while db.stats().tuner_memory_overflows == 0 && w < 2_000_000 {
                db.put(&key((w % 900) as u16), &value((w % 900) as u16, (w, 0), 400)).unwrap();
                w += 1;
            }
        })
    };
    eventually("a memory overflow", || db.stats().memory_overflows > 0);
    let seen_at = db.stats().tuner_windows;
    eventually("two more windows", || db.stats().tuner_windows >= seen_at + 2);
    let s = db.stats();
    assert!(
        s.tuner_memory_overflows + s.tuner_l0_overflows > 0,
        "no overflow answered within two windows: {s:?}"
    );
    writer.join().unwrap();
    (s.tuner_memory_overflows > 0).then(|| (initial, db.stats().write_buffer_bytes))
}

/// A store whose L0 holds `files` SSTs (written with compaction off), reopened with `mode`,
/// at most `threads_max` background threads, an L0 slowdown trigger the L0 is past, on a
/// 2 MB/s device so that the compaction it starts lasts seconds: each window of it is an L0
/// overflow. Returns (threads, batch) before and after two of the tuner's windows.
fn l0_overflow_answer(mode: TunerMode, threads_max: usize) -> ((usize, u64), (usize, u64)) {
    const FILES: u16 = 12;
    let sim = SimDevice::new(64 << 20, 4096, 3).unwrap();
    let mut opts = small_options();
    opts.write_buffer_bytes = 256 << 10;
    opts.target_file_size_base = 256 << 10;
    opts.volume.layout.wal_bytes = 2 << 20;
    opts.max_bytes_for_level_base = 1 << 30;
    opts.level0_file_num_compaction_trigger = 1000;
    opts.level0_slowdown_writes_trigger = 1000;
    opts.level0_stop_writes_trigger = 1000;
    let db = Db::open_device(Arc::new(sim.clone()), opts.clone()).unwrap();
    for f in 0..FILES {
        for k in 0..200u16 {
            db.put(&key(k), &value(k, (u32::from(f), 0), 1000)).unwrap();
        }
        db.flush().unwrap();
    }
    assert_eq!(db.stats().files_per_level[0], usize::from(FILES));
    db.close().unwrap();

    let profile = Profile {
        name: "slow".into(),
        bandwidth_bytes_per_s: 2_000_000,
        iops: 100_000,
        latency: Duration::from_micros(50),
    };
    let slow = Arc::new(ThrottledDevice::new(Arc::new(sim), profile).unwrap());
    opts.max_bytes_for_level_base = 1 << 20;
    opts.level0_file_num_compaction_trigger = 4;
    opts.level0_slowdown_writes_trigger = 8;
    opts.level0_stop_writes_trigger = 64;
    opts.max_background_jobs = 2;
    opts.tuner = shale_lsm::TunerOptions { mode, window_ms: 50, threads_max, batch_max: 0 };
    let db = Db::open_device(slow, opts.clone()).unwrap();
    let before = (opts.max_background_jobs, opts.write_buffer_bytes as u64);
    eventually("two windows", || db.stats().tuner_windows >= 2);
    let s = db.stats();
    assert!(s.tuner_l0_overflows >= 1, "no L0 overflow seen in two windows: {s:?}");
    assert!(s.files_per_level[0] >= 8 || s.compactions > 0, "{s:?}");
    db.close().unwrap();
    (before, (s.background_jobs, s.write_buffer_bytes))
}

#[test]
fn an_l0_overflow_is_answered_within_two_windows() {
    // Below the thread cap: ADOC adds threads and leaves the batch.
    let (before, after) = l0_overflow_answer(TunerMode::Full, 8);
    assert!(after.0 > before.0 && after.1 == before.1, "{before:?} -> {after:?}");
    // At the cap: the batch grows instead.
    let (before, after) = l0_overflow_answer(TunerMode::Full, 2);
    assert!(after.0 == before.0 && after.1 > before.1, "{before:?} -> {after:?}");
    // ADOC-B turns no threads, so its answer is the batch whatever the cap.
    let (before, after) = l0_overflow_answer(TunerMode::Batch, 8);
    assert!(after.0 == before.0 && after.1 > before.1, "{before:?} -> {after:?}");
    // ADOC-T at the cap has nothing left to turn.
    let (before, after) = l0_overflow_answer(TunerMode::Threads, 2);
    assert_eq!(before, after);
}

#[test]
fn knobs_turning_under_a_model_workload_lose_nothing() {
    let fast: DeviceRef = Arc::new(MemoryDevice::new(4 * DEVICE_BYTES, 4096).unwrap());
    let opts = tuned(TunerMode::Full);
    let mut db = Db::open_device(fast.clone(), opts.clone()).unwrap();
    let mut model: BTreeMap<u16, (u32, u16)> = BTreeMap::new();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    for w in 0..8000u32 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let n = (rng % 500) as u16;
        if rng % 5 == 0 {
            db.delete(&key(n)).unwrap();
            model.remove(&n);
        } else {
            db.put(&key(n), &value(n, (w, 0), 500)).unwrap();
            model.insert(n, (w, 0));
        }
        // The test turns the knobs too, against the tuner.
        if w % 700 == 0 {
            db.set_background_jobs(2 + (w as usize / 700) % 4).unwrap();
            db.set_write_buffer_bytes((64 << 10) * (1 + (w as usize / 700) % 3)).unwrap();
        }
        if w % 2500 == 2499 {
            assert_eq!(scan_state(&db, 500).unwrap(), model, "before reopen at {w}");
            drop(db);
            db = Db::open_device(fast.clone(), opts.clone()).unwrap();
            assert_eq!(scan_state(&db, 500).unwrap(), model, "after reopen at {w}");
        }
    }
    db.wait_for_compaction().unwrap();
    assert_eq!(scan_state(&db, 500).unwrap(), model);
    db.check().unwrap();
    eventually("the tuner ran", || db.stats().tuner_windows > 0);
}

#[test]
fn the_tuner_ends_on_close_and_stops_tuning_a_stopped_store() {
    let dev = Arc::new(SimDevice::new(4 * DEVICE_BYTES, 4096, 9).unwrap());
    let opts = tuned(TunerMode::Full);
    let db = Db::open_device(dev.clone(), opts.clone()).unwrap();
    eventually("a few windows", || db.stats().tuner_windows >= 3);
    let started = Instant::now();
    db.close().unwrap();
    assert!(started.elapsed() < Duration::from_secs(10), "close waited on the tuner");

    let db = Db::open_device(dev.clone(), opts).unwrap();
    assert!(db.stats().tuner_running, "no tuner thread on a writable store");
    dev.set_faults(FaultPlan {
        faults: vec![Fault::Eio { op: OpKind::Write, nth: 1, sticky: true }],
    });
    let mut b = WriteBatch::new();
    b.put(b"k", b"v");
    assert!(db.write(&b, &WriteOptions { sync: true }).is_err());
    eventually("the store stopped", || db.stats().stopped.is_some());
    // Once stopped, the tuner thread returns at its next window, and so looks at no more
    // windows; the store itself stays open (not closed, not dropped) while it does.
    eventually("the tuner returned on a stopped store", || !db.stats().tuner_running);
    drop(db);
}

/// Batch-only tuning (ADOC-B, 20 ms windows, two threads) of 256 KiB memtables, with WAL
/// groups that hold eight of them (so that the groups never bound the batch), on a 24 MB/s
/// simulated device of `device_bytes` that cannot grow.
fn under_pressure(device_bytes: u64, seed: u64) -> (SimDevice, DeviceRef, Options) {
    let sim = SimDevice::new(device_bytes, 4096, seed).unwrap();
    let profile = Profile {
        name: "small".into(),
        bandwidth_bytes_per_s: 24_000_000,
        iops: 100_000,
        latency: Duration::from_micros(20),
    };
    let slow = Arc::new(ThrottledDevice::new(Arc::new(sim.clone()), profile).unwrap());
    let mut opts = small_options();
    opts.write_buffer_bytes = 256 << 10;
    opts.target_file_size_base = 256 << 10;
    opts.max_bytes_for_level_base = 1 << 20;
    opts.level0_file_num_compaction_trigger = 4;
    opts.level0_slowdown_writes_trigger = 20;
    opts.level0_stop_writes_trigger = 36;
    opts.volume.layout.wal_bytes = 3 * (3 << 20) + 8192;
    opts.tuner = shale_lsm::TunerOptions {
        mode: TunerMode::Batch,
        window_ms: 20,
        threads_max: 2,
        batch_max: 0,
    };
    (sim, slow, opts)
}

/// Writes batches of 64 unsynced puts to a store of [`under_pressure`]'s: writes outrun the
/// device, so memtables and L0 overflow, and some overflow is answered. Checks the store,
/// closes it and reads every key back from `sim`; returns the largest batch seen and the
/// stats after the writes.
fn overwrite_under_pressure(
    sim: SimDevice,
    slow: DeviceRef,
    opts: &Options,
    seed: u64,
) -> (u64, shale_lsm::Stats) {
    const KEYS: u32 = 24_000;
    const VALUE: usize = 1000;
    let db = Db::open_device(slow, opts.clone()).unwrap();
    let mut largest = 0u64;
    let model = random_overwrites(&db, KEYS, 3 * KEYS / 64, 64, VALUE, seed, |db| {
        largest = largest.max(db.stats().write_buffer_bytes);
    });
    let s = db.stats();
    assert!(s.tuner_memory_overflows + s.tuner_l0_overflows > 0, "no overflow: {s:?}");
    assert!(s.stopped.is_none(), "{s:?}");
    db.check().unwrap();
    db.close().unwrap();
    let db = Db::open_device(Arc::new(sim), opts.clone()).unwrap();
    assert_reads_back(&db, &model, VALUE);
    db.check().unwrap();
    db.close().unwrap();
    (largest, s)
}

/// A device that cannot grow, with a tuner whose batch cap alone (eight memtables) would let
/// L0 hold more than the device: the batch stays within what the volume's room leaves safe
/// (`tuner::batch_room_cap`), the store never runs out of space, and every key reads back.
#[test]
fn the_batch_stays_within_the_room_of_a_device_that_cannot_grow() {
    let (sim, slow, opts) = under_pressure(64 << 20, 11);
    let wb = opts.write_buffer_bytes as u64;
    let static_cap = 8 * wb;
    let (largest, s) = overwrite_under_pressure(sim, slow, &opts, 0x9e37_79b9_7f4a_7c15);
    assert!(largest > wb, "the batch never grew: {s:?}");
    assert!(
        s.tuner_batch_max >= wb && s.tuner_batch_max < static_cap,
        "the room did not bound the batch: {s:?}"
    );
    assert!(largest <= static_cap / 2, "the batch reached {largest}: {s:?}");
}

/// A memory limit bounds the batch as the volume's room does: with room in the limit for
/// memtables of twice the write buffer, the tuner grows the batch under pressure that far and
/// no further (`memory_limit::batch_memory_cap`: the block cache and the memtables within
/// half the limit), on a device with room for much larger batches; the stats name the limit.
#[test]
fn the_batch_stays_within_the_memory_limit() {
    let (sim, slow, mut opts) = under_pressure(256 << 20, 12);
    let wb = opts.write_buffer_bytes as u64;
    // These options keep no WAL tail: half the limit is the cache and two memtables.
    let limit = 2 * (opts.block_cache_bytes as u64 + opts.max_write_buffer_number as u64 * 2 * wb);
    opts.memory_limit = MemoryLimit::Bytes(limit);
    let (largest, s) = overwrite_under_pressure(sim, slow, &opts, 0x2545_f491_4f6c_dd1d);
    assert_eq!(s.memory_limit, limit, "{s:?}");
    assert!(largest > wb, "the batch never grew: {s:?}");
    assert!(largest <= 2 * wb, "the batch reached {largest} past the limit's {}: {s:?}", 2 * wb);
    assert!(s.tuner_batch_max <= 2 * wb, "{s:?}");
}

/// A store opens with its write buffer within the memory limit, whether a tuner runs or not
/// (`Options::write_buffer_within`): the owner's 64 MiB write buffer in a 64 MiB limit beside
/// an 8 MiB cache becomes 12 MiB (half the limit, less the cache, over two memtables; these
/// options keep no WAL tail, which would count each memtable twice), its memtables flush at
/// that size, and every write reads back after a reopen. Without a limit the owner's write
/// buffer stays.
/// The block cache's budget under a memory limit gives way to the index and filter blocks the
/// SST readers hold as the data grows (`memory_limit::block_cache_within`), down to its floor,
/// and the cache holds no more than it; reopened, the store starts at the lowered budget.
#[test]
fn the_block_cache_gives_room_to_the_held_index_and_filter_blocks() {
    const MIB: u64 = 1 << 20;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let mut opts = Options {
        write_buffer_bytes: 4 << 20,
        block_cache_bytes: 24 << 20,
        memory_limit: MemoryLimit::Bytes(64 << 20),
        ..tuned(TunerMode::Off)
    };
    // Blocks of two entries of long keys: the index holds about half a key per key, so a
    // few MiB of it come from a few tens of MiB of data.
    opts.sst.block_bytes = 256;
    // Half the limit, 32 MiB, less two 4 MiB memtables (no WAL tail in these options): 24 MiB
    // for the cache and the held blocks.
    let expected = |held: u64| (24 * MIB).saturating_sub(held).clamp(4 * MIB, 24 * MIB);
    let db = Db::open(&path, opts.clone()).unwrap();
    let s = db.stats();
    assert_eq!((s.write_buffer_bytes, s.block_cache_capacity_bytes as u64), (4 * MIB, 24 * MIB));
    let key = |i: u32| format!("{i:08}{}", "k".repeat(120));
    let value = [0x33u8; 16];
    let mut lowered = false;
    for i in 0..200_000u32 {
        db.put(key(i).as_bytes(), &value).unwrap();
        if i % 20_000 == 19_999 {
            // Reads fill the cache to whatever its budget is now.
            for j in (0..i).step_by(7) {
                assert!(db.get(key(j).as_bytes()).unwrap().is_some(), "key {j}");
            }
            let s = db.stats();
            let held = s.sst_index_and_filter_held_bytes;
            let budget = s.block_cache_capacity_bytes as u64;
            // Read apart from the held bytes, a commit may come between: within its SSTs.
            let want = expected(held);
            assert!(budget.abs_diff(want) <= 2 * MIB, "budget {budget} for {held} held: {s:?}");
            assert!(s.block_cache_bytes as u64 <= budget, "{s:?}");
            lowered |= budget < 24 * MIB;
        }
    }
    db.flush().unwrap();
    let held = db.stats().sst_index_and_filter_held_bytes;
    assert!(lowered && held > 4 * MIB, "the data grew its held blocks to {held}");
    db.close().unwrap();
    // Reopened: the budget fits the held blocks before a read fills the cache.
    let db = Db::open(&path, opts.clone()).unwrap();
    let s = db.stats();
    let within =
        (s.block_cache_capacity_bytes as u64).abs_diff(expected(s.sst_index_and_filter_held_bytes));
    assert!(within < 64 << 10, "{s:?}");
    assert!((s.block_cache_capacity_bytes as u64) < 20 * MIB, "{s:?}");
    db.close().unwrap();
    // No limit: the owner's budget whatever is held.
    let unlimited = Options { memory_limit: MemoryLimit::Unlimited, ..opts };
    let db = Db::open(&path, unlimited).unwrap();
    assert_eq!(db.stats().block_cache_capacity_bytes as u64, 24 * MIB);
    db.close().unwrap();
}

/// Under a memory limit the SST readers hold index and filter blocks up to their room
/// (`memory_limit::held_meta_room`); readers opened past it keep theirs in the block cache,
/// where they are charged and evicted, and every key still reads back, before and after a
/// reopen (whose readers are placed the same way).
#[test]
fn index_and_filter_blocks_past_their_room_go_to_the_cache() {
    const MIB: u64 = 1 << 20;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let mut opts = Options {
        write_buffer_bytes: 4 << 20,
        block_cache_bytes: 8 << 20,
        memory_limit: MemoryLimit::Bytes(40 << 20),
        ..tuned(TunerMode::Off)
    };
    opts.sst.block_bytes = 256;
    // Half the limit, 20 MiB, less two 4 MiB memtables (no WAL tail here): 12 MiB, half of
    // it for held blocks.
    let room = 6 * MIB;
    // A reader opened just below the room holds its blocks, and a compaction's outputs are
    // placed before it commits (and its inputs leave): the held bytes may pass the room by
    // what a compaction writes.
    let slack = 2 * MIB;
    let key = |i: u32| format!("{i:08}{}", "k".repeat(120));
    let value = [0x44u8; 16];
    let db = Db::open(&path, opts.clone()).unwrap();
    for i in 0..300_000u32 {
        db.put(key(i).as_bytes(), &value).unwrap();
    }
    db.flush().unwrap();
    for i in (0..300_000u32).step_by(11) {
        assert_eq!(db.get(key(i).as_bytes()).unwrap().as_deref(), Some(&value[..]), "key {i}");
    }
    let s = db.stats();
    let held = s.sst_index_and_filter_held_bytes;
    assert!(held <= room + slack, "{held} held past the room of {room}: {s:?}");
    assert!(s.block_cache_index_and_filter_bytes > 0, "none went to the cache: {s:?}");
    assert!(s.block_cache_bytes <= s.block_cache_capacity_bytes, "{s:?}");
    db.close().unwrap();
    let db = Db::open(&path, opts).unwrap();
    let s = db.stats();
    // Each reader is placed by what those before it hold: the last held one may pass the
    // room by its own blocks.
    assert!(s.sst_index_and_filter_held_bytes <= room + slack, "reopened: {s:?}");
    for i in (0..300_000u32).step_by(13) {
        assert_eq!(db.get(key(i).as_bytes()).unwrap().as_deref(), Some(&value[..]), "key {i}");
    }
    db.close().unwrap();
}

#[test]
fn the_write_buffer_opens_within_the_memory_limit() {
    const MIB: usize = 1 << 20;
    for mode in [TunerMode::Off, TunerMode::Full] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store");
        let opts = Options {
            write_buffer_bytes: 64 * MIB,
            block_cache_bytes: 8 * MIB,
            memory_limit: MemoryLimit::Bytes(64 << 20),
            ..tuned(mode)
        };
        let db = Db::open(&path, opts.clone()).unwrap();
        let s = db.stats();
        assert_eq!(s.memory_limit, 64 << 20, "{mode:?}: {s:?}");
        assert_eq!(s.write_buffer_bytes, 12 << 20, "{mode:?}: {s:?}");
        // 40 MiB of writes: at least three memtables of 12 MiB flushed (one of 64 MiB
        // would hold them all).
        let value = vec![0x5a; 1000];
        for i in 0..40 * 1024u32 {
            db.put(format!("key{i:08}").as_bytes(), &value).unwrap();
        }
        db.flush().unwrap();
        let s = db.stats();
        assert!(s.flushes >= 4, "{mode:?}: {} flushes: {s:?}", s.flushes);
        db.close().unwrap();
        let db = Db::open(&path, opts).unwrap();
        for i in (0..40 * 1024u32).step_by(97) {
            let got = db.get(format!("key{i:08}").as_bytes()).unwrap();
            assert_eq!(got.as_deref(), Some(&value[..]), "{mode:?}: key {i}");
        }
        db.close().unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let unlimited = Options {
        write_buffer_bytes: 64 * MIB,
        memory_limit: MemoryLimit::Unlimited,
        ..tuned(TunerMode::Off)
    };
    let db = Db::open(dir.path().join("store"), unlimited).unwrap();
    let s = db.stats();
    assert_eq!((s.memory_limit, s.write_buffer_bytes), (0, 64 << 20), "{s:?}");
    db.close().unwrap();
}
