//! The primary index spills to index pages on the volume past its memory threshold
//! (`TableOptions::index_memory_entries`): every row is still found (the full key checked
//! against 4-bit hashes, so collisions are the rule), through erases, moves, aborts,
//! scans, a reopen and a power cut; a damaged index page is Corruption.

mod common;

use common::*;
use shale_io::{Damage, SimDevice};
use shale_table::{Error, Isolation, SimPmem, TableOptions, TableStore};

const ROWS: u64 = 3000;

fn opts() -> TableOptions {
    TableOptions { index_memory_entries: Some(100), hash_bits: 4, ..small_options() }
}

fn n_of(i: u64) -> u64 {
    i * 3
}

fn check(store: &TableStore, t: shale_table::TableId, present: impl Fn(u64) -> bool) {
    for i in 0..ROWS {
        let got = store.select_cell(t, &key(i), "n").unwrap();
        let want = present(i).then(|| n_of(i).to_le_bytes().to_vec());
        assert_eq!(got, want, "row {i}");
    }
    let rows = all_rows(store, t);
    assert_eq!(rows.len() as u64, (0..ROWS).filter(|&i| present(i)).count() as u64);
}

#[test]
fn an_index_past_its_threshold_spills_to_pages_and_finds_every_row() {
    let d = sim(160, 1);
    let p = SimPmem::beside(PMEM_BYTES, &d);
    let store = open(&d, &p, &opts());
    let t = store.create_table("t", schema()).unwrap();
    for chunk in (0..ROWS).collect::<Vec<_>>().chunks(100) {
        let mut txn = store.begin(Isolation::ReadCommitted);
        for &i in chunk {
            txn.insert(t, &row(&key(i), b"x", n_of(i))).unwrap();
        }
        txn.commit().unwrap();
    }
    assert_eq!(store.stats().index_paged_entries, ROWS as usize - 100);
    check(&store, t, |_| true);
    // Erases, and moves (the text outgrows its slot): entries leave pages and come back.
    let mut txn = store.begin(Isolation::ReadCommitted);
    for i in (0..ROWS).step_by(5) {
        txn.erase(t, &key(i)).unwrap();
    }
    for i in (1..ROWS).step_by(7).filter(|i| i % 5 != 0) {
        txn.update(t, &key(i), "text", b"a longer text than x").unwrap();
    }
    txn.commit().unwrap();
    let gone = |i: u64| i % 5 == 0;
    check(&store, t, |i| !gone(i));
    let mut txn = store.begin(Isolation::ReadCommitted);
    for i in (2..ROWS).step_by(5) {
        txn.erase(t, &key(i)).unwrap();
    }
    txn.abort().unwrap();
    check(&store, t, |i| !gone(i));
    drop(store);
    let store = open(&d, &p, &opts());
    assert!(store.stats().index_paged_entries > 2000, "{:?}", store.stats());
    check(&store, t, |i| !gone(i));
    // A power cut with a transaction open: its changes roll back, the index is rebuilt.
    let mut txn = store.begin(Isolation::ReadCommitted);
    for i in (3..ROWS).step_by(5) {
        txn.erase(t, &key(i)).unwrap();
    }
    let cd = SimDevice::from_image(d.crash_image(d.writes(), Damage::Lose), 4096, 1).unwrap();
    let cp = SimPmem::from_image(p.crash_image(p.events(), 1), None);
    drop(txn);
    let store = TableStore::open_device(device(&cd), cp.boxed(), opts()).unwrap();
    check(&store, t, |i| !gone(i));
}

#[test]
fn a_damaged_index_page_is_corruption() {
    for offset in [0u64, 6, 15, 40, 4000] {
        let d = sim(64, 2);
        let p = SimPmem::new(PMEM_BYTES);
        let store = open(&d, &p, &opts());
        let t = store.create_table("t", schema()).unwrap();
        for i in 0..1000 {
            store.insert(t, &row(&key(i), b"x", n_of(i))).unwrap();
        }
        // Every page damaged: with 4-bit hashes, lookups read pages at once. Keys never
        // inserted: a point read of a key the ordered index places, with its blocks cached,
        // reads no index page (as a scan), so a key it does not know is looked up in the
        // hash index.
        let mut hit = None;
        for page in 0..16 {
            let Some(address) = store.index_page_address(t, page) else { break };
            d.corrupt(address + offset, 0x10);
        }
        for i in 1000..2000 {
            if let Err(e) = store.select(t, &key(i)) {
                hit = Some(e);
                break;
            }
        }
        assert!(matches!(hit, Some(Error::Corruption { .. })), "byte {offset}: {hit:?}");
        // Scans walk the ordered index in memory and read no index page: they still see
        // every row.
        assert_eq!(all_rows(&store, t).len(), 1000, "byte {offset}");
        // The pages are rebuilt at the open from the rows: the store is whole again.
        drop(store);
        let store = open(&d, &p, &opts());
        check_first(&store, t);
    }
}

fn check_first(store: &TableStore, t: shale_table::TableId) {
    for i in 0..1000 {
        assert_eq!(
            store.select_cell(t, &key(i), "n").unwrap(),
            Some(n_of(i).to_le_bytes().to_vec())
        );
    }
}
