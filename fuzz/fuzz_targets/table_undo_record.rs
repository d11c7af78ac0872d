//! Fuzz target `table_undo_record`: see `table_checks::table_undo_record` for what it checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| shale_fuzz::table_checks::table_undo_record(data));
