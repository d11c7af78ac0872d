//! A panic in a background thread, or in a write group's leader, stops the store (P5) and
//! wakes everyone waiting for its work.
//!
//! Before: `shale bench --block_size=0` panicked in the flush thread, the thread ended quietly,
//! and `flush()`, stalled writers and `close()` waited for it forever. Now each background
//! thread catches the panic, records `Error::Stopped` with the panic's message and wakes every
//! waiter; later calls return `Stopped`, `close` returns, and a reopen finds every write that
//! was acknowledged. The panics come from the test-only failpoints (feature `failpoints`),
//! since the option that once caused one is now refused at open.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use shale_lsm::{Db, Error, Options};

/// Longest a call may take before the test calls it hung.
const HANG: Duration = Duration::from_secs(30);

/// Runs `f` on a thread of its own and returns its result, failing the test if it takes
/// longer than [`HANG`].
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(HANG).unwrap_or_else(|_| panic!("{what} hung (no answer in {HANG:?})"))
}

fn assert_stopped<T: std::fmt::Debug>(what: &str, r: shale_lsm::Result<T>, panicked: &str) {
    match r {
        Err(Error::Stopped(why)) => {
            assert!(why.contains(panicked) && why.contains("failpoint"), "{what}: {why}")
        }
        other => panic!("{what}: {other:?}, expected Stopped after \"{panicked}\""),
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    vec![b'a' + (i % 26) as u8; 200]
}

#[test]
fn background_flush_panic_stops_the_store_and_wakes_waiters() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = Options::small_for_tests();
    o.panic_in_flush_after = Some(0);
    let db = Arc::new(Db::open(dir.path(), o).unwrap());
    for i in 0..10 {
        db.put(&key(i), &value(i)).unwrap();
    }
    // A writer that fills memtables: once the first sealed one cannot be flushed it stalls
    // (MT stall) and must be woken by the stop.
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            let mut acked = 10;
            loop {
                match db.put(&key(acked), &value(acked)) {
                    Ok(()) => acked += 1,
                    Err(e) => return (acked, e),
                }
            }
        })
    };
    let flusher = db.clone();
    let flushed = within("flush", move || flusher.flush());
    assert_stopped("flush", flushed, "background flush panicked");
    let (acked, e) = within("stalled writer", move || writer.join().unwrap());
    assert_stopped("stalled writer", Err::<(), _>(e), "background flush panicked");
    assert_stopped("put", db.put(b"late", b"x"), "background flush panicked");
    let waiter = db.clone();
    assert_stopped(
        "wait_for_compaction",
        within("wait_for_compaction", move || waiter.wait_for_compaction()),
        "background flush panicked",
    );
    let waiter = db.clone();
    assert_stopped(
        "compact_range",
        within("compact_range", move || waiter.compact_range()),
        "background flush panicked",
    );
    assert!(db.stats().stopped.is_some_and(|s| s.contains("panicked")));
    let db = Arc::into_inner(db).expect("every thread let go of the store");
    assert_stopped("close", within("close", move || db.close()), "background flush panicked");

    // Nothing acknowledged is lost: the WAL holds what the flush did not write.
    let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
    for i in 0..acked {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "key {i} of {acked}");
    }
    db.check().unwrap();
    db.close().unwrap();
}

#[test]
fn background_compaction_panic_stops_the_store_and_wakes_waiters() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = Options::small_for_tests();
    o.panic_in_compaction_after = Some(0);
    o.level0_file_num_compaction_trigger = 2;
    o.max_background_jobs = 4; // three compaction threads, all of which must end counted
    let db = Arc::new(Db::open(dir.path(), o).unwrap());
    assert_eq!(db.stats().compaction_threads, 3);
    let mut acked = 0;
    for round in 0..2 {
        for _ in 0..50 {
            db.put(&key(acked), &value(acked)).unwrap();
            acked += 1;
        }
        // The second flush may already meet the stop; the first one cannot.
        match db.flush() {
            Ok(()) => {}
            Err(e) => assert_stopped("flush", Err::<(), _>(e), "compaction panicked"),
        }
        assert!(round == 1 || db.stats().stopped.is_none());
    }
    let waiter = db.clone();
    assert_stopped(
        "compact_range",
        within("compact_range", move || waiter.compact_range()),
        "background compaction panicked",
    );
    let waiter = db.clone();
    assert_stopped(
        "wait_for_compaction",
        within("wait_for_compaction", move || waiter.wait_for_compaction()),
        "background compaction panicked",
    );
    assert_stopped("put", db.put(b"late", b"x"), "background compaction panicked");
    assert_stopped("flush", db.flush(), "background compaction panicked");
    // Every compaction thread ends and counts itself off exactly once (an extra count would
    // underflow and panic; a missing one would leave a thread counted).
    let watcher = db.clone();
    within("compaction threads ending", move || {
        while watcher.stats().compaction_threads > 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    assert_stopped(
        "set_background_jobs",
        db.set_background_jobs(3),
        "background compaction panicked",
    );
    let db = Arc::into_inner(db).expect("every thread let go of the store");
    assert_stopped("close", within("close", move || db.close()), "background compaction panicked");

    let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
    for i in 0..acked {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "key {i} of {acked}");
    }
    db.check().unwrap();
    db.compact_range().unwrap();
    db.close().unwrap();
}

