//! The undo log spills to the volume when persistent memory is full: a transaction larger
//! than the persistent memory's ring commits and aborts; transactions open beside one that
//! holds the ring keep going; a crash rolls back spilled records; spilled records are
//! reclaimed once expired; a full spill area is `LogFull` with the transaction going on;
//! a damaged spilled record with a later one after it is Corruption.

mod common;

use common::*;
use shale_io::{Damage, SimDevice};
use shale_table::{Error, Isolation, SimPmem, TableOptions, TableStore, UndoLogPlace};

/// Rows of 8000 bytes of text: each update's before-image is a whole row, so eight of
/// them fill the 64 KiB ring of persistent memory.
const ROWS: u64 = 24;
const TEXT: usize = 8000;

fn opts() -> TableOptions {
    // A spill area of 256 KiB (four segments): room for about 32 such before-images.
    TableOptions { undo_spill_bytes: 256 << 10, ..small_options() }
}

fn filled(d: &SimDevice, p: &SimPmem) -> (TableStore, shale_table::TableId) {
    let store = open(d, p, &opts());
    let t = store.create_table("t", schema()).unwrap();
    for i in 0..ROWS {
        store.insert(t, &row(&key(i), &text(&key(i), 0, TEXT), i)).unwrap();
    }
    (store, t)
}

fn check_version(store: &TableStore, t: shale_table::TableId, version: impl Fn(u64) -> u64) {
    for i in 0..ROWS {
        assert_eq!(
            store.select_cell(t, &key(i), "text").unwrap(),
            Some(text(&key(i), version(i), TEXT)),
            "row {i}"
        );
    }
}

#[test]
fn a_transaction_larger_than_the_persistent_log_commits_and_aborts() {
    let d = sim(64, 1);
    let p = SimPmem::new(PMEM_BYTES);
    let (store, t) = filled(&d, &p);
    // 24 before-images of 8 KiB: three times the ring.
    let mut txn = store.begin(Isolation::ReadCommitted);
    for i in 0..ROWS {
        txn.update(t, &key(i), "text", &text(&key(i), 1, TEXT)).unwrap();
    }
    txn.commit().unwrap();
    let s = store.stats();
    assert!(s.spill.appended >= 16, "{s:?}");
    check_version(&store, t, |_| 1);
    // Expired spilled records are reclaimed: the segments of the spill area's page log
    // are free again but the current one (8 pages of 4 KiB here), whose records are
    // reclaimed once the log moves past it.
    assert!(s.spill.ring_bytes_used <= 32 << 10, "{s:?}");
    assert!(s.spill.reclaimed >= 12, "{s:?}");

    let mut txn = store.begin(Isolation::ReadCommitted);
    for i in 0..ROWS {
        txn.update(t, &key(i), "text", &text(&key(i), 2, TEXT)).unwrap();
        // A row erased and inserted anew, its records spilled: rolled back in order.
        if i % 5 == 4 {
            txn.erase(t, &key(i)).unwrap();
            txn.insert(t, &row(&key(i), b"short-lived", 0)).unwrap();
        }
    }
    txn.abort().unwrap();
    check_version(&store, t, |_| 1);
    drop(store);
    let store = open(&d, &p, &opts());
    check_version(&store, t, |_| 1);
    assert_eq!(all_rows(&store, t).len(), ROWS as usize);
    // And it spills again after the reopen.
    let mut txn = store.begin(Isolation::ReadCommitted);
    for i in 0..ROWS {
        txn.update(t, &key(i), "text", &text(&key(i), 3, TEXT)).unwrap();
    }
    txn.commit().unwrap();
    check_version(&store, t, |_| 3);
    assert!(store.stats().spill.appended >= 16);
}

#[test]
fn transactions_beside_one_that_holds_the_ring_spill_and_commit() {
    let d = sim(64, 2);
    let p = SimPmem::new(PMEM_BYTES);
    let (store, t) = filled(&d, &p);
    // The first transaction takes most of the ring and stays open.
    let mut big = store.begin(Isolation::ReadCommitted);
    for i in 0..7 {
        big.update(t, &key(i), "text", &text(&key(i), 1, TEXT)).unwrap();
    }
    // Others come and go beside it, finding no room in persistent memory.
    for round in 0..6u64 {
        let mut small = store.begin(Isolation::ReadCommitted);
        for i in 8 + round * 2..10 + round * 2 {
            small.update(t, &key(i), "text", &text(&key(i), 2, TEXT)).unwrap();
        }
        if round % 3 == 2 {
            small.abort().unwrap();
        } else {
            small.commit().unwrap();
        }
    }
    assert!(store.stats().spill.appended >= 12, "{:?}", store.stats());
    big.commit().unwrap();
    let version = |i: u64| match i {
        0..=6 => 1,
        8..=19 if (i - 8) / 2 % 3 != 2 => 2,
        _ => 0,
    };
    check_version(&store, t, version);
    drop(store);
    let store = open(&d, &p, &opts());
    check_version(&store, t, version);
}

