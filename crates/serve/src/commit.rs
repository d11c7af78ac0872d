//! Group commit of runs under `appendfsync always`: a run's batch is ordered while the run
//! holds its stripes, and made durable after it let them go, together with every other
//! run's batch queued meanwhile, in one synced engine write.
//!
//! Why: a synced write takes a WAL sync (a millisecond or more on this machine's disk). A run
//! that held its stripes until its write was durable made every run that needed one of them
//! wait for that sync, then pay its own: 50 connections pipelining 16 INCRs of random keys
//! hold 800 of the 16,384 stripes at a time, so most pipelines met one and paid two or three
//! syncs (issue #44's pipelined INCR and MSET tails). Redis applies a command in memory and
//! syncs before it answers; here the stripes are held only while commands execute, and the
//! sync is shared.
//!
//! Stages of a run's batch ([`Commits::enqueue`], [`Commits::wait`]):
//! 1. Queue, holding the stripes of its keys: the batch takes the next ticket (tickets
//!    number batches in queue order, from 1) and its entries go into the pending table, where
//!    a run that takes the stripes next reads them (run.rs asks the table before the
//!    engine). So two batches writing one key are queued in the order their runs held the
//!    key's stripe, and a read-modify-write sees the value queued before it.
//! 2. The run lets its stripes go (run.rs) and waits for its ticket.
//! 3. Commit, by the committer ([`serve`], a task of its own that the server starts under
//!    `always`): it takes the queue's head, whole batches up to [`GROUP_BYTES_MAX`] (at least
//!    one), writes them as one engine batch through [`GroupWriter::write_group`]
//!    (group_write.rs: `Keyspace::write`, synced; the batches' effects fed to the
//!    replication stream in queue order, each as run.rs would feed it), takes their entries
//!    out of the pending table (where no later batch replaced them), moves the committed
//!    mark to its last ticket, and tells each batch's run its result; then the next group,
//!    queued meanwhile. One group is written at a time, so batches are applied in ticket
//!    order. The committer is a task of its own, not one of the waiting runs, because a
//!    run's task can be dropped while it waits (a replica's link is aborted when REPLICAOF
//!    changes): the groups behind it must not wait on it.
//! 4. A run that read a pending entry but wrote nothing waits for the committed mark to pass
//!    that entry's ticket ([`Commits::wait_committed`]) before it answers: no reply shows
//!    what a crash could still lose.
//!
//! A failed group fails every batch in it, and every later batch, and every read, that
//! depended on one of them (it read a value that was never written): the failed tickets are
//! remembered and checked when a group is built and when a read's wait ends.
//!
//! This is hand-over code, model-checked with shuttle (crates/serve-model includes this very
//! file): it names its mutexes, atomics, `Notify` and `watch` through `crate::sync`, and
//! reaches the engine only through [`GroupWriter`], so that the model can hand it shuttle's
//! primitives and a stand-in for the engine's write.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::sync::{AtomicUsize, Mutex, Notify, Ordering, lock, watch};
use crate::value::Value;

/// Most bytes of batches one group commits (at least one batch, whatever its size): the
/// engine refuses a batch over half a memtable, and a run's batch is at most 1 MiB (run.rs).
pub const GROUP_BYTES_MAX: usize = 4 << 20;
/// Shards of the pending table, so that threads reading and queueing different keys seldom
/// take one lock.
const PENDING_SHARDS: usize = 64;
/// Failed ticket ranges remembered (a failed write is rare: the store has likely stopped).
const FAILED_RANGES_MAX: usize = 1024;

/// A key's entry of the pending table: its value as queued (`None`: deleted), and the ticket
/// of the batch that queued it.
type Pending = (Option<Value>, u64);

/// One shard of the pending table: a key's entry by the key.
type PendingShard = Mutex<HashMap<Vec<u8>, Pending>>;

/// The queue, the pending table and the committed mark of one keyspace.
pub struct Commits {
    state: Mutex<State>,
    pending: Box<[PendingShard]>,
    /// Entries in the pending table: a read skips the table while it is empty.
    pending_len: AtomicUsize,
    /// The last ticket whose group's write has ended (written or failed).
    committed: watch::Sender<u64>,
    /// Wakes the committer when a batch is queued.
    queued: Notify,
}

