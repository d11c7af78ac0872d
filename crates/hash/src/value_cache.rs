//! Values read from the log, kept in memory for the next reads of their keys.
//!
//! The engine's index answers where a record is, never what it holds, so without this every
//! retrieve is a device read; a store's hot keys (YCSB's zipfian reads) then cost the device
//! what an LSM's block cache answers from memory.
//!
//! Kept correct by the worker, the only thread that touches it, with one rule each way:
//! - a value enters only from a read whose record the index still names when the read
//!   completes (a store applied while the read was in flight has moved the key elsewhere, and
//!   its old value must not come back);
//! - a store or delete, once applied to the index, removes the key, before its request is
//!   answered; so a read that starts after the answer misses the cache or finds the new value.
//!
//! The first rule guards a read that completes after a store of its key applied. This
//! worker finishes its reads before the batches behind them apply, so `tests/value_cache.rs`
//! does not reach that case (removing the check passes it; removing the second rule fails
//! it); the check stays for any ordering that would.
//!
//! A garbage-collection copy moves a record without changing its value, so it leaves the
//! cache alone. The budget counts key and value bytes; least recently used entries go first.

use lru::LruCache;

/// Bytes an entry is charged beyond its key and value (the map's slot and the list's links).
const ENTRY_OVERHEAD_BYTES: usize = 64;

/// A cache of values by key, bounded in bytes.
pub(crate) struct ValueCache {
    entries: LruCache<Vec<u8>, Vec<u8>>,
    bytes: usize,
    capacity_bytes: usize,
}

impl ValueCache {
    /// An empty cache of at most `capacity_bytes` (0: nothing is kept).
    pub(crate) fn new(capacity_bytes: usize) -> ValueCache {
        ValueCache { entries: LruCache::unbounded(), bytes: 0, capacity_bytes }
    }

    fn charge(key: &[u8], value: &[u8]) -> usize {
        key.len() + value.len() + ENTRY_OVERHEAD_BYTES
    }

    /// The value of `key`, if kept (and marks it recently used).
    pub(crate) fn get(&mut self, key: &[u8]) -> Option<&Vec<u8>> {
        self.entries.get(key)
    }

    /// Keeps `value` for `key`, evicting the least recently used entries to stay within the
    /// budget; a value larger than a quarter of it is not kept.
    pub(crate) fn insert(&mut self, key: Vec<u8>, value: Vec<u8>) {
        let charge = Self::charge(&key, &value);
        if charge > self.capacity_bytes / 4 {
            self.remove(&key);
            return;
        }
        if let Some(old) = self.entries.put(key.clone(), value) {
            self.bytes -= Self::charge(&key, &old);
        }
        self.bytes += charge;
        while self.bytes > self.capacity_bytes {
            let (k, v) = self.entries.pop_lru().expect("bytes are charged to entries");
            self.bytes -= Self::charge(&k, &v);
        }
    }

    /// Forgets `key`.
    pub(crate) fn remove(&mut self, key: &[u8]) {
        if let Some(old) = self.entries.pop(key) {
            self.bytes -= Self::charge(key, &old);
        }
    }

    /// Bytes charged now.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_holds_and_the_least_recently_used_go_first() {
        let mut c = ValueCache::new(1000);
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
        assert!(c.get(&[15]).is_none(), "the least recently used went");
        c.remove(&[14]);
        assert!(c.get(&[14]).is_none());
        c.insert(vec![1], vec![0; 400]);
        assert!(c.get(&[1]).is_none(), "over a quarter of the budget");
        let empty = &mut ValueCache::new(0);
        empty.insert(vec![1], vec![1]);
        assert!(empty.get(&[1]).is_none());
        assert_eq!(empty.bytes(), 0);
    }
}
