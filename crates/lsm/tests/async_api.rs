//! The async API (`Db::submit_*`, `Ticket`): Busy and resubmission, exactly-once completion,
//! lucky reads, scans, mixed synchronous and asynchronous clients against a model, tickets as
//! futures under tokio and under a plain executor, tickets outstanding at close and drop,
//! bad input and bad options refused.

mod common;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shale_io::{Fault, FaultPlan, OpKind, SimDevice};
use shale_lsm::options::{ASYNC_QUEUE_DEPTH_MAX, ASYNC_WORKERS_MAX, KEY_BYTES_MAX};
use shale_lsm::{Db, Error, Options, ReadOptions, Ticket, WriteBatch, WriteOptions};

/// A submitter's admitted attempts (attempt number, key) and refused attempt numbers.
type Attempts = (Vec<(u64, String)>, Vec<u64>);
/// An async write not yet complete, with the model change it makes once it is (a value, or
/// `None` for a delete, per key).
type PendingWrite = (Ticket<()>, Vec<(Vec<u8>, Option<Vec<u8>>)>);

/// Longest a ticket may take before the test calls it hung.
const HANG: Duration = Duration::from_secs(60);

/// [`options`] without a block cache: every read an SST must answer goes to a worker (a
/// cached block would answer on the caller's thread).
fn uncached(queue_depth: usize, workers: usize) -> Options {
    Options { block_cache_bytes: 0, ..options(queue_depth, workers) }
}

fn options(queue_depth: usize, workers: usize) -> Options {
    let mut o = Options::small_for_tests();
    o.write_buffer_bytes = 128 << 10;
    o.async_queue_depth = queue_depth;
    o.async_workers = workers;
    o
}

/// Waits for every ticket on another thread, failing the test if one never completes.
fn wait_all_or_hang<T: Send + 'static>(tickets: Vec<Ticket<T>>) -> Vec<shale_lsm::Result<T>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let results: Vec<_> = tickets.into_iter().map(Ticket::wait).collect();
        let _ = tx.send(results);
    });
    rx.recv_timeout(HANG).unwrap_or_else(|_| panic!("a ticket did not complete in {HANG:?}"))
}

/// Every entry of the store by synchronous iteration.
fn sync_entries(db: &Db, opts: &ReadOptions) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db.iter(opts);
    it.seek_to_first();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().unwrap();
    out
}

