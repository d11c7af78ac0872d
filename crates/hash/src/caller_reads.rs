//! Reads answered on the caller's thread, with no hand-off to the worker.
//!
//! A read the worker answers from memory still costs two thread hand-offs: the submission
//! wakes the worker, and the ticket wakes the caller (measured: a zipfian 4 KiB get through
//! the worker at queue depth 1 spent more time in those wake-ups than in the lookup). So the
//! calls look here first, and only what this cannot answer goes to the worker:
//! - a value in the value cache is the key's current value (`value_cache.rs`: the worker
//!   removes a key before the index changes, and so before any answer, and fills it only
//!   from records the index still names);
//! - an index lookup that finds no entry for the key proves it absent. The worker changes
//!   the index before it answers a store or delete, under the index's write lock, so a read
//!   after the answer sees the change. The lookup must need no device read (the bounded
//!   index's page is cached) and no wait (the index and the bounded table's locks are free:
//!   the worker may hold them across a page read or a doubling), or the worker answers.
//!
//! A key the index has an entry for but the cache lacks needs its record read and its key
//! compared: the worker's (its device queue keeps many reads in flight).

use std::sync::atomic::Ordering;

use crate::index::Probe;
use crate::shard::Shard;

/// `key`'s value, or its absence, where known without the worker; `None` where not.
pub(crate) fn retrieve(shard: &Shard, key: &[u8]) -> Option<Option<Vec<u8>>> {
    if let Some(value) = shard.values.get(key) {
        shard.counters.cache_hits.fetch_add(1, Ordering::Relaxed);
        shard.counters.caller_reads.fetch_add(1, Ordering::Relaxed);
        return Some(Some(value));
    }
    if known_absent(shard, key) {
        shard.counters.caller_reads.fetch_add(1, Ordering::Relaxed);
        return Some(None);
    }
    None
}

/// The bits of an exist (bit `i % 8` of byte `i / 8` for `keys[i]`), where every key's
/// presence is known without the worker; `None` where one is not.
pub(crate) fn exist(shard: &Shard, keys: &[&[u8]]) -> Option<Vec<u8>> {
    let mut bits = vec![0u8; keys.len().div_ceil(8)];
    for (i, key) in keys.iter().enumerate() {
        if shard.values.contains(key) {
            bits[i / 8] |= 1 << (i % 8);
        } else if !known_absent(shard, key) {
            return None;
        }
    }
    shard.counters.caller_reads.fetch_add(1, Ordering::Relaxed);
    Some(bits)
}

/// Whether the index, read without a device read or a wait, has no entry for `key`.
fn known_absent(shard: &Shard, key: &[u8]) -> bool {
    let Some(index) = shard.index.try_read() else { return false };
    matches!(index.probe_resident(shard.digest(key), key), Some(Probe::Absent))
}
