//! Range tombstones: what `delete_range(start, end)` writes, and how reads and compaction find
//! the tombstones over a key.
//!
//! A range tombstone `[start, end) @ seq` hides every version with a sequence number below
//! `seq` of every user key `k` with `start <= k < end` (bytewise), from every reader whose
//! snapshot is at or above `seq`. Versions newer than the tombstone stay visible, and a
//! snapshot older than the tombstone does not see it at all.
//!
//! Tombstones never enter the streams of point entries (skiplist, data blocks, merging
//! iterators); each layer keeps them beside its points, as RocksDB does:
//! - WAL record and batch: an op of its own ([`crate::batch::OpKind::DeleteRange`]);
//! - memtable: a list beside the skiplist;
//! - SST: the range-deletion block ([`crate::sst::range_del_block`]), read whole when the SST
//!   opens, and bounds (`smallest`/`largest`) wide enough to cover every tombstone;
//! - reads: [`Fragments`] answers "the newest tombstone over this key that this snapshot sees"
//!   with one binary search.
//!
//! Overlapping tombstones are *fragmented*: cut at every start and end into disjoint pieces,
//! each carrying the sequence numbers of the tombstones over it. Sequence numbers start at 1,
//! so 0 stands for "no tombstone" in the lookups below.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::key;

/// One range tombstone: every version older than `seq` of the user keys in `[start, end)` is
/// deleted.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RangeTombstone {
    /// First user key deleted (inclusive).
    pub start: Vec<u8>,
    /// First user key past the range (exclusive); always greater than `start`.
    pub end: Vec<u8>,
    /// Sequence number of the delete.
    pub seq: u64,
}

impl RangeTombstone {
    /// The tombstone `[start, end) @ seq`.
    ///
    /// # Panics
    /// If `start >= end` (callers refuse empty ranges first) or `seq` is over
    /// [`key::SEQ_MAX`].
    pub fn new(start: &[u8], end: &[u8], seq: u64) -> RangeTombstone {
        assert!(start < end, "empty range tombstone");
        assert!(seq <= key::SEQ_MAX, "sequence {seq} over SEQ_MAX");
        RangeTombstone { start: start.to_vec(), end: end.to_vec(), seq }
    }

    /// Whether `user_key` lies in the range.
    pub fn covers(&self, user_key: &[u8]) -> bool {
        self.start.as_slice() <= user_key && user_key < self.end.as_slice()
    }

    /// Whether the range meets `[lower, upper)` (`None`: unbounded on that side).
    pub fn overlaps(&self, lower: Option<&[u8]>, upper: Option<&[u8]>) -> bool {
        upper.is_none_or(|u| self.start.as_slice() < u)
            && lower.is_none_or(|l| l < self.end.as_slice())
    }

    /// The part of the tombstone inside `[lower, upper)`, if any: what an SST covering only
    /// that range keeps of it.
    pub fn clipped(&self, lower: Option<&[u8]>, upper: Option<&[u8]>) -> Option<RangeTombstone> {
        let start = match lower {
            Some(l) if l > self.start.as_slice() => l,
            _ => &self.start,
        };
        let end = match upper {
            Some(u) if u < self.end.as_slice() => u,
            _ => &self.end,
        };
        (start < end).then(|| RangeTombstone {
            start: start.to_vec(),
            end: end.to_vec(),
            seq: self.seq,
        })
    }

    /// The order tombstones are stored in: start ascending, then newest first.
    pub fn sst_order(&self, other: &RangeTombstone) -> Ordering {
        self.start.cmp(&other.start).then_with(|| other.seq.cmp(&self.seq))
    }
}

/// The sequence number of the newest tombstone of `list` over `user_key` that a reader at
/// `snapshot` sees, or 0. A linear scan: for the short, changing list of a memtable.
pub fn max_covering_seq(list: &[RangeTombstone], user_key: &[u8], snapshot: u64) -> u64 {
    list.iter()
        .filter(|t| t.seq <= snapshot && t.covers(user_key))
        .map(|t| t.seq)
        .max()
        .unwrap_or(0)
}

