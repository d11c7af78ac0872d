//! Isolation as built: no level shows a dirty read; repeatable read forbids a non-repeatable
//! read (which read committed allows); serializable forbids a write skew (which read
//! committed allows); rows declared up front are locked before anything else, in one order,
//! so two writers that deadlock when they lock rows as they meet them do not when they
//! declare them. Lock waits are bounded by a short `lock_timeout` where a test means a wait
//! to run out, and by a long one where it means a wait to end when another transaction does
//! (a loaded machine may take its time, and must not turn the wait into a timeout).

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::*;
use shale_table::{
    Column, Declared, Error, Isolation, Schema, SimPmem, TableId, TableOptions, TableStore,
};

const LEVELS: [Isolation; 3] =
    [Isolation::ReadCommitted, Isolation::RepeatableRead, Isolation::Serializable];

/// A lock wait meant to end when the other transaction ends, never to run out: a minute.
const LOCK_WAIT_LONG: Duration = Duration::from_secs(60);

fn store() -> (Arc<TableStore>, TableId) {
    store_with(small_options().lock_timeout)
}

/// A store of four committed rows whose lock waits run out after `lock_timeout`.
fn store_with(lock_timeout: Duration) -> (Arc<TableStore>, TableId) {
    let d = sim(16, 21);
    let p = SimPmem::new(PMEM_BYTES);
    let store = open(&d, &p, &TableOptions { lock_timeout, ..small_options() });
    let t = store.create_table("t", schema()).unwrap();
    for i in 0..4 {
        store.insert(t, &row(&key(i), b"committed", i)).unwrap();
    }
    (Arc::new(store), t)
}

#[test]
fn no_level_reads_uncommitted_changes() {
    // Each reader must wait for the writer, however long the writer takes.
    let (store, t) = store_with(LOCK_WAIT_LONG);
    for level in LEVELS {
        // A writer changes row 1, inserts row 9 and erases row 2, then aborts after a while.
        let mut w = store.begin(Isolation::ReadCommitted);
        w.update(t, &key(1), "text", b"dirty").unwrap();
        w.insert(t, &row(&key(9), b"dirty", 9)).unwrap();
        w.erase(t, &key(2)).unwrap();
        // Set just before the abort: a read that returns with it still unset did not wait
        // for the writer.
        let aborting = Arc::new(AtomicBool::new(false));
        let started = Arc::new(Barrier::new(2));
        let reader = {
            let (store, aborting, started) = (store.clone(), aborting.clone(), started.clone());
            std::thread::spawn(move || {
                started.wait();
                let mut r = store.begin(level);
                let one = r.select_cell(t, &key(1), "text").unwrap();
                let waited = aborting.load(Ordering::SeqCst);
                let nine = r.select(t, &key(9)).unwrap();
                let two = r.select_cell(t, &key(2), "text").unwrap();
                let mut scan = r.scan(t, ..).unwrap();
                let mut rows = Vec::new();
                while let Some(b) = scan.next().unwrap() {
                    rows.extend(b);
                }
                drop(scan);
                r.commit().unwrap();
                (waited, one, nine, two, rows)
            })
        };
        // The reader is about to read; give it time to reach the locked row (a read that
        // does not wait returns meanwhile; one that waits waits for the abort either way).
        started.wait();
        std::thread::sleep(Duration::from_millis(50));
        aborting.store(true, Ordering::SeqCst);
        w.abort().unwrap();
        let (waited, one, nine, two, rows) = reader.join().unwrap();
        assert!(waited, "{level:?} did not wait for the writer");
        assert_eq!(one, Some(b"committed".to_vec()), "{level:?}");
        assert_eq!(nine, None, "{level:?}");
        assert_eq!(two, Some(b"committed".to_vec()), "{level:?}");
        assert_eq!(rows.len(), 4, "{level:?}");
        assert!(rows.iter().all(|r| r[1] == b"committed"), "{level:?}");
    }
    // A reader that cannot wait long enough is told so, and never given the dirty bytes.
    let (store, t) = store_with(small_options().lock_timeout);
    let mut w = store.begin(Isolation::ReadCommitted);
    w.update(t, &key(1), "text", b"dirty").unwrap();
    for level in LEVELS {
        let mut r = store.begin(level);
        assert!(matches!(r.select(t, &key(1)), Err(Error::LockTimeout)), "{level:?}");
    }
    w.commit().unwrap();
    assert_eq!(store.select_cell(t, &key(1), "text").unwrap(), Some(b"dirty".to_vec()));
}

