//! Index pages: the one 4 KiB page format of the engines' on-volume indexes (the hash
//! engine's bounded index, `crates/hash/src/paged_table.rs`; the table engine's index pages,
//! `crates/table/src/index.rs`). Moved down from the engines so that each owns only its
//! entries, never a page envelope of its own (docs/space.md, "Index pages").
//!
//! A page is self-describing: it says which page of which area it is, how large its entries
//! are and how many it holds, so a page read from the wrong place (a misdirected write, a
//! stale area, a slot reused) is refused as well as a damaged one. The entries are opaque
//! fixed-size records: each engine encodes and decodes its own (the hash engine: digest and
//! packed location; the table engine: key hash, block and offset).
//!
//! ```text
//! offset  size     field (integers little-endian)
//! 0       4        magic b"SHIP"
//! 4       4        crc32c (u32) of bytes [8, 4096): everything after it
//! 8       1        format version (u8), FORMAT_VERSION (1)
//! 9       1        flags (u8): bits the owner defines (the table engine's bit 0,
//!                  "overflowed"); a bit the owner does not define is refused
//! 10      2        entry bytes e (u16), at least 1
//! 12      2        entries n (u16), at most (4096 - 32) / e
//! 14      2        reserved, 0
//! 16      8        generation (u64): the area the page belongs to, as its owner numbers
//!                  areas (the hash engine: the table's generation; the table engine: the
//!                  table id in the high 32 bits, the area's generation in the low 32)
//! 24      4        page number (u32) in its area (the hash engine: the bucket)
//! 28      4        pages (u32) in its area (the hash engine: the bucket count)
//! 32      e x n    entries, opaque to this layer
//! ..      ..       zeros up to byte 4096
//! ```
//!
//! The header is 32 bytes, as both engines' own headers were, so a page holds as many
//! entries as before (254 of the hash engine's 16 bytes, 203 of the table engine's 20). Page
//! numbers and counts are `u32`: an area of 2^32 pages would be 16 TiB, far past what either
//! engine makes (the hash engine stops at 2^26 buckets).
//!
//! [`decode`] checks, in order: the length, the magic, the checksum, the format version, the
//! entry size, that the page is the one expected (generation, page number, pages), the
//! flags, the reserved bytes, the entry count and that every byte after the entries is zero;
//! the first check that fails is the [`Refusal`].
//!
//! **Legacy pages.** Before this format the hash engine wrote its own page, `SHIXPG01`
//! ([`Legacy::HashBucketV1`], layout in [`legacy`]), and its index snapshots named by a
//! checkpoint can still hold them; an owner that may meet them says so in its
//! [`PageShape`], and [`decode`] reads them into the same [`Page`]. Writers write only the
//! format above: an open copies the snapshot into a working table written in this format,
//! and the next checkpoint (every `checkpoint_bytes` of log, and at close when anything was
//! written or replayed since the last) names a snapshot in this format, after which no
//! legacy page is named. Nothing records a snapshot's format: each page says it by its
//! magic. A build from before this format refuses pages of it as damage ("not an index
//! page"): a store does not move back. The table engine's own page (`SHIX`) needs no legacy
//! reader: its index pages are never named by the version log, and every open rebuilds them
//! from the rows, so no build ever reads one that another build wrote.
//!
//! A later change of this format steps [`FORMAT_VERSION`]; readers keep reading the versions
//! before it, as they read `SHIXPG01` here.

use std::fmt;

/// Bytes of an index page.
pub const PAGE_BYTES: usize = 4096;
/// Bytes of the page header, before the entries.
pub const HEADER_BYTES: usize = 32;
/// The page's magic.
pub const MAGIC: &[u8; 4] = b"SHIP";
/// The format version this build writes (and the only one of this format it reads).
pub const FORMAT_VERSION: u8 = 1;

/// Where the checksum lies, and the first byte it covers.
const CRC_AT: usize = 4;
const CRC_FROM: usize = 8;

