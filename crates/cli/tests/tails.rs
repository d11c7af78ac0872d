//! Every suite prints the tail (`ycsb::latency`'s line: p50, p99, p99.9 and max per operation
//! type, as the client sees them) for each operation type it ran: a tiny `shale bench`,
//! `shale ycsb` and `shale kvbench` on temporary stores, their tail lines parsed. Only the
//! lines' presence, counts and order of the figures are checked, never a time.

mod common;

use ycsb::latency::TailLine;

/// The tail lines of `out`, each checked: p50 <= p99 <= p99.9 <= max, and operations counted.
fn tails(out: &str) -> Vec<TailLine> {
    let lines: Vec<TailLine> = out.lines().filter_map(TailLine::parse).collect();
    for t in &lines {
        assert!(
            t.p50_us <= t.p99_us && t.p99_us <= t.p999_us && t.p999_us <= t.max_us,
            "figures out of order in {t:?}\n{out}"
        );
        assert!(t.ops > 0, "{t:?}\n{out}");
    }
    lines
}

/// The labels and operation types of `lines`, in order, with their operation counts.
fn kinds(lines: &[TailLine]) -> Vec<(String, String, u64)> {
    lines.iter().map(|t| (t.label.clone(), t.op.clone(), t.ops)).collect()
}

fn owned(v: &[(&str, &str, u64)]) -> Vec<(String, String, u64)> {
    v.iter().map(|(l, o, n)| (l.to_string(), o.to_string(), *n)).collect()
}

#[test]
fn bench_prints_a_tail_line_per_benchmark_with_histogram() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("--db={}", dir.path().join("db").display());
    let (ok, out, err) = common::shale(&[
        "bench",
        &db,
        "--num=300",
        "--benchmarks=fillrandom,readrandom,seekrandom,deleterandom",
        "--histogram=1",
    ]);
    assert!(ok, "exit status; stderr:\n{err}");
    assert_eq!(
        kinds(&tails(&out)),
        owned(&[
            ("fillrandom", "write", 300),
            ("readrandom", "read", 300),
            ("seekrandom", "seek", 300),
            ("deleterandom", "delete", 300),
        ]),
        "{out}"
    );
    // Without --histogram nothing is timed, as db_bench: no tail lines.
    let (ok, out, err) = common::shale(&["bench", &db, "--num=100", "--benchmarks=fillseq"]);
    assert!(ok, "exit status; stderr:\n{err}");
    assert!(tails(&out).is_empty(), "{out}");
}

#[test]
fn bench_async_times_each_ticket() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("--db={}", dir.path().join("db").display());
    let (ok, out, err) = common::shale(&[
        "bench",
        &db,
        "--num=300",
        "--benchmarks=fillrandom,readrandom",
        "--histogram=1",
        "--async",
    ]);
    assert!(ok, "exit status; stderr:\n{err}");
    assert_eq!(
        kinds(&tails(&out)),
        owned(&[("fillrandom", "write", 300), ("readrandom", "read", 300)]),
        "{out}"
    );
}

#[test]
fn ycsb_prints_a_tail_line_per_operation_of_each_phase() {
    let (ok, out, err) =
        common::shale(&["ycsb", "--workload", "a", "--records", "300", "--operations", "400"]);
    assert!(ok, "exit status; stderr:\n{err}");
    let lines = tails(&out);
    let found: Vec<(String, String)> =
        lines.iter().map(|t| (t.label.clone(), t.op.clone())).collect();
    assert_eq!(
        found,
        [("load", "INSERT"), ("run", "READ"), ("run", "UPDATE")]
            .map(|(l, o)| (l.to_string(), o.to_string())),
        "{out}"
    );
    assert_eq!(lines[0].ops, 300, "{out}");
    assert_eq!(lines[1].ops + lines[2].ops, 400, "{out}");
}

#[test]
fn kvbench_prints_a_tail_line_per_operation_type() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a");
    let (ok, out, err) = common::shale(&[
        "kvbench",
        "--engine",
        "lsm",
        "--paths",
        path.to_str().unwrap(),
        "--num",
        "300",
        "--workloads",
        "randfill,ycsb-a,ycsb-c",
    ]);
    assert!(ok, "exit status; stderr:\n{err}\nstdout:\n{out}");
    let lines = tails(&out);
    let found: Vec<(String, String)> =
        lines.iter().map(|t| (t.label.clone(), t.op.clone())).collect();
    let want = [
        ("randfill[0]", "put"),
        ("randfill", "put"),
        ("ycsb-a[0]", "get"),
        ("ycsb-a[0]", "put"),
        ("ycsb-a", "get"),
        ("ycsb-a", "put"),
        ("ycsb-c[0]", "get"),
        ("ycsb-c", "get"),
    ]
    .map(|(l, o)| (l.to_string(), o.to_string()));
    assert_eq!(found, want, "{out}");
    let ops =
        |label: &str| -> u64 { lines.iter().filter(|t| t.label == label).map(|t| t.ops).sum() };
    assert_eq!((ops("randfill"), ops("ycsb-a"), ops("ycsb-c")), (300, 300, 300), "{out}");
}

/// bench/lib/tails.py, which the scripts' summaries read every engine's output with, passes
/// its self-test (captured db_bench and redis-benchmark output) and reads `shale bench`'s
/// output back to the tail lines shale printed. It needs python3, as test.sh's Python checks
/// do: without it the test fails.
#[test]
fn the_scripts_parser_reads_the_same_tails() {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/lib/tails.py");
    let python = |args: &[&std::ffi::OsStr]| {
        let out = std::process::Command::new("python3")
            .arg(&script)
            .args(args)
            .output()
            .expect("python3 runs (bench/lib/tails.py needs it)");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "tails.py {args:?}: {stderr}\n{stdout}");
        stdout
    };
    assert!(python(&["--self-test".as_ref()]).contains("self-test passed"));
    let dir = tempfile::tempdir().unwrap();
    let db = format!("--db={}", dir.path().join("db").display());
    let (ok, out, err) = common::shale(&[
        "bench",
        &db,
        "--num=200",
        "--benchmarks=fillrandom,readrandom",
        "--histogram=1",
    ]);
    assert!(ok, "exit status; stderr:\n{err}");
    let log = dir.path().join("bench.txt");
    std::fs::write(&log, &out).unwrap();
    let read_back = tails(&python(&[log.as_os_str()]));
    assert_eq!(read_back, tails(&out), "{out}");
    assert_eq!(read_back.len(), 2, "{out}");
}