#[test]
fn repeatable_read_forbids_a_non_repeatable_read() {
    let (store, t) = store();
    let mut r = store.begin(Isolation::RepeatableRead);
    let first = r.select_cell(t, &key(0), "text").unwrap();
    // A writer cannot change the row while the reader is open...
    let w = store.update(t, &key(0), "text", b"changed");
    assert!(matches!(w, Err(Error::LockTimeout)), "{w:?}");
    assert_eq!(r.select_cell(t, &key(0), "text").unwrap(), first);
    r.commit().unwrap();
    // ...and can once it has ended.
    store.update(t, &key(0), "text", b"changed").unwrap();

    // Read committed allows it: the second read sees the commit in between.
    let mut r = store.begin(Isolation::ReadCommitted);
    let first = r.select_cell(t, &key(0), "text").unwrap();
    store.update(t, &key(0), "text", b"again").unwrap();
    let second = r.select_cell(t, &key(0), "text").unwrap();
    assert_ne!(first, second);
    r.commit().unwrap();
}

/// Two on-call doctors: each transaction reads both, and goes off call if the other is on.
/// Returns the rows after both ran, and how many failed to get their locks.
fn on_call(level: Isolation) -> (u64, u64, usize) {
    let d = sim(16, 22);
    let p = SimPmem::new(PMEM_BYTES);
    let store = Arc::new(open(&d, &p, &small_options()));
    let s = Schema::new(vec![Column::fixed("id", 1), Column::fixed("on", 1)]).unwrap();
    let t = store.create_table("doctors", s).unwrap();
    store.insert(t, &[b"a", b"\x01"]).unwrap();
    store.insert(t, &[b"b", b"\x01"]).unwrap();
    let barrier = Arc::new(Barrier::new(2));
    let doctor = |me: &'static [u8]| {
        let (store, barrier) = (store.clone(), barrier.clone());
        std::thread::spawn(move || {
            let mut txn = store.begin(level);
            let a = txn.select_cell(t, b"a", "on").unwrap().unwrap()[0];
            let b = txn.select_cell(t, b"b", "on").unwrap().unwrap()[0];
            barrier.wait();
            if a + b < 2 {
                txn.commit().unwrap();
                return false;
            }
            match txn.update(t, me, "on", b"\x00") {
                Ok(()) => {
                    txn.commit().unwrap();
                    false
                }
                Err(Error::LockTimeout) => {
                    txn.abort().unwrap();
                    true
                }
                Err(e) => panic!("{e:?}"),
            }
        })
    };
    let (x, y) = (doctor(b"a"), doctor(b"b"));
    let timeouts = usize::from(x.join().unwrap()) + usize::from(y.join().unwrap());
    let on = |k: &[u8]| u64::from(store.select_cell(t, k, "on").unwrap().unwrap()[0]);
    (on(b"a"), on(b"b"), timeouts)
}

#[test]
fn serializable_forbids_a_write_skew() {
    let (a, b, timeouts) = on_call(Isolation::Serializable);
    assert!(a + b >= 1, "write skew: both doctors went off call");
    assert!(timeouts >= 1);
    // Read committed lets both go: the anomaly serializable is there to forbid.
    let (a, b, timeouts) = on_call(Isolation::ReadCommitted);
    assert_eq!((a, b, timeouts), (0, 0, 0));
}

