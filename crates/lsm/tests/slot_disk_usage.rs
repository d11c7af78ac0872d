//! Free slots take no disk space in a volume file, as deleted SST files take none in RocksDB's
//! directory.
//!
//! Before: a volume file grew by slots while compactions held their inputs and outputs at once,
//! and slots freed afterwards kept their storage, so after `fillrandom` and `overwrite` of a
//! million keys the file held 405 MiB on disk for 135 MiB of live SSTs (RocksDB: 142 MiB).
//! Now `Volume::release` gives a freed extent's storage back (a hole), `Volume::allocate` takes
//! it again before an SST is written there, and an open gives back every free run (slots freed
//! before a crash, volumes of older versions).

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use shale_lsm::{Db, Options, WalTail};

fn volume_path(dir: &Path) -> std::path::PathBuf {
    dir.join(shale_space::VOLUME_FILE_NAME)
}

/// Bytes the file system has allocated to the volume file (`du`).
fn disk_bytes(dir: &Path) -> u64 {
    std::fs::metadata(volume_path(dir)).unwrap().blocks() * 512
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    let mut v = format!("value {i} of round {round} ").into_bytes();
    v.resize(200, b'.');
    v
}

const KEYS: u32 = 4000;
const ROUNDS: u32 = 6;

fn options() -> Options {
    Options { wal_tail: WalTail::Off, ..Options::small_for_tests() }
}

/// Overwrites every key `ROUNDS` times with flushes between, then compacts everything, so the
/// volume grows well past its live data and frees most of it.
fn churn(db: &Db) {
    for round in 0..ROUNDS {
        for i in 0..KEYS {
            db.put(&key(i), &value(i, round)).unwrap();
        }
        db.flush().unwrap();
    }
    db.compact_range().unwrap();
}

fn check_all(db: &Db, ctx: &str) {
    for i in 0..KEYS {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i, ROUNDS - 1)), "{ctx}: key {i}");
    }
}

/// Disk bytes a volume needs at most for its live SSTs: the header and version log (all that
/// lies before the WAL area), the WAL's allocated groups, the live slots, and room for the
/// file system's extent tree.
fn bound(db: &Db) -> u64 {
    let l = db.volume().layout();
    let live = u64::from(db.check().unwrap().live_slots) * l.slot_bytes;
    l.wal_offset + db.stats().wal_bytes_allocated + live + (256 << 10)
}

#[test]
fn slots_freed_by_compactions_take_no_disk_space() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    churn(&db);
    let l = db.volume().layout();
    let file_slot_bytes = std::fs::metadata(volume_path(dir.path())).unwrap().len() - l.slot_offset;
    let live = u64::from(db.check().unwrap().live_slots) * l.slot_bytes;
    assert!(
        file_slot_bytes >= 2 * live,
        "the volume grew to {file_slot_bytes} bytes of slots for {live} live: nothing to give back"
    );
    let (disk, bound) = (disk_bytes(dir.path()), bound(&db));
    assert!(disk <= bound, "{disk} bytes on disk, at most {bound} wanted");
    check_all(&db, "after compaction");
    // Slots given back are taken again: another round of churn reuses them and reads right.
    churn(&db);
    check_all(&db, "after reusing freed slots");
    db.close().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    check_all(&db, "after reopening");
    db.check().unwrap();
    db.close().unwrap();
}

#[test]
fn an_open_gives_back_the_storage_of_free_slots() {
    // As an older shale left it, or a crash between a commit and its release: the whole file
    // allocated, free slots included.
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    churn(&db);
    db.close().unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(volume_path(dir.path())).unwrap();
    let len = i64::try_from(file.metadata().unwrap().len()).unwrap();
    use std::os::fd::AsRawFd;
    // SAFETY: fallocate reads its integer arguments only; the file is open.
    assert_eq!(unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) }, 0);
    drop(file);
    let allocated_whole = disk_bytes(dir.path());
    let db = Db::open(dir.path(), options()).unwrap();
    let (disk, bound) = (disk_bytes(dir.path()), bound(&db));
    assert!(disk <= bound, "{disk} bytes on disk after the open, at most {bound} wanted");
    assert!(disk < allocated_whole, "{disk} of {allocated_whole}: nothing given back");
    check_all(&db, "after the open");
    db.close().unwrap();
    // A read-only open writes nothing, so it gives nothing back either.
    let file = std::fs::OpenOptions::new().write(true).open(volume_path(dir.path())).unwrap();
    // SAFETY: as above.
    assert_eq!(unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) }, 0);
    drop(file);
    let before = disk_bytes(dir.path());
    let db = Db::open_read_only(dir.path(), options()).unwrap();
    check_all(&db, "read-only");
    drop(db);
    assert_eq!(disk_bytes(dir.path()), before, "a read-only open changed the file");
}
