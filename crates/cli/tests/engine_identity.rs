//! Issue #41: tools of one engine silently replaced another engine's store (`kvbench
//! --engine hash` on a `bench` store, `bench` on a hash store, `ycsb --engine table` on
//! either), and a copy of a crashed store took the original's WAL tail. Now every tool that
//! empties a store for a benchmark refuses a store of another engine untouched, naming what
//! it is, and a copy of a store neither reads nor removes its original's tail.

#[path = "common/child.rs"]
mod child;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The engines' stores, each made by its own tool.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Lsm,
    Hash,
    Table,
}

fn make(kind: Kind, dir: &Path) {
    let d = dir.display().to_string();
    let o = match kind {
        Kind::Lsm => {
            child::run(&["bench", &format!("--db={d}"), "--num=300", "--benchmarks=fillseq"])
        }
        Kind::Hash => child::run(&[
            "kvbench",
            "--engine",
            "hash",
            "--paths",
            &d,
            "--num",
            "100",
            "--value_size",
            "100",
            "--workloads",
            "seqfill",
        ]),
        Kind::Table => child::run(&[
            "ycsb",
            "--engine",
            "table",
            "--phase",
            "load",
            &format!("--db={d}"),
            "--records=100",
        ]),
    };
    o.assert_ok(&format!("making the {kind:?} store"));
}

/// The tools that empty a store of `kind` before their benchmark, pointed at `dir`.
fn tools_of(kind: Kind, dir: &Path) -> Vec<Vec<String>> {
    let d = dir.display().to_string();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    match kind {
        Kind::Lsm => vec![
            s(&["bench", &format!("--db={d}"), "--num=100", "--benchmarks=fillseq"]),
            s(&["ycsb", "--phase=load", &format!("--db={d}"), "--records=10"]),
            s(&[
                "kvbench",
                "--engine",
                "lsm",
                "--paths",
                &d,
                "--num",
                "10",
                "--workloads",
                "seqfill",
            ]),
        ],
        Kind::Hash => vec![s(&[
            "kvbench",
            "--engine",
            "hash",
            "--paths",
            &d,
            "--num",
            "10",
            "--value_size",
            "100",
            "--workloads",
            "seqfill",
        ])],
        Kind::Table => vec![s(&[
            "ycsb",
            "--engine",
            "table",
            "--phase",
            "load",
            &format!("--db={d}"),
            "--records=10",
        ])],
    }
}

fn volume(dir: &Path) -> PathBuf {
    dir.join("volume.shale")
}

/// The first 4 KiB of a file (a volume's header copy A), if it has them.
fn head(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut b = vec![0u8; 4096];
    std::fs::File::open(path).ok()?.read_exact(&mut b).ok()?;
    Some(b)
}

/// What tells whether a file was written: its length, its modification time and its first
/// 8 KiB (a volume's two header copies, a tail's header and first records). Volumes and tails
/// are sparse files of gigabytes: reading them whole would take the test's time and memory.
fn fingerprint(path: &Path) -> (u64, std::time::SystemTime, Vec<u8>) {
    use std::io::Read;
    let meta = std::fs::metadata(path).unwrap();
    let mut b = Vec::new();
    std::fs::File::open(path).unwrap().take(8192).read_to_end(&mut b).unwrap();
    (meta.len(), meta.modified().unwrap(), b)
}

#[test]
fn a_tool_of_one_engine_refuses_another_engines_store_untouched() {
    let kinds = [Kind::Lsm, Kind::Hash, Kind::Table];
    for store in kinds {
        let dir = tempfile::tempdir().unwrap();
        make(store, dir.path());
        let before = fingerprint(&volume(dir.path()));
        for tool in kinds.into_iter().filter(|&k| k != store) {
            for args in tools_of(tool, dir.path()) {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let what = format!("{} on a {store:?} store", args.join(" "));
                let expected = match store {
                    Kind::Lsm => "an lsm store",
                    Kind::Hash => "a hash store",
                    Kind::Table => "a table store",
                };
                child::run(&args).assert_refused(&what, expected);
                assert!(
                    fingerprint(&volume(dir.path())) == before,
                    "{what}: the store's bytes changed"
                );
            }
        }
        // Its own engine's tools still empty it and start again.
        for args in tools_of(store, dir.path()).into_iter().take(1) {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            child::run(&args).assert_ok(&format!("{} on its own store", args.join(" ")));
        }
    }
}

