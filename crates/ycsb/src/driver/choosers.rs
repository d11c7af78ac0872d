//! One client thread's choosers: which operation next, which record, how long a scan, which
//! field an update sets (YCSB's `CoreWorkload.init` generators, built per thread).

use std::sync::Arc;

use rand::Rng;

use crate::config::Config;
use crate::generator::{
    AcknowledgedCounterGenerator, ScrambledZipfianGenerator, SkewedLatestGenerator,
    UniformLongGenerator, ZipfianGenerator,
};
use crate::workload::{Operation, RequestDistribution, ScanLengthDistribution};

/// Picks operations by weight (YCSB's `DiscreteGenerator`).
#[derive(Clone, Debug)]
pub struct OperationChooser {
    /// Operations with their share of the weights, summing to 1.
    shares: Vec<(Operation, f64)>,
}

impl OperationChooser {
    pub fn new(config: &Config) -> OperationChooser {
        let weights = config.workload.weights();
        let total: f64 = weights.iter().map(|(_, w)| w).sum();
        OperationChooser { shares: weights.into_iter().map(|(op, w)| (op, w / total)).collect() }
    }

    pub fn next<R: Rng + ?Sized>(&self, rng: &mut R) -> Operation {
        let mut u: f64 = rng.r#gen();
        for &(op, share) in &self.shares {
            if u < share {
                return op;
            }
            u -= share;
        }
        // Only rounding gets here (YCSB would throw); the last operation is as good as any.
        self.shares.last().expect("a validated workload has an operation").0
    }
}

/// Picks the record an operation works on (YCSB's `keychooser` and `nextKeynum`).
#[derive(Clone, Debug)]
pub enum KeyChooser {
    Uniform(UniformLongGenerator),
    Zipfian(ScrambledZipfianGenerator),
    Latest(SkewedLatestGenerator),
}

impl KeyChooser {
    /// The chooser of `config`'s distribution; `latest` is the zipfian "latest" draws from,
    /// built once for all threads (its zeta sums a power per record).
    pub fn new(
        config: &Config,
        inserts: &Arc<AcknowledgedCounterGenerator>,
        latest: Option<&ZipfianGenerator>,
    ) -> KeyChooser {
        let last = config.record_count.saturating_sub(1);
        match config.workload.request_distribution {
            RequestDistribution::Uniform => KeyChooser::Uniform(UniformLongGenerator::new(0, last)),
            RequestDistribution::Zipfian => {
                KeyChooser::Zipfian(ScrambledZipfianGenerator::with_range(0, config.zipfian_max()))
            }
            RequestDistribution::Latest => {
                let zipfian = latest.cloned().unwrap_or_else(|| ZipfianGenerator::new(last));
                KeyChooser::Latest(SkewedLatestGenerator::with_zipfian(inserts.clone(), zipfian))
            }
        }
    }

    /// The next record number, never above the last acknowledged one: a draw past it is
    /// redrawn, as YCSB's `nextKeynum` does.
    pub fn next<R: Rng + ?Sized>(
        &mut self,
        inserts: &AcknowledgedCounterGenerator,
        rng: &mut R,
    ) -> u64 {
        loop {
            let k = match self {
                KeyChooser::Uniform(g) => g.next_value(rng),
                KeyChooser::Zipfian(g) => g.next_value(rng),
                KeyChooser::Latest(g) => g.next_value(rng),
            };
            if inserts.last_value().is_some_and(|last| k <= last) {
                return k;
            }
        }
    }
}

/// Picks scan lengths (YCSB's `scanlength`).
#[derive(Clone, Debug)]
pub enum ScanLengthChooser {
    Uniform(UniformLongGenerator),
    Zipfian(ZipfianGenerator),
}

impl ScanLengthChooser {
    pub fn new(config: &Config) -> ScanLengthChooser {
        let w = &config.workload;
        let (min, max) = (w.min_scan_length, w.max_scan_length.max(w.min_scan_length));
        match w.scan_length_distribution {
            ScanLengthDistribution::Uniform => {
                ScanLengthChooser::Uniform(UniformLongGenerator::new(min, max))
            }
            ScanLengthDistribution::Zipfian => {
                ScanLengthChooser::Zipfian(ZipfianGenerator::with_range(min, max))
            }
        }
    }

    pub fn next<R: Rng + ?Sized>(&mut self, rng: &mut R) -> usize {
        let n = match self {
            ScanLengthChooser::Uniform(g) => g.next_value(rng),
            ScanLengthChooser::Zipfian(g) => g.next_value(rng),
        };
        usize::try_from(n).unwrap_or(usize::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Preset;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    #[test]
    fn operations_follow_their_weights() {
        let c = OperationChooser::new(&Config::new(Preset::B));
        let mut rng = SmallRng::seed_from_u64(1);
        let reads = (0..100_000).filter(|_| c.next(&mut rng) == Operation::Read).count();
        assert!((94_000..96_000).contains(&reads), "{reads}");
    }

    #[test]
    fn keys_stay_below_the_acknowledged_inserts() {
        let mut config = Config::new(Preset::E);
        config.record_count = 100;
        config.operation_count = 10_000; // room for 1000 more records in the zipfian
        let inserts = Arc::new(AcknowledgedCounterGenerator::new(config.record_count));
        let mut k = KeyChooser::new(&config, &inserts, None);
        let mut rng = SmallRng::seed_from_u64(2);
        assert!((0..10_000).all(|_| k.next(&inserts, &mut rng) < 100));
        for _ in 0..50 {
            let v = inserts.next_value();
            inserts.acknowledge(v);
        }
        let draws: Vec<u64> = (0..10_000).map(|_| k.next(&inserts, &mut rng)).collect();
        assert!(draws.iter().all(|&d| d < 150));
        assert!(draws.iter().any(|&d| d >= 100));
    }

    #[test]
    fn scan_lengths_stay_in_range() {
        let mut config = Config::new(Preset::E);
        let mut rng = SmallRng::seed_from_u64(3);
        let mut s = ScanLengthChooser::new(&config);
        assert!((0..10_000).map(|_| s.next(&mut rng)).all(|n| (1..=100).contains(&n)));
        config.workload.scan_length_distribution = ScanLengthDistribution::Zipfian;
        let mut s = ScanLengthChooser::new(&config);
        let ones = (0..10_000).filter(|_| s.next(&mut rng) == 1).count();
        assert!(ones > 1000, "{ones}");
    }
}
