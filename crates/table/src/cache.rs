//! The block cache: blocks of every table by (table, block number), replaced by CLOCK: the
//! space layer's CLOCK core (`shale_space::clock_cache`, the one cache of every engine), each
//! block charged 1, dirty blocks kept.
//!
//! Write-behind: a change leaves its blocks here *dirty* rather than writing them at once,
//! so that the changes of several transactions to one block (a table's last block, as
//! appends fill it) reach the device as one write, made when a commit needs them durable
//! (`Shared::write_dirty`, called by the group flush's leader). Eviction takes clean
//! blocks only, so a cached block is always at least as new as the device's, and a block
//! that is not cached is what the device holds: a block whose write is in flight outside
//! the store's mutex is clean but pinned until the write ends (`Storage::begin_write_dirty`).
//!
//! Reads outside the store's mutex (a scan's read-ahead, a point read's blocks): a block not
//! cached is registered ([`BlockCache::begin_read`]) before its read is sent, and whatever
//! may change that block meanwhile ([`BlockCache::put`], or [`BlockCache::get`], the way to
//! change a cached block in place) makes the read *stale*: its bytes are then thrown away
//! at [`BlockCache::end_read`], since the block may have been changed, written and even
//! evicted again while the read was in flight. A read that nothing raced is what the device
//! holds, which is the block's newest content. Caching such a read (`end_read`'s fill)
//! leaves the other reads of the block in flight fresh: it adds the very bytes they read.

use std::collections::HashMap;

use parking_lot::Mutex;

use shale_space::clock_cache::{Admit, Clock, DirtyPolicy};

/// The cache.
#[derive(Debug)]
pub struct BlockCache {
    /// The blocks; dirty ones (changed since they were last written) are never evicted.
    blocks: Clock<(u32, u64), Vec<u8>>,
    /// Blocks being read outside the store's mutex: reads in flight, and whether a put has
    /// made them stale. Behind a mutex of its own so that a point read holding the store's
    /// lock shared can register its reads ([`BlockCache::begin_read`] takes `&self`).
    reading: Mutex<HashMap<(u32, u64), (u32, bool)>>,
    /// Blocks read fresh by point reads that ended with the store's lock shared
    /// ([`BlockCache::defer`]): still registered in `reading` (so a put makes them stale),
    /// cached by the next holder of the lock exclusive ([`BlockCache::take_deferred`]).
    deferred: Mutex<Vec<Deferred>>,
}

/// A block read fresh with the store's lock shared, waiting to be cached: (table, block
/// number) and its bytes.
type Deferred = ((u32, u64), Vec<u8>);

/// Most blocks waiting to be cached (1 MiB of blocks): a point read never waits for the
/// store's lock exclusive to cache what it read, so where no holder comes to cache them,
/// a block read past this many is not kept (its read ends, and a later read loads it again).
pub const DEFERRED_MAX: usize = 256;

impl BlockCache {
    /// A cache of at most `capacity` blocks (more while more than that are dirty).
    pub fn new(capacity: usize) -> BlockCache {
        BlockCache {
            blocks: Clock::new(capacity, DirtyPolicy::Keep),
            reading: Mutex::new(HashMap::new()),
            deferred: Mutex::new(Vec::new()),
        }
    }

    /// The block, marked used, to change: a read of it in flight outside the store's
    /// mutex is made stale, as by [`BlockCache::put`] (read-only callers use
    /// [`BlockCache::get_shared`]).
    pub fn get(&mut self, key: (u32, u64)) -> Option<&mut Vec<u8>> {
        self.make_reads_stale(key);
        self.blocks.get(&key)
    }

    /// Marks the reads of `key` in flight stale: its bytes change.
    fn make_reads_stale(&mut self, key: (u32, u64)) {
        if let Some(r) = self.reading.get_mut().get_mut(&key) {
            r.1 = true;
        }
    }

    /// The block, marked used, through a shared reference (the cached point read, with
    /// the store's lock shared).
    pub fn get_shared(&self, key: (u32, u64)) -> Option<&Vec<u8>> {
        self.blocks.get_shared(&key)
    }

    /// Adds or replaces a block (a dirty one stays dirty), evicting a clean block the hand
    /// finds not used since it last passed when full.
    pub fn put(&mut self, key: (u32, u64), block: Vec<u8>) {
        self.make_reads_stale(key);
        self.fill(key, block);
    }

