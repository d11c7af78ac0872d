//! shale's C ABI: one library (`libshale.so`, `libshale.a`) for the three engines, with the
//! header `include/shale.h` generated from this crate by cbindgen (`build.rs`).
//!
//! - `shale_kvs_*`: the hash engine behind its kvs API (after the SNIA KV API), sync and
//!   async, with a completion queue signalled on an eventfd (`kvs.rs`).
//! - `shale_db_*`, `shale_writebatch_*`: the lsm engine (`db.rs`).
//! - `shale_table_*`: the table engine: tables, rows, transactions, scans (`table.rs`).
//! - `shale_error_*`, `shale_status_name`, `shale_free`: errors and memory (`error.rs`,
//!   `mem.rs`).
//!
//! Every entry point checks its pointers (NULL for a required one is
//! `SHALE_INVALID_ARGUMENT`), runs inside `catch_unwind` (a panic is `SHALE_INTERNAL`,
//! never an unwind into C), and returns a `shale_status` as an `int`. The ownership and
//! thread rules open the header (`cbindgen.toml`) and are in `docs/capi.md`.
//!
//! The C names are the Rust names, so the types here are snake_case.
#![allow(non_camel_case_types)]

mod db;
mod error;
mod kvs;
mod mem;
mod shards;
mod table;

pub use db::*;
pub use error::{
    shale_error, shale_error_free, shale_error_message, shale_error_status, shale_status,
    shale_status_name,
};
pub use kvs::*;
pub use mem::shale_free;
pub use shards::*;
pub use table::*;
