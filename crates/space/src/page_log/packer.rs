//! Packing records into log pages: the write side's cursor over a segment's pages.
//!
//! A record is one full fragment, or a first, middles and a last fragment on consecutive
//! pages (`log_page.rs`). Each fragment takes as much of the page's room as it can; a page
//! whose room falls to a fragment header or less is sealed (its header filled in, the
//! checksum of the page before it chained in) and the next page begins. So where a run of
//! records ends depends only on where it starts and on the records' lengths
//! ([`packed_end`]), which lets a writer know whether records fit before it packs them.
//!
//! What the cursor does not decide is when pages are written: the lsm WAL writes full pages
//! as runs and rewrites its partial last page until it holds synced data; the hash engine's
//! record log writes each batch's pages once, carrying a partial last page into the next
//! batch. Both hand the sealed pages' images on as the cursor produces them.

use crate::log_page::{
    FRAGMENT_HEADER_BYTES, FragmentType, PAGE_HEADER_BYTES, PAGE_PAYLOAD_BYTES, PageBuf,
};

/// Where a packed record lies: its first fragment's page and byte offset in that page, and
/// the pages it spans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placed {
    /// Page of its first fragment.
    pub page: u32,
    /// Byte offset of its first fragment's header in that page.
    pub offset: u16,
    /// Pages it spans.
    pub pages: u16,
}

/// The write position in one segment of a page log: the page being filled, its index and the
/// checksum of the page before it.
#[derive(Clone, Debug)]
pub struct PageCursor {
    generation: u64,
    index: u32,
    prev_crc: u32,
    page: PageBuf,
}

impl PageCursor {
    /// A cursor at page `index` of the segment of `generation`, whose page `index - 1` has
    /// checksum `prev_crc` (0 for page 0).
    pub fn new(generation: u64, index: u32, prev_crc: u32) -> PageCursor {
        PageCursor { generation, index, prev_crc, page: PageBuf::new() }
    }

    /// Index of the page being filled.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Checksum of the page before the one being filled.
    pub fn prev_crc(&self) -> u32 {
        self.prev_crc
    }

    /// Payload room left on the page being filled.
    pub fn room(&self) -> usize {
        self.page.room()
    }

    /// Whether the page being filled holds nothing yet.
    pub fn is_empty(&self) -> bool {
        self.page.is_empty()
    }

    /// Where records of lengths `lens` would end if packed from here: the page index and the
    /// room left on it, or `None` if they need a page at or past `limit`.
    pub fn packed_end(
        &self,
        lens: impl IntoIterator<Item = usize>,
        limit: u32,
    ) -> Option<(u32, usize)> {
        packed_end((self.index, self.page.room()), lens, limit)
    }

    /// Packs one record, sealing each page it fills (its pages before `synced_through`
    /// declared durable) and handing the sealed image to `full`; returns where it lies.
    pub fn add(&mut self, rec: &[u8], synced_through: u32, mut full: impl FnMut(&[u8])) -> Placed {
        let page = self.index;
        let offset = (PAGE_HEADER_BYTES + PAGE_PAYLOAD_BYTES - self.page.room()) as u16;
        let mut rest = rec;
        let mut first = true;
        loop {
            let n = rest.len().min(self.page.room() - FRAGMENT_HEADER_BYTES);
            let last = n == rest.len();
            self.page.push(FragmentType::at(first, last), &rest[..n]);
            rest = &rest[n..];
            first = false;
            let spans = (self.index - page + 1) as u16;
            if self.page.room() <= FRAGMENT_HEADER_BYTES {
                self.seal_and_advance(synced_through, &mut full);
            }
            if last {
                return Placed { page, offset, pages: spans };
            }
        }
    }

    /// Seals the page being filled, if it holds anything, hands its image to `full` and moves
    /// to the next page: for a writer that never writes a page twice.
    pub fn close(&mut self, synced_through: u32, mut full: impl FnMut(&[u8])) {
        if !self.page.is_empty() {
            self.seal_and_advance(synced_through, &mut full);
        }
    }

    /// Seals the page being filled as it is, without moving on (it may be filled further and
    /// sealed again: a writer that rewrites its partial page); returns its image and checksum.
    pub fn seal_partial(&mut self, synced_through: u32) -> (&[u8], u32) {
        self.page.seal(self.generation, self.index, synced_through, self.prev_crc)
    }

    /// Moves past the page being filled without sealing it again: it was written as sealed
    /// last (by [`PageCursor::seal_partial`], checksum `written_crc`) and is never rewritten
    /// (it holds synced data, which a torn rewrite would destroy); the next page follows
    /// that image.
    pub fn close_written(&mut self, written_crc: u32) {
        self.prev_crc = written_crc;
        self.index += 1;
        self.page = PageBuf::new();
    }

    /// Takes the page being filled, leaving an empty one: to carry it into a later batch
    /// ([`PageCursor::resume`]).
    pub fn take_partial(&mut self) -> PageBuf {
        std::mem::take(&mut self.page)
    }

