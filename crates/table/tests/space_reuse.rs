//! The space of erased rows is reclaimed: the reclaiming pass finds the dead records no
//! open transaction holds, and new rows take their slots before growing the table, so bytes
//! on disk stop growing under erase/insert churn; an erase not yet committed keeps its
//! slot; a reused slot is given back by an abort and by a crash; the background thread
//! finds what died by itself, reading only that.

mod common;

use std::time::{Duration, Instant};

use common::*;
use shale_io::{Damage, SimDevice};
use shale_table::{Isolation, SimPmem, TableOptions, TableStore};

const TEXT: usize = 900;

fn filled(d: &SimDevice, p: &SimPmem, rows: u64) -> (TableStore, shale_table::TableId) {
    let store = open(d, p, &small_options());
    let t = store.create_table("t", schema()).unwrap();
    for i in 0..rows {
        store.insert(t, &row(&key(i), &text(&key(i), 0, TEXT), i)).unwrap();
    }
    (store, t)
}

/// Twenty rounds of erasing a quarter of the rows and inserting as many new ones: with the
/// pass, the table keeps its segments; without it, it grows by a quarter each round.
fn churn(reclaim: bool) -> (usize, usize) {
    let d = sim(96, 1);
    let p = SimPmem::new(PMEM_BYTES);
    let (store, t) = filled(&d, &p, 200);
    let at_start = store.stats().segments;
    let mut next = 200;
    for round in 0..20u64 {
        let mut txn = store.begin(Isolation::ReadCommitted);
        for i in (next - 200..next).filter(|i| i % 4 == round % 4) {
            txn.erase(t, &key(i)).unwrap_or_else(|e| panic!("round {round}, key {i}: {e}"));
        }
        txn.commit().unwrap();
        if reclaim {
            assert!(store.reclaim_space().unwrap() > 0);
        }
        let mut txn = store.begin(Isolation::ReadCommitted);
        for _ in 0..50 {
            txn.insert(t, &row(&key(next), &text(&key(next), 1, TEXT), next)).unwrap();
            next += 1;
        }
        txn.commit().unwrap();
    }
    let rows = all_rows(&store, t);
    assert_eq!(rows.len(), 200 + 20 * 50 - 20 * 50);
    drop(store);
    let store = open(&d, &p, &small_options());
    assert_eq!(all_rows(&store, t), rows);
    (at_start, store.stats().segments)
}

#[test]
fn erased_space_is_reused_and_bytes_on_disk_stop_growing() {
    let (start, end) = churn(true);
    let (_, grown) = churn(false);
    eprintln!("segments: {start} at the start, {end} with the pass, {grown} without");
    assert!(end <= start + 1, "{start} -> {end} segments");
    assert!(grown > start * 3, "{start} -> {grown} segments without reclaiming");
}

#[test]
fn an_uncommitted_erase_keeps_its_slot() {
    let d = sim(32, 2);
    let p = SimPmem::new(PMEM_BYTES);
    let (store, t) = filled(&d, &p, 10);
    let mut txn = store.begin(Isolation::ReadCommitted);
    txn.erase(t, &key(3)).unwrap();
    assert_eq!(store.reclaim_space().unwrap(), 0);
    store.insert(t, &row(&key(50), &text(&key(50), 0, TEXT), 50)).unwrap();
    assert_eq!(store.stats().reused, 0);
    txn.abort().unwrap();
    assert_eq!(store.select(t, &key(3)).unwrap(), Some(row(&key(3), &text(&key(3), 0, TEXT), 3)));
    store.erase(t, &key(3)).unwrap();
    assert!(store.reclaim_space().unwrap() > TEXT as u64);
    store.insert(t, &row(&key(51), &text(&key(51), 0, TEXT), 51)).unwrap();
    assert_eq!(store.stats().reused, 1);
    assert_eq!(store.stats().free_bytes, 0);
}

