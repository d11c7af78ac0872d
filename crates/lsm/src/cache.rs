//! The block cache: decoded SST blocks (data, and index and filter with
//! `Options::cache_index_and_filter_blocks`), shared by every reader.
//!
//! Sharded CLOCK (second chance) with a byte budget: each shard is a mutex over the space
//! layer's CLOCK core (`shale_space::clock_cache`, the one cache of every engine), whose map
//! entries hold the block, its referenced bit and its place in a ring of keys; a hit is one
//! hash probe that sets the bit, and eviction sweeps the ring from its hand, clearing set bits
//! and evicting the first entry whose bit was clear. A key is `(cache_id, block offset)`,
//! where the cache id is unique per open SST. A block enters cold (its bit clear): one read
//! once, by a scan or as a compaction's output, goes before blocks read again.
//! That approximates LRU (an entry used since the hand last passed survives one more sweep) at
//! the cost of one hash lookup per hit: an exact LRU list in safe code (a map of last-use
//! ticks) cost a tree removal and insertion on every hit, 5% of a read-only YCSB run.
//! Sharding keeps readers on different blocks from queueing on one lock; a cache below
//! 16 x [`SHARD_BYTES_MIN`] has fewer shards, so that an SST's index or filter block fits one.
//! A capacity of 0 disables caching: `insert` hands the block straight back and `get` always
//! misses.
//!
//! There are no priorities: RocksDB's LRU cache keeps index and filter blocks in a
//! high-priority pool (`cache_index_and_filter_blocks_with_high_priority`), this cache treats
//! every entry alike. An SST's index and filter are looked up on every point read of that SST,
//! so CLOCK's referenced bit keeps them about as well as a priority would while the SST is
//! read at all; a pool of its own would need a second ring per shard and a split budget.
//! Hits, misses and charged bytes are counted per [`BlockKind`], so what the index and filter
//! cost the cache can be seen.
//!
//! Each shard keeps a few buffers of the data blocks it evicted (those no reader still held)
//! and hands them out for the next blocks to be cached ([`BlockCache::buffer`]), so blocks
//! come and go without the allocator seeing them. Why: a block is allocated by the thread
//! that read or wrote it (a flush or compaction thread for prepopulated blocks) and freed by
//! whichever thread evicts it; thread-caching allocators (glibc's arenas, mimalloc, jemalloc)
//! keep such frees in the allocating thread's pools. `shale bench` with 5M keys and a 256 MiB
//! cache reached 629 MiB of RSS on glibc's malloc with a live heap of 377 MiB (heaptrack),
//! 387 MiB with `MALLOC_ARENA_MAX=1`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use parking_lot::Mutex;
use shale_space::clock_cache::{Admit, Clock, DirtyPolicy, shard_of};

use crate::sst::block::Block;
use crate::sst::bloom::BloomFilter;

/// Most shards of a cache: enough that two cores rarely meet on one lock.
pub const CACHE_SHARDS: usize = 16;
/// Smallest budget of a shard: a cache smaller than [`CACHE_SHARDS`] of these has fewer
/// shards (at least one). A block larger than its shard's budget is never cached, and an
/// index or filter block of a 64 MiB SST is several hundred KiB: with 16 shards of 512 KiB (an
/// 8 MiB cache) a 560 KB filter never fitted, and with `cache_index_and_filter_blocks` every
/// lookup read it again (readrandom at 3,578 ops/s against 194,327 with the blocks held,
/// docs/lsm.md). RocksDB's HyperClockCache takes shards of at least 32 MiB for the same
/// reason; 4 MiB keeps 16 shards from a 64 MiB cache up.
pub const SHARD_BYTES_MIN: usize = 4 << 20;

/// Most bytes of evicted block buffers a shard keeps for reuse, and the fraction of its budget
/// they may reach: an insert evicts about what it adds, so a few buffers cover the blocks
/// read between two evictions; more would be memory the budget does not count.
const SPARE_BYTES_MAX: usize = 1 << 20;
const SPARE_FRACTION: usize = 64;
/// New block buffers are rounded up to this, so that one evicted block's buffer fits most
/// blocks of the same configured size (they differ by about an entry).
const BUFFER_ROUND_BYTES: usize = 512;