/// Sorts tombstones into SST order and merges the pieces of one tombstone (same sequence
/// number) that overlap or touch, such as the halves of a tombstone that one compaction cut
/// at an output boundary and a later one brought together again. Sequence numbers are unique
/// per write, so equal numbers always mean pieces of the same tombstone.
pub fn normalize(mut list: Vec<RangeTombstone>) -> Vec<RangeTombstone> {
    list.sort_by(|a, b| a.seq.cmp(&b.seq).then_with(|| a.start.cmp(&b.start)));
    let mut out: Vec<RangeTombstone> = Vec::with_capacity(list.len());
    for t in list {
        match out.last_mut() {
            Some(last) if last.seq == t.seq && t.start <= last.end => {
                if t.end > last.end {
                    last.end = t.end;
                }
            }
            _ => out.push(t),
        }
    }
    out.sort_by(RangeTombstone::sst_order);
    out
}

/// The internal keys that bound `list`: [`key::range_bound`] of the smallest start and of the
/// largest end (exclusive, see [`key::is_range_bound`]); `None` for an empty list.
pub fn bounds(list: &[RangeTombstone]) -> Option<(Vec<u8>, Vec<u8>)> {
    let start = list.iter().map(|t| &t.start).min()?;
    let end = list.iter().map(|t| &t.end).max()?;
    Some((key::range_bound(start), key::range_bound(end)))
}

/// One piece of fragmented tombstones: the user keys `[start, end)` and the sequence numbers
/// of every tombstone over all of them, newest first.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Fragment {
    start: Vec<u8>,
    end: Vec<u8>,
    seqs: Vec<u64>,
}

/// Tombstones cut into disjoint, sorted fragments, for lookups by user key.
///
/// Size: at most `2n - 1` fragments for `n` tombstones; each keeps the sequence numbers over
/// it, so deeply nested tombstones cost up to `n²` numbers ([`Fragments::newest_only`] keeps
/// one per fragment, for readers at one fixed snapshot).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fragments {
    fragments: Vec<Fragment>,
}

impl Fragments {
    /// Fragments of `list` that answer lookups at any snapshot.
    pub fn new(list: &[RangeTombstone]) -> Fragments {
        Fragments::build(list, usize::MAX)
    }

    /// Fragments of `list` that keep only the newest sequence number of each fragment: for a
    /// reader that sees every tombstone of `list` (filtered by its snapshot beforehand).
    pub fn newest_only(list: &[RangeTombstone]) -> Fragments {
        Fragments::build(list, 1)
    }

    /// A sweep over every start and end: at each boundary, tombstones that start there join
    /// the active set and those that end there leave it; the set between two boundaries is
    /// one fragment (merged with the previous one when they touch and carry the same numbers).
    fn build(list: &[RangeTombstone], seqs_per_fragment: usize) -> Fragments {
        let mut boundaries: Vec<&[u8]> =
            list.iter().flat_map(|t| [t.start.as_slice(), t.end.as_slice()]).collect();
        boundaries.sort_unstable();
        boundaries.dedup();
        let mut by_start: Vec<&RangeTombstone> = list.iter().filter(|t| t.start < t.end).collect();
        by_start.sort_by(|a, b| a.start.cmp(&b.start));
        let mut by_end = by_start.clone();
        by_end.sort_by(|a, b| a.end.cmp(&b.end));
        // Sequence number -> tombstones with it in the active set (pieces may repeat one).
        let mut active: BTreeMap<u64, usize> = BTreeMap::new();
        let (mut started, mut ended) = (0, 0);
        let mut fragments: Vec<Fragment> = Vec::new();
        for w in boundaries.windows(2) {
            let (at, next) = (w[0], w[1]);
            while started < by_start.len() && by_start[started].start.as_slice() <= at {
                *active.entry(by_start[started].seq).or_insert(0) += 1;
                started += 1;
            }
            while ended < by_end.len() && by_end[ended].end.as_slice() <= at {
                let seq = by_end[ended].seq;
                let n = active.get_mut(&seq).expect("a tombstone ends after it starts");
                *n -= 1;
                if *n == 0 {
                    active.remove(&seq);
                }
                ended += 1;
            }
            if active.is_empty() {
                continue;
            }
            let seqs: Vec<u64> = active.keys().rev().take(seqs_per_fragment).copied().collect();
            match fragments.last_mut() {
                Some(last) if last.end.as_slice() == at && last.seqs == seqs => {
                    last.end = next.to_vec();
                }
                _ => fragments.push(Fragment { start: at.to_vec(), end: next.to_vec(), seqs }),
            }
        }
        Fragments { fragments }
    }

