//! Fuzz target `hash_index_page`: see `hash_checks::hash_index_page` for what it checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shale_fuzz::hash_checks::hash_index_page(data));