struct State {
    next_ticket: u64,
    queue: std::collections::VecDeque<Queued>,
    /// Ticket ranges whose write failed, oldest first.
    failed: Vec<(u64, u64)>,
}

/// A queued batch.
pub struct Queued {
    /// Its place in the queue (stage 1).
    pub ticket: u64,
    /// Each key's value as queued (`None`: deleted).
    pub entries: Vec<(Vec<u8>, Option<Value>)>,
    /// A server key and its value written with the batch (run.rs: a replica's position in
    /// its master's stream).
    pub server_entry: Option<(&'static [u8], Vec<u8>)>,
    /// Tickets of the pending entries its commands read.
    depends: Vec<u64>,
    bytes: usize,
    waiter: Arc<Waiter>,
}

/// Where a queued batch's run is told what to do.
#[derive(Default)]
pub struct Waiter {
    told: Mutex<Option<Told>>,
    notify: Notify,
}

/// What a queued batch's run is told: its write ended, with the replication offset past its
/// effects, or the error text.
type Told = Result<u64, String>;

/// A batch's place in the queue, from [`Commits::enqueue`].
pub struct Ticket {
    waiter: Arc<Waiter>,
}

impl Default for Commits {
    fn default() -> Commits {
        Commits::new()
    }
}

impl Commits {
    /// An empty queue.
    pub fn new() -> Commits {
        Commits {
            state: Mutex::new(State {
                next_ticket: 1,
                queue: Default::default(),
                failed: Vec::new(),
            }),
            pending: (0..PENDING_SHARDS).map(|_| Mutex::default()).collect(),
            pending_len: AtomicUsize::new(0),
            committed: watch::Sender::new(0),
            queued: Notify::new(),
        }
    }

    fn shard(&self, key: &[u8]) -> &PendingShard {
        let mut h = DefaultHasher::new();
        key.hash(&mut h);
        &self.pending[(h.finish() % PENDING_SHARDS as u64) as usize]
    }

    /// A key's queued value and its batch's ticket, if a batch not yet written has it: what
    /// a run holding the key's stripe reads instead of the engine's.
    pub fn pending(&self, key: &[u8]) -> Option<(Option<Value>, u64)> {
        if self.pending_len.load(Ordering::Acquire) == 0 {
            return None;
        }
        lock(self.shard(key)).get(key).cloned()
    }

