//! Regression (issue #41, found item 5): Ctrl-C or SIGTERM of `bench` or `ycsb` without
//! `--db` left its temporary store (452 MB on disk) and its WAL tail in `/dev/shm`, which
//! holds memory until a reboot. SIGINT and SIGTERM must stop `bench`, `ycsb` and `kvbench`,
//! remove the temporary store and every file it made in `/dev/shm`, and end the process by
//! the signal (so that a shell sees 130 or 143 and a script looping over the tool stops).
//!
//! Each test runs the tool with a workload that would run for hours, in a `TMPDIR` of its
//! own, waits for the events that show the store is in use (the tool's line naming the
//! temporary store and its volume id on stderr, a first result on stdout, the WAL tail in
//! `/dev/shm`), sends the signal, and checks what is left. Files are found by the volume id
//! the tool printed, so stores of tests running beside it are never mistaken for its own.

#[path = "common/child.rs"]
mod child;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;

/// Where the lsm engine keeps its WAL tails.
const SHM: &str = "/dev/shm";

/// What the tool said of its temporary store on stderr.
struct Announced {
    store: PathBuf,
    volume_id: String,
}

/// Parses "shale CMD: temporary store PATH (volume id HEX), ...".
fn announced(line: &str) -> Option<Announced> {
    let rest = line.split_once(": temporary store ")?.1;
    let (store, rest) = rest.split_once(" (volume id ")?;
    let volume_id = rest.split_once(')')?.0.to_string();
    Some(Announced { store: PathBuf::from(store), volume_id })
}

/// Entries of `/dev/shm` that belong to the store with `volume_id`: named after it, or a WAL
/// tail whose header holds it (bytes 16..32, `wal/tail.rs`), whatever the file's name.
fn shm_files_of(volume_id: &str) -> Vec<PathBuf> {
    let id: Vec<u8> = (0..volume_id.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&volume_id[i..i + 2], 16).unwrap())
        .collect();
    let mut found = Vec::new();
    for e in std::fs::read_dir(SHM).expect("/dev/shm must exist for these tests").flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("shale-") {
            continue;
        }
        // Only the header is read: a tail may be hundreds of MB.
        let mut head = [0u8; 32];
        let read = std::fs::File::open(e.path()).and_then(|mut f| f.read_exact(&mut head));
        if name.contains(volume_id) || (read.is_ok() && head[16..32] == id[..]) {
            found.push(e.path());
        }
    }
    found
}

