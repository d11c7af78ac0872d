//! Merging several sorted sources (memtables, L0 SSTs, one iterator per deeper level) into one
//! sorted stream, in both directions.
//!
//! The number of sources is small (a few memtables, up to the L0 stop trigger of SSTs, one per
//! level), so the smallest (or largest) child is found by a linear scan rather than a heap:
//! simpler to get right in both directions, and no slower at these sizes. The scan also notes
//! the runner-up, so a step that leaves the current child still ahead of it (most steps of a
//! scan: runs of keys come from one level) costs one comparison instead of a pass over every
//! child (the pass was 8.7% of an O_DIRECT `readseq`).

use std::cmp::Ordering;

use crate::error::Result;
use crate::iter::{BlockRead, InternalIterator};
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
    /// The child that comes next after `current` in the direction of travel, among the
    /// others (which do not move while `current` steps); `None` when no other is valid.
    runner_up: Option<usize>,
    direction: Direction,
}

impl MergingIterator {
    /// A merge of `children`.
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> MergingIterator {
        MergingIterator { children, current: None, runner_up: None, direction: Direction::Forward }
    }

    /// Puts the merge on the child whose key comes first in `want`'s order, or on none when
    /// a child failed: the merge then ends at once, with that child's error as its status.
    /// Going on without the failed child would return its neighbours' entries in place of
    /// its own, a key that exists read as absent (P4), to a caller who checks `status` only
    /// once `valid` turns false, as the iterator's contract says.
    fn pick(&mut self, want: Ordering) {
        let (mut best, mut second): (Option<usize>, Option<usize>) = (None, None);
        for (i, c) in self.children.iter().enumerate() {
            if !c.valid() {
                if c.status().is_err() {
                    self.current = None;
                    return;
                }
                continue;
            }
            let ahead_of = |other: Option<usize>| {
                other.is_none_or(|o| key::compare(c.key(), self.children[o].key()) == want)
            };
            if ahead_of(best) {
                second = best;
                best = Some(i);
            } else if ahead_of(second) {
                second = Some(i);
            }
        }
        self.current = best;
        self.runner_up = second;
    }

    /// After the current child stepped in the direction of travel: stays on it while it is
    /// still ahead of the runner-up, else picks again.
    fn settle_after_step(&mut self, want: Ordering) {
        let cur = self.current.expect("a current child");
        let c = &self.children[cur];
        if c.valid()
            && self.runner_up.is_none_or(|r| key::compare(c.key(), self.children[r].key()) == want)
        {
            return;
        }
        self.pick(want);
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
        if self.direction == Direction::Forward {
            self.settle_after_step(Ordering::Less);
        } else {
            self.pick_smallest();
        }
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
        if self.direction == Direction::Reverse {
            self.settle_after_step(Ordering::Greater);
        } else {
            self.pick_largest();
        }
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

    fn blocks_for_seek(&self, target: &[u8], out: &mut Vec<BlockRead>) {
        for child in &self.children {
            child.blocks_for_seek(target, out);
        }
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

    /// A source that fails once positioned past `fail_from` (an internal key): as an SST
    /// iterator does at a block it cannot read.
    struct FailingPast {
        entries: VecIterator,
        fail_from: Vec<u8>,
        failed: bool,
    }

    impl FailingPast {
        fn check(&mut self) {
            if self.entries.valid() && key::compare(self.entries.key(), &self.fail_from).is_ge() {
                self.failed = true;
            }
        }
    }

    impl InternalIterator for FailingPast {
        fn valid(&self) -> bool {
            !self.failed && self.entries.valid()
        }
        fn seek_to_first(&mut self) {
            self.entries.seek_to_first();
            self.check();
        }
        fn seek_to_last(&mut self) {
            self.entries.seek_to_last();
            self.check();
        }
        fn seek(&mut self, target: &[u8]) {
            self.entries.seek(target);
            self.check();
        }
        fn seek_for_prev(&mut self, target: &[u8]) {
            self.entries.seek_for_prev(target);
            self.check();
        }
        fn next(&mut self) {
            self.entries.next();
            self.check();
        }
        fn prev(&mut self) {
            self.entries.prev();
            self.check();
        }
        fn key(&self) -> &[u8] {
            self.entries.key()
        }
        fn value(&self) -> &[u8] {
            self.entries.value()
        }
        fn status(&self) -> crate::Result<()> {
            if self.failed { Err(crate::Error::corruption("a damaged block", 0)) } else { Ok(()) }
        }
    }

    /// Regression: a child that failed was passed over and the merge went on with the
    /// others, so a seek to a key the failed child held landed, valid, on the next key of
    /// another child: the key read as absent, no error in sight.
    #[test]
    fn a_failed_child_ends_the_merge_instead_of_hiding_its_keys() {
        let entry = |k: &str, seq| (encode(k.as_bytes(), seq, Kind::Put), vec![]);
        let merge = || {
            let other = VecIterator::new(vec![entry("a", 1), entry("c", 2), entry("e", 3)]);
            let failing = FailingPast {
                entries: VecIterator::new(vec![entry("b", 4), entry("d", 5)]),
                fail_from: encode(b"d", u64::MAX >> 8, Kind::Put),
                failed: false,
            };
            MergingIterator::new(vec![Box::new(other), Box::new(failing)])
        };
        let mut m = merge();
        m.seek(&encode(b"d", u64::MAX >> 8, Kind::SEEK));
        assert!(!m.valid(), "the seek landed on {:?} past a failed child", m.key());
        assert!(m.status().is_err());
        // A scan from the start stops when the child fails (as it steps past "b"), without
        // the other child's entries after that point.
        let mut m = merge();
        m.seek_to_first();
        let mut seen = Vec::new();
        while m.valid() {
            seen.push(key::user_key(m.key()).to_vec());
            m.next();
        }
        assert_eq!(seen, [b"a".to_vec(), b"b".to_vec()]);
        assert!(m.status().is_err());
    }
}
