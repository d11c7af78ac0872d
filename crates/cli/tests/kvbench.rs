//! `shale kvbench` run as a program: both engines on two instances in temporary directories,
//! every report line parsed and the operation counts added up; bad flags refused by name.

mod common;

use ycsb::kvsb::Line;

fn kvbench(flags: &[&str]) -> (bool, String, String) {
    let args: Vec<&str> = std::iter::once("kvbench").chain(flags.iter().copied()).collect();
    common::shale(&args)
}

/// Runs every workload on `engine` over two fresh directories; checks each line of the
/// report and returns the parsed lines.
fn run_two(engine: &str, num: u64, extra: &[&str]) -> Vec<Line> {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let paths = format!("{},{}", a.display(), b.display());
    let csv = dir.path().join("out.csv");
    let num = num.to_string();
    let mut flags = vec![
        "--engine",
        engine,
        "--paths",
        &paths,
        "--num",
        &num,
        "--value_size",
        "512",
        "--csv",
        csv.to_str().unwrap(),
    ];
    flags.extend_from_slice(extra);
    let (ok, out, err) = kvbench(&flags);
    assert!(ok, "exit status; stderr:\n{err}\nstdout:\n{out}");
    let lines: Vec<Line> = out
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| Line::parse(l).unwrap_or_else(|| panic!("unparsed line {l:?} in\n{out}")))
        .collect();
    // Seven workloads: two lines per instance and two for the total (throughput, write
    // amplification), a CPU line; then the session's write amplification per instance and in
    // total. Beside them, a tail line per operation type that ran, whose operations add up to
    // the throughput line's.
    let latency = |l: &&Line| matches!(l, Line::Latency { .. });
    assert_eq!(lines.iter().filter(|l| !latency(l)).count(), 7 * (3 * 2 + 1) + 3, "{out}");
    for l in &lines {
        let Line::Throughput { workload, instance, ops, .. } = l else { continue };
        let timed: u64 = lines
            .iter()
            .filter_map(|t| match t {
                Line::Latency { workload: w, instance: i, ops, .. }
                    if w == workload && i == instance =>
                {
                    Some(*ops)
                }
                _ => None,
            })
            .sum();
        assert_eq!(timed, *ops, "tail lines of {workload} {instance:?}\n{out}");
    }
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(text.lines().count(), 1 + 7 * 3 + 3, "{text}");
    lines
}

/// Per workload, the instances' operations add up to the total, and each instance did all
/// of its share.
fn check_counts(lines: &[Line], num: u64) {
    for w in ycsb::kvsb::Workload::ALL {
        let ops = |inst: Option<usize>| {
            lines.iter().find_map(|l| match l {
                Line::Throughput { workload, instance, ops, ops_per_sec, .. }
                    if workload == w.name() && *instance == inst =>
                {
                    assert!(*ops_per_sec > 0.0);
                    Some(*ops)
                }
                _ => None,
            })
        };
        let (a, b, total) = (ops(Some(0)), ops(Some(1)), ops(None));
        assert_eq!(a, Some(num), "{}", w.name());
        assert_eq!(b, Some(num), "{}", w.name());
        assert_eq!(total, Some(2 * num), "{}", w.name());
    }
    let waf_of = |name: &str| {
        lines.iter().find_map(|l| match l {
            Line::WriteAmplification { workload, instance: None, waf, user_bytes, .. }
                if workload == name =>
            {
                Some((*waf, *user_bytes))
            }
            _ => None,
        })
    };
    let fill = waf_of("seqfill");
    assert_eq!(fill.map(|f| f.1), Some(2 * num * (16 + 512)));
    // The lsm engine's records may all still be in its WAL tail (deferred WAL groups reach
    // the device only at a flush or a sync): its fill alone may have written nothing.
    assert!(fill.is_some_and(|(w, _)| w >= 0.0), "{fill:?}");
    // The session's figure is taken after a flush and compaction: every live key is on the
    // device by then (the WAL's records need not be: a flushed memtable's never are).
    let session = waf_of("session");
    let live_bytes = (2 * num * (16 + 512)) as f64;
    assert!(session.is_some_and(|(w, user)| w * user as f64 >= live_bytes), "{session:?}");
}

