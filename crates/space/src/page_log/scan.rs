//! The recovery scan: the records of one segment of a page log (the lsm WAL's log group, the
//! hash engine's record log segment or checkpoint), read back in order with the rules that
//! tell a torn tail from damage.
//!
//! 1. Read pages 0, 1, ... while they carry the segment's generation and their own index
//!    ("colouring": a page of another generation, or zeros, ends the log) and name the
//!    checksum of the page before them. A valid page that does not follow its predecessor
//!    means the predecessor is a stale version of itself (a rewrite of a partial page that a
//!    crash lost while it kept the later page): the log ends there.
//! 2. The first invalid page is the end of the log unless the log says it was durable: below
//!    the segment's sealed end (recorded elsewhere by the engine, when it sealed the segment),
//!    or below the largest `synced_through` any later valid page of the generation claims at
//!    its own index. An invalid page there is damage, never a torn tail (promise P4).
//! 3. Fragments are joined into records; a fragment out of order is damage. A record cut off
//!    by the end of the log was never acknowledged and is not returned; [`ScanEnd::cut_record`]
//!    says there was one, for engines whose sealed segments must not end inside a record.

use std::ops::ControlFlow;

use crate::log_page::{
    self, FRAGMENT_HEADER_BYTES, FragmentType, PAGE_BYTES, PAGE_HEADER_BYTES, PAGE_PAYLOAD_BYTES,
};

/// The pages of a segment, as the scan reads them: a whole image in memory, or chunks read
/// from the device on demand.
pub trait Pages {
    /// The source's read error.
    type Error;
    /// Pages the segment has room for.
    fn count(&self) -> u32;
    /// Page `index` (below [`Pages::count`]), [`PAGE_BYTES`] long.
    ///
    /// # Errors
    /// The source's read error.
    fn page(&mut self, index: u32) -> Result<&[u8], Self::Error>;
}

/// A segment's image in memory, a whole number of pages.
impl Pages for &[u8] {
    type Error = std::convert::Infallible;

    fn count(&self) -> u32 {
        (self.len() / PAGE_BYTES) as u32
    }

    fn page(&mut self, index: u32) -> Result<&[u8], Self::Error> {
        let at = index as usize * PAGE_BYTES;
        Ok(&self[at..at + PAGE_BYTES])
    }
}

/// A record read back, and where it lies: its first fragment's page and byte offset in that
/// page, and the pages it spans.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scanned {
    /// Page of its first fragment.
    pub page: u32,
    /// Byte offset of its first fragment's header in that page.
    pub offset: u16,
    /// Pages it spans (1 for a record within one page).
    pub pages: u16,
    /// The record.
    pub bytes: Vec<u8>,
}

/// Where a segment's log ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanEnd {
    /// Pages read as valid (the next append would go to this page); a stale version of a page
    /// counts, as its records are a prefix of the page's newer version.
    pub pages: u32,
    /// Whether a record was begun in the last valid pages and never finished.
    pub cut_record: bool,
}

/// Why a segment cannot be read back.
#[derive(Debug, PartialEq, Eq)]
pub enum ScanError<E> {
    /// The page source failed.
    Source(E),
    /// A fragment cannot follow what came before it.
    OutOfOrder {
        /// The page holding it.
        page: u32,
        /// Its type.
        kind: FragmentType,
    },
    /// A page the log says was durable is invalid.
    DurableInvalid {
        /// The invalid page.
        page: u32,
        /// Why it is invalid.
        why: String,
    },
}

/// Scans the segment of `generation` in `pages`, handing each complete record to `record` in
/// log order (until it says [`ControlFlow::Break`]: a log whose own end record says it is
/// complete, such as a checkpoint); `sealed_end` is the page count the engine recorded when
/// it sealed the segment (every page below it durable), `None` while the segment was being
/// appended to.
///
/// # Errors
/// [`ScanError`]: the source's, or damage (module comment, rules 2 and 3).
pub fn scan<P: Pages>(
    pages: &mut P,
    generation: u64,
    sealed_end: Option<u32>,
    mut record: impl FnMut(Scanned) -> ControlFlow<()>,
) -> Result<ScanEnd, ScanError<P::Error>> {
    let mut scanner = Scanner::new(generation, sealed_end);
    loop {
        if let Some(end) = scanner.step(pages, u32::MAX, &mut record)? {
            return Ok(end);
        }
    }
}

