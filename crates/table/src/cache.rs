//! The block cache: blocks of every table by (table, block number), least recently used
//! evicted. Write-through: a cached block is always what its last write sent to the device,
//! so eviction never writes.

use std::collections::HashMap;

/// The cache.
#[derive(Debug)]
pub struct BlockCache {
    blocks: HashMap<(u32, u64), (Vec<u8>, u64)>,
    clock: u64,
    capacity: usize,
}

impl BlockCache {
    /// A cache of at most `capacity` blocks.
    pub fn new(capacity: usize) -> BlockCache {
        BlockCache { blocks: HashMap::new(), clock: 0, capacity }
    }

    /// The block, marked used.
    pub fn get(&mut self, key: (u32, u64)) -> Option<&mut Vec<u8>> {
        self.clock += 1;
        let now = self.clock;
        self.blocks.get_mut(&key).map(|(b, used)| {
            *used = now;
            b
        })
    }

    /// Adds or replaces a block, evicting the least recently used eighth when full.
    pub fn put(&mut self, key: (u32, u64), block: Vec<u8>) {
        if self.blocks.len() >= self.capacity && !self.blocks.contains_key(&key) {
            let mut ages: Vec<(u64, (u32, u64))> =
                self.blocks.iter().map(|(k, (_, used))| (*used, *k)).collect();
            ages.sort_unstable();
            for (_, k) in ages.iter().take(self.capacity / 8 + 1) {
                self.blocks.remove(k);
            }
        }
        self.clock += 1;
        self.blocks.insert(key, (block, self.clock));
    }

    /// Drops every block of `table`.
    pub fn drop_table(&mut self, table: u32) {
        self.blocks.retain(|(t, _), _| *t != table);
    }

    /// Most blocks held.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Blocks held.
    pub fn blocks(&self) -> usize {
        self.blocks.len()
    }
}
