//! The bounded index's digest table: the (digest, packed location) entries kept in pages on
//! the volume (the space layer's index pages, entries as `index_page.rs` says), one page per
//! bucket, read and changed through a page cache of a fixed number of frames
//! (`page_cache.rs`). Resident memory is the cache and a few fixed fields, however many keys
//! there are (KV-SSD keeps its index in the device the same way).
//!
//! The table is one extent holding `buckets` pages, a power of two; a digest's bucket is a
//! hash of it modulo `buckets`. When the entries pass half the table's room, or a bucket's
//! page is full, the table doubles: a new extent of twice the pages is written from the old
//! one bucket by bucket (bucket `b` splits into `b` and `b + buckets`), with fixed buffers,
//! and the old extent is given back (or, if a checkpoint named it, removed by the next). So
//! there are no overflow pages, and a lookup costs at most one page read.
//!
//! Every page of the table is written before it is read: a new table writes all its pages
//! empty, and a doubling or a copy writes every page of the new one. A page that does not
//! decode is therefore damage ([`Error::Corruption`]), never an empty bucket.
//!
//! Durability: the table the store works on (the *working* table) is never named by the
//! version log; its pages are written back without waiting for durability when the cache
//! evicts them, and a crash forgets its extent. A checkpoint copies it (cache first, so the
//! copy holds every change) into a *snapshot*, a new extent written and flushed before the
//! version log names it, and never written again; an open copies the newest snapshot into a
//! new working table. See `docs/hash.md`, "The bounded index".

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use shale_io::{AlignedBuf, Op, Queue, QueueExt, QueueOptions, Request as IoRequest};
use shale_space::index_page::PAGE_BYTES;
use shale_space::{Extent, IoClass, Volume, VolumeQueue};

use crate::error::{Error, Result};
use crate::index_page::{self, ENTRIES_MAX, page_id};
use crate::page_cache::{Evicted, PageCache};

/// Buckets of a new table.
pub const BUCKETS_INITIAL: u32 = 4;
/// Most buckets (2^26: 64 million pages, 256 GiB of index, far past a slot table's reach).
pub const BUCKETS_MAX: u32 = 1 << 26;
/// The table doubles once its entries pass this share of its room: pages stay under half
/// full on average, so a bucket fills (forcing a doubling early) only by rare chance.
const LOAD_MAX: f64 = 0.5;
/// Buckets a doubling reads and writes at a time.
const DOUBLING_CHUNK_BUCKETS: u32 = 64;
/// Dirty pages written back together when the cache evicts one: those the CLOCK hand
/// reaches next, written at the queue's depth, so most evictions find a clean frame.
const WRITE_BACK_BATCH: usize = 32;

/// A table as a checkpoint records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableAt {
    /// Its generation, which each of its pages carries.
    pub generation: u64,
    /// Where its pages lie.
    pub extent: Extent,
    /// Its buckets (a power of two).
    pub buckets: u32,
    /// Entries it holds.
    pub entries: u64,
}

/// Counts of page traffic, for the stats.
#[derive(Debug, Default)]
pub struct PageCounters {
    /// Pages read from the volume.
    pub reads: AtomicU64,
    /// Pages written to the volume.
    pub writes: AtomicU64,
    /// Doublings of the table.
    pub doublings: AtomicU64,
}

struct Inner {
    volume: Arc<Volume>,
    queue: VolumeQueue,
    /// The working table.
    table: TableAt,
    /// The snapshot the newest checkpoint named, which the next one removes.
    snapshot: Option<Extent>,
    cache: PageCache,
    scratch: Vec<(u64, u64)>,
    /// The generation of the next table made (a copy or a doubling).
    next_generation: u64,
}

/// The on-volume digest table behind a fixed cache.
pub struct PagedTable {
    inner: Mutex<Inner>,
    /// Page traffic.
    pub counters: PageCounters,
}