/// [`scan`] a slice at a time: [`Scanner::step`] reads at most so many pages and returns, to
/// be called again until it gives the log's end. For a thread with other work between
/// slices (the hash engine's worker scans a collection's victim a slice a turn, answering
/// its callers in between). The same rules, the same records, in the same order.
pub struct Scanner {
    generation: u64,
    sealed_end: Option<u32>,
    fragments: log_page::Reassembler,
    /// Page and offset of the record being reassembled.
    start: Option<(u32, u16)>,
    /// The checksum the next page must name.
    prev_crc: u32,
    /// The next page to read.
    index: u32,
    /// The log's end, once found.
    end: Option<ScanEnd>,
}

impl Scanner {
    /// A scan of the segment of `generation`, from its first page (`sealed_end` as for
    /// [`scan`]).
    pub fn new(generation: u64, sealed_end: Option<u32>) -> Scanner {
        Scanner {
            generation,
            sealed_end,
            fragments: log_page::Reassembler::new(),
            start: None,
            prev_crc: 0,
            index: 0,
            end: None,
        }
    }

    /// Pages read so far.
    pub fn pages_read(&self) -> u32 {
        self.index
    }

    /// Reads up to `max_pages` more pages of `pages` (at least one), handing each complete
    /// record to `record`; `Some` with the log's end once it is found (and from then on).
    ///
    /// # Errors
    /// As [`scan`]'s; a scanner that failed must not be stepped again.
    pub fn step<P: Pages>(
        &mut self,
        pages: &mut P,
        max_pages: u32,
        mut record: impl FnMut(Scanned) -> ControlFlow<()>,
    ) -> Result<Option<ScanEnd>, ScanError<P::Error>> {
        if let Some(end) = self.end {
            return Ok(Some(end));
        }
        let count = pages.count();
        let stop = self.index.saturating_add(max_pages.max(1)).min(count);
        while self.index < stop {
            let index = self.index;
            let invalid = {
                let bytes = pages.page(index).map_err(ScanError::Source)?;
                match log_page::decode(bytes, self.generation, index) {
                    Ok(page) if page.prev_crc == self.prev_crc => {
                        self.prev_crc = page.crc;
                        let mut at = PAGE_HEADER_BYTES;
                        for frag in page.fragments {
                            if matches!(frag.kind, FragmentType::Full | FragmentType::First) {
                                self.start = Some((index, at as u16));
                            }
                            at += FRAGMENT_HEADER_BYTES + frag.data.len();
                            let done = self
                                .fragments
                                .push(frag)
                                .map_err(|e| ScanError::OutOfOrder { page: index, kind: e.0 })?;
                            if let Some(bytes) = done {
                                let (page, offset) =
                                    self.start.take().expect("a record starts first");
                                let pages = (index - page + 1) as u16;
                                if record(Scanned { page, offset, pages, bytes }).is_break() {
                                    let end = ScanEnd { pages: index + 1, cut_record: false };
                                    self.end = Some(end);
                                    return Ok(Some(end));
                                }
                            }
                        }
                        None
                    }
                    // A first page names no predecessor: this one is forged or damaged.
                    Ok(_) if index == 0 => Some((0, "a first page that follows another".into())),
                    // Page index-1 is an older version of itself than the one this page
                    // follows.
                    Ok(_) => Some((index - 1, "stale version".to_string())),
                    Err(why) => Some((index, format!("{why:?}"))),
                }
            };
            if let Some((invalid, why)) = invalid {
                check_torn_tail(pages, self.generation, invalid, self.sealed_end, why)?;
                break;
            }
            self.index += 1;
        }
        if self.index < count && self.index == stop {
            return Ok(None);
        }
        let end = ScanEnd { pages: self.index, cut_record: self.fragments.in_record() };
        self.end = Some(end);
        Ok(Some(end))
    }
}

/// Called when page `invalid` ends the log: Ok if that can be the end of the log,
/// [`ScanError::DurableInvalid`] if the page was known durable.
fn check_torn_tail<P: Pages>(
    pages: &mut P,
    generation: u64,
    invalid: u32,
    sealed_end: Option<u32>,
    why: String,
) -> Result<(), ScanError<P::Error>> {
    let mut durable = sealed_end.unwrap_or(0);
    for later in invalid + 1..pages.count() {
        let bytes = pages.page(later).map_err(ScanError::Source)?;
        if let Some((page_generation, page_index, synced)) = log_page::claimed(bytes) {
            if page_generation == generation && page_index == later {
                durable = durable.max(synced);
            }
        }
    }
    if invalid < durable {
        return Err(ScanError::DurableInvalid { page: invalid, why });
    }
    Ok(())
}

