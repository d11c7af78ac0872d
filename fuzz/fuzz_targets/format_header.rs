//! Fuzz target `format_header`: see `checks::format_header` for what it checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shale_fuzz::checks::format_header(data));