#[test]
fn hash_engine_on_two_instances() {
    // Stores are durable one at a time on this disk (about 1 ms each): a small count.
    let lines = run_two("hash", 600, &["--queue_depth", "4", "--pin"]);
    check_counts(&lines, 600);
}

#[test]
fn hash_engine_with_the_bounded_index() {
    let lines = run_two(
        "hash",
        600,
        &[
            "--queue_depth",
            "4",
            "--index",
            "bounded",
            "--index_cache_bytes",
            "16384",
            // The O_DIRECT read path here; the other hash run takes the page cache's.
            "--use_direct_reads",
        ],
    );
    check_counts(&lines, 600);
}

#[test]
fn lsm_engine_on_two_instances() {
    let lines = run_two("lsm", 2000, &["--threads_per_instance", "2"]);
    check_counts(&lines, 2000);
}

#[test]
fn bad_flags_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s");
    let p = p.to_str().unwrap();
    for (flags, want) in [
        (vec!["--engine", "btree", "--paths", p], "invalid value 'btree'"),
        // The flag is said once: was "--num: --num must be at least 1".
        (vec!["--engine", "hash", "--paths", p, "--num", "0"], "--num: must be at least 1"),
        (vec!["--engine", "hash", "--paths", p, "--value_size", "0"], "--value_size: 0"),
        (
            vec!["--engine", "hash", "--paths", p, "--value_size", "2097153"],
            "over the hash engine's 2097152 bytes",
        ),
        (vec!["--engine", "hash", "--paths", p, "--workloads", "ycsb-e"], "unknown workload"),
        (vec!["--engine", "lsm", "--paths", p, "--queue_depth", "8"], "--queue_depth"),
        (vec!["--engine", "hash", "--paths", p, "--key_size", "4"], "--key_size"),
        (vec!["--engine", "hash", "--paths", &format!("{p},{p}")], "named twice"),
        (vec!["--engine", "hash", "--paths", p, "--index", "paged"], "invalid value 'paged'"),
        (
            vec![
                "--engine",
                "hash",
                "--paths",
                p,
                "--index",
                "bounded",
                "--index_cache_bytes",
                "4096",
            ],
            "--index_cache_bytes: 4096",
        ),
        (vec!["--engine", "lsm", "--paths", p, "--index", "bounded"], "--index"),
        (vec!["--engine", "hash", "--paths", p, "--use_direct_reads=maybe"], "--use_direct_reads"),
    ] {
        let (ok, out, err) = kvbench(&flags);
        assert!(!ok, "{flags:?} ran:\n{out}");
        assert!(err.contains(want), "{flags:?}: {err:?} lacks {want:?}");
    }
    assert!(!std::path::Path::new(p).exists(), "a refused run made {p}");
}

/// Was: `--engine lsm` printed "write amplification : 0.0000" for a workload whose writes
/// were still in the memtable (and their records in the WAL tail in /dev/shm): the
/// workload is now charged once they are written out.
#[test]
fn lsm_fills_smaller_than_a_memtable_count_their_device_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s");
    let (ok, out, err) = kvbench(&[
        "--engine",
        "lsm",
        "--paths",
        p.to_str().unwrap(),
        "--num",
        "300",
        "--value_size",
        "512",
        "--workloads",
        "seqfill,randfill",
    ]);
    assert!(ok, "{err}");
    for w in ["seqfill", "randfill"] {
        let amp = out.lines().find_map(|l| match Line::parse(l) {
            Some(Line::WriteAmplification {
                workload,
                instance: None,
                device_bytes,
                user_bytes,
                ..
            }) if workload == w => Some((device_bytes, user_bytes)),
            _ => None,
        });
        let (device, user) = amp.unwrap_or_else(|| panic!("no {w} write amplification:\n{out}"));
        assert_eq!(user, 300 * (16 + 512), "{out}");
        assert!(device > 0, "{w}: the device bytes of its writes count:\n{out}");
    }
}

/// Without `--paths`, one instance in a temporary directory (in `TMPDIR`), removed at the end.
#[test]
fn without_paths_a_temporary_store_is_made_and_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_shale"))
        .args(["kvbench", "--engine", "lsm", "--num", "200", "--workloads", "seqfill,ycsb-c"])
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("temporary store"), "{stderr}");
    assert!(stdout.contains("(200 of 200 found)"), "{stdout}");
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0, "the temporary store was left");
}
