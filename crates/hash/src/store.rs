//! The hash store: a log of records in segments of the volume's slots, and an index in
//! memory from each key's digest to its newest record.
//!
//! Write path of one store or delete, in order (writers serialise on the writer lock, so the
//! mode check, the log order and the index update agree):
//! 1. Check the key and value (typed errors) and that the store is not stopped (P5).
//! 2. For a mode other than plain overwrite, and for deletes, look the key up (a digest hit
//!    is confirmed by reading the record's key).
//! 3. Encode the record with the next sequence number and pack it into fresh log pages of
//!    the active segment; when it does not fit, start a new segment: allocate a slot, and
//!    commit it, with its generation, to the version log before any page of it is written.
//! 4. Write the pages with one durable write. A page holding an acknowledged record is never
//!    written again (a torn rewrite would destroy it), so each append starts on a new page.
//! 5. Point the index at the record (or drop the key, for a delete) and acknowledge.
//!
//! A failed write or commit stops the store: later writes answer [`Error::Stopped`] until it
//! is reopened, reads go on.
//!
//! Read path: digest -> index -> location -> read the record's pages (checksums, generation
//! and page index checked) -> reassemble -> compare the full key -> the value.
//!
//! Recovery: the version log names the segments; each is scanned from its first page in
//! generation order, records replayed into the index in log order (which is sequence order),
//! until the first page that is not a valid page of that generation. An invalid page that a
//! later valid page says was durable is damage ([`Error::Corruption`]), not a torn tail. New
//! writes after an open go to a new segment, so a torn tail is never written over.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};
use shale_io::{AlignedBuf, DeviceRef, FileOptions, QueueExt, QueueOptions};
use shale_space::log_page::{self, FRAGMENT_HEADER_BYTES, FragmentType, PAGE_BYTES, PageBuf};
use shale_space::{Edit, Extent, IoClass, LayoutOptions, Volume, VolumeOptions, VolumeQueue};

use crate::error::{Error, Result};
use crate::index::{Index, Location, Probe, SEGMENT_PAGES_MAX, SEGMENTS_MAX, digest};
use crate::meta::{self, SegmentMeta};
use crate::record::{self, Kind, RECORD_BYTES_MAX, Record};

/// How a store treats a key that is (or is not) present (the SNIA KV API's store options).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StoreMode {
    /// Store whether or not the key exists.
    #[default]
    Overwrite,
    /// Store only if the key is absent; else [`Error::KeyExists`].
    NoOverwrite,
    /// Store only if the key is present; else [`Error::KeyNotFound`].
    UpdateOnly,
}

/// How to open a hash store.
#[derive(Clone, Debug)]
pub struct HashOptions {
    /// Make a new store where the path or device holds none.
    pub create_if_missing: bool,
    /// Size of a slot of a new volume, which is one segment of the record log: at least
    /// [`SEGMENT_BYTES_MIN`] so the largest record fits, at most 1 GiB.
    pub segment_bytes: u64,
    /// Size of each version log mirror of a new volume.
    pub version_log_bytes: u64,
    /// Bits of the key digest the index keeps: 64. Fewer only in tests, to make digest
    /// collisions common enough to test.
    pub digest_bits: u32,
    /// Read queues kept for concurrent reads.
    pub read_queues: usize,
}

/// Smallest segment: the largest record (a 255-byte key and a 2 MiB value) in log pages,
/// with room to spare.
pub const SEGMENT_BYTES_MIN: u64 = 4 << 20;

impl Default for HashOptions {
    fn default() -> HashOptions {
        HashOptions {
            create_if_missing: true,
            segment_bytes: 8 << 20,
            version_log_bytes: 8 << 20,
            digest_bits: 64,
            read_queues: 4,
        }
    }
}

