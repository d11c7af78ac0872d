//! Writing SST images into extents of a volume, and reading them back.
//!
//! Writing takes one of two paths, chosen once per store ([`QueuePool`]); the stages of writing
//! one SST, streamed while it is built, are `writer`'s ([`SstWriter`]):
//! - *direct* (`Options::use_direct_io_for_flush_and_compaction = true`, a volume on a block
//!   device, or a store on a device rather than a path): O_DIRECT writes through a slot
//!   queue, around the page cache;
//! - *buffered* (`false`, the default, as RocksDB's, on a volume file): `pwrite` on a
//!   read-write descriptor of the volume file without O_DIRECT ([`BufferedWriter`]), so the
//!   new SST's pages are in the page cache when it is first read, as an engine writing
//!   buffered files finds them. Each SST is written through a descriptor of its own
//!   ([`BufferedWriter::reopen`]), which sees every write-back error since it was opened;
//!   each request's write-back starts at once (a non-waiting `sync_file_range`), so it
//!   streams instead of piling up for the final ranged sync.
//!
//! The promises of docs/design.md hold the same on both paths: nothing names an SST before its
//! writer's `finish` made it durable.
//!
//! [`SstWriter`]: crate::sst::SstWriter
//!
//! Reading takes one of two paths, chosen once per store as well:
//! - *direct*: O_DIRECT reads of whole device blocks through slot queues checked out of the
//!   volume's pools (`shale_space::queues`: [`READ_QUEUES`], [`BATCH_QUEUES`]; io_uring or
//!   pread); the block cache is the only cache.
//! - *buffered* (`Options::use_direct_reads = false` on a store opened by path): `pread` on a
//!   second, read-only descriptor without O_DIRECT ([`BufferedReader`]), so a block-cache miss
//!   can hit the kernel's page cache.
//!
//! Slots are reused: an SST's extent goes back to the volume after a compaction drops it, and
//! a later SST is written into the same slots. A page cached from the old SST, read in place
//! of the new bytes, would pass every check: it is a block of a real SST, with a valid
//! checksum, at the right offset. That is wrong data, not `Corruption` (P4). Per pair of paths:
//! - buffered writes, buffered reads: `pwrite` replaces the cached pages of the range it
//!   writes, and an SST covers whole pages of its extent (slots are whole pages), so no page
//!   of the old SST survives the write, whatever was cached before, by this process or by
//!   one before a crash. Nothing is dropped after the write and nothing prefetched: the
//!   written pages are the cache.
//! - buffered writes, direct reads: O_DIRECT reads ignore clean cached pages, and the kernel
//!   writes dirty ones back before a direct read of their range; after the writer's sync
//!   (`SstWriter::finish`) there are none.
//! - direct writes, buffered reads: O_DIRECT writes go around the page cache, so the cached
//!   pages of the extent are dropped once the new SST is written
//!   (`QueuePool::after_direct_write`), which also covers pages another process left behind
//!   before a crash. Linux invalidates
//!   the cached pages of a range written with O_DIRECT too (writing back dirty ones first,
//!   such as a buffered write a crashed process left); shale does not rely on that alone,
//!   because the kernel only warns when it fails to. The new SST is then prefetched into the
//!   page cache (`QueuePool::prefetch`), so reads after a flush or compaction do not start cold.
//! - direct writes, direct reads: the page cache is not involved.
//!
//! Whenever a page-cache descriptor exists, the cached pages of an extent are also dropped
//! when the extent is released ([`QueuePool::forget_pages`], `SstHandle`'s drop, before
//! `Volume::release` can hand the slots out again): needed for coherence on the direct-write,
//! buffered-read pair, and on the others it frees the memory as deleting an SST file would.
//! Kernel readahead is off on the buffered read descriptor (`POSIX_FADV_RANDOM`), so a point
//! read never pulls in pages of neighbouring slots that may be rewritten next; scans read
//! ahead themselves (`SstIter`'s readahead), within their SST.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use shale_io::{AlignedBuf, BufferedReader, BufferedWriter, Completion, Op, Queue, QueueExt, Request};
use shale_space::{Extent, IoClass, PoolSpec, PooledQueue, Tier, Volume};

use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::sst::builder::SstImage;
use crate::sst::held_room::HeldRoom;
use crate::sst::release::{SstRelease, SstReleases};
use crate::sst::reader::{BlockSource, PendingRead, SourceBytes};

/// Bytes of one write request: large enough to stream, small enough to keep several in flight.
pub const WRITE_BYTES_MAX: usize = 1 << 20;
/// Write requests in flight while an SST is written.
pub const WRITES_IN_FLIGHT_MAX: u32 = 4;
/// Idle read queues the volume's pools keep for SST reads; more are opened under load and
/// closed when given back. A queue is one io_uring (a file descriptor and a few KiB of
/// rings); setting one up and tearing it down costs system calls and mmaps, so a pool keeps
/// one per concurrent reader thread of any sane number rather than churning rings when more
/// than a few read at once.
pub const POOL_QUEUES_IDLE_MAX: usize = 128;
/// Bytes of one `POSIX_FADV_WILLNEED` when a new SST is prefetched: the kernel reads at most
/// its readahead window (128 KiB by default) per call and silently ignores the rest, so a
/// whole SST takes one call per chunk (a single call for the whole extent warmed nothing).
const PREFETCH_CHUNK_BYTES: u64 = 128 << 10;
/// Depth of a pooled read queue: reads through it are one at a time.
const READ_QUEUE_DEPTH: u32 = 1;
/// Depth of a pooled batch queue ([`QueuePool::read_many`]): the reads of one multi-get in
/// flight together.
const BATCH_QUEUE_DEPTH: u32 = 32;
/// The volume's pool an SST read (or a scan's run read ahead) checks its queue out of.
pub const READ_QUEUES: PoolSpec =
    PoolSpec { class: IoClass::Slot, depth: READ_QUEUE_DEPTH, idle_max: POOL_QUEUES_IDLE_MAX };
