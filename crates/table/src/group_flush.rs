//! Commits share block writes and device flushes (group commit).
//!
//! A commit's rows are in the cache, their blocks dirty (`cache.rs`); what it needs before
//! it may expire its undo records is those blocks written and then a device flush. Each of
//! the two steps has rounds of its own, led by whichever commit finds none of that step
//! running and shared by every commit that arrives meanwhile:
//! - a *write round* writes every dirty block, each once (`write` below:
//!   `Shared::write_dirty`, outside the store's mutex under the block writer's latch, so two
//!   writes of one block never race), and other transactions read and change rows meanwhile;
//!   the changes of several commits to one block (a table's last block, as inserts fill it)
//!   reach the device as one write;
//! - a *flush round* flushes the device. A flush covers every write completed before it
//!   starts, so a commit joins the first flush round to begin after its write round ended.
//!
//! The steps overlap: a write round may run while an earlier commit's flush is in flight.
//! With one round doing both (as this did first), a commit arriving while a round ran waited
//! for that round's write and flush and then for its own; with two clients each commit
//! arrived while the other's round ran, so every round served one commit and the device sat
//! idle between a flush and the next write. A block written while a flush is in flight is
//! no new hazard: every later round rewrites blocks holding committed rows, flushed or not,
//! and what makes a commit durable is still a flush begun after its blocks were written.
//!
//! The rounds are the page log's group-commit sequencer's (`shale_space::page_log::Sequencer`:
//! numbered rounds, one leader at a time, the first failure sticky); what is this engine's
//! own is what a round does.
//!
//! A third sequencer groups the commits' expiry records in the spill area's page log
//! (`sync_log`): each commit packs its own, and one write of the log serves every commit
//! waiting.

use parking_lot::Mutex;
use shale_io::QueueExt;
use shale_space::VolumeQueue;
use shale_space::page_log::Sequencer;

use crate::error::{Error, Result};

/// The contention profile's site of a commit waiting for another's write round.
static FLUSH_WAIT: shale_space::contention::Site =
    shale_space::contention::Site::new("table: group flush wait");

/// The contention profile's site of a commit waiting for another's device flush.
static DEVICE_FLUSH_WAIT: shale_space::contention::Site =
    shale_space::contention::Site::new("table: device flush wait");

/// The contention profile's site of a commit waiting for another's write of the undo log's
/// expiry records.
static EXPIRY_WAIT: shale_space::contention::Site =
    shale_space::contention::Site::new("table: group expiry wait");

/// The store's shared flusher: a queue of its own for flushes, the sequencers of write rounds
/// and of device flushes, and that of the expiry records' writes.
pub(crate) struct GroupFlush {
    queue: Mutex<VolumeQueue>,
    writes: Sequencer,
    flushes: Sequencer,
    expiries: Sequencer,
}

