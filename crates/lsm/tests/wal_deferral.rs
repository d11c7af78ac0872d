//! Deferred WAL groups (`wal/mod.rs`, "Deferred groups"): writes without sync are kept in the
//! WAL tail, and a group whose memtable is flushed before anything forced it out never
//! reaches the device; a write with sync writes out everything before it. Crash safety is
//! checked elsewhere: the crash enumeration with a tail (`wal_crash_enumeration.rs`), the
//! model test's odd seeds and the SIGKILL tests; this checks that the device writes are
//! really saved, and that what was deferred reads back.

use shale_lsm::{Db, Options, WalTail, WriteBatch, WriteOptions};

fn key(i: u32) -> Vec<u8> {
    format!("key{:012}", i.wrapping_mul(2_654_435_761) % 1_000_003).into_bytes()
}

fn opts(tail_dir: &std::path::Path) -> Options {
    Options {
        write_buffer_bytes: 1 << 20,
        wal_tail: WalTail::Dir(tail_dir.to_path_buf()),
        ..Options::default()
    }
}

#[test]
fn unsynced_groups_flushed_in_time_are_never_written() {
    let (dir, tail) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let db = Db::open(dir.path(), opts(tail.path())).unwrap();
    let value = vec![b'v'; 100];
    for i in 0..40_000u32 {
        db.put(&key(i), &value).unwrap();
    }
    db.flush().unwrap();
    let s = db.stats();
    assert!(s.flushes >= 4, "the writes must span memtables: {} flushes", s.flushes);
    let user = s.user_bytes_written;
    // Every group but the last few was freed while deferred: at most a little of the log,
    // a group written out when the tail filled behind a slow flush, reaches the device.
    assert!(
        s.wal_bytes_never_written > user / 2,
        "{} of {user} bytes of records left the tail unwritten",
        s.wal_bytes_never_written
    );
    assert!(
        s.wal_bytes_written < user / 2,
        "{} bytes of WAL written for {user} bytes of records",
        s.wal_bytes_written
    );
    db.close().unwrap();
    assert_eq!(std::fs::read_dir(tail.path()).unwrap().count(), 0, "close leaves the tail");
    let db = Db::open(dir.path(), opts(tail.path())).unwrap();
    for i in (0..40_000u32).step_by(13) {
        assert_eq!(db.get(&key(i)).unwrap().as_deref(), Some(&value[..]), "key {i}");
    }
    db.check().unwrap();
}

#[test]
fn a_sync_write_writes_out_every_deferred_record_before_it() {
    let (dir, tail) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let db = Db::open(dir.path(), opts(tail.path())).unwrap();
    let value = vec![b'w'; 200];
    for i in 0..3_000u32 {
        db.put(&key(i), &value).unwrap();
    }
    let before = db.stats();
    assert!(before.wal_bytes_written < 64 << 10, "unsynced writes reached the device");
    let mut b = WriteBatch::new();
    b.put(b"synced", b"1");
    db.write(&b, &WriteOptions { sync: true }).unwrap();
    let after = db.stats();
    // The records before the sync, and the sync's own, are on the device now.
    let records = after.user_bytes_written;
    assert!(
        after.wal_bytes_written >= records,
        "{} bytes of WAL on the device after a sync, for {records} bytes of records",
        after.wal_bytes_written
    );
    assert_eq!(after.wal_bytes_never_written, 0);
    // (That the sync made them durable, not only written, is the crash enumeration's check.)
    db.close().unwrap();
    let db = Db::open(dir.path(), opts(tail.path())).unwrap();
    assert_eq!(db.get(b"synced").unwrap().as_deref(), Some(&b"1"[..]));
    for i in 0..3_000u32 {
        assert_eq!(db.get(&key(i)).unwrap().as_deref(), Some(&value[..]), "key {i}");
    }
}

#[test]
fn after_a_group_with_a_sync_write_pages_are_written_as_they_fill() {
    let (dir, tail) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let db = Db::open(dir.path(), opts(tail.path())).unwrap();
    let value = vec![b's'; 200];
    for i in 0..2_000u32 {
        db.put(&key(i), &value).unwrap();
    }
    let mut b = WriteBatch::new();
    b.put(b"synced", b"1");
    db.write(&b, &WriteOptions { sync: true }).unwrap();
    // Unsynced writes until the memtable with the sync is flushed: its group is sealed, and
    // the next one started after a group that took a sync.
    let mut i = 2_000u32;
    while db.stats().flushes == 0 {
        db.put(&key(i), &value).unwrap();
        i += 1;
        assert!(i < 200_000, "no flush");
    }
    let before = db.stats().wal_bytes_written;
    for _ in 0..2_000u32 {
        db.put(&key(i), &value).unwrap();
        i += 1;
    }
    // 2,000 records of about 230 bytes: their full pages reach the device without a sync,
    // as before deferred groups (a sync later waits for a page or two, not for them all).
    let written = db.stats().wal_bytes_written - before;
    assert!(written >= 256 << 10, "{written} bytes of WAL written for 2,000 unsynced records");
    assert_eq!(db.stats().wal_bytes_never_written, 0);
}
