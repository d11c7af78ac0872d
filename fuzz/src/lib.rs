//! Shared code of shale's fuzz targets.
//!
//! The checks live in `checks.rs` (space decoders) and `lsm_checks.rs` (lsm decoders) so that
//! `crates/space/tests/fuzz_regressions.rs` and `crates/lsm/tests/fuzz_regressions.rs` can
//! include the very same files and replay the inputs under `fuzz/regressions/` on stable Rust,
//! without cargo-fuzz or libFuzzer.

pub mod checks;
pub mod lsm_checks;
