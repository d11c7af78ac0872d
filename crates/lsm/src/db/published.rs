//! What a point read consults, published for readers that take no lock.
//!
//! A point read needs the memtables (active and sealed, newest first), the version (the
//! SSTs) and the last sequence number whose write is complete. These live in the store's
//! `State` under its mutex; taking that mutex, cloning every memtable's and the version's
//! `Arc` and dropping them again cost each `get` four or more atomic writes to lines that
//! every reader thread shares (16 reader threads on 2 cores: `read_view`, the candidate list
//! and dropping the view were 6% of a readrandom on cached blocks). RocksDB's readers use a
//! thread-local SuperVersion for the same reason.
//!
//! Here the writer side, always under the state mutex, publishes:
//! - a [`View`] (memtables and version) through an [`ArcSwap`] each time one of them
//!   changes, before the mutex is released and before any write goes into a new memtable;
//! - the last complete sequence number in an atomic, after the write is in its memtable.
//!
//! A reader loads the view first, then the sequence (Acquire), as RocksDB's `GetImpl` refs
//! its SuperVersion before it reads the last sequence. Why that order:
//! - The view holds every write acknowledged before the read started: such a write went into
//!   a memtable that was published before the write went into it, so before the read; the
//!   view loaded is that publication or a later one, which holds the memtable or, once it was
//!   flushed, the SST that replaced it (the flush publishes both in one view). The sequence
//!   loaded after the view is at least that write's, so the read sees it (P1).
//! - Every version the view's SSTs left out is hidden by a newer one the read sees: a flush or
//!   a compaction drops a version only under a newer one at or below the last sequence when
//!   it started (no snapshot older than that being held), and it published its SSTs after
//!   that; the sequence loaded after the view is at least as new.
//!
//! The other order broke the second point: a reader that loaded the sequence, then was
//! descheduled while a newer version of its key was written and a flush dropped the version
//! its sequence saw, loaded a view whose SST held only the newer version (above its sequence)
//! and answered with an older one from a deeper SST: a version the key had left before the
//! read started (`tests/concurrent.rs` caught it once in CI as a reader going back from
//! version 1098 to 1066; `tests/point_read_view.rs` now shows it every time).
//!
//! A view older than the sequence is harmless: a write at or below the sequence that it lacks
//! went into a memtable switched in after the view was loaded, so it was not acknowledged
//! before the read started, and every write in the view's memtables is older than it (a
//! switch waits for the groups in flight to publish).
//!
//! The state keeps its own copies (`State::mem`, `imm`, `version`, `last_seq`), which the
//! writer side reads under the mutex; debug builds check on one read in eight that the
//! publication matches them ([`Publication::check`]), so a change that forgets to publish fails
//! the tests.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::{ArcSwap, Guard};

use crate::memtable::Memtable;
use crate::version::Version;

/// Whether this read is one of the one in eight a debug build checks ([`Publication::check`]).
pub(super) fn sampled() -> bool {
    thread_local!(static READS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) });
    READS.with(|n| {
        n.set(n.get().wrapping_add(1));
        n.get() % 8 == 0
    })
}

/// The memtables and SSTs a read consults.
pub(super) struct View {
    /// The active memtable, then the sealed ones, newest first.
    pub mems: Vec<Arc<Memtable>>,
    pub version: Arc<Version>,
}

/// The published [`View`] and last sequence.
pub(super) struct Publication {
    view: ArcSwap<View>,
    last_seq: AtomicU64,
}

impl Publication {
    /// A publication of `mem` and `version` with no sealed memtable, complete up to
    /// `last_seq`.
    pub fn new(mem: &Arc<Memtable>, version: &Arc<Version>, last_seq: u64) -> Publication {
        Publication {
            view: ArcSwap::from_pointee(View { mems: vec![mem.clone()], version: version.clone() }),
            last_seq: AtomicU64::new(last_seq),
        }
    }

    /// Publishes the memtables and version (the caller holds the state mutex).
    pub fn publish_view(
        &self,
        mem: &Arc<Memtable>,
        imm: &VecDeque<(Arc<Memtable>, u64)>,
        version: &Arc<Version>,
    ) {
        let mut mems = Vec::with_capacity(1 + imm.len());
        mems.push(mem.clone());
        mems.extend(imm.iter().rev().map(|(m, _)| m.clone()));
        self.view.store(Arc::new(View { mems, version: version.clone() }));
    }

    /// Publishes `seq` as the last complete sequence (the caller holds the state mutex, and
    /// every write up to `seq` is in its memtable).
    pub fn publish_last_seq(&self, seq: u64) {
        self.last_seq.store(seq, Ordering::Release);
    }

    /// The view, then the last complete sequence: in this order (see the module's comment).
    /// `between` runs between the two loads (a test's pause; nothing otherwise).
    pub fn load(&self, between: impl FnOnce()) -> (u64, Guard<Arc<View>>) {
        let view = self.view.load();
        between();
        (self.last_seq.load(Ordering::Acquire), view)
    }

    /// Panics if the publication differs from the state's own copies (called under the state
    /// mutex, in debug builds).
    pub fn check(
        &self,
        mem: &Arc<Memtable>,
        imm: &VecDeque<(Arc<Memtable>, u64)>,
        version: &Arc<Version>,
        last_seq: u64,
    ) {
        let view = self.view.load();
        let expected = std::iter::once(mem).chain(imm.iter().rev().map(|(m, _)| m));
        assert!(
            view.mems.len() == 1 + imm.len()
                && view.mems.iter().zip(expected).all(|(a, b)| Arc::ptr_eq(a, b)),
            "the published memtables are not the state's"
        );
        assert!(Arc::ptr_eq(&view.version, version), "the published version is not the state's");
        assert_eq!(self.last_seq.load(Ordering::Acquire), last_seq, "published last sequence");
    }
}
