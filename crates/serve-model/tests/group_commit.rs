//! serve's group commit (commit.rs, the real file) under shuttle: runs queue batches, read
//! pending entries and wait for their tickets while the real committer (`commit::serve`)
//! writes groups through the model's stand-in engine. A failure prints the schedule to replay.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use shale_serve_model::commit::{self, GROUP_BYTES_MAX, GroupWriter};
use shale_serve_model::run;
use shale_serve_model::store::Store;

const ITERATIONS: usize = 3000;
const PCT_DEPTH: usize = 3;

/// Bytes of a batch that fills more than half a group: two such batches are never written
/// in one group, so groups split.
const HALF_GROUP: usize = GROUP_BYTES_MAX / 2 + 1;

fn check(test: impl Fn() + Send + Sync + 'static) {
    let test = Arc::new(test);
    let t = test.clone();
    shuttle::check_random(move || t(), ITERATIONS);
    shuttle::check_pct(move || test(), ITERATIONS, PCT_DEPTH);
}

/// The committer, as the server starts it under `appendfsync always` (it runs on after the
/// test: shuttle ends the run when every task but it is done).
fn start_committer(store: &Arc<Store>) {
    drop(shuttle::future::spawn(commit::serve(store.clone())));
}

/// Three runs queue two batches each (one on a key of their own, then that key and a key
/// they share; the sizes make groups of one batch and of several), and a fourth run is
/// dropped while it waits (or before it queues). Every batch queued is written, in ticket
/// order (the stand-in checks each write's tickets against the last), every run is told
/// (a stranded one is a deadlock to shuttle), each only once its batch is in the engine,
/// and the shared key ends with the value of the batch queued last.
#[test]
fn batches_commit_in_ticket_order_and_no_waiter_is_stranded() {
    check(|| {
        let store = Arc::new(Store::new(&[]));
        start_committer(&store);
        let queued = Arc::new(AtomicU64::new(0));
        let runs: Vec<_> = (0..3u8)
            .map(|r| {
                let (store, queued) = (store.clone(), queued.clone());
                shuttle::future::spawn(async move {
                    let own = [b'k', r];
                    let bytes = if r == 0 { HALF_GROUP } else { 64 };
                    let first = [b'1', r];
                    let ticket = run::queue(&store, &[(&own, &first)], bytes);
                    queued.fetch_add(1, Ordering::SeqCst);
                    store.commits().wait(ticket).await.expect("nothing fails");
                    assert_eq!(store.get(&own).map(|v| v.data), Some(first.to_vec()));
                    let second = [b'2', r];
                    let ticket = run::queue(&store, &[(&own, &second), (b"s", &second)], bytes);
                    queued.fetch_add(1, Ordering::SeqCst);
                    store.commits().wait(ticket).await.expect("nothing fails");
                    assert_eq!(store.get(&own).map(|v| v.data), Some(second.to_vec()));
                })
            })
            .collect();
        let dropped = {
            let (store, queued) = (store.clone(), queued.clone());
            shuttle::future::spawn(async move {
                let ticket = run::queue(&store, &[(b"c", b"c")], 64);
                queued.fetch_add(1, Ordering::SeqCst);
                store.commits().wait(ticket).await.expect("nothing fails");
            })
        };
        shuttle::future::block_on(async move {
            shuttle::future::yield_now().await;
            dropped.abort();
            let _ = dropped.await;
            for r in runs {
                r.await.expect("a run ends");
            }
            store.commits().drained().await;
            let n = queued.load(Ordering::SeqCst);
            assert_eq!(store.written(), (1..=n).collect::<Vec<_>>(), "every batch written once");
            // The shared key's last batch is the one with the highest ticket among those that
            // wrote it: its run's second value, whichever run queued last.
            let last = store.get(b"s").expect("three runs wrote it").data;
            assert_eq!(last[0], b'2');
            assert!(store.commits().pending(b"s").is_none(), "the pending table is emptied");
        });
    });
}

/// Runs of INCRs and GETs of one key, the engine writes numbered in `failing` failing.
/// Checks: the INCRs told success returned 1, 2, ..., k (each read the value queued or
/// written before it, and none read a value whose write failed: such a run fails), the key
/// ends at k (no lost update); a GET that read a pending entry answers only once that entry
/// is written, and fails exactly when its write failed.
fn incrs_and_reads(failing: &'static [usize]) {
    check(move || {
        let store = Arc::new(Store::new(failing));
        start_committer(&store);
        let incrs: Vec<_> = (0..3usize)
            .map(|r| {
                let store = store.clone();
                shuttle::future::spawn(async move {
                    let mut told = Vec::new();
                    for i in 0..2 {
                        // Run 0's first INCR fills more than half a group: groups split.
                        let bytes = if r + i == 0 { HALF_GROUP } else { 64 };
                        let result = run::incr(&store, b"n", bytes).await;
                        if let Ok(n) = result {
                            let now = store.get(b"n").map_or(0, |v| run::number(&v));
                            assert!(now >= n, "INCR told {n} while the engine holds {now}");
                        }
                        told.push(result);
                    }
                    told
                })
            })
            .collect();
        let reader = {
            let store = store.clone();
            shuttle::future::spawn(async move {
                for _ in 0..2 {
                    let (read, got) = run::get(&store, b"n").await;
                    let written = store.written();
                    match (read, got) {
                        (Some(t), Ok(value)) => {
                            assert!(
                                written.contains(&t),
                                "a GET answered ticket {t}'s value before it was written \
                                 (written: {written:?})"
                            );
                            let v = value.map_or(0, |v| run::number(&v));
                            let now = store.get(b"n").map_or(0, |v| run::number(&v));
                            assert!(now >= v, "a GET answered {v} while the engine holds {now}");
                        }
                        (Some(t), Err(_)) => assert!(
                            !written.contains(&t),
                            "a GET failed though ticket {t}, which it read, was written"
                        ),
                        (None, got) => {
                            got.expect("a GET of the engine's value waits for nothing");
                        }
                    }
                }
            })
        };
        shuttle::future::block_on(async move {
            let mut ok = Vec::new();
            for r in incrs {
                for told in r.await.expect("a run ends") {
                    match told {
                        Ok(n) => ok.push(n),
                        Err(_) => assert!(!failing.is_empty(), "an INCR failed, none should"),
                    }
                }
            }
            reader.await.expect("the reader ends");
            ok.sort_unstable();
            let k = ok.len() as u64;
            assert_eq!(ok, (1..=k).collect::<Vec<_>>(), "INCRs told success");
            let end = store.get(b"n").map_or(0, |v| run::number(&v));
            assert_eq!(end, k, "the key after {k} successful INCRs");
            if failing.is_empty() {
                assert_eq!(k, 6);
            }
        });
    });
}

#[test]
fn incr_reads_the_value_queued_before_it_and_reads_wait_for_its_write() {
    incrs_and_reads(&[]);
}

#[test]
fn a_failed_group_fails_what_read_its_values() {
    incrs_and_reads(&[0]);
}

#[test]
fn a_failed_later_group_fails_what_read_its_values() {
    incrs_and_reads(&[1]);
}