    /// Adds or replaces a block as [`BlockCache::put`] does, leaving the reads of it in
    /// flight fresh: for a block read fresh from the device, whose bytes are those the
    /// other reads get (nothing changed it since they were registered, or they are stale
    /// already), so that caching one reader's copy does not send the others to read again.
    fn fill(&mut self, key: (u32, u64), block: Vec<u8>) {
        let dirty = self.blocks.is_dirty(&key);
        self.blocks.insert(key, block, 1, 0, Admit::Used);
        if dirty {
            self.blocks.mark_dirty(&key);
        }
    }

    /// Registers a read of `key` from the device outside the store's mutex; false (and
    /// nothing registered) when the block is cached, so there is nothing to read. Through
    /// `&self`: with the store's lock shared no put runs meanwhile (puts take `&mut self`).
    pub fn begin_read(&self, key: (u32, u64)) -> bool {
        if self.blocks.contains(&key) {
            return false;
        }
        self.reading.lock().entry(key).or_insert((0, false)).0 += 1;
        true
    }

    /// Whether the registered read of `key` is still fresh (nothing put the block since).
    pub fn read_is_fresh(&self, key: (u32, u64)) -> bool {
        self.reading.lock().get(&key).is_some_and(|r| !r.1)
    }

    /// Ends a read registered by [`BlockCache::begin_read`] without caching anything,
    /// through `&self` (a point read ending with the store's lock shared whose block was
    /// stale or not valid: the exclusive path reads it again).
    pub fn forget_read(&self, key: (u32, u64)) {
        unregister(&mut self.reading.lock(), key);
    }

    /// Hands a block read fresh, its read still registered, to the next holder of the
    /// store's lock exclusive to cache ([`BlockCache::end_read`] then, which drops it if a
    /// put made it stale meanwhile); where [`DEFERRED_MAX`] wait already, ends its read
    /// instead. Returns how many wait.
    pub fn defer(&self, key: (u32, u64), block: Vec<u8>) -> usize {
        let mut deferred = self.deferred.lock();
        if deferred.len() >= DEFERRED_MAX {
            unregister(&mut self.reading.lock(), key);
        } else {
            deferred.push((key, block));
        }
        deferred.len()
    }

    /// How many blocks are deferred.
    pub fn deferred_blocks(&self) -> usize {
        self.deferred.lock().len()
    }

    /// The deferred blocks, for the caller to end with [`BlockCache::end_read`].
    pub fn take_deferred(&mut self) -> Vec<Deferred> {
        std::mem::take(self.deferred.get_mut())
    }

    /// Ends a read registered by [`BlockCache::begin_read`], caching `block` (`None`: a
    /// failed read, a blank block) unless the read is stale or the block cached since.
    pub fn end_read(&mut self, key: (u32, u64), block: Option<Vec<u8>>) {
        let stale = unregister(self.reading.get_mut(), key);
        if let Some(b) = block.filter(|_| !stale && !self.blocks.contains(&key)) {
            self.fill(key, b);
        }
    }

    /// Pins a cached block: it is not evicted until unpinned (a write loading the other
    /// blocks it spans). False when it is not cached.
    pub fn pin(&mut self, key: (u32, u64)) -> bool {
        self.blocks.pin(&key)
    }

    /// Takes one pin off a block.
    pub fn unpin(&mut self, key: (u32, u64)) {
        self.blocks.unpin(&key);
    }

    /// Marks a cached block changed: it stays cached until [`BlockCache::take_dirty`].
    pub fn mark_dirty(&mut self, key: (u32, u64)) {
        assert!(self.blocks.mark_dirty(&key), "a dirty block is cached");
    }

    /// Dirty blocks.
    pub fn dirty_blocks(&self) -> usize {
        self.blocks.dirty_count()
    }

    /// The dirty blocks in block order, marked clean: the caller writes them.
    pub fn take_dirty(&mut self) -> Vec<(u32, u64)> {
        let mut dirty = self.blocks.take_dirty();
        dirty.sort_unstable();
        dirty
    }

    /// The block's bytes, not marking it used.
    pub fn peek(&self, key: (u32, u64)) -> Option<&Vec<u8>> {
        self.blocks.peek(&key)
    }

    /// Drops every block of `table`, dirty ones included (the table is gone).
    pub fn drop_table(&mut self, table: u32) {
        self.blocks.remove_where(|(t, _)| *t == table);
    }

    /// Most blocks held while few are dirty.
    pub fn capacity(&self) -> usize {
        self.blocks.capacity()
    }

    /// Blocks held.
    pub fn blocks(&self) -> usize {
        self.blocks.len()
    }
}

