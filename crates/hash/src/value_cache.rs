//! Values stored and read, kept in memory for the next reads of their keys, and readable by
//! the callers' threads as well as the worker's.
//!
//! The engine's index answers where a record is, never what it holds, so without this every
//! retrieve is a device read; a store's hot keys (YCSB's zipfian reads) then cost the device
//! what an LSM's block cache answers from memory. A hit answered by the worker still costs
//! two thread hand-offs (the submission and the ticket), so callers look here first
//! (`caller_reads.rs`).
//!
//! The worker changes the cache, and so do callers that read a record themselves
//! (`caller_reads.rs`), with these rules:
//! - a value enters from a read only if the index still names the record read when the read
//!   completes (a store applied while the read was in flight has moved the key elsewhere, and
//!   its old value must not come back). The worker is the index's only writer, so nothing can
//!   move the key between its check and its insert; a caller checks and inserts under one
//!   hold of the index's read lock, so the key cannot move between them either;
//! - a store or delete removes the key under the index's write lock, just before it changes
//!   the index, and so before its request is answered. A caller's insert (under the read
//!   lock) comes before the removal, which takes it out, or after the change, when its check
//!   fails. A read that starts after the answer, on any thread, takes the key's lock after
//!   the removal released it (the answer is handed over through the ticket's lock, which
//!   orders them), so it misses or finds a value the index named after the change;
//! - a store's value enters after the index names its record, before the answer. Not
//!   before: a reader could find the new value, and a later reader, finding it evicted,
//!   would prove the key absent from an index that does not name it yet.
//!
//! A hit is a value no acknowledged store or delete has replaced.
//!
//! A garbage-collection copy moves a record without changing its value, so it leaves the
//! cache alone. The budget counts key and value bytes. Each lock's part (`shards` of them,
//! each with its share of the budget, so callers on several threads and the worker rarely
//! wait on one another) is the space layer's CLOCK core (`shale_space::clock_cache`, the
//! one cache of every engine): a hit sets a bit, and eviction takes entries not used since
//! the hand last passed, so a scan of cold keys goes through without pushing out hot ones.
//! Entries are found by the key's 64-bit hash and hold their key: two keys of one hash
//! share a place (the later replaces the earlier), and a lookup checks the key.

use parking_lot::Mutex;
use shale_space::clock_cache::{Admit, Clock, DirtyPolicy, shard_of};

/// Bytes an entry is charged beyond its key and value (the map's slot and the ring's).
const ENTRY_OVERHEAD_BYTES: usize = 64;
/// Most locks the cache is split under: callers of one store are a few threads.
const SHARDS_MAX: usize = 16;
/// Least budget a lock is given: below it the cache is split less (a small cache is one LRU
/// list, so a share is never too small to hold a value).
const SHARD_BYTES_MIN: usize = 1 << 20;

/// One lock's part of the cache: entries by the key's hash, each holding its key and value.
type Part = Clock<u64, (Vec<u8>, Vec<u8>)>;

/// A cache of values by key, bounded in bytes, behind `SHARDS_MAX` locks at most.
pub(crate) struct ValueCache {
    parts: Vec<Mutex<Part>>,
    /// Each part's budget.
    part_bytes: usize,
}

impl ValueCache {
    /// An empty cache of at most `capacity_bytes` (0: nothing is kept).
    pub(crate) fn new(capacity_bytes: usize) -> ValueCache {
        let shards = (capacity_bytes / SHARD_BYTES_MIN).clamp(1, SHARDS_MAX);
        let part_bytes = capacity_bytes / shards;
        let parts =
            (0..shards).map(|_| Mutex::new(Clock::new(part_bytes, DirtyPolicy::Keep))).collect();
        ValueCache { parts, part_bytes }
    }

    fn charge(key: &[u8], value: &[u8]) -> usize {
        key.len() + value.len() + ENTRY_OVERHEAD_BYTES
    }

