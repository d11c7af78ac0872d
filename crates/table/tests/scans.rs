//! Scans: rows of a key range in key order, 100 per batch until `None`; erased rows
//! skipped; a transaction's scan sees its own changes.

mod common;

use std::ops::Bound;

use common::*;
use shale_table::{Isolation, SCAN_BATCH_ROWS, SimPmem};

#[test]
fn scans_return_key_ordered_batches_of_a_range() {
    let d = sim(32, 41);
    let p = SimPmem::new(PMEM_BYTES);
    let store = open(&d, &p, &small_options());
    let t = store.create_table("t", schema()).unwrap();
    // Inserted out of order, in one transaction.
    let mut txn = store.begin(Isolation::ReadCommitted);
    for i in (0..250).rev() {
        txn.insert(t, &row(&key(i), &text(&key(i), 0, (i % 7) as usize * 10), i)).unwrap();
    }
    txn.commit().unwrap();
    let mut scan = store.scan(t, ..).unwrap();
    let mut sizes = Vec::new();
    let mut keys = Vec::new();
    while let Some(batch) = scan.next().unwrap() {
        sizes.push(batch.len());
        keys.extend(batch.into_iter().map(|r| r[0].clone()));
    }
    assert_eq!(sizes, vec![SCAN_BATCH_ROWS, SCAN_BATCH_ROWS, 50]);
    assert_eq!(keys, (0..250).map(key).collect::<Vec<_>>());
    assert_eq!(scan.next().unwrap(), None);

    let range = |lo: Bound<u64>, hi: Bound<u64>| {
        let b = |x: Bound<u64>| x.map(key);
        let mut s = store.scan(t, (b(lo), b(hi))).unwrap();
        let mut got = Vec::new();
        while let Some(batch) = s.next().unwrap() {
            got.extend(batch.into_iter().map(|r| u64::from_le_bytes(r[2][..].try_into().unwrap())));
        }
        got
    };
    assert_eq!(range(Bound::Included(10), Bound::Excluded(13)), vec![10, 11, 12]);
    assert_eq!(range(Bound::Excluded(10), Bound::Included(13)), vec![11, 12, 13]);
    assert_eq!(range(Bound::Included(248), Bound::Unbounded), vec![248, 249]);
    assert_eq!(range(Bound::Included(300), Bound::Unbounded), Vec::<u64>::new());

    // Erased rows are skipped, whole batches of them too; a transaction sees its own work.
    for i in 0..150 {
        store.erase(t, &key(i)).unwrap();
    }
    assert_eq!(all_rows(&store, t).len(), 100);
    let mut txn = store.begin(Isolation::RepeatableRead);
    txn.insert(t, &row(&key(1000), b"mine", 1)).unwrap();
    txn.erase(t, &key(200)).unwrap();
    let mut s = txn.scan(t, ..).unwrap();
    let batch = s.next().unwrap().unwrap();
    assert_eq!(batch.len(), 100);
    assert!(batch.iter().any(|r| r[0] == key(1000)));
    assert!(!batch.iter().any(|r| r[0] == key(200)));
    drop(s);
    txn.abort().unwrap();
    assert_eq!(all_rows(&store, t).len(), 100);
    assert_eq!(store.select(t, &key(1000)).unwrap(), None);
}

/// Every row of a scan, with the sizes of its batches.
fn drain(mut scan: shale_table::Scan<'_>) -> (Vec<usize>, Vec<Vec<Vec<u8>>>) {
    let (mut sizes, mut rows) = (Vec::new(), Vec::new());
    while let Some(batch) = scan.next().unwrap() {
        sizes.push(batch.len());
        rows.extend(batch);
    }
    (sizes, rows)
}

#[test]
fn scans_by_another_column_keep_the_rows_in_its_range_in_key_order() {
    let d = sim(32, 43);
    let p = SimPmem::new(PMEM_BYTES);
    let store = open(&d, &p, &small_options());
    let t = store.create_table("t", schema()).unwrap();
    // n big-endian here, so that byte order is number order: n = (i * 37) % 500.
    let n_of = |i: u64| (i * 37) % 500;
    let mut txn = store.begin(Isolation::ReadCommitted);
    for i in (0..500).rev() {
        let n = n_of(i).to_be_bytes().to_vec();
        txn.insert(t, &[key(i), text(&key(i), 0, 5), n]).unwrap();
    }
    txn.commit().unwrap();
    let be = |x: u64| x.to_be_bytes().to_vec();
    let want = |lo: u64, hi: u64| -> Vec<Vec<u8>> {
        (0..500).filter(|&i| (lo..hi).contains(&n_of(i))).map(key).collect()
    };
    // 250 of 500 rows: batches of 100 in key order, however many rows each walk reads.
    let (sizes, rows) = drain(store.scan_column(t, "n", be(100)..be(350)).unwrap());
    assert_eq!(sizes, vec![100, 100, 50]);
    assert_eq!(rows.iter().map(|r| r[0].clone()).collect::<Vec<_>>(), want(100, 350));
    assert!(rows.iter().all(|r| (be(100)..be(350)).contains(&r[2])));
    // A range no row is in; a range of one value; the key column is the key scan.
    assert_eq!(drain(store.scan_column(t, "n", be(600)..).unwrap()).1.len(), 0);
    let (_, one) = drain(store.scan_column(t, "n", be(74)..=be(74)).unwrap());
    assert_eq!(one.iter().map(|r| r[0].clone()).collect::<Vec<_>>(), vec![key(2)]);
    let (_, by_key) = drain(store.scan_column(t, "id", key(10)..key(13)).unwrap());
    assert_eq!(
        by_key.iter().map(|r| r[0].clone()).collect::<Vec<_>>(),
        vec![key(10), key(11), key(12)]
    );
    // A column the schema lacks, a table that is not there.
    let err = store.scan_column(t, "nope", ..).unwrap_err();
    assert!(matches!(err, shale_table::Error::NoSuchColumn(ref c) if c == "nope"), "{err:?}");
    assert!(store.scan_column(shale_table::TableId(99), "n", ..).is_err());
    // Inside a transaction: its own change moves a row into the range, an erase out of it.
    let mut txn = store.begin(Isolation::RepeatableRead);
    txn.update(t, &key(0), "n", &be(120)).unwrap();
    txn.erase(t, &key(2)).unwrap();
    let (_, mine) = drain(txn.scan_column(t, "n", be(0)..be(130)).unwrap());
    let keys: Vec<_> = mine.iter().map(|r| r[0].clone()).collect();
    assert!(keys.contains(&key(0)) && !keys.contains(&key(2)), "{keys:?}");
    let mut expect = want(0, 130);
    expect.retain(|k| *k != key(2));
    if !expect.contains(&key(0)) {
        expect.insert(0, key(0));
    }
    assert_eq!(keys, expect);
    txn.abort().unwrap();
}
