//! The one cache of shale's engines: a CLOCK (second chance) replacement over a hash map,
//! with a budget in charge units, per-user charging, pinned entries and dirty entries.
//! Every engine's cache is this core with what is its own around it: the lsm engine's block
//! cache (sharded, decoded SST blocks, buffers of evicted blocks reused), the hash engine's
//! value cache (sharded, values by key) and its bounded index's page cache (bucket frames,
//! dirty frames written back as they go), the table engine's block cache (write-behind
//! dirty blocks, reads outside the store's mutex).
//!
//! Why CLOCK: a hit is one hash probe that sets a bit, where an exact LRU list moves an entry
//! on every hit (a map of last-use ticks cost a tree removal and insertion per hit, 5% of a
//! read-only YCSB run of the lsm engine), and a scan passes the hand once without pushing
//! out what is used again (LRU's list is flushed by one). Eviction sweeps a ring of keys from
//! its hand, clearing set bits, and evicts the first entry whose bit was clear and that is
//! neither pinned nor (unless the cache is told dirty entries may go, written back by their
//! caller) dirty.
//!
//! Each entry is stored in the map itself (key, value, bit, place in the ring): a hit reads
//! one bucket. The structure is not locked: a caller puts it behind a mutex, or one per
//! shard ([`shard_of`] spreads keys).
//!
//! - **Budget and charges:** every entry is charged what its caller says (bytes, or 1 for a
//!   cache counted in frames or blocks); [`Clock::insert`] evicts until the new entry fits.
//!   Where only pinned or dirty entries are left, the cache goes over its budget rather than
//!   fail (the table engine's write-behind holds dirty blocks until their commit writes
//!   them); [`Clock::usage`] says by how much.
//! - **Users:** each entry is charged to one of up to [`USERS_MAX`] users (the lsm engine's
//!   data, index and filter blocks, say), whose charges are kept apart ([`Clock::usage_of`]).
//! - **Pinned:** a pinned entry is never evicted (pins count; [`Clock::pin`],
//!   [`Clock::unpin`]).
//! - **Dirty:** a dirty entry stays until the caller takes it ([`Clock::take_dirty`]) or, in
//!   a cache made with [`DirtyPolicy::WriteBack`], until the hand evicts it and
//!   [`Clock::insert`] hands it back to be written.

use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};

use rustc_hash::FxHashMap;

/// Most users one cache charges apart.
pub const USERS_MAX: usize = 4;

/// What eviction does with a dirty entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirtyPolicy {
    /// Never evicted: it stays until [`Clock::take_dirty`] marks it clean (write-behind,
    /// written when the caller's commit needs it).
    Keep,
    /// Evicted like a clean one, and handed back by [`Clock::insert`] for the caller to
    /// write (write-back on eviction).
    WriteBack,
}

/// Whether a new entry starts as used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// Not used yet: the hand's first pass takes it unless it is used by then, so blocks
    /// read once (a scan, a compaction's output) go before those read again.
    Cold,
    /// Used: it survives the hand's first pass (an entry its caller is about to use).
    Used,
}

/// An entry the cache let go of.
#[derive(Debug, PartialEq, Eq)]
pub struct Evicted<K, V> {
    /// Its key.
    pub key: K,
    /// Its value.
    pub value: V,
    /// It was dirty: the caller writes it back (only in a [`DirtyPolicy::WriteBack`] cache).
    pub dirty: bool,
}

#[derive(Debug)]
struct Entry<V> {
    value: V,
    charge: usize,
    user: u8,
    /// Set by every use, also through a shared reference ([`Clock::get_shared`]); cleared
    /// by the hand. Relaxed: a hint for eviction, ordering nothing.
    referenced: AtomicBool,
    dirty: bool,
    pins: u32,
    /// Where the key sits in the ring.
    ring_at: usize,
}

/// A CLOCK cache: see the module comment.
#[derive(Debug)]
pub struct Clock<K, V> {
    entries: FxHashMap<K, Entry<V>>,
    /// The keys in ring order; `None` is a free slot (listed in `free`).
    ring: Vec<Option<K>>,
    free: Vec<usize>,
    hand: usize,
    capacity: usize,
    usage: usize,
    user_usage: [usize; USERS_MAX],
    dirty: usize,
    policy: DirtyPolicy,
}

