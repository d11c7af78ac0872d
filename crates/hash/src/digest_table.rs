//! The index's main table: an open-addressing hash table of (digest, packed location) pairs,
//! 16 bytes a slot and nothing else, kept between 70% and 85% full so that it costs 19 to
//! 23 bytes a key (issue #11's target for the index held in memory: at most 24).
//!
//! Why not a general-purpose map: hashbrown's `u64 -> u64` map costs 16 bytes a slot plus a
//! control byte, at a load between 7/16 and 7/8 (its capacity doubles), so 19 to 39 bytes a
//! key, 29 on average. Here the capacity grows by a fifth at a time and any capacity works
//! (a slot is picked by multiply-shift range reduction, not by masking), so the load never
//! falls far; and the empty mark is a location of 0, which no record has (a location spans
//! at least one page), so no control bytes are needed.
//!
//! Linear probing; deletion shifts the entries after the removed one back (no tombstones, so
//! lookups never slow down with deletes). Digests are mixed before reduction: their top 16
//! bits are key bytes (the iterator bucket), not random.

/// The empty mark in a slot's location.
const EMPTY: u64 = 0;
/// Most entries per slot before the table grows.
const LOAD_MAX: f64 = 0.85;
/// Growth factor: the load after growing is `LOAD_MAX / GROWTH`, about 0.71.
const GROWTH: f64 = 1.2;
/// Smallest capacity.
const CAPACITY_MIN: usize = 16;

/// An open-addressing table from a digest (any `u64`) to a location (any `u64` but 0).
#[derive(Debug, Default)]
pub struct DigestTable {
    slots: Vec<[u64; 2]>,
    len: usize,
}

impl DigestTable {
    /// Entries held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Bytes its slots take.
    pub fn memory_bytes(&self) -> usize {
        self.slots.len() * std::mem::size_of::<[u64; 2]>()
    }

    fn home(&self, digest: u64) -> usize {
        let mixed = digest.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (digest >> 29);
        ((u128::from(mixed) * self.slots.len() as u128) >> 64) as usize
    }

    /// The slot holding `digest`, or the empty slot where it would go.
    fn find(&self, digest: u64) -> (usize, bool) {
        let cap = self.slots.len();
        let mut i = self.home(digest);
        loop {
            let [d, loc] = self.slots[i];
            if loc == EMPTY {
                return (i, false);
            }
            if d == digest {
                return (i, true);
            }
            i += 1;
            if i == cap {
                i = 0;
            }
        }
    }

    /// The location of `digest`.
    pub fn get(&self, digest: u64) -> Option<u64> {
        if self.len == 0 {
            return None;
        }
        match self.find(digest) {
            (i, true) => Some(self.slots[i][1]),
            _ => None,
        }
    }

    /// The location of `digest`, to change in place.
    pub fn get_mut(&mut self, digest: u64) -> Option<&mut u64> {
        if self.len == 0 {
            return None;
        }
        match self.find(digest) {
            (i, true) => Some(&mut self.slots[i][1]),
            _ => None,
        }
    }

    /// Sets `digest`'s location; returns the one it replaces.
    ///
    /// # Panics
    /// If `loc` is 0, the empty mark.
    pub fn insert(&mut self, digest: u64, loc: u64) -> Option<u64> {
        assert_ne!(loc, EMPTY, "a location of 0 is the empty mark");
        if (self.len + 1) as f64 > self.slots.len() as f64 * LOAD_MAX {
            self.grow(self.len + 1);
        }
        let (i, found) = self.find(digest);
        if found {
            return Some(std::mem::replace(&mut self.slots[i][1], loc));
        }
        self.slots[i] = [digest, loc];
        self.len += 1;
        None
    }

