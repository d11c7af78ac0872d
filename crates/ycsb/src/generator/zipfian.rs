//! Zipfian numbers: YCSB's `ZipfianGenerator` (Gray et al., "Quickly Generating
//! Billion-Record Synthetic Databases", SIGMOD 1994) and `ScrambledZipfianGenerator`.
//!
//! Item `i` (0-based) of `n` is drawn with probability `(1 / (i + 1)^theta) / zeta(n)`, where
//! `zeta(n) = sum over k in 1..=n of 1 / k^theta`. Gray's method needs `zeta(n)` once (a sum of
//! `n` powers), then each draw costs one uniform number and one `powf`.

use rand::Rng;

use crate::key::fnvhash64;

/// YCSB's zipfian constant (`ZipfianGenerator.ZIPFIAN_CONSTANT`).
pub const ZIPFIAN_CONSTANT: f64 = 0.99;

/// The item space the scrambled generator draws from before hashing
/// (`ScrambledZipfianGenerator.ITEM_COUNT` as released in YCSB 0.17: ten billion).
pub const SCRAMBLED_ITEM_COUNT: u64 = 10_000_000_000;

/// `zeta(SCRAMBLED_ITEM_COUNT, 0.99)`, precomputed as YCSB does
/// (`ScrambledZipfianGenerator.ZETAN`): summing ten billion powers at start-up would take a
/// minute.
pub const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// YCSB's `ZipfianGenerator`: items `min..=max`, `min` the most popular, then `min + 1`, ...
///
/// The number of items may grow between draws ([`next_long`](Self::next_long) with a larger
/// count): zeta is then extended with the new terms only, as YCSB does when "latest" follows
/// a growing number of inserted records.
///
/// ```
/// use rand::SeedableRng;
/// use ycsb::generator::ZipfianGenerator;
///
/// let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
/// let mut z = ZipfianGenerator::new(1000);
/// let zeros = (0..10_000).filter(|_| z.next_value(&mut rng) == 0).count();
/// assert!(zeros > 1000); // item 0 alone draws about 1 in 7.5
/// ```
#[derive(Clone, Debug)]
pub struct ZipfianGenerator {
    /// Items at construction (YCSB keeps using this one in `eta`, even after growth).
    items: u64,
    /// The smallest (and most popular) item.
    base: u64,
    theta: f64,
    zeta2theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    /// The item count `zetan` was summed for.
    count_for_zeta: u64,
}

impl ZipfianGenerator {
    /// Items `0..items` with the constant 0.99. `items` may be 0, as YCSB's: then every
    /// draw is 0.
    pub fn new(items: u64) -> ZipfianGenerator {
        ZipfianGenerator::with_zetan(
            0,
            items,
            ZIPFIAN_CONSTANT,
            zeta(0, items, ZIPFIAN_CONSTANT, 0.0),
        )
    }

    /// Items `min..=max` with the constant 0.99.
    pub fn with_range(min: u64, max: u64) -> ZipfianGenerator {
        ZipfianGenerator::with_constant(min, max, ZIPFIAN_CONSTANT)
    }

    /// Items `min..=max` with another constant (`theta`, 0 < theta < 1).
    pub fn with_constant(min: u64, max: u64, theta: f64) -> ZipfianGenerator {
        let items = max - min + 1;
        ZipfianGenerator::with_zetan(min, items, theta, zeta(0, items, theta, 0.0))
    }

    /// `items` items from `base` on with a precomputed `zetan = zeta(items, theta)`.
    pub fn with_zetan(base: u64, items: u64, theta: f64, zetan: f64) -> ZipfianGenerator {
        let zeta2theta = zeta(0, 2, theta, 0.0);
        ZipfianGenerator {
            items,
            base,
            theta,
            zeta2theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: eta(items, theta, zeta2theta, zetan),
            count_for_zeta: items,
        }
    }

    /// The next item, from all items given at construction.
    pub fn next_value<R: Rng + ?Sized>(&mut self, rng: &mut R) -> u64 {
        self.next_long(self.items, rng)
    }