impl GroupFlush {
    pub(crate) fn new(queue: VolumeQueue) -> GroupFlush {
        GroupFlush {
            queue: Mutex::new(queue),
            writes: Sequencer::new(&FLUSH_WAIT),
            flushes: Sequencer::new(&DEVICE_FLUSH_WAIT),
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

    /// Returns once a write round that began after this call has completed (`write`: the
    /// dirty blocks), and then a device flush that began after that.
    ///
    /// # Errors
    /// The error of that round's write or of that flush (or of an earlier failed one): the
    /// caller stops the store; its changes stay active in the undo log, rolled back at the
    /// next open.
    pub(crate) fn flush(&self, write: impl FnOnce() -> Result<()>) -> Result<()> {
        self.flush_with(write, || Ok(self.queue.lock().flush()?))
    }

    /// [`GroupFlush::flush`] with the device flush given (tests stand in for the device).
    fn flush_with(
        &self,
        write: impl FnOnce() -> Result<()>,
        flush_device: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        self.writes.join(write, Error::Stopped)?;
        self.flushes.join(flush_device, Error::Stopped)
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
        self.flushes.counts()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::mpsc::{Receiver, Sender, channel};
    use std::time::Duration;

    use shale_io::SimDevice;

    use crate::{SimPmem, TableOptions, TableStore};

    /// How long a step the test waits for may take before the test fails: a bound on a
    /// hang, not a measurement.
    const PATIENCE: Duration = Duration::from_secs(30);

    fn store() -> TableStore {
        let d = SimDevice::new((8 << 10) + 2 * (64 << 10) + 32 * (64 << 10), 4096, 7).unwrap();
        let opts = TableOptions {
            space_reclaim_interval: None,
            segment_bytes: 64 << 10,
            undo_spill_bytes: 128 << 10,
            version_log_bytes: 64 << 10,
            ..TableOptions::default()
        };
        let pmem = SimPmem::new(crate::RING_OFFSET + (64 << 10)).boxed();
        TableStore::open_device(Arc::new(d), pmem, opts).unwrap()
    }

    /// Tells the test that `event` happened, as a round's step that succeeded.
    fn step(tx: &Sender<&'static str>, event: &'static str) -> crate::Result<()> {
        tx.send(event).unwrap();
        Ok(())
    }

    fn next(events: &Receiver<&'static str>) -> &'static str {
        events.recv_timeout(PATIENCE).expect("the step the test waits for happened")
    }

    /// A commit's write round runs while an earlier commit's device flush is in flight (the
    /// first design made it wait for that round's write and flush both), and the commit
    /// returns only after a flush that began once that flush ended: a flush begun before its
    /// blocks were written would not cover them.
    #[test]
    fn a_write_round_runs_while_an_earlier_flush_is_in_flight() {
        let store = store();
        let (tx, events) = channel::<&'static str>();
        let (release, held) = channel::<()>();
        let first = {
            let (shared, tx) = (store.shared().clone(), tx.clone());
            std::thread::spawn(move || {
                let flushed = shared.group.flush_with(
                    || step(&tx, "write 1"),
                    || {
                        tx.send("flush 1 begins").unwrap();
                        held.recv().unwrap();
                        step(&tx, "flush 1 ends")
                    },
                );
                flushed.unwrap();
                tx.send("commit 1 returns").unwrap();
            })
        };
        assert_eq!(next(&events), "write 1");
        assert_eq!(next(&events), "flush 1 begins");
        let second = {
            let (shared, tx) = (store.shared().clone(), tx.clone());
            std::thread::spawn(move || {
                let flushed =
                    shared.group.flush_with(|| step(&tx, "write 2"), || step(&tx, "flush 2"));
                flushed.unwrap();
                tx.send("commit 2 returns").unwrap();
            })
        };
        assert_eq!(next(&events), "write 2", "the write round ran beside the held flush");
        release.send(()).unwrap();
        first.join().unwrap();
        second.join().unwrap();
        drop(tx);
        let rest: Vec<&str> = events.iter().collect();
        let at =
            |e: &str| rest.iter().position(|x| *x == e).unwrap_or_else(|| panic!("{e}: {rest:?}"));
        assert!(at("flush 1 ends") < at("flush 2"), "{rest:?}");
        assert!(at("flush 2") < at("commit 2 returns"), "{rest:?}");
        assert!(at("flush 1 ends") < at("commit 1 returns"), "{rest:?}");
        assert_eq!(store.shared().group.counts(), (2, 2), "two flushes, one commit each");
    }

    /// Under many committing threads, every commit returns after a flush that covers a
    /// write round begun after it was called. The device is a model: a write round counts
    /// one more write completed, and a flush makes durable the writes completed when it
    /// began (what a real device flush promises).
    #[test]
    fn every_commit_returns_after_a_flush_covering_its_write_round() {
        use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
        let store = store();
        let group = &store.shared().group;
        let (written, durable) = (AtomicU64::new(0), AtomicU64::new(0));
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..200 {
                        let before = written.load(SeqCst);
                        let flushed = group.flush_with(
                            || {
                                std::thread::yield_now();
                                written.fetch_add(1, SeqCst);
                                Ok(())
                            },
                            || {
                                let covered = written.load(SeqCst);
                                std::thread::yield_now();
                                durable.fetch_max(covered, SeqCst);
                                Ok(())
                            },
                        );
                        flushed.unwrap();
                        let now = durable.load(SeqCst);
                        assert!(
                            now > before,
                            "returned with {now} writes durable, {before} before it"
                        );
                    }
                });
            }
        });
        let (flushes, commits) = group.counts();
        assert_eq!(commits, 1_600);
        assert!((1..=commits).contains(&flushes), "{flushes} flushes");
    }

    /// A failed device flush stops every later commit, whether or not its write round ran.
    #[test]
    fn a_failed_flush_fails_the_commits_after_it() {
        let store = store();
        let group = &store.shared().group;
        let failed = group.flush_with(|| Ok(()), || Err(crate::Error::Stopped("flush".into())));
        assert!(failed.is_err());
        let later = group.flush_with(|| Ok(()), || panic!("no flush after a failed one"));
        assert!(matches!(later, Err(crate::Error::Stopped(_))), "{later:?}");
    }
}
