//! Streaming one SST into an extent of the volume while it is built.
//!
//! A flush or compaction output does not know its final size when it starts, and an extent is
//! contiguous, so the writer reserves an extent for the most the SST should reach
//! ([`QueuePool::sst_writer`]) and gives back the slots it did not use when the SST is done.
//! Stages, in order:
//! 1. Reserve: allocate the slots of the reservation (pending, as any new extent).
//! 2. Stream: the builder's finished bytes ([`SstBuilder::take_written`], whole write requests
//!    at their offsets, in order) are written as they come: direct, up to
//!    [`WRITES_IN_FLIGHT_MAX`] requests in flight on one slot queue; buffered, one `pwrite` and
//!    a non-waiting `sync_file_range` each, on a descriptor of the SST's own, with at most
//!    `WRITEBACK_LAG_BYTES` of write-back under way. The builder holds about one request of
//!    its SST.
//! 3. Finish ([`SstWriter::finish`]): write the rest of the image (the last data blocks, the
//!    meta blocks and the footer; not the whole zero pages between them, [`SstImage::zeros`]),
//!    wait for every request, make it durable (the queue's flush, or a ranged `fdatasync` of
//!    the SST's bytes, [`BufferedWriter::sync_range`]), give back
//!    the storage of those zero pages ([`shale_space::Volume::release_within`]) and the
//!    reserved slots past the image ([`shale_space::Volume::shrink`]). Nothing names the SST before this returns (docs/design.md's
//!    promises hold as for an SST written whole).
//! 4. With O_DIRECT writes: drop the page cache's pages of the extent, then prefetch the new SST
//!    into it when reads go through it (see `volume_io`'s comment on slot reuse).
//!
//! An SST that outgrows its reservation (a key with many versions kept for snapshots, or an
//! estimate that was short) is not lost: its builder stops handing bytes out once they would
//! pass the reservation ([`SstWriter::fits`]), and `finish` *relocates* it: a new extent of the
//! final size, the part already written copied over from the device, the rest written after it,
//! the old reservation released. Correct, and costs a read and a write of the streamed part.
//!
//! Any failure, or a writer dropped before `finish` (a compaction that failed half-way),
//! reaps every request still in flight and releases the reservation, so no request can land in
//! slots that were given back.
//!
//! [`SstBuilder::take_written`]: crate::sst::SstBuilder::take_written

use std::sync::Arc;

use shale_io::{
    AlignedBuf, BufferedWriter, Completion, Op, Queue, QueueExt, QueueOptions, Request,
    at_own_io_priority,
};
use shale_space::{Extent, IoClass, Tier, VolumeQueue};

use crate::error::{Error, Result};
use crate::sst::builder::SstImage;
use crate::sst::volume_io::{QueuePool, WRITE_BYTES_MAX, WRITES_IN_FLIGHT_MAX};

/// Where the bytes go.
enum Path {
    /// O_DIRECT through a slot queue; the first failure of a request is kept until `finish`.
    Direct { q: VolumeQueue, failed: Option<Error> },
    /// Through the page cache, at device offsets of the reservation's tier, on a descriptor
    /// of this SST's own ([`BufferedWriter::reopen`]): its sync waits for its own pages only,
    /// and sees every write-back error since it was opened.
    Buffered {
        w: BufferedWriter,
        /// Device offset up to which write-back has been waited for ([`WRITEBACK_LAG_BYTES`]).
        waited: u64,
    },
}

/// Bytes of an SST whose write-back may be under way at once, through the page cache; the
/// writer waits for older ones before it goes on. Without a bound, a compaction writing
/// faster than the device queues as much as the page cache lets it in front of a flush's
/// pages, and the flush's sync waits for them all (with the whole-file sync this replaced,
/// syncs of 150-620 ms on a device throttled to 500 MB/s). With the bound and the ranged
/// sync, a volume file on ext4 over that device ran fillrandom (16 threads, 1 KB values,
/// 12 s) at 198-200k ops/s against 190-195k, memtable stalls 0.25-0.31 s against
/// 0.33-1.06 s (docs/lsm.md, "Writes through the page cache"). Eight requests keep a fast
/// device busy (the direct path keeps [`WRITES_IN_FLIGHT_MAX`] in flight).
const WRITEBACK_LAG_BYTES: u64 = 8 * WRITE_BYTES_MAX as u64;

