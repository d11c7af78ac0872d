//! Regressions of issue #9: what `--db` named was deleted without checking it was a shale store,
//! a store in use was deleted before its lock was found, `--use_existing_db` created a store
//! where there was none, and an absurd `--write_buffer_size` failed as "File too large"
//! without naming the option.

#[path = "common/child.rs"]
mod child;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

fn fill(dir: &Path, num: u64) {
    let db = format!("--db={}", dir.display());
    child::run(&["bench", &db, &format!("--num={num}"), "--benchmarks=fillseq"]).assert_ok("fill");
}

#[test]
fn bench_replaced_a_text_file_at_db_with_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("n.txt");
    std::fs::write(&text, b"hi\n").unwrap();
    let db = format!("--db={}", text.display());
    let o = child::run(&["bench", &db, "--num=100", "--benchmarks=fillseq"]);
    o.assert_refused("bench on a text file", "not a shale store");
    assert!(o.stderr.contains(&text.display().to_string()), "{}", o.stderr);
    assert_eq!(std::fs::read(&text).unwrap(), b"hi\n");
}

#[test]
fn bench_and_ycsb_load_replaced_a_random_file_with_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("random.bin");
    let bytes = child::noise(10 << 20);
    std::fs::write(&file, &bytes).unwrap();
    let db = format!("--db={}", file.display());
    child::run(&["bench", &db, "--num=100", "--benchmarks=fillseq"])
        .assert_refused("bench on a random file", "not a shale store");
    child::run(&["ycsb", "--phase=load", &db, "--records=10"])
        .assert_refused("ycsb load on a random file", "not a shale store");
    assert!(std::fs::read(&file).unwrap() == bytes, "the file's bytes changed");
}

#[test]
fn a_second_bench_deleted_a_store_in_use() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 1000);
    let volume = dir.path().join("volume.shale");
    let header = std::fs::read(&volume).unwrap()[..8192].to_vec();
    // The first bench holds the store, writing slowly, for longer than the checks take.
    let mut holder = Command::new(env!("CARGO_BIN_EXE_shale"))
        .args([
            "bench",
            &format!("--db={}", dir.path().display()),
            "--use_existing_db=1",
            "--benchmarks=overwrite",
            "--duration=20",
            "--benchmark_write_rate_limit=300000",
            "--num=1000",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Its header is printed once the store is open (and locked).
    let mut out = BufReader::new(holder.stdout.take().unwrap());
    let mut line = String::new();
    while !line.starts_with("DB path") {
        line.clear();
        assert_ne!(out.read_line(&mut line).unwrap(), 0, "the holder ended early");
    }
    for db in [dir.path().to_path_buf(), volume.clone()] {
        let db = format!("--db={}", db.display());
        child::run(&["bench", &db, "--num=100", "--benchmarks=fillseq"])
            .assert_refused("a second bench", "store in use");
        child::run(&["ycsb", "--phase=load", &db, "--records=10"])
            .assert_refused("ycsb load beside a bench", "store in use");
        assert!(volume.exists(), "the store in use is still there");
    }
    // The holder is still running: its store was never touched. End it as a crash would (it
    // is this test's own child), then the store must open with every key.
    assert!(holder.try_wait().unwrap().is_none(), "the holder ran through the checks");
    holder.kill().unwrap();
    holder.wait().unwrap();
    drop(out);
    assert_eq!(std::fs::read(&volume).unwrap()[..8192], header[..], "same volume");
    let db = format!("--db={}", dir.path().display());
    let o = child::run(&["bench", &db, "--use_existing_db", "--num=1000", "--benchmarks=readseq"]);
    o.assert_ok("reading the store afterwards");
    assert!(o.stdout.contains(" 1000 operations;"), "{}", o.stdout);
}

#[test]
fn use_existing_db_created_a_store_where_there_was_none() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nostore");
    let db = format!("--db={}", missing.display());
    child::run(&["bench", &db, "--use_existing_db=1", "--num=10", "--benchmarks=readrandom"])
        .assert_refused("bench --use_existing_db", "--use_existing_db: no store at");
    child::run(&["ycsb", &db, "--use_existing_db", "--records=10", "--operations=10"])
        .assert_refused("ycsb --use_existing_db", "--use_existing_db: no store at");
    assert!(!missing.exists(), "nothing was created");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let db = format!("--db={}", empty.display());
    child::run(&["bench", &db, "--use_existing_db=1", "--num=10", "--benchmarks=readrandom"])
        .assert_refused("bench --use_existing_db, empty dir", "no store at");
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0, "nothing was created");
    // A zero-filled file is no store either: it must not be formatted as one.
    let zeros = dir.path().join("zeros");
    std::fs::write(&zeros, vec![0u8; 1 << 20]).unwrap();
    let db = format!("--db={}", zeros.display());
    child::run(&["bench", &db, "--use_existing_db=1", "--num=10", "--benchmarks=readrandom"])
        .assert_refused("bench --use_existing_db, zero file", "zeros");
    assert!(std::fs::read(&zeros).unwrap().iter().all(|&b| b == 0));
}

#[test]
fn absurd_write_buffer_size_failed_as_file_too_large_without_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("--db={}", dir.path().join("s").display());
    for (flags, needle) in [
        (
            &["--write_buffer_size=1000000000000000"][..],
            "--write_buffer_size=1000000000000000 is outside 65536..=2147483648",
        ),
        (
            &["--write_buffer_size=2147483648", "--max_write_buffer_number=64"][..],
            "--write_buffer_size=2147483648",
        ),
    ] {
        let mut args = vec!["bench", &db, "--num=10", "--benchmarks=fillseq"];
        args.extend_from_slice(flags);
        let o = child::run(&args);
        o.assert_refused("absurd --write_buffer_size", needle);
        let mut ycsb = vec!["ycsb", "--phase=load", &db, "--records=10"];
        ycsb.extend_from_slice(flags);
        child::run(&ycsb)
            .assert_refused("ycsb, absurd --write_buffer_size", "--write_buffer_size=");
    }
    assert!(!dir.path().join("s").join("volume.shale").exists());
}

#[test]
fn a_store_is_emptied_and_filled_again() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("keep.txt"), b"not the store's").unwrap();
    let sub = dir.path().join("db");
    fill(&sub, 500);
    fill(&sub, 200);
    let db = format!("--db={}", sub.display());
    let o = child::run(&["bench", &db, "--use_existing_db", "--num=500", "--benchmarks=readseq"]);
    o.assert_ok("readseq");
    assert!(o.stdout.contains(" 200 operations;"), "the second fill started empty:\n{}", o.stdout);
    assert_eq!(std::fs::read(dir.path().join("keep.txt")).unwrap(), b"not the store's");
}
