//! Tiering (SpanDB): where new SSTs go on a store with a fast and a capacity volume, and how
//! the level pointer moves.
//!
//! The fast volume holds the WAL, the version log and the SSTs of the levels above the level
//! pointer; new SSTs of levels at or below it go to the capacity volume. SSTs are never moved
//! because the pointer moved: a compaction writes its outputs where the pointer says at the
//! time, so the data drifts to its tier as it is rewritten. Every period the head thread
//! (`db/tier_head.rs`) samples the fast volume's write bandwidth and free space and moves the
//! pointer one level ([`next_pointer`]):
//! - shallower when the fast volume is busy (its bandwidth above `bandwidth_high`) or nearly
//!   full (less than `fast_free_min` of it free): fewer levels write there;
//! - deeper when it has bandwidth to spare (below `bandwidth_low`) and room (more than twice
//!   `fast_free_min` free): more levels benefit from it;
//! - otherwise where it is.
//!
//! A fast volume that cannot take an SST (no free run, or its share `fast_bytes_max` used)
//! sends it to the capacity volume whatever the pointer says, so a full fast volume fails no
//! write.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::version_edit::LEVELS_MAX;

/// Fast-volume write bandwidth below which the pointer moves deeper: 800 MB/s, SpanDB's
/// public code's value, about 40% of what this project's development disk sustains (2.1 GB/s
/// of 1 MiB O_DIRECT writes at depth 4, fio, 2026-11-25) as of SpanDB's NVMe drive.
pub const BANDWIDTH_LOW_DEFAULT: u64 = 800_000_000;
/// Fast-volume write bandwidth above which the pointer moves shallower: 1300 MB/s (SpanDB's
/// value, about 60% of the disk's sequential write bandwidth).
pub const BANDWIDTH_HIGH_DEFAULT: u64 = 1_300_000_000;

/// How a store spreads over a fast and a capacity volume.
#[derive(Clone, Debug, PartialEq)]
pub struct TierOptions {
    /// The capacity volume of a store opened by path ([`crate::Db::open`]): a directory, a
    /// volume file or a block device. `None` (the default): one volume, as before tiers.
    /// Tiers are chosen when a store is created; a store created with a capacity volume must
    /// be opened with it, one created without cannot gain one.
    pub capacity_path: Option<PathBuf>,
    /// The level pointer at open: new SSTs of levels below it go to the fast volume
    /// (0..=[`LEVELS_MAX`]; 0 puts every SST on the capacity volume, only the WAL and the
    /// version log on the fast one). Default 2: L0 and L1.
    pub fast_levels: usize,
    /// Whether the head thread moves the pointer (else it stays at `fast_levels`).
    pub adaptive: bool,
    /// Fast-volume write bandwidth, bytes per second, below which the pointer moves deeper.
    pub bandwidth_low: u64,
    /// Fast-volume write bandwidth, bytes per second, above which it moves shallower.
    pub bandwidth_high: u64,
    /// Share of the fast volume's room to keep free, in percent: below it the pointer moves
    /// shallower, and it moves deeper only with twice as much free. Default 10.
    pub fast_free_min_percent: u32,
    /// Bytes of SSTs the fast volume may hold (0, the default: as many as it has room for;
    /// a volume file grows only as far as its file system allows, a device is full at its
    /// size). Past it, new SSTs go to the capacity volume.
    pub fast_bytes_max: u64,
    /// Period of the head thread, milliseconds (SpanDB: one second).
    pub head_period_ms: u64,
}

impl Default for TierOptions {
    fn default() -> TierOptions {
        TierOptions {
            capacity_path: None,
            fast_levels: 2,
            adaptive: true,
            bandwidth_low: BANDWIDTH_LOW_DEFAULT,
            bandwidth_high: BANDWIDTH_HIGH_DEFAULT,
            fast_free_min_percent: 10,
            fast_bytes_max: 0,
            head_period_ms: 1000,
        }
    }
}

