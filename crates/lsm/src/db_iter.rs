//! The user-facing iterator: turns a merged stream of internal entries into the user keys
//! visible at a snapshot, newest version only, deletes hidden, within optional bounds.
//!
//! Range tombstones: the iterator is given every range tombstone of its sources when it is
//! created, keeps those its snapshot sees and that meet its bounds, and fragments them
//! ([`Fragments::newest_only`]). An entry older than the newest tombstone over its key counts
//! as deleted, so the newest visible entry of a key decides, as for point deletes. Covered
//! keys are still stepped over one entry at a time.
//!
//! Positioning invariant: moving forward, the inner iterator sits on the newest visible entry
//! of the current user key; moving in reverse, it sits on the last entry *before* every entry
//! of the current user key. A change of direction re-seeks relative to the current user key.

use std::sync::Arc;

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{self, Kind, SEQ_MAX};
use crate::range_del::{Fragments, RangeTombstone};
use crate::sst::QueuePool;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// Bounds and the snapshot of an iteration.
#[derive(Clone, Debug, Default)]
pub struct IterBounds {
    /// Only keys at or after this.
    pub lower: Option<Vec<u8>>,
    /// Only keys before this.
    pub upper: Option<Vec<u8>>,
}

impl IterBounds {
    /// Bounds covering exactly the keys that start with `prefix`.
    pub fn prefix(prefix: &[u8]) -> IterBounds {
        IterBounds { lower: Some(prefix.to_vec()), upper: prefix_successor(prefix) }
    }
}

/// The smallest key greater than every key starting with `prefix`, if one exists.
fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut s = prefix.to_vec();
    while let Some(last) = s.pop() {
        if last != 0xFF {
            s.push(last + 1);
            return Some(s);
        }
    }
    None
}

/// Iterates the user keys visible at a snapshot.
///
/// A cursor (`seek`, `next`, `prev`, `key`, `value`, as RocksDB's), and, through
/// [`IntoIterator`], a Rust iterator of `(key, value)` pairs that runs from both ends:
///
/// ```
/// use shale_lsm::{Db, Options, ReadOptions};
///
/// let dir = tempfile::tempdir()?;
/// let db = Db::open(dir.path(), Options::small_for_tests())?;
/// for k in ["a", "b", "c"] {
///     db.put(k.as_bytes(), b"v")?;
/// }
/// let keys: Vec<Vec<u8>> =
///     db.iter(&ReadOptions::default()).into_iter().map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
/// assert_eq!(keys, [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
/// let last = db.iter(&ReadOptions::default()).into_iter().next_back().transpose()?;
/// assert_eq!(last, Some((b"c".to_vec(), b"v".to_vec())));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct DbIterator {
    inner: Box<dyn InternalIterator>,
    snapshot: u64,
    bounds: IterBounds,
    tombstones: Fragments,
    direction: Direction,
    valid: bool,
    key: Vec<u8>,
    value: Vec<u8>,
    /// Where a seek reads the data blocks its sources need together, when set
    /// ([`DbIterator::with_batched_seeks`]).
    seek_reads: Option<Arc<QueuePool>>,
}

impl DbIterator {
    /// Wraps a merged iterator over every source, reading at `snapshot`.
    pub(crate) fn new(inner: Box<dyn InternalIterator>, snapshot: u64, bounds: IterBounds) -> DbIterator {
        DbIterator {
            inner,
            snapshot,
            bounds,
            tombstones: Fragments::default(),
            direction: Direction::Forward,
            valid: false,
            key: Vec::new(),
            value: Vec::new(),
            seek_reads: None,
        }
    }

    /// Has each seek read the data blocks its sources will need, one per sorted run that the
    /// block cache does not answer, all at once through `pool` ([`QueuePool::read_many`]:
    /// one io_uring submission, or page-cache reads), before seeking. A seek otherwise waits
    /// for those reads one after the other: with the data on the device, a seek over five
    /// sorted runs cost five device latencies where it can cost about one.
    pub(crate) fn with_batched_seeks(mut self, pool: Arc<QueuePool>) -> DbIterator {
        self.seek_reads = Some(pool);
        self
    }

