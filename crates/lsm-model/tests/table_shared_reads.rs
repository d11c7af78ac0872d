//! The table engine's point reads with the store's lock shared (`shale-table`'s
//! `Transaction::point_read`, issue #45 part 2), under shuttle. The steps are stated again
//! here, each named after the engine function it stands for, on shuttle's read-write lock
//! and mutexes:
//! - a point read of a record running over two blocks (`Storage::select_cached`, lock
//!   shared): the row is read there if both blocks are cached; else the first missing
//!   one (the second's need is known from the first's header) is registered in the
//!   cache's reads in flight (`BlockCache::begin_read`, behind the cache's own mutex);
//!   then, without the lock, the device is read; then (`Storage::end_read_shared`, lock
//!   shared again) the blocks read join those the read holds, whose reads stay registered,
//!   and every one must still be fresh; the row is put together from the cache and them,
//!   or the next block missing is registered for another step; once the read ends its
//!   blocks are deferred (`BlockCache::defer`, or their reads ended where `DEFERRED_MAX`
//!   wait), and a block gone stale sends the read the exclusive way
//!   (`Storage::select_or_read`: the deferred blocks cached first, then the blocks read
//!   under the lock); the deferred blocks are cached (`Storage::cache_deferred`) only
//!   where the lock is free at once (`try_write`): a reader never waits for it exclusive;
//! - caching a block read fresh (`BlockCache::fill`, through `end_read`) leaves the other
//!   reads of it in flight fresh; a change's put and its in-place change (`BlockCache::put`,
//!   `BlockCache::get`) make them stale;
//! - a change (lock exclusive): the block loaded if not cached, changed, marked dirty;
//! - a round's writes (`Shared::write_dirty`, as in `table_write_round.rs`);
//! - eviction of every clean unpinned block (the cache's CLOCK), lock exclusive.
//!
//! Checked: every row read is made of each block's last change (no block of it older, as
//! a fill that left a read fresh while a change raced it would give); at the end every
//! cached block is its last change, nothing is left registered or deferred, and after a
//! last round the device holds every block's last change. A failure prints the schedule to
//! replay.

use std::collections::HashMap;
use std::sync::Arc;

use shuttle::sync::{Mutex, RwLock};

const ITERATIONS: usize = 3000;
const PCT_DEPTH: usize = 3;
const BLOCKS: u64 = 2;
/// `cache::DEFERRED_MAX`, small so that reads ended for want of room are met.
const DEFERRED_MAX: usize = 1;
/// Steps of a point read with the lock shared (`txn::POINT_READ_STEPS`).
const STEPS: usize = 3;

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
    /// `BlockCache::put` (and `BlockCache::get`, to change a block): the reads in flight of
    /// the block are stale from now on.
    fn put(&mut self, n: u64, block: Cached) {
        if let Some(r) = self.reading.get_mut().unwrap().get_mut(&n) {
            r.1 = true;
        }
        self.cache.insert(n, block);
    }

    /// `BlockCache::end_read`: one read of `n` ends, its block cached unless stale or
    /// cached since (`BlockCache::fill`: the other reads of it stay fresh).
    fn end_read(&mut self, n: u64, version: Option<u64>) {
        let stale = unregister(self.reading.get_mut().unwrap(), n);
        if let Some(v) = version.filter(|_| !stale && !self.cache.contains_key(&n)) {
            self.cache.insert(n, Cached { version: v, ..Cached::default() });
        }
    }

    /// `Storage::cache_deferred`.
    fn cache_deferred(&mut self) {
        let deferred = std::mem::take(self.deferred.get_mut().unwrap());
        for (n, v) in deferred {
            self.end_read(n, Some(v));
        }
    }

    /// `BlockCache::read_is_fresh`.
    fn fresh(&self, n: u64) -> bool {
        self.reading.lock().unwrap().get(&n).is_some_and(|r| !r.1)
    }

    /// `BlockCache::defer`, with the lock shared.
    fn defer(&self, n: u64, version: u64) {
        let mut deferred = self.deferred.lock().unwrap();
        if deferred.len() >= DEFERRED_MAX {
            unregister(&mut self.reading.lock().unwrap(), n);
        } else {
            deferred.push((n, version));
        }
    }

    /// `BlockCache::begin_read`, with the lock shared.
    fn begin_read(&self, n: u64) {
        self.reading.lock().unwrap().entry(n).or_insert((0, false)).0 += 1;
    }

    fn latest(&self, n: u64) -> u64 {
        *self.latest.get(&n).unwrap_or(&0)
    }

    /// `Storage::end_read_shared` once the blocks read are in `held`: the row's blocks'
    /// versions, the next block to read, or `None` (the exclusive way).
    fn shared_step(&self, record: &[u64], held: &[(u64, u64)], more: bool) -> Step {
        if held.iter().any(|&(n, _)| !self.fresh(n)) {
            return Step::Exclusive;
        }
        let version = |n: u64| match self.cache.get(&n) {
            Some(e) => Some(e.version),
            None => held.iter().find(|h| h.0 == n).map(|h| h.1),
        };
        match record.iter().find(|&&n| version(n).is_none()) {
            None => Step::Row(record.iter().map(|&n| (n, version(n).unwrap())).collect()),
            Some(&n) if more => {
                self.begin_read(n);
                Step::Read(n)
            }
            Some(_) => Step::Exclusive,
        }
    }
}

