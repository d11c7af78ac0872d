//! A new volume's WAL area is sized from the options, and the volume starts small and grows.
//!
//! Before: every new volume reserved a 256 MiB WAL area and 64 slots whatever the options
//! (about 340 MB for a store of two keys), and a large write buffer needed the command line's
//! own sizing (`fit_volume`) to get WAL groups that hold a whole memtable. Now, with
//! `volume.layout.wal_bytes` left at 0, `Db::open` gives a new volume two metadata pages and
//! `max_write_buffer_number + 1` groups of `write_buffer_bytes * 3/2` each, and pre-allocates
//! `INITIAL_SLOTS_DEFAULT` slots; an explicit `wal_bytes` is kept as given. An existing volume
//! keeps the layout its header records: reopened with another write buffer it still works,
//! its batches bounded by the WAL group it has.

use shale_lsm::batch::WriteBatch;
use shale_lsm::options::INITIAL_SLOTS_DEFAULT;
use shale_lsm::{Db, Error, Options, WalTail, WriteOptions};

/// Default options except the write buffer, and no WAL tail file in /dev/shm.
fn defaults_with_write_buffer(write_buffer_bytes: usize) -> Options {
    Options { write_buffer_bytes, wal_tail: WalTail::Off, ..Options::default() }
}

fn volume_file_bytes(dir: &std::path::Path) -> u64 {
    std::fs::metadata(dir.join(shale_space::VOLUME_FILE_NAME)).unwrap().len()
}

#[test]
fn a_new_store_with_default_options_sizes_its_wal_area_from_the_write_buffer() {
    // The defaults themselves: 64 MiB memtables, 2 of them and a spare group, 96 MiB a group.
    let defaults = Options::default();
    assert_eq!(defaults.volume.layout.wal_bytes, 0, "the default derives the WAL area");
    assert_eq!(defaults.volume_options().layout.wal_bytes, 8192 + 3 * (96 << 20));

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
