//! The table engine's block writes outside its store mutex (`shale-table`'s
//! `Shared::write_dirty`, issue #45 part 2), under shuttle. The steps are stated again here,
//! each named after the engine function it stands for, on shuttle's mutexes:
//! - a change (`Storage::insert`/`update`, under the store mutex): its undo record appended
//!   to the spill log (under the undo log latch), then the block changed in the cache and
//!   marked dirty;
//! - a round's writes (`Shared::write_dirty`), by two threads at once: under the block
//!   writer's latch, (a) under the store mutex, the dirty blocks copied, marked clean and
//!   pinned (`Storage::begin_write_dirty`); (b) without it, the log synced (under the undo
//!   log latch), then each copy written to the device, with a switch point between writes;
//!   (c) under the store mutex, the blocks unpinned (`Storage::end_write_dirty`);
//! - a reader that evicts any clean unpinned block and reads blocks not cached from the
//!   device (the cache's CLOCK and `Storage::load`).
//!
//! Checked: a read never returns a block older than the last change made to it (a block
//! whose write is in flight stays cached); no block write reaches the device before the undo
//! record of the change it carries is durable (the write-ahead rule); and once every round
//! has ended, with one more run alone, the device holds every block's last change (two
//! rounds never reorder their writes of a block). A failure prints the schedule to replay.

use std::collections::HashMap;
use std::sync::Arc;

use shuttle::sync::Mutex;

const ITERATIONS: usize = 3000;
const PCT_DEPTH: usize = 3;
const BLOCKS: u64 = 2;

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
    /// Each block's last change, as the store's callers saw it.
    latest: HashMap<u64, u64>,
    next_version: u64,
}

/// The spill log: the highest version whose undo record was appended, and made durable.
#[derive(Default)]
struct Log {
    appended: u64,
    durable: u64,
}

#[derive(Default)]
struct Store {
    /// The block writer's latch (its queue is the device below).
    writer: Mutex<()>,
    storage: Mutex<Storage>,
    log: Mutex<Log>,
    /// The device: each block's version on it, and a log of the writes' order per block.
    device: Mutex<HashMap<u64, u64>>,
}

impl Store {
    /// `Storage::insert`/`update` of block `n`: undo record first, then the cached block.
    fn change(&self, n: u64) {
        let mut st = self.storage.lock().unwrap();
        st.next_version += 1;
        let v = st.next_version;
        {
            let mut log = self.log.lock().unwrap();
            log.appended = log.appended.max(v);
        }
        let device = *self.device.lock().unwrap().get(&n).unwrap_or(&0);
        let e = st.cache.entry(n).or_insert(Cached { version: device, ..Cached::default() });
        e.version = v;
        e.dirty = true;
        st.latest.insert(n, v);
    }

    /// `Shared::write_dirty`.
    fn write_dirty(&self) {
        let _writer = self.writer.lock().unwrap();
        // (a) `Storage::begin_write_dirty`.
        let copies: Vec<(u64, u64)> = {
            let mut st = self.storage.lock().unwrap();
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
        if copies.is_empty() {
            return;
        }
        // (b) the undo log latch's sync, then the writes, outside the store mutex.
        {
            let mut log = self.log.lock().unwrap();
            log.durable = log.appended;
        }
        for &(n, v) in &copies {
            assert!(
                self.log.lock().unwrap().durable >= v,
                "block {n} version {v} written before its undo record is durable"
            );
            self.device.lock().unwrap().insert(n, v);
            shuttle::thread::yield_now();
        }
        // (c) `Storage::end_write_dirty`.
        let mut st = self.storage.lock().unwrap();
        for &(n, _) in &copies {
            st.cache.get_mut(&n).expect("a pinned block is cached").pins -= 1;
        }
    }

    /// The cache's eviction of a clean unpinned block, then `Storage::load` of each block:
    /// checks that what it reads is the block's last change.
    fn evict_and_read(&self) {
        let mut st = self.storage.lock().unwrap();
        let clean: Vec<u64> =
            st.cache.iter().filter(|(_, e)| !e.dirty && e.pins == 0).map(|(&n, _)| n).collect();
        for n in clean {
            st.cache.remove(&n);
        }
        drop(st);
        shuttle::thread::yield_now();
        let mut st = self.storage.lock().unwrap();
        for n in 0..BLOCKS {
            let version = match st.cache.get(&n) {
                Some(e) => e.version,
                None => {
                    let v = *self.device.lock().unwrap().get(&n).unwrap_or(&0);
                    st.cache.insert(n, Cached { version: v, ..Cached::default() });
                    v
                }
            };
            let latest = *st.latest.get(&n).unwrap_or(&0);
            assert_eq!(version, latest, "block {n} read older than its last change");
        }
    }
}

fn rounds_writers_and_a_reader() {
    let store = Arc::new(Store::default());
    let mut threads = Vec::new();
    for t in 0..2u64 {
        let store = store.clone();
        threads.push(shuttle::thread::spawn(move || {
            for i in 0..2 {
                store.change((t + i) % BLOCKS);
                store.write_dirty();
            }
        }));
    }
    let reader = {
        let store = store.clone();
        shuttle::thread::spawn(move || {
            for _ in 0..2 {
                store.evict_and_read();
            }
        })
    };
    for t in threads {
        t.join().unwrap();
    }
    reader.join().unwrap();
    store.write_dirty();
    let st = store.storage.lock().unwrap();
    let device = store.device.lock().unwrap();
    for (n, v) in &st.latest {
        assert_eq!(device.get(n), Some(v), "block {n}: the device lacks its last change");
    }
}

#[test]
fn round_writes_outside_the_store_mutex_pct() {
    shuttle::check_pct(rounds_writers_and_a_reader, ITERATIONS, PCT_DEPTH);
}

#[test]
fn round_writes_outside_the_store_mutex_random() {
    shuttle::check_random(rounds_writers_and_a_reader, ITERATIONS);
}