/// `cache::unregister`: one read of `n` ends; whether it was stale.
fn unregister(reading: &mut HashMap<u64, (u32, bool)>, n: u64) -> bool {
    let r = reading.get_mut(&n).expect("a read ended was begun");
    let stale = r.1;
    r.0 -= 1;
    if r.0 == 0 {
        reading.remove(&n);
    }
    stale
}

/// A step of a point read with the lock shared.
enum Step {
    /// The row: each block's version it was made of.
    Row(Vec<(u64, u64)>),
    /// A block to read next, registered.
    Read(u64),
    /// The exclusive way.
    Exclusive,
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

    /// `Transaction::point_read` of the row in `record`'s blocks: checks each block of it
    /// is that block's last change at the read's last hold.
    fn point_read(&self, record: &[u64]) {
        let check = |st: &Storage, row: &[(u64, u64)], how: &str| {
            for &(n, v) in row {
                assert_eq!(v, st.latest(n), "block {n}: {how} read older than its last change");
            }
        };
        // `Storage::select_cached`.
        let mut next = {
            let st = self.storage.read().unwrap();
            match st.shared_step(record, &[], true) {
                Step::Row(row) => return check(&st, &row, "a cached"),
                Step::Read(n) => Some(n),
                Step::Exclusive => None,
            }
        };
        let mut held: Vec<(u64, u64)> = Vec::new();
        let mut step = 1;
        while let Some(n) = next {
            // Read outside the lock (`unlocked_read::read_registered`).
            shuttle::thread::yield_now();
            let read = self.device(n);
            step += 1;
            // `Storage::end_read_shared`.
            let st = self.storage.read().unwrap();
            held.push((n, read));
            next = match st.shared_step(record, &held, step < STEPS) {
                Step::Read(n) => Some(n),
                ended => {
                    for &(n, v) in &held {
                        st.defer(n, v);
                    }
                    match ended {
                        Step::Row(row) => {
                            check(&st, &row, "a shared");
                            drop(st);
                            // `Shared::end_read_shared`: cached only if the lock is free.
                            if let Ok(mut st) = self.storage.try_write() {
                                st.cache_deferred();
                            }
                            return;
                        }
                        _ => None,
                    }
                }
            };
        }
        // The exclusive way: `Storage::select_or_read` caches the deferred blocks, then
        // reads the blocks under the lock (`Storage::load`).
        let mut st = self.storage.write().unwrap();
        st.cache_deferred();
        let mut row = Vec::new();
        for &n in record {
            let version = match st.cache.get(&n) {
                Some(e) => e.version,
                None => {
                    let v = self.device(n);
                    st.put(n, Cached { version: v, ..Cached::default() });
                    v
                }
            };
            row.push((n, version));
        }
        check(&st, &row, "an exclusive");
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
                // Records over blocks 0 and 1, and over block 1 alone.
                let first = (r + i) % BLOCKS;
                let record: Vec<u64> = (first..BLOCKS).collect();
                store.point_read(&record);
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
