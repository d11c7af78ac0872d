//! `shale serve`'s store runs its flush and compaction threads at a low CPU priority by
//! default (niceness 19: a reply never waits out a compaction's time slice), at the one
//! `--background_cpu_priority` names otherwise, and the server's main thread keeps its own.
//!
//! Read from the kernel (the threads' scheduling policy and niceness, by name under
//! `/proc/<pid>/task`), not timed: each thread lowers itself as it starts, so the test waits
//! for that event, and gives up only after a minute.

#[path = "common/served.rs"]
mod served;

use std::time::{Duration, Instant};

use served::{Served, free_port};
use shale_io::{CpuPriority, thread_cpu_priority};

/// The priority of each of the server's threads, with its id and the name the kernel keeps
/// (15 bytes).
fn thread_priorities(pid: u32) -> Vec<(libc::pid_t, String, CpuPriority)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let task = task.unwrap();
        let Ok(comm) = std::fs::read_to_string(task.path().join("comm")) else { continue };
        let tid: libc::pid_t = task.file_name().to_str().unwrap().parse().unwrap();
        // A thread that ended between the listing and here is skipped.
        if let Ok(p) = thread_cpu_priority(tid) {
            out.push((tid, comm.trim().to_string(), p));
        }
    }
    out
}

/// Waits until every flush and compaction thread of the server is at `want` (they lower
/// themselves as they start), then checks the main thread kept the normal priority.
fn assert_background_at(server: &Served, want: CpuPriority) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let threads = thread_priorities(server.pid());
        let background: Vec<_> = threads
            .iter()
            .filter(|(_, name, _)| name == "shale-flush" || name.starts_with("shale-compactio"))
            .collect();
        let flush = background.iter().filter(|(_, name, _)| name == "shale-flush").count();
        if flush == 1 && background.len() >= 2 && background.iter().all(|(.., p)| *p == want) {
            let main = threads.iter().find(|(tid, ..)| *tid as u32 == server.pid());
            assert_eq!(
                main.map(|(.., p)| *p),
                Some(CpuPriority::Normal),
                "the main thread's priority changed: {threads:?}"
            );
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the background threads never reached {want}: {threads:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn background_threads_run_at_low_priority_by_default_and_at_the_one_asked() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s");
    let server = Served::on_port(&db, free_port(), &[]);
    assert_background_at(&server, CpuPriority::Low);
    server.stop();
    for (flag, want) in [("normal", CpuPriority::Normal), ("idle", CpuPriority::Idle)] {
        let server = Served::on_port(&db, free_port(), &["--background_cpu_priority", flag]);
        assert_background_at(&server, want);
        server.stop();
    }
}

#[test]
fn a_bad_priority_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shale"))
        .args(["serve", "--db"])
        .arg(&db)
        .args(["--background_cpu_priority", "lowest"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("'lowest' is no CPU priority (normal, low, idle)"), "{err}");
    assert!(!db.exists(), "nothing made for a refused flag");
}