/// The volume's pool a batch of reads ([`QueuePool::read_many`]) checks its queue out of.
pub const BATCH_QUEUES: PoolSpec =
    PoolSpec { class: IoClass::Slot, depth: BATCH_QUEUE_DEPTH, idle_max: POOL_QUEUES_IDLE_MAX };

/// Bytes read by SST reads that missed the block cache, per path, since open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SstBytesRead {
    /// Read with O_DIRECT from the device.
    pub direct: u64,
    /// Read through the page cache (from memory or from the device: the kernel knows which).
    pub buffered: u64,
    /// Compaction inputs read with O_DIRECT because the page cache did not hold them, where
    /// reads otherwise go through it ([`BlockSource::read_around_page_cache`]); not in
    /// `direct`.
    pub around_page_cache: u64,
}

/// Bytes of SSTs written by flushes and compactions, per path, since open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SstBytesWritten {
    /// Written with O_DIRECT.
    pub direct: u64,
    /// Written through the page cache (and synced).
    pub buffered: u64,
}

/// Drops whatever the page cache holds of `extent` of `volume`, whose tiers' page-cache
/// descriptors are `files` (nothing to do without them).
pub(crate) fn drop_cached_pages(
    volume: &Volume,
    files: &[PageCacheFiles; 2],
    extent: Extent,
) -> Result<()> {
    let range = volume.extent_range(extent);
    let len = range.end - range.start;
    let (tier, start) = Tier::split(range.start);
    let files = &files[tier.index()];
    // Either descriptor drops the pages of the one file they share.
    match (&files.reads, &files.writes) {
        (Some(reader), _) => Ok(reader.drop_cached(start, len)?),
        (None, Some(writer)) => Ok(writer.drop_cached(start, len)?),
        (None, None) => Ok(()),
    }
}

/// The page-cache descriptors of one volume of a store opened by path; none for a store on a
/// device. Their offsets are the volume's device offsets, not addresses.
#[derive(Clone, Debug, Default)]
pub struct PageCacheFiles {
    /// SST reads go through it when present (`Options::use_direct_reads = false`).
    pub reads: Option<Arc<BufferedReader>>,
    /// Flush and compaction outputs are written through it when present
    /// (`Options::use_direct_io_for_flush_and_compaction = false`).
    pub writes: Option<Arc<BufferedWriter>>,
}

/// How the SSTs of a store are written and read: slot queues of the volume's pools (a read
/// checks one out, opened by the volume when none is idle, and it goes back when the read is
/// done: `shale_space::queues`), or buffered descriptors on the volume files when the store
/// reads or writes through the page cache. On a tiered store a queue reaches both tiers by
/// address, and each tier has its own descriptors.
pub struct QueuePool {
    volume: Arc<Volume>,
    /// By tier index: the descriptors reads and writes go through the page cache with, where
    /// they do (see the module's comment). Both tiers are opened alike.
    files: [PageCacheFiles; 2],
    /// By tier index: bytes read and written through the page cache, which no slot queue
    /// counts.
    tier_buffered_read: [AtomicU64; 2],
    tier_buffered_written: [AtomicU64; 2],
    direct_bytes: AtomicU64,
    buffered_bytes: AtomicU64,
    around_page_cache_bytes: AtomicU64,
    direct_written_bytes: AtomicU64,
    buffered_written_bytes: AtomicU64,
    relocations: AtomicU64,
    /// Reads started in the background for scans' readahead ([`BlockSource::start_read`]).
    reads_ahead: AtomicU64,
    /// Blocks read by [`QueuePool::read_for_seek`].
    seek_batch_reads: AtomicU64,
    /// Where dropped SSTs are given back when a caller's thread drops the last handle.
    releases: SstReleases,
    /// Room that dropped SSTs hold until their last handle goes.
    held: Arc<HeldRoom>,
}

impl std::fmt::Debug for QueuePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueuePool")
            .field("idle", &self.idle_queues())
            .field("files", &self.files)
            .finish()
    }
}

impl QueuePool {
    /// An empty pool on `volume`, reading with O_DIRECT.
    pub fn new(volume: Arc<Volume>) -> QueuePool {
        QueuePool::with_reads(volume, None)
    }

    /// A pool on `volume` that reads through `buffered` (a descriptor on the same file or
    /// block device) when given, else with O_DIRECT.
    pub fn with_reads(volume: Arc<Volume>, buffered: Option<Arc<BufferedReader>>) -> QueuePool {
        QueuePool::with_page_cache(volume, PageCacheFiles { reads: buffered, writes: None })
    }

    /// A pool on `volume` that reads through `files.reads` and writes SSTs through
    /// `files.writes` (descriptors on the same file or block device) where given, else with
    /// O_DIRECT.
    pub fn with_page_cache(volume: Arc<Volume>, files: PageCacheFiles) -> QueuePool {
        QueuePool::with_tier_files(volume, files, PageCacheFiles::default())
    }

    /// A pool on a tiered `volume` whose fast volume is read and written through `fast` and
    /// capacity volume through `capacity` where given (each a descriptor on that volume's
    /// file or block device), else with O_DIRECT.
    pub fn with_tier_files(
        volume: Arc<Volume>,
        fast: PageCacheFiles,
        capacity: PageCacheFiles,
    ) -> QueuePool {
        QueuePool {
            volume,
            files: [fast, capacity],
            tier_buffered_read: Default::default(),
            tier_buffered_written: Default::default(),
            direct_bytes: AtomicU64::new(0),
            around_page_cache_bytes: AtomicU64::new(0),
            buffered_bytes: AtomicU64::new(0),
            direct_written_bytes: AtomicU64::new(0),
            buffered_written_bytes: AtomicU64::new(0),
            relocations: AtomicU64::new(0),
            reads_ahead: AtomicU64::new(0),
            seek_batch_reads: AtomicU64::new(0),
            releases: SstReleases::default(),
            held: Arc::default(),
        }
    }

