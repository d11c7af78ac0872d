//! Group commit: concurrent writers share WAL appends.
//!
//! Every writer queues its encoded batch. The first writer to find no leader leads: it takes
//! the queue (up to a byte cap), gives the group consecutive sequence numbers, appends all of
//! its records to the WAL in one append (synced if any writer asked for sync) and takes the
//! group's ticket (`space/src/page_log/turns.rs`). A small group's leader then inserts every batch into the
//! memtable itself, publishes the group's last sequence number in its ticket's turn and tells
//! each writer it is done: one wake-up per writer. In a larger group the leader hands each
//! writer its sequence number and memtable; each writer inserts its own batch, in parallel
//! with the others (the skiplist takes concurrent inserts); the leader waits for all of them
//! and publishes in its turn. The leader passes leadership to the first writer queued
//! meanwhile once its group has published, or, for a group of unsynced writes on a machine
//! with cores to spare, right after the append, so that the next group appends while this
//! one inserts (`Inner::lead_group`). So a writer pays for one WAL append per group, not per
//! write, and readers never see part of a group.

use super::sync::{AtomicBool, AtomicUsize, Condvar, Mutex, Ordering, spin_until};
use super::{Error, Memtable};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// A queued write.
pub(super) struct Pending {
    pub id: u64,
    /// The encoded batch; the leader stamps its first sequence number in.
    pub record: Vec<u8>,
    pub ops: usize,
    pub footprint: usize,
    pub sync: bool,
}

/// What a queued writer is told.
pub(super) enum Outcome {
    /// Lead the next group.
    Lead,
    /// The group is in the WAL: insert the batch with these sequence numbers.
    Insert { first_seq: u64, mem: Arc<Memtable>, group: Arc<GroupSync> },
    /// The leader inserted the batch and published the group: the write is done.
    Done,
    /// The group failed.
    Failed(Error),
}

/// Waits of one group: the leader for the inserts, the writers for the publication.
pub(super) struct GroupSync {
    remaining: AtomicUsize,
    /// `Some(true)` once published, `Some(false)` if the leader gave up (it panicked).
    published: Mutex<Option<bool>>,
    cv: Condvar,
}

impl GroupSync {
    pub fn new(writers: usize) -> Arc<GroupSync> {
        Arc::new(GroupSync {
            remaining: AtomicUsize::new(writers),
            published: Mutex::new(None),
            cv: Condvar::new(),
        })
    }

    /// A writer's insert is done.
    pub fn inserted(&self) {
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            let _guard = self.published.lock();
            self.cv.notify_all();
        }
    }

    /// The leader waits for every insert.
    pub fn wait_inserted(&self) {
        let mut g = self.published.lock();
        while self.remaining.load(Ordering::Acquire) > 0 {
            self.cv.wait(&mut g);
        }
    }

    /// The leader made the group visible.
    pub fn publish(&self) {
        *self.published.lock() = Some(true);
        self.cv.notify_all();
    }

    /// The leader will never publish the group (it panicked): its writers give up.
    pub fn abandon(&self) {
        let mut g = self.published.lock();
        if g.is_none() {
            *g = Some(false);
        }
        self.cv.notify_all();
    }

    /// A writer waits until its write is visible (read-your-writes); `false` if the group
    /// was abandoned instead.
    pub fn wait_published(&self) -> bool {
        let mut g = self.published.lock();
        loop {
            if let Some(published) = *g {
                return published;
            }
            self.cv.wait(&mut g);
        }
    }
}

/// Where one queued writer waits for its outcome: a slot of its own, so that handing out an
/// outcome wakes that writer alone. One condition variable for the whole queue woke every
/// queued writer at each hand-out (fillsync with 16 threads: about 18-22k ops/s with it,
/// 20.6-22.3k with slots, docs/lsm.md).
///
/// The waiter first waits briefly without sleeping (`sync::spin_until`) for `ready`: an outcome
/// usually comes within microseconds, and one given to a writer that is not asleep on the
/// condition variable costs the giver no wake-up call.
#[derive(Default)]
struct Slot {
    outcome: Mutex<Option<Outcome>>,
    /// Set once `outcome` holds the outcome (after it is stored, under the lock).
    ready: AtomicBool,
    cv: Condvar,
}

impl Slot {
    fn give(&self, o: Outcome) {
        *self.outcome.lock() = Some(o);
        self.ready.store(true, Ordering::Release);
        self.cv.notify_one();
    }

    /// Waits for the outcome: briefly without sleeping while `credit` says such waits end
    /// in time, then on the condition variable.
    fn wait(&self, credit: &SpinCredit) -> Outcome {
        if credit.worth_spinning() {
            credit.record(spin_until(|| self.ready.load(Ordering::Acquire)));
        }
        let mut o = self.outcome.lock();
        loop {
            if let Some(o) = o.take() {
                return o;
            }
            self.cv.wait(&mut o);
        }
    }
}

