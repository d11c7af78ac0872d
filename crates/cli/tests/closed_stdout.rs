//! Regression (issue #9): `shale bench --num=1000 | head -1` panicked with "failed printing to
//! stdout: Broken pipe" and exited 101 with a backtrace. A closed stdout must end the command
//! quietly, as it ends Unix tools; `bench` and `ycsb` also remove their temporary store first.

#[path = "common/child.rs"]
mod child;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// Runs `shale ARGS` with `tmp` as its temporary directory, reads one line of its stdout,
/// closes the pipe, and checks how it ended.
fn close_after_one_line(args: &[&str], tmp: &std::path::Path) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_shale"))
        .args(args)
        .env("TMPDIR", tmp)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(c.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    assert!(!first.is_empty(), "shale {args:?} printed nothing");
    drop(out);
    let o = child::wait(c, &args.join(" "));
    o.assert_no_panic(&format!("shale {args:?} | head -1"));
    assert!(!o.stderr.contains("Broken pipe"), "{}", o.stderr);
    // Ended by SIGPIPE at its next write, or done before it wrote again.
    assert!(o.signal == Some(libc::SIGPIPE) || o.code == Some(0), "{o:?}");
}

#[test]
fn bench_piped_into_head_ends_without_a_broken_pipe_panic() {
    let tmp = tempfile::tempdir().unwrap();
    close_after_one_line(&["bench", "--num=1000", "--benchmarks=fillseq,readrandom"], tmp.path());
    // Its temporary store was closed and removed, not left behind by a killed process.
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0, "a temporary store was left");
}

#[test]
fn ycsb_piped_into_head_ends_without_a_broken_pipe_panic() {
    let tmp = tempfile::tempdir().unwrap();
    close_after_one_line(&["ycsb", "--records=200", "--operations=200"], tmp.path());
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0, "a temporary store was left");
}

#[test]
fn inspect_piped_into_head_ends_without_a_broken_pipe_panic() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("--db={}", dir.path().display());
    child::run(&["bench", &db, "--num=2000", "--benchmarks=fillrandom,flush"]).assert_ok("fill");
    close_after_one_line(&["inspect", dir.path().to_str().unwrap(), "--extents"], dir.path());
}
