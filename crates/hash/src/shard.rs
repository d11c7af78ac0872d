//! What a shard's threads share: the volume, the segment table, the index, the rounds of its
//! batch writes (with the stop flag) and the counters; and the synchronous reads that recovery
//! (and the worker, for a rare confirmation) make.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};
use shale_io::QueueExt;
use shale_space::log_page::PAGE_BYTES;
use shale_space::page_log::Sequencer;
use shale_space::{IoClass, PoolSpec, PooledQueue, Volume, VolumeQueue};

use crate::checkpoint::Checkpoint;
use crate::error::{Error, Result};
use crate::index::{Index, Location, Probe, digest};
use crate::log::{self, Segment};
use crate::meta::CheckpointMeta;
use crate::options::{HashOptions, HashStats};
use crate::record::{Kind, Record};
use crate::value_cache::ValueCache;

/// The contention profile's site of a wait for a batch round: nobody waits today (the worker
/// begins a round only when none runs), but the sequencer counts any wait there.
static ROUND_WAIT: shale_space::contention::Site =
    shale_space::contention::Site::new("hash: batch round wait");

/// Depth of the queues of the synchronous reads and writes (io's default queue depth).
const SYNC_QUEUE_DEPTH: u32 = 32;

/// The volume's pool the synchronous reads and writes of a store with `opts` check their
/// queues out of: [`HashOptions::read_queues`] of them kept idle.
pub(crate) fn sync_queues(opts: &HashOptions) -> PoolSpec {
    PoolSpec { class: IoClass::Slot, depth: SYNC_QUEUE_DEPTH, idle_max: opts.read_queues }
}

/// Counters the worker keeps.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub stores: AtomicU64,
    pub deletes: AtomicU64,
    pub user_bytes: AtomicU64,
    pub log_bytes: AtomicU64,
    pub batches: AtomicU64,
    pub tails_carried: AtomicU64,
    pub batches_overlapped: AtomicU64,
    pub busy: AtomicU64,
    pub cache_hits: AtomicU64,
    pub caller_reads: AtomicU64,
    /// Record reads through the page cache that failed their checks, whose pages were
    /// dropped from it and read again from the device.
    pub cached_pages_dropped: AtomicU64,
    pub gc_records: AtomicU64,
    pub gc_bytes: AtomicU64,
    pub segments_freed: AtomicU64,
    pub checkpoints: AtomicU64,
    pub checkpoint_bytes: AtomicU64,
    pub checkpoint_entries: AtomicU64,
}

/// Records a segment holds, and how many of them the index points at: what garbage
/// collection picks victims by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Usage {
    pub records: u64,
    pub live: u64,
}

/// What recovery found.
pub(crate) struct Replayed {
    /// Records replayed.
    pub records: u64,
    /// The largest sequence number seen.
    pub max_seq: u64,
    /// The newest segment's generation and valid pages.
    pub last_end: Option<(u64, u32)>,
}

/// State shared by a store's handle and its worker.
pub(crate) struct Shard {
    volume: Arc<Volume>,
    pub opts: HashOptions,
    pub index: RwLock<Index>,
    /// Values read, for the next reads of their keys, on any thread (`value_cache.rs` has
    /// the rules; the worker alone changes it).
    pub values: ValueCache,
    /// The segment table: a [`Location`] names a segment by its slot here; a collected
    /// segment leaves its slot `None` for the next segment to take.
    segments: RwLock<Vec<Option<Segment>>>,
    usage: Mutex<Vec<Usage>>,
    /// The rounds of the worker's batch writes (group commit's sequencer, shared with the
    /// other engines): one batch written at a time, and the stop flag (P5), set by the first
    /// failed write or by any failure that leaves the index behind the log.
    pub rounds: Sequencer,
    pub counters: Counters,
    /// Iterators open ([`crate::KvIterator`]): while any is, no segment is freed.
    pub open_iterators: std::sync::atomic::AtomicUsize,
    /// The newest checkpoint the version log names.
    pub checkpoint: Mutex<Option<CheckpointMeta>>,
    /// The set this store is a shard of.
    pub membership: Mutex<Option<crate::meta::Membership>>,
    /// A bounded store's index state in the version log (`None` in memory mode).
    pub bounded: Mutex<Option<crate::meta::BoundedMeta>>,
    pub recovered_records: AtomicU64,
    pub recovery_micros: AtomicU64,
    /// A buffered descriptor of the volume, where records are read through the page cache
    /// ([`crate::RecordReads::PageCache`]); `None` where they are read with O_DIRECT only.
    pub reader: Option<shale_io::BufferedReader>,
    /// The thread that gives the page cache advice about the log, where `reader` is.
    pub advice: Option<crate::page_advice::PageAdvice>,
    /// Makes the worker's next turn panic (unit tests of the worker's break-down).
    #[cfg(test)]
    pub panic_next_turn: std::sync::atomic::AtomicBool,
}

