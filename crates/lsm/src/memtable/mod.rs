//! The memtable: the sorted in-memory buffer every write enters before it is flushed to an SST.
//!
//! A memtable is a concurrent skiplist of internal keys ([`crate::key`]) whose nodes live in a
//! bump arena of fixed capacity (the *batch size*). Its life:
//! 1. Writers insert from several threads at once, each with its own, unique sequence number;
//!    inserts take no lock (`skiplist` links nodes with compare-and-swap).
//! 2. Readers ([`Memtable::get`], [`MemtableIter`]) run beside the writers and never block; an
//!    entry is visible to them once its `insert` has linked it.
//! 3. When an insert returns [`MemtableFull`], the engine seals the memtable (no more inserts),
//!    starts a new one, retries the write there, and flushes the sealed one to an SST.
//! 4. The memtable is dropped whole once its SST is committed and its last iterator is gone;
//!    nodes are never freed one by one.
//!
//! Range tombstones ([`crate::range_del`]) are kept beside the skiplist, in a short list under
//! a lock of its own: range deletes are rare next to puts, and reads scan the list (a point
//! read) or copy it (a new iterator, a flush). They take no arena space; the engine counts
//! their bytes towards the memtable's size itself, as it does for every op.

mod arena;
mod skiplist;
// The skiplist and the arena take their primitives from here (see `crate::sync`).
use crate::sync;
#[cfg(test)]
mod tests;

mod prefaulter;
pub(crate) use prefaulter::start_prefaulter;

use crate::batch::{BatchOp, OpKind};
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{self, Kind};
use crate::range_del::{self, RangeTombstone};
use parking_lot::RwLock;
use skiplist::{Cursor, SkipList};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The longest user key a memtable stores (node lengths are 32-bit).
pub const USER_KEY_BYTES_MAX: usize = skiplist::PART_BYTES_MAX - key::TRAILER_BYTES;
/// The longest value a memtable stores.
pub const VALUE_BYTES_MAX: usize = skiplist::PART_BYTES_MAX;

/// `seq_min`'s value while the memtable is empty: above every real sequence number.
const SEQ_NONE: u64 = u64::MAX;
const _: () = assert!(key::SEQ_MAX < SEQ_NONE);

/// An insert did not fit in the memtable's capacity: seal it and write to a new one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemtableFull;

impl fmt::Display for MemtableFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("memtable full: seal it and insert into a new one")
    }
}

impl std::error::Error for MemtableFull {}

/// A sorted, concurrent, in-memory map from internal keys to values, with a byte capacity.
///
/// ```
/// use shale_lsm::iter::InternalIterator;
/// use shale_lsm::key::{self, Kind};
/// use shale_lsm::memtable::Memtable;
/// use std::sync::Arc;
///
/// let mem = Arc::new(Memtable::new(1 << 20));
/// mem.insert(b"apple", 1, Kind::Put, b"red").unwrap();
/// mem.insert(b"apple", 2, Kind::Delete, b"").unwrap();
/// assert_eq!(mem.get(b"apple", 1), Some((Kind::Put, b"red".to_vec())));
/// assert_eq!(mem.get(b"apple", 2), Some((Kind::Delete, vec![])));
/// assert_eq!(mem.get(b"pear", 2), None);
///
/// let mut it = mem.iter();
/// it.seek_to_first();
/// assert_eq!(it.key(), key::encode(b"apple", 2, Kind::Delete)); // newest first
/// ```
pub struct Memtable {
    list: Arc<SkipList>,
    /// Smallest sequence inserted, or SEQ_NONE. Updated (Release) after `seq_max`, so a reader
    /// that sees a sequence here (Acquire) sees a `seq_max` at least as large.
    seq_min: AtomicU64,
    /// Largest sequence inserted; meaningful only once `seq_min` is set.
    seq_max: AtomicU64,
    /// Range tombstones, in insertion order.
    range_tombstones: RwLock<Vec<RangeTombstone>>,
    /// Set (Release) once a range tombstone is in `range_tombstones`: a point read of a
    /// memtable without any (nearly all of them) skips the lock. Taking a read lock is an
    /// atomic write to the lock's word, shared by every reader thread: with 16 threads on 2
    /// cores that line moved between the cores on each lookup.
    has_range_tombstones: AtomicBool,
}

