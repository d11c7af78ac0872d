//! Giving back a dropped SST's extent off the callers' threads.
//!
//! When the last handle on an SST a compaction dropped goes (`SstHandle`'s drop), three things
//! happen before its slots may be written again: its blocks leave the block cache (a sweep of
//! every shard), its pages leave the page cache (`posix_fadvise(DONTNEED)` over the extent,
//! `volume_io::drop_cached_pages`), and the extent goes back to the volume (a hole punched in a
//! volume file, `Volume::release`). The last handle is often a caller's: a get or an iterator
//! that began before the compaction committed still holds the old version, and drops it when
//! it ends. The page drop alone is kernel work in proportion to the extent: for an SST written
//! through the page cache the kernel frees a buffer head per block of every page, and a get of
//! YCSB C right after its load that dropped one took tens of milliseconds, a thousand times its
//! median (BENCHMARKS-history.md, "Issue #44: a get that gave back a dropped SST").
//!
//! So a caller's thread hands the work to the pool's release thread ([`SstReleases`]), which
//! does it in the order handed, and returns at once. The store's background threads (flush,
//! compaction, the tuner: those that call [`mark_background_thread`]) still do it themselves,
//! at once, as before: no caller waits on them, and a compaction's room is back in the volume
//! when the compaction ends (unless a reader still holds its inputs: `sst/held_room.rs`),
//! which the room a flush waits for and `Db::compact_range`'s callers count on. Deferring
//! keeps the order that makes slot reuse safe: the pages are dropped before the extent is
//! released, whichever thread does both.
//!
//! The release thread is started on the first deferred release (most pools never need one)
//! and joined when the pool drops, after it has done everything handed to it; a job holds the
//! volume, not the pool, so the pool never drops on that thread. [`SstReleases::wait_idle`]
//! waits for every release handed so far (`QueuePool::wait_for_releases`): a closing store
//! before it returns, and `Db::flush`, `Db::compact_range`, `Db::check` and
//! `Db::wait_for_compaction` before their work, so that an extent still owed to the volume
//! is neither counted as leaked nor a refused give-back left unreported.

use std::cell::Cell;
use std::sync::Arc;

use shale_space::{Extent, Volume};

use crate::cache::BlockCache;
use crate::sst::held_room::HeldRoom;
use crate::sst::release_thread::ReleaseThread;
use crate::sst::volume_io::{PageCacheFiles, drop_cached_pages};

thread_local! {
    /// Whether this thread is one of a store's background threads, which give back dropped
    /// SSTs themselves.
    static BACKGROUND: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread as a store's background thread: the SSTs whose last handle it
/// drops are given back on it, at once.
pub(crate) fn mark_background_thread() {
    BACKGROUND.with(|b| b.set(true));
}

fn on_background_thread() -> bool {
    BACKGROUND.with(Cell::get)
}

/// One dropped SST to give back: what the work needs, without the pool.
pub(crate) struct SstRelease {
    /// Its block-cache id.
    pub id: u64,
    pub extent: Extent,
    pub cache: Arc<BlockCache>,
    pub volume: Arc<Volume>,
    /// The page-cache descriptors of the volume's tiers.
    pub files: [PageCacheFiles; 2],
    /// Where the extent was counted held: counted back once it is free.
    pub held: Arc<HeldRoom>,
}

impl SstRelease {
    /// Forgets the SST's blocks, drops its pages, then gives the extent back.
    fn run(self) {
        self.cache.forget(self.id);
        // Before the slots can be handed out again: a later SST written into them with
        // O_DIRECT bypasses the page cache, so a page of this SST left cached would be read
        // in its place, and it would pass the checksum (a real block of an older SST at the
        // same offset): wrong data, not Corruption. The block cache is keyed by SST id and
        // cannot mix them up; the page cache is keyed by offset and can.
        if let Err(e) = drop_cached_pages(&self.volume, &self.files, self.extent) {
            log::warn!(
                "cannot drop the cached pages of a released SST ({:?}): {}",
                self.extent,
                shale_io::Chain(&e)
            );
        }
        let r = self.volume.extent_range(self.extent);
        self.volume.release(self.extent);
        self.held.released(self.extent.tier, r.end - r.start);
    }
}

/// The release thread of one pool, started on first use.
pub(crate) struct SstReleases {
    thread: ReleaseThread<SstRelease>,
}

impl Default for SstReleases {
    fn default() -> Self {
        SstReleases { thread: ReleaseThread::new("shale-sst-release", SstRelease::run) }
    }
}

impl SstReleases {
    /// Gives `release` back: at once on a store's background thread, else on the release
    /// thread (or at once, should the OS refuse to start it).
    pub fn release(&self, release: SstRelease) {
        if on_background_thread() {
            return release.run();
        }
        self.thread.hand(release);
    }

    /// Waits until every release handed to the thread so far is done.
    pub fn wait_idle(&self) {
        self.thread.wait_idle();
    }

    /// Releases handed to the release thread since the pool was made.
    pub fn deferred(&self) -> u64 {
        self.thread.handed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_background_thread_is_marked_and_a_caller_is_not() {
        assert!(!on_background_thread());
        let marked = std::thread::spawn(|| {
            mark_background_thread();
            on_background_thread()
        });
        assert!(marked.join().unwrap());
        assert!(!on_background_thread(), "marking another thread marks this one");
    }
}
