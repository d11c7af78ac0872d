//! A flush or compaction output: one SST built from entries in order and streamed to the volume
//! while it grows, so that an output holds about one write request of its SST in memory, not
//! the whole SST (`sst::writer`).
//!
//! Stages, in order:
//! 1. `Inner::new_output`: the SST's id is taken at once, so that each data block can go to
//!    the block cache under it as the builder cuts it (`prepopulate_block_cache`).
//! 2. `OutputSst::add`: an entry goes into the builder; once the builder holds a whole write
//!    request of finished blocks, an extent is reserved for the most the SST should reach
//!    (given at creation: the memtable's bytes for a flush, the cut size for a compaction) and
//!    the request is written there. On a fragmented device that cannot grow, the reservation
//!    is the longest free run, and the caller cuts the output before the entry that would
//!    pass it (`OutputSst::is_full_after`): a flush or compaction then writes more, smaller
//!    SSTs instead of stopping the store. Bytes that would pass the reservation all the same
//!    (the versions of one key stay in one SST) stay in memory, as does the whole SST when
//!    the volume has no free slot.
//! 3. `Inner::write_output`: the builder finishes; the meta blocks go to the cache when it holds
//!    them; the rest of the image is written and the SST made durable (relocated if it
//!    outgrew its reservation), the unused reserved slots given back; the reader is opened
//!    from the image's tail. The caller commits it.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::error::{Error, Result};
use crate::key;
use crate::range_del::RangeTombstone;
use crate::sst::volume_io::WRITE_BYTES_MAX;
use crate::sst::{
    QueuePool, SstBuilder, SstReader, SstWriter, VolumeSource, data_block_sink,
    prepopulate_meta_blocks,
};
use crate::version_edit::SstMeta;
use shale_space::{AREA_ALIGN, Tier};

use super::Inner;

/// An SST being built and streamed, with the range of sequence numbers added to it.
pub(super) struct OutputSst {
    pub(super) builder: SstBuilder,
    smallest_seq: u64,
    largest_seq: u64,
    id: u64,
    /// The tier the SST goes to (`Inner::tier_for`); the capacity tier instead when the fast
    /// one has no room (`QueuePool::sst_writer`).
    tier: Tier,
    pool: Arc<QueuePool>,
    /// Bytes to reserve for the SST at its first write request.
    reserve_bytes: u64,
    /// Bytes of a write request: a quarter slot (256 KiB with the default 1 MiB slots), at
    /// most [`WRITE_BYTES_MAX`]. Tied to the slot so that the SSTs of small volumes stream
    /// too: the crash enumeration's SSTs of a few 64 KiB slots cross every stage.
    request_bytes: usize,
    writer: Option<SstWriter>,
    /// False once no extent could be reserved: the SST is then built in memory and written
    /// whole at the end, in exactly its slots, as before streaming.
    streaming: bool,
}

impl OutputSst {
    /// Adds an entry (in ascending internal key order), and writes out a request's worth of
    /// finished blocks when the builder holds one.
    ///
    /// # Errors
    /// No room for the reservation; the device's errors.
    pub(super) fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        let seq = key::trailer_of(ikey) >> 8;
        self.smallest_seq = self.smallest_seq.min(seq);
        self.largest_seq = self.largest_seq.max(seq);
        self.builder.add(ikey, value);
        self.stream()
    }

    /// Whether the output is to be cut before an entry after which its image would take
    /// `after_bytes` ([`SstBuilder::bytes_after_adding`]): past its reservation, which is
    /// shorter than asked for on a fragmented device (`QueuePool::sst_writer`). Cut there,
    /// the output needs no relocation, which a device without a free run that long could
    /// not give it.
    pub(super) fn is_full_after(&self, after_bytes: usize) -> bool {
        self.builder.entries() > 0
            && self.writer.as_ref().is_some_and(|w| !w.fits(after_bytes as u64))
    }

    /// Adds the pieces of `tombstones` inside the output's user-key range `[lower, upper)`
    /// (`None`: unbounded).
    pub(super) fn add_clipped(
        &mut self,
        tombstones: &[RangeTombstone],
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) {
        for t in tombstones {
            if let Some(piece) = t.clipped(lower, upper) {
                self.add_range_tombstone(piece);
            }
        }
    }

    pub(super) fn add_range_tombstone(&mut self, t: RangeTombstone) {
        self.smallest_seq = self.smallest_seq.min(t.seq);
        self.largest_seq = self.largest_seq.max(t.seq);
        self.builder.add_range_tombstone(t);
    }

    fn stream(&mut self) -> Result<()> {
        if !self.streaming || self.builder.held_bytes() < self.request_bytes {
            return Ok(());
        }
        let writer = match &mut self.writer {
            Some(w) => w,
            None => match self.pool.sst_writer(self.tier, self.reserve_bytes) {
                Ok(w) => self.writer.insert(w),
                // A nearly full volume may lack a run as long as the reservation and still
                // hold the SST itself.
                Err(Error::NoSpace(why)) => {
                    log::debug!("an SST is built in memory: no room to reserve ({why})");
                    self.streaming = false;
                    return Ok(());
                }
                Err(e) => return Err(e),
            },
        };
        // Past the reservation the bytes stay here, and the writer relocates the SST at the
        // end: rare (a key with many versions kept for snapshots), and never lost.
        if !writer.fits(self.builder.written_bytes()) {
            return Ok(());
        }
        let request = self.request_bytes;
        if let Some((at, bytes)) = self.builder.take_written(request, request) {
            writer.write(at, &bytes)?;
        }
        Ok(())
    }
}