    /// Stage 1: queues a batch (the caller holds the stripes of every key it writes) and
    /// puts its entries in the pending table.
    pub fn enqueue(
        &self,
        entries: Vec<(Vec<u8>, Option<Value>)>,
        server_entry: Option<(&'static [u8], Vec<u8>)>,
        depends: Vec<u64>,
        bytes: usize,
    ) -> Ticket {
        let waiter = Arc::new(Waiter::default());
        let mut st = lock(&self.state);
        let ticket = st.next_ticket;
        st.next_ticket += 1;
        for (key, value) in &entries {
            let replaced = lock(self.shard(key)).insert(key.clone(), (value.clone(), ticket));
            if replaced.is_none() {
                self.pending_len.fetch_add(1, Ordering::AcqRel);
            }
        }
        st.queue.push_back(Queued {
            ticket,
            entries,
            server_entry,
            depends,
            bytes,
            waiter: waiter.clone(),
        });
        drop(st);
        // A permit is kept if the committer is busy: it looks at the queue again after.
        self.queued.notify_one();
        Ticket { waiter }
    }

    /// Stage 2: waits for the batch's write; the replication offset past its effects, or
    /// the error text of the failed write.
    pub async fn wait(&self, ticket: Ticket) -> Result<u64, String> {
        loop {
            if let Some(told) = lock(&ticket.waiter.told).take() {
                return told;
            }
            ticket.waiter.notify.notified().await;
        }
    }

    /// Stage 4: waits until every ticket up to `ticket` is written; the error text if one
    /// of `depends` failed.
    pub async fn wait_committed(&self, depends: &[u64]) -> Result<(), String> {
        let Some(&last) = depends.iter().max() else { return Ok(()) };
        let mut rx = self.committed.subscribe();
        // The sender lives as long as `self`: the wait ends with the mark.
        let _ = rx.wait_for(|&c| c >= last).await;
        let st = lock(&self.state);
        if depends.iter().any(|&t| failed(&st.failed, t)) {
            return Err("a value read was never written: its write failed".to_string());
        }
        Ok(())
    }

    /// Waits until every batch queued so far is written (the caller holds every stripe, so
    /// no batch is queued meanwhile): what FLUSHDB and a replica's load of a snapshot wait
    /// for, so that no queued batch is applied after them.
    pub async fn drained(&self) {
        let last = lock(&self.state).next_ticket - 1;
        let mut rx = self.committed.subscribe();
        let _ = rx.wait_for(|&c| c >= last).await;
    }

    /// Stage 3: commits one group from the queue's head; false if the queue was empty.
    async fn commit_group<W: GroupWriter + ?Sized>(&self, writer: &W) -> bool {
        let group: Vec<Queued> = {
            let mut st = lock(&self.state);
            let mut bytes = 0;
            let mut group = Vec::new();
            while let Some(q) = st.queue.front() {
                if !group.is_empty() && bytes + q.bytes > GROUP_BYTES_MAX {
                    break;
                }
                bytes += q.bytes;
                group.push(st.queue.pop_front().expect("the front exists"));
            }
            group
        };
        let Some(last) = group.last().map(|q| q.ticket) else { return false };
        // A batch that read a value whose write failed is not written: it fails too, and so
        // does whatever read its values.
        let mut refused = Vec::new();
        {
            let mut st = lock(&self.state);
            for q in &group {
                if q.depends.iter().any(|&t| failed(&st.failed, t)) {
                    refused.push(q.ticket);
                    remember_failed(&mut st.failed, (q.ticket, q.ticket));
                }
            }
        }
        let written: Vec<&Queued> = group.iter().filter(|q| !refused.contains(&q.ticket)).collect();
        let result = if written.is_empty() {
            Ok(0)
        } else {
            writer.write_group(&written).await.inspect_err(|text| {
                log::warn!("appendfsync always: a group of {} batches failed: {text}", group.len());
            })
        };
        if result.is_err() {
            let mut st = lock(&self.state);
            let first = group[0].ticket;
            remember_failed(&mut st.failed, (first, last));
        }
        for q in &group {
            for (key, _) in &q.entries {
                let mut shard = lock(self.shard(key));
                if shard.get(key).is_some_and(|(_, t)| *t == q.ticket) {
                    shard.remove(key);
                    self.pending_len.fetch_sub(1, Ordering::AcqRel);
                }
            }
        }
        self.committed.send_replace(last);
        for q in &group {
            let told = if refused.contains(&q.ticket) {
                Err("a value read was never written: its write failed".to_string())
            } else {
                result.clone()
            };
            tell(&q.waiter, told);
        }
        true
    }
}

/// What the committer writes groups through: the keyspace's engine (group_write.rs), or the
/// stand-in of the model that checks this file under shuttle (crates/serve-model).
pub trait GroupWriter: Sync {
    /// The queue whose groups are written.
    fn commits(&self) -> &Commits;

    /// Writes a group's batches (at least one) as one synced engine batch, in queue order,
    /// and feeds their effects to the replication stream in the same order; the replication
    /// offset past them, or the error text.
    fn write_group(&self, group: &[&Queued]) -> impl Future<Output = Result<u64, String>> + Send;
}

/// The committer (stage 3): commits groups as batches are queued, until the runtime stops.
/// The server spawns it under `appendfsync always`; without it, a run under `always` would
/// wait for its batch forever.
pub async fn serve<K>(writer: K)
where
    K: std::ops::Deref,
    K::Target: GroupWriter,
{
    let commits = writer.commits();
    loop {
        commits.queued.notified().await;
        while commits.commit_group(&*writer).await {}
    }
}

fn tell(waiter: &Waiter, told: Told) {
    *lock(&waiter.told) = Some(told);
    // A permit is kept if the run is not waiting yet: the wake-up is not lost.
    waiter.notify.notify_one();
}

fn failed(ranges: &[(u64, u64)], ticket: u64) -> bool {
    ranges.iter().any(|&(lo, hi)| (lo..=hi).contains(&ticket))
}

fn remember_failed(ranges: &mut Vec<(u64, u64)>, range: (u64, u64)) {
    if ranges.len() >= FAILED_RANGES_MAX {
        ranges.remove(0);
    }
    ranges.push(range);
}
