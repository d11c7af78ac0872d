//! The memtable prefaulter's CPU priority: the process's one thread that faults memtable
//! chunks in ahead of the writers runs at the lowest background priority any of its stores
//! asked for (`Options::background_cpu_priority`), never back up.
//!
//! The prefaulter is one thread per process, so this file is a test binary of its own with
//! one test, which opens its stores in order. The priority is read from the kernel on the
//! thread itself (`/proc/self/task/*/comm` names it); a lowering asked after the thread
//! started is applied when it next wakes (at least every second), so the test waits for that
//! event, with a deadline far beyond it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use shale_io::{CpuPriority, SimDevice, thread_cpu_priority};
use shale_lsm::{Db, Options};

/// The prefaulter's thread id, once some store started it.
fn prefaulter_tid() -> Option<libc::pid_t> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    tasks.filter_map(|t| t.ok()).find_map(|t| {
        let comm = std::fs::read_to_string(t.path().join("comm")).ok()?;
        if comm.trim_end() != "shale-prefault" {
            return None;
        }
        t.file_name().to_str()?.parse().ok()
    })
}

/// A store at `priority` opened, written and closed.
fn open_a_store(priority: CpuPriority) {
    let device = Arc::new(SimDevice::new(64 << 20, 4096, 7).unwrap());
    let mut o = Options::small_for_tests();
    o.background_cpu_priority = priority;
    let db = Db::open_device(device, o).unwrap();
    for n in 0..1000u32 {
        db.put(format!("key{n:04}").as_bytes(), b"value").unwrap();
    }
    db.close().unwrap();
}

/// Waits until the prefaulter runs at `want`; panics with what it saw after a minute.
fn wait_for(want: CpuPriority) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = None;
    while Instant::now() < deadline {
        if let Some(tid) = prefaulter_tid() {
            seen = Some(thread_cpu_priority(tid).expect("the prefaulter's CPU priority"));
            if seen == Some(want) {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("the prefaulter did not reach {want}: last seen {seen:?}");
}

#[test]
fn the_prefaulter_runs_at_the_lowest_background_priority_asked_and_stays_there() {
    assert_eq!(prefaulter_tid(), None, "no store opened yet");
    open_a_store(CpuPriority::Normal);
    // Started by the first store, at its priority: the one it was made with.
    wait_for(CpuPriority::Normal);
    open_a_store(CpuPriority::Low);
    wait_for(CpuPriority::Low);
    // A later store at a higher priority does not raise it: it cannot, and other stores'
    // background work runs there.
    open_a_store(CpuPriority::Normal);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(thread_cpu_priority(prefaulter_tid().unwrap()).unwrap(), CpuPriority::Low);
    open_a_store(CpuPriority::Idle);
    wait_for(CpuPriority::Idle);
    // The thread that opened the stores is never touched.
    assert_eq!(thread_cpu_priority(0).unwrap(), CpuPriority::Normal);
}
