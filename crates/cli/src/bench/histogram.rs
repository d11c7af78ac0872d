//! Latency histogram for `--histogram`: db_bench's percentile block and the tail line.
//!
//! Samples are nanoseconds, kept in [`ycsb::latency::Latency`] (an HdrHistogram at three
//! significant digits with the exact maximum), the recorder `shale ycsb` and `shale kvbench`
//! use too, so every suite's percentiles mean the same: nearest rank, to within 0.1%, never
//! above the exact maximum. Count, average, standard deviation, minimum and maximum are exact.

use ycsb::latency::{Latency, Tail};

/// A histogram of durations in nanoseconds.
#[derive(Clone, Debug)]
pub struct Histogram {
    latency: Latency,
    sum: f64,
    sum_squares: f64,
    min: u64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram { latency: Latency::new(), sum: 0.0, sum_squares: 0.0, min: u64::MAX }
    }
}

impl Histogram {
    /// Adds one sample.
    pub fn record(&mut self, nanos: u64) {
        self.latency.record_ns(nanos);
        let v = nanos as f64;
        self.sum += v;
        self.sum_squares += v * v;
        self.min = self.min.min(nanos);
    }

    /// Adds another histogram's samples.
    pub fn merge(&mut self, other: &Histogram) {
        self.latency.merge(&other.latency);
        self.sum += other.sum;
        self.sum_squares += other.sum_squares;
        self.min = self.min.min(other.min);
    }

    fn count(&self) -> u64 {
        self.latency.count()
    }

    /// Mean, in nanoseconds.
    pub fn average(&self) -> f64 {
        if self.count() == 0 { 0.0 } else { self.sum / self.count() as f64 }
    }

    /// Population standard deviation, in nanoseconds.
    pub fn std_dev(&self) -> f64 {
        if self.count() == 0 {
            return 0.0;
        }
        let n = self.count() as f64;
        ((self.sum_squares * n - self.sum * self.sum) / (n * n)).max(0.0).sqrt()
    }

    /// The nearest-rank percentile `hundredths / 100` percent (P99.9: 9990), in nanoseconds;
    /// 0 when empty.
    pub fn percentile(&self, hundredths: u64) -> u64 {
        self.latency.nearest_rank_ns(hundredths, 10_000).unwrap_or(0)
    }

    /// p50, p99, p99.9 and the exact max, for the tail line; `None` when empty.
    pub fn tail(&self) -> Option<Tail> {
        self.latency.tail()
    }

    /// db_bench's block: count, average, deviation, min, median, max and percentiles, all in
    /// microseconds.
    pub fn to_db_bench_string(&self) -> String {
        let us = |ns: u64| ns as f64 / 1000.0;
        let (min, max) = if self.count() == 0 { (0, 0) } else { (self.min, self.latency.max_ns()) };
        let p = |q: u64| us(self.percentile(q));
        format!(
            "Count: {} Average: {:.4}  StdDev: {:.2}\n\
             Min: {}  Median: {:.4}  Max: {}\n\
             Percentiles: P50: {:.2} P75: {:.2} P99: {:.2} P99.9: {:.2} P99.99: {:.2}\n\
             ------------------------------------------------------\n",
            self.count(),
            self.average() / 1000.0,
            self.std_dev() / 1000.0,
            (us(min)).round() as u64,
            p(5000),
            (us(max)).round() as u64,
            p(5000),
            p(7500),
            p(9900),
            p(9990),
            p(9999),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statistics_of_a_uniform_range() {
        let mut h = Histogram::default();
        for v in 1..=10_000u64 {
            h.record(v * 1000);
        }
        assert_eq!(h.count(), 10_000);
        assert!((h.average() - 5_000_500.0).abs() < 1.0);
        assert!((h.std_dev() - 2_886_751.0).abs() < 10.0, "{}", h.std_dev());
        // Nearest rank, at the top of a bucket at most 0.1% wide.
        for (p, want) in [(5000, 5_000_000), (9900, 9_900_000), (9999, 9_999_000)] {
            let got = h.percentile(p);
            assert!(got >= want && got - want <= want / 1000, "P{p}: {got} vs {want}");
        }
        let text = h.to_db_bench_string();
        assert!(
            text.starts_with("Count: 10000 Average: 5000.5000  StdDev: 2886.75\nMin: 1  Median: ")
        );
        assert!(text.contains("  Max: 10000\nPercentiles: P50: "), "{text}");
        let t = h.tail().unwrap();
        assert_eq!((t.ops, t.max_ns), (10_000, 10_000_000));
    }

    #[test]
    fn merge_adds_samples() {
        let (mut a, mut b) = (Histogram::default(), Histogram::default());
        a.record(10);
        b.record(1_000_000);
        a.merge(&b);
        assert_eq!((a.count(), a.min, a.latency.max_ns()), (2, 10, 1_000_000));
        assert_eq!(Histogram::default().percentile(5000), 0);
        assert_eq!(Histogram::default().tail(), None);
        assert!(Histogram::default().to_db_bench_string().starts_with("Count: 0 Average: 0.0000"));
    }
}