    /// The volume the pool's queues are on.
    pub fn volume(&self) -> &Arc<Volume> {
        &self.volume
    }

    /// Whether SST reads go through the page cache.
    pub fn reads_buffered(&self) -> bool {
        self.files[0].reads.is_some()
    }

    /// The page-cache reader of the tier at `address`, and the device offset there.
    fn reader_at(&self, address: u64) -> Option<(&Arc<BufferedReader>, u64)> {
        let (tier, offset) = Tier::split(address);
        self.files[tier.index()].reads.as_ref().map(|r| (r, offset))
    }

    /// Bytes read from and written to `tier` through the page cache since open.
    pub fn tier_buffered_bytes(&self, tier: Tier) -> (u64, u64) {
        let i = tier.index();
        (
            self.tier_buffered_read[i].load(Ordering::Relaxed),
            self.tier_buffered_written[i].load(Ordering::Relaxed),
        )
    }

    fn count_buffered_read(&self, address: u64, bytes: u64) {
        self.buffered_bytes.fetch_add(bytes, Ordering::Relaxed);
        let (tier, _) = Tier::split(address);
        self.tier_buffered_read[tier.index()].fetch_add(bytes, Ordering::Relaxed);
    }

    /// Whether SSTs are written through the page cache.
    pub fn writes_buffered(&self) -> bool {
        self.files[0].writes.is_some()
    }

    /// Bytes of SSTs written so far, per path (a relocated SST's streamed part counts twice:
    /// it was written twice).
    pub fn bytes_written(&self) -> SstBytesWritten {
        SstBytesWritten {
            direct: self.direct_written_bytes.load(Ordering::Relaxed),
            buffered: self.buffered_written_bytes.load(Ordering::Relaxed),
        }
    }

    /// Bytes read from SSTs so far, per path.
    pub fn bytes_read(&self) -> SstBytesRead {
        SstBytesRead {
            direct: self.direct_bytes.load(Ordering::Relaxed),
            buffered: self.buffered_bytes.load(Ordering::Relaxed),
            around_page_cache: self.around_page_cache_bytes.load(Ordering::Relaxed),
        }
    }

    /// Writes a whole SST `image` (`base` 0) durably into a new extent, as an
    /// [`SstWriter`](crate::sst::SstWriter) streaming it would.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the image is not whole slots of the volume; as
    /// [`QueuePool::sst_writer`] and `SstWriter::finish`.
    pub fn write_sst(self: &Arc<Self>, tier: Tier, image: &SstImage) -> Result<Extent> {
        let slot_bytes = self.volume.layout().slot_bytes;
        if image.base != 0 || image.len() % slot_bytes != 0 {
            return Err(Error::InvalidArgument(format!(
                "SST image of {} bytes from {} is not whole {slot_bytes}-byte slots",
                image.len(),
                image.base
            )));
        }
        self.sst_writer_exact(tier, image.len())?.finish(image)
    }

    /// Readahead runs that scans and compactions read in the background (O_DIRECT reads
    /// only), since open.
    pub fn reads_ahead(&self) -> u64 {
        self.reads_ahead.load(Ordering::Relaxed)
    }

    /// SSTs that outgrew the extent reserved for them and were moved to a larger one since
    /// open (`SstWriter`'s relocation).
    pub fn relocations(&self) -> u64 {
        self.relocations.load(Ordering::Relaxed)
    }

    pub(crate) fn count_relocation(&self) {
        self.relocations.fetch_add(1, Ordering::Relaxed);
    }

    /// The page-cache descriptor SSTs on `tier` are written through, if they are.
    pub(crate) fn page_cache_writer(&self, tier: Tier) -> Option<&Arc<BufferedWriter>> {
        self.files[tier.index()].writes.as_ref()
    }