/// The record that begins at byte `offset` of the first of `image`'s pages, the pages being
/// pages `first, first + 1, ...` of the segment of `generation` (an index's location of a
/// record, read back): every page's checksum, generation and index checked, fragments
/// reassembled.
///
/// # Errors
/// What is wrong, in words (the caller makes it its corruption error).
pub fn record_at(
    image: &[u8],
    generation: u64,
    first: u32,
    offset: u16,
    pages: u16,
) -> Result<Vec<u8>, String> {
    let (bytes, whole) =
        record_start(image, generation, first, offset, u32::from(pages), usize::MAX)?;
    debug_assert!(whole, "only a whole record reaches usize::MAX bytes");
    Ok(bytes)
}

/// The first bytes of the record that begins at byte `offset` of the first of `image`'s
/// pages, checked as [`record_at`] checks them: at least `want` bytes, or the whole record
/// where it is shorter. Only the pages that hold those bytes need be in `image`. For a look
/// at a record's start without its tail (whose key it is, to confirm an index's digest
/// entry), read from the first page or two instead of every page the record spans.
///
/// # Errors
/// As [`record_at`]'s; also when `image` ends before `want` bytes of the record.
pub fn record_head_at(
    image: &[u8],
    generation: u64,
    first: u32,
    offset: u16,
    want: usize,
) -> Result<Vec<u8>, String> {
    let pages = (image.len() / PAGE_BYTES) as u32;
    record_start(image, generation, first, offset, pages, want).map(|(bytes, _)| bytes)
}

/// Pages whose leading bytes a record's first `want` bytes need, the record beginning at
/// byte `offset` of its first page (a fragment's header there, and one at the top of each
/// page after it): what [`record_head_at`] must be given.
pub fn head_pages(offset: u16, want: usize) -> u32 {
    let room_first = PAGE_BYTES.saturating_sub(usize::from(offset) + FRAGMENT_HEADER_BYTES);
    if want <= room_first {
        return 1;
    }
    let per_page = PAGE_PAYLOAD_BYTES - FRAGMENT_HEADER_BYTES;
    1 + (want - room_first).div_ceil(per_page) as u32
}