/// One SST being written into its reserved extent (see the module's comment).
pub struct SstWriter {
    pool: Arc<QueuePool>,
    /// The reservation; `None` once finished or released.
    reserved: Option<Extent>,
    /// Address of the reservation's first byte ([`Tier::split`]).
    start: u64,
    /// Bytes of the reservation.
    capacity: u64,
    /// Bytes written so far, from the SST's first byte on.
    written: u64,
    path: Path,
}

impl std::fmt::Debug for SstWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SstWriter")
            .field("reserved", &self.reserved)
            .field("capacity", &self.capacity)
            .field("written", &self.written)
            .field("direct", &matches!(self.path, Path::Direct { .. }))
            .finish()
    }
}

impl QueuePool {
    /// Reserves an extent of `reserve_bytes` (at least one slot) on `tier` for an SST to be
    /// streamed into it: through the page cache when the pool has a writer, else with
    /// O_DIRECT. A fast tier without a free run that long sends the SST to the capacity tier,
    /// where the store has one: a full fast volume slows nothing down and fails no write.
    /// Where the last tier tried has no free run that long either (a fragmented device that
    /// cannot grow), the reservation is its longest free run: shorter, and the caller cuts
    /// its output to fit ([`SstWriter::fits`]) rather than stop the store with free slots
    /// left.
    ///
    /// # Errors
    /// [`Error::NoSpace`] without a free slot; the device's errors.
    pub fn sst_writer(self: &Arc<Self>, tier: Tier, reserve_bytes: u64) -> Result<SstWriter> {
        self.reserve(tier, reserve_bytes, true)
    }

    /// [`QueuePool::sst_writer`] for an SST whose size is known, which cannot be cut: a
    /// reservation of exactly `bytes`, or [`Error::NoSpace`].
    ///
    /// # Errors
    /// As [`QueuePool::sst_writer`]; [`Error::NoSpace`] without a free run that long.
    pub fn sst_writer_exact(self: &Arc<Self>, tier: Tier, bytes: u64) -> Result<SstWriter> {
        self.reserve(tier, bytes, false)
    }

    fn reserve(self: &Arc<Self>, tier: Tier, reserve_bytes: u64, cut: bool) -> Result<SstWriter> {
        let volume = self.volume();
        let slot_bytes = volume.layout().slot_bytes;
        let slots = u32::try_from(reserve_bytes.div_ceil(slot_bytes).max(1)).map_err(|_| {
            Error::InvalidArgument(format!("an SST of {reserve_bytes} bytes is too large"))
        })?;
        let last_try = |tier| {
            if cut { volume.allocate_up_to_on(tier, slots) } else { volume.allocate_on(tier, slots) }
        };
        let extent = match volume.allocate_on(tier, slots) {
            Err(shale_space::Error::NoSpace(why)) if tier == Tier::Fast && volume.is_tiered() => {
                log::debug!("an SST goes to the capacity tier: the fast tier is full ({why})");
                last_try(Tier::Capacity)?
            }
            Err(shale_space::Error::NoSpace(_)) if cut => last_try(tier)?,
            other => other?,
        };
        let range = volume.extent_range(extent);
        let path = match self.page_cache_writer(extent.tier).map(|w| w.reopen()) {
            Some(Ok(w)) => Path::Buffered { w, waited: Tier::split(range.start).1 },
            Some(Err(e)) => {
                volume.release(extent);
                return Err(e.into());
            }
            None => {
                let opts = QueueOptions { depth: WRITES_IN_FLIGHT_MAX, ..QueueOptions::default() };
                match volume.queues().open(IoClass::Slot, &opts) {
                    Ok(q) => Path::Direct { q, failed: None },
                    Err(e) => {
                        volume.release(extent);
                        return Err(e.into());
                    }
                }
            }
        };
        Ok(SstWriter {
            pool: self.clone(),
            reserved: Some(extent),
            start: range.start,
            capacity: range.end - range.start,
            written: 0,
            path,
        })
    }
}

