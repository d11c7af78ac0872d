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

use super::sync::{AtomicUsize, Condvar, Mutex, Ordering};
use super::write_queue::{self, Queued, Told};
use super::{Error, Memtable};
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

impl Queued for Pending {
    fn id(&self) -> u64 {
        self.id
    }

    fn footprint(&self) -> usize {
        self.footprint
    }
}

impl Told for Outcome {
    fn lead() -> Outcome {
        Outcome::Lead
    }
}

/// The queue of writers: the page log's group-commit queue (`space/src/page_log/write_queue.rs`)
/// of this engine's batches and outcomes.
#[derive(Default)]
pub(super) struct WriteQueue(write_queue::WriteQueue<Pending, Outcome>);

impl WriteQueue {
    /// Queues a write and waits until it leads a group or its group has an outcome.
    pub fn join(
        &self,
        record: Vec<u8>,
        ops: usize,
        footprint: usize,
        sync: bool,
    ) -> (u64, Outcome) {
        self.0.join(|id| Pending { id, record, ops, footprint, sync })
    }

    /// The leader takes the next group: writers from the front while their bytes stay within
    /// `cap` (always at least one: the leader itself is at the front).
    pub fn take_group(&self, cap: usize) -> Vec<Pending> {
        self.0.take_group(cap)
    }

    /// Hands each writer of a group (but the leader, `leader_id`) its outcome.
    pub fn finish(&self, leader_id: u64, outcomes: Vec<(u64, Outcome)>) {
        self.0.finish(leader_id, outcomes);
    }

    /// The leader `leader_id` gave up (it panicked): each writer of its group still waiting is
    /// told `failed()`, and the leadership passes on if it still held it.
    pub fn abandon(&self, leader_id: u64, failed: impl Fn() -> Error) {
        self.0.abandon(leader_id, || Outcome::Failed(failed()));
    }

    /// The leader is done: the next queued writer leads, or no one does.
    pub fn pass_leadership(&self) {
        self.0.pass_leadership();
    }
}
