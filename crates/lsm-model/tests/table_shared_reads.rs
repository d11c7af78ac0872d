//! The table engine's point reads with the store's lock shared (`shale-table`'s
//! `Transaction::point_read`, issue #45 part 2), under shuttle. The steps are stated again
//! here, each named after the engine function it stands for, on shuttle's read-write lock
//! and mutexes:
//! - a point read (`Storage::select_cached`, lock shared): a cached block is read there;
//!   a missing one is registered in the cache's reads in flight (`BlockCache::begin_read`,
//!   behind the cache's own mutex); then, without the lock, the device is read; then
//!   (`Storage::end_read_shared`, lock shared again) the read is used if still fresh and
//!   deferred, still registered (`BlockCache::defer`), or forgotten if stale, and the read
//!   goes the exclusive way (`Storage::select_or_read`: the deferred blocks cached first,
//!   then the block read under the lock); the deferred blocks are cached
//!   (`Storage::cache_deferred`) at once where the lock is free (`try_write`), or with it
//!   taken exclusive when `DEFERRED_MAX` wait;
//! - a change (lock exclusive): the block loaded if not cached, changed, marked dirty
//!   (every put makes the reads in flight of the block stale: `BlockCache::put`);
//! - a round's writes (`Shared::write_dirty`, as in `table_write_round.rs`);
//! - eviction of every clean unpinned block (the cache's CLOCK), lock exclusive.
//!
//! Checked: every read gives the block's last change (a deferred block raced by a change and
//! an eviction never comes back into the cache older than that change); at the end every
//! cached block is its last change, nothing is left registered or deferred, and after a last
//! round the device holds every block's last change. A failure prints the schedule to replay.

use std::collections::HashMap;
use std::sync::Arc;

use shuttle::sync::{Mutex, RwLock};

const ITERATIONS: usize = 3000;
const PCT_DEPTH: usize = 3;
const BLOCKS: u64 = 2;
/// `cache::DEFERRED_MAX`, small so that the exclusive caching of deferred blocks is met.
const DEFERRED_MAX: usize = 2;

/// A cached block: its version (the change it holds), dirty, pins.
#[derive(Clone, Copy, Default)]
struct Cached {
    version: u64,
    dirty: bool,
    pins: u32,
}

#[derive(Default)]
struct Storage {
    cache: HashMap<u64, Cached>,
    /// Reads in flight by block: how many, and whether a put made them stale.
    reading: Mutex<HashMap<u64, (u32, bool)>>,
    /// Blocks read fresh with the lock shared, still registered, waiting to be cached.
    deferred: Mutex<Vec<(u64, u64)>>,
    /// Each block's last change, as the store's callers saw it.
    latest: HashMap<u64, u64>,
    next_version: u64,
}

impl Storage {
    /// `BlockCache::put`: the reads in flight of the block are stale from now on.
    fn put(&mut self, n: u64, block: Cached) {
        if let Some(r) = self.reading.get_mut().unwrap().get_mut(&n) {
            r.1 = true;
        }
        self.cache.insert(n, block);
    }

    /// `BlockCache::end_read`: one read of `n` ends, its block cached unless stale or
    /// cached since.
    fn end_read(&mut self, n: u64, version: Option<u64>) {
        let reading = self.reading.get_mut().unwrap();
        let r = reading.get_mut(&n).expect("a read ended was begun");
        let stale = r.1;
        r.0 -= 1;
        if r.0 == 0 {
            reading.remove(&n);
        }
        if let Some(v) = version.filter(|_| !stale && !self.cache.contains_key(&n)) {
            self.put(n, Cached { version: v, ..Cached::default() });
        }
    }

    /// `Storage::cache_deferred`.
    fn cache_deferred(&mut self) {
        let deferred = std::mem::take(self.deferred.get_mut().unwrap());
        for (n, v) in deferred {
            self.end_read(n, Some(v));
        }
    }

    fn latest(&self, n: u64) -> u64 {
        *self.latest.get(&n).unwrap_or(&0)
    }
}

#[derive(Default)]
struct Store {
    /// The block writer's latch.
    writer: Mutex<()>,
    storage: RwLock<Storage>,
    /// The device: each block's version on it.
    device: Mutex<HashMap<u64, u64>>,
}

impl Store {
    fn device(&self, n: u64) -> u64 {
        *self.device.lock().unwrap().get(&n).unwrap_or(&0)
    }

