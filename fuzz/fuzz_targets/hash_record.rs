//! Fuzz target `hash_record`: see `hash_checks::hash_record` for what it checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shale_fuzz::hash_checks::hash_record(data));