impl Shard {
    pub fn new(volume: Volume, opts: HashOptions, segments: Vec<Segment>) -> Shard {
        let values = ValueCache::new(opts.value_cache_bytes);
        Shard {
            volume: Arc::new(volume),
            opts,
            index: RwLock::new(Index::default()),
            values,
            usage: Mutex::new(vec![Usage::default(); segments.len()]),
            segments: RwLock::new(segments.into_iter().map(Some).collect()),
            rounds: Sequencer::new(&ROUND_WAIT),
            counters: Counters::default(),
            checkpoint: Mutex::new(None),
            membership: Mutex::new(None),
            bounded: Mutex::new(None),
            open_iterators: std::sync::atomic::AtomicUsize::new(0),
            recovered_records: AtomicU64::new(0),
            recovery_micros: AtomicU64::new(0),
            reader: None,
            advice: None,
            #[cfg(test)]
            panic_next_turn: std::sync::atomic::AtomicBool::new(false),
        }
    }

    pub fn volume(&self) -> &Volume {
        &self.volume
    }

    /// The volume, to share with the bounded index's table.
    pub fn volume_arc(&self) -> Arc<Volume> {
        self.volume.clone()
    }

    /// The segments as the version log's base names them.
    pub fn segment_metas(&self) -> Vec<crate::meta::SegmentMeta> {
        self.segments()
            .iter()
            .map(|(_, s)| crate::meta::SegmentMeta {
                generation: s.generation,
                extent: s.extent,
                sealed_pages: s.sealed_pages,
            })
            .collect()
    }

    pub fn digest(&self, key: &[u8]) -> u64 {
        digest(key, self.opts.digest_bits)
    }

    /// The segment in table slot `slot`.
    ///
    /// # Panics
    /// If the slot holds none: a location outlived its segment (a bug).
    pub fn segment(&self, slot: u32) -> Segment {
        self.segments.read()[slot as usize].expect("a location names a live segment")
    }

    /// Asks the kernel to read the first `pages` pages of the segment in `slot` into the page
    /// cache, in the background (`page_advice.rs`), when records are read through it;
    /// nothing otherwise. Called once a segment is sealed, with every write to it complete.
    ///
    /// Why: the log is written with O_DIRECT, around the page cache, so without this every
    /// record's first read after it left the value cache goes to the device, where an engine
    /// writing buffered files (RocksDB) finds it in memory: at queue depth 1 with data that
    /// fits in RAM but not in the value cache, those first reads were most of the gets' time
    /// (issue #44). Reading a sealed segment back costs one sequential read of what was
    /// written; the kernel evicts it as it would pages a buffered write left.
    pub fn warm_pages(&self, slot: u32, pages: u32) {
        let (Some(advice), Some(seg)) = (&self.advice, self.segment_at(slot)) else { return };
        advice.warm(seg.page_address(0), u64::from(pages) * PAGE_BYTES as u64);
    }

