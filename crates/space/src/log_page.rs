//! Log pages: the page format every log of shale shares (the lsm engine's WAL after SpanDB,
//! and the hash engine's record log). Moved down from the lsm engine so that engines share it
//! by depending on this layer, not by copying it (docs/design.md, "Growing the lower layers").
//!
//! A log is written as 4 KiB pages, each starting with the *generation* of the log segment it
//! belongs to (the lsm WAL's log tag number, LTN: the memtable whose log group it is; the
//! hash engine's segment number), so a reader can tell a page of the current generation from
//! a stale one left by an earlier user of the same storage ("colouring").
//!
//! ```text
//! offset size  field
//! 0      8     generation (u64 LE): the LTN of the segment that wrote the page
//! 8      4     crc32c (u32 LE) of bytes [12, 4096): the rest of the header and the payload area
//! 12     4     page index within its segment (u32 LE)
//! 16     4     synced through (u32 LE): pages [0, this) of the segment were durable before
//!              this page was written; an invalid page below it is damage, not a torn tail
//! 20     4     previous page's crc32c (u32 LE) as written before this page (0 for page 0):
//!              the last page of a non-sync append is rewritten by the next append, and a
//!              crash may keep a later page but drop the rewrite; the chain tells the stale
//!              version of the page from the one the later page follows
//! 24     2     payload bytes used (u16 LE), at most PAGE_PAYLOAD_BYTES
//! 26     2     reserved, zero
//! 28     4068  payload: fragments, then zeros
//!
//! fragment: length (u16 LE) | type (u8: 1 full, 2 first, 3 middle, 4 last) | bytes
//! ```
//! A record (for the WAL an encoded write batch) is one full fragment, or a first, middles and
//! a last fragment on consecutive pages ([`FragmentType::at`] names them, [`Reassembler`]
//! joins them again). The page checksum covers the whole page, so a page torn at any sector
//! is invalid as a whole.

/// Size of a log page.
pub const PAGE_BYTES: usize = 4096;
/// Bytes of the page header.
pub const PAGE_HEADER_BYTES: usize = 28;
/// Bytes available for fragments in one page.
pub const PAGE_PAYLOAD_BYTES: usize = PAGE_BYTES - PAGE_HEADER_BYTES;
/// Bytes of a fragment header.
pub const FRAGMENT_HEADER_BYTES: usize = 3;

/// The first generation a new store's logs take, from its volume id.
///
/// A reader tells a log's pages from others by their generation and index alone, and takes a
/// page of the right generation at its index for the log's own (`page_log::scan`, the lsm
/// engine's WAL recovery). A store created over an older store's pages (its header and
/// version log wiped, its slots and WAL area not: a tool, a careless `dd`, an SSD whose
/// trimmed blocks read back old data) would otherwise count generations from 1 as the old
/// one did, in the same places, and read the old store's pages as its own: the hash engine
/// reported its own log damaged after a clean close, and the lsm engine replayed the old
/// store's WAL into the new one (`tests/reused_device.rs` of each). Each volume's count
/// starts at one of 2^40 points, 2^23 generations apart (a store takes one per log segment,
/// WAL generation or checkpoint), below 2^63.
pub fn first_generation(volume_id: &[u8; 16]) -> u64 {
    let id = u64::from_le_bytes(volume_id[..8].try_into().expect("8 bytes"));
    1 + ((id >> 24) << 23)
}

/// Where a fragment sits in its record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FragmentType {
    /// The whole record.
    Full = 1,
    /// The record's first fragment.
    First = 2,
    /// Neither first nor last.
    Middle = 3,
    /// The record's last fragment.
    Last = 4,
}

impl FragmentType {
    /// The type of a fragment that is (or is not) its record's first and (or) last.
    pub fn at(first: bool, last: bool) -> FragmentType {
        match (first, last) {
            (true, true) => FragmentType::Full,
            (true, false) => FragmentType::First,
            (false, false) => FragmentType::Middle,
            (false, true) => FragmentType::Last,
        }
    }

    fn from_u8(v: u8) -> Option<FragmentType> {
        Some(match v {
            1 => FragmentType::Full,
            2 => FragmentType::First,
            3 => FragmentType::Middle,
            4 => FragmentType::Last,
            _ => return None,
        })
    }
}

/// A page being filled.
#[derive(Clone, Debug)]
pub struct PageBuf {
    /// The page image (header filled by [`PageBuf::seal`]).
    pub bytes: Vec<u8>,
    used: usize,
}

impl PageBuf {
    /// An empty page.
    pub fn new() -> PageBuf {
        PageBuf { bytes: vec![0; PAGE_BYTES], used: 0 }
    }

