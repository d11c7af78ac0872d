//! Fuzz target `index_page`: see `checks::index_page` for what it checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shale_fuzz::checks::index_page(data));
