//! Fuzz target `hash_checkpoint`: see `hash_checks::hash_checkpoint` for what it checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shale_fuzz::hash_checks::hash_checkpoint(data));
