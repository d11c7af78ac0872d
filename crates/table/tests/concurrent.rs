//! Transactions on several threads at once, each thread on rows of its own plus a shared
//! counter row every thread increments under repeatable read (retrying on lock timeouts):
//! no lost update, no deadlock left hanging, and a reopen finds exactly what was committed;
//! with each thread's own queue, and with every thread's block I/O through shared queue
//! pairs (`TableOptions::queue_pairs`).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use shale_io::{Affinity, PairStats, PollerWait, QueuePairOptions};
use shale_table::{Error, Isolation, SimPmem, TableOptions, TableStore};

const THREADS: u64 = 4;
const ROUNDS: u64 = 40;

#[test]
fn concurrent_transactions_lose_no_update() {
    lose_no_update(small_options());
}

#[test]
fn concurrent_transactions_lose_no_update_through_queue_pairs() {
    let pairs = QueuePairOptions {
        pairs: 3,
        depth: 8,
        affinity: Affinity::Skew,
        poller: PollerWait::Spin,
        ..QueuePairOptions::default()
    };
    let stats = lose_no_update(TableOptions { queue_pairs: Some(pairs), ..small_options() });
    assert_eq!(stats.len(), 3);
    assert!(stats.iter().filter(|s| s.requests > 0).count() > 1, "{stats:?}");
    assert!(stats.iter().all(|s| s.pending == 0), "{stats:?}");
}

/// The scenario of the module comment; returns the queue pairs' counters before the reopen.
fn lose_no_update(opts: TableOptions) -> Vec<PairStats> {
    // Room for the space of many rolled-back inserts (no reclaiming thread here): a loaded
    // machine's lock timeouts once rolled back enough of them to fill 64 segments.
    let d = sim(256, 61);
    let p = SimPmem::new(PMEM_BYTES);
    let opts = TableOptions { lock_timeout: Duration::from_millis(50), ..opts };
    let store = Arc::new(open(&d, &p, &opts));
    let t = store.create_table("t", schema()).unwrap();
    store.insert(t, &row(b"counter!", b"", 0)).unwrap();
    let workers: Vec<_> = (0..THREADS)
        .map(|w| {
            let store = store.clone();
            std::thread::spawn(move || {
                for r in 0..ROUNDS {
                    loop {
                        let mut txn = store.begin(Isolation::RepeatableRead);
                        let attempt = (|| {
                            let k = key(w * 1000 + r);
                            txn.insert(t, &row(&k, &text(&k, r, (r as usize * 97) % 5000), r))?;
                            let n = txn.select_cell(t, b"counter!", "n")?.unwrap();
                            let n = u64::from_le_bytes(n[..].try_into().unwrap()) + 1;
                            txn.update(t, b"counter!", "n", &n.to_le_bytes())
                        })();
                        match attempt {
                            Ok(()) => {
                                txn.commit().unwrap();
                                break;
                            }
                            Err(Error::LockTimeout) => {
                                txn.abort().unwrap();
                                // Back off by a time of this thread's own before the retry:
                                // the deadlocks here (every thread reads the counter shared,
                                // then wants it exclusive) end in timeouts at about the same
                                // moment, and retries made at once meet again in the same
                                // deadlock, each leaving a rolled-back insert's space behind.
                                std::thread::sleep(Duration::from_millis(1 + w * 7));
                            }
                            Err(e) => panic!("{e:?}"),
                        }
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let check = |store: &TableStore| {
        let n = store.select_cell(t, b"counter!", "n").unwrap().unwrap();
        assert_eq!(u64::from_le_bytes(n[..].try_into().unwrap()), THREADS * ROUNDS);
        assert_eq!(all_rows(store, t).len() as u64, THREADS * ROUNDS + 1);
    };
    check(&store);
    // Every commit waited for a device flush; concurrent ones may share one (group commit),
    // and no flush is made for nobody. (The insert of the counter row committed one more.)
    let stats = store.stats();
    assert_eq!(stats.flushed_commits, THREADS * ROUNDS + 1, "{stats:?}");
    assert!((1..=stats.flushed_commits).contains(&stats.commit_flushes), "{stats:?}");
    let pairs = store.queue_pair_stats();
    drop(store);
    check(&open(&d, &p, &opts));
    pairs
}
