//! The entries of an index page: 4 KiB of a table's primary index entries on the volume,
//! where the index puts the entries past its memory threshold (`index.rs`). The page around
//! them is the space layer's one index-page format (`shale_space::index_page`, byte layout
//! there); this module owns the entries, the "overflowed" flag and how a table names its
//! pages.
//!
//! ```text
//! entry (20 bytes, integers little-endian)
//! 0       8        key hash (u64)
//! 8       8        block (u64)
//! 16      4        offset in the block's payload (u32)
//!
//! page fields as this engine fills them
//! flags            bit 0 "overflowed": an entry whose home is this page or an earlier one
//!                  lies in a later page (lookups go on to the next page)
//! generation       the table id (high 32 bits) and the index area's generation (low 32
//!                  bits): a page of another table or of another area reads as damage
//! page number      the page's number in its area
//! pages            the pages of its area
//! ```
//! An entry names where a row record of that key hash begins, as the in-memory index does:
//! the row's full key is checked against its block on every hit.
//!
//! No page of the format before the one format (`SHIX`) is ever read: index areas are never
//! named by the version log, and every open rebuilds them from the rows, so a page is read
//! only by the build that wrote it.

use shale_space::index_page::{self, PageShape};

use crate::block::{BLOCK_BYTES, Pos};
use crate::error::{Error, Result};

/// Bytes of an index page.
pub const PAGE_BYTES: usize = BLOCK_BYTES;
const _: () = assert!(PAGE_BYTES == index_page::PAGE_BYTES);
const OVERFLOWED: u8 = 1;
/// The shape of the table engine's index pages: 20-byte entries, the "overflowed" flag, no
/// legacy format read.
const SHAPE: PageShape = PageShape { entry_bytes: 20, flags_known: OVERFLOWED, legacy: None };
/// Entries a page holds.
pub const ENTRIES_MAX: usize = SHAPE.entries_max();

/// Which page a page is: the checks a page read back must pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageId {
    /// The table.
    pub table: u32,
    /// The page's number in its area.
    pub number: u64,
    /// Pages in the area.
    pub pages: u64,
    /// The area's generation.
    pub generation: u64,
}

impl PageId {
    /// The page as the space layer's page names it.
    ///
    /// # Panics
    /// If the area's generation, the page number or the page count pass `u32::MAX` (a
    /// generation steps once a doubling of the area, a page is 4 KiB: bugs).
    fn shared(self) -> index_page::PageId {
        let area = u32::try_from(self.generation).expect("an index area generation past u32");
        index_page::PageId {
            generation: u64::from(self.table) << 32 | u64::from(area),
            number: u32::try_from(self.number).expect("an index page number past u32"),
            pages: u32::try_from(self.pages).expect("an index area of more than u32 pages"),
        }
    }
}

/// An index page's contents.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexPage {
    /// Whether lookups go on to the next page.
    pub overflowed: bool,
    /// (key hash, position) pairs, at most [`ENTRIES_MAX`].
    pub entries: Vec<(u64, Pos)>,
}

impl IndexPage {
    /// Encodes the page as `id`, sealed.
    ///
    /// # Panics
    /// With more than [`ENTRIES_MAX`] entries (a bug).
    pub fn encode(&self, id: PageId) -> Vec<u8> {
        assert!(self.entries.len() <= ENTRIES_MAX, "{} index entries", self.entries.len());
        let mut b = vec![0u8; PAGE_BYTES];
        let flags = if self.overflowed { OVERFLOWED } else { 0 };
        index_page::encode(&mut b, &SHAPE, id.shared(), flags, self.entries.len(), |i, e| {
            let (hash, pos) = self.entries[i];
            e[..8].copy_from_slice(&hash.to_le_bytes());
            e[8..16].copy_from_slice(&pos.block.to_le_bytes());
            e[16..20].copy_from_slice(&pos.offset.to_le_bytes());
        });
        b
    }

    /// Decodes a page read from `address`, which must be page `id`.
    ///
    /// # Errors
    /// [`Error::Corruption`] for anything but a valid page `id`.
    pub fn decode(b: &[u8], id: PageId, address: u64) -> Result<IndexPage> {
        let page = index_page::decode(b, &SHAPE, id.shared()).map_err(|why| Error::Corruption {
            what: format!("index page {} of table {}: {why}", id.number, id.table),
            offset: address,
        })?;
        let u64_at = |e: &[u8], o: usize| u64::from_le_bytes(e[o..o + 8].try_into().unwrap());
        let entries = page
            .entries()
            .map(|e| {
                let offset = u32::from_le_bytes(e[16..20].try_into().unwrap());
                (u64_at(e, 0), Pos { block: u64_at(e, 8), offset })
            })
            .collect();
        Ok(IndexPage { overflowed: page.flags & OVERFLOWED != 0, entries })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: PageId = PageId { table: 3, number: 9, pages: 16, generation: 2 };

    fn page() -> IndexPage {
        IndexPage {
            overflowed: true,
            entries: (0..ENTRIES_MAX as u64)
                .map(|i| (i * 0x9E37_79B9, Pos { block: i, offset: i as u32 * 3 }))
                .collect(),
        }
    }

    #[test]
    fn pages_round_trip_and_every_flipped_byte_is_corruption() {
        assert_eq!(ENTRIES_MAX, 203, "as many entries as the page before the one format");
        for p in [page(), IndexPage::default()] {
            let b = p.encode(ID);
            assert_eq!(IndexPage::decode(&b, ID, 0).unwrap(), p);
            for other in [
                PageId { table: 4, ..ID },
                PageId { number: 8, ..ID },
                PageId { pages: 32, ..ID },
                PageId { generation: 3, ..ID },
            ] {
                assert!(IndexPage::decode(&b, other, 0).is_err());
            }
            for i in 0..PAGE_BYTES {
                let mut c = b.clone();
                c[i] ^= 0x40;
                assert!(
                    matches!(IndexPage::decode(&c, ID, 0), Err(Error::Corruption { .. })),
                    "byte {i}"
                );
            }
            assert!(IndexPage::decode(&b[..100], ID, 0).is_err());
            assert!(IndexPage::decode(&[0; PAGE_BYTES], ID, 0).is_err());
        }
    }

    /// The table and the area share the page's generation field: neither spills into the
    /// other.
    #[test]
    fn a_page_of_another_table_with_the_same_area_generation_is_refused() {
        let b = page().encode(PageId { table: 1, generation: 1 << 20, ..ID });
        for other in [PageId { table: 2, generation: 1 << 20, ..ID }, PageId { table: 1, ..ID }] {
            let r = IndexPage::decode(&b, other, 77);
            assert!(matches!(r, Err(Error::Corruption { offset: 77, .. })), "{other:?}: {r:?}");
        }
    }
}
