//! `bench/lib/scaling_chart.py`, which draws bench/scaling.sh's medians: one SVG per part, a
//! line per variant through its points, a failed run's median ("-") left out rather than
//! drawn as zero. Needs python3, as test.sh's Python checks do.

use std::path::Path;

#[test]
fn one_chart_per_part_and_a_line_per_variant() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("scaling.csv");
    std::fs::write(
        &csv,
        "part,variant,threads,ops_per_s\n\
         fillsync,rocksdb,1,1000\nfillsync,rocksdb,16,9000\n\
         fillsync,shale,1,1500\nfillsync,shale,16,-\nfillsync,shale,64,20000\n\
         table,ycsb-c,2,300000\ntable,ycsb-c,16,900000\n",
    )
    .unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/lib/scaling_chart.py");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg(&csv)
        .arg(dir.path())
        .output()
        .expect("python3 runs (bench/lib/scaling_chart.py needs it)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
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