impl SstWriter {
    /// Whether the SST's bytes up to `end` fit the reservation: the builder hands out no bytes
    /// that do not (they stay in its image, and `finish` relocates the SST), and an output
    /// is cut before an entry that would take its image past it (`OutputSst::is_full_after`).
    pub fn fits(&self, end: u64) -> bool {
        end <= self.capacity
    }

    /// Writes `bytes` at offset `at` of the SST: the next bytes after those written before,
    /// inside the reservation, a whole number of device blocks (as
    /// [`SstBuilder::take_written`] hands them out).
    ///
    /// # Errors
    /// The device's errors (direct: the first failed request, now or at a later call).
    ///
    /// # Panics
    /// If `at` does not follow the bytes written, or the bytes pass the reservation.
    ///
    /// [`SstBuilder::take_written`]: crate::sst::SstBuilder::take_written
    pub fn write(&mut self, at: u64, bytes: &[u8]) -> Result<()> {
        assert_eq!(at, self.written, "SST bytes written out of order");
        assert!(self.fits(at + bytes.len() as u64), "SST bytes past the reservation");
        let offset = self.start + at;
        self.written += bytes.len() as u64;
        match &mut self.path {
            Path::Buffered { w, waited } => {
                let (tier, offset) = Tier::split(offset);
                for (i, chunk) in bytes.chunks(WRITE_BYTES_MAX).enumerate() {
                    let o = offset + (i * WRITE_BYTES_MAX) as u64;
                    w.write_at(o, chunk)?;
                    // Write-back at the thread's own priority, even in an idle compaction:
                    // memory reclaim waits for it (`shale_io::at_own_io_priority`).
                    at_own_io_priority(|| w.start_writeback(o, chunk.len() as u64))?;
                    let behind = (o + chunk.len() as u64).saturating_sub(WRITEBACK_LAG_BYTES);
                    if behind > *waited {
                        w.wait_writeback(*waited, behind - *waited)?;
                        *waited = behind;
                    }
                }
                self.pool.count_written(tier, bytes.len() as u64, true);
                Ok(())
            }
            Path::Direct { q, failed } => {
                for (i, chunk) in bytes.chunks(WRITE_BYTES_MAX).enumerate() {
                    if failed.is_some() {
                        break;
                    }
                    if q.in_flight() >= q.depth() {
                        reap(q, 1, failed)?;
                    }
                    let mut buf = AlignedBuf::zeroed(chunk.len());
                    buf.copy_from_slice(chunk);
                    let o = offset + (i * WRITE_BYTES_MAX) as u64;
                    let op = Op::Write { offset: o, buf, durable: false };
                    if let Err((e, _)) = at_own_io_priority(|| q.submit(Request { tag: o, op })) {
                        failed.get_or_insert(e.into());
                    }
                }
                self.pool.count_written(Tier::split(offset).0, bytes.len() as u64, false);
                failed.take().map_or(Ok(()), Err)
            }
        }
    }

