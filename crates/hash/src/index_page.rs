//! The entries of the bounded index's pages (`IndexMode::Bounded`): one page per bucket of
//! the paged digest table (`paged_table.rs`), holding the (digest, packed location) entries
//! whose digest hashes to it. The page around them is the space layer's one index-page
//! format (`shale_space::index_page`, byte layout there), which names the page's table
//! (generation), bucket (page number) and bucket count (pages); this module owns only the
//! entries and the rule that ties them to their bucket.
//!
//! ```text
//! entry (16 bytes, integers little-endian)
//! 0       8        digest (u64): must hash to the page's bucket (`bucket_of`)
//! 8       8        packed location (u64), never 0
//! ```
//!
//! Every page of a live table was written by this store (a table starts with all its pages
//! written), so any page that does not decode is damage, never an empty bucket. Snapshots
//! written before the one format hold `SHIXPG01` pages, which the space layer still reads
//! for this shape (`Legacy::HashBucketV1`); this build writes only the one format.

use shale_space::index_page::{self, Legacy, PAGE_BYTES, PageId, PageShape};

/// The shape of the bounded index's pages: 16-byte entries, no flags, and the hash engine's
/// page before the one format still read.
const SHAPE: PageShape =
    PageShape { entry_bytes: 16, flags_known: 0, legacy: Some(Legacy::HashBucketV1) };
/// Most entries a page holds.
pub const ENTRIES_MAX: usize = SHAPE.entries_max();

/// The page of bucket `bucket` of the table of generation `generation` and `buckets` buckets.
pub fn page_id(generation: u64, bucket: u32, buckets: u32) -> PageId {
    PageId { generation, number: bucket, pages: buckets }
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

/// The page image of `entries` (at most [`ENTRIES_MAX`]) as page `at`.
///
/// # Panics
/// If there are too many entries or one has location 0 (bugs).
pub fn encode(at: PageId, entries: &[(u64, u64)], out: &mut [u8]) {
    assert!(entries.len() <= ENTRIES_MAX, "a page holds at most {ENTRIES_MAX} entries");
    index_page::encode(out, &SHAPE, at, 0, entries.len(), |i, e| {
        let (d, loc) = entries[i];
        assert_ne!(loc, 0, "a location of 0 is not a record's");
        debug_assert_eq!(bucket_of(d, at.pages), at.number);
        e[..8].copy_from_slice(&d.to_le_bytes());
        e[8..].copy_from_slice(&loc.to_le_bytes());
    });
}

/// Decodes the page `at` into `entries` (cleared first).
///
/// # Errors
/// What is wrong, for a Corruption error.
pub fn decode(
    bytes: &[u8],
    at: PageId,
    entries: &mut Vec<(u64, u64)>,
) -> std::result::Result<(), String> {
    entries.clear();
    let page = index_page::decode(bytes, &SHAPE, at).map_err(|r| r.to_string())?;
    if !at.pages.is_power_of_two() {
        return Err(format!("index page of a table of {} buckets", at.pages));
    }
    for (i, e) in page.entries().enumerate() {
        let d = u64::from_le_bytes(e[..8].try_into().unwrap());
        let loc = u64::from_le_bytes(e[8..].try_into().unwrap());
        if loc == 0 || bucket_of(d, at.pages) != at.number {
            return Err(format!("index page entry {i} does not belong in bucket {}", at.number));
        }
        entries.push((d, loc));
    }
    Ok(())
}

/// A page image in the format before the one format (`SHIXPG01`), for the tests and fuzz
/// seeds that check it is still read; nothing in a store writes one.
pub fn encode_legacy(at: PageId, entries: &[(u64, u64)]) -> Vec<u8> {
    let bytes: Vec<u8> = entries
        .iter()
        .flat_map(|&(d, l)| d.to_le_bytes().into_iter().chain(l.to_le_bytes()))
        .collect();
    let mut page = vec![0u8; PAGE_BYTES];
    index_page::legacy::encode_hash_bucket_v1(&mut page, at, &bytes);
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full_page(at: PageId) -> Vec<(u64, u64)> {
        (0u64..)
            .filter(|&d| bucket_of(d, at.pages) == at.number)
            .take(ENTRIES_MAX)
            .map(|d| (d, d + 1))
            .collect()
    }

    #[test]
    fn a_full_page_round_trips_and_every_flip_or_truncation_is_refused() {
        assert_eq!(ENTRIES_MAX, 254, "as many entries as the page before the one format");
        let at = page_id(7, 3, 8);
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
        for other in [page_id(8, 3, 8), page_id(7, 4, 8), page_id(7, 3, 16)] {
            assert!(decode(&page, other, &mut got).is_err(), "{other:?} accepted");
        }
    }

    /// A page the envelope accepts is still refused when an entry does not belong in it.
    #[test]
    fn an_entry_of_another_bucket_or_of_location_0_is_refused() {
        let at = page_id(7, 3, 8);
        let stray = (0u64..).find(|&d| bucket_of(d, 8) != 3).unwrap();
        let mine = (0u64..).find(|&d| bucket_of(d, 8) == 3).unwrap();
        for bad in [[(mine, 5u64), (stray, 6)], [(mine, 5), (mine, 0)]] {
            let bytes: Vec<u8> = bad
                .iter()
                .flat_map(|&(d, l)| d.to_le_bytes().into_iter().chain(l.to_le_bytes()))
                .collect();
            let mut page = vec![0u8; PAGE_BYTES];
            index_page::encode(&mut page, &SHAPE, at, 0, 2, |i, e| {
                e.copy_from_slice(&bytes[i * 16..(i + 1) * 16])
            });
            let err = decode(&page, at, &mut Vec::new()).unwrap_err();
            assert!(err.contains("entry 1"), "{err}");
        }
    }

    #[test]
    fn a_page_written_before_the_one_format_reads_back() {
        let at = page_id(7, 3, 8);
        let entries = full_page(at);
        let page = encode_legacy(at, &entries);
        let mut got = Vec::new();
        decode(&page, at, &mut got).unwrap();
        assert_eq!(got, entries);
        assert!(decode(&page, page_id(6, 3, 8), &mut got).is_err());
        let mut bad = page.clone();
        bad[200] ^= 0x20;
        assert!(decode(&bad, at, &mut got).is_err());
    }

    #[test]
    fn doubling_the_table_sends_a_bucket_to_itself_or_its_twin() {
        for d in (0..10_000u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)) {
            let b = bucket_of(d, 64);
            assert!([b, b + 64].contains(&bucket_of(d, 128)));
        }
    }
}
