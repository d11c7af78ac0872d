//! Fuzz target `version_log_scan`: see `checks::version_log_scan` for what it checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shale_fuzz::checks::version_log_scan(data));
