//! Compactions in the kernel's idle I/O class (`Options::idle_compaction_io`): a compaction
//! thread reads and writes in the idle class while the store is not behind, goes back to its
//! own class at the commit, when the store falls halfway to a write slowdown, and for a full
//! compaction a caller waits on; with the option off it never leaves its class.
//!
//! Each test reads the compaction thread's priority (`ioprio_get`) from the compaction hook,
//! which runs on that thread after the compaction chose its class, and the thread's priority
//! again after the commit, by its id. These are events, not timings: the class is what the
//! kernel reports for the thread.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use parking_lot::{Condvar, Mutex};
use shale_io::{IoPriority, SimDevice, thread_io_priority};
use shale_lsm::options::FailpointHook;
use shale_lsm::{Db, Options};

/// What the hook saw: the compaction thread's id and its I/O priority.
type Seen = Arc<Mutex<Vec<(libc::pid_t, IoPriority)>>>;

fn recording_hook(seen: &Seen) -> FailpointHook {
    let seen = seen.clone();
    FailpointHook(Arc::new(move || {
        // SAFETY: gettid takes no arguments.
        let tid = unsafe { libc::gettid() };
        seen.lock().push((tid, thread_io_priority(0).expect("ioprio_get of the thread")));
    }))
}

fn options(seen: &Seen) -> Options {
    let mut o = small_options();
    // L0: compaction at 2 files, slowdown at 12, so compactions yield below 7.
    o.level0_slowdown_writes_trigger = 12;
    o.level0_stop_writes_trigger = 16;
    o.compaction_hook = Some(recording_hook(seen));
    o.idle_compaction_io = true;
    o
}

/// Writes `rounds` rounds of small entries over the same keys (a round is about three
/// memtables), each flushed: every pair of L0 SSTs is a compaction that rewrites its inputs.
fn fill(db: &Db, rounds: u32) {
    fill_keys(db, rounds, 2_000);
}

/// [`fill`], waiting for the compactions after each round: L0 never holds more than a round
/// and a file (4 SSTs), short of halfway to the slowdown (7), however slowly compactions run
/// on a loaded machine, so every compaction begins in a store that is not behind.
fn fill_not_behind(db: &Db, rounds: u32) {
    for _ in 0..rounds {
        fill(db, 1);
        db.wait_for_compaction().unwrap();
    }
}

fn fill_keys(db: &Db, rounds: u32, keys: u32) {
    for round in 0..rounds {
        for n in 0..keys {
            db.put(format!("key{n:05}").as_bytes(), format!("v{round}-{n}").as_bytes()).unwrap();
        }
        db.flush().unwrap();
    }
}

fn device() -> Arc<SimDevice> {
    Arc::new(SimDevice::new(64 << 20, 4096, 7).unwrap())
}

#[test]
fn compactions_read_and_write_in_the_idle_class_and_leave_it_when_done() {
    let seen = Seen::default();
    let db = Db::open_device(device(), options(&seen)).unwrap();
    fill_not_behind(&db, 6);
    let seen = seen.lock().clone();
    assert!(!seen.is_empty(), "no compaction rewrote its inputs");
    for (tid, prio) in &seen {
        assert_eq!(*prio, IoPriority::Idle, "a compaction of a store not behind, thread {tid}");
        // The thread outlives its compaction (the pool keeps it): back in its own class.
        let after = thread_io_priority(*tid).expect("the compaction thread lives on");
        assert_ne!(after, IoPriority::Idle, "thread {tid} stayed idle after its commit");
    }
    let s = db.stats();
    assert_eq!(s.compactions_idle_io, seen.len() as u64, "{s:?}");
    assert_eq!(s.compaction_io_raised, 0, "{s:?}");
    db.check().unwrap();
    db.close().unwrap();
}

#[test]
fn with_the_option_off_compactions_keep_their_class() {
    let seen = Seen::default();
    let mut o = options(&seen);
    o.idle_compaction_io = false;
    let db = Db::open_device(device(), o).unwrap();
    fill(&db, 6);
    db.wait_for_compaction().unwrap();
    let seen = seen.lock().clone();
    assert!(!seen.is_empty(), "no compaction rewrote its inputs");
    assert!(seen.iter().all(|(_, p)| *p != IoPriority::Idle), "{seen:?}");
    assert_eq!(db.stats().compactions_idle_io, 0);
    db.close().unwrap();
}

#[test]
fn a_full_compaction_a_caller_waits_for_does_not_yield() {
    let seen = Seen::default();
    let db = Db::open_device(device(), options(&seen)).unwrap();
    fill_not_behind(&db, 6);
    assert!(seen.lock().iter().any(|(_, p)| *p == IoPriority::Idle), "none yielded before");
    // An empty L0 (a round's odd SST may wait there for the next), then one more L0 SST
    // (well within a memtable), under the trigger: only the full compaction merges it down.
    db.compact_range().unwrap();
    fill_keys(&db, 1, 200);
    assert_eq!(db.stats().files_per_level[0], 1);
    seen.lock().clear();
    db.compact_range().unwrap();
    let seen = seen.lock().clone();
    assert!(!seen.is_empty(), "the full compaction rewrote nothing");
    assert!(seen.iter().all(|(_, p)| *p != IoPriority::Idle), "{seen:?}");
    db.check().unwrap();
    db.close().unwrap();
}