    /// The next item among the first `item_count` items (YCSB's `nextLong(itemcount)`).
    ///
    /// A count above the last one extends zeta incrementally. A smaller count keeps zeta
    /// as it is, as YCSB does by default (`allowitemcountdecrease = false`): another thread
    /// may simply have seen an older count.
    pub fn next_long<R: Rng + ?Sized>(&mut self, item_count: u64, rng: &mut R) -> u64 {
        if item_count > self.count_for_zeta {
            self.zetan = zeta(self.count_for_zeta, item_count, self.theta, self.zetan);
            self.count_for_zeta = item_count;
            // YCSB recomputes eta with the item count of the constructor, not the new one;
            // kept so that the distribution is the same as YCSB's.
            self.eta = eta(self.items, self.theta, self.zeta2theta, self.zetan);
        }
        let u: f64 = rng.r#gen();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return self.base + 1;
        }
        let spread = (self.eta * u - self.eta + 1.0).powf(self.alpha);
        // As Java's `(long)` cast: truncation toward zero, saturating.
        self.base + (item_count as f64 * spread) as u64
    }

    /// `zeta(n)` for the items drawn from so far.
    pub fn zetan(&self) -> f64 {
        self.zetan
    }
}

/// `initial_sum + sum over i in st..n of 1 / (i + 1)^theta` (YCSB's `zetastatic`): zeta of `n`
/// items, extended from zeta of `st` items.
pub fn zeta(st: u64, n: u64, theta: f64, initial_sum: f64) -> f64 {
    (st..n).fold(initial_sum, |sum, i| sum + 1.0 / ((i + 1) as f64).powf(theta))
}

/// Gray et al.'s `eta`.
fn eta(items: u64, theta: f64, zeta2theta: f64, zetan: f64) -> f64 {
    (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2theta / zetan)
}

/// YCSB's `ScrambledZipfianGenerator`: zipfian popularity, but the popular items scattered
/// over `min..=max` instead of clustered at `min`.
///
/// It draws from a zipfian over [`SCRAMBLED_ITEM_COUNT`] items (with the precomputed
/// [`SCRAMBLED_ZETAN`]), hashes the draw with [`fnvhash64`] and takes it modulo the item count.
/// Because the zipfian's item space is fixed, the item count can be set larger than the
/// records that exist (YCSB adds room for the run's expected inserts) without changing which
/// items are popular. The skew is therefore that of ten billion items folded onto `n`: the
/// most popular item draws about 1 in 26.5 whatever `n` is.
///
/// ```
/// use rand::SeedableRng;
/// use ycsb::generator::ScrambledZipfianGenerator;
///
/// let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
/// let mut z = ScrambledZipfianGenerator::new(1000);
/// assert!((0..10_000).all(|_| z.next_value(&mut rng) < 1000));
/// ```
#[derive(Clone, Debug)]
pub struct ScrambledZipfianGenerator {
    zipfian: ZipfianGenerator,
    min: u64,
    item_count: u64,
}

impl ScrambledZipfianGenerator {
    /// Items `0..items` (`items` at least 1).
    pub fn new(items: u64) -> ScrambledZipfianGenerator {
        assert!(items > 0, "a scrambled zipfian needs at least one item");
        ScrambledZipfianGenerator::with_range(0, items - 1)
    }

    /// Items `min..=max`.
    pub fn with_range(min: u64, max: u64) -> ScrambledZipfianGenerator {
        assert!(min <= max, "scrambled zipfian range {min}..={max} is empty");
        // YCSB builds `new ZipfianGenerator(0, ITEM_COUNT, ...)`: ITEM_COUNT + 1 items.
        let zipfian = ZipfianGenerator::with_zetan(
            0,
            SCRAMBLED_ITEM_COUNT + 1,
            ZIPFIAN_CONSTANT,
            SCRAMBLED_ZETAN,
        );
        ScrambledZipfianGenerator { zipfian, min, item_count: max - min + 1 }
    }