/// What a cached block is to its SST; hits, misses and bytes are counted per kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockKind {
    /// A data block.
    Data,
    /// The index block.
    Index,
    /// The filter block.
    Filter,
}

/// Kinds of blocks, for per-kind counters.
const KINDS: usize = 3;

impl BlockKind {
    fn at(self) -> usize {
        match self {
            BlockKind::Data => 0,
            BlockKind::Index => 1,
            BlockKind::Filter => 2,
        }
    }
}

/// What the cache holds: a cheap handle (one shared pointer) that a lookup clones out.
#[derive(Clone, Debug)]
pub enum Cached {
    /// A data block.
    Data(Arc<Block>),
    /// An index block.
    Index(Arc<Block>),
    /// A filter block.
    Filter(Arc<BloomFilter>),
}

impl Cached {
    /// Bytes charged against the budget: what the block's buffer takes, room included.
    pub fn charge_bytes(&self) -> usize {
        match self {
            Cached::Data(b) | Cached::Index(b) => b.allocated_bytes(),
            Cached::Filter(f) => f.bytes(),
        }
    }

    /// Which kind of block this is.
    pub fn kind(&self) -> BlockKind {
        match self {
            Cached::Data(_) => BlockKind::Data,
            Cached::Index(_) => BlockKind::Index,
            Cached::Filter(_) => BlockKind::Filter,
        }
    }
}

type CacheKey = (u64, u64);

/// One shard: the CLOCK core, and buffers of the data blocks it evicted.
struct Shard {
    clock: Clock<CacheKey, Cached>,
    /// Buffers of evicted data blocks, for [`BlockCache::buffer`]; at most `spare_limit`
    /// bytes of capacity in all.
    spare: Vec<Vec<u8>>,
    spare_bytes: usize,
    spare_limit: usize,
}

impl Shard {
    fn touch(&mut self, key: CacheKey) -> Option<Cached> {
        self.clock.get(&key).cloned()
    }

    fn insert(&mut self, key: CacheKey, value: Cached) {
        let (charge, kind) = (value.charge_bytes(), value.kind().at());
        for gone in self.clock.insert(key, value, charge, kind, Admit::Cold) {
            self.recycle(gone.value);
        }
    }

    /// Keeps the buffer of a removed data block that no reader holds, while there is room.
    fn recycle(&mut self, value: Cached) {
        if self.spare_bytes >= self.spare_limit {
            return;
        }
        let Cached::Data(block) = value else { return };
        let Ok(block) = Arc::try_unwrap(block) else { return };
        let buf = block.into_data();
        if self.spare_bytes + buf.capacity() <= self.spare_limit {
            self.spare_bytes += buf.capacity();
            self.spare.push(buf);
        }
    }

    /// A spare buffer with room for `bytes` and not much more, if there is one.
    fn take_spare(&mut self, bytes: usize) -> Option<Vec<u8>> {
        let fits =
            |b: &Vec<u8>| (bytes..=bytes + bytes / 4 + BUFFER_ROUND_BYTES).contains(&b.capacity());
        let at = self.spare.iter().rposition(fits)?;
        let mut buf = self.spare.swap_remove(at);
        self.spare_bytes -= buf.capacity();
        buf.clear();
        Some(buf)
    }
}

