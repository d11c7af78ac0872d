//! Latency histogram for `--histogram`, printed in db_bench's percentile block.
//!
//! Samples are nanoseconds. Below 64 ns each value has its own bucket; above, each power of
//! two is split into 32 buckets, so a bucket is at most 1/32 (about 3%) wide relative to its
//! values. Count, average, standard deviation, minimum and maximum are exact; percentiles are
//! interpolated linearly inside their bucket.

/// Values below this have a bucket each.
const EXACT_BELOW: u64 = 64;
/// Buckets per power of two above [`EXACT_BELOW`].
const SUB_BUCKETS: u64 = 32;
/// log2 of [`SUB_BUCKETS`].
const SUB_BUCKET_BITS: u32 = 5;
/// log2 of [`EXACT_BELOW`].
const EXACT_BITS: u32 = 6;
/// Buckets in all: the exact ones, then 32 for each power of two from 2^6 to 2^63.
const BUCKETS: usize = (EXACT_BELOW + (64 - EXACT_BITS as u64) * SUB_BUCKETS) as usize;

/// A histogram of durations in nanoseconds.
#[derive(Clone, Debug)]
pub struct Histogram {
    counts: Vec<u64>,
    count: u64,
    sum: f64,
    sum_squares: f64,
    min: u64,
    max: u64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram {
            counts: vec![0; BUCKETS],
            count: 0,
            sum: 0.0,
            sum_squares: 0.0,
            min: u64::MAX,
            max: 0,
        }
    }
}

fn bucket_of(v: u64) -> usize {
    if v < EXACT_BELOW {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros();
    let sub = (v >> (exp - SUB_BUCKET_BITS)) & (SUB_BUCKETS - 1);
    (EXACT_BELOW + u64::from(exp - EXACT_BITS) * SUB_BUCKETS + sub) as usize
}

/// The values bucket `i` holds: `[low, high)`.
fn bucket_bounds(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < EXACT_BELOW {
        return (i, i + 1);
    }
    let exp = (i - EXACT_BELOW) / SUB_BUCKETS + u64::from(EXACT_BITS);
    let sub = (i - EXACT_BELOW) % SUB_BUCKETS;
    let unit = 1u64 << (exp - u64::from(SUB_BUCKET_BITS));
    ((SUB_BUCKETS + sub) * unit, (SUB_BUCKETS + sub + 1).saturating_mul(unit))
}

impl Histogram {
    /// Adds one sample.
    pub fn record(&mut self, nanos: u64) {
        self.counts[bucket_of(nanos)] += 1;
        self.count += 1;
        let v = nanos as f64;
        self.sum += v;
        self.sum_squares += v * v;
        self.min = self.min.min(nanos);
        self.max = self.max.max(nanos);
    }

    /// Adds another histogram's samples.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.count += other.count;
        self.sum += other.sum;
        self.sum_squares += other.sum_squares;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// Mean, in nanoseconds.
    pub fn average(&self) -> f64 {
        if self.count == 0 { 0.0 } else { self.sum / self.count as f64 }
    }

    /// Population standard deviation, in nanoseconds.
    pub fn std_dev(&self) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let n = self.count as f64;
        ((self.sum_squares * n - self.sum * self.sum) / (n * n)).max(0.0).sqrt()
    }

    /// The value below which `p` percent of samples fall, in nanoseconds.
    pub fn percentile(&self, p: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let threshold = self.count as f64 * p / 100.0;
        let mut below = 0.0;
        for (i, &c) in self.counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            let c = c as f64;
            if below + c >= threshold {
                let (low, high) = bucket_bounds(i);
                let (low, high) = (low.max(self.min) as f64, high.min(self.max + 1) as f64);
                let within = ((threshold - below) / c).clamp(0.0, 1.0);
                return low + (high - low) * within;
            }
            below += c;
        }
        self.max as f64
    }

    /// db_bench's block: count, average, deviation, min, median, max and percentiles, all in
    /// microseconds.
    pub fn to_db_bench_string(&self) -> String {
        let us = |ns: f64| ns / 1000.0;
        let (min, max) = if self.count == 0 { (0, 0) } else { (self.min, self.max) };
        let p = |q: f64| us(self.percentile(q));
        format!(
            "Count: {} Average: {:.4}  StdDev: {:.2}\n\
             Min: {}  Median: {:.4}  Max: {}\n\
             Percentiles: P50: {:.2} P75: {:.2} P99: {:.2} P99.9: {:.2} P99.99: {:.2}\n\
             ------------------------------------------------------\n",
            self.count,
            us(self.average()),
            us(self.std_dev()),
            (min as f64 / 1000.0).round() as u64,
            p(50.0),
            (max as f64 / 1000.0).round() as u64,
            p(50.0),
            p(75.0),
            p(99.0),
            p(99.9),
            p(99.99),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order() {
        let mut last = 0;
        for v in (0..5000).chain([1 << 20, (1 << 40) + 12345, u64::MAX]) {
            let i = bucket_of(v);
            let (low, high) = bucket_bounds(i);
            assert!(low <= v && (v < high || high == u64::MAX), "{v} in bucket {i} [{low},{high})");
            if v < 5000 {
                assert!(i >= last);
                last = i;
            }
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn statistics_of_a_uniform_range() {
        let mut h = Histogram::default();
        for v in 1..=10_000u64 {
            h.record(v * 1000);
        }
        assert_eq!(h.count, 10_000);
        assert!((h.average() - 5_000_500.0).abs() < 1.0);
        assert!((h.std_dev() - 2_886_751.0).abs() < 10.0, "{}", h.std_dev());
        for (p, want) in [(50.0, 5.0e6), (99.0, 9.9e6), (99.99, 9.999e6)] {
            let got = h.percentile(p);
            assert!((got - want).abs() / want < 0.04, "P{p}: {got} vs {want}");
        }
        let text = h.to_db_bench_string();
        assert!(
            text.starts_with("Count: 10000 Average: 5000.5000  StdDev: 2886.75\nMin: 1  Median: ")
        );
        assert!(text.contains("  Max: 10000\nPercentiles: P50: "), "{text}");
    }

    #[test]
    fn merge_adds_samples() {
        let (mut a, mut b) = (Histogram::default(), Histogram::default());
        a.record(10);
        b.record(1_000_000);
        a.merge(&b);
        assert_eq!((a.count, a.min, a.max), (2, 10, 1_000_000));
        assert_eq!(Histogram::default().percentile(50.0), 0.0);
    }
}
