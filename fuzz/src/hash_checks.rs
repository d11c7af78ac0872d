//! Checks of the hash engine's decoders (`shale-hash`): its log records and its index
//! checkpoints. Bad bytes give an error, never a panic or a hang. Shared by the cargo-fuzz
//! targets `hash_record` and `hash_checkpoint` and by `crates/hash/tests/fuzz_regressions.rs`,
//! which replays `fuzz/regressions/hash_*` on stable Rust.

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

/// The seed inputs of both targets.
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
    ]
}
