//! The primary hash index of a table: a hash of the primary key to the positions of the
//! row records with that hash. Only the hash is kept, so every hit is confirmed by reading
//! the row's key from its block (the paper's <hash, block, offset>; an erased row's entry is
//! removed rather than flagged). Memory only: rebuilt at open by scanning the table's
//! blocks; spilling to index pages on the volume past a memory threshold is not built yet.

use std::collections::HashMap;

use xxhash_rust::xxh3::xxh3_64;

use crate::block::Pos;

/// A table's primary index.
#[derive(Debug)]
pub struct Index {
    mask: u64,
    map: HashMap<u64, Vec<Pos>>,
    entries: usize,
}

impl Index {
    /// An empty index keeping `hash_bits` bits of each key's hash (64; fewer only in tests,
    /// to make collisions common).
    pub fn new(hash_bits: u32) -> Index {
        let mask = if hash_bits >= 64 { u64::MAX } else { (1u64 << hash_bits) - 1 };
        Index { mask, map: HashMap::new(), entries: 0 }
    }

    fn hash(&self, key: &[u8]) -> u64 {
        xxh3_64(key) & self.mask
    }

    /// Positions of the rows whose key hashes as `key` does.
    pub fn candidates(&self, key: &[u8]) -> Vec<Pos> {
        self.map.get(&self.hash(key)).cloned().unwrap_or_default()
    }

    /// Adds `key` at `pos` (no-op if there already).
    pub fn insert(&mut self, key: &[u8], pos: Pos) {
        let v = self.map.entry(self.hash(key)).or_default();
        if !v.contains(&pos) {
            v.push(pos);
            self.entries += 1;
        }
    }

    /// Removes the entry of `key` at `pos`, if any.
    pub fn remove(&mut self, key: &[u8], pos: Pos) {
        let h = self.hash(key);
        if let Some(v) = self.map.get_mut(&h) {
            let before = v.len();
            v.retain(|p| *p != pos);
            self.entries -= before - v.len();
            if v.is_empty() {
                self.map.remove(&h);
            }
        }
    }

    /// Every position in the index.
    pub fn positions(&self) -> Vec<Pos> {
        self.map.values().flatten().copied().collect()
    }

    /// Entries (rows, committed or not).
    pub fn entries(&self) -> usize {
        self.entries
    }
}
