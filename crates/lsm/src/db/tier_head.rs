//! The level pointer of a tiered store and SpanDB's head thread that moves it
//! (`tiering.rs` has the rule).
//!
//! The head thread wakes every `tiers.head_period_ms`, reads the fast volume's bytes written
//! since its last look (WAL, version log and SST writes, direct and through the page cache)
//! and how full the fast volume is, and moves the pointer by at most one level. It runs only
//! on a tiered, writable store with `tiers.adaptive` set; it stops with the other background
//! threads.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use shale_space::{IoClass, Tier};

use crate::error::Result;
use crate::stats::TierStats;
use crate::tiering::{FastSample, next_pointer};
use crate::version::Version;

use super::Inner;

/// The pointer and its moves since open.
#[derive(Debug, Default)]
pub(super) struct LevelPointer {
    /// New SSTs of levels below it go to the fast volume.
    pointer: AtomicUsize,
    deeper: AtomicU64,
    shallower: AtomicU64,
}

impl LevelPointer {
    pub(super) fn new(fast_levels: usize) -> LevelPointer {
        LevelPointer { pointer: AtomicUsize::new(fast_levels), ..LevelPointer::default() }
    }

    /// The pointer now.
    pub(super) fn get(&self) -> usize {
        self.pointer.load(Ordering::Relaxed)
    }

    /// Moves the pointer to `to`, counting the move.
    fn set(&self, to: usize) {
        let from = self.pointer.swap(to, Ordering::Relaxed);
        if to > from {
            self.deeper.fetch_add(1, Ordering::Relaxed);
        } else if to < from {
            self.shallower.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Moves deeper and shallower since open.
    pub(super) fn moves(&self) -> (u64, u64) {
        (self.deeper.load(Ordering::Relaxed), self.shallower.load(Ordering::Relaxed))
    }
}

impl Inner {
    /// The tier a new SST of `level`, of about `reserve_bytes`, goes to: the fast one above
    /// the pointer while it has room for the SST within `tiers.fast_bytes_max`, else the
    /// capacity one. A store without a capacity volume has only the fast one.
    pub(super) fn tier_for(&self, level: usize, reserve_bytes: u64) -> Tier {
        if !self.volume.is_tiered() {
            return Tier::Fast;
        }
        if level >= self.level_pointer.get() {
            return Tier::Capacity;
        }
        let max = self.opts.tiers.fast_bytes_max;
        if max > 0 && self.fast_sst_bytes() + reserve_bytes > max {
            return Tier::Capacity;
        }
        Tier::Fast
    }

    /// What lives on each tier and the I/O each saw, for [`crate::Stats::tiers`].
    pub(super) fn tier_stats(&self, version: &Version) -> Vec<TierStats> {
        let slot_bytes = self.volume.layout().slot_bytes;
        self.volume
            .tiers()
            .iter()
            .map(|&tier| {
                let ssts: Vec<_> = version
                    .levels
                    .iter()
                    .flatten()
                    .filter(|h| h.meta.extent.tier == tier)
                    .collect();
                let io = |class| self.volume.tier_io(tier, class);
                let classes = [IoClass::Wal, IoClass::Slot, IoClass::VersionLog, IoClass::Header];
                let (buffered_read, buffered_written) = self.pool.tier_buffered_bytes(tier);
                TierStats {
                    name: tier.name(),
                    ssts: ssts.len(),
                    live_bytes: ssts.iter().map(|h| h.meta.bytes).sum(),
                    total_bytes: u64::from(self.volume.tier_slot_usage(tier).total) * slot_bytes,
                    write_bytes: classes.iter().map(|&c| io(c).write_bytes).sum::<u64>()
                        + buffered_written,
                    writes: classes.iter().map(|&c| io(c).writes).sum(),
                    read_bytes: classes.iter().map(|&c| io(c).read_bytes).sum::<u64>()
                        + buffered_read,
                    reads: classes.iter().map(|&c| io(c).reads).sum(),
                }
            })
            .collect()
    }

    /// Bytes of the fast volume's slots that are live or being written.
    fn fast_sst_bytes(&self) -> u64 {
        let u = self.volume.tier_slot_usage(Tier::Fast);
        u64::from(u.live + u.pending) * self.volume.layout().slot_bytes
    }

    /// Bytes written to the fast volume since open, by every path.
    fn fast_bytes_written(&self) -> u64 {
        let io = |class| self.volume.tier_io(Tier::Fast, class).write_bytes;
        io(IoClass::Wal)
            + io(IoClass::Slot)
            + io(IoClass::VersionLog)
            + self.pool.tier_buffered_bytes(Tier::Fast).1
    }

    /// Percent of the fast volume's room for SSTs still free: its room is
    /// `tiers.fast_bytes_max` when set, else its device's slots when the device cannot grow;
    /// `None` for a volume file without a bound.
    fn fast_free_percent(&self) -> Option<u32> {
        let slot_bytes = self.volume.layout().slot_bytes;
        let room = match self.opts.tiers.fast_bytes_max {
            0 if self.volume.device().info().growable => return None,
            0 => u64::from(self.volume.tier_slot_usage(Tier::Fast).total) * slot_bytes,
            max => max,
        };
        let used = self.fast_sst_bytes().min(room);
        Some(((room - used) * 100 / room.max(1)) as u32)
    }

    /// The head thread's loop: one look per period until shutdown.
    fn head_loop(&self) {
        let period = Duration::from_millis(self.opts.tiers.head_period_ms);
        let mut last = (Instant::now(), self.fast_bytes_written());
        let mut st = self.state.lock();
        loop {
            let due = last.0 + period;
            let now = Instant::now();
            if now < due {
                // Woken by every notification of the condition variable: only a due period
                // or shutdown does anything.
                self.cv.wait_for(&mut st, due - now);
            }
            if st.shutting_down {
                return;
            }
            if Instant::now() < due {
                continue;
            }
            drop(st);
            let now = (Instant::now(), self.fast_bytes_written());
            let secs = now.0.duration_since(last.0).as_secs_f64().max(1e-3);
            let sample = FastSample {
                write_bandwidth: ((now.1 - last.1) as f64 / secs) as u64,
                free_percent: self.fast_free_percent(),
            };
            last = now;
            let pointer = self.level_pointer.get();
            let next = next_pointer(pointer, sample, &self.opts.tiers);
            if next != pointer {
                log::debug!("level pointer {pointer} -> {next} ({sample:?})");
                self.level_pointer.set(next);
            }
            st = self.state.lock();
        }
    }
}

/// Starts the head thread of a tiered, writable store whose options ask for one.
pub(super) fn start(inner: &Arc<Inner>) -> Result<Option<std::thread::JoinHandle<()>>> {
    if !inner.volume.is_tiered() || inner.read_only || !inner.opts.tiers.adaptive {
        return Ok(None);
    }
    super::pool::spawn_named(inner, "shale-tier-head", |inner| inner.head_loop()).map(Some)
}
