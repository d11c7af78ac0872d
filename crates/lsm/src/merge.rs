//! Merging several sorted sources (memtables, L0 SSTs, one iterator per deeper level) into one
//! sorted stream, in both directions.
//!
//! The number of sources is small (a few memtables, up to the L0 stop trigger of SSTs, one per
//! level), so the smallest (or largest) child is found by a linear scan rather than a heap:
//! simpler to get right in both directions, and no slower at these sizes.

use std::cmp::Ordering;

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// A sorted merge of several internal iterators. Entries with equal internal keys cannot occur
/// (sequence numbers are unique), so no tie-breaking is needed.
pub struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    current: Option<usize>,
    direction: Direction,
}

impl MergingIterator {
    /// A merge of `children`.
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> MergingIterator {
        MergingIterator { children, current: None, direction: Direction::Forward }
    }

    fn pick(&mut self, want: Ordering) {
        let mut best: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate() {
            if !c.valid() {
                continue;
            }
            best = match best {
                Some(b) if key::compare(c.key(), self.children[b].key()) != want => Some(b),
                _ => Some(i),
            };
        }
        self.current = best;
    }

    fn pick_smallest(&mut self) {
        self.direction = Direction::Forward;
        self.pick(Ordering::Less);
    }

    fn pick_largest(&mut self) {
        self.direction = Direction::Reverse;
        self.pick(Ordering::Greater);
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn seek_to_first(&mut self) {
        self.children.iter_mut().for_each(|c| c.seek_to_first());
        self.pick_smallest();
    }

    fn seek_to_last(&mut self) {
        self.children.iter_mut().for_each(|c| c.seek_to_last());
        self.pick_largest();
    }

    fn seek(&mut self, target: &[u8]) {
        self.children.iter_mut().for_each(|c| c.seek(target));
        self.pick_smallest();
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        self.children.iter_mut().for_each(|c| c.seek_for_prev(target));
        self.pick_largest();
    }

    fn next(&mut self) {
        let cur = self.current.expect("next on an invalid iterator");
        if self.direction == Direction::Reverse {
            // Every other child is positioned before the current key; move each to the first
            // entry after it.
            let k = self.children[cur].key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i != cur {
                    c.seek(&k);
                    if c.valid() && key::compare(c.key(), &k) == Ordering::Equal {
                        c.next();
                    }
                }
            }
        }
        self.children[cur].next();
        self.pick_smallest();
    }

    fn prev(&mut self) {
        let cur = self.current.expect("prev on an invalid iterator");
        if self.direction == Direction::Forward {
            // Every other child is positioned after the current key; move each to the last
            // entry before it.
            let k = self.children[cur].key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i != cur {
                    c.seek_for_prev(&k);
                    if c.valid() && key::compare(c.key(), &k) == Ordering::Equal {
                        c.prev();
                    }
                }
            }
        }
        self.children[cur].prev();
        self.pick_largest();
    }

    fn key(&self) -> &[u8] {
        self.children[self.current.expect("key on an invalid iterator")].key()
    }

    fn value(&self) -> &[u8] {
        self.children[self.current.expect("value on an invalid iterator")].value()
    }

    fn status(&self) -> Result<()> {
        self.children.iter().try_for_each(|c| c.status())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::VecIterator;
    use crate::key::{Kind, encode};
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    #[test]
    fn merge_matches_a_sorted_union_in_both_directions_with_switches() {
        for seed in 0..30 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut all = Vec::new();
            let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
            let mut seq = 0;
            for _ in 0..rng.gen_range(1..5) {
                let mut entries = Vec::new();
                for _ in 0..rng.gen_range(0..30) {
                    seq += 1;
                    let k =
                        encode(format!("k{:02}", rng.gen_range(0..20)).as_bytes(), seq, Kind::Put);
                    entries.push((k.clone(), seq.to_le_bytes().to_vec()));
                    all.push(k);
                }
                children.push(Box::new(VecIterator::new(entries)));
            }
            all.sort_by(|a, b| key::compare(a, b));
            let mut m = MergingIterator::new(children);
            let mut got = Vec::new();
            m.seek_to_first();
            while m.valid() {
                got.push(m.key().to_vec());
                m.next();
            }
            assert_eq!(got, all, "seed {seed} forward");
            let mut back = Vec::new();
            m.seek_to_last();
            while m.valid() {
                back.push(m.key().to_vec());
                m.prev();
            }
            back.reverse();
            assert_eq!(back, all, "seed {seed} reverse");
            // Random walks with direction switches match the sorted vector's positions.
            if all.is_empty() {
                continue;
            }
            let mut pos = rng.gen_range(0..all.len());
            m.seek(&all[pos]);
            for _ in 0..100 {
                assert_eq!(m.key(), &all[pos][..], "seed {seed}");
                if rng.gen_bool(0.5) {
                    if pos + 1 == all.len() {
                        break;
                    }
                    m.next();
                    pos += 1;
                } else {
                    if pos == 0 {
                        break;
                    }
                    m.prev();
                    pos -= 1;
                }
            }
        }
    }
}
