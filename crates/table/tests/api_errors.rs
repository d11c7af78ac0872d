//! The table API's boundaries: every typed error for bad input, and nothing stored lost by
//! it (P6).

mod common;

use common::*;
use shale_io::SimDevice;
use shale_table::{Column, Error, Isolation, Schema, SimPmem, TableOptions};

#[test]
fn tables_and_schemas_are_checked() {
    let d = sim(16, 1);
    let p = SimPmem::new(PMEM_BYTES);
    let store = open(&d, &p, &small_options());
    let t = store.create_table("t", schema()).unwrap();
    assert!(matches!(store.create_table("t", schema()), Err(Error::TableExists(n)) if n == "t"));
    assert!(matches!(store.create_table("", schema()), Err(Error::InvalidArgument(_))));
    assert!(matches!(Schema::new(vec![]), Err(Error::InvalidArgument(_))));
    let twice = vec![Column::fixed("a", 1), Column::fixed("a", 2)];
    assert!(matches!(Schema::new(twice), Err(Error::InvalidArgument(_))));
    let huge = vec![Column::fixed("a", 1), Column::var("b", 1 << 20)];
    assert!(matches!(Schema::new(huge), Err(Error::InvalidArgument(_))));
    assert!(matches!(store.drop_table("nope"), Err(Error::NoSuchTable(_))));
    let missing = shale_table::TableId(99);
    assert!(matches!(store.insert(missing, &row(&key(1), b"x", 1)), Err(Error::NoSuchTable(_))));
    assert!(matches!(store.select(missing, &key(1)), Err(Error::NoSuchTable(_))));
    assert_eq!(store.tables(), vec![("t".to_string(), t)]);
    assert_eq!(store.schema(t).unwrap(), schema());
}

#[test]
fn rows_are_checked_against_the_schema() {
    let d = sim(16, 2);
    let p = SimPmem::new(PMEM_BYTES);
    let store = open(&d, &p, &small_options());
    let t = store.create_table("t", schema()).unwrap();
    let k = key(1);
    store.insert(t, &row(&k, b"hello", 7)).unwrap();
    let wrong = |r: Result<(), Error>, col: &str, expected: usize, got: usize| match r {
        Err(Error::WrongSize { column, expected: e, got: g }) => {
            assert_eq!((column.as_str(), e, g), (col, expected, got));
        }
        other => panic!("{other:?}"),
    };
    wrong(store.insert(t, &row(b"short", b"x", 1)), "id", 8, 5);
    wrong(store.insert(t, &[&k[..], b"x"]), "(row)", 3, 2);
    wrong(store.insert(t, &row(&key(2), &vec![0; 9001], 1)), "text", 9000, 9001);
    wrong(store.insert(t, &[&key(2)[..], b"x", b"1234567"]), "n", 8, 7);
    wrong(store.update(t, &k, "n", b"1"), "n", 8, 1);
    wrong(store.update(t, b"k", "n", &[0; 8]), "id", 8, 1);
    assert!(
        matches!(store.update(t, &k, "nope", b"1"), Err(Error::NoSuchColumn(c)) if c == "nope")
    );
    assert!(matches!(store.select_cell(t, &k, "nope"), Err(Error::NoSuchColumn(_))));
    assert!(matches!(store.update(t, &k, "id", &key(3)), Err(Error::InvalidArgument(_))));
    assert!(matches!(store.insert(t, &row(&k, b"again", 1)), Err(Error::DuplicateKey)));
    assert!(matches!(store.erase(t, &key(9)), Err(Error::KeyNotFound)));
    assert!(matches!(store.update(t, &key(9), "text", b"x"), Err(Error::KeyNotFound)));
    assert_eq!(store.select(t, &key(9)).unwrap(), None);
    assert_eq!(store.select_cell(t, &key(9), "text").unwrap(), None);
    // Nothing of it reached the row, and a transaction survives its own bad calls.
    assert_eq!(store.select(t, &k).unwrap(), Some(row(&k, b"hello", 7)));
    let mut txn = store.begin(Isolation::ReadCommitted);
    assert!(matches!(txn.insert(t, &row(&k, b"dup", 1)), Err(Error::DuplicateKey)));
    txn.update(t, &k, "text", b"changed").unwrap();
    txn.commit().unwrap();
    assert_eq!(store.select_cell(t, &k, "text").unwrap(), Some(b"changed".to_vec()));
}