/// A sharded CLOCK cache of decoded blocks with a byte budget.
pub struct BlockCache {
    shards: Vec<Mutex<Shard>>,
    /// Each shard's budget: fixed by the capacity the cache was made with, lowered and raised
    /// again by [`BlockCache::set_capacity_bytes`] (the number of shards stays).
    shard_capacity_bytes: AtomicUsize,
    /// False for a cache made with a capacity of 0, which caches nothing whatever its budget
    /// is set to later.
    enabled: bool,
    /// Lookups that found their block, and that did not, by the kind looked for.
    hits: [AtomicU64; KINDS],
    misses: [AtomicU64; KINDS],
    /// Blocks cached (RocksDB's `rocksdb.block.cache.add`).
    adds: AtomicU64,
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
    /// A cache of about `capacity_bytes` (split evenly over the shards, of at least
    /// [`SHARD_BYTES_MIN`] each where there are several; 0 disables it).
    pub fn new(capacity_bytes: usize) -> BlockCache {
        let shards = (capacity_bytes / SHARD_BYTES_MIN).clamp(1, CACHE_SHARDS);
        let shard_capacity_bytes = capacity_bytes / shards;
        let spare_limit = (shard_capacity_bytes / SPARE_FRACTION).min(SPARE_BYTES_MAX);
        BlockCache {
            shards: (0..shards)
                .map(|_| {
                    Mutex::new(Shard {
                        clock: Clock::new(shard_capacity_bytes, DirtyPolicy::Keep),
                        spare: Vec::new(),
                        spare_bytes: 0,
                        spare_limit,
                    })
                })
                .collect(),
            shard_capacity_bytes: AtomicUsize::new(shard_capacity_bytes),
            enabled: capacity_bytes > 0,
            hits: Default::default(),
            misses: Default::default(),
            adds: AtomicU64::new(0),
        }
    }

    fn shard(&self, key: CacheKey) -> &Mutex<Shard> {
        // Block offsets of one SST differ in their low bits, cache ids in theirs: mix both so
        // the blocks of one SST spread over every shard.
        let h = key.0.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ key.1;
        &self.shards[shard_of(h, self.shards.len())]
    }

