//! The index page: 4 KiB of a table's primary index entries on the volume, where the index
//! puts the entries past its memory threshold (`index.rs`).
//!
//! ```text
//! offset size  field
//!  0      4    magic b"SHIX"
//!  4      4    crc32c of bytes 8..4096
//!  8      4    table id (u32 LE)
//! 12      1    format version (1)
//! 13      1    flags: bit 0 "overflowed": an entry whose home is this page or an earlier
//!              one lies in a later page (lookups go on to the next page); other bits zero
//! 14      2    entries in use, n (u16 LE, at most 203)
//! 16      8    page number in the table's index area (u64 LE)
//! 24      8    the index area's generation (u64 LE): pages of another area read as damage
//! 32   20*n    entries: key hash (u64 LE) | block (u64 LE) | offset in its payload (u32 LE)
//! ...          zeros to 4096
//! ```
//! An entry names where a row record of that key hash begins, as the in-memory index does:
//! the row's full key is checked against its block on every hit.

use crate::block::{BLOCK_BYTES, Pos};
use crate::error::{Error, Result};

/// Bytes of an index page.
pub const PAGE_BYTES: usize = BLOCK_BYTES;
const HEADER_BYTES: usize = 32;
const ENTRY_BYTES: usize = 20;
/// Entries a page holds.
pub const ENTRIES_MAX: usize = (PAGE_BYTES - HEADER_BYTES) / ENTRY_BYTES;
const MAGIC: &[u8; 4] = b"SHIX";
const FORMAT: u8 = 1;
const OVERFLOWED: u8 = 1;

/// Which page a page is: the checks a page read back must pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageId {
    /// The table.
    pub table: u32,
    /// The page's number in its area.
    pub number: u64,
    /// The area's generation.
    pub generation: u64,
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
        b[..4].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&id.table.to_le_bytes());
        b[12] = FORMAT;
        b[13] = if self.overflowed { OVERFLOWED } else { 0 };
        b[14..16].copy_from_slice(&(self.entries.len() as u16).to_le_bytes());
        b[16..24].copy_from_slice(&id.number.to_le_bytes());
        b[24..32].copy_from_slice(&id.generation.to_le_bytes());
        for (i, (hash, pos)) in self.entries.iter().enumerate() {
            let at = HEADER_BYTES + i * ENTRY_BYTES;
            b[at..at + 8].copy_from_slice(&hash.to_le_bytes());
            b[at + 8..at + 16].copy_from_slice(&pos.block.to_le_bytes());
            b[at + 16..at + 20].copy_from_slice(&pos.offset.to_le_bytes());
        }
        let crc = crc32c::crc32c(&b[8..]);
        b[4..8].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes a page read from `address`, which must be page `id`.
    ///
    /// # Errors
    /// [`Error::Corruption`] for anything but a valid page `id`.
    pub fn decode(b: &[u8], id: PageId, address: u64) -> Result<IndexPage> {
        let bad = |what: &str| Error::Corruption {
            what: format!("index page {} of table {}: {what}", id.number, id.table),
            offset: address,
        };
        if b.len() != PAGE_BYTES {
            return Err(bad("short page"));
        }
        if &b[..4] != MAGIC {
            return Err(bad("no page magic"));
        }
        let crc = u32::from_le_bytes(b[4..8].try_into().unwrap());
        if crc != crc32c::crc32c(&b[8..]) {
            return Err(bad("checksum mismatch"));
        }
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let read = PageId { table: u32_at(8), number: u64_at(16), generation: u64_at(24) };
        if b[12] != FORMAT || read != id {
            return Err(bad("a page of another table, number, area or format"));
        }
        let n = u16::from_le_bytes(b[14..16].try_into().unwrap()) as usize;
        let end = HEADER_BYTES + n * ENTRY_BYTES;
        if b[13] & !OVERFLOWED != 0 || n > ENTRIES_MAX || b[end..].iter().any(|&x| x != 0) {
            return Err(bad("flags or entry count"));
        }
        let entries = (0..n)
            .map(|i| {
                let at = HEADER_BYTES + i * ENTRY_BYTES;
                (u64_at(at), Pos { block: u64_at(at + 8), offset: u32_at(at + 16) })
            })
            .collect();
        Ok(IndexPage { overflowed: b[13] & OVERFLOWED != 0, entries })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: PageId = PageId { table: 3, number: 9, generation: 2 };

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
        for p in [page(), IndexPage::default()] {
            let b = p.encode(ID);
            assert_eq!(IndexPage::decode(&b, ID, 0).unwrap(), p);
            for other in [
                PageId { table: 4, ..ID },
                PageId { number: 8, ..ID },
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
}