#[test]
fn a_full_queue_answers_busy_and_every_admitted_submission_completes_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    // A shallow queue, one worker and one write in four synced: submitters outrun the worker.
    let db = Db::open(dir.path(), options(8, 1)).unwrap();
    const THREADS: u64 = 3;
    const WRITES_PER_THREAD: u64 = 300;
    let next_attempt = AtomicU64::new(0);
    // Per thread: (accepted attempts with their key, refused attempts).
    let per_thread: Vec<Attempts> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (db, next_attempt) = (&db, &next_attempt);
                s.spawn(move || {
                    let mut accepted = Vec::new();
                    let mut refused = Vec::new();
                    let mut window: VecDeque<Ticket<()>> = VecDeque::new();
                    let mut completions = 0u64;
                    for n in 0..WRITES_PER_THREAD {
                        let key = format!("k{t}-{n:04}");
                        loop {
                            // Each attempt is a batch of its logical write and a key naming the
                            // attempt: a refused attempt that was queued anyway would show.
                            let attempt = next_attempt.fetch_add(1, Ordering::Relaxed);
                            let mut b = WriteBatch::new();
                            b.put(key.as_bytes(), format!("a{attempt}").as_bytes());
                            b.put(format!("attempt/{attempt:08}").as_bytes(), b"");
                            let opts = WriteOptions { sync: attempt % 4 == 0 };
                            match db.submit_write(&b, &opts) {
                                Ok(ticket) => {
                                    accepted.push((attempt, key.clone()));
                                    window.push_back(ticket);
                                    break;
                                }
                                Err(Error::Busy) => {
                                    refused.push(attempt);
                                    match window.pop_front() {
                                        Some(oldest) => {
                                            oldest.wait().unwrap();
                                            completions += 1;
                                        }
                                        // The other threads hold the whole queue.
                                        None => std::thread::yield_now(),
                                    }
                                }
                                Err(e) => panic!("submission: {e}"),
                            }
                        }
                    }
                    for ticket in window {
                        ticket.wait().unwrap();
                        completions += 1;
                    }
                    assert_eq!(
                        completions,
                        accepted.len() as u64,
                        "thread {t}: one completion each"
                    );
                    (accepted, refused)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let accepted: BTreeMap<u64, String> =
        per_thread.iter().flat_map(|(a, _)| a.iter().cloned()).collect();
    let refused: BTreeSet<u64> = per_thread.iter().flat_map(|(_, r)| r.iter().copied()).collect();
    assert_eq!(accepted.len() as u64, THREADS * WRITES_PER_THREAD);
    let stats = db.stats();
    assert!(stats.async_busy > 0, "the queue never filled: the test measured nothing");
    assert_eq!(stats.async_busy, refused.len() as u64);
    assert_eq!(stats.async_submitted, accepted.len() as u64);
    assert_eq!(stats.async_completed, stats.async_submitted, "every ticket completed once");
    // Two ops per admitted write and nothing else: none was committed twice or lost, and no
    // refused attempt was committed.
    assert_eq!(stats.last_seq, 2 * accepted.len() as u64);
    let entries = sync_entries(&db, &ReadOptions::default());
    let in_store: BTreeSet<u64> = entries
        .iter()
        .filter_map(|(k, _)| std::str::from_utf8(k).unwrap().strip_prefix("attempt/"))
        .map(|a| a.parse().unwrap())
        .collect();
    assert_eq!(in_store, accepted.keys().copied().collect::<BTreeSet<u64>>());
    assert!(refused.is_disjoint(&in_store));
    for (attempt, key) in &accepted {
        assert_eq!(db.get(key.as_bytes()).unwrap(), Some(format!("a{attempt}").into_bytes()));
    }
    eprintln!(
        "{} writes admitted, {} Busy answers, {} combined batches",
        accepted.len(),
        stats.async_busy,
        stats.async_write_batches
    );
    db.close().unwrap();
}

#[test]
fn queued_writes_share_commits() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(4096, 1)).unwrap();
    let tickets: Vec<Ticket<()>> = (0..2000u32)
        .map(|i| {
            db.submit_put(format!("k{i:05}").as_bytes(), b"v", &WriteOptions::default()).unwrap()
        })
        .collect();
    for r in wait_all_or_hang(tickets) {
        r.unwrap();
    }
    let stats = db.stats();
    assert_eq!(stats.last_seq, 2000);
    assert!(
        stats.async_write_batches < 2000,
        "a worker committed each queued write alone ({} batches)",
        stats.async_write_batches
    );
    assert!(stats.writes <= stats.async_write_batches, "{stats:?}");
    for i in (0..2000u32).step_by(97) {
        assert_eq!(db.get(format!("k{i:05}").as_bytes()).unwrap(), Some(b"v".to_vec()));
    }
}

