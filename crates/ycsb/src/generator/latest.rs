//! "Latest": YCSB's `SkewedLatestGenerator`, zipfian popularity counted back from the newest
//! acknowledged record.

use std::sync::Arc;

use rand::Rng;

use crate::generator::{AcknowledgedCounterGenerator, ZipfianGenerator};

/// YCSB's `SkewedLatestGenerator`: `last - z`, where `last` is the basis counter's last
/// acknowledged value and `z` a zipfian draw over `last` items, so the newest records are the
/// most popular and popularity follows inserts as they are acknowledged.
///
/// As YCSB's, it never draws the oldest record (`z` is below `last`), and its zipfian's zeta
/// grows incrementally with the counter.
///
/// ```
/// use std::sync::Arc;
/// use rand::SeedableRng;
/// use ycsb::generator::{AcknowledgedCounterGenerator, SkewedLatestGenerator};
///
/// let basis = Arc::new(AcknowledgedCounterGenerator::new(1000));
/// let mut latest = SkewedLatestGenerator::new(basis.clone());
/// let mut rng = rand::rngs::SmallRng::seed_from_u64(3);
/// let recent = (0..1000).filter(|_| latest.next_value(&mut rng) >= 900).count();
/// assert!(recent > 500);
/// ```
#[derive(Clone, Debug)]
pub struct SkewedLatestGenerator {
    basis: Arc<AcknowledgedCounterGenerator>,
    zipfian: ZipfianGenerator,
}

impl SkewedLatestGenerator {
    /// Follows `basis`; sums zeta over its current `last_value` items (one `powf` per record:
    /// build one with [`with_zipfian`](Self::with_zipfian) per thread from a shared one).
    pub fn new(basis: Arc<AcknowledgedCounterGenerator>) -> SkewedLatestGenerator {
        let zipfian = ZipfianGenerator::new(basis.last_value().unwrap_or(0));
        SkewedLatestGenerator { basis, zipfian }
    }

    /// Follows `basis` with a zipfian already built for it (cloned from another thread's).
    pub fn with_zipfian(
        basis: Arc<AcknowledgedCounterGenerator>,
        zipfian: ZipfianGenerator,
    ) -> SkewedLatestGenerator {
        SkewedLatestGenerator { basis, zipfian }
    }

    /// The zipfian it draws distances from.
    pub fn zipfian(&self) -> &ZipfianGenerator {
        &self.zipfian
    }

    /// The next record number; 0 while the basis has acknowledged nothing.
    pub fn next_value<R: Rng + ?Sized>(&mut self, rng: &mut R) -> u64 {
        let max = self.basis.last_value().unwrap_or(0);
        max.saturating_sub(self.zipfian.next_long(max, rng))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    #[test]
    fn favours_the_newest_and_follows_inserts() {
        let basis = Arc::new(AcknowledgedCounterGenerator::new(1000));
        let mut g = SkewedLatestGenerator::new(basis.clone());
        let mut rng = SmallRng::seed_from_u64(11);
        let draws: Vec<u64> = (0..20_000).map(|_| g.next_value(&mut rng)).collect();
        assert!(draws.iter().all(|&v| (1..=999).contains(&v)));
        let newest = draws.iter().filter(|&&v| v == 999).count() as f64 / 20_000.0;
        let zeta = crate::generator::zeta(0, 999, 0.99, 0.0);
        assert!((newest - 1.0 / zeta).abs() < 0.02, "{newest} vs {}", 1.0 / zeta);
        let last_tenth = draws.iter().filter(|&&v| v >= 900).count();
        let first_tenth = draws.iter().filter(|&&v| v < 100).count();
        assert!(last_tenth > 10 * first_tenth, "{last_tenth} vs {first_tenth}");

        // Acknowledge 100 inserts: the newest of them become the most popular.
        for _ in 0..100 {
            let v = basis.next_value();
            basis.acknowledge(v);
        }
        assert_eq!(basis.last_value(), Some(1099));
        let after: Vec<u64> = (0..20_000).map(|_| g.next_value(&mut rng)).collect();
        assert!(after.iter().all(|&v| v <= 1099));
        assert!(after.iter().filter(|&&v| v >= 1050).count() > after.len() / 2);
    }

    #[test]
    fn never_passes_unacknowledged_inserts() {
        let basis = Arc::new(AcknowledgedCounterGenerator::new(10));
        let mut g = SkewedLatestGenerator::new(basis.clone());
        let mut rng = SmallRng::seed_from_u64(12);
        let pending = basis.next_value();
        assert!((0..1000).all(|_| g.next_value(&mut rng) < pending));
    }
}
