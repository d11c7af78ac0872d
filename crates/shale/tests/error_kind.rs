//! One failure has one kind whichever engine meets it: the three engines' errors share
//! `shale::ErrorKind`, so a caller that serves all three (the C ABI, a server) handles each
//! failure in one place. Was: each caller matched every engine's variants, one engine at a
//! time, and a space-layer error wrapped by one engine could get another code than the same
//! error wrapped by the next.

use std::path::Path;

use shale::ErrorKind;
use shale::hash::{HashOptions, HashStore, SEGMENT_BYTES_MIN};
use shale::table::{TableOptions, TableStore};
use shale::{Db, Options};

fn hash_options() -> HashOptions {
    HashOptions { segment_bytes: SEGMENT_BYTES_MIN, ..Default::default() }
}

/// The kind of each engine's refusal to open `path`: lsm, hash, table.
fn open_kinds(path: &Path) -> [ErrorKind; 3] {
    let lsm = Db::open(path, Options::small_for_tests()).err().expect("lsm refuses").kind();
    let hash = HashStore::open(path, hash_options()).expect_err("hash refuses").kind();
    let table = TableStore::open(path, TableOptions::default()).expect_err("table refuses");
    [lsm, hash, table.kind()]
}

#[test]
fn a_path_under_a_regular_file_is_an_io_error_for_every_engine() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    assert_eq!(open_kinds(&file.join("store")), [ErrorKind::Io; 3]);
}

#[test]
fn another_engines_store_is_not_a_store_for_every_engine() {
    let tmp = tempfile::tempdir().unwrap();
    let lsm = tmp.path().join("lsm");
    Db::open(&lsm, Options::small_for_tests()).unwrap().close().unwrap();
    let hash = tmp.path().join("hash");
    drop(HashStore::open(&hash, hash_options()).unwrap());
    let table = tmp.path().join("table");
    drop(TableStore::open(&table, TableOptions::default()).unwrap());

    let kinds = |path: &Path| {
        let lsm = Db::open(path, Options::small_for_tests()).err().map(|e| e.kind());
        let hash = HashStore::open(path, hash_options()).err().map(|e| e.kind());
        let table = TableStore::open(path, TableOptions::default()).err().map(|e| e.kind());
        [lsm, hash, table]
    };
    let refused = Some(ErrorKind::NotAStore);
    assert_eq!(kinds(&lsm), [None, refused, refused], "an lsm store");
    assert_eq!(kinds(&hash), [refused, None, refused], "a hash store");
    assert_eq!(kinds(&table), [refused, refused, None], "a table store");
}

#[test]
fn a_store_open_already_is_in_use_for_every_engine() {
    let tmp = tempfile::tempdir().unwrap();
    let (lsm, hash, table) =
        (tmp.path().join("lsm"), tmp.path().join("hash"), tmp.path().join("table"));
    let _lsm = Db::open(&lsm, Options::small_for_tests()).unwrap();
    let _hash = HashStore::open(&hash, hash_options()).unwrap();
    let _table = TableStore::open(&table, TableOptions::default()).unwrap();
    let again = [
        Db::open(&lsm, Options::small_for_tests()).err().expect("lsm refuses").kind(),
        HashStore::open(&hash, hash_options()).expect_err("hash refuses").kind(),
        TableStore::open(&table, TableOptions::default()).expect_err("table refuses").kind(),
    ];
    assert_eq!(again, [ErrorKind::InUse; 3]);
}