/// Runs `shale ARGS` in a `TMPDIR` of its own, waits until stdout has a line starting with
/// `started`, sends `signal`, and checks the run ended by it and left nothing behind.
fn stopped_by_signal_leaves_nothing(args: &[&str], started: &str, signal: i32) {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_shale"))
        .args(args)
        .env("TMPDIR", tmp.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // stderr: the announcement goes through a channel; every line is kept for the messages.
    let (tx, rx) = mpsc::channel();
    let stderr = BufReader::new(c.stderr.take().unwrap());
    let stderr_lines = std::thread::spawn(move || {
        let mut all = String::new();
        for line in stderr.lines().map_while(Result::ok) {
            if let Some(a) = announced(&line) {
                let _ = tx.send(a);
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    // A run that never prints `started` would hold the test forever: past the limit the
    // watchdog kills it, the read below sees the end of stdout, and the test fails.
    let (printed, watchdog) = mpsc::channel::<()>();
    let pid = c.id() as libc::pid_t;
    std::thread::spawn(move || {
        if watchdog.recv_timeout(4 * child::HANG_LIMIT) == Err(mpsc::RecvTimeoutError::Timeout) {
            // SAFETY: kill only sends SIGKILL to the child this test spawned.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    });
    let mut stdout = BufReader::new(c.stdout.take().unwrap());
    let mut out = String::new();
    loop {
        let mut line = String::new();
        let n = stdout.read_line(&mut line).unwrap();
        assert!(n > 0, "shale {args:?} ended before printing {started:?}:\n{out}");
        out.push_str(&line);
        if line.starts_with(started) {
            break;
        }
    }
    drop(printed);
    let store = rx.recv().expect("the tool names its temporary store on stderr");
    assert!(store.store.starts_with(tmp.path()), "made in TMPDIR: {}", store.store.display());
    assert!(store.store.exists(), "the store is there while the run goes on");
    assert!(
        !shm_files_of(&store.volume_id).is_empty(),
        "the running store keeps its WAL tail in {SHM} (volume id {})",
        store.volume_id
    );
    // SAFETY: kill only sends a signal to the child this test spawned and has not reaped.
    assert_eq!(unsafe { libc::kill(c.id() as libc::pid_t, signal) }, 0);
    // The rest of stdout is drained by `wait`'s reader; the child is waited on with a limit.
    c.stdout = Some(stdout.into_inner());
    let o = child::wait(c, &args.join(" "));
    let err = stderr_lines.join().unwrap();
    assert_eq!(
        o.signal,
        Some(signal),
        "ended by the signal (a shell shows 128 + {signal}):\n{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().map(|e| e.path()).collect();
    assert!(left.is_empty(), "the temporary store was left in TMPDIR: {left:?}\n{err}");
    let shm = shm_files_of(&store.volume_id);
    assert!(shm.is_empty(), "files of the store were left in {SHM}: {shm:?}\n{err}");
}

#[test]
fn sigint_stops_bench_and_removes_its_temporary_store() {
    stopped_by_signal_leaves_nothing(
        &["bench", "--benchmarks=fillseq,readrandom", "--num=2000", "--reads=4000000000"],
        "fillseq ",
        libc::SIGINT,
    );
}

#[test]
fn sigterm_stops_bench_and_removes_its_temporary_store() {
    // Stopped in the middle of a fill that would write for hours: the header's last line
    // comes just before it starts.
    stopped_by_signal_leaves_nothing(
        &["bench", "--benchmarks=fillrandom", "--num=2000", "--writes=4000000000"],
        "DB path:",
        libc::SIGTERM,
    );
}

#[test]
fn sigint_stops_ycsb_and_removes_its_temporary_store() {
    stopped_by_signal_leaves_nothing(
        &["ycsb", "--workload=c", "--records=1000", "--operations=4000000000"],
        "# load",
        libc::SIGINT,
    );
}

#[test]
fn sigterm_stops_kvbench_and_removes_its_temporary_store() {
    stopped_by_signal_leaves_nothing(
        &[
            "kvbench",
            "--engine=lsm",
            "--num=1000",
            "--value_size=100",
            "--workloads=seqfill,ycsb-c",
            "--operations=4000000000",
        ],
        "seqfill ",
        libc::SIGTERM,
    );
}

#[test]
fn the_announcement_parses() {
    let a = announced(
        "shale bench: temporary store /tmp/x/shale-bench-1 (volume id 00ff), removed when ...",
    )
    .unwrap();
    assert_eq!(
        (a.store.as_path(), a.volume_id.as_str()),
        (Path::new("/tmp/x/shale-bench-1"), "00ff")
    );
}

/// The table engine's temporary store with its undo log in emulated persistent memory
/// (`--undo_log pmem`: a new file in /dev/shm, named in the header): SIGINT removes the store
/// and that file. The file is found by the path the header names, so no other test's file is
/// mistaken for it.
#[test]
fn sigint_stops_ycsb_on_the_table_engine_and_removes_its_undo_log_file() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_shale"))
        .args([
            "ycsb",
            "--engine=table",
            "--undo_log=pmem",
            "--workload=c",
            "--records=1000",
            "--operations=4000000000",
        ])
        .env("TMPDIR", tmp.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (printed, watchdog) = mpsc::channel::<()>();
    let pid = c.id() as libc::pid_t;
    std::thread::spawn(move || {
        if watchdog.recv_timeout(4 * child::HANG_LIMIT) == Err(mpsc::RecvTimeoutError::Timeout) {
            // SAFETY: kill only sends SIGKILL to the child this test spawned.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    });
    let mut stdout = BufReader::new(c.stdout.take().unwrap());
    let (mut undo_log, mut out) = (None, String::new());
    loop {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "ycsb ended before its load:\n{out}");
        out.push_str(&line);
        if let Some(rest) = line.split_once("undo log in ").map(|(_, r)| r) {
            undo_log = rest.split_once(' ').map(|(p, _)| PathBuf::from(p));
        }
        if line.starts_with("# load") {
            break;
        }
    }
    drop(printed);
    let undo_log = undo_log.unwrap_or_else(|| panic!("the header names no undo log file:\n{out}"));
    assert!(undo_log.starts_with(SHM) && undo_log.exists(), "{}", undo_log.display());
    // SAFETY: kill only sends a signal to the child this test spawned and has not reaped.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    c.stdout = Some(stdout.into_inner());
    let o = child::wait(c, "ycsb --engine=table --undo_log=pmem");
    assert_eq!(o.signal, Some(libc::SIGINT), "ended by the signal");
    assert!(!undo_log.exists(), "the undo log file was left: {}", undo_log.display());
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().map(|e| e.path()).collect();
    assert!(left.is_empty(), "the temporary store was left in TMPDIR: {left:?}");
}
