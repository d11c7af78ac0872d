//! Writing SST images into extents of a volume, and reading them back.
//!
//! Writing takes one of two paths, chosen once per store ([`QueuePool`]):
//! - *direct* (`Options::use_direct_io_for_flush_and_compaction = true`, or a store on a
//!   device rather than a path): O_DIRECT writes through a slot queue, around the page cache;
//! - *buffered* (`false`, the default, as RocksDB's, on a store opened by path): `pwrite` on a
//!   read-write descriptor of the volume file without O_DIRECT ([`BufferedWriter`]), so the
//!   new SST's pages are in the page cache when it is first read, as an engine writing
//!   buffered files finds them.
//!
//! Either path runs these stages, in order:
//! 1. Allocate `image bytes / slot bytes` contiguous slots (the extent stays pending).
//! 2. Write the image in requests of up to [`WRITE_BYTES_MAX`]: direct, [`WRITES_IN_FLIGHT_MAX`]
//!    in flight on one slot queue; buffered, one `pwrite` each, followed by a non-waiting
//!    `sync_file_range` so write-back streams instead of piling up for stage 3.
//! 3. Make it durable (direct: the queue's flush; buffered: `fdatasync`), so the SST is on
//!    the device before anyone commits a version naming its extent. The promises of
//!    DESIGN.md hold the same on both paths: nothing names an SST before stage 3 returned. A
//!    failed buffered sync is sticky ([`BufferedWriter::sync`]): the kernel reports a
//!    write-back error once per descriptor, and several threads share this one.
//!
//! Any failure releases the extent, after reaping every request still in flight, so no
//! request can land in slots that were given back.
//!
//! Reading takes one of two paths, chosen once per store as well:
//! - *direct*: O_DIRECT reads of whole device blocks through pooled slot queues (io_uring or
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
//!   writes dirty ones back before a direct read of their range; after stage 3 there are none.
//! - direct writes, buffered reads: O_DIRECT writes go around the page cache, so the cached
//!   pages of the extent are dropped once the new SST is written ([`QueuePool::write_sst`]),
//!   which also covers pages another process left behind before a crash. Linux invalidates
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

use parking_lot::Mutex;
use shale_io::{
    AlignedBuf, BufferedReader, BufferedWriter, Completion, Op, Queue, QueueExt, QueueOptions,
    Request,
};
use shale_space::{Extent, IoClass, Volume, VolumeQueue};

use crate::error::{Error, Result};
use crate::sst::builder::SstImage;
use crate::sst::reader::BlockSource;

/// Bytes of one write request: large enough to stream, small enough to keep several in flight.
pub const WRITE_BYTES_MAX: usize = 1 << 20;
/// Write requests in flight while an SST is written.
pub const WRITES_IN_FLIGHT_MAX: u32 = 4;
/// Idle read queues a pool keeps; more are opened under load and dropped when given back.
pub const POOL_QUEUES_IDLE_MAX: usize = 8;
/// Bytes of one `POSIX_FADV_WILLNEED` when a new SST is prefetched: the kernel reads at most
/// its readahead window (128 KiB by default) per call and silently ignores the rest, so a
/// whole SST takes one call per chunk (a single call for the whole extent warmed nothing).
const PREFETCH_CHUNK_BYTES: u64 = 128 << 10;
/// Depth of a pooled read queue: reads through it are one at a time.
const READ_QUEUE_DEPTH: u32 = 1;
/// Depth of a pooled batch queue ([`QueuePool::read_many`]): the reads of one multi-get in
/// flight together.
const BATCH_QUEUE_DEPTH: u32 = 32;

/// Writes `image` into a newly allocated extent of `volume`, durably, and returns the extent
/// (pending: the caller commits it in a version edit or releases it).
///
/// # Errors
/// [`Error::InvalidArgument`] if the image is not whole slots of this volume; [`Error::NoSpace`]
/// without room; the device's errors. The extent is released on every error.
pub fn write_sst(volume: &Volume, image: &SstImage) -> Result<Extent> {
    let extent = volume.allocate(slots_of(volume, image)?)?;
    let start = volume.extent_range(extent).start;
    let written = volume
        .queue(
            IoClass::Slot,
            &QueueOptions { depth: WRITES_IN_FLIGHT_MAX, ..QueueOptions::default() },
        )
        .map_err(Error::from)
        .and_then(|mut q| write_image(&mut q, start, &image.bytes));
    match written {
        Ok(()) => Ok(extent),
        Err(e) => {
            volume.release(extent);
            Err(e)
        }
    }
}