    /// Payload bytes still free for fragment headers and bytes.
    pub fn room(&self) -> usize {
        PAGE_PAYLOAD_BYTES - self.used
    }

    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.used == 0
    }

    /// Appends a fragment; `data` must fit in `room() - FRAGMENT_HEADER_BYTES`.
    pub fn push(&mut self, kind: FragmentType, data: &[u8]) {
        assert!(data.len() + FRAGMENT_HEADER_BYTES <= self.room(), "fragment does not fit");
        let at = PAGE_HEADER_BYTES + self.used;
        self.bytes[at..at + 2].copy_from_slice(&(data.len() as u16).to_le_bytes());
        self.bytes[at + 2] = kind as u8;
        self.bytes[at + 3..at + 3 + data.len()].copy_from_slice(data);
        self.used += FRAGMENT_HEADER_BYTES + data.len();
    }

    /// Fills in the header for page `index` of generation `ltn`, written when pages
    /// `[0, synced_through)` were durable and following a page whose checksum is `prev_crc`;
    /// returns the image and its checksum.
    pub fn seal(
        &mut self,
        ltn: u64,
        index: u32,
        synced_through: u32,
        prev_crc: u32,
    ) -> (&[u8], u32) {
        self.bytes[..8].copy_from_slice(&ltn.to_le_bytes());
        self.bytes[12..16].copy_from_slice(&index.to_le_bytes());
        self.bytes[16..20].copy_from_slice(&synced_through.to_le_bytes());
        self.bytes[20..24].copy_from_slice(&prev_crc.to_le_bytes());
        self.bytes[24..26].copy_from_slice(&(self.used as u16).to_le_bytes());
        self.bytes[26..28].fill(0);
        let crc = crc32c::crc32c(&self.bytes[12..]);
        self.bytes[8..12].copy_from_slice(&crc.to_le_bytes());
        (&self.bytes, crc)
    }
}

impl Default for PageBuf {
    fn default() -> PageBuf {
        PageBuf::new()
    }
}

/// A fragment read back from a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fragment<'a> {
    /// Its place in the record.
    pub kind: FragmentType,
    /// Its bytes.
    pub data: &'a [u8],
}

/// Why a page is not a valid page of the expected generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageError {
    /// Another generation's page (stale), or never written.
    OtherLtn(u64),
    /// The checksum fails: torn or damaged.
    BadChecksum,
    /// Checksum fine but the index is not the expected one.
    WrongIndex(u32),
    /// Checksum fine but the payload does not parse (a bug or a forged page).
    BadPayload,
}

/// A decoded page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page<'a> {
    /// Pages of the group durable before this one was written.
    pub synced_through: u32,
    /// Checksum of the page this one follows.
    pub prev_crc: u32,
    /// This page's checksum.
    pub crc: u32,
    /// The fragments, in order.
    pub fragments: Vec<Fragment<'a>>,
}

/// The LTN and index a page claims, if its checksum holds (for the damage check).
pub fn claimed(page: &[u8]) -> Option<(u64, u32, u32)> {
    if page.len() != PAGE_BYTES {
        return None;
    }
    let crc = u32::from_le_bytes(page[8..12].try_into().unwrap());
    if crc != crc32c::crc32c(&page[12..]) {
        return None;
    }
    let ltn = u64::from_le_bytes(page[..8].try_into().unwrap());
    let index = u32::from_le_bytes(page[12..16].try_into().unwrap());
    let synced = u32::from_le_bytes(page[16..20].try_into().unwrap());
    Some((ltn, index, synced))
}

/// Decodes page `index` of generation `ltn`.
///
/// # Errors
/// Why the page does not belong there.
pub fn decode(page: &[u8], ltn: u64, index: u32) -> Result<Page<'_>, PageError> {
    assert_eq!(page.len(), PAGE_BYTES, "a log page is {PAGE_BYTES} bytes");
    let page_ltn = u64::from_le_bytes(page[..8].try_into().unwrap());
    let crc = u32::from_le_bytes(page[8..12].try_into().unwrap());
    if crc != crc32c::crc32c(&page[12..]) {
        return Err(if page_ltn != ltn {
            PageError::OtherLtn(page_ltn)
        } else {
            PageError::BadChecksum
        });
    }
    if page_ltn != ltn {
        return Err(PageError::OtherLtn(page_ltn));
    }
    let page_index = u32::from_le_bytes(page[12..16].try_into().unwrap());
    if page_index != index {
        return Err(PageError::WrongIndex(page_index));
    }
    let synced_through = u32::from_le_bytes(page[16..20].try_into().unwrap());
    let prev_crc = u32::from_le_bytes(page[20..24].try_into().unwrap());
    let used = u16::from_le_bytes(page[24..26].try_into().unwrap()) as usize;
    if used > PAGE_PAYLOAD_BYTES || page[26..28] != [0, 0] || synced_through > index {
        return Err(PageError::BadPayload);
    }
    let mut rest = &page[PAGE_HEADER_BYTES..PAGE_HEADER_BYTES + used];
    let mut out = Vec::new();
    while !rest.is_empty() {
        if rest.len() < FRAGMENT_HEADER_BYTES {
            return Err(PageError::BadPayload);
        }
        let len = u16::from_le_bytes(rest[..2].try_into().unwrap()) as usize;
        let kind = FragmentType::from_u8(rest[2]).ok_or(PageError::BadPayload)?;
        let data = rest.get(3..3 + len).ok_or(PageError::BadPayload)?;
        out.push(Fragment { kind, data });
        rest = &rest[3 + len..];
    }
    Ok(Page { synced_through, prev_crc, crc, fragments: out })
}

