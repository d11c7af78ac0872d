//! Keys and values shaped like db_bench's.
//!
//! A key is its number's low `min(key_size, 8)` bytes, big-endian, padded with `'0'` bytes to
//! `key_size`, so keys sort in the order of their numbers (fillseq writes in key order).
//!
//! A value compresses to about half its size, as db_bench's values with its default
//! `compression_ratio` of 0.5: its first half is fresh random bytes and its second half repeats
//! the first, so a compressor finds the second half as one long match and stores the random
//! half as literals.

use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};

/// Fraction of each value that is random bytes (db_bench's `--compression_ratio` default).
pub const COMPRESSION_RATIO: f64 = 0.5;

/// Writes the key numbered `n` into `out`, which must be the key's size.
pub fn format_key(n: u64, out: &mut [u8]) {
    let digits = out.len().min(8);
    let be = n.to_be_bytes();
    out[..digits].copy_from_slice(&be[8 - digits..]);
    out[digits..].fill(b'0');
}

/// The key numbered `n`, `key_size` bytes long.
pub fn key(n: u64, key_size: usize) -> Vec<u8> {
    let mut k = vec![0; key_size];
    format_key(n, &mut k);
    k
}

/// Makes values: each call fills one with new random bytes.
pub struct ValueGen {
    rng: SmallRng,
    buf: Vec<u8>,
}

impl ValueGen {
    /// A generator of `value_size`-byte values.
    pub fn new(value_size: usize, seed: u64) -> ValueGen {
        ValueGen { rng: SmallRng::seed_from_u64(seed), buf: vec![0; value_size] }
    }

    /// The next value.
    pub fn next_value(&mut self) -> &[u8] {
        let random = ((self.buf.len() as f64 * COMPRESSION_RATIO).ceil() as usize).max(1);
        let random = random.min(self.buf.len());
        self.rng.fill_bytes(&mut self.buf[..random]);
        for i in random..self.buf.len() {
            self.buf[i] = self.buf[i - random];
        }
        &self.buf
    }
}

/// The order in which a benchmark's thread visits key numbers below `num`.
pub enum KeyOrder {
    /// 0, 1, 2, ... (wrapping at `num`).
    Sequential { next: u64 },
    /// Uniformly random, with repeats.
    Random,
    /// Every number once, in a random order (then again, in the same order).
    Unique { order: Vec<u64>, next: usize },
}

/// Numbers of keys for one thread.
pub struct KeyGen {
    order: KeyOrder,
    num: u64,
    rng: SmallRng,
}

impl KeyGen {
    /// Keys below `num` in `order`, random choices drawn from `seed`.
    pub fn new(order: KeyOrder, num: u64, seed: u64) -> KeyGen {
        let mut rng = SmallRng::seed_from_u64(seed);
        let order = match order {
            KeyOrder::Unique { .. } => {
                let mut all: Vec<u64> = (0..num).collect();
                rand::seq::SliceRandom::shuffle(all.as_mut_slice(), &mut rng);
                KeyOrder::Unique { order: all, next: 0 }
            }
            o => o,
        };
        KeyGen { order, num: num.max(1), rng }
    }

    /// The next key number.
    pub fn next_number(&mut self) -> u64 {
        match &mut self.order {
            KeyOrder::Sequential { next } => {
                let n = *next % self.num;
                *next += 1;
                n
            }
            KeyOrder::Random => self.rng.gen_range(0..self.num),
            KeyOrder::Unique { order, next } => {
                let n = order[*next % order.len()];
                *next += 1;
                n
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_in_number_order() {
        for size in [4, 8, 16, 24] {
            let numbers = [0u64, 1, 2, 255, 256, 257, 65_535, 65_536, 1_000_000, 16_777_215];
            let keys: Vec<Vec<u8>> = numbers.iter().map(|&n| key(n, size)).collect();
            assert!(keys.iter().all(|k| k.len() == size));
            assert!(keys.windows(2).all(|w| w[0] < w[1]), "size {size}: {keys:?}");
        }
    }

    #[test]
    fn key_is_big_endian_number_then_zero_padding() {
        assert_eq!(key(0x0102, 16), b"\0\0\0\0\0\0\x01\x0200000000");
        assert_eq!(key(0x0102_0304, 4), b"\x01\x02\x03\x04");
    }

    #[test]
    fn values_are_half_random_half_repeat() {
        let mut g = ValueGen::new(100, 7);
        let a = g.next_value().to_vec();
        let b = g.next_value().to_vec();
        assert_eq!(a.len(), 100);
        assert_ne!(a, b, "each value is fresh");
        assert_eq!(a[..50], a[50..]);
        // An odd size still repeats what it can.
        let mut odd = ValueGen::new(7, 1);
        let v = odd.next_value();
        assert_eq!(v[..3], v[4..]);
    }

    #[test]
    fn values_compress_to_about_half() {
        let mut g = ValueGen::new(1000, 3);
        let v = g.next_value().to_vec();
        let packed = greedy_packed_size(&v);
        assert!((450..650).contains(&packed), "compressed to {packed} bytes");
    }

    /// An upper bound on what a compressor stores: the literal bytes not covered by the
    /// longest earlier match at each position, found greedily.
    fn greedy_packed_size(v: &[u8]) -> usize {
        let mut i = 0;
        let mut literals = 0;
        while i < v.len() {
            let best = (0..i)
                .map(|s| v[s..].iter().zip(&v[i..]).take_while(|(a, b)| a == b).count())
                .max()
                .unwrap_or(0);
            if best >= 4 {
                i += best;
                literals += 3;
            } else {
                i += 1;
                literals += 1;
            }
        }
        literals
    }

    #[test]
    fn unique_order_visits_every_number_once() {
        let mut g = KeyGen::new(KeyOrder::Unique { order: Vec::new(), next: 0 }, 1000, 9);
        let mut seen: Vec<u64> = (0..1000).map(|_| g.next_number()).collect();
        assert_ne!(seen, (0..1000).collect::<Vec<_>>(), "shuffled");
        seen.sort_unstable();
        assert_eq!(seen, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn sequential_and_random_stay_below_num() {
        let mut s = KeyGen::new(KeyOrder::Sequential { next: 0 }, 3, 0);
        assert_eq!((0..5).map(|_| s.next_number()).collect::<Vec<_>>(), [0, 1, 2, 0, 1]);
        let mut r = KeyGen::new(KeyOrder::Random, 10, 0);
        assert!((0..1000).all(|_| r.next_number() < 10));
    }
}