/// Most entries of `entry_bytes` bytes a page holds.
pub const fn entries_max(entry_bytes: usize) -> usize {
    (PAGE_BYTES - HEADER_BYTES) / entry_bytes
}

/// Which page a page is: what its owner expects a page read back to say of itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageId {
    /// The area's generation, as its owner numbers areas.
    pub generation: u64,
    /// The page's number in its area.
    pub number: u32,
    /// Pages in the area.
    pub pages: u32,
}

/// An index page format written before this one, which a reader accepts where its owner
/// says so ([`PageShape::legacy`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Legacy {
    /// `SHIXPG01`: the hash engine's bounded-index bucket page before this format (layout in
    /// [`legacy`]); its 16-byte entries read as the current format's.
    HashBucketV1,
}

/// What an owner's pages look like: the size of its entries, the flag bits it defines, and
/// the legacy format its readers still accept (if any).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageShape {
    /// Bytes of one entry.
    pub entry_bytes: u16,
    /// The flag bits the owner defines; any other set bit is refused.
    pub flags_known: u8,
    /// A legacy format read as this shape, or `None`.
    pub legacy: Option<Legacy>,
}

impl PageShape {
    /// Most entries a page of this shape holds.
    pub const fn entries_max(&self) -> usize {
        entries_max(self.entry_bytes as usize)
    }
}

/// Which format a decoded page was written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// This module's format, [`FORMAT_VERSION`].
    Current,
    /// A legacy format.
    Legacy(Legacy),
}

/// A decoded page: its flags and its entries, still opaque.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Page<'a> {
    /// The flag bits (only those the owner defines).
    pub flags: u8,
    /// The format it was written in.
    pub format: Format,
    entry_bytes: usize,
    entries: &'a [u8],
}

impl<'a> Page<'a> {
    /// Entries in the page.
    pub fn len(&self) -> usize {
        self.entries.len() / self.entry_bytes
    }

    /// Whether the page holds no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries, each `entry_bytes` long, in the order they were written.
    pub fn entries(&self) -> std::slice::ChunksExact<'a, u8> {
        self.entries.chunks_exact(self.entry_bytes)
    }
}

/// Why a page did not decode: the first check that failed. Every refusal is damage to the
/// owner (every page of a live area was written before it is read), which turns it into its
/// own Corruption error with the page's address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// Not [`PAGE_BYTES`] long.
    Length {
        /// Its length.
        bytes: usize,
    },
    /// Neither this format's magic nor an accepted legacy format's.
    Magic,
    /// The stored checksum is not the page's.
    Checksum {
        /// The checksum the page holds.
        stored: u32,
        /// The checksum of its bytes.
        computed: u32,
    },
    /// A format version this build does not know.
    Version {
        /// The version the page names.
        found: u8,
    },
    /// Entries of another size than the owner's.
    EntryBytes {
        /// The size the page names.
        found: u16,
        /// The owner's.
        expected: u16,
    },
    /// Another page: another area, number or area size.
    WrongPage {
        /// What the page says it is.
        found: PageId,
        /// What the owner expected.
        expected: PageId,
    },
    /// Flag bits the owner does not define.
    Flags {
        /// The page's flags.
        found: u8,
    },
    /// Reserved header bytes that are not zero.
    Reserved,
    /// More entries than a page holds.
    EntryCount {
        /// The count the page names.
        found: u16,
        /// The most a page of its entry size holds.
        max: usize,
    },
    /// A byte after the entries that is not zero.
    TrailingBytes {
        /// Its offset in the page.
        at: usize,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Length { bytes } => write!(f, "index page of {bytes} bytes"),
            Refusal::Magic => write!(f, "not an index page (magic)"),
            Refusal::Checksum { stored, computed } => write!(
                f,
                "index page checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ),
            Refusal::Version { found } => {
                write!(f, "index page format version {found}, this build reads {FORMAT_VERSION}")
            }
            Refusal::EntryBytes { found, expected } => {
                write!(f, "index page of {found}-byte entries where {expected}-byte ones belong")
            }
            Refusal::WrongPage { found, expected } => {
                write!(f, "index page {found:?} where {expected:?} belongs")
            }
            Refusal::Flags { found } => write!(f, "index page flags {found:#04x}"),
            Refusal::Reserved => write!(f, "index page reserved bytes not zero"),
            Refusal::EntryCount { found, max } => {
                write!(f, "index page of {found} entries, at most {max} fit")
            }
            Refusal::TrailingBytes { at } => {
                write!(f, "index page byte {at} after the entries is not zero")
            }
        }
    }
}