/// Writes `image` as [`write_sst`] does, but buffered, through `writer` (a read-write
/// descriptor on the volume's file or block device), and syncs it.
///
/// # Errors
/// As [`write_sst`]; a failed sync, or any sync after one failed.
pub fn write_sst_buffered(
    volume: &Volume,
    writer: &BufferedWriter,
    image: &SstImage,
) -> Result<Extent> {
    let extent = volume.allocate(slots_of(volume, image)?)?;
    let range = volume.extent_range(extent);
    assert_eq!(range.end - range.start, image.bytes.len() as u64, "an extent of the image's size");
    let written = write_image_buffered(writer, range.start, &image.bytes);
    match written {
        Ok(()) => Ok(extent),
        Err(e) => {
            volume.release(extent);
            Err(e)
        }
    }
}

/// Stage 1's check: the slots `image` takes on `volume`.
fn slots_of(volume: &Volume, image: &SstImage) -> Result<u32> {
    let slot_bytes = volume.layout().slot_bytes;
    let len = image.bytes.len() as u64;
    if len % slot_bytes != 0 {
        return Err(Error::InvalidArgument(format!(
            "SST image of {len} bytes is not whole {slot_bytes}-byte slots"
        )));
    }
    u32::try_from(len / slot_bytes)
        .map_err(|_| Error::InvalidArgument(format!("SST image of {len} bytes is too large")))
}

/// Stage 2 and 3, buffered: `pwrite`s `image` at `start` chunk by chunk, starting each
/// chunk's write-back at once, then syncs.
fn write_image_buffered(writer: &BufferedWriter, start: u64, image: &[u8]) -> Result<()> {
    for (i, chunk) in image.chunks(WRITE_BYTES_MAX).enumerate() {
        let offset = start + (i * WRITE_BYTES_MAX) as u64;
        writer.write_at(offset, chunk)?;
        writer.start_writeback(offset, chunk.len() as u64)?;
    }
    Ok(writer.sync()?)
}

/// Stage 2 and 3: streams `image` to `start` and flushes. Every submitted request is reaped
/// before this returns, even on error.
fn write_image(q: &mut VolumeQueue, start: u64, image: &[u8]) -> Result<()> {
    let mut first_error: Option<Error> = None;
    let mut done = Vec::new();
    let mut chunks = image.chunks(WRITE_BYTES_MAX).enumerate();
    loop {
        while first_error.is_none() && q.in_flight() < q.depth() {
            let Some((i, chunk)) = chunks.next() else { break };
            let mut buf = AlignedBuf::zeroed(chunk.len());
            buf.copy_from_slice(chunk);
            let offset = start + (i * WRITE_BYTES_MAX) as u64;
            let op = Op::Write { offset, buf, durable: false };
            if let Err((e, _)) = q.submit(Request { tag: i as u64, op }) {
                first_error = Some(e.into());
            }
        }
        if q.in_flight() == 0 {
            break;
        }
        done.clear();
        if let Err(e) = q.reap(1, &mut done) {
            // A broken ring reaps nothing more; the requests in it are lost to us.
            return Err(e.into());
        }
        for Completion { result, .. } in done.drain(..) {
            if let (Err(e), None) = (result, &first_error) {
                first_error = Some(e.into());
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => q.flush().map_err(Error::from),
    }
}

/// Bytes read by SST reads that missed the block cache, per path, since open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SstBytesRead {
    /// Read with O_DIRECT from the device.
    pub direct: u64,
    /// Read through the page cache (from memory or from the device: the kernel knows which).
    pub buffered: u64,
}

/// Bytes of SSTs written by flushes and compactions, per path, since open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SstBytesWritten {
    /// Written with O_DIRECT.
    pub direct: u64,
    /// Written through the page cache (and synced).
    pub buffered: u64,
}

/// The page-cache descriptors of a store opened by path; none for a store on a device.
#[derive(Clone, Debug, Default)]
pub struct PageCacheFiles {
    /// SST reads go through it when present (`Options::use_direct_reads = false`).
    pub reads: Option<Arc<BufferedReader>>,
    /// Flush and compaction outputs are written through it when present
    /// (`Options::use_direct_io_for_flush_and_compaction = false`).
    pub writes: Option<Arc<BufferedWriter>>,
}

/// How the SSTs of one volume are written and read: slot queues shared by the readers (a read
/// takes one, or opens one when all are busy, and gives it back), or buffered descriptors on
/// the volume file when the store reads or writes through the page cache.
pub struct QueuePool {
    volume: Arc<Volume>,
    idle: Mutex<Vec<VolumeQueue>>,
    /// Idle queues of [`BATCH_QUEUE_DEPTH`], for [`QueuePool::read_many`].
    batch_idle: Mutex<Vec<VolumeQueue>>,
    /// Present when reads go through the page cache (see the module's comment).
    buffered: Option<Arc<BufferedReader>>,
    /// Present when SSTs are written through the page cache (see the module's comment).
    writer: Option<Arc<BufferedWriter>>,
    direct_bytes: AtomicU64,
    buffered_bytes: AtomicU64,
    direct_written_bytes: AtomicU64,
    buffered_written_bytes: AtomicU64,
}

