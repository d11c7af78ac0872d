//! Room held by SSTs that a committed edit dropped and that readers still use.
//!
//! A compaction's inputs leave the version when it commits, but their slots stay taken
//! until the last handle on them goes (`SstHandle`'s drop, `sst/release.rs`): an iterator, a
//! snapshot's read, `Db::check` or a get that began before the commit still reads them. For
//! that long the volume counts their slots neither free nor live ([`shale_space::Edit`]'s
//! `hold_removed`). A flush or compaction that finds no room while such slots are held has not
//! met a full store: the room comes back as those readers end. So it waits for a release
//! ([`HeldRoom::wait_for_release`]) and runs again, rather than stop the store, which only a
//! reopen undoes (RocksDB's `SstFileManager` likewise clears a no-space error once space is
//! freed). A full store is one whose room runs out with nothing held and no compaction left to
//! free any.
//!
//! The counts are bytes per tier, raised when an SST is marked obsolete and lowered once its
//! extent is back in the volume; `releases` counts the give-backs, so that a waiter sees one
//! that happened between its look and its wait.

use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use shale_space::Tier;

#[derive(Debug, Default)]
struct Counts {
    /// Bytes held, by tier index.
    bytes: [u64; 2],
    /// Extents given back since the pool was made.
    releases: u64,
}

/// The held bytes of one pool's volume, and a wait for their release.
#[derive(Debug, Default)]
pub(crate) struct HeldRoom {
    counts: Mutex<Counts>,
    /// Signalled at every release, and by [`HeldRoom::wake`].
    released: Condvar,
}

impl HeldRoom {
    /// An SST of `bytes` on `tier` was dropped by a committed edit: held until released.
    pub fn hold(&self, tier: Tier, bytes: u64) {
        self.counts.lock().bytes[tier.index()] += bytes;
    }

    /// A held SST's extent is back in the volume.
    pub fn released(&self, tier: Tier, bytes: u64) {
        let mut c = self.counts.lock();
        let held = &mut c.bytes[tier.index()];
        debug_assert!(*held >= bytes, "released {bytes} B of {held} B held");
        *held = held.saturating_sub(bytes);
        c.releases += 1;
        self.released.notify_all();
    }

    /// Bytes held on `tier` now.
    pub fn held(&self, tier: Tier) -> u64 {
        self.counts.lock().bytes[tier.index()]
    }

    /// Bytes held on every tier.
    pub fn held_total(&self) -> u64 {
        self.counts.lock().bytes.iter().sum()
    }

    /// Releases since the pool was made: a waiter reads it before it looks at the room, and
    /// waits for it to move.
    pub fn releases(&self) -> u64 {
        self.counts.lock().releases
    }

    /// Waits until a release after the `since`-th, a [`HeldRoom::wake`], or `timeout`;
    /// whether a release came.
    pub fn wait_for_release(&self, since: u64, timeout: Duration) -> bool {
        let mut c = self.counts.lock();
        if c.releases == since {
            self.released.wait_for(&mut c, timeout);
        }
        c.releases != since
    }

    /// Wakes every waiter (a closing store's threads look at why they wait).
    pub fn wake(&self) {
        let _c = self.counts.lock();
        self.released.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn bytes_held_per_tier_until_released() {
        let h = HeldRoom::default();
        h.hold(Tier::Fast, 3 << 16);
        h.hold(Tier::Capacity, 1 << 16);
        assert_eq!(h.held(Tier::Fast), 3 << 16);
        assert_eq!(h.held(Tier::Capacity), 1 << 16);
        assert_eq!(h.held_total(), 4 << 16);
        let since = h.releases();
        h.released(Tier::Fast, 1 << 16);
        assert_eq!(h.held(Tier::Fast), 2 << 16);
        assert_eq!(h.releases(), since + 1);
        assert!(h.wait_for_release(since, Duration::ZERO), "a release before the wait is seen");
    }

    #[test]
    fn a_waiter_wakes_at_a_release_on_another_thread() {
        let h = Arc::new(HeldRoom::default());
        h.hold(Tier::Fast, 1 << 16);
        let since = h.releases();
        let releaser = {
            let h = h.clone();
            std::thread::spawn(move || h.released(Tier::Fast, 1 << 16))
        };
        // A release is the only way out of this loop: a timeout alone does not end it.
        while !h.wait_for_release(since, Duration::from_secs(60)) {}
        releaser.join().unwrap();
        assert_eq!(h.held(Tier::Fast), 0);
    }
}