#[test]
fn a_store_dropped_after_a_background_panic_does_not_hang() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = Options::small_for_tests();
    o.panic_in_flush_after = Some(0);
    let db = Db::open(dir.path(), o).unwrap();
    db.put(b"k", b"v").unwrap();
    assert!(matches!(db.flush(), Err(Error::Stopped(_))));
    within("drop", move || drop(db));
    let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
    db.close().unwrap();
}

/// A write group's leader that panics (a bug) stops the store as a background thread's panic
/// does: every writer, in its group (told by the queue, or waiting for a parallel insert's
/// publication), queued behind it, or waiting for a pipelined group's turn, gets `Stopped`
/// instead of waiting forever, and a reopen finds every acknowledged write. Run with the
/// leader inserting small groups, with batches big enough for parallel inserts, with the
/// WAL pipeline's loggers on, and with groups of unsynced writes overlapping (then the
/// leader panics after it passed the leadership on, and later groups wait for its turn).
#[test]
fn a_write_leader_panic_stops_the_store_and_wakes_every_writer() {
    for (ops_per_batch, pipelined, overlap) in [
        (1, false, false),
        (40, false, false),
        (1, true, false),
        (1, false, true),
        (40, false, true),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut o = Options::small_for_tests();
        o.panic_in_write_leader_after = Some(200);
        o.adaptive_wal_loggers = !pipelined;
        o.overlap_write_groups = Some(overlap);
        // The path a machine of many cores takes: writers of a large group insert their own ops.
        o.parallel_group_inserts = Some(true);
        let db = Arc::new(Db::open(dir.path(), o).unwrap());
        let writers: Vec<_> = (0..4u32)
            .map(|w| {
                let db = db.clone();
                std::thread::spawn(move || {
                    let mut acked = Vec::new();
                    for n in 0.. {
                        let mut b = shale_lsm::WriteBatch::new();
                        for op in 0..ops_per_batch {
                            let i = w * 10_000_000 + n * 100 + op;
                            b.put(&key(i), &value(i));
                        }
                        let sync = n % 3 == 0;
                        match db.write(&b, &shale_lsm::WriteOptions { sync }) {
                            Ok(()) => acked.push(n),
                            Err(e) => return (w, acked, e),
                        }
                    }
                    unreachable!()
                })
            })
            .collect();
        let mut outcomes = Vec::new();
        for h in writers {
            outcomes.push(within("a writer", move || h.join().unwrap()));
        }
        let ctx = format!("{ops_per_batch} ops a batch, pipelined {pipelined}, overlap {overlap}");
        for (_, _, e) in &outcomes {
            // A writer the queue tells gets the store's reason; one waiting for a parallel
            // insert's publication learns only that its leader panicked.
            assert!(matches!(e, Error::Stopped(why) if why.contains("panicked")), "{ctx}: {e:?}");
        }
        let stopped = db.stats().stopped.unwrap_or_default();
        assert!(stopped.contains("leader panicked") && stopped.contains("failpoint"), "{stopped}");
        assert_stopped("put", db.put(b"late", b"x"), "leader panicked");
        let db = Arc::into_inner(db).expect("every writer let go of the store");
        assert_stopped("close", within("close", move || db.close()), "leader panicked");

        let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
        for (w, acked, _) in &outcomes {
            for &n in acked {
                for op in 0..ops_per_batch {
                    let i = w * 10_000_000 + n * 100 + op;
                    assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "{ctx}: key {i}");
                }
            }
        }
        db.check().unwrap();
        db.close().unwrap();
    }
}