    /// Counts `bytes` of SSTs written to `tier`, through the page cache or not.
    pub(crate) fn count_written(&self, tier: Tier, bytes: u64, buffered: bool) {
        let counter =
            if buffered { &self.buffered_written_bytes } else { &self.direct_written_bytes };
        counter.fetch_add(bytes, Ordering::Relaxed);
        if buffered {
            self.tier_buffered_written[tier.index()].fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// After an SST was written durably into `extent` with O_DIRECT (`direct`): drops whatever
    /// the page cache holds of the extent (nothing can have read the new SST yet, so any
    /// cached page there is older), then prefetches the new SST into the page cache when
    /// reads go through it. Nothing to do after buffered writes: their pages are the cache.
    ///
    /// # Errors
    /// A refused page drop, after releasing the extent: the new SST could not be read safely.
    pub(crate) fn after_direct_write(&self, extent: Extent, direct: bool) -> Result<()> {
        if !direct {
            return Ok(());
        }
        if let Err(e) = self.drop_pages(extent) {
            self.volume.release(extent);
            return Err(e);
        }
        self.prefetch(extent);
        Ok(())
    }

    /// Drops the page cache's pages of `extent` before it goes back to the volume: after
    /// that, the slots may be rewritten with O_DIRECT, and a page left behind would be read
    /// in place of the new SST's bytes (see the module's comment); with buffered writes it
    /// frees the memory, as deleting an SST file would. A no-op without page-cache
    /// descriptors.
    /// A failure is logged: the kernel's own invalidation on the O_DIRECT write and the drop
    /// after that write ([`QueuePool::write_sst`]) still stand between it and a reader.
    pub fn forget_pages(&self, extent: Extent) {
        if let Err(e) = self.drop_pages(extent) {
            log::warn!("cannot drop the cached pages of a released SST ({extent:?}): {}", shale_io::Chain(&e));
        }
    }

    /// Has the kernel read a newly written SST into the page cache in the background, so
    /// the reads after a flush or a compaction hit memory, as they do in an engine whose
    /// buffered writes leave its files cached. Without it the first read of every block after
    /// a compaction went to the device: readrandom right after fillrandom ran at 117-139k
    /// ops/s, with it at 260k (docs/lsm.md). It costs a device read of every SST written.
    ///
    /// Safe with slot reuse: it runs after the write is durable and the extent's old pages
    /// are dropped, so it caches the new bytes; the pages go at release like any other.
    /// A failure only loses the warm-up, so it is logged, not returned.
    fn prefetch(&self, extent: Extent) {
        let range = self.volume.extent_range(extent);
        let Some((buffered, start)) = self.reader_at(range.start) else { return };
        let range = start..start + (range.end - range.start);
        let mut at = range.start;
        while at < range.end {
            let len = (range.end - at).min(PREFETCH_CHUNK_BYTES);
            if let Err(e) = buffered.prefetch(at, len) {
                log::debug!("cannot prefetch a new SST ({extent:?}): {}", shale_io::Chain(&e));
                return;
            }
            at += len;
        }
    }

    fn drop_pages(&self, extent: Extent) -> Result<()> {
        drop_cached_pages(&self.volume, &self.files, extent)
    }

    /// Gives back the extent of SST `id`, dropped by a committed edit, once its last handle
    /// went: its blocks leave `cache`, its pages the page cache, then the extent goes back
    /// to the volume; on the pool's release thread unless the caller is one of the store's
    /// background threads (`sst/release.rs` says why).
    pub(crate) fn release_sst(&self, id: u64, extent: Extent, cache: &Arc<BlockCache>) {
        self.releases.release(SstRelease {
            id,
            extent,
            cache: cache.clone(),
            volume: self.volume.clone(),
            files: self.files.clone(),
            held: self.held.clone(),
        });
    }

    /// Counts the extent of an SST a committed edit dropped as held until its release
    /// (`sst/held_room.rs`).
    pub(crate) fn hold_sst(&self, extent: Extent) {
        let r = self.volume.extent_range(extent);
        self.held.hold(extent.tier, r.end - r.start);
    }

    /// The room dropped SSTs hold until readers let them go.
    pub(crate) fn held_room(&self) -> &HeldRoom {
        &self.held
    }

    /// Waits until every dropped SST handed to the release thread is given back.
    pub fn wait_for_releases(&self) {
        self.releases.wait_idle();
    }

    /// Dropped SSTs whose last handle a caller's thread dropped, given back on the release
    /// thread, since the pool was made.
    pub fn releases_deferred(&self) -> u64 {
        self.releases.deferred()
    }

    /// Reads `(offset, len)` ranges of the volume's slot area (absolute offsets, inside
    /// extents of live SSTs) all at once, answered in order: through the page cache's
    /// [`BufferedReader::read_many`] when reads are buffered, else with O_DIRECT on a queue of
    /// `BATCH_QUEUE_DEPTH`, whole device blocks around each range. The device works on
    /// them together, so a batch costs about one read's latency, not one per range.
    pub fn read_many(&self, reqs: &[(u64, usize)]) -> Vec<Result<Vec<u8>>> {
        if self.reads_buffered() {
            return self.read_many_buffered(reqs);
        }
        match self.read_many_direct(reqs) {
            Ok(out) => out,
            // The queue itself failed: every range gets the error.
            Err(e) => reqs
                .iter()
                .map(|&(offset, _)| {
                    Err(Error::Io(shale_io::Error::Io {
                        op: shale_io::OpKind::Read,
                        offset,
                        source: std::io::Error::other(format!("batch read queue failed: {}", shale_io::Chain(&e))),
                    }))
                })
                .collect(),
        }
    }

    /// [`QueuePool::read_many`] for the data blocks a seek is about to need (counted apart:
    /// [`QueuePool::seek_batch_reads`]).
    pub fn read_for_seek(&self, reqs: &[(u64, usize)]) -> Vec<Result<Vec<u8>>> {
        self.seek_batch_reads.fetch_add(reqs.len() as u64, Ordering::Relaxed);
        self.read_many(reqs)
    }

    /// Data blocks that seeks read together before seeking, since open.
    pub fn seek_batch_reads(&self) -> u64 {
        self.seek_batch_reads.load(Ordering::Relaxed)
    }

    /// [`QueuePool::read_many`] through the page cache: the ranges of each tier in one batch
    /// on that tier's descriptor, answered in the callers' order.
    fn read_many_buffered(&self, reqs: &[(u64, usize)]) -> Vec<Result<Vec<u8>>> {
        let mut out: Vec<Option<Result<Vec<u8>>>> = (0..reqs.len()).map(|_| None).collect();
        for tier in self.volume.tiers() {
            let mine: Vec<usize> =
                (0..reqs.len()).filter(|&i| Tier::split(reqs[i].0).0 == *tier).collect();
            if mine.is_empty() {
                continue;
            }
            let reader = self.files[tier.index()].reads.as_ref().expect("both tiers read alike");
            let batch: Vec<(u64, usize)> =
                mine.iter().map(|&i| (Tier::split(reqs[i].0).1, reqs[i].1)).collect();
            for (&i, r) in mine.iter().zip(reader.read_many(&batch)) {
                if r.is_ok() {
                    self.count_buffered_read(reqs[i].0, reqs[i].1 as u64);
                }
                out[i] = Some(r.map_err(Error::from));
            }
        }
        out.into_iter().map(|r| r.expect("every range is on a tier of the store")).collect()
    }

    fn read_many_direct(&self, reqs: &[(u64, usize)]) -> Result<Vec<Result<Vec<u8>>>> {
        let bs = u64::from(self.volume.block_bytes());
        let mut q = self.volume.queues().checkout(BATCH_QUEUES)?;
        let mut out: Vec<Option<Result<Vec<u8>>>> = (0..reqs.len()).map(|_| None).collect();
        let mut done = Vec::new();
        let settle = |done: &mut Vec<Completion>, out: &mut Vec<Option<Result<Vec<u8>>>>| {
            for c in done.drain(..) {
                let i = c.tag as usize;
                let (offset, len) = reqs[i];
                let from = (offset % bs) as usize;
                out[i] = Some(match (c.result, c.buf) {
                    (Ok(()), Some(buf)) => {
                        self.direct_bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
                        Ok(buf[from..from + len].to_vec())
                    }
                    (Err(e), _) => Err(Error::from(e)),
                    (Ok(()), None) => {
                        Err(Error::corruption("a read completed without its buffer", offset))
                    }
                });
            }
        };
        for (i, &(offset, len)) in reqs.iter().enumerate() {
            let start = (offset / bs) * bs;
            let end = (offset + len as u64).div_ceil(bs) * bs;
            let mut req = Request {
                tag: i as u64,
                op: Op::Read { offset: start, buf: AlignedBuf::zeroed((end - start) as usize) },
            };
            loop {
                match q.submit(req) {
                    Ok(()) => break,
                    Err((shale_io::Error::Busy, back)) => {
                        req = back;
                        q.reap(1, &mut done)?;
                        settle(&mut done, &mut out);
                    }
                    Err((e, _)) => {
                        out[i] = Some(Err(Error::from(e)));
                        break;
                    }
                }
            }
        }
        while q.in_flight() > 0 {
            q.reap(q.in_flight(), &mut done)?;
            settle(&mut done, &mut out);
        }
        // The queue goes back to its pool as it drops: nothing is in flight.
        Ok(out.into_iter().map(|r| r.expect("every read was reaped")).collect())
    }

    /// A read queue from the volume's pool; it goes back when dropped.
    pub(crate) fn take(&self) -> Result<PooledQueue> {
        Ok(self.volume.queues().checkout(READ_QUEUES)?)
    }

    /// Read queues idle in the volume's pool now.
    pub fn idle_queues(&self) -> usize {
        self.volume.queues().idle(READ_QUEUES.class, READ_QUEUES.depth)
    }
}

/// An SST in an extent, read through a [`QueuePool`].
#[derive(Debug, Clone)]
pub struct VolumeSource {
    pool: Arc<QueuePool>,
    extent: Extent,
    start: u64,
    len: u64,
    block_bytes: u64,
}

impl VolumeSource {
    /// The SST in `extent` of the pool's volume.
    pub fn new(pool: Arc<QueuePool>, extent: Extent) -> VolumeSource {
        let range = pool.volume.extent_range(extent);
        let block_bytes = u64::from(pool.volume.block_bytes());
        VolumeSource { pool, extent, start: range.start, len: range.end - range.start, block_bytes }
    }

    /// The extent read.
    pub fn extent(&self) -> Extent {
        self.extent
    }

    /// Checks that `len` bytes at `offset` lie within the SST, and returns the end of the
    /// range.
    fn range_end(&self, offset: u64, len: usize) -> Result<u64> {
        offset.checked_add(len as u64).filter(|&e| e <= self.len).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "read of {len} bytes at {offset} past an SST of {} bytes",
                self.len
            ))
        })
    }

    /// The whole device blocks around `offset..end` of the SST, as offsets of the SST, for an
    /// O_DIRECT read.
    fn device_blocks(&self, offset: u64, end: u64) -> (u64, u64) {
        let bs = self.block_bytes;
        ((offset / bs) * bs, end.div_ceil(bs) * bs)
    }
}

