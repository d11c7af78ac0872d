//! A new volume's WAL area is sized from the options, and the volume starts small and grows.
//!
//! Before: every new volume reserved a 256 MiB WAL area and 64 slots whatever the options
//! (about 340 MB for a store of two keys), and a large write buffer needed the command line's
//! own sizing (`fit_volume`) to get WAL groups that hold a whole memtable. Now, with
//! `volume.layout.wal_bytes` left at 0, `Db::open` gives a new volume two metadata pages and
//! `max_write_buffer_number + 1` groups of `write_buffer_bytes * 3/2` each (of the tuner's
//! largest batch * 3/2 where the tuner grows the batch, as it does by default), and pre-allocates
//! `INITIAL_SLOTS_DEFAULT` slots; an explicit `wal_bytes` is kept as given. An existing volume
//! keeps the layout its header records: reopened with another write buffer it still works,
//! its batches bounded by the WAL group it has.
//!
//! The WAL area takes disk space only for what it holds. Before: a new volume file was
//! pre-allocated whole, WAL area included, so a default store of two keys took about 308 MB
//! on disk where RocksDB takes kilobytes. Now the WAL area of a new volume file is a hole;
//! the WAL allocates its metadata pages and the active group 4 MiB at a time as it writes,
//! releases a freed group's storage (keeping one free group allocated for reuse), and at open
//! releases every group once the replay is committed.

use shale_lsm::batch::WriteBatch;
use shale_lsm::options::INITIAL_SLOTS_DEFAULT;
use shale_lsm::{Db, Error, Options, TunerMode, TunerOptions, WalTail, WriteOptions};

/// Default options except the write buffer, no WAL tail file in /dev/shm, and no tuner (a
/// tuner that grows the batch sizes the WAL groups for its largest batch; checked apart).
fn defaults_with_write_buffer(write_buffer_bytes: usize) -> Options {
    Options {
        write_buffer_bytes,
        wal_tail: WalTail::Off,
        tuner: TunerOptions { mode: TunerMode::Off, ..TunerOptions::default() },
        ..Options::default()
    }
}

fn volume_file_bytes(dir: &std::path::Path) -> u64 {
    std::fs::metadata(dir.join(shale_space::VOLUME_FILE_NAME)).unwrap().len()
}

/// Bytes the file system has allocated to the volume file (`du`).
fn volume_disk_bytes(dir: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(dir.join(shale_space::VOLUME_FILE_NAME)).unwrap().blocks() * 512
}

/// Disk bytes of the WAL area (FIEMAP: allocated extents, written or not).
fn wal_disk_bytes(dir: &std::path::Path, l: &shale_space::Layout) -> u64 {
    let path = dir.join(shale_space::VOLUME_FILE_NAME);
    shale_testkit::allocated_bytes_in(&path, l.wal_offset..l.slot_offset).unwrap()
}

/// Room for the file system's own blocks (extent tree) in a disk usage.
const FS_SLACK_BYTES: u64 = 64 << 10;

#[test]
fn a_new_store_with_default_options_sizes_its_wal_area_from_the_write_buffer() {
    // The defaults themselves: 64 MiB memtables, 2 of them and a spare group, each group
    // room for the largest memtable and half again: 768 MiB for the tuner's largest batch
    // (512 MiB), 96 MiB without the tuner. Address space: storage comes as groups are used.
    let defaults = Options::default();
    assert_eq!(defaults.volume.layout.wal_bytes, 0, "the default derives the WAL area");
    assert_eq!(defaults.volume_options().layout.wal_bytes, 8192 + 3 * (768 << 20));
    let untuned = defaults_with_write_buffer(defaults.write_buffer_bytes);
    assert_eq!(untuned.volume_options().layout.wal_bytes, 8192 + 3 * (96 << 20));

    let dir = tempfile::tempdir().unwrap();
    let o = defaults_with_write_buffer(1 << 20);
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let l = db.volume().layout();
    assert_eq!(l.wal_bytes, 8192 + 3 * (3 << 19), "two metadata pages, 3 groups of 1.5 MiB");
    assert_eq!(l.wal_bytes, o.derived_wal_bytes());
    assert_eq!(l.version_log_bytes, o.volume.layout.version_log_bytes);
    // Small at first: the areas and a few slots.
    assert_eq!(volume_file_bytes(dir.path()), l.capacity_for(INITIAL_SLOTS_DEFAULT));
    // A memtable's worth of batches fits one WAL group: writing 1 MiB of data makes exactly
    // the flushes the memtable size asks for, none cut short by a full WAL group.
    let value = vec![b'v'; 1000];
    for i in 0..3000u32 {
        db.put(format!("key{i:06}").as_bytes(), &value).unwrap();
    }
    db.flush().unwrap();
    let flushes = db.stats().flushes;
    assert!(flushes <= 5, "{flushes} flushes for about 3.5 MiB of memtable footprint");
    db.close().unwrap();

    // An explicit size is kept as it is.
    let dir = tempfile::tempdir().unwrap();
    let mut o = defaults_with_write_buffer(1 << 20);
    o.volume.layout.wal_bytes = 8 << 20;
    let db = Db::open(dir.path(), o).unwrap();
    assert_eq!(db.volume().layout().wal_bytes, 8 << 20);
    db.close().unwrap();
}