    /// The next item.
    pub fn next_value<R: Rng + ?Sized>(&mut self, rng: &mut R) -> u64 {
        let drawn = self.zipfian.next_value(rng);
        // fnvhash64 is non-negative except for one input in 2^64, where Java's `%` would go
        // negative; as u64 it stays in range.
        self.min + (fnvhash64(drawn as i64) as u64) % self.item_count
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    const DRAWS: usize = 200_000;

    fn counts(items: usize, mut draw: impl FnMut() -> u64) -> Vec<usize> {
        let mut c = vec![0; items];
        for _ in 0..DRAWS {
            let v = draw() as usize;
            assert!(v < items, "{v} out of 0..{items}");
            c[v] += 1;
        }
        c
    }

    #[test]
    fn zeta_sums_powers_and_extends() {
        assert!((zeta(0, 2, 0.99, 0.0) - (1.0 + 0.5f64.powf(0.99))).abs() < 1e-12);
        let whole = zeta(0, 1000, 0.99, 0.0);
        let extended = zeta(400, 1000, 0.99, zeta(0, 400, 0.99, 0.0));
        assert!((whole - extended).abs() < 1e-9);
    }

    #[test]
    fn zipfian_head_frequencies_match_theory() {
        let n = 1000u64;
        let mut rng = SmallRng::seed_from_u64(1);
        let mut z = ZipfianGenerator::new(n);
        let c = counts(n as usize, || z.next_value(&mut rng));
        let zetan = zeta(0, n, ZIPFIAN_CONSTANT, 0.0);
        // Gray's method draws items 0 and 1 exactly; later items come from a continuous
        // approximation (item 2 draws about 17% too often, in YCSB too).
        for (item, count) in c.iter().enumerate().take(2) {
            let expected = DRAWS as f64 / ((item + 1) as f64).powf(ZIPFIAN_CONSTANT) / zetan;
            let got = *count as f64;
            assert!((got - expected).abs() / expected < 0.05, "item {item}: {got} vs {expected}");
        }
        // Popularity falls with the item number.
        assert!(c[0] > c[1] && c[1] > c[2] && c[2] > c[50] && c[10] > c[900]);
    }

    #[test]
    fn zipfian_range_starts_at_min() {
        let mut rng = SmallRng::seed_from_u64(2);
        let mut z = ZipfianGenerator::with_range(100, 199);
        let mut at_min = 0;
        for _ in 0..10_000 {
            let v = z.next_value(&mut rng);
            assert!((100..=199).contains(&v), "{v}");
            at_min += usize::from(v == 100);
        }
        assert!(at_min > 1000, "{at_min}");
    }

    #[test]
    fn zipfian_grows_incrementally() {
        let mut rng = SmallRng::seed_from_u64(3);
        let mut z = ZipfianGenerator::new(100);
        let before = z.zetan();
        let v = z.next_long(200, &mut rng);
        assert!(v < 200);
        assert!((z.zetan() - zeta(0, 200, ZIPFIAN_CONSTANT, 0.0)).abs() < 1e-9);
        assert!(z.zetan() > before);
        // A smaller count does not shrink zeta (YCSB's default).
        z.next_long(150, &mut rng);
        assert!((z.zetan() - zeta(0, 200, ZIPFIAN_CONSTANT, 0.0)).abs() < 1e-9);
    }

    #[test]
    fn zipfian_with_no_items_draws_zero() {
        let mut rng = SmallRng::seed_from_u64(4);
        let mut z = ZipfianGenerator::new(0);
        assert!((0..100).all(|_| z.next_value(&mut rng) == 0));
    }

    #[test]
    fn scrambled_zipfian_precomputed_zeta_is_ycsbs() {
        // The first billion terms dominate the ten billion; checking the tail formula instead
        // of summing: zeta(n) ~ zeta(m) + integral of x^-theta from m to n.
        let m = 1_000_000u64;
        let head = zeta(0, m, ZIPFIAN_CONSTANT, 0.0);
        let a = 1.0 - ZIPFIAN_CONSTANT;
        let tail = ((SCRAMBLED_ITEM_COUNT as f64 + 0.5).powf(a) - (m as f64 + 0.5).powf(a)) / a;
        assert!((head + tail - SCRAMBLED_ZETAN).abs() < 1e-3, "{}", head + tail);
    }

    #[test]
    fn scrambled_zipfian_stays_in_range_and_is_spread() {
        let n = 1000usize;
        let mut rng = SmallRng::seed_from_u64(5);
        let mut z = ScrambledZipfianGenerator::new(n as u64);
        let c = counts(n, || z.next_value(&mut rng));
        // Skewed: the hottest item draws about 1 in 26.5 (item 0 of the ten billion).
        let top = *c.iter().max().unwrap() as f64 / DRAWS as f64;
        assert!((top - 1.0 / SCRAMBLED_ZETAN).abs() < 0.01, "{top}");
        // ...but the hot items are scattered, not the first ones.
        let mut by_heat: Vec<usize> = (0..n).collect();
        by_heat.sort_by_key(|&i| std::cmp::Reverse(c[i]));
        let hottest = &by_heat[..10];
        assert!(hottest.iter().filter(|&&i| i < 100).count() < 5, "{hottest:?}");
        assert!(hottest.iter().any(|&i| i >= n / 2), "{hottest:?}");
        // And nearly every item is drawn at least once.
        assert!(c.iter().filter(|&&k| k > 0).count() > n * 9 / 10);
    }

    #[test]
    fn scrambled_zipfian_range_is_offset() {
        let mut rng = SmallRng::seed_from_u64(6);
        let mut z = ScrambledZipfianGenerator::with_range(500, 509);
        for _ in 0..1000 {
            assert!((500..=509).contains(&z.next_value(&mut rng)));
        }
    }
}
