//! Replays every input under `fuzz/regressions/<target>/` through the same checks as the
//! cargo-fuzz targets, so inputs a fuzzer once found keep being tested on stable Rust without
//! cargo-fuzz. A check panics when a property breaks, which fails the test.

#[path = "../../../fuzz/src/checks.rs"]
mod checks;

/// The fuzz targets, named as in `fuzz/Cargo.toml`.
const TARGETS: [&str; 4] = ["log_object", "version_record", "format_header", "version_log_scan"];

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

/// The committed seed inputs are the ones `checks::seeds` generates, so a format change that
/// makes them stale is noticed. `SHALE_WRITE_FUZZ_SEEDS=1` (re)writes them instead.
#[test]
fn committed_seeds_match_the_generator() {
    shale_testkit::fuzz_regressions::check_seeds(&TARGETS, checks::seeds());
}