// Memtables are shared between writer threads, readers and the flush thread.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Memtable>();
    assert_send_sync::<MemtableIter>();
    assert_send_sync::<MemtableFull>();
};

impl Memtable {
    /// An empty memtable whose entries (with their index overhead) take at most
    /// `capacity_bytes` of memory. Memory is taken from the system in chunks as entries arrive.
    pub fn new(capacity_bytes: usize) -> Memtable {
        Memtable::with_chunk_bytes(capacity_bytes, arena::CHUNK_BYTES)
    }

    /// As [`Memtable::new`], with arena chunks of `chunk_bytes` (tests use small ones to cross
    /// many chunk boundaries).
    fn with_chunk_bytes(capacity_bytes: usize, chunk_bytes: usize) -> Memtable {
        Memtable {
            list: Arc::new(SkipList::new(capacity_bytes, chunk_bytes)),
            seq_min: AtomicU64::new(SEQ_NONE),
            seq_max: AtomicU64::new(0),
            range_tombstones: RwLock::new(Vec::new()),
            has_range_tombstones: AtomicBool::new(false),
        }
    }

    /// Inserts the write `(user_key, seq, kind)` with `value`. Safe to call from several
    /// threads at once; each entry must have its own sequence number.
    ///
    /// # Errors
    /// [`MemtableFull`] if the entry does not fit in what is left of the capacity; nothing was
    /// inserted. An entry larger than the whole capacity never fits, so the engine must bound
    /// entry sizes below the capacity (and reject larger ones as invalid arguments).
    ///
    /// # Panics
    /// If `seq` is over [`key::SEQ_MAX`], the user key is over [`USER_KEY_BYTES_MAX`] or the
    /// value over [`VALUE_BYTES_MAX`] (the engine checks these first). In debug builds, if the
    /// same `(user_key, seq, kind)` is inserted twice.
    pub fn insert(
        &self,
        user_key: &[u8],
        seq: u64,
        kind: Kind,
        value: &[u8],
    ) -> std::result::Result<(), MemtableFull> {
        assert!(seq <= key::SEQ_MAX, "sequence {seq} over SEQ_MAX");
        assert!(user_key.len() <= USER_KEY_BYTES_MAX, "user key of {} bytes", user_key.len());
        if !self.list.insert(user_key, key::trailer(seq, kind), value) {
            return Err(MemtableFull);
        }
        self.note_seq(seq);
        Ok(())
    }

    fn note_seq(&self, seq: u64) {
        // The order matters to `max_seq`: see the field comments.
        self.seq_max.fetch_max(seq, Ordering::Relaxed);
        self.seq_min.fetch_min(seq, Ordering::Release);
    }

    /// Inserts the range tombstone `[start, end) @ seq`. Safe to call from several threads at
    /// once; it never fills the memtable.
    ///
    /// # Panics
    /// If `start >= end` or `seq` is over [`key::SEQ_MAX`] (the engine checks ranges first).
    pub fn insert_range_tombstone(&self, start: &[u8], end: &[u8], seq: u64) {
        let t = RangeTombstone::new(start, end, seq);
        self.range_tombstones.write().push(t);
        self.has_range_tombstones.store(true, Ordering::Release);
        self.note_seq(seq);
    }

