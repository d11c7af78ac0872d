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
