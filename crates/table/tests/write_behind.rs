//! Write-behind: a change leaves its blocks dirty in the cache, and a commit writes each
//! dirty block once, however many changes (of one transaction or of several committing
//! together) it took; a transaction that dirties more than half the cache writes them
//! early; an abort writes its rolled-back blocks before it expires its records.

mod common;

use common::*;
use shale_table::{Isolation, SimPmem, TableOptions};

/// 40 rows of about 150 bytes in one transaction fill two blocks: its commit writes two
/// blocks, not forty (one per change, as each change once wrote its block).
#[test]
fn a_commit_writes_each_dirty_block_once() {
    let d = sim(16, 3);
    let p = SimPmem::new(PMEM_BYTES);
    let store = open(&d, &p, &small_options());
    let t = store.create_table("t", schema()).unwrap();
    let before = (store.stats().block_writes, d.stats().writes);
    let mut txn = store.begin(Isolation::ReadCommitted);
    for i in 0..40 {
        txn.insert(t, &row(&key(i), &text(&key(i), 0, 120), i)).unwrap();
    }
    assert_eq!(store.stats().block_writes, before.0, "nothing written before the commit");
    txn.commit().unwrap();
    assert_eq!(store.stats().block_writes - before.0, 2);
    assert_eq!(d.stats().writes - before.1, 2, "two block writes; the undo log is in pmem");
    // Ten single-row commits into the same last block: one write each (no two commits
    // share a round on one thread).
    for i in 40..50 {
        store.insert(t, &row(&key(i), b"x", i)).unwrap();
    }
    assert_eq!(store.stats().block_writes - before.0, 12);
    drop(store);
    let store = open(&d, &p, &small_options());
    assert_eq!(all_rows(&store, t).len(), 50);
}

/// More than half of a 32-block cache dirtied by one transaction is written before its
/// commit; a power cut before the commit still leaves nothing of it.
#[test]
fn a_large_transaction_writes_early_and_still_rolls_back_at_a_crash() {
    let d = sim(32, 4);
    let p = SimPmem::beside(PMEM_BYTES, &d);
    let opts = TableOptions { undo_spill_bytes: 0, ..small_options() };
    let store = open(&d, &p, &opts);
    let t = store.create_table("t", schema()).unwrap();
    store.insert(t, &row(&key(0), b"kept", 0)).unwrap();
    let before = store.stats().block_writes;
    let mut txn = store.begin(Isolation::ReadCommitted);
    // 24 rows of 3000 bytes: about 18 blocks, more than the 16 that may be dirty.
    for i in 1..25 {
        txn.insert(t, &row(&key(i), &text(&key(i), 0, 3000), i)).unwrap();
    }
    assert!(store.stats().block_writes > before, "written before the commit");
    let image = d.crash_image(d.writes(), shale_io::Damage::Keep);
    let pimage = p.crash_image(p.events(), 4);
    drop(txn);
    drop(store);
    let d = shale_io::SimDevice::from_image(image, 4096, 4).unwrap();
    let p = SimPmem::from_image(pimage, Some(d.clone()));
    let store = open(&d, &p, &opts);
    assert_eq!(all_rows(&store, t), vec![row(&key(0), b"kept", 0)]);
}