impl HashOptions {
    /// Checks the options.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the bad option and what is accepted.
    pub fn validate(&self) -> Result<()> {
        let max = u64::from(SEGMENT_PAGES_MAX) * PAGE_BYTES as u64;
        if !(SEGMENT_BYTES_MIN..=max).contains(&self.segment_bytes)
            || self.segment_bytes % PAGE_BYTES as u64 != 0
        {
            return Err(Error::InvalidArgument(format!(
                "segment_bytes {} must be a multiple of {PAGE_BYTES} in {SEGMENT_BYTES_MIN}..={max}",
                self.segment_bytes
            )));
        }
        if !(1..=64).contains(&self.digest_bits) {
            return Err(Error::InvalidArgument(format!(
                "digest_bits {} must be in 1..=64",
                self.digest_bits
            )));
        }
        if self.read_queues == 0 {
            return Err(Error::InvalidArgument("read_queues must be at least 1".into()));
        }
        Ok(())
    }

    fn volume_options(&self) -> VolumeOptions {
        VolumeOptions {
            layout: LayoutOptions {
                slot_bytes: self.segment_bytes,
                version_log_bytes: self.version_log_bytes,
                wal_bytes: 0,
            },
            create_if_blank: self.create_if_missing,
            grow_slots_min: 4,
            initial_slots: 4,
        }
    }
}

/// Counters of a store since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HashStats {
    /// Live keys.
    pub keys: u64,
    /// Stores acknowledged.
    pub stores: u64,
    /// Deletes that removed a key.
    pub deletes: u64,
    /// Key and value bytes of the acknowledged stores.
    pub user_bytes: u64,
    /// Bytes the record log wrote to the device (whole pages).
    pub log_bytes_written: u64,
    /// Segments in the log.
    pub segments: u64,
    /// Bytes the index's tables hold in memory.
    pub index_memory_bytes: u64,
    /// Records replayed by the open, and how long it took.
    pub recovered_records: u64,
    /// Microseconds the open spent recovering.
    pub recovery_micros: u64,
}

/// A segment of the log, as the store holds it.
#[derive(Clone, Copy, Debug)]
struct Segment {
    generation: u64,
    extent: Extent,
    /// Address of its first byte.
    start: u64,
    /// Pages it holds, once sealed: every page below is durable.
    sealed_pages: Option<u32>,
}

/// The segment being appended to.
#[derive(Debug)]
struct Active {
    slot: u32,
    next_page: u32,
    pages: u32,
    prev_crc: u32,
}

/// What only the writer touches.
struct Writer {
    queue: VolumeQueue,
    active: Option<Active>,
    /// The newest segment and the pages its log holds (appended, or found by recovery): the
    /// next segment seals it there.
    last_end: Option<(u64, u32)>,
    next_seq: u64,
    next_generation: u64,
}

/// A hash-indexed, log-structured key-value store on one volume (one shard).
pub struct HashStore {
    volume: Volume,
    opts: HashOptions,
    index: RwLock<Index>,
    segments: RwLock<Vec<Segment>>,
    writer: Mutex<Writer>,
    readers: Mutex<Vec<VolumeQueue>>,
    stopped: Mutex<Option<String>>,
    stores: AtomicU64,
    deletes: AtomicU64,
    user_bytes: AtomicU64,
    log_bytes: AtomicU64,
    recovered_records: u64,
    recovery_micros: u64,
}

impl std::fmt::Debug for HashStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HashStore").field("keys", &self.index.read().len()).finish()
    }
}

impl HashStore {
    /// Opens the store at `path` (a directory, which gets a volume file inside it, a volume
    /// file or a block device), creating it where nothing is stored and the options allow.
    ///
    /// ```
    /// use shale_hash::{HashOptions, HashStore, StoreMode};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = HashStore::open(dir.path(), HashOptions::default())?;
    /// store.store(b"key-1", b"value", StoreMode::Overwrite)?;
    /// assert_eq!(store.retrieve(b"key-1")?, Some(b"value".to_vec()));
    /// drop(store);
    /// let store = HashStore::open(dir.path(), HashOptions::default())?;
    /// assert_eq!(store.retrieve(b"key-1")?, Some(b"value".to_vec()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// Bad options ([`Error::InvalidArgument`]), a volume of another engine
    /// ([`Error::NotHashStore`]), damage ([`Error::Corruption`]), or the space layer's error.
    pub fn open(path: impl AsRef<Path>, opts: HashOptions) -> Result<HashStore> {
        opts.validate()?;
        let opened =
            Volume::open_path(path.as_ref(), &opts.volume_options(), &FileOptions::default())?;
        HashStore::recover(opened, opts)
    }