/// A power cut with a transaction open whose records are in both logs: recovery rolls back
/// every one, from the spill area too, and the store goes on.
#[test]
fn a_crash_rolls_back_spilled_records() {
    let d = sim(64, 3);
    let p = SimPmem::beside(PMEM_BYTES, &d);
    let (store, t) = filled(&d, &p);
    let mut txn = store.begin(Isolation::ReadCommitted);
    for i in 0..ROWS {
        txn.update(t, &key(i), "text", &text(&key(i), 1, TEXT)).unwrap();
    }
    txn.erase(t, &key(3)).unwrap();
    txn.insert(t, &row(&key(100), b"new", 1)).unwrap();
    assert!(store.stats().spill.appended > 0);
    for damage in [Damage::Lose, Damage::Keep] {
        let cd = SimDevice::from_image(d.crash_image(d.writes(), damage), 4096, 9).unwrap();
        let cp = SimPmem::from_image(p.crash_image(p.events(), 9), None);
        let store = TableStore::open_device(device(&cd), cp.boxed(), opts()).unwrap();
        check_version(&store, t, |_| 0);
        assert_eq!(store.select(t, &key(100)).unwrap(), None);
        store.update(t, &key(5), "text", b"after").unwrap();
        drop(store);
        let store = open(&cd, &cp, &opts());
        assert_eq!(store.select_cell(t, &key(5), "text").unwrap(), Some(b"after".to_vec()));
    }
    drop(txn);
}

/// Rows of [`a_full_spill_area_is_log_full_and_the_transaction_goes_on`]: more
/// before-images of 8 KiB than both logs hold.
const ROWS_FULL: u64 = 100;

#[test]
fn a_full_spill_area_is_log_full_and_the_transaction_goes_on() {
    let d = sim(64, 4);
    let p = SimPmem::new(PMEM_BYTES);
    let store = open(&d, &p, &small_options()); // a spill area of 512 KiB (its least)
    let t = store.create_table("t", schema()).unwrap();
    for i in 0..ROWS_FULL {
        store.insert(t, &row(&key(i), &text(&key(i), 0, TEXT), i)).unwrap();
    }
    let mut txn = store.begin(Isolation::ReadCommitted);
    let mut full = None;
    for i in 0..ROWS_FULL {
        if let Err(e) = txn.update(t, &key(i), "text", &text(&key(i), 1, TEXT)) {
            full = Some((i, e));
            break;
        }
    }
    let (at, e) = full.expect("both logs fill");
    assert!(matches!(e, Error::LogFull { .. }), "{e:?}");
    // The ring took about 8 before-images and the spill area about 50 more: its page log
    // packs records into 4 KiB pages (two for an 8 KiB before-image), keeps the last page
    // of each of its 16 segments for a retire record, and keeps room for the transaction's
    // expiries.
    assert!(at > 40, "{at}");
    txn.commit().unwrap();
    for i in 0..ROWS_FULL {
        let version = u64::from(i < at);
        assert_eq!(
            store.select_cell(t, &key(i), "text").unwrap(),
            Some(text(&key(i), version, TEXT))
        );
    }
}

/// Damage to a spilled record that a later spilled record follows is Corruption at the
/// open, as it is in persistent memory: never a silent end of the log.
#[test]
fn a_damaged_spilled_record_is_corruption() {
    let d = sim(64, 5);
    let p = SimPmem::beside(PMEM_BYTES, &d);
    let (store, t) = filled(&d, &p);
    let mut txn = store.begin(Isolation::ReadCommitted);
    for i in 0..ROWS {
        txn.update(t, &key(i), "text", &text(&key(i), 1, TEXT)).unwrap();
    }
    let spill = store.spill_address().expect("the log spilled");
    let image = d.crash_image(d.writes(), Damage::Keep);
    // The page log packs records at any byte (`volume_undo.rs`).
    let records: Vec<u64> = (spill.start..spill.end - 8)
        .filter(|&a| &image[a as usize..a as usize + 4] == b"SHUR")
        .collect();
    assert!(records.len() > 4, "{records:?}");
    for (n, offset) in [(0, 70), (1, 20), (2, 5)] {
        let cd = SimDevice::from_image(image.clone(), 4096, 9).unwrap();
        cd.corrupt(records[n] + offset, 0x08);
        let cp = SimPmem::from_image(p.crash_image(p.events(), 9), None);
        let r = TableStore::open_device(device(&cd), cp.boxed(), opts());
        assert!(matches!(r, Err(Error::Corruption { .. })), "record {n}, byte {offset}: {r:?}");
    }
    drop(txn);
}