/// Drops one registration of a read of `key` (the entry goes with the last); returns whether
/// a put made the read stale.
fn unregister(reading: &mut HashMap<(u32, u64), (u32, bool)>, key: (u32, u64)) -> bool {
    let r = reading.get_mut(&key).expect("a read ended was begun");
    let stale = r.1;
    r.0 -= 1;
    if r.0 == 0 {
        reading.remove(&key);
    }
    stale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirty_blocks_are_never_evicted() {
        let mut c = BlockCache::new(8);
        for n in 0..8 {
            c.put((1, n), vec![n as u8]);
            c.mark_dirty((1, n));
        }
        for n in 8..20 {
            c.put((1, n), vec![n as u8]);
        }
        for n in 0..8 {
            assert_eq!(c.peek((1, n)), Some(&vec![n as u8]), "dirty block {n}");
        }
        assert_eq!(c.take_dirty(), (0..8).map(|n| (1, n)).collect::<Vec<_>>());
        assert_eq!(c.dirty_blocks(), 0);
        for n in 20..40 {
            c.put((1, n), vec![0]);
        }
        assert!(c.blocks() <= 9, "clean again, they are evicted: {}", c.blocks());
    }

    #[test]
    fn a_deferred_block_raced_by_a_put_is_not_cached() {
        let mut c = BlockCache::new(8);
        // Read with the store's lock shared, deferred; a change puts the block, which is
        // then evicted: the deferred bytes (older) must not come back.
        assert!(c.begin_read((1, 3)));
        assert_eq!(c.defer((1, 3), vec![0]), 1);
        c.put((1, 3), vec![3]);
        c.blocks.remove(&(1, 3));
        // A second read deferred and not raced is cached.
        assert!(c.begin_read((1, 4)));
        c.defer((1, 4), vec![4]);
        for (k, b) in c.take_deferred() {
            c.end_read(k, Some(b));
        }
        assert_eq!(c.peek((1, 3)), None, "a stale deferred block is dropped");
        assert_eq!(c.peek((1, 4)), Some(&vec![4]));
        // A read forgotten (stale or damaged at the shared end) leaves nothing registered.
        assert!(c.begin_read((1, 5)));
        c.forget_read((1, 5));
        assert!(c.reading.get_mut().is_empty());
        assert!(c.take_deferred().is_empty());
    }

    #[test]
    fn caching_a_fresh_read_leaves_the_others_fresh_and_a_change_does_not() {
        let mut c = BlockCache::new(8);
        // Two reads of block 6 in flight; the first one's bytes are cached: the second
        // read the same bytes, so it stays fresh.
        assert!(c.begin_read((1, 6)));
        assert!(c.begin_read((1, 6)));
        c.end_read((1, 6), Some(vec![6]));
        assert!(c.read_is_fresh((1, 6)));
        // Two reads of block 7; one's bytes cached, then changed in place (`get`, as a
        // change does): the other read is stale.
        assert!(c.begin_read((1, 7)));
        assert!(c.begin_read((1, 7)));
        c.end_read((1, 7), Some(vec![7]));
        assert!(c.read_is_fresh((1, 7)));
        c.get((1, 7)).expect("cached")[0] = 70;
        assert!(!c.read_is_fresh((1, 7)));
        // A read-only look (`get_shared`) stales nothing.
        assert!(c.read_is_fresh((1, 6)));
        assert_eq!(c.get_shared((1, 6)), Some(&vec![6]));
        assert!(c.read_is_fresh((1, 6)));
        c.end_read((1, 6), Some(vec![6]));
        c.end_read((1, 7), Some(vec![7]));
        assert_eq!(c.peek((1, 7)), Some(&vec![70]), "the stale read is not cached");
        assert!(c.reading.get_mut().is_empty());
    }

    #[test]
    fn a_read_raced_by_a_put_is_thrown_away() {
        let mut c = BlockCache::new(8);
        assert!(c.begin_read((1, 1)));
        c.end_read((1, 1), Some(vec![1]));
        assert_eq!(c.peek((1, 1)), Some(&vec![1]), "a fresh read is cached");
        assert!(!c.begin_read((1, 1)), "cached: nothing to read");
        // Two reads in flight; the block is put, changed and evicted meanwhile.
        assert!(c.begin_read((1, 2)));
        assert!(c.begin_read((1, 2)));
        c.put((1, 2), vec![2]);
        c.blocks.remove(&(1, 2));
        assert!(!c.read_is_fresh((1, 2)));
        c.end_read((1, 2), Some(vec![0]));
        c.end_read((1, 2), Some(vec![0]));
        assert_eq!(c.peek((1, 2)), None, "stale reads are not cached");
        assert!(c.reading.get_mut().is_empty());
        // A read begun after the put is fresh again.
        assert!(c.begin_read((1, 2)));
        c.end_read((1, 2), Some(vec![2]));
        assert_eq!(c.peek((1, 2)), Some(&vec![2]));
    }
}