#[test]
fn a_new_volume_starts_small_and_grows_as_it_fills() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = defaults_with_write_buffer(256 << 10);
    o.volume.layout.slot_bytes = 64 << 10;
    o.target_file_size_base = 256 << 10;
    o.volume.grow_slots_min = 8;
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let l = db.volume().layout();
    let first = volume_file_bytes(dir.path());
    assert_eq!(first, l.capacity_for(INITIAL_SLOTS_DEFAULT));
    let value = vec![b'x'; 500];
    for i in 0..20_000u32 {
        db.put(format!("key{i:06}").as_bytes(), &value).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compaction().unwrap();
    let grown = volume_file_bytes(dir.path());
    let slots = db.volume().slot_usage().total;
    assert!(grown > first && grown == l.capacity_for(slots), "{first} -> {grown} ({slots})");
    db.close().unwrap();
    let db = Db::open(dir.path(), o).unwrap();
    assert_eq!(db.get(b"key019999").unwrap(), Some(value));
    db.check().unwrap();
    db.close().unwrap();
}

#[test]
fn a_store_reopened_with_another_write_buffer_keeps_its_layout_and_works() {
    let dir = tempfile::tempdir().unwrap();
    let small = defaults_with_write_buffer(256 << 10);
    let db = Db::open(dir.path(), small.clone()).unwrap();
    let layout = db.volume().layout();
    db.put(b"first", b"1").unwrap();
    db.close().unwrap();

    // A write buffer 16 times larger: its derived WAL area would be 16 times larger too, but
    // the volume keeps the one it was made with.
    let big = defaults_with_write_buffer(4 << 20);
    assert!(big.derived_wal_bytes() > layout.wal_bytes);
    let db = Db::open(dir.path(), big.clone()).unwrap();
    assert_eq!(db.volume().layout(), layout);
    assert_eq!(db.get(b"first").unwrap(), Some(b"1".to_vec()));
    // Batches are bounded by the WAL group the volume has (half of a quarter of the area,
    // `batch_limit`), not by the new memtable's half.
    let group_limit = (layout.wal_bytes / 4 / 2) as usize;
    let mut too_big = WriteBatch::new();
    too_big.put(b"big", &vec![b'b'; group_limit]);
    assert!(matches!(
        db.write(&too_big, &WriteOptions::default()),
        Err(Error::InvalidArgument(m)) if m.contains("limit")
    ));
    let mut fits = WriteBatch::new();
    fits.put(b"fits", &vec![b'f'; group_limit / 2]);
    db.write(&fits, &WriteOptions { sync: true }).unwrap();
    // Many memtables' worth through the small groups: each full group seals its memtable.
    let value = vec![b'v'; 2000];
    for i in 0..4000u32 {
        db.put(format!("key{i:05}").as_bytes(), &value).unwrap();
    }
    db.close().unwrap();

    // And back to the first options, and to a smaller buffer still.
    for o in [small, defaults_with_write_buffer(64 << 10)] {
        let db = Db::open(dir.path(), o).unwrap();
        assert_eq!(db.volume().layout(), layout);
        assert_eq!(db.get(b"fits").unwrap().map(|v| v.len()), Some(group_limit / 2));
        assert_eq!(db.get(b"key03999").unwrap(), Some(value.clone()));
        db.put(b"again", b"2").unwrap();
        db.check().unwrap();
        db.close().unwrap();
    }
}