impl std::fmt::Debug for PagedTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let i = self.inner.lock();
        f.debug_struct("PagedTable").field("table", &i.table).finish()
    }
}

/// Slots of `volume` that `buckets` pages take.
fn slots_for(volume: &Volume, buckets: u32) -> u32 {
    (u64::from(buckets) * PAGE_BYTES as u64).div_ceil(volume.layout().slot_bytes).max(1) as u32
}

impl PagedTable {
    /// A new, empty working table of [`BUCKETS_INITIAL`] buckets with every page written;
    /// `frames` pages of cache.
    ///
    /// # Errors
    /// The space layer's, allocating or writing.
    pub fn create(volume: Arc<Volume>, frames: usize, generation: u64) -> Result<PagedTable> {
        let queue = volume.queues().open(IoClass::Slot, &QueueOptions::default())?;
        let extent = volume.allocate(slots_for(&volume, BUCKETS_INITIAL))?;
        let table = TableAt { generation, extent, buckets: BUCKETS_INITIAL, entries: 0 };
        let t = PagedTable {
            inner: Mutex::new(Inner {
                volume,
                queue,
                table,
                snapshot: None,
                cache: PageCache::new(frames),
                scratch: Vec::with_capacity(ENTRIES_MAX),
                next_generation: generation + 1,
            }),
            counters: PageCounters::default(),
        };
        {
            let mut i = t.inner.lock();
            let empty = vec![Vec::new(); BUCKETS_INITIAL as usize];
            if let Err(e) = i.write_run(table, 0, &empty, &t.counters) {
                i.volume.release(extent);
                return Err(e);
            }
        }
        Ok(t)
    }

    /// A working table copied from the snapshot a checkpoint named, each entry's location
    /// passed through `remap` (which renames segments to this open's table slots, and drops
    /// entries naming a segment collected since: `None`).
    ///
    /// # Errors
    /// A snapshot page that does not decode, or that does not fit its extent
    /// ([`Error::Corruption`]); the space layer's error.
    pub fn from_snapshot(
        volume: Arc<Volume>,
        frames: usize,
        snapshot: TableAt,
        remap: &mut dyn FnMut(u64) -> Option<u64>,
    ) -> Result<PagedTable> {
        let range = volume.extent_range(snapshot.extent);
        if !snapshot.buckets.is_power_of_two()
            || snapshot.buckets > BUCKETS_MAX
            || u64::from(snapshot.buckets) * PAGE_BYTES as u64 > range.end - range.start
        {
            return Err(Error::Corruption {
                what: format!(
                    "bounded index: a snapshot of {} buckets in {:?}",
                    snapshot.buckets, snapshot.extent
                ),
                offset: range.start,
            });
        }
        let queue = volume.queues().open(IoClass::Slot, &QueueOptions::default())?;
        let extent = volume.allocate(slots_for(&volume, snapshot.buckets))?;
        let generation = snapshot.generation + 1;
        let table = TableAt { generation, extent, ..snapshot };
        let t = PagedTable {
            inner: Mutex::new(Inner {
                volume,
                queue,
                table,
                snapshot: Some(snapshot.extent),
                cache: PageCache::new(frames),
                scratch: Vec::with_capacity(ENTRIES_MAX),
                next_generation: generation + 1,
            }),
            counters: PageCounters::default(),
        };
        {
            let mut i = t.inner.lock();
            match i.copy_into(snapshot, table, remap, &t.counters) {
                Ok(kept) => i.table.entries = kept,
                Err(e) => {
                    i.volume.release(extent);
                    return Err(e);
                }
            }
        }
        Ok(t)
    }

    /// Entries held.
    pub fn len(&self) -> u64 {
        self.inner.lock().table.entries
    }

    /// Bytes held in memory: the cache (fixed when made) and the table's own fields.
    pub fn memory_bytes(&self) -> usize {
        let i = self.inner.lock();
        i.cache.memory_bytes() + std::mem::size_of::<Inner>() + ENTRIES_MAX * 16
    }