#[test]
fn lucky_reads_complete_at_submission_and_misses_read_the_ssts() {
    let dir = tempfile::tempdir().unwrap();
    // Room for every miss at once; no block cache, so that SST reads go to the workers.
    let db = Db::open(dir.path(), uncached(256, 2)).unwrap();
    let key = |i: u32| format!("key{i:04}").into_bytes();
    for i in 0..200 {
        db.put(&key(i), format!("v{i}").as_bytes()).unwrap();
    }
    for i in (0..200).step_by(10) {
        db.delete(&key(i)).unwrap();
    }
    let want = |i: u32| (i % 10 != 0).then(|| format!("v{i}").into_bytes());
    let opts = ReadOptions::default();
    for i in 0..200 {
        let mut t = db.submit_get(&key(i), &opts).unwrap();
        assert!(t.is_done(), "key {i}: the memtable holds it (or its tombstone)");
        assert_eq!(t.try_take().unwrap().unwrap(), want(i), "key {i}");
    }
    let stats = db.stats();
    assert_eq!(stats.async_lucky_reads, 200);
    assert_eq!((stats.async_submitted, stats.async_completed), (200, 200));
    // After a flush the memtables are empty: every get goes to a worker and the SSTs.
    db.flush().unwrap();
    let tickets: Vec<_> = (0..200).map(|i| db.submit_get(&key(i), &opts).unwrap()).collect();
    for (i, r) in (0..200).zip(wait_all_or_hang(tickets)) {
        assert_eq!(r.unwrap(), want(i), "key {i} from an SST");
    }
    let missing = db.submit_get(b"never written", &opts).unwrap().wait().unwrap();
    assert_eq!(missing, None);
    let stats = db.stats();
    // The absent key sorts after every key of the SST: the held index answers it in memory.
    assert_eq!(stats.async_lucky_reads, 201, "no read of a block counted as lucky");
    assert_eq!((stats.async_submitted, stats.async_completed), (401, 401));
    // A newer write in the memtable answers again on the caller's thread, and a snapshot
    // read sees the value before it.
    let snapshot = db.snapshot();
    db.put(&key(1), b"newer").unwrap();
    let t = db.submit_get(&key(1), &opts).unwrap();
    assert!(t.is_done());
    assert_eq!(t.wait().unwrap(), Some(b"newer".to_vec()));
    let at_snapshot = ReadOptions { snapshot: Some(&snapshot), ..Default::default() };
    let t = db.submit_get(&key(1), &at_snapshot).unwrap();
    assert_eq!(t.wait().unwrap(), Some(b"v1".to_vec()));
    assert_eq!(db.stats().async_lucky_reads, 202);
}

#[test]
fn async_scans_agree_with_sync_iteration() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(64, 2)).unwrap();
    let mut rng = SmallRng::seed_from_u64(7);
    let key = |i: u32| format!("s{i:05}").into_bytes();
    let mut snapshots = Vec::new();
    for round in 0..6 {
        for _ in 0..800 {
            let i = rng.gen_range(0..3000);
            match rng.gen_range(0..10) {
                0 => db.delete(&key(i)).unwrap(),
                1 => db.delete_range(&key(i), &key(i + rng.gen_range(1..20))).unwrap(),
                _ => db.put(&key(i), format!("r{round}-{i}").repeat(5).as_bytes()).unwrap(),
            }
        }
        if round % 2 == 0 {
            db.flush().unwrap();
        }
        snapshots.push(db.snapshot());
    }
    for case in 0..300 {
        let start = key(rng.gen_range(0..3100));
        let limit = rng.gen_range(0..60);
        let mut opts = ReadOptions::default();
        match case % 4 {
            1 => opts.upper_bound = Some(key(rng.gen_range(0..3100))),
            2 => opts.prefix = Some(format!("s0{}", rng.gen_range(0..3)).into_bytes()),
            3 => opts.snapshot = Some(&snapshots[rng.gen_range(0..snapshots.len())]),
            _ => opts.lower_bound = Some(key(rng.gen_range(0..3100))),
        }
        let got = db.submit_scan(&start, limit, &opts).unwrap().wait().unwrap();
        let mut it = db.iter(&opts);
        it.seek(&start);
        let mut want = Vec::new();
        while it.valid() && want.len() < limit {
            want.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        it.status().unwrap();
        assert_eq!(got, want, "case {case}: start {start:?}, limit {limit}, {opts:?}");
    }
}

