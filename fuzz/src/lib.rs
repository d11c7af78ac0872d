//! Shared code of shale's fuzz targets.
//!
//! The checks live in `checks.rs` so that `crates/space/tests/fuzz_regressions.rs` can include
//! the very same file and replay the inputs under `fuzz/regressions/` on stable Rust, without
//! cargo-fuzz or libFuzzer.

pub mod checks;