    /// Opens the store on `device` (a simulated device in tests, say), as [`HashStore::open`].
    ///
    /// # Errors
    /// As [`HashStore::open`].
    pub fn open_device(device: DeviceRef, opts: HashOptions) -> Result<HashStore> {
        opts.validate()?;
        let opened = Volume::open(device, &opts.volume_options())?;
        HashStore::recover(opened, opts)
    }

    fn recover(opened: shale_space::Opened, opts: HashOptions) -> Result<HashStore> {
        let started = std::time::Instant::now();
        let volume = opened.volume;
        let metas = meta::decode(&opened.versions)?;
        let segments: Vec<Segment> = metas
            .iter()
            .map(|m| Segment {
                generation: m.generation,
                extent: m.extent,
                start: volume.extent_range(m.extent).start,
                sealed_pages: m.sealed_pages,
            })
            .collect();
        if segments.len() as u64 >= u64::from(SEGMENTS_MAX) {
            return Err(Error::InvalidArgument("more segments than the index can name".into()));
        }
        let queue = volume.queue(IoClass::Slot, &QueueOptions::default())?;
        let next_generation = segments.last().map_or(1, |s| s.generation + 1);
        let mut store = HashStore {
            opts,
            index: RwLock::new(Index::default()),
            segments: RwLock::new(segments),
            writer: Mutex::new(Writer {
                queue,
                active: None,
                last_end: None,
                next_seq: 1,
                next_generation,
            }),
            readers: Mutex::new(Vec::new()),
            stopped: Mutex::new(None),
            stores: AtomicU64::new(0),
            deletes: AtomicU64::new(0),
            user_bytes: AtomicU64::new(0),
            log_bytes: AtomicU64::new(0),
            recovered_records: 0,
            recovery_micros: 0,
            volume,
        };
        let (records, max_seq) = store.replay()?;
        store.writer.get_mut().next_seq = max_seq + 1;
        store.recovered_records = records;
        store.recovery_micros = started.elapsed().as_micros() as u64;
        Ok(store)
    }

    /// Scans every segment and rebuilds the index; returns the records replayed and the
    /// largest sequence number seen.
    fn replay(&mut self) -> Result<(u64, u64)> {
        let segments = self.segments.read().clone();
        let (mut count, mut max_seq) = (0, 0);
        for (slot, seg) in segments.iter().enumerate() {
            let bytes = self.volume.layout().slot_bytes * u64::from(seg.extent.count);
            let image = self.writer.get_mut().queue.read_at(seg.start, bytes as usize)?;
            let (records, end) = scan_segment(&image, seg, slot as u32)?;
            self.writer.get_mut().last_end = Some((seg.generation, end));
            for (loc, rec) in records {
                let r = Record::decode(&rec).ok_or_else(|| Error::Corruption {
                    what: format!("record of segment {} page {}", seg.generation, loc.page),
                    offset: seg.start + u64::from(loc.page) * PAGE_BYTES as u64,
                })?;
                max_seq = max_seq.max(r.seq);
                count += 1;
                let d = digest(r.key, self.opts.digest_bits);
                let owner = self.digest_owner(d, r.key)?;
                let mut index = self.index.write();
                match r.kind {
                    Kind::Store => index.insert(d, r.key, loc, owner),
                    Kind::Delete => index.remove(d, r.key, owner),
                }
            }
        }
        Ok((count, max_seq))
    }