impl TierOptions {
    /// Checks the ranges.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the option and its range.
    pub fn validate(&self) -> Result<()> {
        if self.fast_levels > LEVELS_MAX {
            return Err(Error::InvalidArgument(format!(
                "tiers.fast_levels {} must be in 0..={LEVELS_MAX}",
                self.fast_levels
            )));
        }
        if self.bandwidth_low > self.bandwidth_high {
            return Err(Error::InvalidArgument(format!(
                "tiers.bandwidth_low {} must not exceed tiers.bandwidth_high {}",
                self.bandwidth_low, self.bandwidth_high
            )));
        }
        if self.fast_free_min_percent > 50 {
            return Err(Error::InvalidArgument(format!(
                "tiers.fast_free_min_percent {} must be in 0..=50 (the pointer moves deeper only \
                 with twice as much free)",
                self.fast_free_min_percent
            )));
        }
        if !(10..=60_000).contains(&self.head_period_ms) {
            return Err(Error::InvalidArgument(format!(
                "tiers.head_period_ms {} must be in 10..=60000",
                self.head_period_ms
            )));
        }
        Ok(())
    }
}

/// What the head thread saw in one period.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FastSample {
    /// Bytes written to the fast volume per second over the period.
    pub write_bandwidth: u64,
    /// Percent of the fast volume's room free for SSTs; `None` when it has no known bound
    /// (a volume file that grows).
    pub free_percent: Option<u32>,
}

/// The pointer after one period: one level shallower, deeper or the same (see the module
/// comment), within `0..=LEVELS_MAX`.
pub fn next_pointer(pointer: usize, sample: FastSample, opts: &TierOptions) -> usize {
    let min_free = opts.fast_free_min_percent;
    let short_of_room = sample.free_percent.is_some_and(|f| f < min_free);
    let room_to_grow = sample.free_percent.is_none_or(|f| f > 2 * min_free);
    if short_of_room || sample.write_bandwidth > opts.bandwidth_high {
        pointer.saturating_sub(1)
    } else if sample.write_bandwidth < opts.bandwidth_low && room_to_grow {
        (pointer + 1).min(LEVELS_MAX)
    } else {
        pointer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(mb_per_s: u64, free_percent: Option<u32>) -> FastSample {
        FastSample { write_bandwidth: mb_per_s * 1_000_000, free_percent }
    }

    #[test]
    fn the_pointer_follows_bandwidth_and_room() {
        let o = TierOptions::default();
        // Spare bandwidth and room: deeper, up to the last level.
        assert_eq!(next_pointer(2, sample(100, Some(80)), &o), 3);
        assert_eq!(next_pointer(LEVELS_MAX, sample(100, None), &o), LEVELS_MAX);
        // Between the thresholds: stays.
        assert_eq!(next_pointer(2, sample(1000, Some(80)), &o), 2);
        // Busy: shallower, down to 0.
        assert_eq!(next_pointer(2, sample(1500, Some(80)), &o), 1);
        assert_eq!(next_pointer(0, sample(1500, Some(80)), &o), 0);
        // Nearly full: shallower even when idle.
        assert_eq!(next_pointer(3, sample(0, Some(5)), &o), 2);
        // Some room but not twice the floor: idle stays.
        assert_eq!(next_pointer(3, sample(0, Some(15)), &o), 3);
    }

    #[test]
    fn bad_options_are_refused() {
        for bad in [
            TierOptions { fast_levels: LEVELS_MAX + 1, ..TierOptions::default() },
            TierOptions { bandwidth_low: 2, bandwidth_high: 1, ..TierOptions::default() },
            TierOptions { fast_free_min_percent: 51, ..TierOptions::default() },
            TierOptions { head_period_ms: 0, ..TierOptions::default() },
        ] {
            assert!(matches!(bad.validate(), Err(Error::InvalidArgument(_))), "{bad:?}");
        }
        TierOptions::default().validate().unwrap();
    }
}
