//! `bench/lib/scaling_chart.py`, which draws bench/scaling.sh's medians: one SVG per part, a
//! line per variant through its points, a failed run's median ("-") left out rather than
//! drawn as zero; and `bench/lib/scaling_tails.py`, its tail tables. Need python3, as
//! test.sh's Python checks do.

use std::path::Path;
use std::process::Output;

/// Runs `bench/lib/<script>` on a CSV of `rows` in a fresh directory, with that directory as
/// a second argument where `dir_arg`; returns the directory (kept while it lives) and what
/// the script printed, after checking that it succeeded.
fn run(script: &str, rows: &str, dir_arg: bool) -> (tempfile::TempDir, Output) {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("in.csv");
    std::fs::write(&csv, rows).unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/lib").join(script);
    let mut cmd = std::process::Command::new("python3");
    cmd.arg(&path).arg(&csv);
    if dir_arg {
        cmd.arg(dir.path());
    }
    let out =
        cmd.output().unwrap_or_else(|e| panic!("python3 runs (bench/lib/{script} needs it): {e}"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (dir, out)
}

#[test]
fn one_chart_per_part_and_a_line_per_variant() {
    let (dir, out) = run(
        "scaling_chart.py",
        "part,variant,threads,ops_per_s\n\
         fillsync,rocksdb,1,1000\nfillsync,rocksdb,16,9000\n\
         fillsync,shale,1,1500\nfillsync,shale,16,-\nfillsync,shale,64,20000\n\
         table,ycsb-c,2,300000\ntable,ycsb-c,16,900000\n",
        true,
    );
    let listed = String::from_utf8(out.stdout).unwrap();
    assert_eq!(listed.lines().count(), 2, "{listed}");
    let sync = std::fs::read_to_string(dir.path().join("chart-fillsync.svg")).unwrap();
    assert_eq!(sync.matches("<polyline").count(), 2, "a line per variant");
    // shale's line has two points: the failed median at 16 threads is left out.
    assert_eq!(sync.matches("<circle").count(), 4);
    assert!(sync.contains(">rocksdb<") && sync.contains(">shale<"));
    let table = std::fs::read_to_string(dir.path().join("chart-table.svg")).unwrap();
    assert_eq!(table.matches("<polyline").count(), 1);
    assert!(table.contains("by threads"));
}

#[test]
fn the_tail_tables_hold_each_percentiles_median_over_the_repeats() {
    let (_dir, out) = run(
        "scaling_tails.py",
        "part,variant,threads,repeat,label,op,p50_us,p99_us,p999_us,max_us,ops\n\
         fillrandom,rocksdb,16,1,fillrandom,write,4.0,10.0,30.0,900.0,100\n\
         fillrandom,rocksdb,16,2,fillrandom,write,6.0,30.0,10.0,300.0,100\n\
         fillrandom,rocksdb,16,3,fillrandom,write,5.0,20.0,20.0,1200.0,100\n\
         fillrandom,shale,16,1,fillrandom,write,2.0,8.0,50.0,5000.0,100\n\
         fillrandom,shale,32,1,fillrandom,write,3.0,9.0,60.0,6000.0,100\n\
         table,B,2,1,run,READ,20.0,58.0,84.0,10465.0,95\n\
         table,B,2,1,run,UPDATE,67.8,171.0,227.0,5846.0,5\n\
         kv-tmpfs,hash,8,1,ycsb-c,get,2.4,152.0,203.0,17082.0,9\n",
        false,
    );
    let md = String::from_utf8(out.stdout).unwrap();
    assert_eq!(md.matches("## Tails: ").count(), 3, "a table per part: {md}");
    // Each percentile's median over the three repeats, not one run's line.
    assert!(md.contains("| threads | rocksdb write | shale write |"), "{md}");
    assert!(md.contains("| 16 | 5.0 / 20.0 / 20.0 / 900 | 2.0 / 8.0 / 50.0 / 5,000 |"), "{md}");
    // A thread count one variant did not run reads "-" there.
    assert!(md.contains("| 32 | - | 3.0 / 9.0 / 60.0 / 6,000 |"), "{md}");
    assert!(md.contains("| B read | B update |"), "an operation type a column: {md}");
    assert!(md.contains("| volumes | hash get |"), "kvbench's rows are volumes: {md}");
}