    /// Writes the rest of the SST (`image`, from `image.base` on: every byte not written yet),
    /// makes the whole SST durable and returns its extent, pending, of exactly its slots; the
    /// rest of the reservation is given back. Relocates an SST larger than its reservation.
    ///
    /// # Errors
    /// The device's errors; a refused page drop. The reservation (and any new extent) is
    /// released on every error.
    ///
    /// # Panics
    /// If `image` does not start where the written bytes end.
    pub fn finish(mut self, image: &SstImage) -> Result<Extent> {
        assert_eq!(image.base, self.written, "the image does not follow the bytes written");
        if !self.fits(image.len()) {
            return self.relocate(image);
        }
        let zeros = &image.zeros;
        let skip = zeros.start >= image.base && !zeros.is_empty();
        if skip {
            // The zero pages before the footer are left unwritten, and given back below.
            let at = |o: u64| usize::try_from(o - image.base).expect("inside the image");
            self.write(image.base, &image.bytes[..at(zeros.start)])?;
            self.written = zeros.end;
            self.write(zeros.end, &image.bytes[at(zeros.end)..])?;
        } else {
            self.write(image.base, &image.bytes)?;
        }
        self.wait_durable()?;
        let pool = self.pool.clone();
        let volume = pool.volume();
        let reserved = *self.reserved.as_ref().expect("a writer is finished once");
        if skip {
            // The reservation was given storage whole; the zeros need none. On error the
            // reservation is released when `self` drops.
            volume.release_within(reserved, self.start + zeros.start..self.start + zeros.end)?;
        }
        let reserved = self.reserved.take().expect("a writer is finished once");
        let slots = image.len() / volume.layout().slot_bytes;
        let extent = volume.shrink(reserved, u32::try_from(slots).expect("fits the reservation"));
        pool.after_direct_write(extent, matches!(self.path, Path::Direct { .. }))?;
        Ok(extent)
    }

    /// `finish` for an SST that outgrew its reservation: copies what was written into a new
    /// extent of the image's size, finishes the SST there, and releases the reservation (when
    /// `self` drops).
    fn relocate(mut self, image: &SstImage) -> Result<Extent> {
        self.wait_durable()?;
        log::debug!(
            "an SST of {} bytes outgrew its reservation of {}: relocated",
            image.len(),
            self.capacity
        );
        self.pool.count_relocation();
        let tier = self.reserved.expect("a writer relocates before it finishes").tier;
        let mut to = self.pool.sst_writer_exact(tier, image.len())?;
        let mut q = self.pool.take()?;
        let mut at = 0;
        while at < self.written {
            let len = (self.written - at).min(WRITE_BYTES_MAX as u64) as usize;
            let bytes = q.read_at(self.start + at, len)?;
            to.write(at, &bytes)?;
            at += len as u64;
        }
        to.finish(image)
    }

    /// Waits for every request in flight, then makes the written bytes durable.
    fn wait_durable(&mut self) -> Result<()> {
        match &mut self.path {
            Path::Buffered { w, .. } => {
                let (start, written) = (Tier::split(self.start).1, self.written);
                Ok(at_own_io_priority(|| w.sync_range(start, written))?)
            }
            Path::Direct { q, failed } => {
                while q.in_flight() > 0 {
                    reap(q, q.in_flight(), failed)?;
                }
                match failed.take() {
                    Some(e) => Err(e),
                    None => Ok(at_own_io_priority(|| q.flush())?),
                }
            }
        }
    }
}

impl Drop for SstWriter {
    /// Releases the reservation of a writer not finished, after reaping every request in
    /// flight: none may land in slots given back.
    fn drop(&mut self) {
        let Some(extent) = self.reserved.take() else { return };
        if let Path::Direct { q, failed } = &mut self.path {
            while q.in_flight() > 0 {
                if let Err(e) = reap(q, q.in_flight(), failed) {
                    // A broken ring reaps nothing more, and its requests may still land:
                    // keep the slots out of reach rather than hand them out again.
                    log::error!("cannot reap the writes of an abandoned SST ({extent:?}): {}", shale_io::Chain(&e));
                    return;
                }
            }
        }
        self.pool.volume().release(extent);
    }
}

/// Reaps at least `min` completions, keeping the first failed request's error in `failed`.
///
/// # Errors
/// The queue's own failure (a broken ring: its requests are lost to us).
fn reap(q: &mut VolumeQueue, min: usize, failed: &mut Option<Error>) -> Result<()> {
    let mut done = Vec::with_capacity(min);
    q.reap(min, &mut done)?;
    for Completion { result, .. } in done {
        if let Err(e) = result {
            failed.get_or_insert(e.into());
        }
    }
    Ok(())
}