#[test]
fn a_yielding_compaction_rises_when_the_store_falls_halfway_to_a_slowdown() {
    // (open, compactions that reached the gate)
    let gate = Arc::new((Mutex::new((false, 0u32)), Condvar::new()));
    let seen = Seen::default();
    let mut o = options(&seen);
    let record = recording_hook(&seen);
    let hold = gate.clone();
    // The first compaction records its class, then waits at the gate while L0 grows.
    o.compaction_hook = Some(FailpointHook(Arc::new(move || {
        (record.0)();
        let (state, cv) = &*hold;
        let mut s = state.lock();
        s.1 += 1;
        if s.1 == 1 {
            cv.notify_all();
            while !s.0 {
                cv.wait(&mut s);
            }
        }
    })));
    o.max_background_jobs = 2; // one compaction thread: nothing else compacts L0 meanwhile
    let db = Db::open_device(device(), o).unwrap();
    fill(&db, 2);
    let (state, cv) = &*gate;
    {
        let mut s = state.lock();
        while s.1 == 0 {
            assert!(
                !cv.wait_for(&mut s, Duration::from_secs(120)).timed_out(),
                "no compaction reached the gate"
            );
        }
    }
    assert_eq!(seen.lock()[0].1, IoPriority::Idle, "it began with L0 at the trigger");
    // L0 to halfway (7 files), the held compaction's inputs among them.
    while db.stats().files_per_level[0] < 7 {
        fill(&db, 1);
    }
    state.lock().0 = true;
    cv.notify_all();
    db.wait_for_compaction().unwrap();
    let s = db.stats();
    assert!(s.compaction_io_raised >= 1, "the held compaction never left the idle class: {s:?}");
    db.check().unwrap();
    db.close().unwrap();
}

/// A store on a file, reading and writing SSTs through the page cache (the defaults), whose
/// compactions yield, each of 4 L0 SSTs.
fn file_options() -> Options {
    let mut o = small_options();
    o.use_direct_reads = false;
    o.use_direct_io_for_flush_and_compaction = false;
    o.idle_compaction_io = true;
    o.level0_file_num_compaction_trigger = 4;
    o.level0_slowdown_writes_trigger = 20;
    o.level0_stop_writes_trigger = 24;
    // No block cache: every block a compaction merges is read from its SST.
    o.block_cache_bytes = 0;
    o.prepopulate_block_cache = false;
    o
}

#[test]
fn an_idle_compactions_inputs_the_page_cache_does_not_hold_are_read_around_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), file_options()).unwrap();
    // Four L0 SSTs just written through the page cache: the compaction reads them from it.
    fill_keys(&db, 4, 500);
    db.wait_for_compaction().unwrap();
    let s = db.stats();
    assert!(s.compactions_idle_io >= 1, "no compaction yielded: {s:?}");
    assert_eq!(s.sst_bytes_read_around_page_cache, 0, "cached inputs read around: {s:?}");
    assert!(s.sst_bytes_read_buffered > 0, "{s:?}");
    fill_keys(&db, 3, 500);
    // Every page of the volume file out of the page cache (the SSTs are synced, so clean);
    // then the fourth L0 SST starts a compaction.
    let file = shale_space::volume_file(dir.path());
    let len = std::fs::metadata(&file).unwrap().len();
    shale_io::BufferedReader::open(&file).unwrap().drop_cached(0, len).unwrap();
    let before = db.stats();
    fill_keys(&db, 1, 500);
    db.wait_for_compaction().unwrap();
    let s = db.stats();
    assert!(s.compactions_idle_io > before.compactions_idle_io, "{s:?}");
    assert!(
        s.sst_bytes_read_around_page_cache > 0,
        "inputs out of the page cache were read through it: {s:?}"
    );
    assert_eq!(s.sst_bytes_read_direct, 0, "only compactions read around the page cache");
    for n in 0..500u32 {
        let got = db.get(format!("key{n:05}").as_bytes()).unwrap();
        assert_eq!(got.as_deref(), Some(format!("v0-{n}").as_bytes()), "key {n}");
    }
    db.check().unwrap();
    db.close().unwrap();
}

#[test]
fn a_compaction_in_its_own_class_reads_through_the_page_cache() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = file_options();
    o.idle_compaction_io = false;
    let db = Db::open(dir.path(), o).unwrap();
    fill_keys(&db, 3, 500);
    let file = shale_space::volume_file(dir.path());
    let len = std::fs::metadata(&file).unwrap().len();
    shale_io::BufferedReader::open(&file).unwrap().drop_cached(0, len).unwrap();
    fill_keys(&db, 1, 500);
    db.wait_for_compaction().unwrap();
    let s = db.stats();
    assert!(s.compactions >= 1 && s.compactions_idle_io == 0, "{s:?}");
    assert_eq!(s.sst_bytes_read_around_page_cache, 0, "{s:?}");
    assert!(s.sst_bytes_read_buffered > 0, "{s:?}");
    db.close().unwrap();
}