    /// Applies a batch's ops with sequence numbers from `first_seq` on, as [`Memtable::apply`]
    /// one at a time, loading ahead of each insert what later ones will touch first: the
    /// point-index bucket 16 ops ahead and the chain's newest node 8 ahead. In a memtable far
    /// larger than the CPU's caches each of the two is a miss an insert otherwise waits for in
    /// turn (in `shale serve` under pipelined SETs, 92% of the insert's own time sat on those
    /// two loads); started ahead, the misses of several inserts overlap.
    ///
    /// # Errors
    /// [`MemtableFull`] as [`Memtable::insert`], with the ops before the one that did not fit
    /// inserted.
    ///
    /// # Panics
    /// As [`Memtable::apply`].
    pub fn apply_all<'a>(
        &self,
        ops: impl Iterator<Item = BatchOp<'a>> + Clone,
        first_seq: u64,
    ) -> std::result::Result<(), MemtableFull> {
        const BUCKETS_AHEAD: usize = 16;
        const HEADS_AHEAD: usize = 8;
        let (mut buckets, mut heads) = (ops.clone(), ops.clone());
        buckets.by_ref().take(BUCKETS_AHEAD).for_each(|op| self.list.prefetch_bucket(op.key));
        heads.by_ref().take(HEADS_AHEAD).for_each(|op| self.list.prefetch_chain_head(op.key));
        for (i, op) in ops.enumerate() {
            if let Some(ahead) = buckets.next() {
                self.list.prefetch_bucket(ahead.key);
            }
            if let Some(ahead) = heads.next() {
                self.list.prefetch_chain_head(ahead.key);
            }
            self.apply(&op, first_seq + i as u64)?;
        }
        Ok(())
    }

    /// Applies one op of a batch with sequence number `seq`: a point entry into the skiplist,
    /// a range delete into the tombstone list.
    ///
    /// # Errors
    /// [`MemtableFull`] as [`Memtable::insert`].
    ///
    /// # Panics
    /// As [`Memtable::insert`] and [`Memtable::insert_range_tombstone`].
    pub fn apply(&self, op: &BatchOp<'_>, seq: u64) -> std::result::Result<(), MemtableFull> {
        match op.kind.point_kind() {
            Some(kind) => self.insert(op.key, seq, kind, op.value),
            None => {
                debug_assert_eq!(op.kind, OpKind::DeleteRange);
                self.insert_range_tombstone(op.key, op.value, seq);
                Ok(())
            }
        }
    }

    /// The newest entry of `user_key` with a sequence at or below `snapshot_seq` (clamped to
    /// [`key::SEQ_MAX`], so `u64::MAX` reads the latest). A deletion comes back as
    /// `(Kind::Delete, vec![])`, which tells the caller to stop searching older sources;
    /// `None` means this memtable knows nothing of the key at that snapshot.
    ///
    /// Point entries only: a range tombstone over the key is the caller's to weigh
    /// ([`Memtable::max_covering_tombstone_seq`]).
    pub fn get(&self, user_key: &[u8], snapshot_seq: u64) -> Option<(Kind, Vec<u8>)> {
        self.get_entry(user_key, snapshot_seq).map(|(_, kind, value)| (kind, value))
    }

    /// As [`Memtable::get`], with the sequence number of the entry found, to weigh it against
    /// range tombstones.
    pub fn get_entry(&self, user_key: &[u8], snapshot_seq: u64) -> Option<(u64, Kind, Vec<u8>)> {
        let (ikey, value) = self.list.get_point(user_key, snapshot_seq.min(key::SEQ_MAX))?;
        let found = key::parse(ikey).expect("memtable keys are built by insert");
        match found.kind {
            Kind::Delete => Some((found.seq, Kind::Delete, Vec::new())),
            Kind::Put => Some((found.seq, Kind::Put, value.to_vec())),
        }
    }

    /// The sequence number of the newest range tombstone over `user_key` that a reader at
    /// `snapshot_seq` sees, or 0. Scans the tombstone list.
    pub fn max_covering_tombstone_seq(&self, user_key: &[u8], snapshot_seq: u64) -> u64 {
        // A tombstone inserted before the read started was flagged before its write was
        // published (the store's last sequence), which the reader saw.
        if !self.has_range_tombstones.load(Ordering::Acquire) {
            return 0;
        }
        range_del::max_covering_seq(&self.range_tombstones.read(), user_key, snapshot_seq)
    }

    /// A copy of the range tombstones, in insertion order.
    pub fn range_tombstones(&self) -> Vec<RangeTombstone> {
        self.range_tombstones.read().clone()
    }

    /// Number of range tombstones.
    pub fn range_tombstone_count(&self) -> usize {
        self.range_tombstones.read().len()
    }

    /// An iterator over all entries in internal-key order. It keeps the memtable's memory
    /// alive and sees entries inserted while it runs at or after its position when it gets
    /// there.
    pub fn iter(self: &Arc<Self>) -> MemtableIter {
        MemtableIter { cursor: Cursor::new(Arc::clone(&self.list)) }
    }

    /// Memory taken from the system so far, in bytes (arena chunks, filled or not); at most
    /// [`Memtable::capacity_bytes`]. It grows a chunk (2 MiB, one huge page) at a time.
    pub fn approximate_bytes(&self) -> usize {
        self.list.arena().allocated_bytes()
    }

    /// Bytes of the point index's buckets, beside [`Memtable::approximate_bytes`]: allocated
    /// whole at creation, 8 bytes per KiB of capacity (2 MiB for a 64 MiB write buffer, whose
    /// memtable has 4 write buffers of capacity).
    pub fn point_index_bytes(&self) -> usize {
        self.list.point_index_bytes()
    }

    /// Bytes its entries take: every node with its index tower, key and value, as allocated
    /// (in-flight inserts count once allocated). What a write buffer size is compared with,
    /// as RocksDB compares its memtable's arena usage.
    pub fn used_bytes(&self) -> usize {
        self.list.node_bytes()
    }

    /// The memory bound given at creation, in bytes.
    pub fn capacity_bytes(&self) -> usize {
        self.list.arena().capacity_bytes()
    }

    /// Number of point entries (every version of every key counts; range tombstones do not).
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether nothing has been inserted: no point entry and no range tombstone.
    pub fn is_empty(&self) -> bool {
        self.len() == 0 && self.range_tombstone_count() == 0
    }

    /// The smallest sequence number inserted, `None` while empty.
    pub fn min_seq(&self) -> Option<u64> {
        let seq = self.seq_min.load(Ordering::Acquire);
        (seq != SEQ_NONE).then_some(seq)
    }

    /// The largest sequence number inserted, `None` while empty. Both bounds cover every
    /// insert that has returned; one still running may show in the entries first.
    pub fn max_seq(&self) -> Option<u64> {
        // Acquire on seq_min (in min_seq) makes the seq_max update of the insert that set it
        // visible, so the max read after it is never below the min.
        self.min_seq()?;
        Some(self.seq_max.load(Ordering::Relaxed))
    }
}

