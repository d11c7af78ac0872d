//! Commits share block writes and device flushes (group commit).
//!
//! A commit's rows are in the cache, their blocks dirty (`cache.rs`); what it needs before
//! it may expire its undo records is those blocks written and then a device flush. The
//! leader of a round does both for every commit waiting: it writes every dirty block,
//! each once (`write` below: `Shared::write_dirty`, outside the store's mutex under the block
//! writer's latch, so two writes of one block never race), then flushes the device, so
//! other transactions read and change rows meanwhile. A flush covers every write completed before it
//! starts, so commits that arrive while one round runs all wait for the next one, which
//! one of them leads: under load one round serves many commits, and the changes of several
//! to one block (a table's last block, as inserts fill it) reach the device as one write.
//!
//! The rounds are the page log's group-commit sequencer's (`shale_space::page_log::Sequencer`:
//! numbered rounds, one leader at a time, the first failure sticky); what is this engine's
//! own is what a round does: write the dirty blocks, then flush the device.
//!
//! A second sequencer groups the commits' expiry records in the spill area's page log
//! (`sync_log`): each commit packs its own, and one write of the log serves every commit
//! waiting.

use parking_lot::Mutex;
use shale_io::QueueExt;
use shale_space::VolumeQueue;
use shale_space::page_log::Sequencer;

use crate::error::{Error, Result};

/// The contention profile's site of a commit waiting for another's group flush.
static FLUSH_WAIT: shale_space::contention::Site =
    shale_space::contention::Site::new("table: group flush wait");

/// The contention profile's site of a commit waiting for another's write of the undo log's
/// expiry records.
static EXPIRY_WAIT: shale_space::contention::Site =
    shale_space::contention::Site::new("table: group expiry wait");

/// The store's shared flusher: a queue of its own for flushes, the sequencer of rounds, and
/// that of the expiry records' writes.
pub(crate) struct GroupFlush {
    queue: Mutex<VolumeQueue>,
    rounds: Sequencer,
    expiries: Sequencer,
}

impl GroupFlush {
    pub(crate) fn new(queue: VolumeQueue) -> GroupFlush {
        GroupFlush {
            queue: Mutex::new(queue),
            rounds: Sequencer::new(&FLUSH_WAIT),
            expiries: Sequencer::new(&EXPIRY_WAIT),
        }
    }

    /// Returns once a write of the undo log's page log (`write`: `Shared::sync_spill_log`,
    /// under the undo log latch alone) that
    /// began after this call has completed: the commits whose expiry records were packed
    /// meanwhile (`Storage::commit_flushed`) share it, as they share a round's flush. The
    /// log's write is a FUA write, durable when it completes, so no device flush follows.
    ///
    /// # Errors
    /// The error of that write (or of an earlier failed one): the store is stopped.
    pub(crate) fn sync_log(&self, write: impl FnOnce() -> Result<()>) -> Result<()> {
        self.expiries.join(write, Error::Stopped)
    }

    /// Returns once a round that began after this call has completed: `write` (the dirty
    /// blocks) and then a device flush.
    ///
    /// # Errors
    /// The error of that round's write or flush (or of an earlier failed one): the caller
    /// stops the store; its changes stay active in the undo log, rolled back at the next
    /// open.
    pub(crate) fn flush(&self, write: impl Fn() -> Result<()>) -> Result<()> {
        self.rounds.join(|| write().and_then(|()| Ok(self.queue.lock().flush()?)), Error::Stopped)
    }

    /// Flushes the device now, outside any round (an abort's flush).
    ///
    /// # Errors
    /// The device's error.
    pub(crate) fn flush_device(&self) -> Result<()> {
        Ok(self.queue.lock().flush()?)
    }

    /// (device flushes made, commits that waited for one).
    pub(crate) fn counts(&self) -> (u64, u64) {
        self.rounds.counts()
    }
}
