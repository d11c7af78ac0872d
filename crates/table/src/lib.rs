//! shale's table engine, after LATTE: tables of rows under a schema, stored in blocks on a
//! shale volume's slots and updated in place, with undo-only logging on persistent memory.
//!
//! Each table owns segments (one slot each) of 4 KiB blocks (`block.rs`) holding its rows
//! one after another (`row.rs`), a row spanning blocks where it must; a primary hash index
//! finds a row by its key (`index.rs`), in memory up to a threshold and in index pages on
//! the volume past it (`index_page.rs`); an ordered index in memory serves scans in key
//! order (`ordered_index.rs`), reading a batch's blocks together (`batch_io.rs`). A change
//! first persists its before-image in the undo log (`undo.rs`, `undo_log.rs`) on persistent
//! memory (`pmem.rs`: a file mapping made durable with cache-line write-backs, or a
//! simulated one), or in the log's spill area on the volume when that is full (`spill.rs`),
//! then writes its blocks in place; a commit makes the blocks durable and expires the
//! records; recovery rolls back every record not expired. There is no redo log. The slots
//! of erased rows are found by a reclaiming pass and taken by new rows (`free_space.rs`).
//! See `docs/table.md`.
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

mod batch_io;
mod block;
mod cache;
mod catalog;
mod check;
mod checkpoint;
mod error;
mod free_space;
mod frozen;
mod group_flush;
mod index;
mod index_page;
mod lock;
mod options;
mod ordered_index;
pub mod pmem;
mod pmem_map;
pub mod pmem_owner;
mod row;
mod scan;
mod schema;
mod spill;
mod storage;
mod store;
mod txn;
pub mod undo;
mod undo_file;
mod undo_log;
mod unlocked_read;
mod volume_undo;

pub use block::{BLOCK_BYTES, PAYLOAD_BYTES, Pos};

/// The block and undo record decoders for the fuzz targets (`fuzz/src/table_checks.rs`);
/// not an API.
#[doc(hidden)]
pub mod fuzz {
    use crate::block::{self, BlockState, HEADER_BYTES, NO_ROW};
    use crate::row::{self, RowHeader, RowState};

    /// What a block that passed its checks holds.
    #[derive(Debug)]
    pub struct CheckedBlock {
        /// Payload bytes in use.
        pub used: usize,
        /// Row record headers that begin in it, from its first row on, as far as they
        /// parse and lie inside the occupancy, with their payload offsets.
        pub rows: Vec<(usize, RowState, u32, u32)>,
    }

    /// Checks `b` as block `number` of `table` (the read path's check), then walks the row
    /// record headers that begin in it. `Ok(None)`: a blank block.
    ///
    /// # Errors
    /// What the check found wrong.
    pub fn check_block(b: &[u8], table: u32, number: u64) -> Result<Option<CheckedBlock>, String> {
        let h = match block::check(b, table, number, 0).map_err(|e| e.to_string())? {
            BlockState::Blank => return Ok(None),
            BlockState::Valid(h) => h,
        };
        let used = h.used as usize;
        let mut rows = Vec::new();
        if h.first_row != NO_ROW {
            let mut at = h.first_row as usize;
            while at + row::HEADER_BYTES <= used {
                let from = HEADER_BYTES + at;
                let Some(r) = RowHeader::decode(&b[from..from + row::HEADER_BYTES]) else {
                    break;
                };
                if r.state == RowState::Free {
                    break;
                }
                rows.push((at, r.state, r.slot_len, r.row_len));
                // A record running into the next block ends the walk of this one.
                at = match at.checked_add(r.record_len()) {
                    Some(next) if next < used => next,
                    _ => break,
                };
                at = row::record_start(crate::Pos { block: 0, offset: at as u32 }).offset as usize;
            }
        }
        Ok(Some(CheckedBlock { used, rows }))
    }

    /// Recomputes a block's checksum, so fuzz inputs reach the checks behind it.
    pub fn reseal_block(b: &mut [u8]) {
        if b.len() >= 8 {
            let crc = crc32c::crc32c(&b[8..]);
            b[4..8].copy_from_slice(&crc.to_le_bytes());
        }
    }

    /// A valid block of `table` and `number` holding a few row records, for seed inputs.
    pub fn sample_block(table: u32, number: u64) -> Vec<u8> {
        let mut b = block::new_block(table, number);
        let mut at = 0;
        for (state, row_len, slot) in [(RowState::Live, 20, 24), (RowState::Erased, 9, 9)] {
            let h = RowHeader { state, slot_len: slot, row_len };
            b[HEADER_BYTES + at..HEADER_BYTES + at + row::HEADER_BYTES]
                .copy_from_slice(&h.encode());
            b[HEADER_BYTES + at + row::HEADER_BYTES..HEADER_BYTES + at + h.record_len() - 1]
                .fill(0x5A);
            at += h.record_len();
        }
        block::seal(&mut b, at as u16, 0);
        b
    }

    /// Recomputes an undo record's checksum over the length its header names (clamped to
    /// the bytes given), so fuzz inputs reach the field checks behind it.
    pub fn reseal_undo_record(b: &mut [u8]) {
        crate::undo::reseal(b);
    }
}
pub use check::{StoreReport, TableReport, check_store};
pub use checkpoint::{COPY_TXN_ROWS, LOCK_ATTEMPTS_MAX, PROGRESS_ROWS};
pub use error::{Error, Result};
pub use options::{PMEM_FILE_NAME, TableOptions, UndoLogPlace};
pub use pmem::{FilePmem, FilePmemOptions, FlushMode, PmemLog, SimPmem};
pub use scan::{SCAN_BATCH_ROWS, Scan};
pub use schema::{COLUMNS_MAX, Column, ColumnType, NAME_BYTES_MAX, ROW_BYTES_MAX, Row, Schema};
/// The kind of an [`Error`] ([`Error::kind`]), shared by every shale layer's errors.
pub use shale_io::ErrorKind;
pub use store::{RECLAIM_STEP_RECORDS, TableId, TableStats, TableStore};
pub use txn::{Declared, Isolation, Transaction};
pub use undo_file::dax_at;
pub use undo_log::{RING_OFFSET, UndoStats};