impl<K: Copy + Eq + Hash, V> Clock<K, V> {
    /// An empty cache of `capacity` charge units.
    pub fn new(capacity: usize, policy: DirtyPolicy) -> Clock<K, V> {
        Clock {
            entries: FxHashMap::default(),
            ring: Vec::new(),
            free: Vec::new(),
            hand: 0,
            capacity,
            usage: 0,
            user_usage: [0; USERS_MAX],
            dirty: 0,
            policy,
        }
    }

    /// An empty cache whose map and ring have room for `entries` from the start (a cache
    /// whose memory is fixed when it is made, such as a page cache of frames).
    pub fn with_room(capacity: usize, policy: DirtyPolicy, entries: usize) -> Clock<K, V> {
        let mut c = Clock::new(capacity, policy);
        c.entries.reserve(entries);
        c.ring.reserve(entries);
        c
    }

    /// The value of `key`, marked used.
    pub fn get(&mut self, key: &K) -> Option<&mut V> {
        let e = self.entries.get_mut(key)?;
        *e.referenced.get_mut() = true;
        Some(&mut e.value)
    }

    /// The value of `key`, marked used, through a shared reference: for readers that share
    /// the cache under a read lock (the table engine's cached point reads).
    pub fn get_shared(&self, key: &K) -> Option<&V> {
        let e = self.entries.get(key)?;
        if !e.referenced.load(Ordering::Relaxed) {
            // Only when clear: a store to a bit already set would take the cache line from
            // every other reader of it for nothing.
            e.referenced.store(true, Ordering::Relaxed);
        }
        Some(&e.value)
    }

    /// The value of `key`, not marking it used.
    pub fn peek(&self, key: &K) -> Option<&V> {
        self.entries.get(key).map(|e| &e.value)
    }

    /// Whether `key` is cached.
    pub fn contains(&self, key: &K) -> bool {
        self.entries.contains_key(key)
    }

    /// Caches `value` under `key`, charged `charge` to `user` (below [`USERS_MAX`]), used or
    /// not as `admit` says; replaces an entry of the key (whose pins and dirtiness go with it: the caller
    /// replaces what it holds). Evicts entries, in CLOCK order, until the new one fits the
    /// budget or only pinned and kept dirty entries are left, and returns what it evicted
    /// and what it replaced.
    ///
    /// # Panics
    /// If `user` is [`USERS_MAX`] or more.
    pub fn insert(
        &mut self,
        key: K,
        value: V,
        charge: usize,
        user: usize,
        admit: Admit,
    ) -> Vec<Evicted<K, V>> {
        assert!(user < USERS_MAX, "user {user} of a cache of {USERS_MAX}");
        let mut out = Vec::new();
        if let Some(old) = self.remove(&key) {
            out.push(old);
        }
        while self.usage + charge > self.capacity {
            match self.evict_one() {
                Some(e) => out.push(e),
                None => break,
            }
        }
        let ring_at = match self.free.pop() {
            Some(at) => {
                self.ring[at] = Some(key);
                at
            }
            None => {
                self.ring.push(Some(key));
                self.ring.len() - 1
            }
        };
        let e = Entry {
            value,
            charge,
            user: user as u8,
            referenced: AtomicBool::new(admit == Admit::Used),
            dirty: false,
            pins: 0,
            ring_at,
        };
        self.entries.insert(key, e);
        self.usage += charge;
        self.user_usage[user] += charge;
        out
    }

    /// Sets the budget to `capacity` charge units and evicts entries, in CLOCK order, until
    /// the usage fits it or only pinned and kept dirty entries are left; returns what it
    /// evicted. A larger budget evicts nothing and takes effect at the next inserts.
    pub fn set_capacity(&mut self, capacity: usize) -> Vec<Evicted<K, V>> {
        self.capacity = capacity;
        let mut out = Vec::new();
        while self.usage > self.capacity {
            match self.evict_one() {
                Some(e) => out.push(e),
                None => break,
            }
        }
        out
    }

