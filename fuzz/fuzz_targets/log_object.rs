//! Fuzz target `log_object`: see `checks::log_object` for what it checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shale_fuzz::checks::log_object(data));
