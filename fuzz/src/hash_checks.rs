//! Checks of the hash engine's decoders (`shale-hash`): its log records, its index
//! checkpoints and the bounded index's pages. Bad bytes give an error, never a panic or a
//! hang. Shared by the cargo-fuzz targets `hash_record`, `hash_checkpoint` and
//! `hash_index_page` and by `crates/hash/tests/fuzz_regressions.rs`, which replays
//! `fuzz/regressions/hash_*` on stable Rust.

use shale_hash::record::{Kind, Record};

const PAGE: usize = 4096;

/// `data` as a record: a record that decodes re-encodes to the same bytes, and its fields
/// are within the API's limits.
pub fn hash_record(data: &[u8]) {
    if let Some(r) = Record::decode(data) {
        assert!((shale_hash::KEY_BYTES_MIN..=shale_hash::KEY_BYTES_MAX).contains(&r.key.len()));
        assert!(r.value.len() <= shale_hash::VALUE_BYTES_MAX);
        assert!(r.kind == Kind::Store || r.value.is_empty());
        assert_eq!(r.encode(), data, "a decoded record re-encodes to itself");
    }
}

/// `data` as a checkpoint image: a flags byte (bit 0: recompute each page's checksum so the
/// decoder behind it is reached), the generation (u64 LE), then the pages (cut to whole
/// pages). The decoder answers, never panics.
pub fn hash_checkpoint(data: &[u8]) {
    if data.len() < 9 {
        return;
    }
    let flags = data[0];
    let generation = u64::from_le_bytes(data[1..9].try_into().unwrap());
    let mut image = data[9..].to_vec();
    image.truncate(image.len() / PAGE * PAGE);
    if flags & 1 != 0 {
        for page in image.chunks_exact_mut(PAGE) {
            let crc = crc32c::crc32c(&page[12..]);
            page[8..12].copy_from_slice(&crc.to_le_bytes());
        }
    }
    let _ = shale_hash::fuzz::decode_checkpoint(&image, generation);
}

/// Bytes before the page in a `hash_index_page` input.
const INDEX_PAGE_PREFIX: usize = 17;

/// `data` as a bounded index page: a flags byte (bit 0: recompute the page's checksum so the
/// checks behind it are reached), the table generation (u64 LE), bucket (u32 LE) and
/// buckets (u32 LE) the page should be, then the page (cut or zero-padded to 4096 bytes).
/// The page is read in the space layer's one index-page format, or, when it begins with the
/// magic of the format before it (`SHIXPG01`), in that one, which readers still accept (its
/// checksum, recomputed, is its last four bytes). The decoder answers, never panics; a page
/// it accepts re-encodes, in the format it was read in, to the same bytes.
pub fn hash_index_page(data: &[u8]) {
    if data.len() < INDEX_PAGE_PREFIX {
        return;
    }
    let flags = data[0];
    let generation = u64::from_le_bytes(data[1..9].try_into().unwrap());
    let bucket = u32::from_le_bytes(data[9..13].try_into().unwrap());
    let buckets = u32::from_le_bytes(data[13..17].try_into().unwrap());
    let mut page = data[INDEX_PAGE_PREFIX..].to_vec();
    page.resize(PAGE, 0);
    let legacy = &page[..8] == LEGACY_MAGIC;
    if flags & 1 != 0 {
        if legacy {
            let crc = crc32c::crc32c(&page[..PAGE - 4]);
            page[PAGE - 4..].copy_from_slice(&crc.to_le_bytes());
        } else {
            shale_space::index_page::seal(&mut page);
        }
    }
    if let Ok(entries) = shale_hash::fuzz::decode_index_page(&page, generation, bucket, buckets) {
        let again = if legacy {
            shale_hash::fuzz::encode_legacy_index_page(&entries, generation, bucket, buckets)
        } else {
            shale_hash::fuzz::encode_index_page(&entries, generation, bucket, buckets)
        };
        assert_eq!(again, page, "a decoded index page re-encodes to itself");
    }
}

/// The magic of the hash engine's index page before the one index-page format.
const LEGACY_MAGIC: &[u8; 8] = b"SHIXPG01";

/// The entries of the sample pages: 40 of bucket 5 of 16.
fn sample_entries() -> Vec<(u64, u64)> {
    shale_hash::fuzz::digests_of_bucket(5, 16, 40)
        .into_iter()
        .enumerate()
        .map(|(i, d)| (d, (i as u64 + 1) << 54 | 28 << 42 | i as u64))
        .collect()
}

/// The input prefix of the sample pages: `flags`, generation 3, bucket 5 of 16.
fn sample_prefix(flags: u8) -> Vec<u8> {
    let mut b = vec![flags];
    b.extend_from_slice(&3u64.to_le_bytes());
    b.extend_from_slice(&5u32.to_le_bytes());
    b.extend_from_slice(&16u32.to_le_bytes());
    b
}

/// A `hash_index_page` input: a valid page of 40 entries, bucket 5 of 16, generation 3.
pub fn sample_index_page_input(flags: u8) -> Vec<u8> {
    let mut b = sample_prefix(flags);
    b.extend_from_slice(&shale_hash::fuzz::encode_index_page(&sample_entries(), 3, 5, 16));
    b
}

/// The same page in the format before the one index-page format (`SHIXPG01`): the seeds
/// `seed-legacy-*` are the seeds `seed-valid` and `seed-resealed` were in that format.
pub fn sample_legacy_index_page_input(flags: u8) -> Vec<u8> {
    let mut b = sample_prefix(flags);
    b.extend_from_slice(&shale_hash::fuzz::encode_legacy_index_page(&sample_entries(), 3, 5, 16));
    b
}

/// The seed inputs of the three targets.
pub fn seeds() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let store = Record { kind: Kind::Store, seq: 7, key: b"key-1", value: b"value" }.encode();
    let delete = Record { kind: Kind::Delete, seq: 8, key: b"key-1", value: b"" }.encode();
    let checkpoint = |flags: u8| {
        let mut b = vec![flags];
        b.extend_from_slice(&5u64.to_le_bytes());
        b.extend_from_slice(&shale_hash::fuzz::sample_checkpoint_image(5));
        b
    };
    vec![
        ("hash_record", "store", store),
        ("hash_record", "delete", delete),
        ("hash_checkpoint", "valid", checkpoint(0)),
        ("hash_checkpoint", "resealed", checkpoint(1)),
        ("hash_index_page", "valid", sample_index_page_input(0)),
        ("hash_index_page", "resealed", sample_index_page_input(1)),
        ("hash_index_page", "legacy-valid", sample_legacy_index_page_input(0)),
        ("hash_index_page", "legacy-resealed", sample_legacy_index_page_input(1)),
    ]
}