    /// `Transaction::point_read` of block `n`'s row: checks it reads the last change.
    fn point_read(&self, n: u64) {
        // `Storage::select_cached`.
        {
            let st = self.storage.read().unwrap();
            if let Some(e) = st.cache.get(&n) {
                assert_eq!(
                    e.version,
                    st.latest(n),
                    "block {n}: a cached read older than its last change"
                );
                return;
            }
            st.reading.lock().unwrap().entry(n).or_insert((0, false)).0 += 1;
        }
        // Read outside the lock (`unlocked_read::read_registered`).
        shuttle::thread::yield_now();
        let read = self.device(n);
        // `Storage::end_read_shared`.
        let used = {
            let st = self.storage.read().unwrap();
            let mut reading = st.reading.lock().unwrap();
            let fresh = reading.get(&n).is_some_and(|r| !r.1);
            if fresh {
                drop(reading);
                assert_eq!(
                    read,
                    st.latest(n),
                    "block {n}: a fresh read older than its last change"
                );
                let mut deferred = st.deferred.lock().unwrap();
                deferred.push((n, read));
                Some(deferred.len() >= DEFERRED_MAX)
            } else {
                // `BlockCache::forget_read`.
                let r = reading.get_mut(&n).expect("a read forgotten was begun");
                r.0 -= 1;
                if r.0 == 0 {
                    reading.remove(&n);
                }
                None
            }
        };
        match used {
            Some(true) => self.storage.write().unwrap().cache_deferred(),
            Some(false) => {
                if let Ok(mut st) = self.storage.try_write() {
                    st.cache_deferred();
                }
            }
            // The exclusive way: `Storage::select_or_read` caches the deferred blocks, then
            // reads the block under the lock (`Storage::load`).
            None => {
                let mut st = self.storage.write().unwrap();
                st.cache_deferred();
                let version = match st.cache.get(&n) {
                    Some(e) => e.version,
                    None => {
                        let v = self.device(n);
                        st.put(n, Cached { version: v, ..Cached::default() });
                        v
                    }
                };
                assert_eq!(
                    version,
                    st.latest(n),
                    "block {n}: an exclusive read older than its last change"
                );
            }
        }
    }

    /// `Storage::insert`/`update` of block `n`, lock exclusive.
    fn change(&self, n: u64) {
        let mut st = self.storage.write().unwrap();
        if !st.cache.contains_key(&n) {
            let v = self.device(n);
            st.put(n, Cached { version: v, ..Cached::default() });
        }
        st.next_version += 1;
        let v = st.next_version;
        let old = st.cache[&n];
        st.put(n, Cached { version: v, dirty: true, ..old });
        st.latest.insert(n, v);
    }

    /// `Shared::write_dirty`: copies pinned under the lock, written without it, unpinned.
    fn write_dirty(&self) {
        let _writer = self.writer.lock().unwrap();
        let copies: Vec<(u64, u64)> = {
            let mut st = self.storage.write().unwrap();
            let mut copies = Vec::new();
            for (&n, e) in st.cache.iter_mut() {
                if e.dirty {
                    e.dirty = false;
                    e.pins += 1;
                    copies.push((n, e.version));
                }
            }
            copies
        };
        for &(n, v) in &copies {
            self.device.lock().unwrap().insert(n, v);
            shuttle::thread::yield_now();
        }
        let mut st = self.storage.write().unwrap();
        for &(n, _) in &copies {
            st.cache.get_mut(&n).expect("a pinned block is cached").pins -= 1;
        }
    }

    /// The cache's eviction of every clean unpinned block.
    fn evict(&self) {
        let mut st = self.storage.write().unwrap();
        let clean: Vec<u64> =
            st.cache.iter().filter(|(_, e)| !e.dirty && e.pins == 0).map(|(&n, _)| n).collect();
        for n in clean {
            st.cache.remove(&n);
        }
    }
}

fn readers_beside_a_writer_and_evictions() {
    let store = Arc::new(Store::default());
    let mut threads = Vec::new();
    for r in 0..2u64 {
        let store = store.clone();
        threads.push(shuttle::thread::spawn(move || {
            for i in 0..3 {
                store.point_read((r + i) % BLOCKS);
            }
        }));
    }
    {
        let store = store.clone();
        threads.push(shuttle::thread::spawn(move || {
            for i in 0..2 {
                store.change(i % BLOCKS);
                store.write_dirty();
                store.evict();
            }
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
    let mut st = store.storage.write().unwrap();
    st.cache_deferred();
    assert!(st.reading.get_mut().unwrap().is_empty(), "a read left registered");
    for (&n, e) in &st.cache {
        assert_eq!(e.version, st.latest(n), "block {n}: cached older than its last change");
    }
    drop(st);
    store.write_dirty();
    let st = store.storage.read().unwrap();
    for n in 0..BLOCKS {
        assert_eq!(store.device(n), st.latest(n), "block {n}: the device lacks its last change");
    }
}

#[test]
fn point_reads_with_the_lock_shared_pct() {
    shuttle::check_pct(readers_beside_a_writer_and_evictions, ITERATIONS, PCT_DEPTH);
}

#[test]
fn point_reads_with_the_lock_shared_random() {
    shuttle::check_random(readers_beside_a_writer_and_evictions, ITERATIONS);
}
