//! The record log: segments (one slot each) written from their first page on in the shared
//! log page format, packed a batch at a time, and scanned back at recovery.
//!
//! A batch packs the records of many stores and deletes into consecutive fresh pages and is
//! written with one durable write. Its last page is never written again, even if it has room:
//! it holds acknowledged records, which a torn rewrite would destroy. So the next batch starts
//! on the next page, and a lone small store costs a page, while a full queue shares pages.
//!
//! Under a steady stream of writes the worker instead *carries* a batch's last, partial page
//! into the next batch ([`Batch::finish_carrying`], [`Batch::resume`]): the batch writes only
//! its full pages, and the records that end in the carried page are acknowledged with the next
//! batch, which fills the page before writing it once. Otherwise every batch would end in
//! padding, about half a page each (2% more device writes at 27 records of 4 KiB a batch). A
//! crash between the two writes leaves the head of a record whose tail was never written,
//! never acknowledged, at the end of the segment's valid pages; recovery drops it
//! ([`scan_segment`]), even once a later segment has sealed the segment there.

use shale_space::log_page::{PAGE_BYTES, PageBuf};
use shale_space::page_log::{self, PageCursor, ScanError};
use shale_space::{Edit, Extent};

use crate::error::{Error, Result};
use crate::index::{Location, SEGMENTS_MAX};
use crate::meta::{self, SegmentMeta};
use crate::shard::Shard;

/// A segment of the log, as the store holds it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Segment {
    pub generation: u64,
    pub extent: Extent,
    /// Address of its first byte.
    pub start: u64,
    /// Pages it holds, once sealed: every page below is durable.
    pub sealed_pages: Option<u32>,
}

impl Segment {
    /// Address of page `index`.
    pub fn page_address(&self, index: u32) -> u64 {
        self.start + u64::from(index) * PAGE_BYTES as u64
    }
}

/// The segment being appended to.
#[derive(Debug)]
struct Active {
    slot: u32,
    /// The page the next batch starts on, and the checksum of the page before it: past every
    /// batch submitted, written or not.
    next_page: u32,
    pages: u32,
    prev_crc: u32,
    /// Pages below this are durable: every batch that wrote them is written. Below
    /// `next_page` while batches are in flight.
    durable_page: u32,
}

/// The log's write position; owned by the worker.
#[derive(Debug)]
pub(crate) struct LogWriter {
    active: Option<Active>,
    /// The newest segment and the pages its log holds (appended, or found by recovery): the
    /// next segment seals it there.
    last_end: Option<(u64, u32)>,
    pub next_seq: u64,
    next_generation: u64,
}

/// Records packed for one durable write.
#[derive(Debug)]
pub(crate) struct Batch {
    /// Where the write goes.
    pub address: u64,
    /// The page images.
    pub image: Vec<u8>,
    /// Each record's location, in the order added.
    pub locations: Vec<Location>,
    slot: u32,
    /// The batch's first page.
    #[cfg_attr(not(test), allow(dead_code))]
    first: u32,
    /// Pages below this one were durable when the batch was built, which each page it seals
    /// says (rule 2 of `page_log::scan`): the batch's first page, or, behind batches still
    /// in flight, the first page of the oldest. A crash that loses an earlier batch in flight
    /// and keeps this one leaves a hole at or past it, which ends the log there: nothing after
    /// the hole was acknowledged (batches are acknowledged in order).
    synced: u32,
    cursor: PageCursor,
    /// The segment's page count: no page at or past it.
    limit: u32,
}

impl Batch {
    /// Pages the batch holds with its partial page.
    #[cfg(test)]
    pub fn pages(&self) -> u32 {
        self.cursor.index() - self.first + u32::from(!self.cursor.is_empty())
    }

    /// Whether a record of `len` bytes fits in the segment's pages.
    pub fn fits(&self, len: usize) -> bool {
        self.cursor.packed_end([len], self.limit).is_some()
    }

    /// Packs one encoded record; returns its index in [`Batch::locations`].
    ///
    /// # Panics
    /// If it does not fit ([`Batch::fits`]).
    pub fn add(&mut self, rec: &[u8]) -> usize {
        assert!(self.fits(rec.len()), "record does not fit the segment");
        let image = &mut self.image;
        let at = self.cursor.add(rec, self.synced, |page| image.extend_from_slice(page));
        self.locations.push(Location {
            segment: self.slot,
            page: at.page,
            offset: at.offset,
            pages: at.pages,
        });
        self.locations.len() - 1
    }

