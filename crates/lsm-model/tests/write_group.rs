//! The write group and the memtable switch under shuttle: writers commit through the
//! engine's `WriteQueue` and `GroupSync`, memtables switch every few ops, and each writer
//! reads its write back as soon as it is acknowledged (a write acknowledged to a caller is
//! visible to every read that starts after the acknowledgement), while a reader checks that
//! a snapshot reads the same twice and sees each batch whole or not at all (a group is
//! published only once all its writers have inserted). A failure prints the schedule to
//! replay.

use std::sync::Arc;

use shale_lsm_model::db::{Batch, Store};

const ITERATIONS: usize = 2000;
const PCT_DEPTH: usize = 3;

fn batch(writer: u8, write: u8, ops: u8) -> Batch {
    (0..ops).map(|i| (vec![b'k', writer, i], vec![writer, write, i])).collect()
}

/// Three writers, each over keys of its own: a single put, then a batch of three; the
/// leader inserts small groups itself (up to `leader_ops` ops), larger ones are inserted by
/// their writers in parallel. With `pipelined`, every group goes through the WAL pipeline:
/// its leader lets go of the WAL and the leadership once its ticket is taken, and groups
/// publish in ticket order whichever's "writes" finish first.
fn three_writers_read_their_writes(leader_ops: usize, pipelined: bool) {
    // Four ops to a memtable: most groups switch it.
    let store = Arc::new(Store::with_pipeline(4, leader_ops, pipelined));
    let threads: Vec<_> = (0..3u8)
        .map(|w| {
            let store = store.clone();
            shuttle::thread::spawn(move || {
                for (write, ops) in [(1u8, 1u8), (2, 3)] {
                    let b = batch(w, write, ops);
                    store.write(&b);
                    for (k, v) in &b {
                        assert_eq!(store.get(k).as_ref(), Some(v), "writer {w} write {write}");
                    }
                }
            })
        })
        .collect();
    let reader = {
        let store = store.clone();
        shuttle::thread::spawn(move || {
            let snapshot = store.snapshot();
            let read = || -> Vec<Option<Vec<u8>>> {
                (0..3u8)
                    .flat_map(|w| batch(w, 2, 3))
                    .map(|(k, _)| store.get_at(&k, Some(snapshot)))
                    .collect()
            };
            let first = read();
            shuttle::thread::yield_now();
            assert_eq!(read(), first, "a snapshot read twice differs");
            for (w, ops) in first.chunks(3).enumerate() {
                let whole = ops.iter().all(|v| v.as_ref().is_some_and(|v| v[1] == 2));
                let none = ops.iter().all(|v| v.as_ref().is_none_or(|v| v[1] != 2));
                assert!(whole || none, "writer {w}'s batch seen in part: {ops:?}");
            }
        })
    };
    for t in threads.into_iter().chain([reader]) {
        t.join().unwrap();
    }
    assert_eq!(store.last_seq(), 3 * 4);
    assert!(store.switches() >= 1, "a memtable of four ops switches at least once");
    for w in 0..3u8 {
        for (k, v) in batch(w, 2, 3) {
            assert_eq!(store.get(&k), Some(v));
        }
    }
}

#[test]
fn writers_read_their_writes_when_leaders_insert_groups() {
    let run = || three_writers_read_their_writes(usize::MAX, false);
    shuttle::check_random(run, ITERATIONS);
    shuttle::check_pct(run, ITERATIONS, PCT_DEPTH);
}

#[test]
fn writers_read_their_writes_when_writers_insert_in_parallel() {
    let run = || three_writers_read_their_writes(0, false);
    shuttle::check_random(run, ITERATIONS);
    shuttle::check_pct(run, ITERATIONS, PCT_DEPTH);
}

#[test]
fn writers_read_their_writes_with_both_kinds_of_group() {
    // Groups of up to two ops are the leader's, larger ones parallel.
    let run = || three_writers_read_their_writes(2, false);
    shuttle::check_random(run, ITERATIONS);
    shuttle::check_pct(run, ITERATIONS, PCT_DEPTH);
}

#[test]
fn pipelined_groups_publish_in_order_and_writers_read_their_writes() {
    for leader_ops in [usize::MAX, 0, 2] {
        let run = move || three_writers_read_their_writes(leader_ops, true);
        shuttle::check_random(run, ITERATIONS);
        shuttle::check_pct(run, ITERATIONS, PCT_DEPTH);
    }
}