impl fmt::Debug for Memtable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Memtable")
            .field("len", &self.len())
            .field("range_tombstones", &self.range_tombstone_count())
            .field("approximate_bytes", &self.approximate_bytes())
            .field("capacity_bytes", &self.capacity_bytes())
            .field("min_seq", &self.min_seq())
            .field("max_seq", &self.max_seq())
            .finish()
    }
}

/// A cursor over a memtable's entries; see [`InternalIterator`].
///
/// `next` walks the rest of the current key's point-index chain, then on to the next key in
/// the skiplist; `prev` and `seek_for_prev` search again from the top of the skiplist (nodes
/// have no back links), O(log n) each. It never fails: `status` is always `Ok`.
pub struct MemtableIter {
    cursor: Cursor,
}

impl MemtableIter {
    /// Moves to the newest entry of the next user key, past the current key's older versions
    /// without visiting them (a flush that keeps none of them). Must be valid.
    pub fn next_user_key(&mut self) {
        self.cursor.next_user_key();
    }
}

impl fmt::Debug for MemtableIter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = self.valid().then(|| self.key());
        f.debug_struct("MemtableIter").field("key", &key).finish()
    }
}

impl InternalIterator for MemtableIter {
    fn valid(&self) -> bool {
        self.cursor.valid()
    }

    fn seek_to_first(&mut self) {
        self.cursor.seek_to_first();
    }

    fn seek_to_last(&mut self) {
        self.cursor.seek_to_last();
    }

    fn seek(&mut self, target: &[u8]) {
        self.cursor.seek(target);
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        self.cursor.seek_for_prev(target);
    }

    fn next(&mut self) {
        self.cursor.next();
    }

    fn prev(&mut self) {
        self.cursor.prev();
    }

    fn key(&self) -> &[u8] {
        self.cursor.key()
    }

    fn value(&self) -> &[u8] {
        self.cursor.value()
    }

    fn status(&self) -> Result<()> {
        Ok(())
    }
}
