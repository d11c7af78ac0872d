//! Fuzz target `range_del_block`: see `lsm_checks::range_del_block` for what it checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shale_fuzz::lsm_checks::range_del_block(data));