impl BlockSource for VolumeSource {
    fn read(&self, offset: u64, len: usize) -> Result<SourceBytes> {
        let end = self.range_end(offset, len)?;
        if len == 0 {
            return Ok(Vec::new().into());
        }
        let pool = &self.pool;
        if let Some((buffered, at)) = pool.reader_at(self.start + offset) {
            // The page cache needs no alignment. The range lies inside this SST's extent, so
            // in the slot area, as a slot queue would insist.
            let buf = buffered.read_at(at, len)?;
            pool.count_buffered_read(self.start + offset, len as u64);
            return Ok(buf.into());
        }
        self.read_direct(offset, end, len, &pool.direct_bytes)
    }

    /// Through the page cache: what it holds whole (asked with `cachestat`, then read with
    /// `preadv2(RWF_NOWAIT)`), else an O_DIRECT read of the device, which locks no page a
    /// reader may want and fills none. The SSTs a compaction reads are durable and unchanged
    /// since, so the device holds what the cache does. A kernel without `cachestat` reads
    /// through the page cache as [`BlockSource::read`] does.
    fn read_around_page_cache(&self, offset: u64, len: usize) -> Result<SourceBytes> {
        let end = self.range_end(offset, len)?;
        if len == 0 {
            return Ok(Vec::new().into());
        }
        let pool = &self.pool;
        let Some((buffered, at)) = pool.reader_at(self.start + offset) else {
            return self.read_direct(offset, end, len, &pool.direct_bytes);
        };
        let around = &pool.around_page_cache_bytes;
        match buffered.holds_cached(at, len as u64) {
            None => self.read(offset, len),
            Some(true) => match buffered.read_at_cached(at, len) {
                Some(bytes) => {
                    pool.count_buffered_read(self.start + offset, len as u64);
                    Ok(bytes.into())
                }
                // Evicted since it was asked: from the device.
                None => self.read_direct(offset, end, len, around),
            },
            Some(false) => self.read_direct(offset, end, len, around),
        }
    }