/// One client of the mixed test: sync and async calls on its own keys, checked against its
/// own model (no other client touches its keys, so the model is exact).
fn mixed_client(db: &Db, client: u32, seed: u64, ops: u32) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let key = |i: u32| format!("c{client}/{i:04}").into_bytes();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut writes: VecDeque<PendingWrite> = VecDeque::new();
    let settle = |writes: &mut VecDeque<PendingWrite>, model: &mut BTreeMap<Vec<u8>, Vec<u8>>| {
        for (t, changes) in writes.drain(..) {
            t.wait().unwrap();
            for (k, v) in changes {
                match v {
                    Some(v) => model.insert(k, v),
                    None => model.remove(&k),
                };
            }
        }
    };
    let submit = |db: &Db, b: &WriteBatch, sync: bool| loop {
        match db.submit_write(b, &WriteOptions { sync }) {
            Ok(t) => break t,
            Err(Error::Busy) => std::thread::yield_now(),
            Err(e) => panic!("client {client}: {e}"),
        }
    };
    for op in 0..ops {
        let i = rng.gen_range(0..400);
        let value = format!("c{client}-op{op}").repeat(rng.gen_range(1..30)).into_bytes();
        // A key with an async write outstanding has no settled value: settle first.
        let pending = writes.iter().any(|(_, c)| c.iter().any(|(k, _)| *k == key(i)));
        if pending || writes.len() >= 16 {
            settle(&mut writes, &mut model);
        }
        match rng.gen_range(0..9) {
            0 => {
                db.put(&key(i), &value).unwrap();
                model.insert(key(i), value);
            }
            1 => {
                db.delete(&key(i)).unwrap();
                model.remove(&key(i));
            }
            2 => {
                let got = db.get(&key(i)).unwrap();
                assert_eq!(got.as_ref(), model.get(&key(i)), "client {client} sync get {i}");
            }
            3 | 4 => {
                let mut b = WriteBatch::new();
                b.put(&key(i), &value);
                let t = submit(db, &b, op % 5 == 0);
                writes.push_back((t, vec![(key(i), Some(value))]));
            }
            5 => {
                let mut b = WriteBatch::new();
                b.delete(&key(i));
                writes.push_back((submit(db, &b, false), vec![(key(i), None)]));
            }
            6 => {
                // A batch of distinct keys, none with a write outstanding.
                let mut b = WriteBatch::new();
                let mut changes = Vec::new();
                for j in 0..rng.gen_range(2..6) {
                    let k = key(400 + (i + j * 97) % 400);
                    if writes.iter().any(|(_, c)| c.iter().any(|(x, _)| *x == k)) {
                        continue;
                    }
                    b.put(&k, &value);
                    changes.push((k, Some(value.clone())));
                }
                if !b.is_empty() {
                    writes.push_back((submit(db, &b, false), changes));
                }
            }
            7 => {
                let got = loop {
                    match db.submit_get(&key(i), &ReadOptions::default()) {
                        Ok(t) => break t.wait().unwrap(),
                        Err(Error::Busy) => std::thread::yield_now(),
                        Err(e) => panic!("{e}"),
                    }
                };
                assert_eq!(got.as_ref(), model.get(&key(i)), "client {client} async get {i}");
            }
            _ => {
                settle(&mut writes, &mut model);
                let prefix = format!("c{client}/").into_bytes();
                let opts = ReadOptions { prefix: Some(prefix.clone()), ..Default::default() };
                let got = loop {
                    match db.submit_scan(&prefix, usize::MAX, &opts) {
                        Ok(t) => break t.wait().unwrap(),
                        Err(Error::Busy) => std::thread::yield_now(),
                        Err(e) => panic!("{e}"),
                    }
                };
                let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                assert_eq!(got, want, "client {client} async scan after op {op}");
            }
        }
        if client == 0 && op % 700 == 699 {
            db.flush().unwrap();
        }
    }
    settle(&mut writes, &mut model);
    model
}

