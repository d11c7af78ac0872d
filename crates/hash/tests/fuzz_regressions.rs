//! Replays every input under `fuzz/regressions/hash_*/` through the same checks as the
//! cargo-fuzz targets `hash_record`, `hash_checkpoint` and `hash_index_page`, on stable Rust,
//! plus inputs made here: every truncation and single-byte flip of a valid checkpoint and of
//! a valid bounded index page, with and without checksums recomputed, must give an error or
//! data, never a panic.

#[path = "../../../fuzz/src/hash_checks.rs"]
mod hash_checks;

const TARGETS: [&str; 3] = ["hash_record", "hash_checkpoint", "hash_index_page"];

#[test]
fn hash_record_regressions() {
    shale_testkit::fuzz_regressions::replay("hash_record", hash_checks::hash_record);
}

#[test]
fn hash_checkpoint_regressions() {
    shale_testkit::fuzz_regressions::replay("hash_checkpoint", hash_checks::hash_checkpoint);
}

#[test]
fn hash_index_page_regressions() {
    shale_testkit::fuzz_regressions::replay("hash_index_page", hash_checks::hash_index_page);
}

#[test]
fn every_flip_and_truncation_of_an_index_page_is_answered() {
    let samples: [fn(u8) -> Vec<u8>; 2] =
        [hash_checks::sample_index_page_input, hash_checks::sample_legacy_index_page_input];
    for sample in samples {
        for flags in [0u8, 1] {
            let input = sample(flags);
            for at in 0..input.len() {
                for bit in [0x01u8, 0x80] {
                    let mut bad = input.clone();
                    bad[at] ^= bit;
                    hash_checks::hash_index_page(&bad);
                }
            }
            for len in (0..input.len()).step_by(37) {
                hash_checks::hash_index_page(&input[..len]);
            }
        }
        // The page as written decodes (in either format: the one format, or the one before
        // it that readers still accept), and a flipped bit is refused.
        let input = sample(0);
        let page = &input[17..];
        assert_eq!(shale_hash::fuzz::decode_index_page(page, 3, 5, 16).unwrap().len(), 40);
        let mut flipped = page.to_vec();
        flipped[100] ^= 1;
        assert!(shale_hash::fuzz::decode_index_page(&flipped, 3, 5, 16).is_err());
    }
}

#[test]
fn every_flip_and_truncation_of_a_checkpoint_is_answered() {
    let mut input = vec![0u8];
    input.extend_from_slice(&5u64.to_le_bytes());
    input.extend_from_slice(&shale_hash::fuzz::sample_checkpoint_image(5));
    for flags in [0u8, 1] {
        input[0] = flags;
        for at in 9..input.len() {
            for bit in [0x01u8, 0x80] {
                let mut bad = input.clone();
                bad[at] ^= bit;
                hash_checks::hash_checkpoint(&bad);
            }
        }
        for len in (0..input.len()).step_by(61) {
            hash_checks::hash_checkpoint(&input[..len]);
        }
    }
    // The image as written decodes.
    assert!(shale_hash::fuzz::decode_checkpoint(&input[9..], 5).is_ok());
}

/// The committed seed inputs are the ones `hash_checks::seeds` makes now.
/// `SHALE_WRITE_FUZZ_SEEDS=1` (re)writes them instead.
#[test]
fn committed_seeds_match_the_generator() {
    shale_testkit::fuzz_regressions::check_seeds(&TARGETS, hash_checks::seeds());
}
