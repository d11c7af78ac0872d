//! Latency as the client sees it, from submission to completion, and the one line every suite
//! prints its tail in.
//!
//! `shale bench` (with `--histogram`), `shale ycsb` and `shale kvbench` record each operation's
//! latency in a [`Latency`] (an HdrHistogram of nanoseconds at three significant digits, with
//! the exact maximum beside it) and print, per benchmark or phase and per operation type, a
//! tail line:
//!
//! ```text
//! fillrandom   write latency micros : p50 3.100 p99 12.000 p99.9 40.200 max 812.377 ops 100000
//! ```
//!
//! `LABEL OP latency micros : p50 X p99 Y p99.9 Z max W ops N`, in microseconds with three
//! decimals. The percentiles are nearest-rank: p99 is the smallest recorded value (to the
//! histogram's resolution, 0.1%) that at least 99% of the operations do not exceed, so with one
//! operation every figure is that operation's latency. The maximum is exact, not a bucket's
//! bound, and no percentile exceeds it. The scripts' summaries parse this line with
//! [`TailLine::parse`] or its shell equivalent in `bench/lib/tail.sh`, which also turns
//! db_bench's and redis-benchmark's own percentile output into it.

use std::fmt::Write as _;
use std::time::Duration;

use hdrhistogram::Histogram;

/// Significant decimal digits of the histogram (YCSB's `Recorder(3)`): a recorded value is
/// known to within 0.1%.
const DIGITS: u8 = 3;

/// The percentiles of a tail line, as (numerator, denominator) of the fraction of operations,
/// so that the rank is computed in integers (`0.99 * 100` is not 99 in floating point).
const P50: (u64, u64) = (50, 100);
const P99: (u64, u64) = (99, 100);
const P999: (u64, u64) = (999, 1000);

/// Latencies of one kind of operation, in nanoseconds.
#[derive(Clone, Debug)]
pub struct Latency {
    hist: Histogram<u64>,
    max_ns: u64,
}

impl Default for Latency {
    fn default() -> Latency {
        Latency {
            hist: Histogram::new(DIGITS).expect("3 significant digits is a valid precision"),
            max_ns: 0,
        }
    }
}

impl Latency {
    /// No operations yet.
    pub fn new() -> Latency {
        Latency::default()
    }

    /// Counts one operation that took `ns` nanoseconds.
    pub fn record_ns(&mut self, ns: u64) {
        // An auto-resizing histogram grows to take any value up to 2^62 ns (146 years);
        // `saturating_record` would clamp to its current size instead of growing.
        if self.hist.record(ns).is_err() {
            self.hist.saturating_record(ns);
        }
        self.max_ns = self.max_ns.max(ns);
    }

    /// Counts one operation that took `latency`.
    pub fn record(&mut self, latency: Duration) {
        self.record_ns(u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Adds another recorder's operations (another thread's, another instance's).
    pub fn merge(&mut self, other: &Latency) {
        self.hist.add(&other.hist).expect("auto-resizing histograms add");
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    /// Operations recorded.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// Whether no operation was recorded.
    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }

    /// The exact largest latency, in nanoseconds (0 when empty).
    pub fn max_ns(&self) -> u64 {
        self.max_ns
    }

    /// The histogram, for the mean, the minimum and other percentiles.
    pub fn histogram(&self) -> &Histogram<u64> {
        &self.hist
    }

    /// The nearest-rank percentile `numerator / denominator` (for p99.9: 999 / 1000), in
    /// nanoseconds: the value of the operation of rank `ceil(count * fraction)` in increasing
    /// order, at the top of its histogram bucket but never above the exact maximum. `None`
    /// when empty.
    pub fn nearest_rank_ns(&self, numerator: u64, denominator: u64) -> Option<u64> {
        let n = self.hist.len();
        if n == 0 {
            return None;
        }
        let rank = (u128::from(n) * u128::from(numerator)).div_ceil(u128::from(denominator));
        let rank = u64::try_from(rank).unwrap_or(u64::MAX).clamp(1, n);
        let mut below = 0u64;
        for v in self.hist.iter_recorded() {
            below += v.count_since_last_iteration();
            if below >= rank {
                let top = self.hist.highest_equivalent(v.value_iterated_to());
                return Some(top.min(self.max_ns));
            }
        }
        Some(self.max_ns)
    }

    /// p50, p99, p99.9 and max, or `None` when no operation was recorded.
    pub fn tail(&self) -> Option<Tail> {
        let p = |(num, den): (u64, u64)| self.nearest_rank_ns(num, den);
        Some(Tail {
            ops: self.count(),
            p50_ns: p(P50)?,
            p99_ns: p(P99)?,
            p999_ns: p(P999)?,
            max_ns: self.max_ns,
        })
    }
}

/// The tail of one kind of operation, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tail {
    /// Operations recorded.
    pub ops: u64,
    /// Nearest-rank percentiles (see [`Latency::nearest_rank_ns`]).
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    /// The exact largest latency.
    pub max_ns: u64,
}

impl Tail {
    /// The tail line (module comment) for operations `op` of `label`, without a newline. The
    /// label is padded to 12 columns, as db_bench's result lines.
    pub fn line(&self, label: &str, op: &str) -> String {
        let us = |ns: u64| ns as f64 / 1000.0;
        let mut out = String::new();
        let _ = write!(
            out,
            "{label:<12} {op} latency micros : p50 {:.3} p99 {:.3} p99.9 {:.3} max {:.3} ops {}",
            us(self.p50_ns),
            us(self.p99_ns),
            us(self.p999_ns),
            us(self.max_ns),
            self.ops
        );
        out
    }
}

/// A parsed tail line, in microseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct TailLine {
    /// The benchmark, workload or phase.
    pub label: String,
    /// The operation type (`write`, `read`, `READ`, `get`, ...).
    pub op: String,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    pub ops: u64,
}