/// The walk behind [`record_at`] and [`record_head_at`]: the record's bytes from the first
/// `pages` pages of `image`, until the record ends (`true`) or `want` bytes are had.
fn record_start(
    image: &[u8],
    generation: u64,
    first: u32,
    offset: u16,
    pages: u32,
    want: usize,
) -> Result<(Vec<u8>, bool), String> {
    let mut record: Option<Vec<u8>> = None;
    for i in 0..pages {
        let index = first + i;
        let bytes = image
            .get(i as usize * PAGE_BYTES..(i as usize + 1) * PAGE_BYTES)
            .ok_or("short read")?;
        let page = log_page::decode(bytes, generation, index)
            .map_err(|why| format!("page {index}: {why:?}"))?;
        let mut at = PAGE_HEADER_BYTES;
        for frag in page.fragments {
            let here = at;
            at += FRAGMENT_HEADER_BYTES + frag.data.len();
            if i == 0 && here < usize::from(offset) {
                continue;
            }
            let ends = match (frag.kind, record.as_mut()) {
                (FragmentType::Full | FragmentType::First, None)
                    if i == 0 && here == usize::from(offset) =>
                {
                    record = Some(frag.data.to_vec());
                    frag.kind == FragmentType::Full
                }
                (FragmentType::Full | FragmentType::First, None) if i == 0 => {
                    return Err(format!("no record starts at offset {offset}"));
                }
                (_, None) => return Err(format!("no record starts at offset {here}")),
                (FragmentType::Middle | FragmentType::Last, Some(r)) => {
                    r.extend_from_slice(frag.data);
                    frag.kind == FragmentType::Last
                }
                (kind, Some(_)) => return Err(format!("fragment {kind:?} out of order")),
            };
            if ends || record.as_ref().is_some_and(|r| r.len() >= want) {
                return Ok((record.expect("begun above"), ends));
            }
        }
    }
    Err("record runs past the pages the index names".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page_log::PageCursor;

    /// A segment of `pages` pages holding records of 3,000 bytes packed from page 0, each
    /// page sealed with `synced_through` = its own index (every earlier page durable).
    fn segment(records: usize, pages: u32) -> Vec<u8> {
        let mut image = Vec::new();
        let mut cursor = PageCursor::new(5, 0, 0);
        for i in 0..records {
            let synced = cursor.index();
            cursor.add(&[i as u8; 3000], synced, |p| image.extend_from_slice(p));
        }
        let synced = cursor.index();
        cursor.close(synced, |p| image.extend_from_slice(p));
        image.resize(pages as usize * PAGE_BYTES, 0);
        image
    }

    fn scan_image(
        image: &[u8],
        sealed: Option<u32>,
    ) -> Result<(Vec<u8>, ScanEnd), ScanError<std::convert::Infallible>> {
        let mut firsts = Vec::new();
        let end = scan(&mut &image[..], 5, sealed, |r| {
            firsts.push(r.bytes[0]);
            ControlFlow::Continue(())
        })?;
        Ok((firsts, end))
    }

    /// The records (with where they lie) and the end, scanned `slice` pages a step.
    fn scan_in_slices(
        image: &[u8],
        sealed: Option<u32>,
        slice: u32,
    ) -> (Vec<Scanned>, Result<ScanEnd, ScanError<std::convert::Infallible>>, u32) {
        let mut scanner = Scanner::new(5, sealed);
        let mut records = Vec::new();
        let mut steps = 0;
        loop {
            steps += 1;
            let before = scanner.pages_read();
            let step = scanner.step(&mut &image[..], slice, |r| {
                records.push(r);
                ControlFlow::Continue(())
            });
            assert!(scanner.pages_read() - before <= slice, "a step reads at most its slice");
            match step {
                Ok(None) => continue,
                Ok(Some(end)) => return (records, Ok(end), steps),
                Err(e) => return (records, Err(e), steps),
            }
        }
    }

    #[test]
    fn a_scan_in_slices_finds_what_one_scan_does() {
        // Whole records, a torn last page, damage below the sealed end: every slice size.
        let mut torn = segment(9, 16);
        torn[5 * PAGE_BYTES + 1000] ^= 1;
        let mut damaged = segment(9, 16);
        damaged[2 * PAGE_BYTES + 100] ^= 1;
        for (image, sealed) in [(segment(9, 16), None), (torn, None), (damaged, Some(7))] {
            let mut whole = Vec::new();
            let end = scan(&mut &image[..], 5, sealed, |r| {
                whole.push(r);
                ControlFlow::Continue(())
            });
            for slice in [1, 2, 3, 5, 16, 100] {
                let (records, sliced_end, steps) = scan_in_slices(&image, sealed, slice);
                assert_eq!(records, whole, "slice {slice}");
                assert_eq!(sliced_end, end, "slice {slice}");
                if end.is_ok() && slice == 1 {
                    assert!(steps > 1, "a one-page slice takes a step a page");
                }
            }
        }
    }

    #[test]
    fn zeros_after_the_last_page_end_the_log() {
        let image = segment(4, 8);
        let (firsts, end) = scan_image(&image, None).unwrap();
        assert_eq!(firsts, vec![0, 1, 2, 3]);
        assert_eq!(end, ScanEnd { pages: 3, cut_record: false });
    }

    #[test]
    fn a_torn_last_page_drops_the_record_it_cut() {
        let mut image = segment(4, 8);
        image[2 * PAGE_BYTES + 1000] ^= 1;
        let (firsts, end) = scan_image(&image, None).unwrap();
        assert_eq!(firsts, vec![0, 1]);
        assert_eq!(end, ScanEnd { pages: 2, cut_record: true });
    }

    #[test]
    fn an_invalid_page_below_a_later_pages_claim_or_the_sealed_end_is_damage() {
        let mut image = segment(6, 8);
        image[PAGE_BYTES + 100] ^= 1;
        // Page 4 claims pages [0, 4) durable.
        assert!(matches!(scan_image(&image, None), Err(ScanError::DurableInvalid { page: 1, .. })));
        let mut image = segment(4, 8);
        image[2 * PAGE_BYTES + 100] ^= 1;
        assert!(matches!(
            scan_image(&image, Some(3)),
            Err(ScanError::DurableInvalid { page: 2, .. })
        ));
        // The same page past the sealed end is a torn tail.
        assert!(scan_image(&image, Some(2)).is_ok());
    }

    /// Pages 0, 1 and 2 where page 1 was rewritten (a partial page filled further) and
    /// page 2 follows its newer version, sealed claiming pages [0, `synced`) durable; with
    /// page 1's older version in its place.
    fn rewritten(synced: u32) -> Vec<u8> {
        let mut image = Vec::new();
        let mut c = PageCursor::new(5, 0, 0);
        c.add(&[1; 3000], 0, |p| image.extend_from_slice(p));
        c.add(&[2; 2000], 0, |p| image.extend_from_slice(p));
        let older = c.seal_partial(1).0.to_vec();
        c.add(&[3; 10], 1, |p| image.extend_from_slice(p));
        c.add(&[4; 5000], synced, |p| image.extend_from_slice(p));
        c.close(synced, |p| image.extend_from_slice(p));
        assert_eq!(image.len(), 3 * PAGE_BYTES);
        image[PAGE_BYTES..2 * PAGE_BYTES].copy_from_slice(&older);
        image
    }

    #[test]
    fn a_stale_version_of_a_page_ends_the_log_after_it() {
        let (firsts, end) = scan_image(&rewritten(1), None).unwrap();
        assert_eq!(firsts, vec![1, 2]);
        assert_eq!(end, ScanEnd { pages: 2, cut_record: false });
        // The stale page was claimed durable by the page after it: damage.
        assert!(matches!(
            scan_image(&rewritten(2), None),
            Err(ScanError::DurableInvalid { page: 1, .. })
        ));
    }

    #[test]
    fn a_fragment_out_of_order_is_damage() {
        let mut page = crate::log_page::PageBuf::new();
        page.push(FragmentType::Last, b"no first");
        let image = page.seal(5, 0, 0, 0).0.to_vec();
        assert!(matches!(
            scan(&mut &image[..], 5, None, |_| ControlFlow::Continue(())),
            Err(ScanError::OutOfOrder { page: 0, kind: FragmentType::Last })
        ));
    }

    /// Records of many lengths packed from page 0 of generation 5, with where each landed.
    fn placed_records() -> (Vec<u8>, Vec<(Vec<u8>, crate::page_log::packer::Placed)>) {
        let mut image = Vec::new();
        let mut cursor = PageCursor::new(5, 0, 0);
        let mut placed = Vec::new();
        for (i, len) in [20, 300, 4000, 9000, 4090, 17, 5000, 3].into_iter().enumerate() {
            let rec: Vec<u8> = (0..len).map(|b| (b * 7 + i) as u8).collect();
            let synced = cursor.index();
            let at = cursor.add(&rec, synced, |p| image.extend_from_slice(p));
            placed.push((rec, at));
        }
        let synced = cursor.index();
        cursor.close(synced, |p| image.extend_from_slice(p));
        (image, placed)
    }

    #[test]
    fn record_at_and_its_head_read_back_every_record() {
        let (image, placed) = placed_records();
        for (rec, at) in &placed {
            let from = at.page as usize * PAGE_BYTES;
            let pages = &image[from..from + usize::from(at.pages) * PAGE_BYTES];
            assert_eq!(&record_at(pages, 5, at.page, at.offset, at.pages).unwrap(), rec);
            for want in [1, 14, 269, 5000] {
                // Only the pages the head needs.
                let n = (head_pages(at.offset, want) as usize).min(usize::from(at.pages));
                let head =
                    record_head_at(&pages[..n * PAGE_BYTES], 5, at.page, at.offset, want).unwrap();
                assert!(head.len() >= want.min(rec.len()), "{} bytes for {want}", head.len());
                assert_eq!(&head[..], &rec[..head.len()]);
            }
        }
    }

    #[test]
    fn a_head_cut_short_or_a_wrong_place_is_an_error() {
        let (image, placed) = placed_records();
        let (_, big) = placed.iter().find(|(r, _)| r.len() == 9000).unwrap();
        let from = big.page as usize * PAGE_BYTES;
        // One page holds fewer than 9,000 bytes of it.
        assert!(
            record_head_at(&image[from..from + PAGE_BYTES], 5, big.page, big.offset, 9000).is_err()
        );
        // Another generation's page, or an offset where no record starts.
        assert!(
            record_head_at(&image[from..from + PAGE_BYTES], 6, big.page, big.offset, 10).is_err()
        );
        assert!(
            record_head_at(&image[from..from + PAGE_BYTES], 5, big.page, big.offset + 1, 10)
                .is_err()
        );
        assert!(record_at(&image[from..], 5, big.page, big.offset + 1, big.pages).is_err());
    }

    #[test]
    fn head_pages_counts_the_pages_a_head_touches() {
        let top = PAGE_HEADER_BYTES as u16;
        assert_eq!(head_pages(top, 1), 1);
        assert_eq!(head_pages(top, PAGE_PAYLOAD_BYTES - FRAGMENT_HEADER_BYTES), 1);
        assert_eq!(head_pages(top, PAGE_PAYLOAD_BYTES - FRAGMENT_HEADER_BYTES + 1), 2);
        // A record that begins near a page's end: its header runs on to the next page.
        assert_eq!(head_pages((PAGE_BYTES - 10) as u16, 269), 2);
    }
}