impl std::fmt::Debug for QueuePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueuePool")
            .field("idle", &self.idle.lock().len())
            .field("buffered", &self.buffered)
            .field("writer", &self.writer)
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
        QueuePool {
            volume,
            idle: Mutex::new(Vec::new()),
            batch_idle: Mutex::new(Vec::new()),
            buffered: files.reads,
            writer: files.writes,
            direct_bytes: AtomicU64::new(0),
            buffered_bytes: AtomicU64::new(0),
            direct_written_bytes: AtomicU64::new(0),
            buffered_written_bytes: AtomicU64::new(0),
        }
    }

    /// The volume the pool's queues are on.
    pub fn volume(&self) -> &Arc<Volume> {
        &self.volume
    }

    /// Whether SST reads go through the page cache.
    pub fn reads_buffered(&self) -> bool {
        self.buffered.is_some()
    }

    /// Whether SSTs are written through the page cache.
    pub fn writes_buffered(&self) -> bool {
        self.writer.is_some()
    }

    /// Bytes of SSTs written through [`QueuePool::write_sst`] so far, per path.
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
        }
    }

    /// Writes `image` durably into a new extent. Through the page cache when the pool has a
    /// writer ([`write_sst_buffered`]): its pages stay cached, nothing else to do. Else with
    /// O_DIRECT, as [`write_sst`] does, then drops whatever the page cache holds of its extent
    /// (nothing can have read the new SST yet, so any cached page there is older), then
    /// prefetches the new SST into the page cache when reads go through it.
    ///
    /// # Errors
    /// As [`write_sst`]; a refused page drop releases the extent and fails too, since the
    /// new SST could not be read safely.
    pub fn write_sst(&self, image: &SstImage) -> Result<Extent> {
        let len = image.bytes.len() as u64;
        if let Some(writer) = &self.writer {
            let extent = write_sst_buffered(&self.volume, writer, image)?;
            self.buffered_written_bytes.fetch_add(len, Ordering::Relaxed);
            return Ok(extent);
        }
        let extent = write_sst(&self.volume, image)?;
        self.direct_written_bytes.fetch_add(len, Ordering::Relaxed);
        if let Err(e) = self.drop_pages(extent) {
            self.volume.release(extent);
            return Err(e);
        }
        self.prefetch(extent);
        Ok(extent)
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
            log::warn!("cannot drop the cached pages of a released SST ({extent:?}): {e}");
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
        let Some(buffered) = &self.buffered else { return };
        let range = self.volume.extent_range(extent);
        let mut at = range.start;
        while at < range.end {
            let len = (range.end - at).min(PREFETCH_CHUNK_BYTES);
            if let Err(e) = buffered.prefetch(at, len) {
                log::debug!("cannot prefetch a new SST ({extent:?}): {e}");
                return;
            }
            at += len;
        }
    }

    fn drop_pages(&self, extent: Extent) -> Result<()> {
        let range = self.volume.extent_range(extent);
        let len = range.end - range.start;
        // Either descriptor drops the pages of the one file they share.
        match (&self.buffered, &self.writer) {
            (Some(reader), _) => Ok(reader.drop_cached(range.start, len)?),
            (None, Some(writer)) => Ok(writer.drop_cached(range.start, len)?),
            (None, None) => Ok(()),
        }
    }

    /// Reads `(offset, len)` ranges of the volume's slot area (absolute offsets, inside
    /// extents of live SSTs) all at once, answered in order: through the page cache's
    /// [`BufferedReader::read_many`] when reads are buffered, else with O_DIRECT on a queue of
    /// [`BATCH_QUEUE_DEPTH`], whole device blocks around each range. The device works on
    /// them together, so a batch costs about one read's latency, not one per range.
    pub fn read_many(&self, reqs: &[(u64, usize)]) -> Vec<Result<Vec<u8>>> {
        if let Some(buffered) = &self.buffered {
            let out: Vec<Result<Vec<u8>>> =
                buffered.read_many(reqs).into_iter().map(|r| r.map_err(Error::from)).collect();
            let bytes: usize =
                reqs.iter().zip(&out).filter(|(_, r)| r.is_ok()).map(|(q, _)| q.1).sum();
            self.buffered_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
            return out;
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
                        source: std::io::Error::other(format!("batch read queue failed: {e}")),
                    }))
                })
                .collect(),
        }
    }

    fn read_many_direct(&self, reqs: &[(u64, usize)]) -> Result<Vec<Result<Vec<u8>>>> {
        let bs = u64::from(self.volume.device().info().block_size);
        let mut q = match self.batch_idle.lock().pop() {
            Some(q) => q,
            None => {
                let opts = QueueOptions { depth: BATCH_QUEUE_DEPTH, ..QueueOptions::default() };
                self.volume.queue(IoClass::Slot, &opts)?
            }
        };
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
        let mut idle = self.batch_idle.lock();
        if idle.len() < POOL_QUEUES_IDLE_MAX {
            idle.push(q);
        }
        Ok(out.into_iter().map(|r| r.expect("every read was reaped")).collect())
    }

    fn take(&self) -> Result<VolumeQueue> {
        if let Some(q) = self.idle.lock().pop() {
            return Ok(q);
        }
        let opts = QueueOptions { depth: READ_QUEUE_DEPTH, ..QueueOptions::default() };
        Ok(self.volume.queue(IoClass::Slot, &opts)?)
    }

    fn give_back(&self, q: VolumeQueue) {
        let mut idle = self.idle.lock();
        if idle.len() < POOL_QUEUES_IDLE_MAX {
            idle.push(q);
        }
    }

    /// Queues idle in the pool now.
    pub fn idle_queues(&self) -> usize {
        self.idle.lock().len()
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
        let block_bytes = u64::from(pool.volume.device().info().block_size);
        VolumeSource { pool, extent, start: range.start, len: range.end - range.start, block_bytes }
    }

    /// The extent read.
    pub fn extent(&self) -> Extent {
        self.extent
    }
}