    /// Removes `digest`; returns its location.
    pub fn remove(&mut self, digest: u64) -> Option<u64> {
        if self.len == 0 {
            return None;
        }
        let (mut hole, found) = self.find(digest);
        if !found {
            return None;
        }
        let removed = self.slots[hole][1];
        let cap = self.slots.len();
        // Backward shift: move each following entry into the hole unless its home lies
        // cyclically in (hole, j], where moving it would put it before its home.
        let mut j = hole;
        loop {
            j = if j + 1 == cap { 0 } else { j + 1 };
            let [d, loc] = self.slots[j];
            if loc == EMPTY {
                break;
            }
            let h = self.home(d);
            let stays = if hole <= j { hole < h && h <= j } else { hole < h || h <= j };
            if !stays {
                self.slots[hole] = self.slots[j];
                hole = j;
            }
        }
        self.slots[hole] = [0, EMPTY];
        self.len -= 1;
        Some(removed)
    }

    /// Every (digest, location) pair, in no order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.slots.iter().filter(|s| s[1] != EMPTY).map(|s| (s[0], s[1]))
    }

    /// Room for `n` entries in all without growing.
    pub fn reserve(&mut self, n: usize) {
        if n as f64 > self.slots.len() as f64 * LOAD_MAX {
            self.grow(n);
        }
    }

    /// Rebuilds the table with room for at least `n` entries at most `LOAD_MAX` full.
    fn grow(&mut self, n: usize) {
        let by_growth = (self.slots.len() as f64 * GROWTH).ceil() as usize;
        let for_n = (n as f64 / LOAD_MAX).ceil() as usize + 1;
        let cap = by_growth.max(for_n).max(CAPACITY_MIN);
        let old = std::mem::replace(&mut self.slots, vec![[0, EMPTY]; cap]);
        self.len = 0;
        for [d, loc] in old {
            if loc != EMPTY {
                let (i, _) = self.find(d);
                self.slots[i] = [d, loc];
                self.len += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A tiny generator, so the test needs no dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn random_operations_match_a_hash_map() {
        for seed in 1..6u64 {
            let mut rng = Rng(seed * 0x9E37_79B9);
            let mut t = DigestTable::default();
            let mut m: HashMap<u64, u64> = HashMap::new();
            // Few distinct digests, many sharing their top bits (as iterator buckets do),
            // so probe runs are long and deletions shift across them and the wrap.
            for step in 0..60_000u64 {
                let d = (rng.next() % 3000) | ((rng.next() % 3) << 48);
                match rng.next() % 10 {
                    0..=5 => assert_eq!(t.insert(d, step + 1), m.insert(d, step + 1)),
                    6..=8 => assert_eq!(t.remove(d), m.remove(&d)),
                    _ => assert_eq!(t.get(d), m.get(&d).copied()),
                }
                assert_eq!(t.len(), m.len());
            }
            for (d, loc) in &m {
                assert_eq!(t.get(*d), Some(*loc));
            }
            let mut all: Vec<(u64, u64)> = t.iter().collect();
            all.sort_unstable();
            let mut want: Vec<(u64, u64)> = m.into_iter().collect();
            want.sort_unstable();
            assert_eq!(all, want);
        }
    }

    #[test]
    fn a_key_costs_at_most_24_bytes_at_every_size() {
        let mut t = DigestTable::default();
        let mut rng = Rng(7);
        let mut worst: f64 = 0.0;
        for n in 1..=300_000usize {
            t.insert(rng.next(), n as u64);
            if n >= 1000 {
                worst = worst.max(t.memory_bytes() as f64 / n as f64);
            }
        }
        assert!(worst <= 24.0, "{worst:.1} bytes a key at worst");
        let mut r2 = DigestTable::default();
        r2.reserve(100_000);
        let cap = r2.memory_bytes();
        for i in 0..100_000u64 {
            r2.insert(i.wrapping_mul(0x1234_5678_9ABC_DEF1), i + 1);
        }
        assert_eq!(r2.memory_bytes(), cap, "reserve made room for all");
    }
}