    /// Drops the cached pages of the segment in `slot` (collected), after any advice given
    /// before: the memory goes, as a deleted file's would.
    pub fn forget_pages(&self, slot: u32) {
        let (Some(advice), Some(seg)) = (&self.advice, self.segment_at(slot)) else { return };
        let bytes = self.volume.extent_range(seg.extent);
        advice.forget(seg.page_address(0), bytes.end - bytes.start);
    }

    /// The segment in table slot `slot`, if one is there.
    pub fn segment_at(&self, slot: u32) -> Option<Segment> {
        self.segments.read().get(slot as usize).copied().flatten()
    }

    /// The live segments with their table slots, oldest generation first.
    pub fn segments(&self) -> Vec<(u32, Segment)> {
        let mut out: Vec<(u32, Segment)> = self
            .segments
            .read()
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.map(|s| (i as u32, s)))
            .collect();
        out.sort_by_key(|(_, s)| s.generation);
        out
    }

    /// The slot a new segment takes: a free one, or one past the end.
    pub fn free_slot(&self) -> u32 {
        let segments = self.segments.read();
        segments.iter().position(Option::is_none).unwrap_or(segments.len()) as u32
    }

    /// Adds a segment in `slot`, sealing the one `sealed` names.
    pub fn add_segment(&self, slot: u32, seg: Segment, sealed: Option<(u64, u32)>) {
        let mut segments = self.segments.write();
        if let Some((g, pages)) = sealed {
            if let Some(s) = segments.iter_mut().flatten().find(|s| s.generation == g) {
                s.sealed_pages = Some(pages);
            }
        }
        let slot = slot as usize;
        if slot == segments.len() {
            segments.push(Some(seg));
            self.usage.lock().push(Usage::default());
        } else {
            assert!(segments[slot].is_none(), "a new segment takes a free slot");
            segments[slot] = Some(seg);
            self.usage.lock()[slot] = Usage::default();
        }
    }

    /// Drops a collected segment from the table.
    pub fn remove_segment(&self, slot: u32) {
        self.segments.write()[slot as usize] = None;
        self.usage.lock()[slot as usize] = Usage::default();
    }

    /// Each slot's usage.
    pub fn usage(&self) -> Vec<Usage> {
        self.usage.lock().clone()
    }

    /// Counts a record written into `slot`; `live` if the index now points at it.
    pub fn count_record(&self, slot: u32, live: bool) {
        let mut u = self.usage.lock();
        u[slot as usize].records += 1;
        u[slot as usize].live += u64::from(live);
    }

    /// Counts a record the index no longer points at.
    pub fn count_dead(&self, loc: Location) {
        let mut u = self.usage.lock();
        let e = &mut u[loc.segment as usize];
        e.live = e.live.saturating_sub(1);
    }

    pub fn refuse_if_stopped(&self) -> Result<()> {
        match self.rounds.stopped() {
            Some(why) => Err(Error::Stopped(why)),
            None => Ok(()),
        }
    }

    /// Stops the store (P5) and hands `e` back.
    pub fn stop(&self, e: Error) -> Error {
        self.rounds.fail(shale_io::Chain(&e).to_string());
        e
    }

    pub fn corruption(&self, loc: Location, why: &str) -> Error {
        let at = self
            .segments
            .read()
            .get(loc.segment as usize)
            .copied()
            .flatten()
            .map_or(0, |s| s.page_address(loc.page));
        Error::Corruption {
            what: format!("record log, segment slot {} page {}: {why}", loc.segment, loc.page),
            offset: at,
        }
    }

    /// The encoded record at `loc` from the pages read for it.
    pub fn record_from(&self, image: &[u8], loc: Location) -> Result<Vec<u8>> {
        let seg = self.segment(loc.segment);
        log::record_at(image, &seg, loc).map_err(|why| self.corruption(loc, &why))
    }

    /// At least the first `want` bytes of the encoded record at `loc` (or all of it, if
    /// shorter), from `image`, its first pages: each page's checks, as [`Shard::record_from`].
    pub fn record_head_from(&self, image: &[u8], loc: Location, want: usize) -> Result<Vec<u8>> {
        let seg = self.segment(loc.segment);
        shale_space::page_log::record_head_at(image, seg.generation, loc.page, loc.offset, want)
            .map_err(|why| self.corruption(loc, &why))
    }

    /// Reads the encoded record at `loc` synchronously, checking every page it spans.
    pub fn read_record(&self, loc: Location) -> Result<Vec<u8>> {
        let at = self.segment(loc.segment).page_address(loc.page);
        let read = self.open_queue()?.read_at(at, usize::from(loc.pages) * PAGE_BYTES);
        self.record_from(&read?, loc)
    }

    /// Whether the record at `loc` is `key`'s (a store: the index never points at a delete).
    pub fn record_is(&self, rec: &[u8], loc: Location, key: &[u8]) -> Result<bool> {
        let r = Record::decode(rec).ok_or_else(|| self.corruption(loc, "record does not parse"))?;
        if r.kind != Kind::Store {
            return Err(self.corruption(loc, "the index points at a delete"));
        }
        Ok(r.key == key)
    }

    /// Whether the record whose first bytes are `head` ([`Shard::record_head_from`]) is a
    /// store of `key`, as [`Shard::record_is`] says of a whole record.
    pub fn head_is(&self, head: &[u8], loc: Location, key: &[u8]) -> Result<bool> {
        let (kind, found) = crate::record::decode_head(head)
            .ok_or_else(|| self.corruption(loc, "record does not parse"))?;
        if kind != Kind::Store {
            return Err(self.corruption(loc, "the index points at a delete"));
        }
        Ok(found == key)
    }

    /// Whether the digest entry of `d` (if any) is `key`'s own, by a synchronous read.
    pub fn digest_owner(&self, d: u64, key: &[u8]) -> Result<bool> {
        let probe = self.index.read().probe(d, key)?;
        match probe {
            Probe::Candidate(loc) => {
                // The key is in the record's first page or two: the value is not read.
                let want = crate::record::HEADER_BYTES + key.len();
                let at = self.segment(loc.segment).page_address(loc.page);
                let image = self.open_queue()?.read_at(at, log::head_len(loc, want))?;
                let head = self.record_head_from(&image, loc, want)?;
                self.head_is(&head, loc, key)
            }
            Probe::Exact(_) | Probe::Absent => Ok(false),
        }
    }

    /// Scans every segment and rebuilds the index, oldest generation first. A record is
    /// applied only if it is newer (by sequence number) than what the index holds for its
    /// key: garbage collection copies live records, and tombstones, into newer segments
    /// with their old sequence numbers.
    ///
    /// With a checkpoint, the index, the counts and the sequence number start from it, and
    /// each segment is read only past the pages the checkpoint covers (a segment sealed
    /// there is not read at all). Entries naming a segment collected since are dropped: the
    /// records they named that are still needed were copied after the checkpoint.
    pub fn replay(&self) -> Result<Replayed> {
        let segments = self.segments();
        let mut queue = self.open_queue()?;
        let (mut count, mut max_seq, mut last_end) = (0, 0, None);
        let mut covered: Vec<(u64, u32)> = Vec::new();
        let checkpoint = *self.checkpoint.lock();
        if let Some(meta) = checkpoint {
            let (ck, seq) = self.load_checkpoint(&mut queue, meta, &segments)?;
            max_seq = seq;
            covered = ck;
        }
        for (slot, seg) in &segments {
            let from = covered.iter().find(|(g, _)| *g == seg.generation).map_or(0, |&(_, p)| p);
            if from > 0 && seg.sealed_pages == Some(from) {
                continue;
            }
            let bytes = self.volume.layout().slot_bytes * u64::from(seg.extent.count);
            let image = queue.read_at(seg.start, bytes as usize)?;
            let (records, end) = log::scan_segment(&image, seg, *slot)?;
            last_end = Some((seg.generation, end));
            for (loc, rec) in records.into_iter().filter(|(loc, _)| loc.page >= from) {
                let r = Record::decode(&rec)
                    .ok_or_else(|| self.corruption(loc, "record does not parse"))?;
                max_seq = max_seq.max(r.seq);
                count += 1;
                self.replay_record(&r, loc, &image, *slot)?;
            }
        }
        Ok(Replayed { records: count, max_seq, last_end })
    }

    /// Reads and decodes the checkpoint `meta` names.
    pub fn read_checkpoint(
        &self,
        queue: &mut VolumeQueue,
        meta: CheckpointMeta,
    ) -> Result<Checkpoint> {
        let range = self.volume.extent_range(meta.extent);
        let image = queue.read_at(range.start, (range.end - range.start) as usize)?;
        Checkpoint::decode(&image, meta.generation).map_err(|why| Error::Corruption {
            what: format!("index checkpoint {}: {why}", meta.generation),
            offset: range.start,
        })
    }

    /// A queue for synchronous reads and writes (of an open, of a caller, of the worker's
    /// rare confirmations), from the volume's pool; it goes back when dropped.
    pub fn open_queue(&self) -> Result<PooledQueue> {
        Ok(self.volume.queues().checkout(sync_queues(&self.opts))?)
    }

    /// Loads the checkpoint `meta` names into the index and the counts; returns the pages
    /// it covers of each segment (by generation) and its sequence number.
    fn load_checkpoint(
        &self,
        queue: &mut VolumeQueue,
        meta: CheckpointMeta,
        segments: &[(u32, Segment)],
    ) -> Result<(Vec<(u64, u32)>, u64)> {
        let ck = self.read_checkpoint(queue, meta)?;
        // The checkpoint's table slots, by generation, to this open's.
        let slot_now = |old: u32| {
            let generation = ck.segments.iter().find(|s| s.slot == old)?.generation;
            segments.iter().find(|(_, s)| s.generation == generation).map(|(slot, _)| *slot)
        };
        let remap = |packed: u64| {
            let mut loc = Location::unpack(packed);
            slot_now(loc.segment).map(|slot| {
                loc.segment = slot;
                loc.pack()
            })
        };
        let entries: Vec<(u64, u64)> =
            ck.entries.iter().filter_map(|&(d, l)| remap(l).map(|l| (d, l))).collect();
        let keyed: Vec<(Vec<u8>, u64)> =
            ck.keyed.iter().filter_map(|(k, l)| remap(*l).map(|l| (k.clone(), l))).collect();
        self.counters
            .checkpoint_entries
            .fetch_add((entries.len() + keyed.len()) as u64, Ordering::Relaxed);
        self.index.write().load(entries, keyed)?;
        {
            let mut usage = self.usage.lock();
            for s in &ck.segments {
                if let Some(slot) = slot_now(s.slot) {
                    usage[slot as usize] = s.usage;
                }
            }
        }
        Ok((ck.segments.iter().map(|s| (s.generation, s.pages)).collect(), ck.max_seq))
    }

    /// Writes `buf` at `address` durably, on a queue of its own (the worker's queue may
    /// have reads in flight).
    pub fn write_durable(&self, address: u64, buf: shale_io::AlignedBuf) -> Result<()> {
        self.open_queue()?.write_at(address, buf, true)?;
        Ok(())
    }

    fn replay_record(&self, r: &Record<'_>, loc: Location, image: &[u8], slot: u32) -> Result<()> {
        let d = self.digest(r.key);
        let probe = self.index.read().probe(d, r.key)?;
        // The key's current record, if the digest entry (or the collision map) holds one: read
        // from this segment's image when it is there.
        let current = match probe {
            Probe::Absent => None,
            Probe::Exact(at) | Probe::Candidate(at) => {
                let rec = if at.segment == slot {
                    let from = at.page as usize * PAGE_BYTES;
                    self.record_from(&image[from..], at)?
                } else {
                    self.read_record(at)?
                };
                let cur = Record::decode(&rec)
                    .ok_or_else(|| self.corruption(at, "record does not parse"))?;
                let ours = matches!(probe, Probe::Exact(_)) || cur.key == r.key;
                Some((ours, cur.seq))
            }
        };
        let (owner, newer_held) = match current {
            None => (false, false),
            Some((true, seq)) => (true, seq >= r.seq),
            Some((false, _)) => (false, false),
        };
        match r.kind {
            Kind::Store => {
                self.count_record(slot, !newer_held);
                if !newer_held {
                    if let Some(old) = self.index.write().insert(d, r.key, loc, owner)? {
                        self.count_dead(old);
                    }
                }
            }
            Kind::Delete => {
                self.count_record(slot, false);
                if !newer_held {
                    if let Some(old) = self.index.write().remove(d, r.key, owner)? {
                        self.count_dead(old);
                    }
                }
            }
        }
        Ok(())
    }

    pub fn stats(&self) -> HashStats {
        let index = self.index.read();
        let c = &self.counters;
        HashStats {
            keys: index.len() as u64,
            stores: c.stores.load(Ordering::Relaxed),
            deletes: c.deletes.load(Ordering::Relaxed),
            user_bytes: c.user_bytes.load(Ordering::Relaxed),
            log_bytes_written: c.log_bytes.load(Ordering::Relaxed),
            segments: self.segments.read().iter().flatten().count() as u64,
            index_memory_bytes: index.memory_bytes() as u64,
            index_page_reads: index
                .paged_table()
                .map_or(0, |t| t.counters.reads.load(Ordering::Relaxed)),
            index_page_writes: index
                .paged_table()
                .map_or(0, |t| t.counters.writes.load(Ordering::Relaxed)),
            index_buckets: index.paged_table().map_or(0, |t| u64::from(t.buckets())),
            recovered_records: self.recovered_records.load(Ordering::Relaxed),
            recovery_micros: self.recovery_micros.load(Ordering::Relaxed),
            batches: c.batches.load(Ordering::Relaxed),
            busy: c.busy.load(Ordering::Relaxed),
            value_cache_hits: c.cache_hits.load(Ordering::Relaxed),
            caller_reads: c.caller_reads.load(Ordering::Relaxed),
            gc_records_copied: c.gc_records.load(Ordering::Relaxed),
            gc_bytes_written: c.gc_bytes.load(Ordering::Relaxed),
            segments_freed: c.segments_freed.load(Ordering::Relaxed),
            batch_tails_carried: c.tails_carried.load(Ordering::Relaxed),
            batches_overlapped: c.batches_overlapped.load(Ordering::Relaxed),
            checkpoints: c.checkpoints.load(Ordering::Relaxed),
            checkpoint_bytes_written: c.checkpoint_bytes.load(Ordering::Relaxed),
            checkpoint_entries_loaded: c.checkpoint_entries.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shale_io::Queue;

    #[test]
    fn synchronous_reads_share_the_volume_pool_up_to_read_queues_idle() {
        let device = Arc::new(shale_io::MemoryDevice::new(16 << 20, 4096).unwrap());
        let opts = HashOptions { read_queues: 2, ..HashOptions::default() };
        let volume =
            Volume::open(device, &shale_space::VolumeOptions::small_for_tests()).unwrap().volume;
        let shard = Shard::new(volume, opts, Vec::new());
        let at = shard.volume().layout().slot_offset;
        for _ in 0..4 {
            shard.write_durable(at, shale_io::AlignedBuf::zeroed(PAGE_BYTES)).unwrap();
        }
        let queues = shard.volume().queues();
        assert_eq!(queues.stats().opened, 1, "one thread at a time reuses one queue");
        let held: Vec<_> = (0..3).map(|_| shard.open_queue().unwrap()).collect();
        assert!(held.iter().all(|q| q.depth() == SYNC_QUEUE_DEPTH as usize));
        drop(held);
        let s = queues.stats();
        assert_eq!((s.opened, s.idle, s.discarded), (3, 2, 1), "read_queues bounds the idle");
    }
}