impl BlockSource for VolumeSource {
    fn read(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let end = offset.checked_add(len as u64).filter(|&e| e <= self.len).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "read of {len} bytes at {offset} past an SST of {} bytes",
                self.len
            ))
        })?;
        if len == 0 {
            return Ok(Vec::new());
        }
        let pool = &self.pool;
        if let Some(buffered) = &pool.buffered {
            // The page cache needs no alignment. The range lies inside this SST's extent, so
            // in the slot area, as a slot queue would insist.
            let buf = buffered.read_at(self.start + offset, len)?;
            pool.buffered_bytes.fetch_add(len as u64, Ordering::Relaxed);
            return Ok(buf);
        }
        // O_DIRECT: read whole device blocks around the range, then cut it out.
        let bs = self.block_bytes;
        let aligned_start = (offset / bs) * bs;
        let aligned_end = end.div_ceil(bs) * bs;
        let mut q = pool.take()?;
        let buf = q.read_at(self.start + aligned_start, (aligned_end - aligned_start) as usize)?;
        pool.give_back(q);
        pool.direct_bytes.fetch_add(aligned_end - aligned_start, Ordering::Relaxed);
        let from = (offset - aligned_start) as usize;
        Ok(buf[from..from + len].to_vec())
    }

    fn len(&self) -> u64 {
        self.len
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
    use shale_io::{Fault, FaultPlan, MemoryDevice, OpKind, SimDevice};
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
        let extent = write_sst(&volume, &image).unwrap();
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

        let pool = Arc::new(QueuePool::new(volume.clone()));
        let source = Arc::new(VolumeSource::new(pool.clone(), extent));
        // Unaligned reads come back exactly.
        for (offset, len) in [(0, 1), (4095, 2), (5000, 10_000), (range.end - range.start - 3, 3)] {
            let got = source.read(offset, len).unwrap();
            assert!(got == on_device[offset as usize..offset as usize + len]);
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
        assert_eq!(pool.idle_queues(), 1, "one reader thread needs one queue");
    }

    #[test]
    fn failed_writes_release_the_extent() {
        let device = Arc::new(SimDevice::new(24 << 20, 4096, 1).unwrap());
        let opts = VolumeOptions::small_for_tests();
        let volume = Volume::open(device.clone(), &opts).unwrap().volume;
        let slot_bytes = volume.layout().slot_bytes;
        let image = image(30_000, slot_bytes);
        let before = volume.slot_usage();
        for fault in [
            Fault::Eio { op: OpKind::Write, nth: 2, sticky: false },
            Fault::Eio { op: OpKind::Flush, nth: 1, sticky: false },
        ] {
            device.set_faults(FaultPlan { faults: vec![fault.clone()] });
            assert!(write_sst(&volume, &image).is_err(), "{fault:?} went unnoticed");
            assert_eq!(volume.slot_usage(), before, "{fault:?} leaked the extent");
        }
        device.set_faults(FaultPlan::default());
        let not_slots = SstImage {
            bytes: vec![0; 4096],
            properties: image.properties.clone(),
            smallest: Vec::new(),
            largest: Vec::new(),
        };
        assert!(matches!(write_sst(&volume, &not_slots), Err(Error::InvalidArgument(_))));
        let extent = write_sst(&volume, &image).unwrap();
        assert_eq!(volume.slot_usage().pending, extent.count);
    }
}
