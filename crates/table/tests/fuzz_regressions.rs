//! Replays every input under `fuzz/regressions/table_*/` through the same checks as the
//! cargo-fuzz targets `table_block` and `table_undo_record`, on stable Rust, plus inputs
//! made here: every single-byte flip and many truncations of a valid block and of valid
//! undo records, with and without their checksums recomputed, and crafted nonsense (a
//! record whose length is huge or below its header, a row header whose slot runs past the
//! block, an occupancy past the payload) must give an error or data, never a panic.

#[path = "../../../fuzz/src/table_checks.rs"]
mod table_checks;

use shale_table::BLOCK_BYTES;

const TARGETS: [&str; 2] = ["table_block", "table_undo_record"];

#[test]
fn table_block_regressions() {
    shale_testkit::fuzz_regressions::replay("table_block", table_checks::table_block);
}

#[test]
fn table_undo_record_regressions() {
    shale_testkit::fuzz_regressions::replay("table_undo_record", table_checks::table_undo_record);
}

fn flagged(flags: u8, bytes: &[u8]) -> Vec<u8> {
    let mut b = vec![flags];
    b.extend_from_slice(bytes);
    b
}

#[test]
fn every_flip_and_truncation_of_a_block_is_answered() {
    let block = shale_table::fuzz::sample_block(7, 3);
    assert!(shale_table::fuzz::check_block(&block, 7, 3).unwrap().unwrap().rows.len() == 2);
    for flags in [0u8, 1] {
        let input = flagged(flags, &block);
        for at in 1..input.len() {
            for bit in [0x01u8, 0x80] {
                let mut bad = input.clone();
                bad[at] ^= bit;
                table_checks::table_block(&bad);
            }
        }
        for len in (0..input.len()).step_by(37) {
            table_checks::table_block(&input[..len]);
        }
    }
}

#[test]
fn crafted_blocks_are_answered() {
    let block = shale_table::fuzz::sample_block(7, 3);
    let crafted = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = block.clone();
        f(&mut b);
        shale_table::fuzz::reseal_block(&mut b);
        table_checks::table_block(&flagged(0, &b));
        shale_table::fuzz::check_block(&b, 7, 3)
    };
    // Occupancy past the payload, a first row past the occupancy.
    assert!(crafted(&|b| b[24..26].copy_from_slice(&5000u16.to_le_bytes())).is_err());
    assert!(crafted(&|b| b[26..28].copy_from_slice(&4000u16.to_le_bytes())).is_err());
    // A row whose slot runs far past the block, and one whose length is u32::MAX: the walk
    // of the block stops there.
    assert!(crafted(&|b| b[32 + 4..32 + 8].copy_from_slice(&u32::MAX.to_le_bytes())).is_ok());
    assert!(crafted(&|b| b[32 + 4..32 + 8].copy_from_slice(&100_000u32.to_le_bytes())).is_ok());
    // Reserved bytes that are not zero.
    assert!(crafted(&|b| b[14] = 1).is_err());
    assert!(crafted(&|b| b[30] = 0x80).is_err());
    // A block of another table or number.
    assert!(shale_table::fuzz::check_block(&block, 8, 3).is_err());
    assert!(shale_table::fuzz::check_block(&block, 7, 4).is_err());
    assert!(shale_table::fuzz::check_block(&[0; BLOCK_BYTES], 7, 3).unwrap().is_none());
}

#[test]
fn every_flip_and_truncation_of_an_undo_record_is_answered() {
    for (target, _, input) in table_checks::seeds() {
        if target != "table_undo_record" {
            continue;
        }
        for flags in [0u8, 1] {
            let mut input = input.clone();
            input[0] = flags;
            for at in 1..input.len() {
                for bit in [0x01u8, 0x80, 0xFF] {
                    let mut bad = input.clone();
                    bad[at] ^= bit;
                    table_checks::table_undo_record(&bad);
                }
            }
            for len in 0..input.len() {
                table_checks::table_undo_record(&input[..len]);
            }
        }
    }
    // A length far past the bytes, and one below the header, resealed.
    for len in [u32::MAX, 1 << 30, 3, 0] {
        let (_, _, mut input) = table_checks::seeds().remove(3);
        input[1 + 12..1 + 16].copy_from_slice(&len.to_le_bytes());
        input[0] = 1;
        table_checks::table_undo_record(&input);
    }
}

/// The committed seed inputs are the ones `table_checks::seeds` makes now.
/// `SHALE_WRITE_FUZZ_SEEDS=1` (re)writes them instead.
#[test]
fn committed_seeds_match_the_generator() {
    shale_testkit::fuzz_regressions::check_seeds(&TARGETS, table_checks::seeds());
}
