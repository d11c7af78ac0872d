//! Read-only opens (issue #9, items 6 and 7): `Db::open_read_only` writes nothing, not even
//! recovery's writes (the WAL is replayed into memory, the WAL tail read and kept), refuses
//! every write with `Error::ReadOnly`, and so works on a read-only mount and on a full file
//! system, where a read-write open fails with an error that says why (and names the size it
//! could not get).
//!
//! The mounts are real: a read-only bind mount and a small tmpfs, made with mount(8) as root.
//! Where mounting is impossible (not root, no mount namespace) a test prints why and returns,
//! or fails where `SHALE_REQUIRE_PREREQS=1` (`shale_testkit::prerequisite`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

use shale_lsm::{Db, Error, Options, WalTail, WriteOptions};

/// A mount made for a test, lazily unmounted when dropped.
struct Mount {
    at: PathBuf,
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.at).status();
    }
}

fn run(args: &[&str]) -> Result<(), String> {
    let out = Command::new(args[0]).args(&args[1..]).output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{args:?}: {}", String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// `src` bind-mounted read-only at `at`, or why not.
fn read_only_bind(src: &Path, at: &Path) -> Result<Mount, String> {
    let (s, a) = (src.to_str().unwrap(), at.to_str().unwrap());
    run(&["mount", "--bind", s, a])?;
    let m = Mount { at: at.to_path_buf() };
    run(&["mount", "-o", "remount,bind,ro", a])?;
    Ok(m)
}

/// A tmpfs of `bytes` at `at`, or why not.
fn small_tmpfs(at: &Path, bytes: u64) -> Result<Mount, String> {
    let size = format!("size={bytes}");
    run(&["mount", "-t", "tmpfs", "-o", &size, "tmpfs", at.to_str().unwrap()])?;
    Ok(Mount { at: at.to_path_buf() })
}

/// Every file under `dir` with its bytes.
fn contents(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(contents(&p));
        } else {
            out.insert(p.clone(), std::fs::read(&p).unwrap());
        }
    }
    out
}

fn options(tails: &Path) -> Options {
    let mut o = Options::small_for_tests();
    o.wal_tail = WalTail::Dir(tails.to_path_buf());
    o
}

fn key(k: u32) -> Vec<u8> {
    format!("key{k:06}").into_bytes()
}

/// A store with some keys flushed to SSTs and later ones only in the WAL (and its tail).
fn make_store(dir: &Path, tails: &Path) {
    let db = Db::open(dir, options(tails)).unwrap();
    for k in 0..500 {
        db.put(&key(k), &[7u8; 300]).unwrap();
    }
    db.flush().unwrap();
    for k in 500..800 {
        db.write(&one(k), &WriteOptions { sync: k % 100 == 0 }).unwrap();
    }
    drop(db); // not closed: the last writes stay in the WAL, to be replayed
}

fn one(k: u32) -> shale_lsm::WriteBatch {
    let mut b = shale_lsm::WriteBatch::new();
    b.put(&key(k), &[7u8; 300]);
    b
}

fn assert_all_there(db: &Db, n: u32) {
    for k in 0..n {
        assert_eq!(db.get(&key(k)).unwrap(), Some(vec![7u8; 300]), "key {k}");
    }
}

fn assert_read_only(e: Result<(), Error>, what: &str) {
    match e {
        Err(Error::ReadOnly(why)) => assert!(why.contains("open_read_only"), "{what}: {why}"),
        other => panic!("{what}: expected ReadOnly, got {other:?}"),
    }
}

#[test]
fn a_read_only_open_writes_nothing_and_refuses_writes() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let tails = tempfile::tempdir().unwrap();
    make_store(dir.path(), tails.path());
    let before = (contents(dir.path()), contents(tails.path()));
    let db = Db::open_read_only(dir.path(), options(tails.path())).unwrap();
    assert_all_there(&db, 800);
    assert_read_only(db.put(b"k", b"v"), "put");
    assert_read_only(db.delete(b"k"), "delete");
    assert_read_only(db.delete_range(b"a", b"b"), "delete_range");
    assert_read_only(db.flush(), "flush");
    assert_read_only(db.compact_range(), "compact_range");
    assert_read_only(db.set_write_buffer_bytes(1 << 20), "set_write_buffer_bytes");
    assert_read_only(db.set_target_file_size(1 << 20), "set_target_file_size");
    assert_read_only(db.set_background_jobs(4), "set_background_jobs");
    db.wait_for_compaction().unwrap();
    let report = db.check().unwrap();
    assert!(report.ssts >= 1, "{report:?}");
    db.close().unwrap();
    let db = Db::open_read_only(dir.path(), options(tails.path())).unwrap();
    drop(db);
    assert_eq!((contents(dir.path()), contents(tails.path())), before, "a read-only open wrote");
    // The writer after it recovers the same writes.
    let db = Db::open(dir.path(), options(tails.path())).unwrap();
    assert_all_there(&db, 800);
    db.close().unwrap();
}