#[test]
fn mixed_sync_and_async_clients_agree_with_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let opts = options(32, 2);
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    let models: Vec<BTreeMap<Vec<u8>, Vec<u8>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4u32)
            .map(|c| {
                let db = &db;
                s.spawn(move || mixed_client(db, c, 100 + u64::from(c), 3000))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let model: Vec<(Vec<u8>, Vec<u8>)> =
        models.into_iter().flatten().collect::<BTreeMap<_, _>>().into_iter().collect();
    assert_eq!(sync_entries(&db, &ReadOptions::default()), model);
    let all = db.submit_scan(b"", usize::MAX, &ReadOptions::default()).unwrap().wait().unwrap();
    assert_eq!(all, model);
    let stats = db.stats();
    assert_eq!(stats.async_completed, stats.async_submitted);
    assert!(stats.flushes > 0, "{stats:?}");
    db.close().unwrap();
    let db = Db::open(dir.path(), opts).unwrap();
    assert_eq!(sync_entries(&db, &ReadOptions::default()), model);
    db.check().unwrap();
}

/// Submits until admitted, yielding to the executor on Busy.
async fn put_when_admitted(db: &Db, key: &[u8], value: &[u8]) -> shale_lsm::Result<()> {
    loop {
        match db.submit_put(key, value, &WriteOptions::default()) {
            Ok(ticket) => return ticket.await,
            Err(Error::Busy) => yield_once().await,
            Err(e) => return Err(e),
        }
    }
}

/// A future that is pending once (waking itself), then ready: a yield that needs no runtime.
fn yield_once() -> impl std::future::Future<Output = ()> {
    let mut yielded = false;
    std::future::poll_fn(move |cx| {
        if yielded {
            std::task::Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    })
}

#[test]
fn tickets_are_futures_under_tokio() {
    let dir = tempfile::tempdir().unwrap();
    let db = std::sync::Arc::new(Db::open(dir.path(), options(4, 2)).unwrap());
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    rt.block_on(async {
        let tasks: Vec<_> = (0..8u32)
            .map(|t| {
                let db = db.clone();
                tokio::spawn(async move {
                    for i in 0..150u32 {
                        let key = format!("t{t}/{i:03}");
                        put_when_admitted(&db, key.as_bytes(), key.as_bytes()).await.unwrap();
                        if i % 50 == 49 && t == 0 {
                            db.flush().unwrap();
                        }
                        let got = loop {
                            match db.submit_get(key.as_bytes(), &ReadOptions::default()) {
                                Ok(ticket) => break ticket.await.unwrap(),
                                Err(Error::Busy) => tokio::task::yield_now().await,
                                Err(e) => panic!("{e}"),
                            }
                        };
                        assert_eq!(got, Some(key.into_bytes()), "task {t} reads its put back");
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
    });
    let stats = db.stats();
    assert_eq!(stats.async_completed, stats.async_submitted);
    assert_eq!(sync_entries(&db, &ReadOptions::default()).len(), 8 * 150);
    eprintln!("tokio: {} Busy answers, {} lucky reads", stats.async_busy, stats.async_lucky_reads);
}

#[test]
fn cached_blocks_answer_gets_on_the_caller_s_thread() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(256, 2)).unwrap();
    let key = |i: u32| format!("key{i:04}").into_bytes();
    for i in 0..200 {
        db.put(&key(i), format!("v{i}").as_bytes()).unwrap();
    }
    db.delete(&key(7)).unwrap();
    // The flush writes the SST's blocks into the cache (prepopulate_block_cache).
    db.flush().unwrap();
    let opts = ReadOptions::default();
    for i in 0..200 {
        let mut t = db.submit_get(&key(i), &opts).unwrap();
        assert!(t.is_done(), "key {i}: its block is cached");
        let want = (i != 7).then(|| format!("v{i}").into_bytes());
        assert_eq!(t.try_take().unwrap().unwrap(), want, "key {i}");
    }
    let mut absent = db.submit_get(b"key9999x", &opts).unwrap();
    assert!(absent.is_done(), "the held filter or index says absent");
    assert_eq!(absent.try_take().unwrap().unwrap(), None);
    assert_eq!(db.stats().async_lucky_reads, 201);
}

#[test]
fn tickets_are_futures_under_a_plain_executor() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), uncached(4, 1)).unwrap();
    // pollster parks the thread until the ticket's waker is called: a ticket that stored no
    // waker, or a worker that never woke it, would hang here.
    pollster::block_on(async {
        for i in 0..300u32 {
            let key = format!("p{i:03}");
            put_when_admitted(&db, key.as_bytes(), b"v").await.unwrap();
        }
        db.flush().unwrap();
        for i in 0..300u32 {
            let got = db.submit_get(format!("p{i:03}").as_bytes(), &ReadOptions::default());
            assert_eq!(got.unwrap().await.unwrap(), Some(b"v".to_vec()));
        }
        let all = db.submit_scan(b"p", 1000, &ReadOptions::default()).unwrap().await.unwrap();
        assert_eq!(all.len(), 300);
    });
    assert_eq!(db.stats().async_lucky_reads, 0, "every read came from an SST");
}

/// Queues writes (some synced), gets and scans on a fresh store and ends it with `end`
/// while they are outstanding; every ticket must complete, the writes with Ok, and be in the
/// store after a reopen.
fn tickets_outstanding_at(end: impl FnOnce(Db)) {
    let dir = tempfile::tempdir().unwrap();
    let opts = options(ASYNC_QUEUE_DEPTH_MAX, 1);
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    for i in 0..100u32 {
        db.put(format!("r{i:03}").as_bytes(), b"old").unwrap();
    }
    db.flush().unwrap();
    let mut writes = Vec::new();
    let mut gets = Vec::new();
    let mut scans = Vec::new();
    for i in 0..3000u32 {
        let sync = WriteOptions { sync: i % 50 == 0 };
        writes.push(db.submit_put(format!("w{i:04}").as_bytes(), b"new", &sync).unwrap());
        if i % 10 == 0 {
            gets.push(
                db.submit_get(format!("r{:03}", i % 100).as_bytes(), &ReadOptions::default())
                    .unwrap(),
            );
        }
        if i % 300 == 0 {
            let r_keys = ReadOptions { prefix: Some(b"r".to_vec()), ..Default::default() };
            scans.push(db.submit_scan(b"r", 1000, &r_keys).unwrap());
        }
    }
    let outstanding = writes.iter().filter(|t| !t.is_done()).count();
    end(db);
    for r in wait_all_or_hang(writes) {
        r.unwrap();
    }
    for r in wait_all_or_hang(gets) {
        assert_eq!(r.unwrap(), Some(b"old".to_vec()));
    }
    for r in wait_all_or_hang(scans) {
        assert_eq!(r.unwrap().len(), 100);
    }
    let db = Db::open(dir.path(), opts).unwrap();
    for i in 0..3000u32 {
        assert_eq!(db.get(format!("w{i:04}").as_bytes()).unwrap(), Some(b"new".to_vec()));
    }
    eprintln!("{outstanding} writes were outstanding when the store ended");
}

#[test]
fn tickets_outstanding_at_close_complete_with_their_results() {
    tickets_outstanding_at(|db| db.close().unwrap());
}

#[test]
fn tickets_outstanding_at_drop_complete_with_their_results() {
    tickets_outstanding_at(drop);
}

#[test]
fn a_failed_store_answers_its_error_through_every_ticket() {
    let dev = SimDevice::new(common::DEVICE_BYTES, 4096, 7).unwrap();
    let mut opts = common::small_options();
    opts.async_queue_depth = 4096;
    let db = Db::open_device(std::sync::Arc::new(dev.clone()), opts).unwrap();
    for i in 0..50u32 {
        db.put(format!("before{i:02}").as_bytes(), b"kept").unwrap();
    }
    // Every device write fails from now on: the WAL append of the first commit fails and
    // stops the store (P5).
    dev.set_faults(FaultPlan {
        faults: vec![Fault::Eio { op: OpKind::Write, nth: 1, sticky: true }],
    });
    let tickets: Vec<Ticket<()>> = (0..500u32)
        .map(|i| {
            let sync = WriteOptions { sync: i % 3 == 0 };
            db.submit_put(format!("after{i:03}").as_bytes(), b"lost", &sync).unwrap()
        })
        .collect();
    let results = wait_all_or_hang(tickets);
    assert!(results.iter().all(Result::is_err), "a write succeeded on a failing device");
    assert!(
        results.iter().any(|r| matches!(r, Err(Error::Stopped(_)) | Err(Error::Io(_)))),
        "{:?}",
        results.first()
    );
    // Later writes are admitted and answer Stopped through their tickets; reads still work,
    // through the queue and lucky.
    let later = db.submit_put(b"later", b"v", &WriteOptions::default()).unwrap();
    assert!(matches!(later.wait(), Err(Error::Stopped(_))));
    let got = db.submit_get(b"before07", &ReadOptions::default()).unwrap().wait().unwrap();
    assert_eq!(got, Some(b"kept".to_vec()));
    let stats = db.stats();
    assert!(stats.stopped.is_some());
    assert_eq!(stats.async_completed, stats.async_submitted);
    drop(db); // must not hang
}

#[test]
fn bad_input_is_refused_at_submission_and_nothing_is_queued() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(16, 1)).unwrap();
    let w = WriteOptions::default();
    let long_key = vec![b'k'; KEY_BYTES_MAX + 1];
    assert!(matches!(db.submit_put(&long_key, b"v", &w), Err(Error::InvalidArgument(_))));
    assert!(matches!(db.submit_delete(&long_key, &w), Err(Error::InvalidArgument(_))));
    let mut empty_range = WriteBatch::new();
    empty_range.put(b"a", b"1");
    empty_range.delete_range(b"z", b"a");
    assert!(matches!(db.submit_write(&empty_range, &w), Err(Error::InvalidArgument(_))));
    let huge = vec![0u8; 256 << 10];
    assert!(matches!(db.submit_put(b"k", &huge, &w), Err(Error::InvalidArgument(_))));
    let stats = db.stats();
    assert_eq!((stats.async_submitted, stats.async_busy, stats.last_seq), (0, 0, 0));
    assert!(db.submit_write(&WriteBatch::new(), &w).unwrap().is_done(), "nothing to write");
    assert!(db.submit_scan(b"", 0, &ReadOptions::default()).unwrap().wait().unwrap().is_empty());
    db.put(b"k", b"v").unwrap();
    db.close().unwrap();
    // A read-only store refuses async writes by name and serves async reads.
    let db = Db::open_read_only(dir.path(), options(16, 1)).unwrap();
    assert!(matches!(db.submit_put(b"k", b"w", &w), Err(Error::ReadOnly(_))));
    assert_eq!(
        db.submit_get(b"k", &ReadOptions::default()).unwrap().wait().unwrap(),
        Some(b"v".to_vec())
    );
    let all = db.submit_scan(b"", 10, &ReadOptions::default()).unwrap().wait().unwrap();
    assert_eq!(all, [(b"k".to_vec(), b"v".to_vec())]);
}