    /// Adds the range tombstones of the sources (all of them: those the snapshot does not see
    /// or outside the bounds are left out here). Call before positioning the iterator.
    pub(crate) fn with_range_tombstones(mut self, tombstones: Vec<RangeTombstone>) -> DbIterator {
        let (lower, upper) = (self.bounds.lower.as_deref(), self.bounds.upper.as_deref());
        let visible: Vec<RangeTombstone> = tombstones
            .into_iter()
            .filter(|t| t.seq <= self.snapshot && t.overlaps(lower, upper))
            .collect();
        self.tombstones = Fragments::newest_only(&visible);
        self
    }

    /// Whether an entry `(user_key, seq)` is older than a range tombstone over its key.
    fn covered(&self, user_key: &[u8], seq: u64) -> bool {
        seq < self.tombstones.max_covering_seq(user_key, u64::MAX)
    }

    /// Whether the iterator is on a key.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current key. Requires `valid()`.
    pub fn key(&self) -> &[u8] {
        assert!(self.valid, "key on an invalid iterator");
        &self.key
    }

    /// The current value. Requires `valid()`.
    pub fn value(&self) -> &[u8] {
        assert!(self.valid, "value on an invalid iterator");
        &self.value
    }

    /// The first error met.
    ///
    /// # Errors
    /// The I/O error or corruption that ended the iteration early.
    pub fn status(&self) -> Result<()> {
        self.inner.status()
    }

    /// Moves to the first key.
    pub fn seek_to_first(&mut self) {
        match self.bounds.lower.clone() {
            Some(lower) => self.seek(&lower),
            None => {
                self.inner.seek_to_first();
                self.find_next(None);
            }
        }
    }

    /// Moves to the last key.
    pub fn seek_to_last(&mut self) {
        match self.bounds.upper.clone() {
            Some(upper) => {
                self.inner.seek_for_prev(&key::encode(&upper, SEQ_MAX, Kind::SEEK));
                self.find_prev();
            }
            None => {
                self.inner.seek_to_last();
                self.find_prev();
            }
        }
    }

    /// Moves to the first key at or after `target` (and the lower bound).
    pub fn seek(&mut self, target: &[u8]) {
        let target = match &self.bounds.lower {
            Some(lower) if lower.as_slice() > target => lower.clone(),
            _ => target.to_vec(),
        };
        let target = key::encode(&target, self.snapshot, Kind::SEEK);
        self.read_seek_blocks(&target);
        self.inner.seek(&target);
        self.find_next(None);
    }

    /// Reads into the block cache, together, the data blocks a seek to `target` will need
    /// ([`DbIterator::with_batched_seeks`]). A read that fails or a block that does not check
    /// out is left alone: the seek reads that block again and reports what it finds, as it
    /// would have without the batch.
    fn read_seek_blocks(&mut self, target: &[u8]) {
        let Some(pool) = &self.seek_reads else { return };
        let mut wanted = Vec::new();
        self.inner.blocks_for_seek(target, &mut wanted);
        if wanted.len() < 2 {
            // A single read gains nothing from a batch.
            return;
        }
        let ranges: Vec<(u64, usize)> = wanted
            .iter()
            .map(|w| (w.sst.volume_offset(w.block.offset), w.block.stored_bytes() as usize))
            .collect();
        for (w, stored) in wanted.iter().zip(pool.read_for_seek(&ranges)) {
            if let Ok(stored) = stored {
                let _checked_by_the_seek = w.sst.reader.cache_read_block(w.block, &stored);
            }
        }
    }