    /// The working table's buckets.
    pub fn buckets(&self) -> u32 {
        self.inner.lock().table.buckets
    }

    /// The snapshot the newest checkpoint named.
    pub fn snapshot(&self) -> Option<Extent> {
        self.inner.lock().snapshot
    }

    /// Copies the working table (the cache first) into a new snapshot, written and flushed:
    /// what a checkpoint names. The caller commits it, then calls
    /// [`PagedTable::snapshot_named`]; or, if the commit fails, gives its extent back.
    ///
    /// # Errors
    /// A page that does not decode, or the space layer's error.
    pub fn write_snapshot(&self) -> Result<TableAt> {
        let mut i = self.inner.lock();
        let from = i.table;
        let extent = i.volume.allocate(slots_for(&i.volume, from.buckets))?;
        let to = TableAt { generation: i.next_generation, extent, ..from };
        i.next_generation += 1;
        let written = i.copy_into(from, to, &mut Some, &self.counters).and_then(|kept| {
            assert_eq!(kept, from.entries, "a snapshot keeps every entry");
            i.queue.flush()?;
            Ok(())
        });
        if let Err(e) = written {
            i.volume.release(extent);
            return Err(e);
        }
        Ok(to)
    }

    /// Takes note that a checkpoint's commit named `snapshot` (and removed the one before).
    pub fn snapshot_named(&self, snapshot: Extent) {
        self.inner.lock().snapshot = Some(snapshot);
    }

    /// The location of `digest`.
    ///
    /// # Errors
    /// A page that does not decode ([`Error::Corruption`]), or the device's error.
    pub fn get(&self, digest: u64) -> Result<Option<u64>> {
        let mut i = self.inner.lock();
        let b = i.bucket(digest);
        let f = i.frame(b, &self.counters)?;
        Ok(f.iter().find(|e| e.0 == digest).map(|e| e.1))
    }

    /// The location of `digest` if its bucket's page is cached and no one holds the table
    /// (`None` otherwise): never a device read, never a wait. For callers' threads, which
    /// must not stall behind the worker's page reads.
    pub fn get_resident(&self, digest: u64) -> Option<Option<u64>> {
        let mut i = self.inner.try_lock()?;
        let b = i.bucket(digest);
        let f = i.cache.get(b)?;
        Some(f.entries.iter().find(|e| e.0 == digest).map(|e| e.1))
    }

    /// Sets `digest`'s location; returns the one it replaces.
    ///
    /// # Errors
    /// As [`PagedTable::get`], or no room for a doubling.
    pub fn insert(&self, digest: u64, loc: u64) -> Result<Option<u64>> {
        assert_ne!(loc, 0, "a location of 0 is not a record's");
        let mut i = self.inner.lock();
        loop {
            let b = i.bucket(digest);
            i.frame(b, &self.counters)?;
            let f = i.cache.get(b).expect("loaded above");
            if let Some(e) = f.entries.iter_mut().find(|e| e.0 == digest) {
                let old = std::mem::replace(&mut e.1, loc);
                i.cache.mark_dirty(b);
                return Ok(Some(old));
            }
            let crowded = i.table.entries + 1
                > (f64::from(i.table.buckets) * ENTRIES_MAX as f64 * LOAD_MAX) as u64;
            let f = i.cache.get(b).expect("loaded above");
            if f.entries.len() < ENTRIES_MAX && !crowded {
                f.entries.push((digest, loc));
                i.cache.mark_dirty(b);
                i.table.entries += 1;
                return Ok(None);
            }
            i.double(&self.counters)?;
        }
    }

    /// Removes `digest`; returns its location.
    ///
    /// # Errors
    /// As [`PagedTable::get`].
    pub fn remove(&self, digest: u64) -> Result<Option<u64>> {
        let mut i = self.inner.lock();
        let b = i.bucket(digest);
        i.frame(b, &self.counters)?;
        let f = i.cache.get(b).expect("loaded above");
        let Some(at) = f.entries.iter().position(|e| e.0 == digest) else { return Ok(None) };
        let (_, loc) = f.entries.swap_remove(at);
        i.cache.mark_dirty(b);
        i.table.entries -= 1;
        Ok(Some(loc))
    }