impl std::error::Error for Refusal {}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes(b[o..o + 2].try_into().unwrap())
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

/// Writes page `id` of `shape` into `out` (all of it: the header, `entries` entries that
/// `fill(i, entry)` writes into zeroed `entry_bytes`-byte slices, zeros, the checksum).
///
/// # Panics
/// If `out` is not [`PAGE_BYTES`] long, there are more entries than a page holds, or `flags`
/// has a bit the shape does not define (bugs).
pub fn encode(
    out: &mut [u8],
    shape: &PageShape,
    id: PageId,
    flags: u8,
    entries: usize,
    mut fill: impl FnMut(usize, &mut [u8]),
) {
    let e = usize::from(shape.entry_bytes);
    assert_eq!(out.len(), PAGE_BYTES, "an index page is {PAGE_BYTES} bytes");
    assert!(e > 0 && entries <= shape.entries_max(), "{entries} entries of {e} bytes");
    assert_eq!(flags & !shape.flags_known, 0, "flags {flags:#04x} the owner does not define");
    out.fill(0);
    out[..4].copy_from_slice(MAGIC);
    out[8] = FORMAT_VERSION;
    out[9] = flags;
    out[10..12].copy_from_slice(&shape.entry_bytes.to_le_bytes());
    out[12..14].copy_from_slice(&(entries as u16).to_le_bytes());
    out[16..24].copy_from_slice(&id.generation.to_le_bytes());
    out[24..28].copy_from_slice(&id.number.to_le_bytes());
    out[28..32].copy_from_slice(&id.pages.to_le_bytes());
    for i in 0..entries {
        let o = HEADER_BYTES + i * e;
        fill(i, &mut out[o..o + e]);
    }
    seal(out);
}

/// Writes the checksum of a page image (the encoder's last step; also for tests and fuzz
/// harnesses that change a page and want the checks behind the checksum reached).
///
/// # Panics
/// If `page` is not [`PAGE_BYTES`] long.
pub fn seal(page: &mut [u8]) {
    assert_eq!(page.len(), PAGE_BYTES);
    let crc = crc32c::crc32c(&page[CRC_FROM..]);
    page[CRC_AT..CRC_FROM].copy_from_slice(&crc.to_le_bytes());
}

/// Decodes `bytes` as page `expected` of `shape`.
///
/// # Errors
/// The first check that fails (see the module's documentation), as a [`Refusal`].
pub fn decode<'a>(
    bytes: &'a [u8],
    shape: &PageShape,
    expected: PageId,
) -> Result<Page<'a>, Refusal> {
    if bytes.len() != PAGE_BYTES {
        return Err(Refusal::Length { bytes: bytes.len() });
    }
    if &bytes[..4] != MAGIC {
        return match shape.legacy {
            Some(Legacy::HashBucketV1) if legacy::is_hash_bucket_v1(bytes) => {
                legacy::decode_hash_bucket_v1(bytes, shape, expected)
            }
            _ => Err(Refusal::Magic),
        };
    }
    let stored = u32_at(bytes, CRC_AT);
    let computed = crc32c::crc32c(&bytes[CRC_FROM..]);
    if stored != computed {
        return Err(Refusal::Checksum { stored, computed });
    }
    if bytes[8] != FORMAT_VERSION {
        return Err(Refusal::Version { found: bytes[8] });
    }
    let entry_bytes = u16_at(bytes, 10);
    if entry_bytes != shape.entry_bytes || entry_bytes == 0 {
        return Err(Refusal::EntryBytes { found: entry_bytes, expected: shape.entry_bytes });
    }
    let found = PageId {
        generation: u64_at(bytes, 16),
        number: u32_at(bytes, 24),
        pages: u32_at(bytes, 28),
    };
    if found != expected {
        return Err(Refusal::WrongPage { found, expected });
    }
    let flags = bytes[9];
    if flags & !shape.flags_known != 0 {
        return Err(Refusal::Flags { found: flags });
    }
    if bytes[14..16] != [0, 0] {
        return Err(Refusal::Reserved);
    }
    let n = u16_at(bytes, 12);
    entries_of(bytes, HEADER_BYTES, n, shape, PAGE_BYTES).map(|entries| Page {
        flags,
        format: Format::Current,
        entry_bytes: usize::from(entry_bytes),
        entries,
    })
}