#[test]
fn a_reused_slot_is_given_back_by_an_abort_and_by_a_crash() {
    let d = sim(32, 3);
    let p = SimPmem::beside(PMEM_BYTES, &d);
    let (store, t) = filled(&d, &p, 10);
    store.erase(t, &key(4)).unwrap();
    let free = store.reclaim_space().unwrap();
    let mut txn = store.begin(Isolation::ReadCommitted);
    txn.insert(t, &row(&key(60), b"reusing", 60)).unwrap_or_else(|e| panic!("{e}"));
    // 7 bytes of text do not take a slot of 900: the row is appended.
    assert_eq!(store.stats().reused, 0);
    txn.insert(t, &row(&key(61), &text(&key(61), 0, TEXT - 100), 61)).unwrap();
    assert_eq!(store.stats().reused, 1);
    txn.abort().unwrap();
    assert_eq!(store.select(t, &key(61)).unwrap(), None);
    assert_eq!(
        store.reclaim_space().unwrap(),
        free + 12 + 8 + 4 + 7 + 8,
        "the void appended row too"
    );
    // A crash with the slot reused by an open transaction gives it back too.
    let mut txn = store.begin(Isolation::ReadCommitted);
    txn.insert(t, &row(&key(62), &text(&key(62), 0, TEXT), 62)).unwrap();
    assert_eq!(store.stats().reused, 2);
    let cd = SimDevice::from_image(d.crash_image(d.writes(), Damage::Keep), 4096, 3).unwrap();
    let cp = SimPmem::from_image(p.crash_image(p.events(), 3), None);
    drop(txn);
    let store = TableStore::open_device(device(&cd), cp.boxed(), small_options()).unwrap();
    assert_eq!(store.select(t, &key(62)).unwrap(), None);
    assert_eq!(store.select(t, &key(4)).unwrap(), None);
    // The open found the dead records itself.
    assert!(store.stats().free_bytes >= free);
    store.insert(t, &row(&key(63), &text(&key(63), 0, TEXT), 63)).unwrap();
    assert_eq!(store.stats().reused, 1);
    drop(store);
    let store = TableStore::open_device(device(&cd), cp.boxed(), small_options()).unwrap();
    assert_eq!(
        store.select(t, &key(63)).unwrap(),
        Some(row(&key(63), &text(&key(63), 0, TEXT), 63))
    );
    assert_eq!(all_rows(&store, t).len(), 10);
}

#[test]
fn the_background_thread_runs_the_pass() {
    let d = sim(32, 4);
    let p = SimPmem::new(PMEM_BYTES);
    let opts =
        TableOptions { space_reclaim_interval: Some(Duration::from_millis(10)), ..small_options() };
    let store = open(&d, &p, &opts);
    let t = store.create_table("t", schema()).unwrap();
    for i in 0..10 {
        store.insert(t, &row(&key(i), &text(&key(i), 0, TEXT), i)).unwrap();
    }
    store.erase(t, &key(2)).unwrap();
    let start = Instant::now();
    while store.stats().free_bytes == 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "the pass never ran");
        std::thread::sleep(Duration::from_millis(5));
    }
    store.insert(t, &row(&key(20), &text(&key(20), 0, TEXT), 20)).unwrap();
    assert_eq!(store.stats().reused, 1);
    drop(store); // joins the thread
    let store = open(&d, &p, &opts);
    assert_eq!(all_rows(&store, t).len(), 10);
}

/// The background thread looks only at the records that died since it last looked: with no
/// erase it reads nothing, however large the table (it used to walk every record of every
/// table each interval, reading every block of a table larger than the cache); an erase in
/// an old block and a rolled-back insert are then found by themselves.
#[test]
fn the_background_thread_reads_only_what_died() {
    let d = sim(64, 5);
    let p = SimPmem::new(PMEM_BYTES);
    let opts =
        TableOptions { space_reclaim_interval: Some(Duration::from_millis(5)), ..small_options() };
    let store = open(&d, &p, &opts);
    let t = store.create_table("t", schema()).unwrap();
    // 300 rows of about 1 KiB: some 75 blocks, against a cache of 32.
    for i in 0..300 {
        store.insert(t, &row(&key(i), &text(&key(i), 0, TEXT), i)).unwrap();
    }
    let reads = d.stats().reads;
    std::thread::sleep(Duration::from_millis(100)); // twenty intervals
    assert_eq!(d.stats().reads, reads, "the thread read blocks with nothing dead");

    store.erase(t, &key(3)).unwrap(); // in one of the first blocks, long out of the cache
    let mut txn = store.begin(Isolation::ReadCommitted);
    txn.insert(t, &row(&key(400), &text(&key(400), 0, TEXT), 400)).unwrap();
    txn.abort().unwrap();
    let start = Instant::now();
    while store.stats().free_bytes < 2 * TEXT as u64 {
        assert!(start.elapsed() < Duration::from_secs(10), "the dead records were not found");
        std::thread::sleep(Duration::from_millis(5));
    }
    // The erased row's block, and little else: not the table's 75.
    assert!(d.stats().reads - reads < 10, "{} reads", d.stats().reads - reads);
    store.insert(t, &row(&key(401), &text(&key(401), 0, TEXT), 401)).unwrap();
    assert_eq!(store.stats().reused, 1);
}
