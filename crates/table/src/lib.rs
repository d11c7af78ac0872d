//! shale's table engine, after LATTE: tables of rows under a schema, stored in blocks on a
//! shale volume's slots and updated in place, with undo-only logging on persistent memory.
//!
//! Each table owns segments (one slot each) of 4 KiB blocks (`block.rs`) holding its rows
//! one after another (`row.rs`), a row spanning blocks where it must; a primary hash index in
//! memory finds a row by its key (`index.rs`). A change first persists its before-image in
//! the undo log (`undo.rs`, `undo_log.rs`) on persistent memory (`pmem.rs`: a file mapping
//! made durable with cache-line write-backs, or a simulated one), then writes its blocks in
//! place; a commit makes the blocks durable and expires the records; recovery rolls back
//! every record not expired. There is no redo log. See `docs/table.md`.
//!
//! ```
//! use shale_table::{Column, Isolation, Schema, TableOptions, TableStore};
//!
//! let dir = tempfile::tempdir()?;
//! let store = TableStore::open(dir.path(), TableOptions::default())?;
//! let schema = Schema::new(vec![Column::fixed("id", 4), Column::var("city", 40)])?;
//! let t = store.create_table("people", schema)?;
//! let mut txn = store.begin(Isolation::RepeatableRead);
//! txn.insert(t, &[&b"0001"[..], b"Lyon"])?;
//! txn.insert(t, &[&b"0002"[..], b"Kyoto"])?;
//! txn.commit()?;
//! let mut txn = store.begin(Isolation::ReadCommitted);
//! txn.erase(t, b"0001")?;
//! txn.abort()?; // the erase is rolled back
//! let mut scan = store.scan(t, ..)?;
//! assert_eq!(scan.next()?.unwrap().len(), 2);
//! assert_eq!(scan.next()?, None);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod block;
mod cache;
mod catalog;
mod error;
mod free_space;
mod index;
mod index_page;
mod lock;
mod options;
pub mod pmem;
mod row;
mod scan;
mod schema;
mod spill;
mod storage;
mod store;
mod txn;
pub mod undo;
mod undo_log;

pub use block::{BLOCK_BYTES, PAYLOAD_BYTES, Pos};
pub use error::{Error, Result};
pub use options::{PMEM_FILE_NAME, TableOptions};
pub use pmem::{FilePmem, FilePmemOptions, FlushMode, PmemLog, SimPmem};
pub use scan::{SCAN_BATCH_ROWS, Scan};
pub use schema::{COLUMNS_MAX, Column, ColumnType, NAME_BYTES_MAX, ROW_BYTES_MAX, Row, Schema};
pub use store::{RECLAIM_STEP_RECORDS, TableId, TableStats, TableStore};
pub use txn::{Isolation, Transaction};
pub use undo_log::{RING_OFFSET, UndoStats};