    /// Stores `value` under `key`, durably: once this returns the pair survives a crash or
    /// a power loss (P1), whole or not at all.
    ///
    /// # Errors
    /// [`Error::KeyLength`], [`Error::ValueTooLarge`], [`Error::KeyExists`] or
    /// [`Error::KeyNotFound`] (by `mode`), [`Error::Stopped`] after an earlier failed write,
    /// or the device's error (which stops the store).
    pub fn store(&self, key: &[u8], value: &[u8], mode: StoreMode) -> Result<()> {
        record::check_key(key)?;
        record::check_value(value)?;
        let mut w = self.writer.lock();
        self.refuse_if_stopped()?;
        let d = digest(key, self.opts.digest_bits);
        let present = self.lookup(d, key)?.is_some();
        match (mode, present) {
            (StoreMode::NoOverwrite, true) => return Err(Error::KeyExists),
            (StoreMode::UpdateOnly, false) => return Err(Error::KeyNotFound),
            _ => {}
        }
        let owner = self.digest_owner(d, key)?;
        let seq = w.next_seq;
        let rec = Record { kind: Kind::Store, seq, key, value }.encode();
        let loc = self.append(&mut w, &rec)?;
        w.next_seq += 1;
        self.index.write().insert(d, key, loc, owner);
        self.stores.fetch_add(1, Ordering::Relaxed);
        self.user_bytes.fetch_add((key.len() + value.len()) as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Deletes `key`, durably; returns whether it was present (nothing is written if not).
    ///
    /// # Errors
    /// As [`HashStore::store`].
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        record::check_key(key)?;
        let mut w = self.writer.lock();
        self.refuse_if_stopped()?;
        let d = digest(key, self.opts.digest_bits);
        if self.lookup(d, key)?.is_none() {
            return Ok(false);
        }
        let owner = self.digest_owner(d, key)?;
        let seq = w.next_seq;
        let rec = Record { kind: Kind::Delete, seq, key, value: b"" }.encode();
        self.append(&mut w, &rec)?;
        w.next_seq += 1;
        self.index.write().remove(d, key, owner);
        self.deletes.fetch_add(1, Ordering::Relaxed);
        Ok(true)
    }

    /// The value stored under `key`, or `None`.
    ///
    /// # Errors
    /// [`Error::KeyLength`]; [`Error::Corruption`] when the record fails its checks (never a
    /// wrong value); the device's error.
    pub fn retrieve(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        record::check_key(key)?;
        let d = digest(key, self.opts.digest_bits);
        Ok(self.lookup(d, key)?.map(|(_, mut rec)| rec.split_off(record::HEADER_BYTES + key.len())))
    }

    /// Copies the value of `key` from byte `offset` on into `buf`; returns how many bytes it
    /// copied (the value's length less `offset`), or `None` when the key is absent.
    ///
    /// # Errors
    /// [`Error::BufferTooSmall`] carrying the size needed when `buf` is shorter than that
    /// (nothing is copied); [`Error::InvalidArgument`] for an offset past the value's end;
    /// otherwise as [`HashStore::retrieve`].
    pub fn retrieve_into(
        &self,
        key: &[u8],
        offset: usize,
        buf: &mut [u8],
    ) -> Result<Option<usize>> {
        let Some(value) = self.retrieve(key)? else {
            return Ok(None);
        };
        if offset > value.len() {
            return Err(Error::InvalidArgument(format!(
                "offset {offset} past the value's {} bytes",
                value.len()
            )));
        }
        let needed = value.len() - offset;
        if buf.len() < needed {
            return Err(Error::BufferTooSmall { needed });
        }
        buf[..needed].copy_from_slice(&value[offset..]);
        Ok(Some(needed))
    }

    /// Which of `keys` are present: bit `i % 8` of byte `i / 8` for `keys[i]` (the SNIA KV
    /// API's exist, for many keys at once).
    ///
    /// # Errors
    /// As [`HashStore::retrieve`], for the first key that fails.
    pub fn exist(&self, keys: &[&[u8]]) -> Result<Vec<u8>> {
        let mut bits = vec![0u8; keys.len().div_ceil(8)];
        for (i, key) in keys.iter().enumerate() {
            record::check_key(key)?;
            if self.lookup(digest(key, self.opts.digest_bits), key)?.is_some() {
                bits[i / 8] |= 1 << (i % 8);
            }
        }
        Ok(bits)
    }

    /// Counters since the open.
    pub fn stats(&self) -> HashStats {
        let index = self.index.read();
        HashStats {
            keys: index.len() as u64,
            stores: self.stores.load(Ordering::Relaxed),
            deletes: self.deletes.load(Ordering::Relaxed),
            user_bytes: self.user_bytes.load(Ordering::Relaxed),
            log_bytes_written: self.log_bytes.load(Ordering::Relaxed),
            segments: self.segments.read().len() as u64,
            index_memory_bytes: index.memory_bytes() as u64,
            recovered_records: self.recovered_records,
            recovery_micros: self.recovery_micros,
        }
    }

    /// The volume under the store (for its I/O counters and checks).
    pub fn volume(&self) -> &Volume {
        &self.volume
    }

    fn refuse_if_stopped(&self) -> Result<()> {
        match &*self.stopped.lock() {
            Some(why) => Err(Error::Stopped(why.clone())),
            None => Ok(()),
        }
    }

    fn stop(&self, e: Error) -> Error {
        let mut stopped = self.stopped.lock();
        if stopped.is_none() {
            *stopped = Some(e.to_string());
        }
        e
    }

    /// The key's location and encoded record, if present: the index's candidate confirmed by
    /// reading the record and comparing its key.
    fn lookup(&self, d: u64, key: &[u8]) -> Result<Option<(Location, Vec<u8>)>> {
        let probe = self.index.read().probe(d, key);
        let loc = match probe {
            Probe::Absent => return Ok(None),
            Probe::Exact(loc) | Probe::Candidate(loc) => loc,
        };
        let rec = self.read_record(loc)?;
        let r =
            Record::decode(&rec).ok_or_else(|| self.corruption(loc, "record does not parse"))?;
        if r.kind != Kind::Store {
            return Err(self.corruption(loc, "the index points at a delete"));
        }
        if r.key != key {
            if let Probe::Exact(_) = probe {
                return Err(self.corruption(loc, "record of another key"));
            }
            return Ok(None);
        }
        Ok(Some((loc, rec)))
    }

    /// Whether the digest entry of `d` (if any) is `key`'s own.
    fn digest_owner(&self, d: u64, key: &[u8]) -> Result<bool> {
        let probe = self.index.read().probe(d, key);
        match probe {
            Probe::Candidate(loc) => {
                let rec = self.read_record(loc)?;
                let r = Record::decode(&rec)
                    .ok_or_else(|| self.corruption(loc, "record does not parse"))?;
                Ok(r.key == key)
            }
            Probe::Exact(_) | Probe::Absent => Ok(false),
        }
    }

    fn corruption(&self, loc: Location, why: &str) -> Error {
        let start = self.segments.read().get(loc.segment as usize).map_or(0, |s| s.start);
        Error::Corruption {
            what: format!("record log, segment slot {} page {}: {why}", loc.segment, loc.page),
            offset: start + u64::from(loc.page) * PAGE_BYTES as u64,
        }
    }

    /// Reads the encoded record at `loc`, checking every page it spans.
    fn read_record(&self, loc: Location) -> Result<Vec<u8>> {
        let seg = self.segments.read()[loc.segment as usize];
        let at = seg.start + u64::from(loc.page) * PAGE_BYTES as u64;
        let mut queue = match self.readers.lock().pop() {
            Some(q) => q,
            None => self.volume.queue(IoClass::Slot, &QueueOptions::default())?,
        };
        let read = queue.read_at(at, usize::from(loc.pages) * PAGE_BYTES);
        {
            let mut readers = self.readers.lock();
            if readers.len() < self.opts.read_queues {
                readers.push(queue);
            }
        }
        let image = read?;
        let mut fragments = log_page::Reassembler::new();
        for i in 0..u32::from(loc.pages) {
            let index = loc.page + i;
            let bytes = &image[i as usize * PAGE_BYTES..(i as usize + 1) * PAGE_BYTES];
            let page = log_page::decode(bytes, seg.generation, index)
                .map_err(|why| self.corruption(loc, &format!("page {index}: {why:?}")))?;
            let mut at = log_page::PAGE_HEADER_BYTES;
            for frag in page.fragments {
                let here = at;
                at += FRAGMENT_HEADER_BYTES + frag.data.len();
                if i == 0 && here < usize::from(loc.offset) {
                    continue;
                }
                if let Some(rec) = fragments.push(frag).map_err(|e| {
                    self.corruption(loc, &format!("fragment {:?} out of order", e.0))
                })? {
                    return Ok(rec);
                }
            }
        }
        Err(self.corruption(loc, "record runs past the pages the index names"))
    }

    /// Appends one encoded record durably; returns where it lies. Stops the store on failure.
    fn append(&self, w: &mut Writer, rec: &[u8]) -> Result<Location> {
        assert!(rec.len() <= RECORD_BYTES_MAX);
        let pages = pages_for(rec.len());
        let fits = w.active.as_ref().is_some_and(|a| a.next_page + pages <= a.pages);
        if !fits {
            self.start_segment(w).map_err(|e| self.stop(e))?;
        }
        let active = w.active.as_mut().expect("a segment is active");
        let seg = self.segments.read()[active.slot as usize];
        let first = active.next_page;
        let mut image = Vec::with_capacity(pages as usize * PAGE_BYTES);
        let mut page = PageBuf::new();
        let mut rest = rec;
        let mut is_first = true;
        let mut index = first;
        loop {
            let n = rest.len().min(page.room() - FRAGMENT_HEADER_BYTES);
            let last = n == rest.len();
            page.push(FragmentType::at(is_first, last), &rest[..n]);
            rest = &rest[n..];
            is_first = false;
            if last || page.room() <= FRAGMENT_HEADER_BYTES {
                // Every page before `first` is durable: each append waits for its write.
                let (bytes, crc) = page.seal(seg.generation, index, first, active.prev_crc);
                image.extend_from_slice(bytes);
                active.prev_crc = crc;
                index += 1;
                page = PageBuf::new();
            }
            if last {
                break;
            }
        }
        assert_eq!(index - first, pages, "pages_for agrees with the packing");
        let at = seg.start + u64::from(first) * PAGE_BYTES as u64;
        let len = image.len() as u64;
        w.queue
            .write_at(at, AlignedBuf::padded_copy(&image, PAGE_BYTES), true)
            .map_err(|e| self.stop(e.into()))?;
        let active = w.active.as_mut().expect("a segment is active");
        active.next_page = index;
        w.last_end = w.last_end.map(|(g, _)| (g, index));
        self.log_bytes.fetch_add(len, Ordering::Relaxed);
        Ok(Location {
            segment: active.slot,
            page: first,
            offset: log_page::PAGE_HEADER_BYTES as u16,
            pages: pages as u16,
        })
    }

    /// Allocates a segment and commits it to the version log before anything is written in
    /// it: recovery then knows its generation, and finds its pages or, where nothing landed,
    /// pages of another generation (an earlier user of the slot) or zeros, which end its log.
    fn start_segment(&self, w: &mut Writer) -> Result<()> {
        let slot = self.segments.read().len() as u32;
        if slot >= SEGMENTS_MAX {
            return Err(Error::Space(shale_space::Error::NoSpace(
                "the index cannot name more segments".into(),
            )));
        }
        let extent = self.volume.allocate(1)?;
        let generation = w.next_generation;
        let sealed = w.last_end;
        let edit = Edit {
            added: vec![extent],
            engine: meta::encode_added(generation, sealed),
            ..Edit::default()
        };
        let sealed_pages = |s: &Segment| match sealed {
            Some((g, pages)) if g == s.generation => Some(pages),
            _ => s.sealed_pages,
        };
        let mut full = || {
            let mut metas: Vec<SegmentMeta> = self
                .segments
                .read()
                .iter()
                .map(|s| SegmentMeta {
                    generation: s.generation,
                    extent: s.extent,
                    sealed_pages: sealed_pages(s),
                })
                .collect();
            metas.push(SegmentMeta { generation, extent, sealed_pages: None });
            meta::encode_base(&metas)
        };
        if let Err(e) = self.volume.commit(&edit, &mut full) {
            self.volume.release(extent);
            return Err(e.into());
        }
        w.next_generation += 1;
        let start = self.volume.extent_range(extent).start;
        let mut segments = self.segments.write();
        for s in segments.iter_mut() {
            s.sealed_pages = sealed_pages(s);
        }
        segments.push(Segment { generation, extent, start, sealed_pages: None });
        drop(segments);
        w.last_end = Some((generation, 0));
        let pages = (self.volume.layout().slot_bytes / PAGE_BYTES as u64) as u32;
        w.active = Some(Active { slot, next_page: 0, pages, prev_crc: 0 });
        Ok(())
    }
}

/// An encoded record read back from the log, and where it lies.
type Located = (Location, Vec<u8>);

/// Pages a record of `len` bytes spans when it starts on a fresh page.
fn pages_for(len: usize) -> u32 {
    let per_page = log_page::PAGE_PAYLOAD_BYTES - FRAGMENT_HEADER_BYTES;
    len.div_ceil(per_page).max(1) as u32
}

/// The complete records of one segment's image, with their locations, in log order: up to
/// the first page that is not a valid page of the segment's generation following the one
/// before it. An invalid page that a later valid page of the generation claims was durable
/// is damage, and so is one below a sealed segment's page count. Returns the records and the
/// number of valid pages.
fn scan_segment(image: &[u8], seg: &Segment, slot: u32) -> Result<(Vec<Located>, u32)> {
    let pages = (image.len() / PAGE_BYTES) as u32;
    let page_at = |i: u32| &image[i as usize * PAGE_BYTES..(i as usize + 1) * PAGE_BYTES];
    let mut out = Vec::new();
    let mut fragments = log_page::Reassembler::new();
    let mut start: Option<(u32, u16)> = None;
    let mut prev_crc = 0;
    let mut index = 0;
    while index < pages {
        let page = match log_page::decode(page_at(index), seg.generation, index) {
            Ok(p) if p.prev_crc == prev_crc => p,
            _ => break,
        };
        prev_crc = page.crc;
        let mut at = log_page::PAGE_HEADER_BYTES;
        for frag in page.fragments {
            if matches!(frag.kind, FragmentType::Full | FragmentType::First) {
                start = Some((index, at as u16));
            }
            at += FRAGMENT_HEADER_BYTES + frag.data.len();
            let rec = fragments.push(frag).map_err(|e| Error::Corruption {
                what: format!(
                    "record log segment {} page {index}: fragment {:?} out of order",
                    seg.generation, e.0
                ),
                offset: seg.start + u64::from(index) * PAGE_BYTES as u64,
            })?;
            if let Some(rec) = rec {
                let (page, offset) = start.take().expect("a record starts before it ends");
                let loc =
                    Location { segment: slot, page, offset, pages: (index - page + 1) as u16 };
                out.push((loc, rec));
            }
        }
        index += 1;
    }
    // Where the log ends: damage if a later page of this generation says it was durable.
    let durable = (index + 1..pages)
        .filter_map(|i| log_page::claimed(page_at(i)))
        .filter(|&(generation, claimed_index, _)| {
            generation == seg.generation && claimed_index < pages
        })
        .map(|(_, _, synced)| synced)
        .max()
        .unwrap_or(0)
        .max(seg.sealed_pages.unwrap_or(0));
    if index < durable || (seg.sealed_pages.is_some() && fragments.in_record()) {
        return Err(Error::Corruption {
            what: format!(
                "record log segment {} page {index} was durable but is invalid",
                seg.generation
            ),
            offset: seg.start + u64::from(index) * PAGE_BYTES as u64,
        });
    }
    Ok((out, index))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_for_matches_the_page_payload() {
        let per = log_page::PAGE_PAYLOAD_BYTES - FRAGMENT_HEADER_BYTES;
        assert_eq!(pages_for(1), 1);
        assert_eq!(pages_for(per), 1);
        assert_eq!(pages_for(per + 1), 2);
        assert!(pages_for(RECORD_BYTES_MAX) < 1024);
        assert!((pages_for(RECORD_BYTES_MAX) as u64 * PAGE_BYTES as u64) < SEGMENT_BYTES_MIN);
    }
}
