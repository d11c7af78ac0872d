//! Scans: the rows of a range of primary keys, in key order, in batches of
//! [`SCAN_BATCH_ROWS`], each batch asked for with [`Scan::next`] until it answers `None`
//! (the paper's scan and next()).
//!
//! The index is a hash, so a scan starts by collecting the keys in the range (reading each
//! row's key) and sorting them; each batch then reads its rows under the transaction's
//! locks, skipping keys erased since the start. Outside a transaction each batch is a
//! read-committed transaction of its own.

use std::sync::Arc;

use crate::error::Result;
use crate::schema::Row;
use crate::store::{Shared, TableId};
use crate::txn::{Isolation, Transaction};

/// Rows per batch.
pub const SCAN_BATCH_ROWS: usize = 100;

/// Whose locks a scan reads under.
pub(crate) enum ScanTxn<'t> {
    /// A transaction's.
    Borrowed(&'t mut Transaction),
    /// A read-committed transaction per batch.
    Own(Arc<Shared>),
}

/// A scan in progress.
pub struct Scan<'t> {
    txn: ScanTxn<'t>,
    table: TableId,
    keys: Vec<Vec<u8>>,
    next: usize,
}

impl std::fmt::Debug for Scan<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scan").field("keys", &self.keys.len()).field("next", &self.next).finish()
    }
}

impl<'t> Scan<'t> {
    pub(crate) fn new(txn: ScanTxn<'t>, table: TableId, keys: Vec<Vec<u8>>) -> Scan<'t> {
        Scan { txn, table, keys, next: 0 }
    }

    /// The next batch of up to [`SCAN_BATCH_ROWS`] rows, or `None` at the end.
    ///
    /// # Errors
    /// [`crate::Error::LockTimeout`], [`crate::Error::Corruption`], a device error.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<Vec<Row>>> {
        let mut rows = Vec::new();
        let mut own = match &self.txn {
            ScanTxn::Own(shared) => Some(Shared::begin(shared, Isolation::ReadCommitted)),
            ScanTxn::Borrowed(_) => None,
        };
        while rows.len() < SCAN_BATCH_ROWS && self.next < self.keys.len() {
            let key = &self.keys[self.next];
            let txn: &mut Transaction = match (&mut self.txn, own.as_mut()) {
                (ScanTxn::Borrowed(t), _) => t,
                (ScanTxn::Own(_), Some(t)) => t,
                (ScanTxn::Own(_), None) => unreachable!("an owned scan has its transaction"),
            };
            if let Some(row) = txn.scan_read(self.table, key)? {
                rows.push(row);
            }
            self.next += 1;
        }
        if let Some(t) = own {
            t.commit()?;
        }
        Ok((!rows.is_empty()).then_some(rows))
    }
}