    /// Moves to the last key at or before `target` (and before the upper bound).
    pub fn seek_for_prev(&mut self, target: &[u8]) {
        let past_upper = self.bounds.upper.as_ref().is_some_and(|u| target >= u.as_slice());
        if past_upper {
            self.seek_to_last();
            return;
        }
        // Every entry of `target` sorts at or before (target, 0, Delete).
        self.inner.seek_for_prev(&key::encode(target, 0, Kind::Delete));
        self.find_prev();
    }

    /// Moves to the next key. Requires `valid()`.
    pub fn next(&mut self) {
        assert!(self.valid, "next on an invalid iterator");
        if self.direction == Direction::Reverse {
            self.inner.seek(&key::encode(&self.key, SEQ_MAX, Kind::SEEK));
        }
        let skip = std::mem::take(&mut self.key);
        self.find_next(Some(skip));
    }

    /// Moves to the previous key. Requires `valid()`.
    pub fn prev(&mut self) {
        assert!(self.valid, "prev on an invalid iterator");
        if self.direction == Direction::Forward {
            self.inner.seek_for_prev(&key::encode(&self.key, SEQ_MAX, Kind::SEEK));
            // seek_for_prev lands on the last entry at or before (key, MAX): entries of the
            // current key sort after it, so this is already before all of them.
        }
        self.find_prev();
    }

    /// Forward: from the inner position, find the newest visible non-deleted entry of a user
    /// key greater than `skip` (every version of `skip` and of deleted keys is passed over).
    fn find_next(&mut self, mut skip: Option<Vec<u8>>) {
        self.direction = Direction::Forward;
        self.valid = false;
        while self.inner.valid() {
            let Some(p) = key::parse(self.inner.key()) else {
                self.inner.next();
                continue;
            };
            if let Some(upper) = &self.bounds.upper {
                if p.user_key >= upper.as_slice() {
                    return;
                }
            }
            let hidden = p.seq > self.snapshot || skip.as_deref().is_some_and(|s| p.user_key <= s);
            if !hidden {
                match p.kind {
                    Kind::Put if self.covered(p.user_key, p.seq) => {
                        skip = Some(p.user_key.to_vec())
                    }
                    Kind::Delete => skip = Some(p.user_key.to_vec()),
                    Kind::Put => {
                        self.key = p.user_key.to_vec();
                        self.value = self.inner.value().to_vec();
                        self.valid = true;
                        return;
                    }
                }
            }
            self.inner.next();
        }
    }