    /// Seals the last page; the image is then whole.
    pub fn finish(&mut self) {
        let image = &mut self.image;
        self.cursor.close(self.synced, |page| image.extend_from_slice(page));
    }

    /// Ends the batch at its last full page and hands back the partial page after it, with
    /// nothing written of it, for [`Batch::resume`] to go on filling in the next batch. Only
    /// where the batch has a full page to write and a partial one to carry; otherwise this is
    /// [`Batch::finish`] and gives `None`.
    pub fn finish_carrying(&mut self) -> Option<PageBuf> {
        if self.image.is_empty() || self.cursor.is_empty() {
            self.finish();
            return None;
        }
        Some(self.cursor.take_partial())
    }

    /// Index of the page after the batch's written pages: with [`Batch::finish_carrying`]'s
    /// page, that page's.
    pub fn end_page(&self) -> u32 {
        self.cursor.index()
    }

    /// Starts this fresh batch with the page an earlier one carried (its records located in
    /// `locations`, which this batch's locations begin with).
    ///
    /// # Panics
    /// If the batch holds anything already.
    pub fn resume(&mut self, page: PageBuf, locations: Vec<Location>) {
        assert!(self.image.is_empty() && self.locations.is_empty());
        self.cursor.resume(page);
        self.locations = locations;
    }
}

impl LogWriter {
    /// A writer after recovery: new records go to a new segment of the next generation,
    /// sealing the newest one at `last_end`.
    pub fn new(next_seq: u64, next_generation: u64, last_end: Option<(u64, u32)>) -> LogWriter {
        LogWriter { active: None, last_end, next_seq, next_generation }
    }

    /// A batch starting on the active segment's next page, or `None` when the segment has no
    /// page left (or none is active): start one with [`LogWriter::start_segment`].
    pub fn batch(&self, shard: &Shard) -> Option<Batch> {
        let a = self.active.as_ref().filter(|a| a.next_page < a.pages)?;
        let seg = shard.segment(a.slot);
        Some(Batch {
            address: seg.page_address(a.next_page),
            image: Vec::new(),
            locations: Vec::new(),
            slot: a.slot,
            first: a.next_page,
            synced: a.durable_page,
            cursor: PageCursor::new(seg.generation, a.next_page, a.prev_crc),
            limit: a.pages,
        })
    }

    /// Takes note that `batch` is being written: the next batch starts after it (on the page
    /// it carries, if it carries one).
    pub fn submitted(&mut self, batch: &Batch) {
        let a = self.active.as_mut().expect("a batch is written into the active segment");
        a.next_page = batch.cursor.index();
        a.prev_crc = batch.cursor.prev_crc();
    }

    /// Takes note that `batch` was written, every batch before it too (batches are written
    /// in order: [`LogWriter::submitted`] first, then this, in the same order).
    pub fn written(&mut self, batch: &Batch) {
        let a = self.active.as_mut().expect("a batch is written into the active segment");
        a.durable_page = batch.cursor.index();
        self.last_end = self.last_end.map(|(g, _)| (g, batch.cursor.index()));
    }

    /// Whether every batch submitted is written.
    pub fn all_written(&self) -> bool {
        self.active.as_ref().is_none_or(|a| a.durable_page == a.next_page)
    }

    /// Allocates a segment and commits it to the version log before anything is written in
    /// it: recovery then knows its generation, and finds its pages or, where nothing landed,
    /// pages of another generation (an earlier user of the slot) or zeros, which end its log.
    /// The commit seals the previous segment at the pages its log holds.
    pub fn start_segment(&mut self, shard: &Shard) -> Result<()> {
        // Its seal is the log's durable end: no batch may be in flight.
        assert!(self.all_written(), "a segment is started only when every batch is written");
        let volume = shard.volume();
        let slot = shard.free_slot();
        if slot >= SEGMENTS_MAX {
            return Err(Error::Space(shale_space::Error::NoSpace(
                "the index cannot name more segments".into(),
            )));
        }
        let extent = volume.allocate(1)?;
        let generation = self.next_generation;
        let sealed = self.last_end;
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
            let mut metas: Vec<SegmentMeta> = shard
                .segments()
                .iter()
                .map(|(_, s)| SegmentMeta {
                    generation: s.generation,
                    extent: s.extent,
                    sealed_pages: sealed_pages(s),
                })
                .collect();
            metas.push(SegmentMeta { generation, extent, sealed_pages: None });
            meta::encode_base(
                &metas,
                *shard.checkpoint.lock(),
                *shard.membership.lock(),
                *shard.bounded.lock(),
            )
        };
        if let Err(e) = volume.commit(&edit, &mut full) {
            volume.release(extent);
            return Err(e.into());
        }
        self.next_generation += 1;
        // The commit sealed the segment before: every write to it is complete (a segment is
        // started only when no batch is in flight), so its pages can be read back as they
        // are.
        if let Some(prev) = &self.active {
            shard.warm_pages(prev.slot, prev.next_page);
        }
        let start = volume.extent_range(extent).start;
        shard.add_segment(slot, Segment { generation, extent, start, sealed_pages: None }, sealed);
        let pages = (volume.layout().slot_bytes / PAGE_BYTES as u64) as u32;
        self.active = Some(Active { slot, next_page: 0, pages, prev_crc: 0, durable_page: 0 });
        self.last_end = Some((generation, 0));
        Ok(())
    }
}

