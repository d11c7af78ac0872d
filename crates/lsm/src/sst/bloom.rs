//! The bloom filter over an SST's user keys (one filter for the whole SST).
//!
//! ```text
//! offset  size  type   field
//! 0       N     bytes  the bit array, bit i in byte i / 8 at position i % 8; N >= 8
//! N       1     u8     probes per key (k), 1..=30
//! ```
//! The filter block's checksum is its SST trailer's.
//!
//! A key is hashed once into 64 bits with [`bloom_hash`]; the k probe positions come from that
//! one hash by double hashing (Kirsch and Mitzenmacher): `a = h`, `b = rotl(h, 32) | 1`,
//! probe i at `(a + i * b) mod bits`. The lookup path computes the hash once and hands it to
//! the filter of every level, so a point read hashes its key once whatever the number of SSTs.
//!
//! The hash is written here rather than taken from a crate because the filters on disk depend
//! on it: it must never change with a dependency upgrade. It reads the key 8 bytes at a time,
//! multiplies each word into the state with odd 64-bit constants and finishes with the
//! splitmix64 mixer, so every key bit affects every hash bit; that is all a bloom filter needs
//! (it need not resist crafted keys).

use crate::error::{Error, Result};

/// Bits per key unless the options say otherwise: about 1% false positives.
pub const BITS_PER_KEY_DEFAULT: u32 = 10;
/// The most probes per key a filter may use.
const PROBES_MAX: u8 = 30;
/// The smallest bit array, so that tiny filters are not all ones.
pub(crate) const FILTER_BYTES_MIN: usize = 8;

const MUL_A: u64 = 0x9E37_79B9_7F4A_7C15;
const MUL_B: u64 = 0xC2B2_AE3D_27D4_EB4F;

/// The 64-bit hash of a user key that every filter probes with.
pub fn bloom_hash(user_key: &[u8]) -> u64 {
    let mut h = (user_key.len() as u64).wrapping_mul(MUL_A) ^ MUL_B;
    let mut words = user_key.chunks_exact(8);
    for w in &mut words {
        let v = u64::from_le_bytes(w.try_into().expect("8 bytes"));
        h = (h ^ v.wrapping_mul(MUL_B)).rotate_left(31).wrapping_mul(MUL_A);
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        let v = u64::from_le_bytes(last);
        h = (h ^ v.wrapping_mul(MUL_B)).rotate_left(31).wrapping_mul(MUL_A);
    }
    // splitmix64's finaliser.
    h ^= h >> 30;
    h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94D0_49BB_1331_11EB);
    h ^ (h >> 31)
}

/// Probes per key for a bits-per-key budget: round(bits * ln 2), the count that minimises
/// false positives, within 1..=30.
pub fn probes_for(bits_per_key: u32) -> u8 {
    let k = (f64::from(bits_per_key) * std::f64::consts::LN_2).round();
    k.clamp(1.0, f64::from(PROBES_MAX)) as u8
}

/// Builds the filter block from the hashes of an SST's distinct user keys.
pub fn build_filter(hashes: &[u64], bits_per_key: u32) -> Vec<u8> {
    let bits_wanted = hashes.len().saturating_mul(bits_per_key as usize);
    let bytes = bits_wanted.div_ceil(8).max(FILTER_BYTES_MIN);
    let bits = (bytes * 8) as u64;
    let k = probes_for(bits_per_key);
    let mut out = vec![0u8; bytes + 1];
    for &h in hashes {
        for bit in probes(h, k, bits) {
            out[(bit / 8) as usize] |= 1 << (bit % 8);
        }
    }
    out[bytes] = k;
    out
}

fn probes(h: u64, k: u8, bits: u64) -> impl Iterator<Item = u64> {
    let delta = h.rotate_left(32) | 1;
    (0..u64::from(k)).map(move |i| h.wrapping_add(i.wrapping_mul(delta)) % bits)
}

/// A decoded filter.
#[derive(Debug)]
pub struct BloomFilter {
    bits: Vec<u8>,
    probes: u8,
}

impl BloomFilter {
    /// Wraps a filter block found at `offset`.
    ///
    /// # Errors
    /// [`Error::Corruption`] for a short block or an impossible probe count.
    pub fn new(mut block: Vec<u8>, offset: u64) -> Result<BloomFilter> {
        let bad = |why: &str| Error::corruption(format!("SST filter: {why}"), offset);
        if block.len() < FILTER_BYTES_MIN + 1 {
            return Err(bad("shorter than the smallest filter"));
        }
        let probes = block.pop().expect("non-empty");
        if probes == 0 || probes > PROBES_MAX {
            return Err(bad("probe count outside 1..=30"));
        }
        Ok(BloomFilter { bits: block, probes })
    }

    /// Bytes of the bit array.
    pub fn bytes(&self) -> usize {
        self.bits.len()
    }

    /// False only if no key with this [`bloom_hash`] was added.
    pub fn may_contain_hash(&self, h: u64) -> bool {
        let bits = (self.bits.len() * 8) as u64;
        probes(h, self.probes, bits)
            .all(|bit| self.bits[(bit / 8) as usize] & (1 << (bit % 8)) != 0)
    }

    /// [`BloomFilter::may_contain_hash`] of the key's hash.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.may_contain_hash(bloom_hash(user_key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter_of(keys: impl Iterator<Item = Vec<u8>>, bits: u32) -> BloomFilter {
        let hashes: Vec<u64> = keys.map(|k| bloom_hash(&k)).collect();
        BloomFilter::new(build_filter(&hashes, bits), 0).unwrap()
    }

    #[test]
    fn probes_follow_bits_per_key() {
        assert_eq!(probes_for(10), 7);
        assert_eq!(probes_for(1), 1);
        assert_eq!(probes_for(0), 1);
        assert_eq!(probes_for(100), 30);
    }

    #[test]
    fn no_false_negatives_and_about_one_percent_false_positives() {
        let n = 20_000u32;
        let f = filter_of((0..n).map(|i| format!("key{i:08}").into_bytes()), 10);
        for i in 0..n {
            assert!(f.may_contain(format!("key{i:08}").as_bytes()));
        }
        let trials = 100_000u32;
        let fp = (0..trials).filter(|i| f.may_contain(format!("other{i:08}").as_bytes())).count();
        let rate = fp as f64 / f64::from(trials);
        // The theory says 0.82% at 10 bits and 7 probes.
        assert!(rate < 0.0125, "false positive rate {rate}");
        assert!(rate > 0.002, "false positive rate {rate} too good to be a 10-bit filter");
    }

    #[test]
    fn hash_spreads_similar_keys() {
        // Keys differing in one bit must not share many hash bits.
        let a = bloom_hash(b"user0000000000001");
        let b = bloom_hash(b"user0000000000000");
        assert!((a ^ b).count_ones() > 16);
        assert_ne!(bloom_hash(b""), bloom_hash(b"\0"));
        assert_ne!(bloom_hash(b"\0"), bloom_hash(b"\0\0"));
    }

    #[test]
    fn damaged_filters_are_refused() {
        assert!(BloomFilter::new(vec![0; 8], 0).is_err());
        assert!(BloomFilter::new(vec![0; 9], 0).is_err());
        let mut b = vec![0; 9];
        b[8] = 31;
        assert!(BloomFilter::new(b, 0).is_err());
        let empty = BloomFilter::new(build_filter(&[], 10), 0).unwrap();
        assert!(!empty.may_contain(b"anything"));
    }
}
