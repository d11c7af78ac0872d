//! Replays every input under `fuzz/regressions/<target>/` through the same checks as the
//! cargo-fuzz targets, so inputs a fuzzer once found keep being tested on stable Rust without
//! cargo-fuzz. A check panics when a property breaks, which fails the test.

#[path = "../../../fuzz/src/checks.rs"]
mod checks;

/// The fuzz targets, named as in `fuzz/Cargo.toml`.
const TARGETS: [&str; 5] =
    ["log_object", "version_record", "format_header", "version_log_scan", "index_page"];

#[test]
fn log_object_regressions() {
    shale_testkit::fuzz_regressions::replay("log_object", checks::log_object);
}

#[test]
fn version_record_regressions() {
    shale_testkit::fuzz_regressions::replay("version_record", checks::version_record);
}

#[test]
fn format_header_regressions() {
    shale_testkit::fuzz_regressions::replay("format_header", checks::format_header);
}

#[test]
fn version_log_scan_regressions() {
    shale_testkit::fuzz_regressions::replay("version_log_scan", checks::version_log_scan);
}

#[test]
fn index_page_regressions() {
    shale_testkit::fuzz_regressions::replay("index_page", checks::index_page);
}

/// Every single-bit flip of every seed page, resealed or not, and truncations: answered,
/// never a panic; and the seeds as written decode.
#[test]
fn every_flip_and_truncation_of_an_index_page_is_answered() {
    for (_, name, input) in checks::index_page_seeds() {
        for resealed in [false, true] {
            let mut input = input.clone();
            if resealed {
                input[0] |= 1;
            }
            for at in 0..input.len() {
                for bit in [0x01u8, 0x20, 0x80] {
                    let mut bad = input.clone();
                    bad[at] ^= bit;
                    checks::index_page(&bad);
                }
            }
            for len in (0..input.len()).step_by(41) {
                checks::index_page(&input[..len]);
            }
        }
        let shape = shale_space::index_page::PageShape {
            entry_bytes: u16::from(input[1]),
            flags_known: input[2],
            legacy: (input[0] & 2 != 0).then_some(shale_space::index_page::Legacy::HashBucketV1),
        };
        let id = shale_space::index_page::PageId { generation: 7, number: 3, pages: 8 };
        let page = shale_space::index_page::decode(&input[21..], &shape, id);
        assert!(page.is_ok_and(|p| p.len() >= 30), "{name}");
    }
}

/// The committed seed inputs are the ones `checks::seeds` generates, so a format change that
/// makes them stale is noticed. `SHALE_WRITE_FUZZ_SEEDS=1` (re)writes them instead.
#[test]
fn committed_seeds_match_the_generator() {
    shale_testkit::fuzz_regressions::check_seeds(&TARGETS, checks::seeds());
}