/// What writes an output SST; decides whether its blocks are cached as they are cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum MadeBy {
    Flush,
    Compaction,
}

impl Inner {
    /// A new output for an SST of level `level` of at most about `reserve_bytes` (more is
    /// written all the same, at the cost of a relocation), made by a flush or a compaction.
    pub(super) fn new_output(&self, level: usize, reserve_bytes: u64, by: MadeBy) -> OutputSst {
        let id = self.next_sst_id.fetch_add(1, Ordering::Relaxed);
        let mut builder = SstBuilder::new(&self.opts.sst);
        if self.opts.prepopulate_block_cache {
            if let Some(sink) = data_block_sink(self.cache.clone(), id, self.prepopulate_evicts(by))
            {
                builder.set_block_sink(sink);
            }
        }
        OutputSst {
            builder,
            smallest_seq: u64::MAX,
            largest_seq: 0,
            id,
            tier: self.tier_for(level, reserve_bytes),
            pool: self.pool.clone(),
            reserve_bytes,
            request_bytes: (self.volume.layout().slot_bytes as usize / 4)
                .clamp(AREA_ALIGN as usize, WRITE_BYTES_MAX),
            writer: None,
            streaming: true,
        }
    }

    /// Whether an output's data blocks may push others out of the block cache as they are
    /// cut (`Options::prepopulate_block_cache`; otherwise they only fill free room). A
    /// flush's may: its keys were written a moment ago, the ones most likely read next. A
    /// compaction's may only where no page cache will hold the new SST for the reads that
    /// miss the block cache (SSTs written or read with O_DIRECT). Through the page cache, a
    /// compaction's output is there already, and caching all of it pushed out the blocks
    /// readers use: 5.6 GB of compaction output through a 32 MiB cache in a YCSB A run swept
    /// it every few milliseconds, and A ran about 5% slower than with no compaction output
    /// cached (docs/lsm.md, "The block cache and new SSTs"). Free room is still filled: a
    /// cache larger than the data then holds the new SSTs whole, as it did.
    fn prepopulate_evicts(&self, by: MadeBy) -> bool {
        match by {
            MadeBy::Flush => true,
            MadeBy::Compaction => !(self.pool.reads_buffered() && self.pool.writes_buffered()),
        }
    }

    /// Gives back the outputs of a flush or compaction that will not be committed: the one
    /// being built (its reservation goes when its writer drops) and those written already
    /// (`written`, with their `opened` readers): their cached blocks, pages and slots.
    pub(super) fn abandon_outputs(
        &self,
        building: OutputSst,
        written: Vec<SstMeta>,
        opened: Vec<SstReader>,
    ) {
        self.cache.forget(building.id);
        drop(building);
        self.abandon_written(written, opened);
    }

    /// Gives back outputs written and not to be committed (`written`, with their `opened`
    /// readers): their cached blocks, pages and slots.
    pub(super) fn abandon_written(&self, written: Vec<SstMeta>, opened: Vec<SstReader>) {
        drop(opened);
        for meta in written {
            self.cache.forget(meta.id);
            self.pool.forget_pages(meta.extent);
            self.volume.release(meta.extent);
        }
    }

    /// Finishes an output and writes the rest of it durably (nothing for an empty one), and
    /// opens its reader from the image's tail, before the state lock is taken to commit it.
    pub(super) fn write_output(&self, out: OutputSst) -> Result<Vec<(SstMeta, SstReader)>> {
        if out.builder.is_empty() {
            return Ok(Vec::new());
        }
        let OutputSst { builder, smallest_seq, largest_seq, id, writer, tier, .. } = out;
        let image = builder.finish(self.volume.layout().slot_bytes);
        let place = self.index_and_filter_place();
        let extent = if self.opts.prepopulate_block_cache {
            prepopulate_meta_blocks(&self.cache, id, &image, place)
        } else {
            Ok(())
        }
        .and_then(|()| match writer {
            Some(w) => w.finish(&image),
            None => self.pool.write_sst(tier, &image),
        })
        .inspect_err(|_| self.cache.forget(id))?;
        let source = Arc::new(VolumeSource::new(self.pool.clone(), extent));
        let reader = SstReader::open_image(source, self.cache.clone(), id, place, &image)
            .inspect_err(|_| {
                self.cache.forget(id);
                self.volume.release(extent);
            })?;
        let p = &image.properties;
        let meta = SstMeta {
            id,
            extent,
            bytes: image.len(),
            entries: p.entries,
            smallest_seq,
            largest_seq,
            smallest: image.smallest.clone(),
            largest: image.largest.clone(),
        };
        Ok(vec![(meta, reader)])
    }
}