/// Names of `/dev/shm` WAL tails of the volume in `dir`.
fn tails_of(dir: &Path) -> Vec<PathBuf> {
    let header = head(&volume(dir)).expect("the volume's header");
    let id: String = header[24..40].iter().map(|b| format!("{b:02x}")).collect();
    let prefix = format!("shale-{id}");
    let mut found: Vec<PathBuf> = std::fs::read_dir("/dev/shm")
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(&prefix))
        .collect();
    found.sort();
    found
}

/// Runs `bench` on `dir` and kills it with SIGKILL once its WAL tail exists (a fill, paced by
/// a rate limit, that would outlast the test); returns that tail (in /dev/shm).
fn killed_store(dir: &Path) -> PathBuf {
    assert!(Path::new("/dev/shm").is_dir(), "this test needs /dev/shm (the WAL tail's default)");
    let mut writer = Command::new(env!("CARGO_BIN_EXE_shale"))
        .args([
            "bench",
            &format!("--db={}", dir.display()),
            "--benchmarks=fillrandom",
            "--num=100000000",
            "--benchmark_write_rate_limit=2000000",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Waits on the event (the tail made by the store's open, its header and the trailer naming
    // the volume written: a process killed between the file's creation and those writes
    // leaves a file that is no tail yet), with a bound only against a hang.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let described = |t: &Path| {
        shale_lsm::wal::tail::describe(t).ok().flatten().is_some_and(|d| d.volume_path.is_some())
    };
    let tails = loop {
        if head(&volume(dir)).is_some_and(|b| b[..8] == *b"SHALEVOL") {
            let t = tails_of(dir);
            if !t.is_empty() && t.iter().all(|t| described(t)) {
                break t;
            }
        }
        assert!(std::time::Instant::now() < deadline, "the store made no WAL tail");
        assert!(writer.try_wait().unwrap().is_none(), "bench ended before it was killed");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    writer.kill().unwrap();
    writer.wait().unwrap();
    assert_eq!(tails.len(), 1, "the killed store left one WAL tail: {tails:?}");
    assert_eq!(tails_of(dir), tails, "the tail went away with the process");
    tails[0].clone()
}

#[test]
fn a_copy_of_a_crashed_store_leaves_the_originals_wal_tail_alone() {
    let root = tempfile::tempdir().unwrap();
    let original = root.path().join("original");
    let copy = root.path().join("copy");
    let tails = vec![killed_store(&original)];
    let tail_bytes = fingerprint(&tails[0]);
    // The usual reflex: back the directory up first, then look at the copy.
    let status = Command::new("cp").arg("-a").arg(&original).arg(&copy).status().unwrap();
    assert!(status.success());
    child::run(&[
        "bench",
        &format!("--db={}", copy.display()),
        "--use_existing_db=1",
        "--benchmarks=readseq",
        "--num=2000",
    ])
    .assert_ok("reading the copy");
    assert_eq!(tails_of(&original), tails, "opening the copy changed the tails of the volume");
    assert!(fingerprint(&tails[0]) == tail_bytes, "opening the copy changed the original's tail");
    // The original, opened again (read-write), takes its own tail back and ends with none
    // left once closed cleanly.
    child::run(&[
        "bench",
        &format!("--db={}", original.display()),
        "--use_existing_db=1",
        "--benchmarks=readseq",
        "--num=2000",
    ])
    .assert_ok("reopening the original");
    assert!(!tails[0].exists(), "the original did not take its tail back");
    // A rename keeps the tail: the store is the file, whatever its name.
    let moved = root.path().join("moved");
    std::fs::rename(&copy, &moved).unwrap();
    child::run(&[
        "bench",
        &format!("--db={}", moved.display()),
        "--use_existing_db=1",
        "--benchmarks=readseq",
        "--num=2000",
    ])
    .assert_ok("opening the renamed copy");
}

#[test]
fn orphans_lists_and_removes_the_tails_of_stores_that_are_gone() {
    let root = tempfile::tempdir().unwrap();
    // A store of another tree, gone too: `--under` leaves its tail alone.
    let other_root = tempfile::tempdir().unwrap();
    let (gone, kept) = (root.path().join("gone"), root.path().join("kept"));
    let other = other_root.path().join("other");
    let shm = [killed_store(&gone), killed_store(&kept), killed_store(&other)];
    // Listed from a directory of their own, so the test touches no other tail.
    let tails = root.path().join("tails");
    std::fs::create_dir(&tails).unwrap();
    let copies: Vec<PathBuf> = shm
        .iter()
        .map(|t| {
            let c = tails.join(t.file_name().unwrap());
            std::fs::copy(t, &c).unwrap();
            c
        })
        .collect();
    for t in &shm {
        std::fs::remove_file(t).unwrap();
    }
    std::fs::remove_dir_all(&gone).unwrap();
    std::fs::remove_dir_all(&other).unwrap();
    let dir = format!("--dir={}", tails.display());
    let listed = child::run(&["orphans", &dir]);
    listed.assert_ok("orphans");
    let line_of = |out: &str, t: &Path| {
        out.lines().find(|l| l.starts_with(&t.display().to_string())).unwrap_or("").to_string()
    };
    assert!(
        line_of(&listed.stdout, &copies[0]).contains("orphaned: nothing is at"),
        "{}",
        listed.stdout
    );
    assert!(line_of(&listed.stdout, &copies[1]).contains("kept"), "{}", listed.stdout);
    assert!(line_of(&listed.stdout, &copies[2]).contains("orphaned"), "{}", listed.stdout);
    assert!(copies.iter().all(|c| c.exists()), "listing removed something");
    let under = format!("--under={}", root.path().display());
    let removed = child::run(&["orphans", &dir, &under, "--remove"]);
    removed.assert_ok("orphans --under --remove");
    assert!(removed.stdout.contains("(1 of stores not under"), "{}", removed.stdout);
    assert!(!copies[0].exists(), "the orphan stayed");
    assert!(copies[1].exists(), "the tail of a store that is there was removed");
    assert!(copies[2].exists(), "the orphan of a store not under --under was removed");
    child::run(&["orphans", &dir, "--remove"]).assert_ok("orphans --remove");
    assert!(!copies[2].exists(), "the orphan stayed");
    assert!(copies[1].exists(), "the tail of a store that is there was removed");
}

/// Every other command that opens a store, on a store of each engine and on a foreign file:
/// `check` and `inspect` serve every engine (naming it), `checkpoint` copies every engine's
/// store into a store of the same engine, and `serve` (an lsm front end) refuses a hash or
/// table store at start, untouched; a foreign file is refused by all of them, untouched.
#[test]
fn every_command_that_opens_a_store_treats_each_engine_right() {
    let root = tempfile::tempdir().unwrap();
    for kind in [Kind::Lsm, Kind::Hash, Kind::Table] {
        let name = match kind {
            Kind::Lsm => "lsm",
            Kind::Hash => "hash",
            Kind::Table => "table",
        };
        let dir = root.path().join(name);
        make(kind, &dir);
        let d = dir.display().to_string();
        child::run(&["check", &d]).assert_ok(&format!("check of a {name} store"));
        let inspected = child::run(&["inspect", &d]);
        inspected.assert_ok(&format!("inspect of a {name} store"));
        assert!(inspected.stdout.contains(&format!("engine {name}")), "{}", inspected.stdout);
        let copy = root.path().join(format!("{name}-checkpoint"));
        child::run(&["checkpoint", &d, &copy.display().to_string()])
            .assert_ok(&format!("checkpoint of a {name} store"));
        let of_copy = child::run(&["inspect", &copy.display().to_string()]);
        of_copy.assert_ok("inspect of the checkpoint");
        assert!(of_copy.stdout.contains(&format!("engine {name}")), "{}", of_copy.stdout);
        if kind != Kind::Lsm {
            let before = fingerprint(&volume(&dir));
            let port = shale_testkit::ports::free_port().to_string();
            let served = child::run(&["serve", "--db", &d, "--port", &port]);
            served.assert_refused(&format!("serve on a {name} store"), &format!("a {name} store"));
            assert!(fingerprint(&volume(&dir)) == before, "serve wrote to a {name} store");
        }
    }
    let foreign = root.path().join("foreign.bin");
    std::fs::write(&foreign, child::noise(1 << 20)).unwrap();
    let before = std::fs::read(&foreign).unwrap();
    let f = foreign.display().to_string();
    let to = root.path().join("to").display().to_string();
    for args in [vec!["check", &f], vec!["inspect", &f], vec!["checkpoint", &f, &to]] {
        let o = child::run(&args);
        o.assert_no_panic(&args.join(" "));
        assert_eq!(o.code, Some(1), "{}: {}", args.join(" "), o.stderr);
    }
    assert!(std::fs::read(&foreign).unwrap() == before, "a command wrote to a foreign file");
}

/// The table engine's undo log in emulated persistent memory (`--undo_log pmem
/// --pmem_path`) names its store in an owner trailer: `orphans` keeps the file of a store
/// that is there, and lists and removes those whose store was deleted or replaced by a
/// copy; a file of no store's in the directory is left out, untouched.
#[test]
fn orphans_judges_the_table_engines_undo_log_files_too() {
    let root = tempfile::tempdir().unwrap();
    let shm = root.path().join("shm");
    std::fs::create_dir(&shm).unwrap();
    let store = |name: &str| {
        let dir = root.path().join(name);
        let log = shm.join(format!("{name}.pmem"));
        child::run(&[
            "ycsb",
            "--engine=table",
            "--phase=load",
            &format!("--db={}", dir.display()),
            "--records=50",
            "--undo_log=pmem",
            &format!("--pmem_path={}", log.display()),
        ])
        .assert_ok(&format!("making the table store {name}"));
        assert!(log.exists(), "no undo log file at {}", log.display());
        (dir, log)
    };
    let (gone, gone_log) = store("gone");
    let (kept, kept_log) = store("kept");
    let (replaced, replaced_log) = store("replaced");
    std::fs::remove_dir_all(&gone).unwrap();
    // A copy put in the original's place is another instance: the log is not its own.
    let copy = root.path().join("copy");
    let cp = Command::new("cp").arg("-a").arg(&replaced).arg(&copy).status().unwrap();
    assert!(cp.success());
    std::fs::remove_dir_all(&replaced).unwrap();
    std::fs::rename(&copy, &replaced).unwrap();
    let stranger = shm.join("not-a-store");
    std::fs::write(&stranger, vec![7u8; 8192]).unwrap();

    let dir = format!("--dir={}", shm.display());
    let listed = child::run(&["orphans", &dir]);
    listed.assert_ok("orphans");
    let line_of = |t: &Path| {
        let out = &listed.stdout;
        out.lines().find(|l| l.starts_with(&t.display().to_string())).unwrap_or("").to_string()
    };
    assert!(line_of(&gone_log).contains("orphaned: nothing is at"), "{}", listed.stdout);
    assert!(line_of(&kept_log).contains("table undo log"), "{}", listed.stdout);
    assert!(line_of(&kept_log).contains("kept"), "{}", listed.stdout);
    assert!(line_of(&replaced_log).contains("another copy"), "{}", listed.stdout);
    assert_eq!(line_of(&stranger), "", "{}", listed.stdout);
    child::run(&["orphans", &dir, "--remove"]).assert_ok("orphans --remove");
    assert!(!gone_log.exists() && !replaced_log.exists(), "an orphan stayed");
    assert!(kept_log.exists(), "the undo log of a store that is there was removed");
    assert!(stranger.exists(), "a file of no store's was removed");
    // The store that kept its log still opens with it.
    child::run(&[
        "ycsb",
        "--engine=table",
        "--phase=run",
        "--use_existing_db",
        &format!("--db={}", kept.display()),
        "--records=50",
        "--operations=20",
        &format!("--pmem_path={}", kept_log.display()),
    ])
    .assert_ok("reopening the kept store");
}
