//! `shale ycsb` run as a program: YCSB's report lines, the phases on a kept store, and flag
//! errors.

mod common;

fn shale_ycsb(flags: &[&str]) -> (bool, String, String) {
    let args: Vec<&str> = std::iter::once("ycsb").chain(flags.iter().copied()).collect();
    common::shale(&args)
}

/// The value of the report line `[section], label, value` in the block after `# phase`.
fn value(out: &str, phase: &str, section: &str, label: &str) -> Option<f64> {
    let block = out.split(&format!("# {phase}\n")).nth(1)?;
    let block = block.split("\n# ").next()?;
    let prefix = format!("[{section}], {label}, ");
    let line = block.lines().find(|l| l.starts_with(&prefix))?;
    Some(line[prefix.len()..].parse().expect(line))
}

/// Every line of a report block is `[NAME], Label, number`, but the tail lines after it
/// (`tails.rs` checks those).
fn assert_report_shape(out: &str) {
    let re =
        regex::Regex::new(r"^\[[A-Z-]+\], [A-Za-z0-9.=_()/]+, -?[0-9]+(\.[0-9]+(E-?[0-9]+)?)?$")
            .unwrap();
    let report = |l: &&str| !l.starts_with("# ") && ycsb::latency::TailLine::parse(l).is_none();
    for line in out.lines().filter(report) {
        assert!(re.is_match(line), "not YCSB's shape: {line:?}\n{out}");
    }
}

#[test]
fn workload_a_prints_ycsbs_report() {
    let (ok, out, err) =
        shale_ycsb(&["--workload", "a", "--records", "2000", "--operations", "2000"]);
    assert!(ok, "exit status; stderr:\n{err}");
    assert_report_shape(&out);
    assert_eq!(value(&out, "load", "INSERT", "Operations"), Some(2000.0), "{out}");
    assert_eq!(value(&out, "load", "INSERT", "Return=OK"), Some(2000.0), "{out}");
    let run = "run, workload a";
    assert!(value(&out, run, "OVERALL", "Throughput(ops/sec)").unwrap() > 0.0, "{out}");
    assert!(value(&out, run, "OVERALL", "RunTime(ms)").is_some(), "{out}");
    let reads = value(&out, run, "READ", "Operations").unwrap();
    let updates = value(&out, run, "UPDATE", "Operations").unwrap();
    assert_eq!(reads + updates, 2000.0, "{out}");
    assert!((800.0..1200.0).contains(&reads), "{out}");
    for label in [
        "AverageLatency(us)",
        "MinLatency(us)",
        "MaxLatency(us)",
        "50thPercentileLatency(us)",
        "95thPercentileLatency(us)",
        "99thPercentileLatency(us)",
        "99.9PercentileLatency(us)",
    ] {
        assert!(value(&out, run, "READ", label).is_some(), "[READ], {label}:\n{out}");
    }
    let p50 = value(&out, run, "READ", "50thPercentileLatency(us)").unwrap();
    let p99 = value(&out, run, "READ", "99thPercentileLatency(us)").unwrap();
    assert!(p50 <= p99, "{out}");
    assert_eq!(value(&out, run, "READ", "Return=OK"), Some(reads), "every read finds its record");
    assert!(!out.contains("NOT_FOUND") && !out.contains("ERROR"), "{out}");
}

#[test]
fn workload_e_scans_and_inserts() {
    let (ok, out, err) =
        shale_ycsb(&["--workload=e", "--records=1000", "--operations=300", "--threads=2"]);
    assert!(ok, "exit status; stderr:\n{err}");
    assert_report_shape(&out);
    let run = "run, workload e";
    let scans = value(&out, run, "SCAN", "Operations").unwrap();
    let inserts = value(&out, run, "INSERT", "Operations").unwrap_or(0.0);
    assert_eq!(scans + inserts, 300.0, "{out}");
    assert!(scans > 250.0, "{out}");
    assert!(value(&out, run, "SCAN", "99.9PercentileLatency(us)").is_some(), "{out}");
}