#[test]
fn bad_async_options_are_refused_by_name() {
    type Set = fn(&mut Options);
    let cases: [(&str, Set); 4] = [
        ("async_queue_depth", |o| o.async_queue_depth = 0),
        ("async_queue_depth", |o| o.async_queue_depth = ASYNC_QUEUE_DEPTH_MAX + 1),
        ("async_workers", |o| o.async_workers = 0),
        ("async_workers", |o| o.async_workers = ASYNC_WORKERS_MAX + 1),
    ];
    for (name, set) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store");
        let mut o = Options::small_for_tests();
        set(&mut o);
        match Db::open(&path, o) {
            Err(Error::InvalidArgument(why)) => assert!(why.starts_with(name), "{why}"),
            other => panic!("{name}: {:?}", other.map(|_| "opened")),
        }
        assert!(!path.exists(), "{name}: a refused open created the store");
    }
    let mut edges = Options::small_for_tests();
    edges.async_queue_depth = 1;
    edges.async_workers = ASYNC_WORKERS_MAX;
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), edges).unwrap();
    let t = db.submit_put(b"k", b"v", &WriteOptions::default()).unwrap();
    t.wait().unwrap();
    assert_eq!(
        db.submit_get(b"k", &ReadOptions::default()).unwrap().wait().unwrap(),
        Some(b"v".to_vec())
    );
}