    /// Points `digest` at `to` if it points at `from`; returns whether it did.
    ///
    /// # Errors
    /// As [`PagedTable::get`].
    pub fn replace_if(&self, digest: u64, from: u64, to: u64) -> Result<bool> {
        let mut i = self.inner.lock();
        let b = i.bucket(digest);
        i.frame(b, &self.counters)?;
        let f = i.cache.get(b).expect("loaded above");
        match f.entries.iter_mut().find(|e| e.0 == digest && e.1 == from) {
            Some(e) => {
                e.1 = to;
                i.cache.mark_dirty(b);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Calls `each` with every entry, bucket by bucket: cached buckets from the cache, the
    /// rest read from the volume without displacing cached ones.
    ///
    /// # Errors
    /// As [`PagedTable::get`].
    pub fn for_each(&self, mut each: impl FnMut(u64, u64)) -> Result<()> {
        let mut i = self.inner.lock();
        let table = i.table;
        let mut run = Vec::new();
        let mut b = 0;
        while b < table.buckets {
            let n = DOUBLING_CHUNK_BUCKETS.min(table.buckets - b);
            i.read_run(table, b, n, &mut run, &self.counters)?;
            for page in &run {
                for &(d, l) in page {
                    each(d, l);
                }
            }
            b += n;
        }
        Ok(())
    }
}

impl Inner {
    fn bucket(&self, digest: u64) -> u32 {
        index_page::bucket_of(digest, self.table.buckets)
    }

    fn address(&self, table: TableAt, bucket: u32) -> u64 {
        self.volume.extent_range(table.extent).start + u64::from(bucket) * PAGE_BYTES as u64
    }

    /// The entries of bucket `b`, read into the cache if they are not there.
    fn frame(&mut self, b: u32, counters: &PageCounters) -> Result<&Vec<(u64, u64)>> {
        if !self.cache.contains(b) {
            let table = self.table;
            let at = self.address(table, b);
            let image = self.queue.read_at(at, PAGE_BYTES)?;
            counters.reads.fetch_add(1, Ordering::Relaxed);
            let mut entries = std::mem::take(&mut self.scratch);
            let page = page_id(table.generation, b, table.buckets);
            let decoded = index_page::decode(&image, page, &mut entries);
            let result = decoded.map_err(|why| Error::Corruption {
                what: format!("bounded index page, bucket {b}: {why}"),
                offset: at,
            });
            if result.is_ok() {
                if let Some(evicted) = self.cache.insert(b, &entries, false) {
                    let mut pages = vec![evicted];
                    pages.extend(self.cache.take_dirty_ahead(WRITE_BACK_BATCH - 1));
                    self.write_back(table, pages, counters)?;
                }
            }
            self.scratch = entries;
            result?;
        }
        Ok(&self.cache.get(b).expect("cached above").entries)
    }

    /// Writes back the pages of `pages` (not durably), each its own request, at the queue's
    /// depth.
    fn write_back(
        &mut self,
        table: TableAt,
        pages: Vec<Evicted>,
        counters: &PageCounters,
    ) -> Result<()> {
        let mut failed: Option<Error> = None;
        let mut done = Vec::new();
        // Reaps at least `min` completions; false when the ring itself failed (nothing in
        // flight will complete).
        let mut reap = |q: &mut VolumeQueue, min: usize, failed: &mut Option<Error>| {
            done.clear();
            match q.reap(min, &mut done) {
                Ok(_) => {
                    for c in done.drain(..) {
                        if let Err(e) = c.result {
                            failed.get_or_insert(e.into());
                        }
                    }
                    true
                }
                Err(e) => {
                    failed.get_or_insert(e.into());
                    false
                }
            }
        };
        let mut ring_ok = true;
        for e in pages {
            if self.queue.in_flight() >= self.queue.depth() {
                ring_ok = reap(&mut self.queue, 1, &mut failed);
            }
            if !ring_ok || failed.is_some() {
                break;
            }
            let mut buf = AlignedBuf::zeroed(PAGE_BYTES);
            let at = page_id(table.generation, e.bucket, table.buckets);
            index_page::encode(at, &e.entries, &mut buf);
            let op = Op::Write { offset: self.address(table, e.bucket), buf, durable: false };
            if let Err((err, _)) = self.queue.submit(IoRequest { tag: u64::from(e.bucket), op }) {
                failed.get_or_insert(err.into());
                break;
            }
            counters.writes.fetch_add(1, Ordering::Relaxed);
        }
        // Every request is reaped before the queue serves another, failed or not.
        while ring_ok && self.queue.in_flight() > 0 {
            ring_ok = reap(&mut self.queue, 1, &mut failed);
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Writes the pages of buckets `first..` of `table` with one request (no flush).
    fn write_run(
        &mut self,
        table: TableAt,
        first: u32,
        pages: &[Vec<(u64, u64)>],
        counters: &PageCounters,
    ) -> Result<()> {
        let mut buf = AlignedBuf::zeroed(pages.len() * PAGE_BYTES);
        for (k, entries) in pages.iter().enumerate() {
            let at = page_id(table.generation, first + k as u32, table.buckets);
            index_page::encode(at, entries, &mut buf[k * PAGE_BYTES..(k + 1) * PAGE_BYTES]);
        }
        let addr = self.address(table, first);
        self.queue.write_at(addr, buf, false)?;
        counters.writes.fetch_add(pages.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// The entries of buckets `first..first + n`, from the cache where cached (which holds
    /// their newest state), else from one read of their pages.
    fn read_run(
        &mut self,
        table: TableAt,
        first: u32,
        n: u32,
        out: &mut Vec<Vec<(u64, u64)>>,
        counters: &PageCounters,
    ) -> Result<()> {
        out.clear();
        let addr = self.address(table, first);
        let image = self.queue.read_at(addr, n as usize * PAGE_BYTES)?;
        counters.reads.fetch_add(u64::from(n), Ordering::Relaxed);
        for k in 0..n {
            let b = first + k;
            if let Some(f) = self.cache.get(b) {
                out.push(f.entries.clone());
                continue;
            }
            let mut entries = Vec::new();
            let page = page_id(table.generation, b, table.buckets);
            let bytes = &image[k as usize * PAGE_BYTES..(k as usize + 1) * PAGE_BYTES];
            index_page::decode(bytes, page, &mut entries).map_err(|why| Error::Corruption {
                what: format!("bounded index page, bucket {b}: {why}"),
                offset: addr + u64::from(k) * PAGE_BYTES as u64,
            })?;
            out.push(entries);
        }
        Ok(())
    }

    /// Doubles the working table: writes a new extent of twice the buckets, chunk by chunk,
    /// from the old one (cached pages are the newest), then gives the old extent back.
    fn double(&mut self, counters: &PageCounters) -> Result<()> {
        let old = self.table;
        if old.buckets >= BUCKETS_MAX {
            return Err(Error::InvalidArgument(format!(
                "the bounded index is full: {} buckets",
                old.buckets
            )));
        }
        let buckets = old.buckets * 2;
        let extent = self.volume.allocate(slots_for(&self.volume, buckets))?;
        let new = TableAt { generation: self.next_generation, extent, buckets, ..old };
        self.next_generation += 1;
        let written = self.copy_into(old, new, &mut Some, counters);
        if let Err(e) = written {
            self.volume.release(extent);
            return Err(e);
        }
        // Every dirty frame went into the new pages; the old working table was never named.
        self.cache.take_dirty();
        self.cache.clear();
        self.volume.release(old.extent);
        self.table = new;
        counters.doublings.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Writes every page of `to` (of as many buckets as `from`, or twice) from the entries of
    /// `from` (cached pages first), each location passed through `remap`; returns the
    /// entries kept.
    fn copy_into(
        &mut self,
        from: TableAt,
        to: TableAt,
        remap: &mut dyn FnMut(u64) -> Option<u64>,
        counters: &PageCounters,
    ) -> Result<u64> {
        assert!(to.buckets == from.buckets || to.buckets == from.buckets * 2);
        let mut run = Vec::new();
        let mut kept = 0;
        let mut first = 0;
        while first < from.buckets {
            let n = DOUBLING_CHUNK_BUCKETS.min(from.buckets - first);
            self.read_run(from, first, n, &mut run, counters)?;
            let mut low = vec![Vec::new(); n as usize];
            let mut high = vec![Vec::new(); n as usize];
            for (k, page) in run.iter().enumerate() {
                for &(d, l) in page {
                    let Some(l) = remap(l) else { continue };
                    kept += 1;
                    if index_page::bucket_of(d, to.buckets) == first + k as u32 {
                        low[k].push((d, l));
                    } else {
                        high[k].push((d, l));
                    }
                }
            }
            self.write_run(to, first, &low, counters)?;
            if to.buckets > from.buckets {
                self.write_run(to, first + from.buckets, &high, counters)?;
            }
            first += n;
        }
        Ok(kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn volume() -> Arc<Volume> {
        let dev = shale_io::SimDevice::new(64 << 20, 4096, 1).unwrap();
        let opts = shale_space::VolumeOptions {
            layout: shale_space::LayoutOptions {
                slot_bytes: 64 << 10,
                version_log_bytes: 64 << 10,
                wal_bytes: 0,
            },
            create_if_blank: true,
            grow_slots_min: 4,
            initial_slots: 4,
            engine: Some(shale_space::EngineKind::Hash),
        };
        Arc::new(Volume::open(Arc::new(dev), &opts).unwrap().volume)
    }

    #[test]
    fn a_small_cache_over_a_doubling_table_matches_a_hash_map() {
        let vol = volume();
        let t = PagedTable::create(vol.clone(), 4, 1).unwrap();
        let mut m: HashMap<u64, u64> = HashMap::new();
        let mut x = 88172645463325252u64;
        for step in 1..100_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let d = x % 40_000;
            match x % 7 {
                0 | 1 => assert_eq!(t.remove(d).unwrap(), m.remove(&d)),
                2 => assert_eq!(t.get(d).unwrap(), m.get(&d).copied()),
                3 => {
                    let want = m.get(&d) == Some(&(step - 1));
                    assert_eq!(t.replace_if(d, step - 1, step).unwrap(), want);
                    if want {
                        m.insert(d, step);
                    }
                }
                _ => assert_eq!(t.insert(d, step).unwrap(), m.insert(d, step)),
            }
            assert_eq!(t.len(), m.len() as u64);
        }
        assert!(t.counters.doublings.load(Ordering::Relaxed) >= 2);
        let snap = t.write_snapshot().unwrap();
        assert_eq!(snap.entries, m.len() as u64);
        let mut all = Vec::new();
        t.for_each(|d, l| all.push((d, l))).unwrap();
        all.sort_unstable();
        let mut want: Vec<(u64, u64)> = m.into_iter().collect();
        want.sort_unstable();
        assert_eq!(all, want);
        // A copy of the snapshot, dropping odd locations, holds the rest.
        let copy =
            PagedTable::from_snapshot(vol, 4, snap, &mut |l| (l % 2 == 0).then_some(l)).unwrap();
        let mut got = Vec::new();
        copy.for_each(|d, l| got.push((d, l))).unwrap();
        got.sort_unstable();
        want.retain(|e| e.1 % 2 == 0);
        assert_eq!(got, want);
        assert_eq!(copy.len(), want.len() as u64);
    }
}