/// The undo log on the volume (`UndoLogPlace::Volume`): every before-image goes to the
/// volume's ring, none to persistent memory, even the small ones that would fit there; a
/// crash with a transaction open rolls it back from the volume alone; a store in a
/// directory makes no persistent memory file; and a store switched to it from persistent
/// memory still rolls back what that memory holds.
#[test]
fn with_the_undo_log_on_the_volume_no_record_goes_to_persistent_memory() {
    let on_volume = TableOptions { undo_log: UndoLogPlace::Volume, ..opts() };
    let d = sim(64, 5);
    let p = SimPmem::beside(PMEM_BYTES, &d);
    let store = open(&d, &p, &on_volume);
    let t = store.create_table("t", schema()).unwrap();
    for i in 0..ROWS {
        store.insert(t, &row(&key(i), &text(&key(i), 0, 100), i)).unwrap();
    }
    let mut txn = store.begin(Isolation::ReadCommitted);
    txn.update(t, &key(1), "text", b"uncommitted").unwrap();
    txn.erase(t, &key(2)).unwrap();
    let s = store.stats();
    assert_eq!(s.undo.appended, 0, "{s:?}");
    assert_eq!(s.spill.appended, ROWS + 2, "{s:?}");
    // Power cut: persistent memory lost whole, the volume as written.
    let cd = SimDevice::from_image(d.crash_image(d.writes(), Damage::Lose), 4096, 9).unwrap();
    let blank = SimPmem::new(PMEM_BYTES);
    let store = TableStore::open_device(device(&cd), blank.boxed(), on_volume.clone()).unwrap();
    assert_eq!(store.select_cell(t, &key(1), "text").unwrap(), Some(text(&key(1), 0, 100)));
    assert!(store.select(t, &key(2)).unwrap().is_some());
    drop(txn);
    drop(store);

    // In a directory: no undo.pmem is made.
    let dir = tempfile::tempdir().unwrap();
    let small = TableOptions { undo_log: UndoLogPlace::Volume, ..small_options() };
    let store = TableStore::open(dir.path(), small.clone()).unwrap();
    let t = store.create_table("t", schema()).unwrap();
    store.insert(t, &row(&key(7), b"x", 7)).unwrap();
    drop(store);
    assert!(!dir.path().join(shale_table::PMEM_FILE_NAME).exists());
    let store = TableStore::open(dir.path(), small).unwrap();
    assert_eq!(store.select_cell(t, &key(7), "text").unwrap(), Some(b"x".to_vec()));
    drop(store);

    // Switched from persistent memory: its records of an open transaction still roll back.
    let dir = tempfile::tempdir().unwrap();
    let pmem_opts = TableOptions {
        undo_log: UndoLogPlace::Pmem,
        space_reclaim_interval: None,
        ..small_options()
    };
    let store = TableStore::open(dir.path(), pmem_opts.clone()).unwrap();
    let t = store.create_table("t", schema()).unwrap();
    store.insert(t, &row(&key(8), b"before", 8)).unwrap();
    let mut txn = store.begin(Isolation::ReadCommitted);
    txn.update(t, &key(8), "text", b"after").unwrap();
    // Another commit writes the block the open transaction changed in place.
    store.insert(t, &row(&key(9), b"other", 9)).unwrap();
    // The process dies with the transaction open: a copy of its files as they are now.
    let copy = tempfile::tempdir().unwrap();
    for f in std::fs::read_dir(dir.path()).unwrap() {
        let f = f.unwrap();
        std::fs::copy(f.path(), copy.path().join(f.file_name())).unwrap();
    }
    drop(txn);
    drop(store);
    let on_volume = TableOptions { undo_log: UndoLogPlace::Volume, ..pmem_opts.clone() };
    let store = TableStore::open(copy.path(), on_volume).unwrap();
    assert_eq!(store.select_cell(t, &key(8), "text").unwrap(), Some(b"before".to_vec()));
    assert_eq!(store.select_cell(t, &key(9), "text").unwrap(), Some(b"other".to_vec()));
    // Read, then retired: the catalog no longer names it and it is gone.
    assert_eq!(store.undo_log_path(), None);
    assert!(!copy.path().join(shale_table::PMEM_FILE_NAME).exists());
    drop(store);
    let store = TableStore::open(copy.path(), small_options()).unwrap();
    assert_eq!(store.select_cell(t, &key(8), "text").unwrap(), Some(b"before".to_vec()));
}