#[test]
fn load_then_run_on_a_kept_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("--db={}", dir.path().display());
    let common = ["--records=500", "--operations=500", "--fieldcount=4", "--fieldlength=50"];
    let mut load = vec!["--phase=load", &db];
    load.extend(common);
    let (ok, out, err) = shale_ycsb(&load);
    assert!(ok, "stderr:\n{err}");
    assert!(out.contains("# load\n") && !out.contains("# run"), "{out}");
    assert!(dir.path().join("volume.shale").exists(), "--db keeps the store");

    let mut run = vec!["--workload=c", "--use_existing_db", &db];
    run.extend(common);
    let (ok, out, err) = shale_ycsb(&run);
    assert!(ok, "stderr:\n{err}");
    assert!(!out.contains("# load\n"), "{out}");
    assert_eq!(value(&out, "run, workload c", "READ", "Return=OK"), Some(500.0), "{out}");
}

#[test]
fn bad_flags_and_values_are_named() {
    for (flags, named) in [
        (&["--no_such_flag=1"][..], "--no_such_flag"),
        (&["--workload=g"][..], "--workload"),
        (&["--requestdistribution=hotspot"][..], "hotspot"),
        (&["--records=many"][..], "--records"),
        (&["--threads=0"][..], "threads"),
        (&["--phase=run"][..], "--use_existing_db"),
        (&["--compression_type=snappy"][..], "snappy"),
    ] {
        let (ok, out, err) = shale_ycsb(flags);
        assert!(!ok, "{flags:?} succeeded:\n{out}");
        assert!(err.contains(named), "{flags:?}: stderr does not name {named}:\n{err}");
        assert!(!out.contains("[OVERALL]"), "{flags:?} ran:\n{out}");
    }
}

/// `--statistics` prints the store's counters after the reports, the tuner's among them.
#[test]
fn statistics_follow_the_reports() {
    let (ok, out, err) = shale_ycsb(&[
        "--workload",
        "a",
        "--records",
        "2000",
        "--operations",
        "2000",
        "--tuner",
        "adoc",
        "--statistics",
    ]);
    assert!(ok, "exit status; stderr:\n{err}");
    let (reports, statistics) = out.split_once("STATISTICS:").expect("a statistics block");
    assert_report_shape(reports);
    for counter in [
        "shale.wal.bytes COUNT : ",
        "shale.stall.pending.stop.micros COUNT : ",
        "shale.tuner.windows COUNT : ",
    ] {
        assert!(statistics.contains(counter), "{counter} missing:\n{out}");
    }
    let (ok, out, _) = shale_ycsb(&["--workload", "a", "--records", "200", "--operations", "200"]);
    assert!(ok && !out.contains("shale.wal.bytes"), "statistics only when asked:\n{out}");
}

/// Was: a run with more `--records` than were loaded answered 99% of its reads NOT_FOUND and
/// exited 0. It is refused before it starts, naming both counts.
#[test]
fn a_run_on_fewer_records_than_asked_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("--db={}", dir.path().display());
    let (ok, _, err) = shale_ycsb(&["--phase=load", "--records=300", &db]);
    assert!(ok, "{err}");
    let (ok, out, err) = shale_ycsb(&["--workload=c", "--use_existing_db", "--records=30000", &db]);
    assert!(!ok, "ran:\n{out}");
    assert!(err.contains("--records 30000") && err.contains("holds 300 records"), "{err}");
    assert!(!out.contains("[OVERALL]"), "{out}");
    // Keys made another way name no record of the store at all.
    let (ok, _, err) = shale_ycsb(&[
        "--workload=c",
        "--use_existing_db",
        "--records=300",
        "--insertorder=ordered",
        &db,
    ]);
    assert!(!ok && err.contains("holds none of the records"), "{err}");
    // As many as were loaded, or fewer: the run goes on.
    let (ok, out, err) = shale_ycsb(&["--workload=c", "--use_existing_db", "--records=300", &db]);
    assert!(ok, "{err}");
    assert_eq!(value(&out, "run, workload c", "READ", "Return=OK"), Some(1000.0), "{out}");
}