#[test]
fn a_new_default_store_takes_disk_space_for_what_its_wal_holds_not_for_its_wal_area() {
    let dir = tempfile::tempdir().unwrap();
    // The defaults, tuner included: a WAL area of 2.25 GiB (groups for 512 MiB batches).
    let o = Options { wal_tail: WalTail::Off, ..Options::default() };
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let l = db.volume().layout();
    assert_eq!(l.wal_bytes, 8192 + 3 * (768 << 20));
    for i in 0..10u32 {
        db.write(&one_put(i), &WriteOptions { sync: i % 2 == 0 }).unwrap();
    }
    // The metadata pages and the first 4 MiB of the active group: the rest is a hole.
    let wal_allocated = 8192 + (4 << 20);
    assert_eq!(db.stats().wal_bytes_allocated, wal_allocated);
    let (wal_disk, disk) = (wal_disk_bytes(dir.path(), &l), volume_disk_bytes(dir.path()));
    assert!(wal_disk <= wal_allocated + FS_SLACK_BYTES, "WAL area: {wal_disk} bytes on disk");
    assert!(disk < l.wal_bytes / 8, "{disk} bytes on disk for a WAL area of {}", l.wal_bytes);
    assert_eq!(volume_file_bytes(dir.path()), l.capacity_for(INITIAL_SLOTS_DEFAULT));

    // Dropped without close (as a process crash leaves it, plus a WAL sync): the records are
    // only in the WAL, which the reopen replays, flushes and releases.
    drop(db);
    let db = Db::open(dir.path(), o).unwrap();
    for i in 0..10u32 {
        assert_eq!(db.get(&key_of(i)).unwrap(), Some(value_of(i)), "key {i}");
    }
    assert_eq!(db.stats().wal_bytes_allocated, 8192);
    assert!(wal_disk_bytes(dir.path(), &l) <= 8192 + FS_SLACK_BYTES);
    db.check().unwrap();
    db.close().unwrap();
}

#[test]
fn freed_wal_groups_are_released_and_a_crash_after_cycling_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // 7 groups of 1.5 MiB (1 MiB memtables, 6 of them).
    let mut o = defaults_with_write_buffer(1 << 20);
    o.max_write_buffer_number = 6;
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let l = db.volume().layout();
    let group_bytes = 3 << 19;
    assert_eq!(l.wal_bytes, 8192 + 7 * group_bytes);
    let value = vec![b'v'; 1000];
    let put = |i: u32| db.put(format!("key{i:06}").as_bytes(), &value).unwrap();
    for i in 0..20_000u32 {
        put(i);
    }
    db.flush().unwrap();
    let flushes = db.stats().flushes;
    assert!(flushes >= 14, "{flushes} flushes: the groups must be recycled, twice over");
    // Every sealed memtable is flushed, and its group freed by the flush (no writer held the
    // WAL). What stays: the active group and the metadata pages; the freed groups, written
    // without sync, keep nothing.
    assert!(db.stats().wal_bytes_allocated <= 8192 + group_bytes);
    put(20_000);
    // A free this write made (a flush committed while a writer held the WAL) gives the group
    // back on the WAL's release thread: wait for it.
    db.wait_for_compaction().unwrap();
    let allocated = db.stats().wal_bytes_allocated;
    assert_eq!(allocated, 8192 + group_bytes);
    let wal_disk = wal_disk_bytes(dir.path(), &l);
    assert!(wal_disk <= allocated + FS_SLACK_BYTES, "WAL area: {wal_disk} bytes on disk");

    // More writes, then dropped without close: the unflushed memtable is only in the WAL.
    for i in 20_001..25_000u32 {
        put(i);
    }
    drop(db);
    let db = Db::open(dir.path(), o).unwrap();
    for i in (0..25_000u32).step_by(97).chain([24_999]) {
        assert_eq!(db.get(format!("key{i:06}").as_bytes()).unwrap(), Some(value.clone()));
    }
    // Replayed, committed, every group released; the new active group's first pages.
    assert_eq!(db.stats().wal_bytes_allocated, 8192);
    assert!(wal_disk_bytes(dir.path(), &l) <= 8192 + FS_SLACK_BYTES);
    db.check().unwrap();
    db.close().unwrap();
}

#[test]
fn opening_a_volume_whose_wal_area_is_allocated_whole_releases_it() {
    // As an older shale made it: the whole file allocated, WAL area included.
    let dir = tempfile::tempdir().unwrap();
    let o = defaults_with_write_buffer(1 << 20);
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let l = db.volume().layout();
    db.put(b"k", b"v").unwrap();
    db.close().unwrap();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join(shale_space::VOLUME_FILE_NAME))
        .unwrap();
    let len = i64::try_from(volume_file_bytes(dir.path())).unwrap();
    use std::os::fd::AsRawFd;
    // SAFETY: fallocate reads its integer arguments only; the file is open.
    assert_eq!(unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) }, 0);
    drop(file);
    assert!(wal_disk_bytes(dir.path(), &l) >= l.wal_bytes);
    let db = Db::open(dir.path(), o).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
    assert!(wal_disk_bytes(dir.path(), &l) <= 8192 + FS_SLACK_BYTES);
    db.close().unwrap();
}

