//! A store's timeline: one row per interval (a second, as ADOC's evaluation plots it) of what
//! the tuner acts on and what it is judged by, from two [`Stats`] snapshots.
//!
//! ```
//! use shale_lsm::timeline::{TimelineRow, HEADER};
//! use shale_lsm::{Db, Options};
//!
//! let dir = tempfile::tempdir()?;
//! let db = Db::open(dir.path(), Options::small_for_tests())?;
//! let before = db.stats();
//! db.put(b"k", b"v")?;
//! let row = TimelineRow::between(1, &before, &db.stats());
//! assert_eq!(row.csv_fields().split(',').count(), HEADER.split(',').count());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! CSV columns ([`HEADER`]), one row per interval:
//! - `second`: the interval's end, in whole seconds since the timeline started;
//! - `background_jobs`, `write_buffer_bytes` (ADOC's threads and batch), `memtables`,
//!   `l0_files`, `pending_compaction_bytes`: at the interval's end;
//! - per stall kind (`memtable`, `l0_slowdown`, `l0_stop`, `pending_slowdown`,
//!   `pending_stop`): `stall_<kind>_count` and `stall_<kind>_us`, stalls that ended in the
//!   interval and their time;
//! - `tuner`: the overflow the tuner answered last ("L0O", "RDO", "MMO"), or empty.
//!
//! `shale bench --timeline FILE` writes these columns after its own: the interval's
//! operations and the p99 latency of its writes.

use crate::stats::{StallTotal, Stats};

/// The CSV header of the engine's columns.
pub const HEADER: &str = "second,background_jobs,write_buffer_bytes,memtables,l0_files,\
pending_compaction_bytes,stall_memtable_count,stall_memtable_us,stall_l0_slowdown_count,\
stall_l0_slowdown_us,stall_l0_stop_count,stall_l0_stop_us,stall_pending_slowdown_count,\
stall_pending_slowdown_us,stall_pending_stop_count,stall_pending_stop_us,tuner";

/// One interval of a store's timeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimelineRow {
    /// The interval's end, seconds since the timeline started.
    pub second: u64,
    /// Background threads at the end.
    pub background_jobs: usize,
    /// Memtable size at the end.
    pub write_buffer_bytes: u64,
    /// Memtables, active and sealed, at the end.
    pub memtables: usize,
    /// L0 SSTs at the end.
    pub l0_files: usize,
    /// Pending compaction bytes at the end.
    pub pending_compaction_bytes: u64,
    /// Stalls in the interval, by kind: memtable, L0 slowdown, L0 stop, pending slowdown,
    /// pending stop.
    pub stalls: [StallTotal; 5],
    /// The tuner's last overflow answered, or "".
    pub tuner: &'static str,
}

impl TimelineRow {
    /// The row of the interval that ends with `now`, which began with `before`.
    pub fn between(second: u64, before: &Stats, now: &Stats) -> TimelineRow {
        let kinds = |s: &Stats| {
            let t = &s.stalls;
            [t.memtable, t.l0_slowdown, t.l0_stop, t.pending_slowdown, t.pending_stop]
        };
        let (a, b) = (kinds(before), kinds(now));
        let stalls = std::array::from_fn(|i| StallTotal {
            count: b[i].count.saturating_sub(a[i].count),
            duration_us: b[i].duration_us.saturating_sub(a[i].duration_us),
        });
        TimelineRow {
            second,
            background_jobs: now.background_jobs,
            write_buffer_bytes: now.write_buffer_bytes,
            memtables: now.memtables,
            l0_files: now.files_per_level.first().copied().unwrap_or(0),
            pending_compaction_bytes: now.pending_compaction_bytes,
            stalls,
            tuner: now.tuner_last_overflow,
        }
    }

    /// The row's fields as CSV, in [`HEADER`]'s order, without a line end.
    pub fn csv_fields(&self) -> String {
        let mut f = vec![
            self.second.to_string(),
            self.background_jobs.to_string(),
            self.write_buffer_bytes.to_string(),
            self.memtables.to_string(),
            self.l0_files.to_string(),
            self.pending_compaction_bytes.to_string(),
        ];
        for s in &self.stalls {
            f.push(s.count.to_string());
            f.push(s.duration_us.to_string());
        }
        f.push(self.tuner.to_string());
        f.join(",")
    }

    /// Microseconds stalled in the interval, every kind together.
    pub fn stalled_us(&self) -> u64 {
        self.stalls.iter().map(|s| s.duration_us).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_hold_the_intervals_differences() {
        let mut before = Stats::default();
        before.stalls.memtable = StallTotal { count: 2, duration_us: 500 };
        let mut now = before.clone();
        now.stalls.memtable = StallTotal { count: 5, duration_us: 2_500 };
        now.stalls.l0_stop = StallTotal { count: 1, duration_us: 100 };
        now.files_per_level = vec![7, 1];
        now.tuner_last_overflow = "MMO";
        let row = TimelineRow::between(3, &before, &now);
        assert_eq!(row.stalls[0], StallTotal { count: 3, duration_us: 2_000 });
        assert_eq!(row.stalled_us(), 2_100);
        assert_eq!(row.l0_files, 7);
        let fields = row.csv_fields();
        assert!(fields.starts_with("3,") && fields.ends_with(",MMO"), "{fields}");
        assert_eq!(fields.split(',').count(), HEADER.split(',').count());
    }
}