/// Joins fragments read back in order into records.
#[derive(Debug, Default)]
pub struct Reassembler {
    partial: Option<Vec<u8>>,
}

/// A fragment that cannot follow what came before it (a middle or last with no first, or a
/// full or first while a record is open): damage, or a bug, never a torn tail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfOrder(pub FragmentType);

impl Reassembler {
    /// An empty reassembler.
    pub fn new() -> Reassembler {
        Reassembler::default()
    }

    /// Takes the next fragment; returns the record it completes, if it completes one.
    ///
    /// # Errors
    /// [`OutOfOrder`] when the fragment cannot follow the previous one.
    pub fn push(&mut self, frag: Fragment<'_>) -> Result<Option<Vec<u8>>, OutOfOrder> {
        match (frag.kind, self.partial.as_mut()) {
            (FragmentType::Full, None) => Ok(Some(frag.data.to_vec())),
            (FragmentType::First, None) => {
                self.partial = Some(frag.data.to_vec());
                Ok(None)
            }
            (FragmentType::Middle, Some(p)) => {
                p.extend_from_slice(frag.data);
                Ok(None)
            }
            (FragmentType::Last, Some(p)) => {
                p.extend_from_slice(frag.data);
                Ok(self.partial.take())
            }
            (kind, _) => Err(OutOfOrder(kind)),
        }
    }

    /// Whether a record was begun and not finished.
    pub fn in_record(&self) -> bool {
        self.partial.is_some()
    }

    /// Drops a record begun and not finished (the log ended inside it).
    pub fn discard_partial(&mut self) {
        self.partial = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> PageBuf {
        let mut p = PageBuf::new();
        p.push(FragmentType::Full, b"record one");
        p.push(FragmentType::First, &[7u8; 100]);
        p
    }

    #[test]
    fn round_trip() {
        let mut p = sample();
        let bytes = p.seal(9, 3, 2, 0xABCD).0.to_vec();
        let page = decode(&bytes, 9, 3).unwrap();
        assert_eq!((page.synced_through, page.prev_crc), (2, 0xABCD));
        let frags = page.fragments;
        assert_eq!(frags.len(), 2);
        assert_eq!(frags[0], Fragment { kind: FragmentType::Full, data: b"record one" });
        assert_eq!(frags[1].kind, FragmentType::First);
    }

    #[test]
    fn stale_and_misplaced_pages_are_refused() {
        let mut p = sample();
        let bytes = p.seal(9, 3, 1, 5).0.to_vec();
        assert_eq!(decode(&bytes, 10, 3), Err(PageError::OtherLtn(9)));
        assert_eq!(decode(&bytes, 9, 4), Err(PageError::WrongIndex(3)));
        assert_eq!(decode(&[0u8; PAGE_BYTES], 1, 0), Err(PageError::OtherLtn(0)));
    }

    #[test]
    fn every_flipped_byte_and_every_torn_sector_is_caught() {
        let mut p = sample();
        let bytes = p.seal(9, 3, 1, 5).0.to_vec();
        for i in 0..PAGE_BYTES {
            let mut b = bytes.clone();
            b[i] ^= 0x40;
            assert!(decode(&b, 9, 3).is_err(), "flip at {i} accepted");
        }
        for sector in 1..8 {
            let mut b = bytes.clone();
            b[sector * 512..].fill(0xEE);
            assert!(decode(&b, 9, 3).is_err(), "tear after sector {sector} accepted");
        }
    }

    #[test]
    fn fragments_reassemble_and_out_of_order_ones_are_refused() {
        let mut r = Reassembler::new();
        let frag = |kind, data| Fragment { kind, data };
        assert_eq!(r.push(frag(FragmentType::Full, b"a")), Ok(Some(b"a".to_vec())));
        assert_eq!(r.push(frag(FragmentType::First, b"b")), Ok(None));
        assert!(r.in_record());
        assert_eq!(r.push(frag(FragmentType::Middle, b"c")), Ok(None));
        assert_eq!(r.push(frag(FragmentType::Last, b"d")), Ok(Some(b"bcd".to_vec())));
        assert_eq!(r.push(frag(FragmentType::Last, b"e")), Err(OutOfOrder(FragmentType::Last)));
        assert_eq!(r.push(frag(FragmentType::First, b"f")), Ok(None));
        assert_eq!(r.push(frag(FragmentType::Full, b"g")), Err(OutOfOrder(FragmentType::Full)));
        r.discard_partial();
        assert!(!r.in_record());
        assert_eq!(FragmentType::at(true, true), FragmentType::Full);
        assert_eq!(FragmentType::at(false, true), FragmentType::Last);
    }
}