fn key_of(i: u32) -> Vec<u8> {
    format!("key{i}").into_bytes()
}

fn value_of(i: u32) -> Vec<u8> {
    format!("value{i}").into_bytes()
}

fn one_put(i: u32) -> WriteBatch {
    let mut b = WriteBatch::new();
    b.put(&key_of(i), &value_of(i));
    b
}

#[test]
fn a_freed_group_keeps_only_the_pages_sync_writes_used() {
    let dir = tempfile::tempdir().unwrap();
    // Groups of 48 MiB (32 MiB memtables); one memtable of about 30 MB of records.
    let o = defaults_with_write_buffer(32 << 20);
    let db = Db::open(dir.path(), o).unwrap();
    let l = db.volume().layout();
    let value = vec![b'w'; 1000];
    for i in 0..30_000u32 {
        db.put(format!("key{i:06}").as_bytes(), &value).unwrap();
    }
    db.flush().unwrap();
    assert_eq!(db.stats().flushes, 1, "one memtable, one group");
    // Written without sync, the freed group keeps nothing (it kept 16 MiB before, and the
    // whole group before that): the metadata pages are all the WAL holds, as a RocksDB
    // store holds no log once it flushed.
    assert_eq!(db.stats().wal_bytes_allocated, 8192, "{:?}", db.stats());
    assert!(wal_disk_bytes(dir.path(), &l) <= 8192 + FS_SLACK_BYTES);

    // Sync writes: each takes a page of its own (a synced page is never rewritten). The
    // group they used keeps those pages once freed, for the next sync writes to overwrite
    // written pages rather than fill fresh ones.
    for i in 0..1_000u32 {
        db.write(&one_put(i), &WriteOptions { sync: true }).unwrap();
    }
    db.flush().unwrap();
    let kept = db.stats().wal_bytes_allocated - 8192;
    let kept_max = u64::from(shale_lsm::wal::KEPT_GROUP_PAGES_MAX) * 4096;
    assert!((1_000 * 4096..=kept_max).contains(&kept), "{kept} bytes kept");
    assert!(wal_disk_bytes(dir.path(), &l) <= 8192 + kept + FS_SLACK_BYTES);
    // The group after it started before the flush freed it, in another group, which gets
    // storage 4 MiB at a time ahead of its writes.
    db.put(b"after", b"flush").unwrap();
    db.wait_for_compaction().unwrap();
    assert_eq!(db.stats().wal_bytes_allocated, 8192 + kept + (4 << 20));
    assert_eq!(db.get(b"key012345").unwrap(), Some(value));
    db.check().unwrap();
    db.close().unwrap();
}

#[test]
fn on_a_device_that_cannot_grow_the_tuners_wal_area_takes_at_most_an_eighth_of_it() {
    use std::sync::Arc;
    // 1 MiB memtables: groups for the tuner's 8 MiB batches make a WAL area of 36 MiB and
    // two pages; for the write buffer alone, 4.5 MiB and two pages.
    let o = Options { write_buffer_bytes: 1 << 20, wal_tail: WalTail::Off, ..Options::default() };
    let tuned = o.derived_wal_bytes();
    let untuned = defaults_with_write_buffer(1 << 20).derived_wal_bytes();
    assert_eq!((tuned, untuned), (8192 + 3 * (12 << 20), 8192 + 3 * (3 << 19)));
    for (device_bytes, wal_bytes) in [(128u64 << 20, untuned), (512 << 20, tuned)] {
        let dev = Arc::new(shale_io::SimDevice::new(device_bytes, 4096, 1).unwrap());
        assert!(!shale_io::Device::info(&*dev).growable);
        let db = Db::open_device(dev.clone(), o.clone()).unwrap();
        assert_eq!(db.volume().layout().wal_bytes, wal_bytes, "device of {device_bytes} bytes");
        for i in 0..3000u32 {
            db.put(format!("key{i:05}").as_bytes(), &[b'v'; 1000]).unwrap();
        }
        db.close().unwrap();
        // Reopened: the layout its header records, every key back.
        let db = Db::open_device(dev, o.clone()).unwrap();
        assert_eq!(db.volume().layout().wal_bytes, wal_bytes);
        assert_eq!(db.get(b"key02999").unwrap(), Some(vec![b'v'; 1000]));
        db.check().unwrap();
    }
}
