//! `shale ycsb --engine table`: the table engine in LATTE's row layout loads, runs workloads
//! A and E on a kept store, and reports no errors.

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

#[test]
fn load_then_a_then_e_on_the_table_engine() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store");
    let pmem = dir.path().join("undo.pmem");
    let (db, pmem) = (db.to_str().unwrap(), pmem.to_str().unwrap());
    let common = ["--engine", "table", "--db", db, "--pmem_path", pmem, "--records", "300"];
    let run = |extra: &[&str]| {
        let flags: Vec<&str> = common.iter().chain(extra).copied().collect();
        let (ok, out, err) = shale_ycsb(&flags);
        assert!(ok, "exit status; stderr:\n{err}\nstdout:\n{out}");
        assert!(!out.contains("ERROR") && !out.contains("NOT_FOUND"), "{out}");
        out
    };
    let out = run(&["--phase", "load"]);
    assert!(out.contains("5 fields x 50 bytes") && out.contains("255 + 5 x 50"), "{out}");
    assert!(out.contains(pmem), "the undo log's file is printed:\n{out}");
    assert_eq!(value(&out, "load", "INSERT", "Return=OK"), Some(300.0), "{out}");

    let out =
        run(&["--use_existing_db", "--workload", "a", "--operations", "400", "--threads", "2"]);
    let a = "run, workload a";
    let reads = value(&out, a, "READ", "Return=OK").unwrap();
    let updates = value(&out, a, "UPDATE", "Return=OK").unwrap();
    assert_eq!(reads + updates, 400.0, "every record is found:\n{out}");

    let out = run(&["--use_existing_db", "--workload", "e", "--operations", "200"]);
    let e = "run, workload e";
    let scans = value(&out, e, "SCAN", "Return=OK").unwrap();
    let inserts = value(&out, e, "INSERT", "Return=OK").unwrap_or(0.0);
    assert_eq!(scans + inserts, 200.0, "{out}");

    // Another record layout is refused, and nothing runs.
    let (ok, _, err) = shale_ycsb(&["--engine", "table", "--fieldcount", "10"]);
    assert!(!ok && err.contains("--fieldcount 5"), "{err}");
}

#[test]
fn the_table_engine_runs_on_queue_pairs_in_each_affinity_mode() {
    let dir = tempfile::tempdir().unwrap();
    for (i, mode) in ["naive", "pair-binding", "separated", "skew"].iter().enumerate() {
        let db = dir.path().join(format!("store-{mode}"));
        let pmem = dir.path().join(format!("undo-{mode}.pmem"));
        let poller = if i % 2 == 0 { "adaptive" } else { "spin" };
        let flags = [
            "--engine",
            "table",
            "--db",
            db.to_str().unwrap(),
            "--pmem_path",
            pmem.to_str().unwrap(),
            "--records",
            "200",
            "--operations",
            "300",
            "--threads",
            "2",
            "--cache_size",
            "131072",
            "--io_queues",
            "3",
            "--io_affinity",
            mode,
            "--io_poller",
            poller,
            "--statistics",
        ];
        let (ok, out, err) = shale_ycsb(&flags);
        assert!(ok, "{mode}: exit status; stderr:\n{err}\nstdout:\n{out}");
        assert!(
            out.contains(&format!("3 queue pairs, affinity {mode}, pollers {poller}")),
            "{out}"
        );
        assert_eq!(value(&out, "load", "INSERT", "Return=OK"), Some(200.0), "{out}");
        let a = "run, workload a";
        let done = value(&out, a, "READ", "Return=OK").unwrap()
            + value(&out, a, "UPDATE", "Return=OK").unwrap();
        assert_eq!(done, 300.0, "{mode}: every record is found:\n{out}");
        assert_eq!(out.matches("# queue pair ").count(), 3, "{out}");
    }
    // Bad input is named.
    let (ok, _, err) = shale_ycsb(&["--engine", "table", "--io_queues", "2", "--io_affinity", "x"]);
    assert!(!ok && err.contains("--io_affinity") && err.contains("skew"), "{err}");
    let (ok, _, err) = shale_ycsb(&["--io_queues", "2"]);
    assert!(!ok && err.contains("--engine table"), "{err}");
    let (ok, _, err) = shale_ycsb(&["--engine", "table", "--io_queues", "65"]);
    assert!(!ok && err.contains("queue pairs"), "{err}");
}

/// The undo log on the volume by default (no file made, none in /dev/shm); in a file only
/// with `--undo_log pmem` (or `--pmem_path`), which the store then finds by itself, whose
/// loss refuses the reopen naming it, and which a copy of the store never takes.
#[test]
fn the_undo_log_is_on_the_volume_unless_persistent_memory_is_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store");
    let db_s = db.to_str().unwrap();
    let base = ["--engine", "table", "--db", db_s, "--records", "100"];
    let run = |extra: &[&str]| {
        let flags: Vec<&str> = base.iter().chain(extra).copied().collect();
        shale_ycsb(&flags)
    };
    let (ok, out, err) = run(&["--phase", "load"]);
    assert!(ok, "{err}");
    assert!(out.contains("undo log on the volume"), "{out}");
    let names: Vec<String> = std::fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["volume.shale".to_string()]);

    // Emulated persistent memory, asked for: a new file in /dev/shm, printed.
    let (ok, out, err) = run(&["--phase", "load", "--undo_log", "pmem"]);
    assert!(ok, "{err}");
    let line = out.lines().find(|l| l.contains("emulated persistent memory")).expect(&out);
    let at = line.find("/dev/shm/").expect(line);
    let pmem = std::path::PathBuf::from(line[at..].split(' ').next().unwrap());
    assert!(pmem.exists(), "{pmem:?}");
    // The store finds it again by itself.
    let (ok, out, err) = run(&["--use_existing_db", "--workload", "c", "--operations", "50"]);
    assert!(ok && out.contains(pmem.to_str().unwrap()), "{err}\n{out}");

    // A copy of the store is refused: the file is the original's, and stays.
    let copy = dir.path().join("copy");
    std::fs::create_dir(&copy).unwrap();
    std::fs::copy(db.join("volume.shale"), copy.join("volume.shale")).unwrap();
    let before = std::fs::read(&pmem).unwrap();
    let copy_s = copy.to_str().unwrap();
    let (ok, _, err) = shale_ycsb(&[
        "--engine",
        "table",
        "--db",
        copy_s,
        "--use_existing_db",
        "--workload",
        "c",
        "--operations",
        "10",
        "--records",
        "100",
    ]);
    assert!(!ok && err.contains("copy") && err.contains(pmem.to_str().unwrap()), "{err}");
    assert!(err.contains("--accept_lost_undo_log"), "{err}");
    assert_eq!(std::fs::read(&pmem).unwrap(), before);
    // Loading over the copy (a benchmark's reflex) destroys the copy, not the original's file.
    let (ok, _, err) = shale_ycsb(&["--engine", "table", "--db", copy_s, "--records", "10"]);
    assert!(ok, "{err}");
    assert!(pmem.exists());

    // A reboot removes the file: the reopen is refused, naming it.
    std::fs::remove_file(&pmem).unwrap();
    let (ok, _, err) = run(&["--use_existing_db", "--workload", "c", "--operations", "10"]);
    assert!(!ok && err.contains("missing") && err.contains(pmem.to_str().unwrap()), "{err}");
    assert!(!pmem.exists());
    // Loading anew over it takes it (the store's own, already gone).
    let (ok, _, err) = run(&["--phase", "load"]);
    assert!(ok, "{err}");
}