    fn len(&self) -> u64 {
        self.len
    }

    /// With O_DIRECT: a read submitted on a pooled queue, which the [`DirectRead`] holds
    /// until the read is reaped. Through the page cache: none (the reads there hit memory, or
    /// the kernel's own readahead decides).
    fn start_read(&self, offset: u64, len: usize) -> Option<Box<dyn PendingRead>> {
        let pool = &self.pool;
        if pool.reads_buffered() || len == 0 {
            return None;
        }
        let end = self.range_end(offset, len).ok()?;
        let (aligned_start, aligned_end) = self.device_blocks(offset, end);
        // A queue that cannot be had, or a request it refuses, only costs the overlap: the
        // scan reads the run when it needs it, and meets any error then.
        let mut queue = pool.take().ok()?;
        let buf = AlignedBuf::zeroed((aligned_end - aligned_start) as usize);
        let req = Request { tag: 0, op: Op::Read { offset: self.start + aligned_start, buf } };
        if queue.submit(req).is_err() {
            return None;
        }
        pool.reads_ahead.fetch_add(1, Ordering::Relaxed);
        Some(Box::new(DirectRead {
            pool: pool.clone(),
            queue: Some(queue),
            at: self.start + aligned_start,
            from: (offset - aligned_start) as usize,
            len,
        }))
    }
}

impl VolumeSource {
    /// `len` bytes at `offset` (ending at `end`) with O_DIRECT: whole device blocks around the
    /// range, read on a pooled queue, the range cut out of them; counted in `counted`.
    fn read_direct(
        &self,
        offset: u64,
        end: u64,
        len: usize,
        counted: &AtomicU64,
    ) -> Result<SourceBytes> {
        let pool = &self.pool;
        let (aligned_start, aligned_end) = self.device_blocks(offset, end);
        let mut q = pool.take()?;
        let buf = q.read_at(self.start + aligned_start, (aligned_end - aligned_start) as usize)?;
        drop(q);
        counted.fetch_add(aligned_end - aligned_start, Ordering::Relaxed);
        let from = (offset - aligned_start) as usize;
        Ok(SourceBytes::aligned(buf, from..from + len))
    }
}

/// An O_DIRECT read in flight on a pooled queue ([`VolumeSource::start_read`]); the queue goes
/// back to the pool once the read is reaped.
struct DirectRead {
    pool: Arc<QueuePool>,
    /// `Some` until the read is reaped.
    queue: Option<PooledQueue>,
    /// The volume offset read.
    at: u64,
    /// The caller's bytes within the device blocks read.
    from: usize,
    len: usize,
}

impl DirectRead {
    /// Waits for the read; the queue goes back to the pool unless it failed.
    fn reap(&mut self) -> Result<Completion> {
        let mut queue = self.queue.take().expect("a direct read is reaped once");
        let mut done = Vec::with_capacity(1);
        // A failed reap leaves the queue's state unknown: the guard then closes it (its drop
        // waits for what the kernel still holds) instead of giving it back.
        queue.reap(1, &mut done)?;
        drop(queue);
        Ok(done.pop().expect("reap(1) returned a completion"))
    }
}

impl PendingRead for DirectRead {
    fn finish(mut self: Box<Self>) -> Result<SourceBytes> {
        let done = self.reap()?;
        match (done.result, done.buf) {
            (Ok(()), Some(buf)) => {
                self.pool.direct_bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
                Ok(SourceBytes::aligned(buf, self.from..self.from + self.len))
            }
            (Err(e), _) => Err(Error::from(e)),
            (Ok(()), None) => {
                Err(Error::corruption("a read completed without its buffer", self.at))
            }
        }
    }
}