impl TailLine {
    /// Parses `LABEL OP latency micros : p50 X p99 Y p99.9 Z max W ops N`; `None` for any other
    /// line.
    pub fn parse(line: &str) -> Option<TailLine> {
        let (left, right) = line.split_once(" : ")?;
        let [label, op, "latency", "micros"] = left.split_whitespace().collect::<Vec<_>>()[..]
        else {
            return None;
        };
        let words: Vec<&str> = right.split_whitespace().collect();
        let ["p50", p50, "p99", p99, "p99.9", p999, "max", max, "ops", ops] = words[..] else {
            return None;
        };
        Some(TailLine {
            label: label.to_string(),
            op: op.to_string(),
            p50_us: p50.parse().ok()?,
            p99_us: p99.parse().ok()?,
            p999_us: p999.parse().ok()?,
            max_us: max.parse().ok()?,
            ops: ops.parse().ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(samples: impl IntoIterator<Item = u64>) -> Latency {
        let mut l = Latency::new();
        for s in samples {
            l.record_ns(s);
        }
        l
    }

    #[test]
    fn empty_has_no_tail() {
        let l = Latency::new();
        assert!(l.is_empty());
        assert_eq!(l.tail(), None);
        assert_eq!(l.nearest_rank_ns(1, 2), None);
    }

    #[test]
    fn one_sample_is_every_figure() {
        // 1,234,567 ns lies in a bucket wider than 1 ns: the percentiles are clamped to the
        // exact maximum, so they are the sample itself.
        let t = of([1_234_567]).tail().unwrap();
        assert_eq!(
            t,
            Tail {
                ops: 1,
                p50_ns: 1_234_567,
                p99_ns: 1_234_567,
                p999_ns: 1_234_567,
                max_ns: 1_234_567
            }
        );
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        // Values below 2048 ns have buckets of their own at three digits: exact ranks.
        let t = of(1..=1000).tail().unwrap();
        assert_eq!((t.ops, t.p50_ns, t.p99_ns, t.p999_ns, t.max_ns), (1000, 500, 990, 999, 1000));
        // 100 samples: rank ceil(99) = 99 and ceil(99.9) = 100, not 100 from 0.99 * 100 in
        // floating point.
        let t = of((1..=100).rev()).tail().unwrap();
        assert_eq!((t.p50_ns, t.p99_ns, t.p999_ns, t.max_ns), (50, 99, 100, 100));
        // One slow operation in a thousand is the p99.9, not beyond it.
        let t = of((0..999).map(|_| 10).chain([5000])).tail().unwrap();
        assert_eq!((t.p99_ns, t.p999_ns), (10, 10));
        let t = of((0..998).map(|_| 10).chain([5000, 5000])).tail().unwrap();
        assert_eq!((t.p99_ns, t.p999_ns), (10, 5000));
    }

    #[test]
    fn max_is_exact_and_bounds_the_percentiles() {
        // 10,000,001 ns falls in a bucket whose top is above it.
        let l = of([3, 10_000_001]);
        assert!(l.histogram().highest_equivalent(10_000_001) > 10_000_001);
        let t = l.tail().unwrap();
        assert_eq!((t.p999_ns, t.max_ns), (10_000_001, 10_000_001));
        // Large values stay within the histogram's 0.1%.
        let t = of((1..=1000).map(|us| us * 1000)).tail().unwrap();
        assert_eq!(t.max_ns, 1_000_000);
        let close = |got: u64, want: u64| (got as f64 - want as f64).abs() <= want as f64 / 1000.0;
        assert!(close(t.p50_ns, 500_000) && close(t.p99_ns, 990_000), "{t:?}");
        assert!(t.p50_ns >= 500_000 && t.p99_ns >= 990_000, "nearest rank rounds up: {t:?}");
    }

    #[test]
    fn merge_keeps_the_max_and_counts() {
        let mut a = of([5, 7]);
        a.merge(&of([1_000_003]));
        let t = a.tail().unwrap();
        assert_eq!((t.ops, t.p50_ns, t.max_ns), (3, 7, 1_000_003));
    }

    #[test]
    fn line_parses_back() {
        let t = Tail { ops: 42, p50_ns: 3100, p99_ns: 12_000, p999_ns: 40_200, max_ns: 812_377 };
        let line = t.line("fillrandom", "write");
        assert_eq!(
            line,
            "fillrandom   write latency micros : p50 3.100 p99 12.000 p99.9 40.200 max 812.377 ops 42"
        );
        let p = TailLine::parse(&line).unwrap();
        assert_eq!(
            p,
            TailLine {
                label: "fillrandom".into(),
                op: "write".into(),
                p50_us: 3.1,
                p99_us: 12.0,
                p999_us: 40.2,
                max_us: 812.377,
                ops: 42,
            }
        );
        assert_eq!(TailLine::parse("fillrandom   :       4.123 micros/op 242541 ops/sec"), None);
        assert_eq!(TailLine::parse("x write latency micros : p50 1 p99 2"), None);
    }
}