    /// Whether there is no tombstone.
    pub fn is_empty(&self) -> bool {
        self.fragments.is_empty()
    }

    fn fragment_at(&self, user_key: &[u8]) -> Option<&Fragment> {
        let i = self.fragments.partition_point(|f| f.start.as_slice() <= user_key);
        let f = self.fragments.get(i.checked_sub(1)?)?;
        (user_key < f.end.as_slice()).then_some(f)
    }

    /// The sequence number of the newest tombstone over `user_key` that a reader at
    /// `snapshot` sees, or 0.
    pub fn max_covering_seq(&self, user_key: &[u8], snapshot: u64) -> u64 {
        let Some(f) = self.fragment_at(user_key) else { return 0 };
        let i = f.seqs.partition_point(|&s| s > snapshot);
        f.seqs.get(i).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    fn t(start: &str, end: &str, seq: u64) -> RangeTombstone {
        RangeTombstone::new(start.as_bytes(), end.as_bytes(), seq)
    }

    #[test]
    fn fragments_match_a_linear_scan_at_every_snapshot() {
        for seed in 0..50 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut list = Vec::new();
            for seq in 1..rng.gen_range(1..40u64) {
                let a = rng.gen_range(0..30u8);
                let b = rng.gen_range(a + 1..=30);
                list.push(RangeTombstone::new(&[b'a' + a], &[b'a' + b], seq));
            }
            let all = Fragments::new(&list);
            let newest = Fragments::newest_only(&list);
            for k in 0..31u8 {
                for extra in [&[][..], &[0][..], &[0xff][..]] {
                    let mut user = vec![b'a' + k];
                    user.extend_from_slice(extra);
                    for snap in 0..45 {
                        let want = max_covering_seq(&list, &user, snap);
                        assert_eq!(all.max_covering_seq(&user, snap), want, "seed {seed}");
                    }
                    let want = max_covering_seq(&list, &user, u64::MAX);
                    assert_eq!(newest.max_covering_seq(&user, u64::MAX), want, "seed {seed}");
                }
            }
        }
    }

    #[test]
    fn touching_fragments_with_the_same_tombstones_merge() {
        let f = Fragments::newest_only(&[t("a", "c", 5), t("c", "e", 5), t("b", "d", 3)]);
        assert_eq!(f.fragments.len(), 1, "{f:?}");
        assert_eq!(f.max_covering_seq(b"d", u64::MAX), 5);
        assert_eq!(f.max_covering_seq(b"e", u64::MAX), 0);
        assert!(Fragments::new(&[]).is_empty());
    }

    #[test]
    fn normalize_joins_the_pieces_of_one_tombstone_and_sorts() {
        let got = normalize(vec![t("m", "z", 7), t("c", "f", 2), t("a", "m", 7), t("a", "b", 9)]);
        assert_eq!(got, vec![t("a", "b", 9), t("a", "z", 7), t("c", "f", 2)]);
    }

    #[test]
    fn clipping_keeps_the_part_inside() {
        let x = t("c", "m", 4);
        assert_eq!(x.clipped(None, None), Some(x.clone()));
        assert_eq!(x.clipped(Some(b"e"), Some(b"g")), Some(t("e", "g", 4)));
        assert_eq!(x.clipped(Some(b"m"), None), None);
        assert_eq!(x.clipped(None, Some(b"c")), None);
        assert!(x.overlaps(Some(b"l"), None) && !x.overlaps(Some(b"m"), None));
        assert!(x.overlaps(None, Some(b"d")) && !x.overlaps(None, Some(b"c")));
        let (lo, hi) = bounds(&[x, t("a", "d", 1)]).unwrap();
        assert_eq!((key::user_key(&lo), key::user_key(&hi)), (&b"a"[..], &b"m"[..]));
        assert!(key::is_range_bound(&hi));
    }
}
