//! The block cache: decoded SST blocks (data, index, filter), shared by every reader.
//!
//! Sharded LRU with a byte budget. A key is `(cache_id, block offset)`, where the cache id is
//! unique per open SST. Each shard is a mutex over a hash map (key -> entry and its last-use
//! tick) and an ordered map (tick -> key) whose first element is the least recently used; ticks
//! only grow, so the pair is an LRU list without unsafe links. Sharding keeps readers on
//! different blocks from queueing on one lock. A capacity of 0 disables caching: `insert`
//! hands the block straight back and `get` always misses.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::sst::block::Block;
use crate::sst::bloom::BloomFilter;

/// Shards of a cache: enough that two cores rarely meet on one lock.
pub const CACHE_SHARDS: usize = 16;

/// What the cache holds.
#[derive(Debug)]
pub enum Cached {
    /// A data or index block.
    Block(Arc<Block>),
    /// A filter block.
    Filter(BloomFilter),
}

impl Cached {
    /// Bytes charged against the budget.
    pub fn charge_bytes(&self) -> usize {
        match self {
            Cached::Block(b) => b.bytes(),
            Cached::Filter(f) => f.bytes(),
        }
    }
}

type CacheKey = (u64, u64);

#[derive(Default)]
struct Shard {
    entries: HashMap<CacheKey, (Arc<Cached>, u64)>,
    lru: BTreeMap<u64, CacheKey>,
    usage_bytes: usize,
    tick: u64,
}

impl Shard {
    fn touch(&mut self, key: CacheKey) -> Option<Arc<Cached>> {
        self.tick += 1;
        let tick = self.tick;
        let (value, last) = self.entries.get_mut(&key)?;
        self.lru.remove(last);
        *last = tick;
        self.lru.insert(tick, key);
        Some(value.clone())
    }

    fn remove(&mut self, key: CacheKey) {
        if let Some((value, tick)) = self.entries.remove(&key) {
            self.lru.remove(&tick);
            self.usage_bytes -= value.charge_bytes();
        }
    }
}

/// A sharded LRU cache of decoded blocks with a byte budget.
pub struct BlockCache {
    shards: Vec<Mutex<Shard>>,
    shard_capacity_bytes: usize,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("capacity_bytes", &self.capacity_bytes())
            .field("usage_bytes", &self.usage_bytes())
            .finish()
    }
}

