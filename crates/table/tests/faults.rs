//! A failed device write or flush stops the store (P5): the failing call returns the
//! device's error, every later change [`Error::Stopped`]; a failed sync is never retried and
//! trusted. The reopen rolls back what was not committed.

mod common;

use common::*;
use shale_io::{Fault, FaultPlan, OpKind};
use shale_table::{Error, Isolation, SimPmem};

fn failing(op: OpKind) {
    let d = sim(32, 51);
    let p = SimPmem::new(PMEM_BYTES);
    let store = open(&d, &p, &small_options());
    let t = store.create_table("t", schema()).unwrap();
    for i in 0..10 {
        store.insert(t, &row(&key(i), b"before", i)).unwrap();
    }
    d.set_faults(FaultPlan { faults: vec![Fault::Eio { op, nth: 1, sticky: false }] });
    let mut txn = store.begin(Isolation::ReadCommitted);
    let first = txn.update(t, &key(1), "text", b"after").and_then(|()| txn.commit());
    assert!(matches!(first, Err(Error::Space(_))), "{op:?}: {first:?}");
    // The device works again, but the store does not trust it: it stays stopped.
    for r in [
        store.insert(t, &row(&key(20), b"x", 1)),
        store.update(t, &key(2), "text", b"x"),
        store.erase(t, &key(3)),
    ] {
        assert!(matches!(r, Err(Error::Stopped(_))), "{op:?}: {r:?}");
    }
    drop(store);
    d.set_faults(FaultPlan::default());
    let store = open(&d, &p, &small_options());
    for i in 0..10 {
        assert_eq!(
            store.select_cell(t, &key(i), "text").unwrap(),
            Some(b"before".to_vec()),
            "{op:?}"
        );
    }
    store.update(t, &key(1), "text", b"after").unwrap();
    assert_eq!(store.select_cell(t, &key(1), "text").unwrap(), Some(b"after".to_vec()));
}

#[test]
fn a_failed_block_write_stops_the_store() {
    failing(OpKind::Write);
}

#[test]
fn a_failed_flush_at_commit_stops_the_store() {
    failing(OpKind::Flush);
}