    /// Whether an entry charged `charge` fits without evicting anything.
    pub fn has_room(&self, charge: usize) -> bool {
        self.usage + charge <= self.capacity
    }

    /// Removes `key`, returning its entry (dirty or pinned alike: the caller asked).
    pub fn remove(&mut self, key: &K) -> Option<Evicted<K, V>> {
        let e = self.entries.remove(key)?;
        self.ring[e.ring_at] = None;
        self.free.push(e.ring_at);
        self.usage -= e.charge;
        self.user_usage[usize::from(e.user)] -= e.charge;
        self.dirty -= usize::from(e.dirty);
        Some(Evicted { key: *key, value: e.value, dirty: e.dirty })
    }

    /// Removes every entry whose key `drop` says to (dirty and pinned ones too), returning
    /// them.
    pub fn remove_where(&mut self, mut drop: impl FnMut(&K) -> bool) -> Vec<Evicted<K, V>> {
        let keys: Vec<K> = self.entries.keys().filter(|k| drop(k)).copied().collect();
        keys.iter().filter_map(|k| self.remove(k)).collect()
    }

    /// Evicts one entry: the first from the hand on that is not referenced (clearing the
    /// bits it passes), pinned, or dirty and kept. `None` when every entry is pinned or kept
    /// dirty.
    fn evict_one(&mut self) -> Option<Evicted<K, V>> {
        let keep_dirty = self.policy == DirtyPolicy::Keep;
        // Two turns of the ring clear every bit; a third finds nothing only when nothing
        // may go.
        let mut steps = 3 * self.ring.len();
        while steps > 0 {
            steps -= 1;
            let at = self.hand;
            self.hand = (self.hand + 1) % self.ring.len();
            let Some(key) = self.ring[at] else { continue };
            let e = self.entries.get_mut(&key).expect("the ring names live entries");
            if e.pins > 0 || (keep_dirty && e.dirty) {
                continue;
            }
            if *e.referenced.get_mut() {
                *e.referenced.get_mut() = false;
                continue;
            }
            return self.remove(&key);
        }
        None
    }

    /// Pins `key`: it is not evicted until as many [`Clock::unpin`]s. False when it is not
    /// cached.
    pub fn pin(&mut self, key: &K) -> bool {
        self.entries.get_mut(key).map(|e| e.pins += 1).is_some()
    }

    /// Takes one pin off `key`.
    ///
    /// # Panics
    /// If `key` is not cached or not pinned (a bug of the caller's).
    pub fn unpin(&mut self, key: &K) {
        let e = self.entries.get_mut(key).expect("an unpinned entry is cached");
        assert!(e.pins > 0, "unpinned more than pinned");
        e.pins -= 1;
    }

    /// Marks `key` changed since it was last written. False when it is not cached.
    pub fn mark_dirty(&mut self, key: &K) -> bool {
        let Some(e) = self.entries.get_mut(key) else { return false };
        if !e.dirty {
            e.dirty = true;
            self.dirty += 1;
        }
        true
    }

    /// Whether `key` is cached and dirty.
    pub fn is_dirty(&self, key: &K) -> bool {
        self.entries.get(key).is_some_and(|e| e.dirty)
    }

    /// The dirty entries' keys, each marked clean (they stay cached): the caller writes them.
    pub fn take_dirty(&mut self) -> Vec<K> {
        let mut out = Vec::with_capacity(self.dirty);
        for (k, e) in self.entries.iter_mut().filter(|(_, e)| e.dirty) {
            e.dirty = false;
            out.push(*k);
        }
        self.dirty = 0;
        out
    }

    /// Up to `max` dirty entries the hand reaches next, each marked clean (they stay
    /// cached): written with an evicted one, they spare the evictions after it a write each.
    pub fn take_dirty_ahead(&mut self, max: usize) -> Vec<K> {
        let mut out = Vec::new();
        let n = self.ring.len();
        for k in 0..n {
            if out.len() == max || self.dirty == 0 {
                break;
            }
            let Some(key) = self.ring[(self.hand + k) % n] else { continue };
            let e = self.entries.get_mut(&key).expect("the ring names live entries");
            if e.dirty {
                e.dirty = false;
                self.dirty -= 1;
                out.push(key);
            }
        }
        out
    }

