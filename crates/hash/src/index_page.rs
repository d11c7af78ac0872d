//! The on-volume page of the bounded index (`IndexMode::Bounded`): one bucket of the paged
//! digest table (`paged_table.rs`), holding the (digest, packed location) entries whose
//! digest hashes to it.
//!
//! ```text
//! offset  size     field (integers little-endian)
//! 0       8        magic b"SHIXPG01"
//! 8       8        table generation (u64): the table the page belongs to
//! 16      4        bucket (u32): which bucket of that table it is
//! 20      4        buckets (u32): how many buckets the table has (a power of two)
//! 24      2        entries n (u16), at most ENTRIES_MAX (254)
//! 26      2        reserved, 0
//! 28      16 x n   entries: digest (u64), packed location (u64, never 0)
//! ..      ..       zeros up to byte 4092
//! 4092    4        crc32c (u32) of bytes [0, 4092)
//! ```
//!
//! A page is self-describing: it names its table, bucket and table size, and every digest in
//! it must hash to its bucket, so a page read from the wrong place (a misdirected write, a
//! stale table, a slot reused) is refused as well as a damaged one. Every page of a live
//! table was written by this store (a table starts with all its pages written), so any page
//! that does not decode is damage, never an empty bucket.

use shale_space::log_page::PAGE_BYTES;

const MAGIC: &[u8; 8] = b"SHIXPG01";
/// Bytes before the entries.
const HEADER_BYTES: usize = 28;
/// Bytes of the checksum at the page's end.
const CRC_BYTES: usize = 4;
/// Bytes of one entry.
const ENTRY_BYTES: usize = 16;
/// Most entries a page holds.
pub const ENTRIES_MAX: usize = (PAGE_BYTES - HEADER_BYTES - CRC_BYTES) / ENTRY_BYTES;

/// Where a page belongs: what a decoded page must say of itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageAt {
    /// The table's generation.
    pub generation: u64,
    /// The bucket.
    pub bucket: u32,
    /// Buckets in the table (a power of two).
    pub buckets: u32,
}

/// The bucket of `digest` in a table of `buckets` buckets (a power of two). The digest is
/// mixed first: its top 16 bits are key bytes (the iterator bucket), not random. A table of
/// twice the buckets sends a digest of bucket `b` to `b` or `b + buckets`, which is what
/// lets the table double one bucket at a time.
pub fn bucket_of(digest: u64, buckets: u32) -> u32 {
    debug_assert!(buckets.is_power_of_two());
    let mut h = digest ^ (digest >> 33);
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    (h & u64::from(buckets - 1)) as u32
}

/// The page image of `entries` (at most [`ENTRIES_MAX`]) for bucket `at`.
///
/// # Panics
/// If there are too many entries or one has location 0 (bugs).
pub fn encode(at: PageAt, entries: &[(u64, u64)], out: &mut [u8]) {
    assert!(entries.len() <= ENTRIES_MAX, "a page holds at most {ENTRIES_MAX} entries");
    assert_eq!(out.len(), PAGE_BYTES);
    out.fill(0);
    out[..8].copy_from_slice(MAGIC);
    out[8..16].copy_from_slice(&at.generation.to_le_bytes());
    out[16..20].copy_from_slice(&at.bucket.to_le_bytes());
    out[20..24].copy_from_slice(&at.buckets.to_le_bytes());
    out[24..26].copy_from_slice(&(entries.len() as u16).to_le_bytes());
    for (i, &(d, loc)) in entries.iter().enumerate() {
        assert_ne!(loc, 0, "a location of 0 is not a record's");
        debug_assert_eq!(bucket_of(d, at.buckets), at.bucket);
        let o = HEADER_BYTES + i * ENTRY_BYTES;
        out[o..o + 8].copy_from_slice(&d.to_le_bytes());
        out[o + 8..o + 16].copy_from_slice(&loc.to_le_bytes());
    }
    let crc = crc32c::crc32c(&out[..PAGE_BYTES - CRC_BYTES]);
    out[PAGE_BYTES - CRC_BYTES..].copy_from_slice(&crc.to_le_bytes());
}

/// Decodes the page of bucket `at` into `entries` (cleared first).
///
/// # Errors
/// What is wrong, for a Corruption error.
pub fn decode(
    bytes: &[u8],
    at: PageAt,
    entries: &mut Vec<(u64, u64)>,
) -> std::result::Result<(), String> {
    entries.clear();
    if bytes.len() != PAGE_BYTES {
        return Err(format!("index page of {} bytes", bytes.len()));
    }
    let stored = u32::from_le_bytes(bytes[PAGE_BYTES - CRC_BYTES..].try_into().unwrap());
    if crc32c::crc32c(&bytes[..PAGE_BYTES - CRC_BYTES]) != stored {
        return Err("index page checksum mismatch".into());
    }
    if &bytes[..8] != MAGIC {
        return Err("not an index page (magic)".into());
    }
    let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap());
    let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap());
    let found = PageAt { generation: u64_at(8), bucket: u32_at(16), buckets: u32_at(20) };
    if found != at {
        return Err(format!("index page of {found:?} where {at:?} belongs"));
    }
    let n = usize::from(u16::from_le_bytes([bytes[24], bytes[25]]));
    if n > ENTRIES_MAX || bytes[26..28] != [0, 0] {
        return Err(format!("index page header: {n} entries"));
    }
    let end = HEADER_BYTES + n * ENTRY_BYTES;
    if bytes[end..PAGE_BYTES - CRC_BYTES].iter().any(|&b| b != 0) {
        return Err("bytes after the index page's entries".into());
    }
    for i in 0..n {
        let o = HEADER_BYTES + i * ENTRY_BYTES;
        let (d, loc) = (u64_at(o), u64_at(o + 8));
        if loc == 0 || !at.buckets.is_power_of_two() || bucket_of(d, at.buckets) != at.bucket {
            return Err(format!("index page entry {i} does not belong in bucket {}", at.bucket));
        }
        entries.push((d, loc));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full_page(at: PageAt) -> Vec<(u64, u64)> {
        (0u64..)
            .filter(|&d| bucket_of(d, at.buckets) == at.bucket)
            .take(ENTRIES_MAX)
            .map(|d| (d, d + 1))
            .collect()
    }

    #[test]
    fn a_full_page_round_trips_and_every_flip_or_truncation_is_refused() {
        let at = PageAt { generation: 7, bucket: 3, buckets: 8 };
        let entries = full_page(at);
        let mut page = vec![0u8; PAGE_BYTES];
        encode(at, &entries, &mut page);
        let mut got = Vec::new();
        decode(&page, at, &mut got).unwrap();
        assert_eq!(got, entries);
        for i in 0..PAGE_BYTES {
            let mut bad = page.clone();
            bad[i] ^= 0x01;
            assert!(decode(&bad, at, &mut got).is_err(), "flip at {i} accepted");
        }
        assert!(decode(&page[..PAGE_BYTES - 1], at, &mut got).is_err());
        for other in [
            PageAt { generation: 8, ..at },
            PageAt { bucket: 4, ..at },
            PageAt { buckets: 16, ..at },
        ] {
            assert!(decode(&page, other, &mut got).is_err(), "{other:?} accepted");
        }
    }

    #[test]
    fn doubling_the_table_sends_a_bucket_to_itself_or_its_twin() {
        for d in (0..10_000u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)) {
            let b = bucket_of(d, 64);
            assert!([b, b + 64].contains(&bucket_of(d, 128)));
        }
    }
}