/// Whether writers' brief waits without sleeping pay: a score that each such wait raises
/// when its outcome came in time and lowers (more) when it did not. Where outcomes take long
/// (synced groups wait for the device: milliseconds) the score falls to zero and writers sleep
/// at once, but for one wait in [`SpinCredit::PROBE_EVERY`], which probes whether waits have
/// become short again. Racy updates only blur the score.
pub(super) struct SpinCredit {
    score: AtomicUsize,
    waits: AtomicUsize,
}

impl SpinCredit {
    const MAX: usize = 32;
    const MIN_TO_SPIN: usize = 8;
    const HIT: usize = 1;
    const MISS: usize = 4;
    const PROBE_EVERY: usize = 16;

    pub(super) fn worth_spinning(&self) -> bool {
        self.score.load(Ordering::Relaxed) >= Self::MIN_TO_SPIN
            || self.waits.fetch_add(1, Ordering::Relaxed) % Self::PROBE_EVERY == 0
    }

    pub(super) fn record(&self, in_time: bool) {
        let s = self.score.load(Ordering::Relaxed);
        let next =
            if in_time { (s + Self::HIT).min(Self::MAX) } else { s.saturating_sub(Self::MISS) };
        self.score.store(next, Ordering::Relaxed);
    }
}

impl Default for SpinCredit {
    fn default() -> SpinCredit {
        SpinCredit { score: AtomicUsize::new(Self::MAX / 2), waits: AtomicUsize::new(0) }
    }
}

#[derive(Default)]
struct QueueState {
    /// Queued writers, with their slots, the leader's included until it takes its group.
    waiting: VecDeque<(Pending, Arc<Slot>)>,
    /// The writer leading now, if any.
    leader: Option<u64>,
    /// Slots of writers taken into a group, with their group's leader, until the leader
    /// hands them their outcomes.
    grouped: HashMap<u64, (u64, Arc<Slot>)>,
    next_id: u64,
}

/// The queue of writers.
#[derive(Default)]
pub(super) struct WriteQueue {
    state: Mutex<QueueState>,
    spin: SpinCredit,
}

impl WriteQueue {
    /// Queues a write and waits until it leads a group or its group has an outcome.
    pub fn join(
        &self,
        record: Vec<u8>,
        ops: usize,
        footprint: usize,
        sync: bool,
    ) -> (u64, Outcome) {
        let slot = Arc::new(Slot::default());
        let id = {
            let mut q = self.state.lock();
            let id = q.next_id;
            q.next_id += 1;
            q.waiting.push_back((Pending { id, record, ops, footprint, sync }, slot.clone()));
            if q.leader.is_none() {
                q.leader = Some(id);
                return (id, Outcome::Lead);
            }
            id
        };
        (id, slot.wait(&self.spin))
    }

    /// The leader takes the next group: writers from the front while their bytes stay within
    /// `cap` (always at least one: the leader itself is at the front).
    pub fn take_group(&self, cap: usize) -> Vec<Pending> {
        let mut q = self.state.lock();
        let mut group: Vec<Pending> = Vec::new();
        let mut bytes = 0;
        while let Some((p, _)) = q.waiting.front() {
            if !group.is_empty() && bytes + p.footprint > cap {
                break;
            }
            bytes += p.footprint;
            let (p, slot) = q.waiting.pop_front().expect("front exists");
            let leader = group.first().map_or(p.id, |l| l.id);
            q.grouped.insert(p.id, (leader, slot));
            group.push(p);
        }
        group
    }

    /// Hands each writer of a group (but the leader, `leader_id`) its outcome.
    pub fn finish(&self, leader_id: u64, outcomes: Vec<(u64, Outcome)>) {
        let slots: Vec<(Arc<Slot>, Outcome)> = {
            let mut q = self.state.lock();
            q.grouped.remove(&leader_id);
            outcomes
                .into_iter()
                .filter(|(id, _)| *id != leader_id)
                .map(|(id, o)| (q.grouped.remove(&id).expect("a grouped writer").1, o))
                .collect()
        };
        for (slot, o) in slots {
            slot.give(o);
        }
    }

    /// The leader `leader_id` gave up (it panicked): each writer of its group still waiting is
    /// told `failed()`, and the leadership passes on if it still held it.
    pub fn abandon(&self, leader_id: u64, failed: impl Fn() -> Error) {
        let (slots, leading) = {
            let mut q = self.state.lock();
            let ids: Vec<u64> =
                q.grouped.iter().filter(|(_, (l, _))| *l == leader_id).map(|(id, _)| *id).collect();
            let slots: Vec<Arc<Slot>> =
                ids.iter().filter_map(|id| q.grouped.remove(id)).map(|(_, s)| s).collect();
            (slots, q.leader == Some(leader_id))
        };
        for slot in slots {
            slot.give(Outcome::Failed(failed()));
        }
        if leading {
            self.pass_leadership();
        }
    }

    /// The leader is done: the next queued writer leads, or no one does.
    pub fn pass_leadership(&self) {
        let next = {
            let mut q = self.state.lock();
            let front = q.waiting.front().map(|(p, slot)| (p.id, slot.clone()));
            q.leader = front.as_ref().map(|(id, _)| *id);
            front.map(|(_, slot)| slot)
        };
        if let Some(slot) = next {
            slot.give(Outcome::Lead);
        }
    }
}
