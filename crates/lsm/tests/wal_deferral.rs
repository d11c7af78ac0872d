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
fn after_a_group_with_a_sync_the_next_writes_its_pages_as_they_fill() {
    use shale_io::{QueueOptions, SimDevice};
    use shale_lsm::wal::meta::WalMeta;
    use shale_lsm::wal::{MemoryTail, TailLog, WalLayout, WalWriter};
    use shale_space::{IoClass, Volume, VolumeOptions};
    use std::sync::Arc;

    // The WAL writer alone on a simulated device, whose write count says when pages are
    // written: three groups of 86 pages, a tail of 1 MiB, records of 1,000 bytes.
    let dev = SimDevice::new(8 << 20, 4096, 1).unwrap();
    let opened = Volume::open(Arc::new(dev.clone()), &VolumeOptions::small_for_tests()).unwrap();
    let l = opened.volume.layout();
    let layout = WalLayout::new(l.wal_offset, 260 * 4096, 3).unwrap();
    let queue = opened.volume.queue(IoClass::Wal, &QueueOptions::default()).unwrap();
    let (tail, _) = TailLog::open(
        &WalTail::Memory(MemoryTail::new()),
        &shale_lsm::wal::tail::TailOwner { volume_id: *b"wal-deferral-tst", instance_id: None },
        None,
        1 << 20,
    )
    .unwrap()
    .unwrap();
    let meta = WalMeta::empty(3, layout.pages_per_group);
    let device = opened.volume.device().clone();
    let mut wal = WalWriter::new(layout, Box::new(queue), device, meta).with_tail(Some(tail));
    let rec = vec![7u8; 1000];
    let append = |wal: &mut WalWriter, n: usize, sync: bool| {
        for _ in 0..n {
            wal.append(&[&rec], sync).map_err(|e| format!("{e:?}")).unwrap();
        }
    };
    // The first group is deferred: its unsynced records write nothing; a sync writes them.
    wal.start_group(1).unwrap().unwrap();
    let w0 = dev.writes();
    append(&mut wal, 80, false);
    assert_eq!(dev.writes(), w0, "a deferred group wrote pages");
    append(&mut wal, 1, true);
    assert!(dev.writes() > w0, "a sync wrote nothing");
    // After a group that took a sync, full pages are written as they fill (80 KB: a run of
    // 16 pages at least), before any sync.
    wal.seal_group().unwrap();
    wal.start_group(2).unwrap().unwrap();
    let w1 = dev.writes();
    append(&mut wal, 80, false);
    assert!(dev.writes() > w1, "after a group with a sync, the next kept its pages back");
    // After a group without one, the next is deferred again.
    wal.seal_group().unwrap();
    wal.start_group(3).unwrap().unwrap();
    let w2 = dev.writes();
    append(&mut wal, 80, false);
    assert_eq!(dev.writes(), w2, "after a group without sync, the next wrote pages");
}

#[test]
fn memtables_the_tuner_may_grow_keep_their_groups_deferred() {
    // A store whose tuner turns the batch fills memtables eight times its write buffer. The
    // tail must hold two of those, not two write buffers: with a ring of two 4 MiB write
    // buffers (and its 16 MiB to spare), 32 MiB memtables filled it, and every record's WAL
    // page went to the device. The tuner is kept from acting (a window of a minute); the
    // batch is set as it would set it.
    use shale_lsm::{TunerMode, TunerOptions};
    let (dir, tail) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let o = Options {
        write_buffer_bytes: 4 << 20,
        tuner: TunerOptions {
            mode: TunerMode::Batch,
            window_ms: 60_000,
            batch_max: 32 << 20,
            ..TunerOptions::default()
        },
        ..opts(tail.path())
    };
    let db = Db::open(dir.path(), o.clone()).unwrap();
    db.set_write_buffer_bytes(32 << 20).unwrap();
    let value = vec![b't'; 1000];
    for i in 0..100_000u32 {
        db.put(&key(i), &value).unwrap();
    }
    db.flush().unwrap();
    let s = db.stats();
    assert!(s.flushes >= 2, "the writes must span memtables: {} flushes", s.flushes);
    let user = s.user_bytes_written;
    assert!(
        s.wal_bytes_written < user / 4,
        "{} bytes of WAL written for {user} bytes of records",
        s.wal_bytes_written
    );
    assert!(s.wal_bytes_never_written > user / 2, "{} never written", s.wal_bytes_never_written);
    db.close().unwrap();
    let db = Db::open(dir.path(), o).unwrap();
    for i in (0..100_000u32).step_by(101) {
        assert_eq!(db.get(&key(i)).unwrap().as_deref(), Some(&value[..]), "key {i}");
    }
}
