//! `shale_table::check_store`, the read-only check behind `shale check` and `shale inspect`:
//! a healthy store's tables and rows; a damaged block, a missing undo log file and a store
//! in use refused; a store with a transaction in flight at a crash sent to an open first.

mod common;

use common::*;
use shale_table::{Error, Isolation, TableOptions, TableStore, UndoLogPlace, check_store};

#[test]
fn a_healthy_store_is_reported_and_a_damaged_block_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let store = TableStore::open(dir.path(), small_options()).unwrap();
    let t = store.create_table("t", schema()).unwrap();
    for i in 0..60 {
        store.insert(t, &row(&key(i), &text(&key(i), 0, 1500), i)).unwrap();
    }
    store.erase(t, &key(5)).unwrap();
    let r = check_store(dir.path());
    assert!(matches!(r, Err(Error::Space(shale_space::Error::InUse(_)))), "{r:?}");
    let address = store.block_address(t, 3).unwrap();
    drop(store);
    let before = std::fs::read(dir.path().join("volume.shale")).unwrap();
    let r = check_store(dir.path()).unwrap();
    assert_eq!(r.tables.len(), 1);
    let table = &r.tables[0];
    assert_eq!((table.rows, table.dead_rows), (59, 1), "{r:?}");
    assert!(table.blocks_used > 3 && table.blocks >= table.blocks_used, "{r:?}");
    assert_eq!(r.undo_file, None);
    assert_eq!(std::fs::read(dir.path().join("volume.shale")).unwrap(), before, "check wrote");

    let mut bytes = before;
    bytes[address as usize + 100] ^= 0x04;
    std::fs::write(dir.path().join("volume.shale"), &bytes).unwrap();
    match check_store(dir.path()) {
        Err(Error::Corruption { what, offset }) => {
            assert!(what.contains("block 3"), "{what}");
            assert_eq!(offset, address, "{what}");
        }
        r => panic!("{r:?}"),
    }
}

#[test]
fn a_transaction_in_flight_sends_the_check_to_an_open_first() {
    let base = tempfile::tempdir().unwrap();
    let (path, copy) = (base.path().join("a"), base.path().join("b"));
    let o = TableOptions { undo_log: UndoLogPlace::Pmem, ..small_options() };
    let store = TableStore::open(&path, o).unwrap();
    let t = store.create_table("t", schema()).unwrap();
    for i in 0..10 {
        store.insert(t, &row(&key(i), b"committed", i)).unwrap();
    }
    let mut txn = store.begin(Isolation::ReadCommitted);
    txn.update(t, &key(1), "text", b"in flight").unwrap();
    store.insert(t, &row(&key(20), b"other", 20)).unwrap();
    // The files as a crash leaves them.
    std::fs::create_dir(&copy).unwrap();
    for f in std::fs::read_dir(&path).unwrap() {
        let f = f.unwrap();
        std::fs::copy(f.path(), copy.join(f.file_name())).unwrap();
    }
    drop(txn);
    drop(store);
    let err = check_store(&copy).unwrap_err().to_string();
    assert!(err.contains("in flight") && err.contains("open the store once"), "{err}");
    drop(TableStore::open(&copy, small_options()).unwrap());
    let r = check_store(&copy).unwrap();
    assert_eq!(r.tables[0].rows, 11);
    assert_eq!(r.undo_file, Some(copy.join(shale_table::PMEM_FILE_NAME)));
    // Its file gone: refused as the open refuses it.
    std::fs::remove_file(copy.join(shale_table::PMEM_FILE_NAME)).unwrap();
    assert!(matches!(check_store(&copy), Err(Error::UndoLogMissing { .. })));
}
