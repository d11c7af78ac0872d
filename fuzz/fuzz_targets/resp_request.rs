//! Fuzz target `resp_request`: see `serve_checks::resp_request` for what it checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shale_fuzz::serve_checks::resp_request(data));
