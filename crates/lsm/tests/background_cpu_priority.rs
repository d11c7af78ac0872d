//! The background threads' CPU priority (`Options::background_cpu_priority`): the flush and
//! compaction threads run at the priority asked (niceness 19 for `Low`, `SCHED_IDLE` for
//! `Idle`), keep their I/O priority out of the idle class, and by default keep the priority
//! they were made with.
//!
//! Each test reads the priority on the threads themselves, from the compaction hook and the
//! flush's progress hook: events the kernel reports, not timings.

use std::sync::Arc;

use parking_lot::Mutex;
use shale_io::{CpuPriority, IoPriority, SimDevice, thread_cpu_priority, thread_io_priority};
use shale_lsm::options::FailpointHook;
use shale_lsm::{Db, Options};

/// The class field's shift within an I/O priority, and the best-effort class.
const IOPRIO_CLASS_SHIFT: u16 = 13;
const BEST_EFFORT: u16 = 2;

/// What a hook saw on its thread: which work, the thread's CPU and I/O priority.
type Seen = Arc<Mutex<Vec<(&'static str, CpuPriority, IoPriority)>>>;

fn recording_hook(seen: &Seen, what: &'static str) -> FailpointHook {
    let seen = seen.clone();
    FailpointHook(Arc::new(move || {
        let cpu = thread_cpu_priority(0).expect("the thread's CPU priority");
        let io = thread_io_priority(0).expect("the thread's I/O priority");
        seen.lock().push((what, cpu, io));
    }))
}

fn options(seen: &Seen, priority: CpuPriority) -> Options {
    // Memtables of 10,000 entries (a flush passes a step of its progress at 4,096), every
    // two L0 SSTs compacted.
    let mut o = Options::small_for_tests();
    o.write_buffer_bytes = 1 << 20;
    o.level0_file_num_compaction_trigger = 2;
    o.compaction_hook = Some(recording_hook(seen, "compaction"));
    o.flush_progress_hook = Some(recording_hook(seen, "flush"));
    o.background_cpu_priority = priority;
    o
}

/// Writes `rounds` memtables over the same keys, each flushed (more entries than a flush's
/// step of progress), so that pairs of L0 SSTs are compacted.
fn fill(db: &Db, rounds: u32) {
    for round in 0..rounds {
        for n in 0..10_000u32 {
            db.put(format!("key{n:05}").as_bytes(), format!("v{round}-{n}").as_bytes()).unwrap();
        }
        db.flush().unwrap();
    }
}

/// Runs a store at `priority` through flushes and compactions; what its threads saw.
fn run_at(priority: CpuPriority) -> Vec<(&'static str, CpuPriority, IoPriority)> {
    let seen = Seen::default();
    let device = Arc::new(SimDevice::new(64 << 20, 4096, 7).unwrap());
    let db = Db::open_device(device, options(&seen, priority)).unwrap();
    // The caller's own thread is never touched.
    assert_eq!(thread_cpu_priority(0).unwrap(), CpuPriority::Normal);
    fill(&db, 4);
    db.wait_for_compaction().unwrap();
    for n in (0..10_000u32).step_by(997) {
        assert_eq!(
            db.get(format!("key{n:05}").as_bytes()).unwrap(),
            Some(format!("v3-{n}").into_bytes())
        );
    }
    db.check().unwrap();
    db.close().unwrap();
    assert_eq!(thread_cpu_priority(0).unwrap(), CpuPriority::Normal);
    let seen = seen.lock().clone();
    for what in ["flush", "compaction"] {
        assert!(seen.iter().any(|s| s.0 == what), "no {what} reached its hook: {seen:?}");
    }
    seen
}

#[test]
fn flush_and_compaction_threads_run_lowered_with_their_io_priority_kept() {
    for priority in [CpuPriority::Low, CpuPriority::Idle] {
        for (what, cpu, io) in run_at(priority) {
            assert_eq!(cpu, priority, "a {what} thread");
            // Best effort, set on the thread: one left in the class "none" follows its CPU
            // priority, and a SCHED_IDLE thread's I/O would go to the idle class, the store's
            // writes behind every client read.
            assert!(
                matches!(io, IoPriority::Inherited(v) if v >> IOPRIO_CLASS_SHIFT == BEST_EFFORT),
                "a {what} thread at {priority}: {io:?}"
            );
        }
    }
}

#[test]
fn by_default_the_threads_keep_the_priority_they_were_made_with() {
    assert_eq!(Options::default().background_cpu_priority, CpuPriority::Normal);
    for (what, cpu, io) in run_at(CpuPriority::Normal) {
        assert_eq!(cpu, CpuPriority::Normal, "a {what} thread");
        assert_ne!(io, IoPriority::Idle, "a {what} thread");
    }
}
