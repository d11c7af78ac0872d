//! Shared code of shale's fuzz targets.
//!
//! The checks live in `checks.rs` (space decoders), `lsm_checks.rs` (lsm decoders),
//! `hash_checks.rs` (the hash engine's records and checkpoints), `table_checks.rs` (the
//! table engine's blocks and undo records, `crates/table/tests/fuzz_regressions.rs`) and
//! `serve_checks.rs` (shale-serve's RESP parser, `crates/serve/tests/fuzz_regressions.rs`) so that
//! `crates/space/tests/fuzz_regressions.rs` and `crates/lsm/tests/fuzz_regressions.rs` can
//! include the very same files and replay the inputs under `fuzz/regressions/` on stable Rust,
//! without cargo-fuzz or libFuzzer.

pub mod checks;
pub mod hash_checks;
pub mod lsm_checks;
/// `shale-serve`'s RESP parser, included by path: it depends on nothing but std.
#[path = "../../crates/serve/src/resp.rs"]
pub mod resp;
pub mod serve_checks;
pub mod table_checks;