    /// Goes on filling `page`, taken by [`PageCursor::take_partial`] from a cursor at this
    /// cursor's position.
    ///
    /// # Panics
    /// If this cursor's page holds anything already.
    pub fn resume(&mut self, page: PageBuf) {
        assert!(self.page.is_empty(), "a cursor resumes a carried page only when empty");
        self.page = page;
    }

    fn seal_and_advance(&mut self, synced_through: u32, full: &mut impl FnMut(&[u8])) {
        let (image, crc) =
            self.page.seal(self.generation, self.index, synced_through, self.prev_crc);
        full(image);
        self.prev_crc = crc;
        self.index += 1;
        self.page = PageBuf::new();
    }
}

/// Where records of lengths `lens` end when packed from page `index` with `room` payload
/// bytes left on it, as [`PageCursor::add`] packs them: the page index and the room left on
/// it, or `None` if they need a page at or past `limit`.
pub fn packed_end(
    (mut index, mut room): (u32, usize),
    lens: impl IntoIterator<Item = usize>,
    limit: u32,
) -> Option<(u32, usize)> {
    for len in lens {
        let mut rest = len;
        loop {
            if index >= limit {
                return None;
            }
            let n = rest.min(room - FRAGMENT_HEADER_BYTES);
            room -= FRAGMENT_HEADER_BYTES + n;
            rest -= n;
            if room <= FRAGMENT_HEADER_BYTES {
                index += 1;
                room = PAGE_PAYLOAD_BYTES;
            }
            if rest == 0 {
                break;
            }
        }
    }
    Some((index, room))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log_page::PAGE_BYTES;
    use crate::page_log::scan::{self, Scanned};

    /// Records of lengths chosen to land on every boundary: empty, tiny, exactly a page's
    /// room, a byte more and less, several pages.
    fn lengths() -> Vec<usize> {
        let p = PAGE_PAYLOAD_BYTES - FRAGMENT_HEADER_BYTES;
        vec![0, 1, p, p - 1, p + 1, 3 * p + 7, 10, p - 2, 2, 4 * p]
    }

    fn record(i: usize, len: usize) -> Vec<u8> {
        (0..len).map(|j| (i * 31 + j) as u8).collect()
    }

    #[test]
    fn packed_records_scan_back_where_the_cursor_placed_them_and_packed_end_predicts_it() {
        let lens = lengths();
        let mut cursor = PageCursor::new(7, 0, 0);
        let mut image = Vec::new();
        let mut placed = Vec::new();
        for (i, &len) in lens.iter().enumerate() {
            let expected = cursor.packed_end([len], u32::MAX).unwrap();
            let at = cursor.add(&record(i, len), 0, |p| image.extend_from_slice(p));
            assert_eq!((cursor.index(), cursor.room()), expected, "record {i}");
            placed.push(at);
        }
        cursor.close(0, |p| image.extend_from_slice(p));
        assert_eq!(image.len(), cursor.index() as usize * PAGE_BYTES);
        let mut read = Vec::new();
        let end = scan::scan(&mut image.as_slice(), 7, None, |r| {
            read.push(r);
            std::ops::ControlFlow::Continue(())
        })
        .unwrap();
        assert_eq!(end.pages, cursor.index());
        assert!(!end.cut_record);
        let want: Vec<Scanned> = lens
            .iter()
            .enumerate()
            .map(|(i, &len)| Scanned {
                page: placed[i].page,
                offset: placed[i].offset,
                pages: placed[i].pages,
                bytes: record(i, len),
            })
            .collect();
        assert_eq!(read, want);
        for (i, p) in placed.iter().enumerate() {
            let at = p.page as usize * PAGE_BYTES;
            let pages = &image[at..at + usize::from(p.pages) * PAGE_BYTES];
            let got = scan::record_at(pages, 7, p.page, p.offset, p.pages).unwrap();
            assert_eq!(got, record(i, lens[i]), "record {i} read at its place");
        }
    }

    #[test]
    fn packed_end_refuses_what_needs_a_page_past_the_limit() {
        let p = PAGE_PAYLOAD_BYTES - FRAGMENT_HEADER_BYTES;
        assert_eq!(packed_end((0, PAGE_PAYLOAD_BYTES), [p], 1), Some((1, PAGE_PAYLOAD_BYTES)));
        assert_eq!(packed_end((0, PAGE_PAYLOAD_BYTES), [p + 1], 1), None);
        assert_eq!(packed_end((1, PAGE_PAYLOAD_BYTES), [0], 1), None);
    }

    #[test]
    fn a_carried_page_resumes_where_it_was_taken() {
        let mut a = PageCursor::new(3, 0, 0);
        let mut image = Vec::new();
        a.add(&[1; 5000], 0, |p| image.extend_from_slice(p));
        let carried = a.take_partial();
        let mut b = PageCursor::new(3, a.index(), a.prev_crc());
        b.resume(carried);
        b.add(&[2; 10], 1, |p| image.extend_from_slice(p));
        b.close(1, |p| image.extend_from_slice(p));
        let mut read = Vec::new();
        scan::scan(&mut image.as_slice(), 3, Some(2), |r| {
            read.push(r.bytes);
            std::ops::ControlFlow::Continue(())
        })
        .unwrap();
        assert_eq!(read, vec![vec![1; 5000], vec![2; 10]]);
    }
}