    /// The block at `offset` of SST `cache_id`, if cached; counts a hit or a miss of `kind`,
    /// the kind of block the caller looks for.
    pub fn get(&self, cache_id: u64, offset: u64, kind: BlockKind) -> Option<Cached> {
        let found = self.shard((cache_id, offset)).lock().touch((cache_id, offset));
        let counter = if found.is_some() { &self.hits } else { &self.misses };
        counter[kind.at()].fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Whether the block at `offset` of SST `cache_id` is cached, without counting a lookup or
    /// marking it used: for a caller deciding what to read before the lookups that count.
    pub fn contains(&self, cache_id: u64, offset: u64) -> bool {
        self.shard((cache_id, offset)).lock().clock.contains(&(cache_id, offset))
    }

    /// Caches `value` as the block at `offset` of SST `cache_id`, evicting blocks of its shard
    /// (CLOCK order) to stay within budget, and returns it shared. A block larger
    /// than a shard's budget is returned without being cached.
    pub fn insert(&self, cache_id: u64, offset: u64, value: Cached) -> Cached {
        let charge = value.charge_bytes();
        if charge > self.shard_capacity_bytes.load(Ordering::Relaxed) {
            return value;
        }
        let key = (cache_id, offset);
        self.shard(key).lock().insert(key, value.clone());
        self.adds.fetch_add(1, Ordering::Relaxed);
        value
    }

    /// Caches `value` like [`BlockCache::insert`] only if its shard has room for it without
    /// evicting anything; returns whether it did. For blocks nobody asked for yet (a
    /// compaction's outputs), which may fill free room but must not push out what readers use.
    pub fn insert_if_room(&self, cache_id: u64, offset: u64, value: Cached) -> bool {
        let key = (cache_id, offset);
        let mut shard = self.shard(key).lock();
        if !shard.clock.has_room(value.charge_bytes()) {
            return false;
        }
        shard.insert(key, value);
        self.adds.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Whether the shard of the block at `offset` of SST `cache_id` has room for `bytes` more
    /// without evicting (a hint: another thread may take the room first).
    pub fn has_room(&self, cache_id: u64, offset: u64, bytes: usize) -> bool {
        self.shard((cache_id, offset)).lock().clock.has_room(bytes)
    }

    /// An empty buffer with room for at least `bytes`, for a data block about to be cached as
    /// the block at `offset` of SST `cache_id`: the buffer of a block its shard evicted if one
    /// fits, else a new one (rounded up, so that it fits blocks a little larger later).
    pub fn buffer(&self, cache_id: u64, offset: u64, bytes: usize) -> Vec<u8> {
        if self.capacity_bytes() > 0 {
            if let Some(buf) = self.shard((cache_id, offset)).lock().take_spare(bytes) {
                return buf;
            }
        }
        Vec::with_capacity(bytes.next_multiple_of(BUFFER_ROUND_BYTES))
    }

    /// Bytes of evicted block buffers kept for [`BlockCache::buffer`] (not charged to the
    /// budget; at most a sixty-fourth of it).
    pub fn spare_bytes(&self) -> usize {
        self.shards.iter().map(|s| s.lock().spare_bytes).sum()
    }

    /// Blocks cached by [`BlockCache::insert`] (those too large for a shard not counted).
    pub fn adds(&self) -> u64 {
        self.adds.load(Ordering::Relaxed)
    }

    /// Drops every block of SST `cache_id` (when its extent is freed).
    pub fn forget(&self, cache_id: u64) {
        for shard in &self.shards {
            let mut shard = shard.lock();
            for gone in shard.clock.remove_where(|k| k.0 == cache_id) {
                shard.recycle(gone.value);
            }
        }
    }

    /// Lookups that found their block.
    pub fn hits(&self) -> u64 {
        self.hits.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// Lookups that did not.
    pub fn misses(&self) -> u64 {
        self.misses.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// Lookups for a block of `kind` that found it.
    pub fn hits_of(&self, kind: BlockKind) -> u64 {
        self.hits[kind.at()].load(Ordering::Relaxed)
    }

    /// Lookups for a block of `kind` that did not.
    pub fn misses_of(&self, kind: BlockKind) -> u64 {
        self.misses[kind.at()].load(Ordering::Relaxed)
    }

    /// Bytes of the cached blocks.
    pub fn usage_bytes(&self) -> usize {
        self.shards.iter().map(|s| s.lock().clock.usage()).sum()
    }

    /// Bytes of the cached blocks of `kind`.
    pub fn usage_bytes_of(&self, kind: BlockKind) -> usize {
        self.shards.iter().map(|s| s.lock().clock.usage_of(kind.at())).sum()
    }

    /// The budget: the sum of the shards' budgets.
    pub fn capacity_bytes(&self) -> usize {
        self.shard_capacity_bytes.load(Ordering::Relaxed) * self.shards.len()
    }

    /// Sets the budget to about `capacity_bytes` (split evenly over the shards the cache was
    /// made with), evicting blocks in CLOCK order where a shard holds more; the buffers it
    /// evicts go back to the allocator, and the spare buffers shrink with the budget. A cache
    /// made with a capacity of 0 stays disabled. For the memory limit, which lowers the
    /// budget as the index and filter blocks held beside the cache grow
    /// (`memory_limit::block_cache_within`).
    pub fn set_capacity_bytes(&self, capacity_bytes: usize) {
        if !self.enabled {
            return;
        }
        let per_shard = capacity_bytes / self.shards.len();
        if self.shard_capacity_bytes.swap(per_shard, Ordering::Relaxed) == per_shard {
            return;
        }
        let spare_limit = (per_shard / SPARE_FRACTION).min(SPARE_BYTES_MAX);
        for shard in &self.shards {
            let evicted = {
                let mut shard = shard.lock();
                shard.spare_limit = spare_limit;
                while shard.spare_bytes > spare_limit {
                    let buf = shard.spare.pop().expect("spare bytes count spare buffers");
                    shard.spare_bytes -= buf.capacity();
                }
                shard.clock.set_capacity(per_shard)
            };
            // Freed outside the shard's lock: readers of other blocks need not wait for it.
            drop(evicted);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sst::block::BlockBuilder;

    /// A block of exactly `bytes` bytes (a multiple of 4, at least 8).
    fn block(bytes: usize) -> Cached {
        let mut data = Vec::with_capacity(bytes);
        data.resize(bytes - 8, 0);
        data.extend_from_slice(&0u32.to_le_bytes());
        data.extend_from_slice(&1u32.to_le_bytes());
        let b = Block::new(data, 0).unwrap();
        assert_eq!(b.bytes(), bytes);
        Cached::Data(Arc::new(b))
    }

    #[test]
    fn eviction_keeps_usage_within_budget_and_counts_hits() {
        let cache = BlockCache::new(16 * 4096);
        for i in 0..1000u64 {
            cache.insert(1, i * 4096, block(1024));
            assert!(cache.usage_bytes() <= cache.capacity_bytes());
        }
        // One shard (the cache is far below `SHARD_BYTES_MIN`) of 64 1 KiB blocks.
        assert!(cache.usage_bytes() > cache.capacity_bytes() / 2);
        assert!(cache.get(1, 999 * 4096, BlockKind::Data).is_some());
        assert!(cache.get(1, 0, BlockKind::Data).is_none());
        assert_eq!((cache.hits(), cache.misses()), (1, 1));
    }

    #[test]
    fn a_block_used_since_the_last_sweep_gets_a_second_chance() {
        // One shard: 3 blocks of 1 KiB fit, a fourth evicts.
        let cache = BlockCache::new(3 * 1024);
        // Find four offsets of one shard.
        let shard_of = |o: u64| cache.shard((7, o)) as *const _;
        let first = shard_of(0);
        let same: Vec<u64> =
            (0..).map(|i| i * 4096).filter(|&o| shard_of(o) == first).take(4).collect();
        for &o in &same[..3] {
            cache.insert(7, o, block(1024));
        }
        // Referenced: the sweep passes it over.
        assert!(cache.get(7, same[0], BlockKind::Data).is_some());
        cache.insert(7, same[3], block(1024));
        assert!(cache.get(7, same[1], BlockKind::Data).is_none());
        for o in [same[0], same[2], same[3]] {
            assert!(cache.get(7, o, BlockKind::Data).is_some());
        }
        // All three are referenced now: the sweep clears every bit and evicts one of them.
        cache.insert(7, same[1], block(1024));
        let kept = [same[0], same[2], same[3]]
            .into_iter()
            .filter(|&o| cache.get(7, o, BlockKind::Data).is_some());
        assert_eq!(kept.count(), 2);
        assert!(cache.usage_bytes() <= cache.capacity_bytes());
        cache.forget(7);
        assert_eq!(cache.usage_bytes(), 0);
    }

    #[test]
    fn a_lowered_budget_evicts_down_to_it_and_a_raised_one_fills_again() {
        let cache = BlockCache::new(32 << 20);
        let mut i = 0;
        while cache.usage_bytes() + 4096 <= cache.capacity_bytes() {
            cache.insert(1, i * 4096, block(4096));
            i += 1;
        }
        assert!(cache.usage_bytes() > 31 << 20);
        cache.set_capacity_bytes(4 << 20);
        assert_eq!(cache.capacity_bytes(), 4 << 20);
        assert!(cache.usage_bytes() <= 4 << 20 && cache.usage_bytes() > 3 << 20);
        assert!(cache.spare_bytes() <= (4 << 20) / SPARE_FRACTION);
        for j in i..i + 10_000 {
            cache.insert(1, j * 4096, block(4096));
            assert!(cache.usage_bytes() <= 4 << 20);
        }
        cache.set_capacity_bytes(32 << 20);
        for j in i + 10_000..i + 20_000 {
            cache.insert(1, j * 4096, block(4096));
        }
        assert!(cache.usage_bytes() > 31 << 20, "raised again, it fills again");
        // A cache made disabled stays so.
        let off = BlockCache::new(0);
        off.set_capacity_bytes(8 << 20);
        off.insert(1, 0, block(4096));
        assert!(off.get(1, 0, BlockKind::Data).is_none());
    }

    #[test]
    fn inserts_if_room_never_evict() {
        let cache = BlockCache::new(64 << 10);
        let mut i = 0;
        while cache.insert_if_room(1, i * 4096, block(4000)) {
            i += 1;
        }
        assert!(i > 8, "a 64 KiB cache takes several 4 KB blocks: {i}");
        let full = cache.usage_bytes();
        // Every block inserted is still there, and one that needs room is refused.
        assert!((0..i).all(|j| cache.contains(1, j * 4096)));
        assert!(!cache.has_room(1, i * 4096, 4000));
        assert!(!cache.insert_if_room(1, i * 4096, block(4000)));
        assert_eq!(cache.usage_bytes(), full);
        // A plain insert makes room by evicting.
        cache.insert(1, i * 4096, block(4000));
        assert!(cache.contains(1, i * 4096));
        assert!((0..i).any(|j| !cache.contains(1, j * 4096)));
    }

    #[test]
    fn evicted_block_buffers_are_handed_out_again() {
        // One shard of 256 1 KiB blocks, with spare room for four buffers.
        let cache = BlockCache::new(256 * 1024);
        assert_eq!(cache.shards.len(), 1);
        // Blocks in buffers of their own, so that the spare ones pile up.
        let data_block = |o: u64| {
            let mut buf = Vec::with_capacity(1024);
            buf.resize(1024 - 8, 0);
            buf.extend_from_slice(&0u32.to_le_bytes());
            buf.extend_from_slice(&1u32.to_le_bytes());
            Cached::Data(Arc::new(Block::new(buf, o).unwrap()))
        };
        // The first block stays held by its reader (the Arc `insert` returns).
        let held = cache.insert(3, 0, data_block(0));
        for i in 1..256 {
            cache.insert(3, i * 4096, data_block(i * 4096));
        }
        assert_eq!(cache.spare_bytes(), 0, "nothing evicted yet");
        // The hand starts at the held block: evicted, but its buffer is not reused.
        cache.insert(3, 256 * 4096, data_block(256 * 4096));
        assert!(cache.get(3, 0, BlockKind::Data).is_none());
        assert_eq!(cache.spare_bytes(), 0);
        // The next ones are kept, up to the spare limit.
        for i in 257..270 {
            cache.insert(3, i * 4096, data_block(i * 4096));
        }
        assert_eq!(cache.spare_bytes(), 4 * 1024);
        // A block cached in a kept buffer takes it from the spares; evicting one gives one.
        let mut buf = cache.buffer(3, 270 * 4096, 1024);
        assert_eq!(cache.spare_bytes(), 3 * 1024);
        buf.resize(1024 - 8, 0);
        buf.extend_from_slice(&0u32.to_le_bytes());
        buf.extend_from_slice(&1u32.to_le_bytes());
        cache.insert(3, 270 * 4096, Cached::Data(Arc::new(Block::new(buf, 0).unwrap())));
        assert_eq!(cache.spare_bytes(), 4 * 1024);
        // The next buffer is a kept one (its allocation, not a new one), emptied.
        let kept: Vec<*const u8> =
            cache.shards[0].lock().spare.iter().map(|b| b.as_ptr()).collect();
        let again = cache.buffer(3, 1 << 30, 1000);
        assert!(again.is_empty() && again.capacity() >= 1000);
        assert!(kept.contains(&again.as_ptr()));
        assert_eq!(cache.spare_bytes(), 3 * 1024);
        // A buffer far larger than asked for is not handed out for a small block.
        assert!(!kept.contains(&cache.buffer(3, 1 << 30, 10).as_ptr()));
        drop(held);
    }

    #[test]
    fn small_caches_have_fewer_shards_so_large_blocks_fit() {
        for (capacity, shards) in [
            (0, 1),
            (8 << 20, 2),
            (SHARD_BYTES_MIN * 5 + 7, 5),
            (64 << 20, CACHE_SHARDS),
            (1 << 30, CACHE_SHARDS),
        ] {
            let cache = BlockCache::new(capacity);
            assert_eq!(cache.shards.len(), shards, "{capacity}");
            assert!(cache.capacity_bytes() <= capacity);
            assert!(cache.capacity_bytes() + shards > capacity, "{capacity}");
        }
        // In an 8 MiB cache a 1 MiB block (a large SST's filter) is cached, and every shard
        // is used.
        let cache = BlockCache::new(8 << 20);
        cache.insert(1, 0, block(1 << 20));
        assert!(cache.get(1, 0, BlockKind::Data).is_some());
        for i in 1..64 {
            cache.insert(1, i * 4096, block(1024));
        }
        assert!(cache.shards.iter().all(|s| s.lock().clock.usage() > 0));
    }

    #[test]
    fn hits_misses_and_bytes_are_counted_per_kind() {
        let cache = BlockCache::new(8 * 1024);
        let Cached::Data(b) = block(1024) else { unreachable!() };
        cache.insert(1, 0, Cached::Data(b.clone()));
        cache.insert(1, 4096, Cached::Index(b.clone()));
        let mut data = vec![0xffu8; 512];
        data.push(6); // probes
        cache.insert(1, 8192, Cached::Filter(Arc::new(BloomFilter::new(data, 8192).unwrap())));
        assert_eq!(cache.usage_bytes_of(BlockKind::Data), 1024);
        assert_eq!(cache.usage_bytes_of(BlockKind::Index), 1024);
        assert_eq!(cache.usage_bytes_of(BlockKind::Filter), 512);
        assert_eq!(cache.usage_bytes(), 2560);
        assert!(cache.get(1, 4096, BlockKind::Index).is_some());
        assert!(cache.get(1, 8192, BlockKind::Filter).is_some());
        assert!(cache.get(2, 4096, BlockKind::Index).is_none());
        assert!(cache.get(2, 0, BlockKind::Data).is_none());
        assert_eq!((cache.hits_of(BlockKind::Index), cache.misses_of(BlockKind::Index)), (1, 1));
        assert_eq!((cache.hits_of(BlockKind::Filter), cache.misses_of(BlockKind::Filter)), (1, 0));
        assert_eq!((cache.hits_of(BlockKind::Data), cache.misses_of(BlockKind::Data)), (0, 1));
        assert_eq!((cache.hits(), cache.misses()), (2, 2));
        // Replacing an entry by one of another kind moves its bytes; forgetting clears them.
        cache.insert(1, 4096, Cached::Data(b));
        assert_eq!(cache.usage_bytes_of(BlockKind::Index), 0);
        assert_eq!(cache.usage_bytes_of(BlockKind::Data), 2048);
        cache.forget(1);
        for kind in [BlockKind::Data, BlockKind::Index, BlockKind::Filter] {
            assert_eq!(cache.usage_bytes_of(kind), 0, "{kind:?}");
        }
    }

    #[test]
    fn zero_capacity_disables_and_oversized_blocks_pass_through() {
        let cache = BlockCache::new(0);
        let v = cache.insert(1, 0, block(64));
        assert_eq!(v.charge_bytes(), 64);
        assert!(cache.get(1, 0, BlockKind::Data).is_none());
        assert_eq!(cache.usage_bytes(), 0);
        let small = BlockCache::new(100);
        small.insert(1, 0, block(128));
        assert_eq!(small.usage_bytes(), 0);
        let mut b = BlockBuilder::new(16);
        b.add(&crate::key::encode(b"k", 1, crate::key::Kind::Put), b"v");
        let reinserted =
            small.insert(1, 0, Cached::Data(Arc::new(Block::new(b.finish(), 0).unwrap())));
        assert!(reinserted.charge_bytes() <= 100);
        assert_eq!(small.usage_bytes(), reinserted.charge_bytes());
    }
}
