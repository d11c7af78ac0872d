//! Fuzz target `table_block`: see `table_checks::table_block` for what it checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shale_fuzz::table_checks::table_block(data));
