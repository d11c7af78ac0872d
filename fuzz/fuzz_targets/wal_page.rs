//! Fuzz target `wal_page`: see `lsm_checks::wal_page` for what it checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shale_fuzz::lsm_checks::wal_page(data));
