//! Giving back a freed WAL group's storage off the write path.
//!
//! A group's storage is released when its memtable's flush has committed
//! ([`super::WalWriter::free_group`]), and the free is done by whoever holds the WAL next: the
//! flush thread when no writer holds it, else a write group's leader (or `Db::flush` before
//! it returns), under the WAL lock and the store's state lock. A release is
//! `fallocate(PUNCH_HOLE)` on a volume file, and on a file system mounted with `discard` the
//! punch of written storage waits for the device's discard: 4-5 ms for 4 MiB, 14-19 ms for
//! 64 MiB on this project's disk, and 19-42 ms a free under 16 sync writers
//! (BENCHMARKS-history.md, "a freed WAL group's release in the write path"), every writer of
//! the store waiting behind it.
//!
//! So the writer hands each release to a thread of its own ([`WalReleases`]) and goes on: the
//! group's pages are the writer's no longer the moment it hands them (its bookkeeping says
//! so at once), but the group is not started again until every release handed before is done
//! ([`WalReleases::wait_idle`], from `start_group`): a release that ran after the next
//! generation's first page write would punch that page out. A group is started again a whole
//! memtable after its free at the earliest, so that wait is seldom a wait.
//!
//! A release the device refuses is kept ([`WalReleases::take_failure`]) and stops the store
//! at the next free or group start, or when the engine waits for the thread (`Db::flush`,
//! `Db::wait_for_compaction`, a close): nothing acknowledged depends on it, but a device
//! that fails a release is one the store no longer trusts (P5). The bytes a release gives
//! back leave [`super::WalWriter::allocated_bytes`] when it is done, so the statistic says
//! what the device still holds.
//!
//! The thread and its hand-over are the SST release thread's (`sst/release_thread.rs`, over
//! `sst/release_queue.rs`, which `crates/lsm-model` checks under shuttle).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use shale_io::DeviceRef;

use crate::error::Error;
use crate::sst::release_thread::ReleaseThread;

/// One range of the WAL area to give back.
pub(crate) struct WalRelease {
    pub device: DeviceRef,
    pub offset: u64,
    pub len: u64,
    /// Bytes of the range counted as allocated (a whole group's release also covers pages
    /// it never allocated).
    pub held: u64,
    /// Where `held` is counted: counted back once the range is given back.
    pub allocated_bytes: Arc<AtomicU64>,
    /// Where a refusal is kept for the writer.
    pub failure: Arc<Mutex<Option<Error>>>,
}

impl WalRelease {
    fn run(self) {
        match self.device.release_range(self.offset, self.len) {
            Ok(()) => {
                self.allocated_bytes.fetch_sub(self.held, Ordering::Relaxed);
            }
            Err(e) => {
                log::warn!(
                    "cannot release {} bytes of the WAL area at {}: {}",
                    self.len,
                    self.offset,
                    shale_io::Chain(&e)
                );
                // The first refusal is the one reported; later ones say nothing new.
                self.failure.lock().get_or_insert(Error::Io(e));
            }
        }
    }
}

/// The release thread of one WAL writer, started on its first release.
pub struct WalReleases {
    thread: ReleaseThread<WalRelease>,
    failure: Arc<Mutex<Option<Error>>>,
}

impl Default for WalReleases {
    fn default() -> Self {
        WalReleases {
            thread: ReleaseThread::new("shale-wal-release", WalRelease::run),
            failure: Arc::default(),
        }
    }
}

impl WalReleases {
    /// Gives back `len` bytes at `offset` of `device` on the release thread (or at once, should
    /// the OS refuse to start it), then takes `held` off `allocated_bytes`.
    pub(crate) fn release(
        &self,
        device: &DeviceRef,
        offset: u64,
        len: u64,
        held: u64,
        allocated_bytes: &Arc<AtomicU64>,
    ) {
        self.thread.hand(WalRelease {
            device: device.clone(),
            offset,
            len,
            held,
            allocated_bytes: allocated_bytes.clone(),
            failure: self.failure.clone(),
        });
    }

    /// Waits until every release handed so far is done.
    pub fn wait_idle(&self) {
        self.thread.wait_idle();
    }

    /// The first release the device refused since the last call, if any.
    pub fn take_failure(&self) -> Option<Error> {
        self.failure.lock().take()
    }
}