    /// Dirty entries.
    pub fn dirty_count(&self) -> usize {
        self.dirty
    }

    /// Entries cached.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Charge units of every entry.
    pub fn usage(&self) -> usize {
        self.usage
    }

    /// Charge units of `user`'s entries.
    pub fn usage_of(&self, user: usize) -> usize {
        self.user_usage[user]
    }

    /// The budget.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

/// The shard of `hash` among `shards`: the high bits of a multiplicative mix, so keys whose
/// hashes differ only in their low bits (one SST's block offsets) spread over every shard.
pub fn shard_of(hash: u64, shards: usize) -> usize {
    ((hash.wrapping_mul(0xC2B2_AE3D_27D4_EB4F) >> 32) as usize) % shards.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hand_gives_used_entries_a_second_chance_and_keeps_the_budget() {
        let mut c: Clock<u32, u32> = Clock::new(4, DirtyPolicy::Keep);
        for k in 0..4 {
            assert!(c.insert(k, k, 1, 0, Admit::Used).is_empty());
        }
        // Every entry is referenced: the hand clears all bits, then takes the first.
        let e = c.insert(10, 10, 1, 0, Admit::Used);
        assert_eq!(e, vec![Evicted { key: 0, value: 0, dirty: false }]);
        c.get(&1);
        // 1 was used since the hand passed it: 2 goes.
        assert_eq!(c.insert(11, 11, 1, 0, Admit::Used)[0].key, 2);
        assert!(c.contains(&1) && c.usage() == 4);
        // A scan of new keys passes through without taking what is used again.
        for k in 100..200 {
            c.get(&1);
            c.insert(k, k, 1, 0, Admit::Used);
        }
        assert!(c.contains(&1), "used between each insert, it stays");
        // Replacing an entry hands the old value back.
        assert_eq!(
            c.insert(1, 7, 1, 0, Admit::Used)[0],
            Evicted { key: 1, value: 1, dirty: false }
        );
        assert_eq!(c.peek(&1), Some(&7));
    }

    #[test]
    fn a_cold_entry_goes_first_unless_it_is_used() {
        let mut c: Clock<u32, ()> = Clock::new(3, DirtyPolicy::Keep);
        c.insert(0, (), 1, 0, Admit::Used);
        c.insert(1, (), 1, 0, Admit::Cold);
        c.insert(2, (), 1, 0, Admit::Cold);
        c.get(&2);
        // The hand clears 0's bit, takes 1 (cold, never used); 2 was used.
        assert_eq!(c.insert(3, (), 1, 0, Admit::Cold)[0].key, 1);
        assert!(c.contains(&0) && c.contains(&2));
    }

    #[test]
    fn pinned_and_kept_dirty_entries_stay_and_the_budget_bends_for_them() {
        let mut c: Clock<u32, ()> = Clock::new(3, DirtyPolicy::Keep);
        for k in 0..3 {
            c.insert(k, (), 1, 0, Admit::Used);
        }
        assert!(c.pin(&0) && c.pin(&0));
        assert!(c.mark_dirty(&1));
        assert!(!c.pin(&9) && !c.mark_dirty(&9));
        for k in 10..20 {
            c.insert(k, (), 1, 0, Admit::Used);
        }
        assert!(c.contains(&0) && c.contains(&1), "pinned and dirty stay");
        assert_eq!(c.usage(), 3);
        // Nothing else may go: the cache holds more than its budget.
        c.mark_dirty(&19);
        c.insert(20, (), 1, 0, Admit::Used);
        assert_eq!(c.usage(), 4);
        assert_eq!(c.dirty_count(), 2);
        let mut d = c.take_dirty();
        d.sort_unstable();
        assert_eq!(d, vec![1, 19]);
        assert_eq!(c.dirty_count(), 0);
        c.unpin(&0);
        c.insert(21, (), 1, 0, Admit::Used);
        assert!(c.contains(&0), "one pin is left");
        c.unpin(&0);
        for k in 30..40 {
            c.insert(k, (), 1, 0, Admit::Used);
        }
        assert!(!c.contains(&0) && c.usage() <= 3, "unpinned, it goes");
    }

    #[test]
    fn a_smaller_budget_evicts_down_to_it_in_clock_order_and_a_larger_one_lets_inserts_fill() {
        let mut c: Clock<u32, u32> = Clock::new(8, DirtyPolicy::Keep);
        for k in 0..8 {
            c.insert(k, k, 1, 0, Admit::Cold);
        }
        c.get(&3);
        assert!(c.pin(&5));
        let gone: Vec<u32> = c.set_capacity(3).into_iter().map(|e| e.key).collect();
        // The cold, unpinned entries go from the hand on; 3 (used) and 5 (pinned) stay.
        assert_eq!(gone, vec![0, 1, 2, 4, 6]);
        assert_eq!((c.usage(), c.capacity()), (3, 3));
        assert!(c.contains(&3) && c.contains(&5) && c.contains(&7));
        // Below what pins hold, the budget bends: nothing but the unpinned goes.
        let gone = c.set_capacity(0);
        assert_eq!(gone.len(), 2);
        assert!(c.contains(&5) && c.usage() == 1);
        // A larger budget evicts nothing and inserts fill it.
        assert!(c.set_capacity(6).is_empty());
        for k in 10..15 {
            assert!(c.insert(k, k, 1, 0, Admit::Used).is_empty());
        }
        assert_eq!(c.usage(), 6);
        assert_eq!(c.insert(20, 20, 1, 0, Admit::Used).len(), 1);
    }

    #[test]
    fn a_write_back_cache_hands_dirty_entries_back_and_takes_ones_ahead() {
        let mut c: Clock<u32, u32> = Clock::with_room(4, DirtyPolicy::WriteBack, 4);
        for k in 0..4 {
            c.insert(k, k * 10, 1, 0, Admit::Used);
            c.mark_dirty(&k);
        }
        let e = c.insert(4, 40, 1, 0, Admit::Used);
        assert_eq!(e, vec![Evicted { key: 0, value: 0, dirty: true }]);
        let mut ahead = c.take_dirty_ahead(2);
        ahead.sort_unstable();
        assert_eq!(ahead, vec![1, 2]);
        assert_eq!(c.dirty_count(), 1);
        assert!(c.is_dirty(&3) && !c.is_dirty(&1));
        let e = c.insert(5, 50, 1, 0, Admit::Used);
        assert!(!e[0].dirty, "taken ahead, it went clean");
    }

    #[test]
    fn users_are_charged_apart_and_removal_refunds() {
        let mut c: Clock<u32, ()> = Clock::new(100, DirtyPolicy::Keep);
        c.insert(1, (), 30, 0, Admit::Used);
        c.insert(2, (), 20, 1, Admit::Used);
        c.insert(3, (), 5, 3, Admit::Used);
        assert_eq!((c.usage_of(0), c.usage_of(1), c.usage_of(3), c.usage()), (30, 20, 5, 55));
        assert!(c.has_room(45) && !c.has_room(46));
        c.mark_dirty(&2);
        let gone = c.remove_where(|k| *k >= 2);
        assert_eq!(gone.len(), 2);
        assert_eq!((c.usage(), c.usage_of(1), c.dirty_count(), c.len()), (30, 0, 0, 1));
        // An entry larger than the budget still goes in (its caller decides what to cache),
        // after everything else went.
        c.insert(9, (), 500, 2, Admit::Used);
        assert_eq!((c.len(), c.usage()), (1, 500));
    }

    #[test]
    fn keys_spread_over_the_shards() {
        let mut counts = [0usize; 16];
        for offset in 0..16_000u64 {
            counts[shard_of(offset * 4096, 16)] += 1;
        }
        assert!(counts.iter().all(|&n| n > 700), "{counts:?}");
        assert_eq!(shard_of(7, 0), 0);
    }
}
