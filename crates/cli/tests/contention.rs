//! Issue #45's contention profile, as the benchmarks print it.

#[path = "common/child.rs"]
mod child;

/// `--contention` (issue #45's profile) prints, after each benchmark of `bench`, each phase of
/// `ycsb` and each workload of `kvbench`, a line per lock or hand-off the engine went
/// through, per operation; without it, none.
#[test]
fn contention_prints_the_profile_of_each_engine() {
    let dir = tempfile::tempdir().unwrap();
    let lsm = child::run(&[
        "bench",
        "--num=2000",
        "--threads=4",
        "--benchmarks=fillsync",
        "--contention",
    ]);
    lsm.assert_ok("bench --contention");
    assert!(lsm.stdout.contains("contention lsm: write group join"), "{}", lsm.stdout);
    assert!(lsm.stdout.contains("contention lsm: WAL mutex"), "{}", lsm.stdout);
    let plain = child::run(&["bench", "--num=2000", "--benchmarks=fillseq"]);
    plain.assert_ok("bench");
    assert!(!plain.stdout.contains("contention"), "{}", plain.stdout);
    let d = dir.path().join("table").display().to_string();
    let table = child::run(&[
        "ycsb",
        "--engine=table",
        &format!("--db={d}"),
        "--records=200",
        "--operations=200",
        "--threads=2",
        "--contention",
    ]);
    table.assert_ok("ycsb --engine table --contention");
    assert!(table.stdout.contains("contention table: store mutex"), "{}", table.stdout);
    let d = dir.path().join("hash").display().to_string();
    let hash = child::run(&[
        "kvbench",
        "--engine",
        "hash",
        "--paths",
        &d,
        "--num",
        "500",
        "--workloads",
        "randfill",
        "--contention",
    ]);
    hash.assert_ok("kvbench --contention");
    assert!(hash.stdout.contains("contention hash: worker hand-off"), "{}", hash.stdout);
}