/// Two writers each update rows 1 and 2, in opposite orders, with a pause between: left to
/// lock as they go they deadlock (both wait for the other's row until the timeout); with
/// their rows declared up front, one waits for the other at its start and neither fails.
#[test]
fn declared_rows_are_locked_up_front_in_one_order_so_no_deadlock() {
    let (store, t) = store();
    // Undeclared, the deadlock: each holds one row and waits for the other's.
    let barrier = Arc::new(Barrier::new(2));
    let undeclared: Vec<_> = [(1, 2), (2, 1)]
        .into_iter()
        .map(|(a, b)| {
            let (store, barrier) = (store.clone(), barrier.clone());
            std::thread::spawn(move || {
                let mut txn = store.begin(Isolation::RepeatableRead);
                txn.update(t, &key(a), "text", b"first").unwrap();
                barrier.wait();
                let second = txn.update(t, &key(b), "text", b"second");
                txn.abort().unwrap();
                second
            })
        })
        .collect();
    // At least one waits out its timeout (the other may then get the row it freed).
    let results: Vec<_> = undeclared.into_iter().map(|w| w.join().unwrap()).collect();
    assert!(results.iter().any(|r| matches!(r, Err(Error::LockTimeout))), "{results:?}");
    // Declared: rows in any order in the declaration, locked in one order. Their waits end
    // when the other writer commits: a store whose waits run out only after a minute, so
    // that a writer descheduled for a while is not taken for a deadlock.
    let (store, t) = store_with(LOCK_WAIT_LONG);
    let declared: Vec<_> = [(1, 2), (2, 1)]
        .into_iter()
        .map(|(a, b)| {
            let store = store.clone();
            std::thread::spawn(move || {
                for round in 0..10u64 {
                    let rows = Declared::new().write(t, &key(a)).write(t, &key(b));
                    let mut txn = store.begin_declared(Isolation::RepeatableRead, &rows).unwrap();
                    let text = format!("{a}{b} {round}");
                    txn.update(t, &key(a), "text", text.as_bytes()).unwrap();
                    std::thread::sleep(Duration::from_millis(2));
                    txn.update(t, &key(b), "text", text.as_bytes()).unwrap();
                    txn.commit().unwrap();
                }
            })
        })
        .collect();
    for w in declared {
        w.join().unwrap();
    }
    // The last writer wrote both rows alike.
    let one = store.select_cell(t, &key(1), "text").unwrap();
    assert_eq!(one, store.select_cell(t, &key(2), "text").unwrap());
}

/// A declared read stays as read; a declared absent key stays absent for others; an unknown
/// table is refused with nothing left locked; a declaration blocked past the timeout leaves
/// no lock behind.
#[test]
fn declared_reads_and_absent_keys_are_locked_from_the_start() {
    let (store, t) = store();
    let rows = Declared::new().read(t, &key(0)).write(t, &key(42));
    assert_eq!(rows.len(), 2);
    let mut r = store.begin_declared(Isolation::RepeatableRead, &rows).unwrap();
    // Locked before any read: the writer waits even though nothing was read yet.
    let w = store.update(t, &key(0), "text", b"changed");
    assert!(matches!(w, Err(Error::LockTimeout)), "{w:?}");
    let first = r.select_cell(t, &key(0), "text").unwrap();
    assert_eq!(r.select_cell(t, &key(0), "text").unwrap(), first);
    // The absent key: another's insert waits, this transaction's goes.
    let other = store.insert(t, &row(&key(42), b"other", 42));
    assert!(matches!(other, Err(Error::LockTimeout)), "{other:?}");
    r.insert(t, &row(&key(42), b"mine", 42)).unwrap();
    r.commit().unwrap();
    assert_eq!(store.select_cell(t, &key(42), "text").unwrap(), Some(b"mine".to_vec()));
    store.update(t, &key(0), "text", b"changed").unwrap();

    // A table that does not exist: refused, nothing held.
    let bad = Declared::new().write(t, &key(1)).read(TableId(999), b"x");
    let e = store.begin_declared(Isolation::RepeatableRead, &bad).unwrap_err();
    assert!(matches!(e, Error::NoSuchTable(_)), "{e:?}");
    // A declaration that meets a held row times out and releases what it took.
    let mut holder = store.begin(Isolation::ReadCommitted);
    holder.update(t, &key(3), "text", b"held").unwrap();
    let blocked = Declared::new().write(t, &key(1)).write(t, &key(3));
    let e = store.begin_declared(Isolation::RepeatableRead, &blocked).unwrap_err();
    assert!(matches!(e, Error::LockTimeout), "{e:?}");
    holder.commit().unwrap();
    store.update(t, &key(1), "text", b"free").unwrap();
}
