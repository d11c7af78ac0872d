//! Fuzz target `version_record`: see `checks::version_record` for what it checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shale_fuzz::checks::version_record(data));