impl Drop for DirectRead {
    fn drop(&mut self) {
        if self.queue.is_some() {
            // Unused readahead: the device still read the bytes, so they count as read.
            if let Ok(Completion { result: Ok(()), buf: Some(buf), .. }) = self.reap() {
                self.pool.direct_bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::BlockCache;
    use crate::iter::InternalIterator;
    use crate::key::{self, Kind};
    use crate::sst::footer::{FOOTER_BYTES, Footer};
    use crate::sst::{IndexAndFilter, SstBuilder, SstOptions, SstReader, bloom_hash};
    use shale_io::{Device, Fault, FaultPlan, MemoryDevice, OpKind, QueueOptions, SimDevice};
    use shale_space::VolumeOptions;

    fn image(entries: u32, slot_bytes: u64) -> SstImage {
        let opts = SstOptions::default();
        let mut b = SstBuilder::new(&opts);
        for i in 0..entries {
            let value = format!("value {i} {}", "v".repeat((i % 200) as usize));
            b.add(&key::encode(format!("k{i:07}").as_bytes(), 7, Kind::Put), value.as_bytes());
        }
        b.finish(slot_bytes)
    }

    fn volume() -> (Arc<MemoryDevice>, Arc<Volume>) {
        let device = Arc::new(MemoryDevice::new(24 << 20, 4096).unwrap());
        let opts = VolumeOptions::small_for_tests();
        (device.clone(), Arc::new(Volume::open(device, &opts).unwrap().volume))
    }

    #[test]
    fn sst_written_to_a_volume_reads_back_with_its_footer_at_the_extent_end() {
        let (device, volume) = volume();
        let slot_bytes = volume.layout().slot_bytes;
        let image = image(30_000, slot_bytes);
        assert!(image.bytes.len() > 2 * WRITE_BYTES_MAX, "several write requests wanted");
        let pool = Arc::new(QueuePool::new(volume.clone()));
        let extent = pool.write_sst(Tier::Fast, &image).unwrap();
        assert_eq!(u64::from(extent.count) * slot_bytes, image.bytes.len() as u64);
        assert_eq!(volume.slot_usage().pending, extent.count);
        assert!(volume.io(IoClass::Slot).flushes >= 1);

        // The footer's last byte is the extent's last byte.
        let range = volume.extent_range(extent);
        let raw = device.snapshot();
        let on_device = &raw[range.start as usize..range.end as usize];
        assert!(on_device == &image.bytes[..]);
        let tail = &on_device[on_device.len() - FOOTER_BYTES..];
        let footer = Footer::decode(tail, range.end - range.start).unwrap();
        assert_eq!(footer.image_bytes, range.end - range.start);

        let source = Arc::new(VolumeSource::new(pool.clone(), extent));
        // Unaligned reads come back exactly.
        for (offset, len) in [(0, 1), (4095, 2), (5000, 10_000), (range.end - range.start - 3, 3)] {
            let got = source.read(offset, len).unwrap();
            assert!(got[..] == on_device[offset as usize..offset as usize + len]);
        }
        assert!(source.read(range.end - range.start, 1).is_err());
        let cache = Arc::new(BlockCache::new(8 << 20));
        let r = SstReader::open(source, cache, 1, IndexAndFilter::Cached).unwrap();
        assert_eq!(r.properties(), &image.properties);
        let mut it = r.iter();
        it.seek_to_first();
        let mut n = 0;
        while it.valid() {
            n += 1;
            it.next();
        }
        it.status().unwrap();
        assert_eq!(n, 30_000);
        for i in (0..30_000).step_by(997) {
            let user = format!("k{i:07}");
            let found =
                r.get(&key::encode(user.as_bytes(), 9, Kind::SEEK), bloom_hash(user.as_bytes()));
            let (_, value) = found.unwrap().expect("present");
            assert!(value.starts_with(format!("value {i} ").as_bytes()));
        }
        // The run read ahead takes the queue the scan's own reads gave back.
        assert!(pool.reads_ahead() > 0, "the scan read nothing ahead");
        assert_eq!(pool.idle_queues(), 1, "one reader thread needs one queue");
        assert_eq!(
            pool.bytes_written().direct,
            image.len() - (image.zeros.end - image.zeros.start)
        );
    }

    /// Builds `entries` entries as a flush does, streaming through a writer reserved for
    /// `reserve` bytes; returns the extent, the whole image (for comparison) and the bytes
    /// written (the image but its zero pages).
    fn stream(pool: &Arc<QueuePool>, entries: u32, reserve: u64) -> Result<(Extent, Vec<u8>, u64)> {
        let mut b = SstBuilder::new(&SstOptions::default());
        let mut w = pool.sst_writer(Tier::Fast, reserve)?;
        let mut whole = Vec::new();
        for i in 0..entries {
            let value = format!("value {i} {}", "v".repeat((i % 200) as usize));
            b.add(&key::encode(format!("k{i:07}").as_bytes(), 7, Kind::Put), value.as_bytes());
            if w.fits(b.written_bytes()) {
                if let Some((at, bytes)) = b.take_written(WRITE_BYTES_MAX, WRITE_BYTES_MAX) {
                    w.write(at, &bytes)?;
                    whole.extend_from_slice(&bytes);
                }
            }
        }
        let image = b.finish(pool.volume().layout().slot_bytes);
        whole.extend_from_slice(&image.bytes);
        let written = whole.len() as u64 - (image.zeros.end - image.zeros.start);
        Ok((w.finish(&image)?, whole, written))
    }

    #[test]
    fn a_streamed_sst_keeps_the_slots_it_uses_and_gives_back_the_rest() {
        let (device, volume) = volume();
        let slot_bytes = volume.layout().slot_bytes;
        let pool = Arc::new(QueuePool::new(volume.clone()));
        let before = volume.slot_usage();
        // Reserved with room to spare: the unused slots go back.
        let (extent, whole, written) = stream(&pool, 30_000, 16 << 20).unwrap();
        assert!(written < whole.len() as u64, "the zero pages before the footer were written");
        assert_eq!(u64::from(extent.count) * slot_bytes, whole.len() as u64);
        assert_eq!(volume.slot_usage().pending, extent.count);
        assert_eq!(volume.slot_usage().free, before.free - extent.count);
        let range = volume.extent_range(extent);
        assert!(device.snapshot()[range.start as usize..range.end as usize] == whole[..]);
        assert_eq!(pool.bytes_written().direct, written);
        volume.release(extent);

        // Reserved too small: relocated, the same bytes in an extent of the right size, the
        // reservation given back, the streamed part counted as written twice.
        let written_before = pool.bytes_written().direct;
        let (moved, whole2, _) = stream(&pool, 30_000, 2 * WRITE_BYTES_MAX as u64).unwrap();
        assert!(whole2 == whole);
        assert_eq!(u64::from(moved.count) * slot_bytes, whole.len() as u64);
        assert_eq!(volume.slot_usage().pending, moved.count, "the reservation went back");
        let range = volume.extent_range(moved);
        assert!(device.snapshot()[range.start as usize..range.end as usize] == whole[..]);
        assert_eq!(
            pool.bytes_written().direct - written_before,
            written + WRITE_BYTES_MAX as u64,
            "one request streamed (the next would have passed the reservation), then copied"
        );
        volume.release(moved);
        volume.check_slots().unwrap();
        assert_eq!(volume.slot_usage(), before);
    }

    #[test]
    fn an_abandoned_writer_releases_its_reservation() {
        let (_, volume) = volume();
        let pool = Arc::new(QueuePool::new(volume.clone()));
        let before = volume.slot_usage();
        let mut w = pool.sst_writer(Tier::Fast, 8 << 20).unwrap();
        assert!(volume.slot_usage().pending > 0);
        w.write(0, &vec![1u8; 3 * WRITE_BYTES_MAX]).unwrap();
        drop(w);
        assert_eq!(volume.slot_usage(), before);
    }

    #[test]
    fn failed_writes_release_the_extent() {
        let device = Arc::new(SimDevice::new(24 << 20, 4096, 1).unwrap());
        let opts = VolumeOptions::small_for_tests();
        let volume = Arc::new(Volume::open(device.clone(), &opts).unwrap().volume);
        let pool = Arc::new(QueuePool::new(volume.clone()));
        let slot_bytes = volume.layout().slot_bytes;
        let image = image(30_000, slot_bytes);
        let before = volume.slot_usage();
        for fault in [
            Fault::Eio { op: OpKind::Write, nth: 2, sticky: false },
            Fault::Eio { op: OpKind::Flush, nth: 1, sticky: false },
        ] {
            device.set_faults(FaultPlan { faults: vec![fault.clone()] });
            assert!(pool.write_sst(Tier::Fast, &image).is_err(), "{fault:?} went unnoticed");
            assert_eq!(volume.slot_usage(), before, "{fault:?} leaked the extent");
            // Streamed, and relocated (reading back the streamed part) after the fault.
            for reserve in [16 << 20, 2 * WRITE_BYTES_MAX as u64] {
                device.set_faults(FaultPlan { faults: vec![fault.clone()] });
                assert!(stream(&pool, 30_000, reserve).is_err(), "{fault:?} went unnoticed");
                assert_eq!(volume.slot_usage(), before, "{fault:?} leaked a reservation");
            }
        }
        device.set_faults(FaultPlan {
            faults: vec![Fault::Eio { op: OpKind::Read, nth: 1, sticky: false }],
        });
        assert!(stream(&pool, 30_000, 2 * WRITE_BYTES_MAX as u64).is_err(), "a failed copy");
        assert_eq!(volume.slot_usage(), before, "a failed relocation leaked an extent");
        device.set_faults(FaultPlan::default());
        let not_slots = SstImage {
            base: 0,
            bytes: vec![0; 4096],
            zeros: 0..0,
            properties: image.properties.clone(),
            smallest: Vec::new(),
            largest: Vec::new(),
        };
        assert!(matches!(pool.write_sst(Tier::Fast, &not_slots), Err(Error::InvalidArgument(_))));
        let extent = pool.write_sst(Tier::Fast, &image).unwrap();
        assert_eq!(volume.slot_usage().pending, extent.count);
    }

    /// Scans every entry of `r` with a cache too small to hold them, so that every data block
    /// is read; returns how many, and the status.
    fn scan_count(r: &SstReader) -> (usize, Result<()>) {
        let mut it = r.iter();
        it.seek_to_first();
        let mut n = 0;
        while it.valid() {
            let want = format!("k{n:07}");
            assert_eq!(key::user_key(it.key()), want.as_bytes(), "entry {n}");
            assert!(it.value().starts_with(format!("value {n} ").as_bytes()), "entry {n}");
            n += 1;
            it.next();
        }
        (n, it.status())
    }

    #[test]
    fn an_o_direct_scan_reads_its_next_run_in_the_background() {
        let (device, volume) = volume();
        let slot_bytes = volume.layout().slot_bytes;
        let image = image(30_000, slot_bytes);
        let pool = Arc::new(QueuePool::new(volume.clone()));
        let extent = pool.write_sst(Tier::Fast, &image).unwrap();
        let source = Arc::new(VolumeSource::new(pool.clone(), extent));
        let small_cache = || Arc::new(BlockCache::new(64 << 10));
        let r = SstReader::open(source.clone(), small_cache(), 1, IndexAndFilter::Held).unwrap();
        let (n, status) = scan_count(&r);
        status.unwrap();
        assert_eq!(n, 30_000);
        // Runs double from 64 KiB to 512 KiB: a 2+ MiB image takes several, each started
        // before the scan needed it.
        let ahead = pool.reads_ahead();
        assert!(ahead >= 4, "{ahead} runs read ahead over {} bytes", image.len());
        assert_eq!(pool.idle_queues(), 1, "queues held by a finished scan");

        // An iterator dropped with a run in flight waits for it and gives its queue back.
        let mut it = r.iter();
        it.seek_to_first();
        for _ in 0..5_000 {
            it.next();
        }
        assert!(it.valid());
        assert!(pool.reads_ahead() > ahead, "no run in flight mid-scan");
        drop(it);
        assert_eq!(pool.idle_queues(), 1, "a dropped scan kept a queue");

        // A byte flipped in a data block that only a run read ahead brings in: the scan ends
        // in Corruption at that block, every entry before it exact (checked in scan_count).
        let range = volume.extent_range(extent);
        let flip_at = range.start + (image.len() * 3 / 4) / 4096 * 4096 + 100;
        let mut q = device.open_queue(&QueueOptions::default()).unwrap();
        let page = flip_at / 4096 * 4096;
        let mut buf = q.read_at(page, 4096).unwrap();
        buf[(flip_at - page) as usize] ^= 0x40;
        q.write_at(page, buf, true).unwrap();
        let before = pool.reads_ahead();
        let r = SstReader::open(source, small_cache(), 2, IndexAndFilter::Held).unwrap();
        let (n, status) = scan_count(&r);
        assert!(matches!(status, Err(Error::Corruption { .. })), "{status:?} after {n} entries");
        assert!(n > 10_000 && n < 30_000, "stopped after {n} entries");
        assert!(pool.reads_ahead() > before + 2, "the damaged block was not read ahead");
    }
}