#[test]
fn a_full_undo_log_is_an_error_and_the_transaction_goes_on() {
    let d = sim(64, 3);
    let p = SimPmem::new(PMEM_BYTES);
    // No spill area: the persistent memory's ring is all the log has.
    let store = open(&d, &p, &TableOptions { undo_spill_bytes: 0, ..small_options() });
    let t = store.create_table("t", schema()).unwrap();
    for i in 0..12 {
        store.insert(t, &row(&key(i), &text(&key(i), 0, 8000), i)).unwrap();
    }
    // Each update's before-image is a whole 8 KiB row: nine fill the 64 KiB ring.
    let mut txn = store.begin(Isolation::ReadCommitted);
    let mut full = None;
    for i in 0..12 {
        if let Err(e) = txn.update(t, &key(i), "text", &text(&key(i), 1, 8000)) {
            full = Some((i, e));
            break;
        }
    }
    let (at, e) = full.expect("the log fills");
    assert!(matches!(e, Error::LogFull { .. }), "{e:?}");
    assert!(at > 3);
    txn.commit().unwrap();
    for i in 0..12 {
        let version = u64::from(i < at);
        assert_eq!(
            store.select_cell(t, &key(i), "text").unwrap(),
            Some(text(&key(i), version, 8000))
        );
    }
    // Committed records are reclaimed: the log takes as much again.
    let mut txn = store.begin(Isolation::ReadCommitted);
    for i in 0..at {
        txn.update(t, &key(i), "text", &text(&key(i), 2, 8000)).unwrap();
    }
    txn.abort().unwrap();
    assert_eq!(store.select_cell(t, &key(0), "text").unwrap(), Some(text(&key(0), 1, 8000)));
}

#[test]
fn other_engines_volumes_and_persistent_memory_are_refused() {
    // A hash-engine store is not a table store, and a table store is not a hash store.
    let d = SimDevice::new(16 << 20, 4096, 4).unwrap();
    let hash_opts = shale_hash::HashOptions {
        segment_bytes: shale_hash::SEGMENT_BYTES_FULL_VALUES,
        version_log_bytes: 64 << 10,
        ..shale_hash::HashOptions::default()
    };
    let hash = shale_hash::HashStore::open_device(device(&d), hash_opts.clone()).unwrap();
    hash.store(b"key-1", b"v", shale_hash::StoreMode::Overwrite).unwrap();
    drop(hash);
    let p = SimPmem::new(PMEM_BYTES);
    let opts = shale_table::TableOptions {
        segment_bytes: shale_hash::SEGMENT_BYTES_FULL_VALUES,
        ..small_options()
    };
    let r = shale_table::TableStore::open_device(device(&d), p.boxed(), opts.clone());
    assert!(matches!(r, Err(Error::NotTableStore(_))), "{r:?}");
    assert_eq!(p.events(), 0, "nothing was written to the persistent memory");

    let d = sim(16, 5);
    let store = open(&d, &p, &small_options());
    store.create_table("t", schema()).unwrap();
    drop(store);
    let r = shale_hash::HashStore::open_device(device(&d), hash_opts);
    assert!(matches!(r, Err(shale_hash::Error::NotHashStore(_))), "{r:?}");
    // Even with no table yet, a new store marks its volume.
    let d = sim(16, 6);
    drop(open(&d, &SimPmem::new(PMEM_BYTES), &small_options()));
    let r = shale_hash::HashStore::open_device(
        device(&d),
        shale_hash::HashOptions {
            version_log_bytes: 64 << 10,
            ..shale_hash::HashOptions::default()
        },
    );
    assert!(r.is_err(), "{r:?}");

    // The persistent memory of one store is refused by another.
    let other = sim(16, 7);
    let r = shale_table::TableStore::open_device(device(&other), p.boxed(), small_options());
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
}

#[test]
fn bad_options_are_refused() {
    let d = sim(16, 8);
    let p = SimPmem::new(PMEM_BYTES);
    for opts in [
        shale_table::TableOptions { segment_bytes: 1000, ..small_options() },
        shale_table::TableOptions { cache_blocks: 1, ..small_options() },
        shale_table::TableOptions { hash_bits: 0, ..small_options() },
    ] {
        let r = shale_table::TableStore::open_device(device(&d), p.boxed(), opts);
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    }
    let small = SimPmem::new(4096);
    let r = shale_table::TableStore::open_device(device(&d), small.boxed(), small_options());
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
}