impl LogWriter {
    /// The table slot of the segment being appended to.
    pub fn active_slot(&self) -> Option<u32> {
        self.active.as_ref().map(|a| a.slot)
    }

    /// Removes a collected segment: commits its removal (which frees its slots once durable)
    /// and drops it from the table. Every record it held that is still needed was copied,
    /// durably, before this is called.
    pub fn remove_segment(&mut self, shard: &Shard, slot: u32) -> Result<()> {
        let seg = shard.segment(slot);
        assert_ne!(self.active_slot(), Some(slot), "the active segment is never collected");
        let edit = Edit {
            removed: vec![seg.extent],
            engine: meta::encode_removed(seg.generation),
            ..Edit::default()
        };
        let mut full = || {
            let metas: Vec<SegmentMeta> = shard
                .segments()
                .iter()
                .filter(|(s, _)| *s != slot)
                .map(|(_, s)| SegmentMeta {
                    generation: s.generation,
                    extent: s.extent,
                    sealed_pages: s.sealed_pages,
                })
                .collect();
            meta::encode_base(
                &metas,
                *shard.checkpoint.lock(),
                *shard.membership.lock(),
                *shard.bounded.lock(),
            )
        };
        // Its cached pages go as a deleted file's would (in the background: a stale page
        // left meanwhile fails its generation check, so reuse need not wait for this).
        shard.forget_pages(slot);
        shard.volume().commit(&edit, &mut full)?;
        shard.remove_segment(slot);
        Ok(())
    }

    /// A fresh generation, for a checkpoint (segments and checkpoints share one count, so
    /// no two ever colour pages alike).
    pub fn take_generation(&mut self) -> u64 {
        self.next_generation += 1;
        self.next_generation - 1
    }

    /// Pages of each segment's log written so far: its seal, or for the newest what it
    /// holds.
    pub fn written_pages(&self, seg: &Segment) -> u32 {
        match (seg.sealed_pages, self.last_end) {
            (Some(pages), _) => pages,
            (None, Some((g, pages))) if g == seg.generation => pages,
            // A segment neither sealed nor the newest does not exist: each new segment seals
            // the one before it.
            _ => 0,
        }
    }

    /// The largest sequence number given out.
    pub fn max_seq(&self) -> u64 {
        self.next_seq - 1
    }
}

/// An encoded record read back from the log, and where it lies.
pub(crate) type Located = (Location, Vec<u8>);

/// The complete records of one segment's image, with their locations, in log order, read by
/// the page log's recovery scan (`shale_space::page_log::scan`: its torn-tail and hole
/// rules). Returns the records and the number of valid pages.
///
/// A record begun in the last valid pages and never finished is not damage, even in a sealed
/// segment: its tail was carried into a batch that a crash kept from the device, and it was
/// never acknowledged (module comment). Its pages were each valid.
pub(crate) fn scan_segment(image: &[u8], seg: &Segment, slot: u32) -> Result<(Vec<Located>, u32)> {
    let mut out = Vec::new();
    let end = page_log::scan::scan(&mut &image[..], seg.generation, seg.sealed_pages, |r| {
        out.push(located(slot, r));
        std::ops::ControlFlow::Continue(())
    })
    .map_err(|e| scan_error(seg, e))?;
    Ok((out, end.pages))
}

/// A scanned record of the segment in table slot `slot`, with its location.
pub(crate) fn located(slot: u32, r: page_log::scan::Scanned) -> Located {
    (Location { segment: slot, page: r.page, offset: r.offset, pages: r.pages }, r.bytes)
}

