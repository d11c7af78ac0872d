//! Pacing writes into the last memtable the store may fill while the flush ahead of it runs,
//! so that it fills no sooner than that flush ends.
//!
//! A store holds at most `Options::max_write_buffer_number` memtables; when the active one
//! fills while the others still wait for their flush, every writer stops until the oldest
//! flush commits (a memtable stall). The stop lasts as long as the rest of that flush: with
//! the tuner's memtables of 300 MB and more on ADOC's SATA class, flushes that shared the
//! device with an L0 -> L1 compaction took seconds, and single writes waited up to 1.6 s
//! (BENCHMARKS-history.md, "the slowdown's start and the memtable pace"). Instead, while the
//! next memtable switch would have to wait, writes go at the rate that fills the active
//! memtable's room in the time the flush is projected to take still (its entries done so
//! far against the time it has run), through the slowdown's credit (`DelayedWrites`), so the
//! delay is spread over the writes in small waits. A projection that comes out wrong costs
//! no more than before: a memtable that still fills waits for the flush as it always did.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::write_controller::MIN_DELAYED_WRITE_RATE;

/// A projection needs this share of the flush done (a thousandth per unit)...
const MIN_DONE_PER_MILLE: u64 = 20;
/// ...and this long run, microseconds: the first entries of a flush say little of its pace.
const MIN_ELAPSED_US: u64 = 5_000;
/// The flush's thread publishes its progress every this many entries.
pub const PROGRESS_EVERY: u64 = 4096;

/// The running flush's progress, written by the flush thread, read by the write path.
#[derive(Debug, Default)]
pub struct FlushProgress {
    started_us: AtomicU64,
    done: AtomicU64,
    /// Entries of the memtable being flushed; 0 when no flush is writing.
    total: AtomicU64,
}

/// What [`FlushProgress`] said at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlushSnapshot {
    /// When the flush began writing, on the store's pacing clock (microseconds).
    pub started_us: u64,
    /// Entries of the memtable it has passed.
    pub done: u64,
    /// Entries in the memtable; 0 when no flush is writing.
    pub total: u64,
}

impl FlushProgress {
    /// A flush of `total` entries begins writing at `now_us`.
    pub fn begin(&self, now_us: u64, total: u64) {
        self.done.store(0, Ordering::Relaxed);
        self.started_us.store(now_us, Ordering::Relaxed);
        self.total.store(total, Ordering::Release);
    }

    /// The flush has passed `done` entries.
    pub fn advance(&self, done: u64) {
        self.done.store(done, Ordering::Relaxed);
    }

    /// The flush wrote everything, or gave up.
    pub fn end(&self) {
        self.total.store(0, Ordering::Release);
    }

    /// The progress now. The three fields are read apart, so one may be a flush newer than
    /// the others; a pace from such a mix lasts only until the next write group asks again.
    pub fn snapshot(&self) -> FlushSnapshot {
        let total = self.total.load(Ordering::Acquire);
        FlushSnapshot {
            started_us: self.started_us.load(Ordering::Relaxed),
            done: self.done.load(Ordering::Relaxed).min(total),
            total,
        }
    }
}

/// The flush thread's side of [`FlushProgress`]: counts the entries the flush passes,
/// publishes the count every [`PROGRESS_EVERY`], and ends the flush's progress when dropped,
/// written or failed.
pub struct FlushPublisher<'a> {
    progress: &'a FlushProgress,
    passed: Cell<u64>,
}

impl<'a> FlushPublisher<'a> {
    /// A flush of `total` entries begins writing at `now_us`.
    pub fn begin(progress: &'a FlushProgress, now_us: u64, total: u64) -> FlushPublisher<'a> {
        progress.begin(now_us, total);
        FlushPublisher { progress, passed: Cell::new(0) }
    }

    /// The flush passed one more entry; true when that published the count.
    pub fn passed_one(&self) -> bool {
        let n = self.passed.get() + 1;
        self.passed.set(n);
        let publish = n % PROGRESS_EVERY == 0;
        if publish {
            self.progress.advance(n);
        }
        publish
    }
}

impl Drop for FlushPublisher<'_> {
    fn drop(&mut self) {
        self.progress.end();
    }
}

