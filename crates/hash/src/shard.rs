//! What a shard's threads share: the volume, the segment table, the index, the stop flag
//! and the counters; and the synchronous reads that recovery (and the worker, for a rare
//! confirmation) make.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};
use shale_io::{QueueExt, QueueOptions};
use shale_space::log_page::PAGE_BYTES;
use shale_space::{IoClass, Volume, VolumeQueue};

use crate::error::{Error, Result};
use crate::index::{Index, Location, Probe, digest};
use crate::log::{self, Segment};
use crate::options::{HashOptions, HashStats};
use crate::record::{Kind, Record};

/// Counters the worker keeps.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub stores: AtomicU64,
    pub deletes: AtomicU64,
    pub user_bytes: AtomicU64,
    pub log_bytes: AtomicU64,
    pub batches: AtomicU64,
    pub busy: AtomicU64,
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
    volume: Volume,
    pub opts: HashOptions,
    pub index: RwLock<Index>,
    segments: RwLock<Vec<Segment>>,
    readers: Mutex<Vec<VolumeQueue>>,
    stopped: Mutex<Option<String>>,
    pub counters: Counters,
    pub recovered_records: AtomicU64,
    pub recovery_micros: AtomicU64,
}

impl Shard {
    pub fn new(volume: Volume, opts: HashOptions, segments: Vec<Segment>) -> Shard {
        Shard {
            volume,
            opts,
            index: RwLock::new(Index::default()),
            segments: RwLock::new(segments),
            readers: Mutex::new(Vec::new()),
            stopped: Mutex::new(None),
            counters: Counters::default(),
            recovered_records: AtomicU64::new(0),
            recovery_micros: AtomicU64::new(0),
        }
    }

    pub fn volume(&self) -> &Volume {
        &self.volume
    }

    pub fn digest(&self, key: &[u8]) -> u64 {
        digest(key, self.opts.digest_bits)
    }

    pub fn segment(&self, slot: u32) -> Segment {
        self.segments.read()[slot as usize]
    }

    pub fn segments(&self) -> Vec<Segment> {
        self.segments.read().clone()
    }

    pub fn segment_count(&self) -> u32 {
        self.segments.read().len() as u32
    }

    /// Adds a segment, sealing the one `sealed` names.
    pub fn add_segment(&self, seg: Segment, sealed: Option<(u64, u32)>) {
        let mut segments = self.segments.write();
        if let Some((g, pages)) = sealed {
            if let Some(s) = segments.iter_mut().find(|s| s.generation == g) {
                s.sealed_pages = Some(pages);
            }
        }
        segments.push(seg);
    }

    pub fn refuse_if_stopped(&self) -> Result<()> {
        match &*self.stopped.lock() {
            Some(why) => Err(Error::Stopped(why.clone())),
            None => Ok(()),
        }
    }

    /// Stops the store (P5) and hands `e` back.
    pub fn stop(&self, e: Error) -> Error {
        let mut stopped = self.stopped.lock();
        if stopped.is_none() {
            *stopped = Some(e.to_string());
        }
        e
    }

    pub fn corruption(&self, loc: Location, why: &str) -> Error {
        let at =
            self.segments.read().get(loc.segment as usize).map_or(0, |s| s.page_address(loc.page));
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

    /// Reads the encoded record at `loc` synchronously, checking every page it spans.
    pub fn read_record(&self, loc: Location) -> Result<Vec<u8>> {
        let at = self.segment(loc.segment).page_address(loc.page);
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

    /// Whether the digest entry of `d` (if any) is `key`'s own, by a synchronous read.
    pub fn digest_owner(&self, d: u64, key: &[u8]) -> Result<bool> {
        let probe = self.index.read().probe(d, key);
        match probe {
            Probe::Candidate(loc) => {
                let rec = self.read_record(loc)?;
                self.record_is(&rec, loc, key)
            }
            Probe::Exact(_) | Probe::Absent => Ok(false),
        }
    }

    /// Scans every segment and rebuilds the index.
    pub fn replay(&self) -> Result<Replayed> {
        let segments = self.segments();
        let mut queue = self.volume.queue(IoClass::Slot, &QueueOptions::default())?;
        let (mut count, mut max_seq, mut last_end) = (0, 0, None);
        for (slot, seg) in segments.iter().enumerate() {
            let bytes = self.volume.layout().slot_bytes * u64::from(seg.extent.count);
            let image = queue.read_at(seg.start, bytes as usize)?;
            let (records, end) = log::scan_segment(&image, seg, slot as u32)?;
            last_end = Some((seg.generation, end));
            for (loc, rec) in records {
                let r = Record::decode(&rec)
                    .ok_or_else(|| self.corruption(loc, "record does not parse"))?;
                max_seq = max_seq.max(r.seq);
                count += 1;
                let d = self.digest(r.key);
                let owner = self.digest_owner(d, r.key)?;
                let mut index = self.index.write();
                match r.kind {
                    Kind::Store => index.insert(d, r.key, loc, owner),
                    Kind::Delete => index.remove(d, r.key, owner),
                }
            }
        }
        Ok(Replayed { records: count, max_seq, last_end })
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
            segments: self.segments.read().len() as u64,
            index_memory_bytes: index.memory_bytes() as u64,
            recovered_records: self.recovered_records.load(Ordering::Relaxed),
            recovery_micros: self.recovery_micros.load(Ordering::Relaxed),
            batches: c.batches.load(Ordering::Relaxed),
            busy: c.busy.load(Ordering::Relaxed),
        }
    }
}