    /// Reverse: from the inner position, walk back over the versions of the previous user key
    /// (oldest first, so the last visible one seen is the newest) and stop before the key
    /// after it.
    fn find_prev(&mut self) {
        self.direction = Direction::Reverse;
        self.valid = false;
        let mut found: Option<(Vec<u8>, Vec<u8>)> = None;
        let mut found_kind = Kind::Delete;
        while self.inner.valid() {
            let Some(p) = key::parse(self.inner.key()) else {
                self.inner.prev();
                continue;
            };
            if let Some(lower) = &self.bounds.lower {
                if p.user_key < lower.as_slice() {
                    break;
                }
            }
            if p.seq <= self.snapshot {
                let cur = found.as_ref().map(|(k, _)| k.as_slice());
                if found_kind == Kind::Put && cur.is_some_and(|k| p.user_key < k) {
                    break;
                }
                found_kind = if self.covered(p.user_key, p.seq) { Kind::Delete } else { p.kind };
                found = Some((p.user_key.to_vec(), self.inner.value().to_vec()));
            }
            self.inner.prev();
        }
        if found_kind == Kind::Put {
            if let Some((k, v)) = found {
                self.key = k;
                self.value = v;
                self.valid = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::VecIterator;
    use crate::key::encode;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    /// Random versions of 30 keys; the oracle is the state at each snapshot.
    #[test]
    fn matches_an_oracle_at_every_snapshot_with_bounds_and_switches() {
        matches_an_oracle(0.0);
    }

    /// The same with range tombstones among the writes (their ends often between keys).
    #[test]
    fn matches_an_oracle_with_range_tombstones() {
        matches_an_oracle(0.08);
    }

    fn matches_an_oracle(range_delete_probability: f64) {
        for seed in 0..40 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut entries = Vec::new();
            let mut tombstones = Vec::new();
            let mut history: Vec<BTreeMap<Vec<u8>, Vec<u8>>> = vec![BTreeMap::new()];
            for seq in 1..=200u64 {
                let k = format!("k{:02}", rng.gen_range(0..30)).into_bytes();
                let mut state = history.last().unwrap().clone();
                if rng.gen_bool(range_delete_probability) {
                    let mut end = format!("k{:02}", rng.gen_range(0..31)).into_bytes();
                    if rng.gen_bool(0.5) {
                        end.truncate(2); // "k1" lies between "k09" and "k10"
                    }
                    if k < end {
                        state.retain(|key, _| !(*key >= k && *key < end));
                        tombstones.push(RangeTombstone::new(&k, &end, seq));
                    }
                } else if rng.gen_bool(0.3) {
                    entries.push((encode(&k, seq, Kind::Delete), vec![]));
                    state.remove(&k);
                } else {
                    let v = seq.to_le_bytes().to_vec();
                    entries.push((encode(&k, seq, Kind::Put), v.clone()));
                    state.insert(k, v);
                }
                history.push(state);
            }
            for _ in 0..10 {
                let snap = rng.gen_range(0..=200u64);
                let lo =
                    rng.gen_bool(0.5).then(|| format!("k{:02}", rng.gen_range(0..30)).into_bytes());
                let hi =
                    rng.gen_bool(0.5).then(|| format!("k{:02}", rng.gen_range(0..31)).into_bytes());
                let want: Vec<(Vec<u8>, Vec<u8>)> = history[snap as usize]
                    .iter()
                    .filter(|(k, _)| {
                        lo.as_ref().is_none_or(|l| *k >= l) && hi.as_ref().is_none_or(|h| *k < h)
                    })
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let bounds = IterBounds { lower: lo.clone(), upper: hi.clone() };
                let mut it =
                    DbIterator::new(Box::new(VecIterator::new(entries.clone())), snap, bounds)
                        .with_range_tombstones(tombstones.clone());
                let mut got = Vec::new();
                it.seek_to_first();
                while it.valid() {
                    got.push((it.key().to_vec(), it.value().to_vec()));
                    it.next();
                }
                assert_eq!(got, want, "seed {seed} snapshot {snap} forward");
                let mut back = Vec::new();
                it.seek_to_last();
                while it.valid() {
                    back.push((it.key().to_vec(), it.value().to_vec()));
                    it.prev();
                }
                back.reverse();
                assert_eq!(back, want, "seed {seed} snapshot {snap} reverse");
                if want.is_empty() {
                    continue;
                }
                // A random walk with direction switches.
                let mut pos = rng.gen_range(0..want.len());
                it.seek(&want[pos].0);
                for _ in 0..60 {
                    assert!(it.valid());
                    assert_eq!(it.key(), &want[pos].0[..], "seed {seed} walk");
                    if rng.gen_bool(0.5) {
                        it.next();
                        pos += 1;
                        if pos == want.len() {
                            assert!(!it.valid());
                            break;
                        }
                    } else {
                        it.prev();
                        if pos == 0 {
                            assert!(!it.valid());
                            break;
                        }
                        pos -= 1;
                    }
                }
                // seek / seek_for_prev to arbitrary targets.
                let t = format!("k{:02}", rng.gen_range(0..31)).into_bytes();
                it.seek(&t);
                let first = want.iter().find(|(k, _)| *k >= t).map(|(k, _)| k.clone());
                assert_eq!(it.valid().then(|| it.key().to_vec()), first, "seed {seed} seek");
                it.seek_for_prev(&t);
                let last = want.iter().rev().find(|(k, _)| *k <= t).map(|(k, _)| k.clone());
                assert_eq!(
                    it.valid().then(|| it.key().to_vec()),
                    last,
                    "seed {seed} seek_for_prev"
                );
            }
        }
    }

    #[test]
    fn prefix_bounds() {
        assert_eq!(prefix_successor(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_successor(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_successor(b"\xff\xff"), None);
        let entries = ["a", "ab", "abc", "abd", "b"]
            .iter()
            .enumerate()
            .map(|(i, k)| (encode(k.as_bytes(), i as u64 + 1, Kind::Put), vec![]))
            .collect();
        let mut it =
            DbIterator::new(Box::new(VecIterator::new(entries)), 10, IterBounds::prefix(b"ab"));
        let mut got = Vec::new();
        it.seek_to_first();
        while it.valid() {
            got.push(String::from_utf8(it.key().to_vec()).unwrap());
            it.next();
        }
        assert_eq!(got, ["ab", "abc", "abd"]);
    }
}

/// Where an [`Entries`] cursor sits.
#[derive(Clone, Copy, PartialEq, Eq)]
enum At {
    /// Not moved yet, or moved by the other end.
    Elsewhere,
    /// On the key last yielded from the front.
    Front,
    /// On the key last yielded from the back.
    Back,
}

/// The entries of a [`DbIterator`] as a Rust iterator: `(key, value)` pairs in key order from
/// the front, in reverse from the back, each key once however the two ends are mixed. An
/// error (a damaged block, a failed read) is yielded once, as `Err`, and ends the iteration.
///
/// It starts from the iterator's bounds, wherever the cursor was left. Each switch between
/// the ends re-seeks (a lookup, as `seek` costs); a run from one end just steps.
pub struct Entries {
    it: DbIterator,
    /// The last key yielded from the front: the next one from the front is after it.
    front: Option<Vec<u8>>,
    /// The last key yielded from the back: the next one from the back is before it.
    back: Option<Vec<u8>>,
    at: At,
    done: bool,
}

impl IntoIterator for DbIterator {
    type Item = Result<(Vec<u8>, Vec<u8>)>;
    type IntoIter = Entries;

    fn into_iter(self) -> Entries {
        Entries { it: self, front: None, back: None, at: At::Elsewhere, done: false }
    }
}

impl Entries {
    /// The entry the cursor is on, if it is still between the two ends; ends the iteration
    /// otherwise (with the iterator's error, if it stopped on one).
    fn take(&mut self, from_front: bool) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        if !self.it.valid() {
            self.done = true;
            return self.it.status().err().map(Err);
        }
        let key = self.it.key();
        let crossed = if from_front {
            self.back.as_deref().is_some_and(|b| key >= b)
        } else {
            self.front.as_deref().is_some_and(|f| key <= f)
        };
        if crossed {
            self.done = true;
            return None;
        }
        let entry = (key.to_vec(), self.it.value().to_vec());
        let end = if from_front { &mut self.front } else { &mut self.back };
        *end = Some(entry.0.clone());
        Some(Ok(entry))
    }
}

impl Iterator for Entries {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match (self.at, self.front.clone()) {
            (At::Front, _) => self.it.next(),
            (_, None) => self.it.seek_to_first(),
            (_, Some(last)) => {
                self.it.seek(&last);
                if self.it.valid() && self.it.key() == last.as_slice() {
                    self.it.next();
                }
            }
        }
        self.at = At::Front;
        self.take(true)
    }
}

impl DoubleEndedIterator for Entries {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match (self.at, self.back.clone()) {
            (At::Back, _) => self.it.prev(),
            (_, None) => self.it.seek_to_last(),
            (_, Some(last)) => {
                self.it.seek_for_prev(&last);
                if self.it.valid() && self.it.key() == last.as_slice() {
                    self.it.prev();
                }
            }
        }
        self.at = At::Back;
        self.take(false)
    }
}

impl std::iter::FusedIterator for Entries {}
