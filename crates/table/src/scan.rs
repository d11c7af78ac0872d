//! Scans: the rows of a range of primary keys, in key order, in batches of
//! [`SCAN_BATCH_ROWS`], each batch asked for with [`Scan::next`] until it answers `None`
//! (the paper's scan and next()).
//!
//! A scan keeps no list of keys: each batch walks the table's ordered index from just past
//! the last key the previous batch returned, so it sees the index as it is then (rows
//! inserted or erased since the scan began are found or skipped, as their keys fall).
//! Outside a transaction each batch is a read-committed transaction of its own.
//!
//! The read path of a batch:
//! 1. Walk the ordered index (under the store's mutex): the keys and the positions of their
//!    records, nothing read (`Storage::scan_batch`).
//! 2. Read ahead every block those records begin in that the cache lacks, each once however
//!    many of the rows it holds, in block order, up to 32 reads in flight, *outside* the
//!    store's mutex, so other transactions go on meanwhile; a block that anything put in
//!    the cache during the read is not taken from it (`cache.rs`).
//! 3. The same for the blocks the records run on into (their lengths are in the headers
//!    just read).
//! 4. Read each row under the transaction's lock of that row, as `select` reads one, by its
//!    position in the ordered index, skipping a key whose row is gone by then (a writer it
//!    waited for erased it, or rolled its insert back).
//!
//! A scan by another column (the paper's `scan(table, column, range)`, [`ColumnRange`]) has
//! no index of that column to walk: it walks the whole table in primary-key order as above
//! and keeps the rows whose value of the column lies in the range (values compared as bytes),
//! so each batch may read many rows to return few, and its rows come in primary-key order.

use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use crate::error::Result;
use crate::schema::Row;
use crate::store::{Shared, TableId};
use crate::txn::{Isolation, Transaction};
use crate::unlocked_read;

/// Rows per batch.
pub const SCAN_BATCH_ROWS: usize = 100;

/// Whose locks a scan reads under.
pub(crate) enum ScanTxn<'t> {
    /// A transaction's.
    Borrowed(&'t mut Transaction),
    /// A read-committed transaction per batch.
    Own(Arc<Shared>),
}

/// A range of one column's values, for a scan by a column other than the primary key: the
/// column's position in the schema and the bounds its value must lie in, as bytes.
#[derive(Clone, Debug)]
pub(crate) struct ColumnRange {
    pub column: usize,
    pub range: (Bound<Vec<u8>>, Bound<Vec<u8>>),
}

impl ColumnRange {
    fn holds(&self, row: &Row) -> bool {
        row.get(self.column).is_some_and(|v| self.range.contains(v))
    }
}

/// A scan in progress.
pub struct Scan<'t> {
    txn: ScanTxn<'t>,
    table: TableId,
    /// The keys still to scan: the lower bound moves past each batch's last key.
    range: (Bound<Vec<u8>>, Bound<Vec<u8>>),
    /// For a scan by another column: the rows kept.
    filter: Option<ColumnRange>,
    ended: bool,
}

impl std::fmt::Debug for Scan<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scan")
            .field("range", &self.range)
            .field("filter", &self.filter)
            .field("ended", &self.ended)
            .finish()
    }
}

impl<'t> Scan<'t> {
    pub(crate) fn new(
        txn: ScanTxn<'t>,
        table: TableId,
        range: (Bound<Vec<u8>>, Bound<Vec<u8>>),
    ) -> Scan<'t> {
        Scan { txn, table, range, filter: None, ended: false }
    }

    /// A scan of the whole table that returns the rows `filter` holds for.
    pub(crate) fn by_column(txn: ScanTxn<'t>, table: TableId, filter: ColumnRange) -> Scan<'t> {
        let all = (Bound::Unbounded, Bound::Unbounded);
        Scan { txn, table, range: all, filter: Some(filter), ended: false }
    }

    /// The next batch of up to [`SCAN_BATCH_ROWS`] rows, or `None` at the end.
    ///
    /// # Errors
    /// [`crate::Error::NoSuchTable`] (dropped since), [`crate::Error::LockTimeout`],
    /// [`crate::Error::Corruption`], a device error.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<Vec<Row>>> {
        self.next_up_to(SCAN_BATCH_ROWS)
    }

    /// The next batch of up to `rows` rows (at most [`SCAN_BATCH_ROWS`]), or `None` at the
    /// end: for a caller that wants fewer rows than a batch (YCSB's scans of 1 to 100), so
    /// that no row past them is read.
    ///
    /// # Errors
    /// As [`Scan::next`].
    pub fn next_up_to(&mut self, rows: usize) -> Result<Option<Vec<Row>>> {
        let limit = rows.clamp(1, SCAN_BATCH_ROWS);
        let mut own = match &self.txn {
            ScanTxn::Own(shared) => Some(Shared::begin(shared, Isolation::ReadCommitted)),
            ScanTxn::Borrowed(_) => None,
        };
        let txn: &mut Transaction = match (&mut self.txn, own.as_mut()) {
            (ScanTxn::Borrowed(t), _) => t,
            (ScanTxn::Own(_), Some(t)) => t,
            (ScanTxn::Own(_), None) => unreachable!("an owned scan has its transaction"),
        };
        let mut out = Vec::new();
        // Keys whose rows are gone by the time they are read (erased, or inserts rolled
        // back) leave a batch short; the walk goes on until it is full or the range ends.
        while out.len() < limit && !self.ended {
            let want = limit - out.len();
            let batch = txn.shared().storage_at(&crate::store::mutex_site::READ).scan_batch(
                self.table.0,
                &self.range,
                want,
            )?;
            self.ended = batch.ended;
            let entries = batch.entries;
            let positions: Vec<_> = entries.iter().map(|e| e.1).collect();
            unlocked_read::read_records_ahead(txn.shared(), self.table.0, &positions)?;
            let Some((last, _)) = entries.last() else { break };
            self.range.0 = Bound::Excluded(last.clone());
            for (key, _) in &entries {
                let Some(row) = txn.scan_read(self.table, key)? else { continue };
                if self.filter.as_ref().is_none_or(|f| f.holds(&row)) {
                    out.push(row);
                }
            }
        }
        if let Some(t) = own {
            t.commit()?;
        }
        Ok((!out.is_empty()).then_some(out))
    }
}
