//! Group commit's queue of writers: every writer queues its item (an encoded batch, say);
//! the first to find no leader leads, takes the queue's front as its group (up to a byte cap),
//! does the group's durable work and hands each writer of the group its outcome; then it
//! passes the leadership to the next queued writer. So a writer pays for one durable write
//! per group, not per write. What a group's work is and what its writers are told is the
//! engine's (the lsm engine's write group: a WAL append, then memtable inserts handed out
//! to the writers, `crates/lsm/src/db/write_group.rs`).
//!
//! The queue names its primitives through `super::sync`, so that `crates/lsm-model` compiles
//! this very file against shuttle's and explores the hand-over beside the lsm write group.

use super::sync::{AtomicBool, AtomicUsize, Condvar, Mutex, Ordering, spin_until};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// A queued writer's item.
pub trait Queued {
    /// The writer's id, given by [`WriteQueue::join`].
    fn id(&self) -> u64;
    /// Its bytes, against the group's cap.
    fn footprint(&self) -> usize;
}

/// What a queued writer is told.
pub trait Told {
    /// Lead the next group.
    fn lead() -> Self;
}

/// Where one queued writer waits for its outcome: a slot of its own, so that handing out an
/// outcome wakes that writer alone. One condition variable for the whole queue woke every
/// queued writer at each hand-out (fillsync with 16 threads: about 18-22k ops/s with it,
/// 20.6-22.3k with slots, docs/lsm.md).
///
/// The waiter first waits briefly without sleeping (`sync::spin_until`) for `ready`: an outcome
/// usually comes within microseconds, and one given to a writer that is not asleep on the
/// condition variable costs the giver no wake-up call.
struct Slot<O> {
    outcome: Mutex<Option<O>>,
    /// Set once `outcome` holds the outcome (after it is stored, under the lock).
    ready: AtomicBool,
    cv: Condvar,
}

impl<O> Default for Slot<O> {
    fn default() -> Slot<O> {
        Slot { outcome: Mutex::new(None), ready: AtomicBool::new(false), cv: Condvar::new() }
    }
}

impl<O> Slot<O> {
    fn give(&self, o: O) {
        *self.outcome.lock() = Some(o);
        self.ready.store(true, Ordering::Release);
        self.cv.notify_one();
    }

    /// Waits for the outcome: briefly without sleeping while `credit` says such waits end
    /// in time, then on the condition variable.
    fn wait(&self, credit: &SpinCredit) -> O {
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
/// at once, but for one wait in `SpinCredit::PROBE_EVERY`, which probes whether waits have
/// become short again. Racy updates only blur the score.
pub struct SpinCredit {
    score: AtomicUsize,
    waits: AtomicUsize,
}

impl SpinCredit {
    const MAX: usize = 32;
    const MIN_TO_SPIN: usize = 8;
    const HIT: usize = 1;
    const MISS: usize = 4;
    const PROBE_EVERY: usize = 16;

    pub fn worth_spinning(&self) -> bool {
        self.score.load(Ordering::Relaxed) >= Self::MIN_TO_SPIN
            || self.waits.fetch_add(1, Ordering::Relaxed) % Self::PROBE_EVERY == 0
    }

    pub fn record(&self, in_time: bool) {
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

struct QueueState<P, O> {
    /// Queued writers, with their slots, the leader's included until it takes its group.
    waiting: VecDeque<(P, Arc<Slot<O>>)>,
    /// The writer leading now, if any.
    leader: Option<u64>,
    /// Slots of writers taken into a group, with their group's leader, until the leader
    /// hands them their outcomes.
    grouped: HashMap<u64, (u64, Arc<Slot<O>>)>,
    next_id: u64,
}

/// The queue of writers.
pub struct WriteQueue<P, O> {
    state: Mutex<QueueState<P, O>>,
    spin: SpinCredit,
}

impl<P: Queued, O: Told> Default for WriteQueue<P, O> {
    fn default() -> WriteQueue<P, O> {
        WriteQueue::new()
    }
}

impl<P: Queued, O: Told> WriteQueue<P, O> {
    /// An empty queue.
    pub fn new() -> WriteQueue<P, O> {
        WriteQueue {
            state: Mutex::new(QueueState {
                waiting: VecDeque::new(),
                leader: None,
                grouped: HashMap::new(),
                next_id: 0,
            }),
            spin: SpinCredit::default(),
        }
    }

    /// Queues the item `item(id)` makes for the writer's id, and waits until the writer
    /// leads a group or its group has an outcome.
    pub fn join(&self, item: impl FnOnce(u64) -> P) -> (u64, O) {
        let slot = Arc::new(Slot::default());
        let id = {
            let mut q = self.state.lock();
            let id = q.next_id;
            q.next_id += 1;
            q.waiting.push_back((item(id), slot.clone()));
            if q.leader.is_none() {
                q.leader = Some(id);
                return (id, O::lead());
            }
            id
        };
        (id, slot.wait(&self.spin))
    }

    /// The leader takes the next group: writers from the front while their bytes stay within
    /// `cap` (always at least one: the leader itself is at the front).
    pub fn take_group(&self, cap: usize) -> Vec<P> {
        let mut q = self.state.lock();
        let mut group: Vec<P> = Vec::new();
        let mut bytes = 0;
        while let Some((p, _)) = q.waiting.front() {
            if !group.is_empty() && bytes + p.footprint() > cap {
                break;
            }
            bytes += p.footprint();
            let (p, slot) = q.waiting.pop_front().expect("front exists");
            let leader = group.first().map_or(p.id(), |l| l.id());
            q.grouped.insert(p.id(), (leader, slot));
            group.push(p);
        }
        group
    }

    /// Hands each writer of a group (but the leader, `leader_id`) its outcome.
    pub fn finish(&self, leader_id: u64, outcomes: Vec<(u64, O)>) {
        let slots: Vec<(Arc<Slot<O>>, O)> = {
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
    pub fn abandon(&self, leader_id: u64, failed: impl Fn() -> O) {
        let (slots, leading) = {
            let mut q = self.state.lock();
            let ids: Vec<u64> =
                q.grouped.iter().filter(|(_, (l, _))| *l == leader_id).map(|(id, _)| *id).collect();
            let slots: Vec<Arc<Slot<O>>> =
                ids.iter().filter_map(|id| q.grouped.remove(id)).map(|(_, s)| s).collect();
            (slots, q.leader == Some(leader_id))
        };
        for slot in slots {
            slot.give(failed());
        }
        if leading {
            self.pass_leadership();
        }
    }

    /// Writers queued and not yet taken into a group (the leader among them until it takes
    /// its group).
    pub fn waiting(&self) -> usize {
        self.state.lock().waiting.len()
    }

    /// The leader is done: the next queued writer leads, or no one does.
    pub fn pass_leadership(&self) {
        let next = {
            let mut q = self.state.lock();
            let front = q.waiting.front().map(|(p, slot)| (p.id(), slot.clone()));
            q.leader = front.as_ref().map(|(id, _)| *id);
            front.map(|(_, slot)| slot)
        };
        if let Some(slot) = next {
            slot.give(O::lead());
        }
    }
}