impl BlockCache {
    /// A cache of about `capacity_bytes` (split evenly over the shards; 0 disables it).
    pub fn new(capacity_bytes: usize) -> BlockCache {
        BlockCache {
            shards: (0..CACHE_SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            shard_capacity_bytes: capacity_bytes / CACHE_SHARDS,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    fn shard(&self, key: CacheKey) -> &Mutex<Shard> {
        // Block offsets of one SST differ in their low bits, cache ids in theirs: mix both so
        // the blocks of one SST spread over every shard.
        let h =
            (key.0.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ key.1).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
        &self.shards[(h >> 60) as usize % CACHE_SHARDS]
    }

    /// The block at `offset` of SST `cache_id`, if cached; counts a hit or a miss.
    pub fn get(&self, cache_id: u64, offset: u64) -> Option<Arc<Cached>> {
        let found = self.shard((cache_id, offset)).lock().touch((cache_id, offset));
        let counter = if found.is_some() { &self.hits } else { &self.misses };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Caches `value` as the block at `offset` of SST `cache_id`, evicting the least recently
    /// used blocks of its shard to stay within budget, and returns it shared. A block larger
    /// than a shard's budget is returned without being cached.
    pub fn insert(&self, cache_id: u64, offset: u64, value: Cached) -> Arc<Cached> {
        let value = Arc::new(value);
        let charge = value.charge_bytes();
        if charge > self.shard_capacity_bytes {
            return value;
        }
        let key = (cache_id, offset);
        let mut shard = self.shard(key).lock();
        shard.remove(key);
        while shard.usage_bytes + charge > self.shard_capacity_bytes {
            let (_, oldest) = shard.lru.pop_first().expect("usage above zero means entries");
            let (evicted, _) = shard.entries.remove(&oldest).expect("lru and map agree");
            shard.usage_bytes -= evicted.charge_bytes();
        }
        shard.tick += 1;
        let tick = shard.tick;
        shard.entries.insert(key, (value.clone(), tick));
        shard.lru.insert(tick, key);
        shard.usage_bytes += charge;
        value
    }

    /// Drops every block of SST `cache_id` (when its extent is freed).
    pub fn forget(&self, cache_id: u64) {
        for shard in &self.shards {
            let mut shard = shard.lock();
            let keys: Vec<CacheKey> =
                shard.entries.keys().filter(|k| k.0 == cache_id).copied().collect();
            for k in keys {
                shard.remove(k);
            }
        }
    }

    /// Lookups that found their block.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Lookups that did not.
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    /// Bytes of the cached blocks.
    pub fn usage_bytes(&self) -> usize {
        self.shards.iter().map(|s| s.lock().usage_bytes).sum()
    }

    /// The budget: the sum of the shards' budgets.
    pub fn capacity_bytes(&self) -> usize {
        self.shard_capacity_bytes * CACHE_SHARDS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sst::block::BlockBuilder;

    /// A block of exactly `bytes` bytes (a multiple of 4, at least 8).
    fn block(bytes: usize) -> Cached {
        let mut data = vec![0u8; bytes - 8];
        data.extend_from_slice(&0u32.to_le_bytes());
        data.extend_from_slice(&1u32.to_le_bytes());
        let b = Block::new(data, 0).unwrap();
        assert_eq!(b.bytes(), bytes);
        Cached::Block(Arc::new(b))
    }

    #[test]
    fn eviction_keeps_usage_within_budget_and_counts_hits() {
        let cache = BlockCache::new(16 * 4096);
        for i in 0..1000u64 {
            cache.insert(1, i * 4096, block(1024));
            assert!(cache.usage_bytes() <= cache.capacity_bytes());
        }
        // Each shard holds at most four 1 KiB blocks.
        assert!(cache.usage_bytes() > cache.capacity_bytes() / 2);
        assert!(cache.get(1, 999 * 4096).is_some());
        assert!(cache.get(1, 0).is_none());
        assert_eq!((cache.hits(), cache.misses()), (1, 1));
    }

    #[test]
    fn least_recently_used_goes_first() {
        // One shard's worth of budget per shard: 3 blocks of 1 KiB fit, a fourth evicts.
        let cache = BlockCache::new(CACHE_SHARDS * 3 * 1024);
        // Find four offsets of one shard.
        let shard_of = |o: u64| cache.shard((7, o)) as *const _;
        let first = shard_of(0);
        let same: Vec<u64> =
            (0..).map(|i| i * 4096).filter(|&o| shard_of(o) == first).take(4).collect();
        for &o in &same[..3] {
            cache.insert(7, o, block(1024));
        }
        assert!(cache.get(7, same[0]).is_some()); // same[1] is now the oldest
        cache.insert(7, same[3], block(1024));
        assert!(cache.get(7, same[1]).is_none());
        for o in [same[0], same[2], same[3]] {
            assert!(cache.get(7, o).is_some());
        }
        cache.forget(7);
        assert_eq!(cache.usage_bytes(), 0);
    }

    #[test]
    fn zero_capacity_disables_and_oversized_blocks_pass_through() {
        let cache = BlockCache::new(0);
        let v = cache.insert(1, 0, block(64));
        assert_eq!(v.charge_bytes(), 64);
        assert!(cache.get(1, 0).is_none());
        assert_eq!(cache.usage_bytes(), 0);
        let small = BlockCache::new(CACHE_SHARDS * 100);
        small.insert(1, 0, block(128));
        assert_eq!(small.usage_bytes(), 0);
        let mut b = BlockBuilder::new(16);
        b.add(&crate::key::encode(b"k", 1, crate::key::Kind::Put), b"v");
        let reinserted =
            small.insert(1, 0, Cached::Block(Arc::new(Block::new(b.finish(), 0).unwrap())));
        assert!(reinserted.charge_bytes() <= 100);
        assert_eq!(small.usage_bytes(), reinserted.charge_bytes());
    }
}