#[test]
fn a_read_only_open_creates_nothing() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    match Db::open_read_only(&missing, Options::small_for_tests()) {
        Err(Error::Io(e)) => assert!(e.to_string().contains("does not exist"), "{e}"),
        other => panic!("expected Io (not found), got {:?}", other.err()),
    }
    assert!(!missing.exists());
    match Db::open_read_only(dir.path(), Options::small_for_tests()) {
        Err(Error::InvalidArgument(why)) => assert!(why.contains("holds no store"), "{why}"),
        other => panic!("expected InvalidArgument, got {:?}", other.err()),
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "a read-only open made a file");
}

/// Item 6: `inspect` (and the engine's recovery) failed on a read-only mount with "device
/// write failed at byte offset 0: Read-only file system".
#[test]
fn a_read_only_mount_failed_to_open() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let tails = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    make_store(&store, tails.path());
    let at = tempfile::tempdir().unwrap();
    let bound = read_only_bind(&store, at.path());
    let Some(_mount) = shale_testkit::prerequisite::require("a read-only bind mount", bound) else {
        return;
    };
    let before = contents(&store);
    // The tail is on a writable file system; a read-only open leaves it as it is anyway.
    let tails_before = contents(tails.path());
    for path in [at.path().to_path_buf(), at.path().join(shale_space::VOLUME_FILE_NAME)] {
        let db = Db::open_read_only(&path, options(tails.path())).unwrap();
        assert_all_there(&db, 800);
        db.check().unwrap();
        assert_read_only(db.put(b"k", b"v"), "put on a read-only mount");
        drop(db);
        match Db::open(&path, options(tails.path())) {
            Err(Error::ReadOnly(why)) => {
                assert!(why.contains("read-only file system"), "{why}");
                assert!(why.contains("open_read_only"), "{why}");
            }
            other => panic!("read-write open on a read-only mount: {:?}", other.err()),
        }
    }
    assert_eq!(contents(&store), before);
    assert_eq!(contents(tails.path()), tails_before);
}

/// Fills the file system holding `dir` to the last byte it gives.
fn fill(dir: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(dir.join("filler")).unwrap();
    for chunk in [1 << 20, 64 << 10, 4 << 10, 512] {
        while f.write_all(&vec![1u8; chunk]).is_ok() {}
    }
    let _ = f.sync_all();
}

/// Item 7: after ENOSPC stopped the store, it could not be opened at all, not even to read.
#[test]
fn a_full_file_system_refused_even_a_read() {
    let _serial = common::serial();
    let at = tempfile::tempdir().unwrap();
    let tails = tempfile::tempdir().unwrap();
    let tmpfs = small_tmpfs(at.path(), 24 << 20);
    let Some(_mount) = shale_testkit::prerequisite::require("a tmpfs mount", tmpfs) else {
        return;
    };
    let store = at.path().join("store");
    let db = Db::open(&store, options(tails.path())).unwrap();
    fill(at.path());
    // Writes go on until the volume must grow and cannot: the store stops (P5).
    let mut acked = 0u32;
    let stopped = loop {
        match db.write(&one(acked), &WriteOptions { sync: acked % 50 == 0 }) {
            Ok(()) => acked += 1,
            Err(e) => break e,
        }
        assert!(acked < 1_000_000, "the store never filled the file system");
    };
    assert!(matches!(stopped, Error::NoSpace(_) | Error::Stopped(_)), "{stopped}");
    drop(db);
    let before = contents(at.path());
    let db = Db::open_read_only(&store, options(tails.path())).unwrap();
    assert_all_there(&db, acked);
    db.check().unwrap();
    drop(db);
    assert_eq!(contents(at.path()), before, "a read-only open wrote on a full file system");
    // A read-write open either finds room for its recovery or says it cannot get the size.
    match Db::open(&store, options(tails.path())) {
        Ok(db) => {
            println!("the read-write open found room for its recovery");
            assert_all_there(&db, acked);
        }
        Err(Error::NoSpace(why)) => {
            println!("the read-write open said: {why}");
            assert!(why.contains("volume.shale"), "{why}");
            assert!(why.contains("bytes"), "{why}");
        }
        Err(e) => panic!("read-write open on a full file system: {e}"),
    }
}

/// Item 7: a new store on a full file system says which file could not get how many bytes.
#[test]
fn a_new_store_on_a_full_file_system_names_the_size() {
    let _serial = common::serial();
    let at = tempfile::tempdir().unwrap();
    let tmpfs = small_tmpfs(at.path(), 4 << 20);
    let Some(_mount) = shale_testkit::prerequisite::require("a tmpfs mount", tmpfs) else {
        return;
    };
    std::fs::create_dir(at.path().join("store")).unwrap();
    fill(at.path());
    let store = at.path().join("store");
    match Db::open(&store, Options::small_for_tests()) {
        Err(Error::NoSpace(why)) => {
            assert!(why.contains("cannot pre-allocate"), "{why}");
            assert!(why.contains(&store.join("volume.shale").display().to_string()), "{why}");
            assert!(why.contains("No space left on device"), "{why}");
        }
        other => panic!("expected NoSpace, got {:?}", other.err()),
    }
    // Nothing half-made is taken for a store later: a read-only open finds no volume in it.
    assert!(Db::open_read_only(&store, Options::small_for_tests()).is_err());
}