/// The `n` entries of `shape` from byte `from` of `bytes`, after checking that they fit
/// before `end` and that every byte from their end to `end` is zero.
fn entries_of<'a>(
    bytes: &'a [u8],
    from: usize,
    n: u16,
    shape: &PageShape,
    end: usize,
) -> Result<&'a [u8], Refusal> {
    let e = usize::from(shape.entry_bytes);
    let max = (end - from) / e;
    if usize::from(n) > max {
        return Err(Refusal::EntryCount { found: n, max });
    }
    let stop = from + usize::from(n) * e;
    if let Some(i) = bytes[stop..end].iter().position(|&b| b != 0) {
        return Err(Refusal::TrailingBytes { at: stop + i });
    }
    Ok(&bytes[from..stop])
}

pub mod legacy {
    //! The legacy formats [`decode`](super::decode) still reads. Nothing writes them but
    //! tests and fuzz seeds ([`encode_hash_bucket_v1`]), which need such pages to read.
    //!
    //! ```text
    //! SHIXPG01, the hash engine's bounded-index bucket page before the one format
    //! offset  size     field (integers little-endian)
    //! 0       8        magic b"SHIXPG01"
    //! 8       8        table generation (u64)            read as PageId::generation
    //! 16      4        bucket (u32)                      read as PageId::number
    //! 20      4        buckets (u32) of the table        read as PageId::pages
    //! 24      2        entries n (u16), at most 254
    //! 26      2        reserved, 0
    //! 28      16 x n   entries (opaque here: digest u64, packed location u64)
    //! ..      ..       zeros up to byte 4092
    //! 4092    4        crc32c (u32) of bytes [0, 4092)
    //! ```

    use super::{
        Format, Legacy, PAGE_BYTES, Page, PageId, PageShape, Refusal, entries_of, u16_at, u32_at,
        u64_at,
    };

    /// The legacy hash page's magic.
    pub const HASH_BUCKET_V1_MAGIC: &[u8; 8] = b"SHIXPG01";
    /// Bytes of its header.
    const HEADER_BYTES: usize = 28;
    /// Bytes of one of its entries.
    const ENTRY_BYTES: u16 = 16;
    /// Where its checksum lies (it covers every byte before).
    const CRC_AT: usize = PAGE_BYTES - 4;

    pub(super) fn is_hash_bucket_v1(bytes: &[u8]) -> bool {
        bytes[..8] == HASH_BUCKET_V1_MAGIC[..]
    }