    /// The key's hash, and the lock of its part.
    fn part(&self, key: &[u8]) -> (u64, &Mutex<Part>) {
        let h = xxhash_rust::xxh3::xxh3_64(key);
        (h, &self.parts[shard_of(h, self.parts.len())])
    }

    /// A copy of the value of `key`, if kept (and marks it used).
    pub(crate) fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        if self.part_bytes == 0 {
            return None;
        }
        let (h, part) = self.part(key);
        let mut p = part.lock();
        p.get(&h).filter(|(k, _)| k == key).map(|(_, v)| v.clone())
    }

    /// Whether `key` is kept (its value is current: see the module's rules).
    pub(crate) fn contains(&self, key: &[u8]) -> bool {
        if self.part_bytes == 0 {
            return false;
        }
        let (h, part) = self.part(key);
        part.lock().peek(&h).is_some_and(|(k, _)| k == key)
    }

    /// Keeps `value` for `key`, evicting entries of its part (CLOCK order) to stay within
    /// the budget; a value larger than a quarter of a part's budget is not kept (and an
    /// older one of the key goes). By the module's rules only.
    pub(crate) fn insert(&self, key: Vec<u8>, value: Vec<u8>) {
        let charge = Self::charge(&key, &value);
        let (h, part) = self.part(&key);
        let mut p = part.lock();
        if charge > self.part_bytes / 4 {
            let old = p.remove(&h);
            drop(p);
            drop(old);
            return;
        }
        let evicted = p.insert(h, (key, value), charge, 0, Admit::Used);
        // Freed with the part's lock let go: a reader of the part (a caller's get) does not
        // wait out the frees (values of other threads' heaps, microseconds each).
        drop(p);
        drop(evicted);
    }

    /// Forgets `key` (and whatever shares its hash). The worker's alone.
    pub(crate) fn remove(&self, key: &[u8]) {
        let (h, part) = self.part(key);
        part.lock().remove(&h);
    }

    /// Bytes charged now, over every part.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.parts.iter().map(|p| p.lock().usage()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_holds_and_entries_unused_since_the_hand_passed_go_first() {
        let c = ValueCache::new(1000);
        for i in 0..20u8 {
            c.insert(vec![i], vec![i; 100]);
            assert!(c.bytes() <= 1000);
        }
        // Each entry is charged 165 bytes: six fit, the newest.
        assert!(c.get(&[13]).is_none());
        assert!(c.get(&[14]).is_some());
        c.get(&[14]);
        c.insert(vec![20], vec![0; 100]);
        assert!(c.get(&[14]).is_some(), "used recently, kept");
        assert!(c.get(&[15]).is_none(), "not used since the hand passed, it went");
        c.remove(&[14]);
        assert!(c.get(&[14]).is_none());
        assert!(!c.contains(&[14]));
        assert!(c.contains(&[16]));
        c.insert(vec![1], vec![0; 400]);
        assert!(c.get(&[1]).is_none(), "over a quarter of the budget");
        let empty = ValueCache::new(0);
        empty.insert(vec![1], vec![1]);
        assert!(empty.get(&[1]).is_none());
        assert_eq!(empty.bytes(), 0);
    }

    #[test]
    fn a_large_cache_is_split_and_each_part_keeps_its_share() {
        let c = ValueCache::new(32 << 20);
        assert_eq!(c.parts.len(), SHARDS_MAX);
        // 64 MiB of 4 KiB values through a 32 MiB cache: the total stays within budget, and
        // every part holds some.
        for i in 0..16_384u32 {
            c.insert(i.to_le_bytes().to_vec(), vec![1; 4096]);
        }
        assert!(c.bytes() <= 32 << 20);
        assert!(c.bytes() > 30 << 20, "nearly full: {}", c.bytes());
        assert!(c.parts.iter().all(|p| p.lock().usage() > 0));
        assert_eq!(ValueCache::new(3 << 20).parts.len(), 3);
        assert_eq!(ValueCache::new(100).parts.len(), 1);
    }
}
