//! The ordered primary index of a table: every primary key with a live row record (committed
//! or not) to the position of that record, in key order, for scans.
//!
//! The hash index (`index.rs`) finds one key; it cannot say which keys lie in a range. This
//! index can: a scan walks its range in key order and reads only the rows in it. It lives in
//! memory only and is kept right exactly where the hash index is (an insert, an erase, a
//! move, a rollback, and the open's scan of every block, which rebuilds it from the rows:
//! nothing of it is written, so nothing of it can be stale after a crash).
//!
//! Memory: a key of a fixed-size key column is kept with its trailing zero bytes taken off
//! (YCSB's keys, zero-padded to 255 bytes, keep 6 to 24). Every key of such a column has the
//! same length, so the trimmed key is still unique, and trimming keeps the order: where two
//! keys of one length first differ, the greater has a non-zero byte, which trimming keeps,
//! and the lesser is trimmed to at most that place, a prefix of the greater's. The trim is
//! also monotone for keys of other lengths (a range bound a caller gives), which is what a
//! range walk needs: it starts at the trimmed bound and confirms every key against the bound
//! whole.

use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};

use crate::block::Pos;

/// A table's ordered primary index.
#[derive(Debug, Default)]
pub struct OrderedIndex {
    /// The length of every key when the key column is fixed: keys are kept trimmed.
    fixed_len: Option<usize>,
    map: BTreeMap<Box<[u8]>, Pos>,
}

impl OrderedIndex {
    /// An empty index for keys of `fixed_len` bytes each (a fixed key column), or of any
    /// length (`None`: a variable key column).
    pub fn new(fixed_len: Option<usize>) -> OrderedIndex {
        OrderedIndex { fixed_len, map: BTreeMap::new() }
    }

    /// The form `key` is kept in.
    fn stored<'k>(&self, key: &'k [u8]) -> &'k [u8] {
        match self.fixed_len {
            Some(_) => trim(key),
            None => key,
        }
    }

    /// The key a stored key was made from.
    fn full(&self, stored: &[u8]) -> Vec<u8> {
        let mut k = stored.to_vec();
        if let Some(n) = self.fixed_len {
            k.resize(n, 0);
        }
        k
    }

    /// Points `key` at `pos`. A key has one live record at a time: a second one is a bug.
    pub fn insert(&mut self, key: &[u8], pos: Pos) {
        debug_assert!(self.fixed_len.is_none_or(|n| n == key.len()), "a key of the wrong size");
        let old = self.map.insert(self.stored(key).into(), pos);
        assert!(
            old.is_none_or(|p| p == pos),
            "two live records of one key in the ordered index: {old:?} and {pos:?}"
        );
    }

    /// Drops `key` if it points at `pos` (a rollback may remove a key whose entry has moved
    /// on; then there is nothing to do).
    pub fn remove(&mut self, key: &[u8], pos: Pos) {
        let stored = self.stored(key);
        if self.map.get(stored) == Some(&pos) {
            self.map.remove(stored);
        }
    }

    /// Where the live record of `key` is.
    pub fn get(&self, key: &[u8]) -> Option<Pos> {
        if self.fixed_len.is_some_and(|n| n != key.len()) {
            return None;
        }
        self.map.get(self.stored(key)).copied()
    }

    /// Up to `limit` keys in `range`, in order, with their positions.
    pub fn range(
        &self,
        range: &(Bound<Vec<u8>>, Bound<Vec<u8>>),
        limit: usize,
    ) -> Vec<(Vec<u8>, Pos)> {
        // The walk starts at the stored form of the lower bound, inclusive: the trim is
        // monotone, so no key at or past the bound is stored before it. Keys before the
        // bound that share its stored form are skipped by the check of the whole key.
        let start = match &range.0 {
            Bound::Unbounded => Bound::Unbounded,
            Bound::Included(k) | Bound::Excluded(k) => Bound::Included(self.stored(k)),
        };
        let mut out = Vec::with_capacity(limit.min(1024));
        for (stored, pos) in self.map.range::<[u8], _>((start, Bound::Unbounded)) {
            if out.len() == limit {
                break;
            }
            let key = self.full(stored);
            let past_end = match &range.1 {
                Bound::Unbounded => false,
                Bound::Included(e) => key > *e,
                Bound::Excluded(e) => key >= *e,
            };
            if past_end {
                break;
            }
            if range.contains(&key) {
                out.push((key, *pos));
            }
        }
        out
    }

    /// Keys in the index.
    pub fn len(&self) -> usize {
        self.map.len()
    }
}

/// `key` without its trailing zero bytes.
fn trim(key: &[u8]) -> &[u8] {
    let end = key.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    &key[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(i: u64) -> Pos {
        Pos { block: i, offset: 0 }
    }

    /// Keys of 4 bytes over a small alphabet with many zeros, so that trims collide in
    /// every way they can; every range of every pair of bounds (of lengths 0 to 5) must
    /// give what a walk of the whole keys gives.
    #[test]
    fn ranges_over_trimmed_keys_match_ranges_over_whole_keys() {
        let alphabet = [0u8, 1, 2];
        let mut keys = Vec::new();
        for a in alphabet {
            for b in alphabet {
                for c in alphabet {
                    for d in alphabet {
                        keys.push(vec![a, b, c, d]);
                    }
                }
            }
        }
        let mut index = OrderedIndex::new(Some(4));
        let mut whole = BTreeMap::new();
        for (i, k) in keys.iter().enumerate().filter(|(i, _)| i % 3 != 1) {
            index.insert(k, pos(i as u64));
            whole.insert(k.clone(), pos(i as u64));
        }
        assert!(index.map.keys().any(|k| k.len() < 4), "some keys are kept trimmed");
        let mut bounds = vec![vec![], vec![0], vec![0, 0, 0, 0, 0], vec![2, 2, 2, 2, 2]];
        bounds.extend(keys.iter().step_by(5).cloned());
        bounds.extend(keys.iter().step_by(7).map(|k| k[..2].to_vec()));
        let kinds = |b: &Vec<u8>| {
            [Bound::Included(b.clone()), Bound::Excluded(b.clone()), Bound::Unbounded]
        };
        for lo in &bounds {
            for hi in &bounds {
                for l in kinds(lo) {
                    for h in kinds(hi) {
                        let r = (l.clone(), h.clone());
                        let want: Vec<(Vec<u8>, Pos)> = whole
                            .iter()
                            .filter(|(k, _)| r.contains(*k))
                            .map(|(k, p)| (k.clone(), *p))
                            .collect();
                        assert_eq!(index.range(&r, usize::MAX), want, "range {r:?}");
                        let few: Vec<_> = want.iter().take(3).cloned().collect();
                        assert_eq!(index.range(&r, 3), few, "range {r:?}, 3 keys");
                    }
                }
            }
        }
        for (k, p) in &whole {
            assert_eq!(index.get(k), Some(*p));
            assert_eq!(index.get(&k[..3]), None, "a key of another length is not there");
        }
    }

    #[test]
    fn remove_drops_a_key_only_at_its_position() {
        let mut index = OrderedIndex::new(None);
        index.insert(b"a", pos(1));
        index.remove(b"a", pos(2));
        assert_eq!(index.get(b"a"), Some(pos(1)));
        index.remove(b"a", pos(1));
        assert_eq!((index.get(b"a"), index.len()), (None, 0));
        index.insert(b"a", pos(2));
        assert_eq!(index.get(b"a"), Some(pos(2)));
    }
}