    /// Decodes a `SHIXPG01` page (its magic already seen) as `expected` of `shape`.
    pub(super) fn decode_hash_bucket_v1<'a>(
        bytes: &'a [u8],
        shape: &PageShape,
        expected: PageId,
    ) -> Result<Page<'a>, Refusal> {
        let stored = u32_at(bytes, CRC_AT);
        let computed = crc32c::crc32c(&bytes[..CRC_AT]);
        if stored != computed {
            return Err(Refusal::Checksum { stored, computed });
        }
        if shape.entry_bytes != ENTRY_BYTES {
            return Err(Refusal::EntryBytes { found: ENTRY_BYTES, expected: shape.entry_bytes });
        }
        let found = PageId {
            generation: u64_at(bytes, 8),
            number: u32_at(bytes, 16),
            pages: u32_at(bytes, 20),
        };
        if found != expected {
            return Err(Refusal::WrongPage { found, expected });
        }
        if bytes[26..28] != [0, 0] {
            return Err(Refusal::Reserved);
        }
        let n = u16_at(bytes, 24);
        entries_of(bytes, HEADER_BYTES, n, shape, CRC_AT).map(|entries| Page {
            flags: 0,
            format: Format::Legacy(Legacy::HashBucketV1),
            entry_bytes: usize::from(ENTRY_BYTES),
            entries,
        })
    }

    /// A `SHIXPG01` page image of `entries` (16 bytes each, concatenated) as page `id`: for
    /// tests and fuzz seeds only, which need legacy pages to read. No store writes one.
    ///
    /// # Panics
    /// If `out` is not [`PAGE_BYTES`] long, or the entries are not whole or do not fit.
    pub fn encode_hash_bucket_v1(out: &mut [u8], id: PageId, entries: &[u8]) {
        assert_eq!(out.len(), PAGE_BYTES);
        let e = usize::from(ENTRY_BYTES);
        assert!(entries.len() % e == 0 && HEADER_BYTES + entries.len() <= CRC_AT);
        out.fill(0);
        out[..8].copy_from_slice(HASH_BUCKET_V1_MAGIC);
        out[8..16].copy_from_slice(&id.generation.to_le_bytes());
        out[16..20].copy_from_slice(&id.number.to_le_bytes());
        out[20..24].copy_from_slice(&id.pages.to_le_bytes());
        out[24..26].copy_from_slice(&((entries.len() / e) as u16).to_le_bytes());
        out[HEADER_BYTES..HEADER_BYTES + entries.len()].copy_from_slice(entries);
        let crc = crc32c::crc32c(&out[..CRC_AT]);
        out[CRC_AT..].copy_from_slice(&crc.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHAPE: PageShape = PageShape { entry_bytes: 20, flags_known: 1, legacy: None };
    const HASH: PageShape =
        PageShape { entry_bytes: 16, flags_known: 0, legacy: Some(Legacy::HashBucketV1) };
    const ID: PageId = PageId { generation: 7, number: 3, pages: 8 };

    /// Entry `i` of a test page: its bytes are a function of `i`, never all zero.
    fn entry(i: usize, e: &mut [u8]) {
        for (k, b) in e.iter_mut().enumerate() {
            *b = (i * 31 + k * 7 + 1) as u8 | 1;
        }
    }

    fn page(shape: &PageShape, flags: u8, n: usize) -> Vec<u8> {
        let mut b = vec![0u8; PAGE_BYTES];
        encode(&mut b, shape, ID, flags, n, entry);
        b
    }

    fn entries_are(p: &Page, n: usize, e: usize) {
        assert_eq!(p.len(), n);
        for (i, got) in p.entries().enumerate() {
            let mut want = vec![0u8; e];
            entry(i, &mut want);
            assert_eq!(got, &want[..], "entry {i}");
        }
    }

    #[test]
    fn pages_round_trip_full_and_empty_with_their_flags() {
        assert_eq!(SHAPE.entries_max(), 203);
        assert_eq!(HASH.entries_max(), 254);
        for (shape, flags, n) in [(SHAPE, 1, 203), (SHAPE, 0, 0), (HASH, 0, 254), (HASH, 0, 1)] {
            let b = page(&shape, flags, n);
            let p = decode(&b, &shape, ID).unwrap();
            assert_eq!((p.flags, p.format, p.is_empty()), (flags, Format::Current, n == 0));
            entries_are(&p, n, usize::from(shape.entry_bytes));
        }
    }

    #[test]
    fn every_flipped_bit_and_a_truncation_are_refused() {
        let b = page(&SHAPE, 1, 150);
        for i in 0..PAGE_BYTES {
            for bit in [0x01u8, 0x80] {
                let mut bad = b.clone();
                bad[i] ^= bit;
                assert!(decode(&bad, &SHAPE, ID).is_err(), "flip {bit:#x} at {i} accepted");
            }
        }
        assert_eq!(decode(&b[..PAGE_BYTES - 1], &SHAPE, ID), Err(Refusal::Length { bytes: 4095 }));
        assert_eq!(decode(&[0; PAGE_BYTES], &SHAPE, ID).unwrap_err(), Refusal::Magic);
        let mut bad = b.clone();
        bad[100] ^= 4;
        assert!(matches!(decode(&bad, &SHAPE, ID), Err(Refusal::Checksum { .. })));
    }

    /// Each check behind the checksum, reached by a page resealed after the change.
    #[test]
    fn each_check_gives_its_own_reason() {
        let b = page(&SHAPE, 1, 10);
        let resealed = |at: usize, v: u8| {
            let mut c = b.clone();
            c[at] = v;
            seal(&mut c);
            decode(&c, &SHAPE, ID).unwrap_err()
        };
        assert_eq!(resealed(8, 2), Refusal::Version { found: 2 });
        assert_eq!(resealed(10, 16), Refusal::EntryBytes { found: 16, expected: 20 });
        assert_eq!(resealed(9, 3), Refusal::Flags { found: 3 });
        assert_eq!(resealed(15, 1), Refusal::Reserved);
        assert_eq!(resealed(13, 1), Refusal::EntryCount { found: 266, max: 203 });
        let at = HEADER_BYTES + 10 * 20 + 5;
        assert_eq!(resealed(at, 9), Refusal::TrailingBytes { at });
        // The page asked for with another generation, number or area size.
        for other in
            [PageId { generation: 8, ..ID }, PageId { number: 4, ..ID }, PageId { pages: 16, ..ID }]
        {
            let r = decode(&b, &SHAPE, other).unwrap_err();
            assert_eq!(r, Refusal::WrongPage { found: ID, expected: other });
        }
        // An owner of other entries reads no page of these.
        let hash = decode(&b, &HASH, ID).unwrap_err();
        assert_eq!(hash, Refusal::EntryBytes { found: 20, expected: 16 });
    }

    #[test]
    fn a_legacy_hash_page_decodes_where_its_owner_accepts_it() {
        let mut entries = vec![0u8; 254 * 16];
        for (i, e) in entries.chunks_exact_mut(16).enumerate() {
            entry(i, e);
        }
        let mut b = vec![0u8; PAGE_BYTES];
        legacy::encode_hash_bucket_v1(&mut b, ID, &entries);
        let p = decode(&b, &HASH, ID).unwrap();
        assert_eq!((p.flags, p.format), (0, Format::Legacy(Legacy::HashBucketV1)));
        entries_are(&p, 254, 16);
        // An owner that does not accept it, or accepts it with entries of another size.
        assert_eq!(
            decode(&b, &PageShape { legacy: None, ..HASH }, ID).unwrap_err(),
            Refusal::Magic
        );
        let wide = PageShape { entry_bytes: 20, ..HASH };
        assert_eq!(
            decode(&b, &wide, ID).unwrap_err(),
            Refusal::EntryBytes { found: 16, expected: 20 }
        );
        // Its own checks: every flip, another page.
        for i in 0..PAGE_BYTES {
            let mut bad = b.clone();
            bad[i] ^= 0x10;
            assert!(decode(&bad, &HASH, ID).is_err(), "flip at {i} accepted");
        }
        let other = PageId { number: 5, ..ID };
        assert_eq!(
            decode(&b, &HASH, other).unwrap_err(),
            Refusal::WrongPage { found: ID, expected: other }
        );
    }
}
