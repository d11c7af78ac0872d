//! Kill test of the async API: a real child process writes batches through `Db::submit_write`
//! on two threads (each keeping up to 16 tickets outstanding, resubmitting on Busy, one batch
//! in eight synced) beside a third thread writing through the synchronous `Db::write`, and
//! prints each batch whose ticket (or call) completed Ok; it is killed with SIGKILL at a random
//! moment. The store is reopened, must pass `Db::check`, and must hold every acknowledged
//! batch, synced or not (P1, P2: a completed ticket promises what a returned `Db::write`
//! does), and every batch all-or-nothing, also where the workers combined several queued
//! batches into one commit. Even rounds keep unsynced writes in the `/dev/shm` WAL tail, odd
//! rounds run without one. `SHALE_ASYNC_KILL_ROUNDS` rounds (default 6) on one store.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shale_lsm::{Db, Error, Options, ReadOptions, Ticket, WalTail, WriteBatch, WriteOptions};

const CHILD_ENV: &str = "SHALE_ASYNC_KILL_CHILD_DIR";
const KEYS_PER_BATCH: u64 = 8;
/// Tickets an async writer thread keeps outstanding.
const WINDOW: usize = 16;
const ASYNC_WRITERS: usize = 2;

fn options(round: u64) -> Options {
    let mut o = Options::small_for_tests();
    o.write_buffer_bytes = 128 << 10;
    // As tests/kill.rs: room in the version log for the SSTs of every round.
    o.volume.layout.version_log_bytes = 1 << 20;
    o.wal_tail = if round % 2 == 0 { WalTail::Shm } else { WalTail::Off };
    // Shallow enough that the writers meet Busy now and then.
    o.async_queue_depth = 24;
    o
}

/// Batch n: keys "b{n}-{i}" for i in 0..8.
fn batch(n: u64) -> WriteBatch {
    let mut b = WriteBatch::new();
    for i in 0..KEYS_PER_BATCH {
        b.put(format!("b{n:08}-{i}").as_bytes(), &vec![(n % 251) as u8; 100 + (i as usize * 37)]);
    }
    b
}

/// An async writer: submits batches, acknowledging each once its ticket completes Ok.
fn async_writer(db: &Db, next: &AtomicU64) {
    let mut window: VecDeque<(u64, Ticket<()>)> = VecDeque::new();
    let ack = |(n, ticket): (u64, Ticket<()>)| {
        ticket.wait().expect("child: async write");
        println!("acked {n}");
    };
    loop {
        let n = next.fetch_add(1, Ordering::Relaxed);
        let b = batch(n);
        let opts = WriteOptions { sync: n % 8 == 0 };
        loop {
            match db.submit_write(&b, &opts) {
                Ok(ticket) => break window.push_back((n, ticket)),
                Err(Error::Busy) => match window.pop_front() {
                    Some(oldest) => ack(oldest),
                    None => std::thread::yield_now(),
                },
                Err(e) => panic!("child: submit: {e}"),
            }
        }
        // Acknowledge whatever has completed, and wait for the oldest once the window is full.
        while window.front().is_some_and(|(_, t)| t.is_done()) || window.len() >= WINDOW {
            ack(window.pop_front().expect("non-empty"));
        }
    }
}

fn child(dir: &Path) {
    let round: u64 = std::env::var("SHALE_KILL_ROUND").unwrap().parse().unwrap();
    let db = Db::open(dir, options(round)).expect("child: open");
    let start: u64 = std::env::var("SHALE_KILL_START").unwrap().parse().unwrap();
    let next = AtomicU64::new(start);
    std::thread::scope(|s| {
        for _ in 0..ASYNC_WRITERS {
            s.spawn(|| async_writer(&db, &next));
        }
        // A synchronous writer on the same store.
        s.spawn(|| {
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                db.write(&batch(n), &WriteOptions { sync: n % 8 == 0 }).expect("child: write");
                println!("acked {n}");
            }
        });
    });
}

#[test]
#[ignore = "child process entry point, run by \
            sigkill_during_async_writes_loses_no_completed_ticket"]
fn async_kill_child_entry_point() {
    let parent = "sigkill_during_async_writes_loses_no_completed_ticket";
    child(Path::new(&shale_testkit::child_env(CHILD_ENV, parent)));
}

#[test]
fn sigkill_during_async_writes_loses_no_completed_ticket() {
    let rounds: u64 =
        std::env::var("SHALE_ASYNC_KILL_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(6);
    // On the repository's file system: /tmp may be tmpfs.
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("async_kill");
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    let dir = base.join("store");
    let mut rng = SmallRng::seed_from_u64(0xa5c);
    let mut next_batch = 0u64;
    let mut acked_total = 0u64;
    for round in 0..rounds {
        let kill_after = Duration::from_millis(rng.gen_range(100..700));
        let envs = [
            (CHILD_ENV, dir.display().to_string()),
            ("SHALE_KILL_START", next_batch.to_string()),
            ("SHALE_KILL_ROUND", round.to_string()),
        ];
        let entry = "async_kill_child_entry_point";
        let lines = shale_testkit::run_child_until_killed(entry, &envs, kill_after);
        let acked = shale_testkit::acked_numbers(&lines);
        let db =
            Db::open(&dir, options(round)).unwrap_or_else(|e| panic!("round {round}: reopen: {e}"));
        db.check().unwrap_or_else(|e| panic!("round {round}: check after SIGKILL: {e}"));
        for &n in &acked {
            for i in 0..KEYS_PER_BATCH {
                let k = format!("b{n:08}-{i}");
                assert!(
                    db.get(k.as_bytes()).unwrap().is_some(),
                    "round {round}: acknowledged batch {n} lost key {k}"
                );
            }
        }
        // All-or-nothing: every batch present has all its keys.
        let mut per_batch = BTreeMap::<u64, u64>::new();
        let mut it = db.iter(&ReadOptions::default());
        it.seek_to_first();
        while it.valid() {
            let k = std::str::from_utf8(it.key()).unwrap();
            *per_batch.entry(k[1..9].parse().unwrap()).or_default() += 1;
            it.next();
        }
        it.status().unwrap();
        drop(it);
        for (n, count) in &per_batch {
            assert_eq!(*count, KEYS_PER_BATCH, "round {round}: batch {n} is torn");
        }
        next_batch = per_batch.keys().next_back().map_or(next_batch, |n| n + 1).max(next_batch);
        acked_total += acked.len() as u64;
        db.close().unwrap();
    }
    println!(
        "async kill test: {rounds} SIGKILLs, {acked_total} acknowledged batches (two async \
         writers and one sync writer, 1 in 8 synced), all present"
    );
    assert!(acked_total > 0, "the child never acknowledged a write");
}
