//! Uniform numbers: YCSB's `UniformLongGenerator`.

use rand::Rng;

/// YCSB's `UniformLongGenerator`: every number of `lb..=ub` equally likely.
///
/// YCSB takes `abs(nextLong()) % interval`, which leans (by under 2^-40 for any realistic
/// interval) toward small numbers; this draws without that lean.
///
/// ```
/// use rand::SeedableRng;
/// use ycsb::generator::UniformLongGenerator;
///
/// let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
/// let g = UniformLongGenerator::new(1, 100);
/// assert!((0..1000).map(|_| g.next_value(&mut rng)).all(|v| (1..=100).contains(&v)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UniformLongGenerator {
    lb: u64,
    ub: u64,
}

impl UniformLongGenerator {
    /// Numbers `lb..=ub`.
    ///
    /// # Panics
    /// When `lb > ub`.
    pub fn new(lb: u64, ub: u64) -> UniformLongGenerator {
        assert!(lb <= ub, "uniform range {lb}..={ub} is empty");
        UniformLongGenerator { lb, ub }
    }

    /// The next number.
    pub fn next_value<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        rng.gen_range(self.lb..=self.ub)
    }

    /// The middle of the range.
    pub fn mean(&self) -> f64 {
        (self.lb as f64 + self.ub as f64) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    #[test]
    fn covers_the_range_evenly() {
        let mut rng = SmallRng::seed_from_u64(9);
        let g = UniformLongGenerator::new(10, 19);
        let mut c = [0usize; 10];
        for _ in 0..100_000 {
            c[(g.next_value(&mut rng) - 10) as usize] += 1;
        }
        for (i, k) in c.iter().enumerate() {
            assert!((9_000..11_000).contains(k), "{i}: {k}");
        }
        assert_eq!(g.mean(), 14.5);
        assert_eq!(UniformLongGenerator::new(3, 3).next_value(&mut rng), 3);
    }
}