/// The rate, bytes a second, at which `room` bytes left in the active memtable fill just as
/// the flush it waits for ends, projected at `now_us` from that flush's progress; None when
/// no flush is writing or too little of it has run to project from.
pub fn rate(room: u64, flush: FlushSnapshot, now_us: u64) -> Option<u64> {
    let FlushSnapshot { started_us, done, total } = flush;
    let elapsed = now_us.saturating_sub(started_us);
    if total == 0 || done * 1000 < total * MIN_DONE_PER_MILLE || elapsed < MIN_ELAPSED_US {
        return None;
    }
    let remaining_us = (elapsed as u128 * (total - done) as u128 / done as u128) as u64;
    if remaining_us == 0 {
        return None;
    }
    let rate = (room as u128 * 1_000_000 / remaining_us as u128).min(u64::MAX as u128) as u64;
    Some(rate.max(MIN_DELAYED_WRITE_RATE))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1_000_000;

    #[test]
    fn room_fills_as_the_flush_is_projected_to_end() {
        // Half the flush done in a second: a second to go, for 100 MB of room.
        let half = FlushSnapshot { started_us: 1_000_000, done: 500, total: 1000 };
        assert_eq!(rate(100 * MB, half, 2_000_000), Some(100 * MB));
        // A quarter done in a second: three to go.
        let quarter = FlushSnapshot { done: 250, ..half };
        assert_eq!(rate(90 * MB, quarter, 2_000_000), Some(30 * MB));
        // Nearly done: the room may fill fast.
        let nearly = FlushSnapshot { done: 999, ..half };
        assert!(rate(100 * MB, nearly, 2_000_000).unwrap() > 99_000 * MB);
    }

    #[test]
    fn no_pace_without_a_flush_to_project_from() {
        let none = FlushSnapshot::default();
        assert_eq!(rate(MB, none, 10_000_000), None, "no flush writing");
        let early = FlushSnapshot { started_us: 0, done: 19, total: 1000 };
        assert_eq!(rate(MB, early, 10_000_000), None, "under 2% done");
        let just = FlushSnapshot { started_us: 0, done: 500, total: 1000 };
        assert_eq!(rate(MB, just, 4_999), None, "under 5 ms run");
        let done = FlushSnapshot { started_us: 0, done: 1000, total: 1000 };
        assert_eq!(rate(MB, done, 10_000_000), None, "nothing left to wait for");
    }

    #[test]
    fn a_full_memtable_is_paced_at_the_floor_not_stopped() {
        let slow = FlushSnapshot { started_us: 0, done: 100, total: 1000 };
        assert_eq!(rate(0, slow, 1_000_000), Some(MIN_DELAYED_WRITE_RATE));
    }

    #[test]
    fn the_publisher_counts_in_steps_and_ends_when_dropped() {
        let p = FlushProgress::default();
        {
            let publisher = FlushPublisher::begin(&p, 3, 3 * PROGRESS_EVERY);
            for _ in 0..PROGRESS_EVERY + 1 {
                publisher.passed_one();
            }
            let s = p.snapshot();
            assert_eq!((s.started_us, s.done, s.total), (3, PROGRESS_EVERY, 3 * PROGRESS_EVERY));
        }
        assert_eq!(p.snapshot().total, 0, "a dropped publisher ends the flush's progress");
    }

    #[test]
    fn progress_is_read_as_published() {
        let p = FlushProgress::default();
        assert_eq!(p.snapshot().total, 0);
        p.begin(7, 1000);
        p.advance(PROGRESS_EVERY);
        let s = p.snapshot();
        assert_eq!((s.started_us, s.done, s.total), (7, 1000, 1000), "done within total");
        p.end();
        assert_eq!(p.snapshot().total, 0);
    }
}