/// The error of a failed scan of `seg`'s image (damage, as a [`Error::Corruption`]).
pub(crate) fn scan_error(seg: &Segment, e: ScanError<std::convert::Infallible>) -> Error {
    match e {
        ScanError::Source(never) => match never {},
        ScanError::OutOfOrder { page, kind } => Error::Corruption {
            what: format!(
                "record log segment {} page {page}: fragment {kind:?} out of order",
                seg.generation
            ),
            offset: seg.page_address(page),
        },
        ScanError::DurableInvalid { page, why } => Error::Corruption {
            what: format!(
                "record log segment {} page {page} was durable but is invalid ({why})",
                seg.generation
            ),
            offset: seg.page_address(page),
        },
    }
}

/// The encoded record at `loc` from `image`, the pages the location names read from
/// `seg`: every page's checksum, generation and index checked, fragments reassembled.
///
/// # Errors
/// A description of what is wrong (the caller makes it a Corruption error).
pub(crate) fn record_at(
    image: &[u8],
    seg: &Segment,
    loc: Location,
) -> std::result::Result<Vec<u8>, String> {
    page_log::record_at(image, seg.generation, loc.page, loc.offset, loc.pages)
}

/// Bytes to read from the first page of the record at `loc` for its first `want` bytes (its
/// header and key, say): the pages those bytes touch, never more than the record spans.
pub(crate) fn head_len(loc: Location, want: usize) -> usize {
    let pages = page_log::head_pages(loc.offset, want).min(u32::from(loc.pages));
    pages as usize * PAGE_BYTES
}

/// Pages a record of `len` bytes spans when it starts on a fresh page.
#[cfg(test)]
fn pages_for(len: usize) -> u32 {
    use shale_space::log_page::{FRAGMENT_HEADER_BYTES, PAGE_PAYLOAD_BYTES};
    let per_page = PAGE_PAYLOAD_BYTES - FRAGMENT_HEADER_BYTES;
    len.div_ceil(per_page).max(1) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RECORD_BYTES_MAX;
    use shale_space::log_page::{FRAGMENT_HEADER_BYTES, PAGE_PAYLOAD_BYTES};

    fn batch(room_pages: u32) -> Batch {
        Batch {
            address: 0,
            image: Vec::new(),
            locations: Vec::new(),
            slot: 0,
            first: 0,
            synced: 0,
            cursor: PageCursor::new(9, 0, 0),
            limit: room_pages,
        }
    }

    #[test]
    fn pages_for_matches_the_page_payload() {
        let per = PAGE_PAYLOAD_BYTES - FRAGMENT_HEADER_BYTES;
        assert_eq!(pages_for(1), 1);
        assert_eq!(pages_for(per), 1);
        assert_eq!(pages_for(per + 1), 2);
        assert!(pages_for(RECORD_BYTES_MAX) < 1024);
        let min = crate::SEGMENT_BYTES_FULL_VALUES;
        assert!((u64::from(pages_for(RECORD_BYTES_MAX)) * PAGE_BYTES as u64) < min);
    }

    #[test]
    fn a_batch_shares_pages_and_every_record_reads_back_from_its_location() {
        let mut b = batch(64);
        let recs: Vec<Vec<u8>> =
            [10usize, 100, 5000, 4065, 1, 9000, 3].iter().map(|&n| vec![n as u8; n]).collect();
        for r in &recs {
            assert!(b.fits(r.len()));
            b.add(r);
        }
        b.finish();
        assert_eq!(b.image.len() / PAGE_BYTES, b.pages() as usize);
        assert!(b.pages() < 7, "small records share pages: {} pages", b.pages());
        let seg =
            Segment { generation: 9, extent: Extent::fast(0, 1), start: 0, sealed_pages: None };
        for (r, loc) in recs.iter().zip(&b.locations) {
            let from = loc.page as usize * PAGE_BYTES;
            let got = record_at(&b.image[from..], &seg, *loc).unwrap();
            assert_eq!(&got, r, "{loc:?}");
        }
        let (scanned, end) = scan_segment(&b.image, &seg, 0).unwrap();
        assert_eq!(end, b.pages());
        assert_eq!(scanned.iter().map(|(l, _)| *l).collect::<Vec<_>>(), b.locations);
    }

    #[test]
    fn fits_stops_at_the_segments_end() {
        let mut b = batch(2);
        assert!(b.fits(8000));
        assert!(!b.fits(8200));
        b.add(&[1; 4000]);
        assert!(b.fits(4000));
        assert!(!b.fits(4200));
    }
}
