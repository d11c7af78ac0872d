//! Transactions: locks per isolation level around the storage's changes and reads.
//!
//! Isolation as built (after the paper's three levels; locks wait up to `lock_timeout`):
//! - every write takes the row's exclusive lock, held to commit or abort, after an
//!   intention-exclusive lock on its table (read committed, repeatable read) or the table's
//!   exclusive lock (serializable);
//! - read committed: a read takes the row's shared lock for the read only, so it waits for
//!   a writer of the row to finish and never sees uncommitted bytes (no dirty reads), but
//!   a second read may see a later commit;
//! - repeatable read: a read takes the row's shared lock and holds it to the end, so no
//!   other transaction changes a row read (no non-repeatable reads); rows not yet present
//!   are not locked (phantoms are possible);
//! - serializable: every read takes the table's shared lock and every write its exclusive
//!   lock, held to the end (the paper's table-level locks): transactions that touch one
//!   table run one writer or many readers at a time, so no write skew and no phantoms.
//!
//! A conflict waits; a wait past `lock_timeout` is [`Error::LockTimeout`], which leaves the
//! transaction open (abort it, or retry). Deadlocks end the same way, unless the transactions
//! declare their rows: a transaction begun with [`Declared`] rows
//! (`TableStore::begin_declared`, the paper's repeatable read) locks them all before it does
//! anything, in one order for every transaction, so such transactions never deadlock on
//! them.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::lock::{LockKey, LockMode};
use crate::scan::Scan;
use crate::schema::Row;
use crate::storage::{Change, CommitEnd, PointRead};

/// Reads outside the store's mutex a point read makes at most before it reads its row's
/// blocks under the mutex (a record's first block, then the blocks it runs on into: two
/// steps, more only when blocks are evicted as fast as they are read).
const POINT_READ_STEPS: usize = 4;
use crate::store::{Shared, TableId, mutex_site};

/// An isolation level.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Isolation {
    /// Reads see only committed data; a row read twice may change between.
    #[default]
    ReadCommitted,
    /// Rows read stay as read until the end.
    RepeatableRead,
    /// As if one at a time (table locks).
    Serializable,
}

/// The rows a transaction names when it begins (`TableStore::begin_declared`): LATTE's
/// repeatable read locks the rows it will touch up front. Each row to be read is locked
/// shared and each to be written exclusive (a row named both ways, exclusive), present or
/// not, held to the end whatever the isolation level; the tables' locks come first (their
/// intention locks, or under serializable their shared or exclusive locks), then the rows,
/// all in (table, key) order. Two transactions that declare rows therefore take the rows
/// they share in the same order: one waits for the other, neither holds a row the other
/// waits for. Rows not declared are locked as met, as in any transaction.
///
/// ```
/// # use shale_table::{Declared, TableId};
/// # fn f(t: TableId) {
/// let rows = Declared::new().read(t, b"alice").write(t, b"bob").write(t, b"carol");
/// assert_eq!(rows.len(), 3);
/// # }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Declared {
    /// By (table, key): whether the row is written.
    rows: BTreeMap<(u32, Vec<u8>), bool>,
}

impl Declared {
    /// No rows yet.
    pub fn new() -> Declared {
        Declared::default()
    }

    /// Names `key` of `table` as read: locked shared.
    pub fn read(mut self, table: TableId, key: &[u8]) -> Declared {
        self.rows.entry((table.0, key.to_vec())).or_insert(false);
        self
    }

    /// Names `key` of `table` as written: locked exclusive.
    pub fn write(mut self, table: TableId, key: &[u8]) -> Declared {
        self.rows.insert((table.0, key.to_vec()), true);
        self
    }

    /// Rows named.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether no row is named.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The tables named, each with whether any of its rows is written, in id order.
    fn tables(&self) -> BTreeMap<u32, bool> {
        let mut tables = BTreeMap::new();
        for (&(t, _), &write) in &self.rows {
            *tables.entry(t).or_insert(false) |= write;
        }
        tables
    }
}

/// An open transaction. Dropped without [`Transaction::commit`], it aborts.
pub struct Transaction {
    shared: Arc<Shared>,
    id: u64,
    isolation: Isolation,
    changes: Vec<Change>,
    locks: Vec<LockKey>,
    finished: bool,
}

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("id", &self.id)
            .field("isolation", &self.isolation)
            .field("changes", &self.changes.len())
            .finish()
    }
}

impl Transaction {
    pub(crate) fn new(shared: Arc<Shared>, id: u64, isolation: Isolation) -> Transaction {
        Transaction {
            shared,
            id,
            isolation,
            changes: Vec::new(),
            locks: Vec::new(),
            finished: false,
        }
    }

    /// Its id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Its isolation level.
    pub fn isolation(&self) -> Isolation {
        self.isolation
    }

    /// Takes a lock held to the end; returns whether it is new.
    fn lock(&mut self, key: LockKey, mode: LockMode) -> Result<bool> {
        let new = self.shared.locks.acquire(self.id, &key, mode, self.shared.opts.lock_timeout)?;
        if new {
            self.locks.push(key);
        }
        Ok(new)
    }

    fn lock_for_write(&mut self, table: TableId, key: &[u8]) -> Result<()> {
        let mode = match self.isolation {
            Isolation::Serializable => LockMode::Exclusive,
            _ => LockMode::IntentExclusive,
        };
        self.lock(LockKey::Table(table.0), mode)?;
        self.lock(LockKey::Row(table.0, key.to_vec()), LockMode::Exclusive)?;
        Ok(())
    }

    /// Locks for a read of `key`; returns a lock to release right after the read (read
    /// committed's short shared lock), if one was taken.
    fn lock_for_read(&mut self, table: TableId, key: &[u8]) -> Result<Option<LockKey>> {
        match self.isolation {
            Isolation::Serializable => {
                self.lock(LockKey::Table(table.0), LockMode::Shared)?;
                Ok(None)
            }
            Isolation::RepeatableRead => {
                self.lock(LockKey::Table(table.0), LockMode::IntentShared)?;
                self.lock(LockKey::Row(table.0, key.to_vec()), LockMode::Shared)?;
                Ok(None)
            }
            Isolation::ReadCommitted => {
                self.lock(LockKey::Table(table.0), LockMode::IntentShared)?;
                let key = LockKey::Row(table.0, key.to_vec());
                let timeout = self.shared.opts.lock_timeout;
                let new = self.shared.locks.acquire(self.id, &key, LockMode::Shared, timeout)?;
                Ok(new.then_some(key))
            }
        }
    }

    /// Takes the locks of `rows` (see [`Declared`]): tables, then rows, in order.
    pub(crate) fn lock_declared(&mut self, rows: &Declared) -> Result<()> {
        for (table, write) in rows.tables() {
            self.shared.schema(TableId(table))?;
            let mode = match (self.isolation, write) {
                (Isolation::Serializable, true) => LockMode::Exclusive,
                (Isolation::Serializable, false) => LockMode::Shared,
                (_, true) => LockMode::IntentExclusive,
                (_, false) => LockMode::IntentShared,
            };
            self.lock(LockKey::Table(table), mode)?;
        }
        for ((table, key), &write) in &rows.rows {
            let mode = if write { LockMode::Exclusive } else { LockMode::Shared };
            self.lock(LockKey::Row(*table, key.clone()), mode)?;
        }
        Ok(())
    }

    /// Locks the table for a scan under serializable (no phantoms), before its keys are
    /// collected.
    pub(crate) fn lock_for_scan(&mut self, table: TableId) -> Result<()> {
        let mode = match self.isolation {
            Isolation::Serializable => LockMode::Shared,
            _ => LockMode::IntentShared,
        };
        self.lock(LockKey::Table(table.0), mode)?;
        Ok(())
    }

    fn check_open(&self) -> Result<()> {
        if self.finished {
            return Err(Error::InvalidArgument("the transaction has ended".into()));
        }
        Ok(())
    }

    /// Inserts `row` (one value per column; its column 0 is the primary key).
    ///
    /// # Errors
    /// [`Error::NoSuchTable`], [`Error::WrongSize`], [`Error::DuplicateKey`],
    /// [`Error::LockTimeout`], [`Error::LogFull`], [`Error::Stopped`], a device error.
    pub fn insert<V: AsRef<[u8]>>(&mut self, table: TableId, row: &[V]) -> Result<()> {
        self.check_open()?;
        let encoded = self.shared.schema(table)?.encode_row(row)?;
        let key = row[0].as_ref();
        self.lock_for_write(table, key)?;
        let mut storage = self.shared.storage_for_change();
        let change = storage.insert(self.id, table.0, key, &encoded)?;
        let due = storage.write_behind_due();
        drop(storage);
        self.changes.push(change);
        self.write_behind(due)
    }

    /// Writes every dirty block now (outside the store's mutex, not durably) when `due`: a
    /// change left more than half the cache dirty, and dirty blocks are never evicted.
    fn write_behind(&self, due: bool) -> Result<()> {
        if due { self.shared.write_dirty() } else { Ok(()) }
    }

    /// Sets column `column` of the row of `key` to `value`, in place where the row's
    /// record has room (always for fixed columns), else by moving the row.
    ///
    /// # Errors
    /// [`Error::NoSuchColumn`], [`Error::WrongSize`], [`Error::KeyNotFound`],
    /// [`Error::InvalidArgument`] for the primary key column, and as
    /// [`Transaction::insert`].
    pub fn update(&mut self, table: TableId, key: &[u8], column: &str, value: &[u8]) -> Result<()> {
        self.check_open()?;
        let schema = self.shared.schema(table)?;
        schema.check_key(key)?;
        let c = schema.column_index(column)?;
        if c == 0 {
            return Err(Error::InvalidArgument(
                "the primary key cannot be updated: erase the row and insert it anew".into(),
            ));
        }
        schema.check_value(c, value)?;
        self.lock_for_write(table, key)?;
        let mut storage = self.shared.storage_for_change();
        let mut row = storage.select(table.0, key)?.ok_or(Error::KeyNotFound)?;
        row[c] = value.to_vec();
        let encoded = schema.encode_row(&row)?;
        let changes = storage.update(self.id, table.0, key, &encoded)?;
        let due = storage.write_behind_due();
        drop(storage);
        self.changes.extend(changes);
        self.write_behind(due)
    }

    /// Erases the row of `key`.
    ///
    /// # Errors
    /// [`Error::KeyNotFound`], and as [`Transaction::insert`].
    pub fn erase(&mut self, table: TableId, key: &[u8]) -> Result<()> {
        self.check_open()?;
        self.shared.schema(table)?.check_key(key)?;
        self.lock_for_write(table, key)?;
        let mut storage = self.shared.storage_for_change();
        let change = storage.erase(self.id, table.0, key)?;
        let due = storage.write_behind_due();
        drop(storage);
        self.changes.push(change);
        self.write_behind(due)
    }

    /// The row of `key`, or `None`.
    ///
    /// # Errors
    /// [`Error::NoSuchTable`], [`Error::WrongSize`] for a key of the wrong size,
    /// [`Error::LockTimeout`], [`Error::Corruption`], a device error.
    pub fn select(&mut self, table: TableId, key: &[u8]) -> Result<Option<Row>> {
        self.check_open()?;
        self.shared.schema(table)?.check_key(key)?;
        let short = self.lock_for_read(table, key)?;
        let got = self.point_read(table, key);
        if let Some(k) = short {
            self.shared.locks.release(self.id, &k);
        }
        got
    }

    /// One cell of the row of `key`, or `None` when there is no such row.
    ///
    /// # Errors
    /// [`Error::NoSuchColumn`], and as [`Transaction::select`].
    pub fn select_cell(
        &mut self,
        table: TableId,
        key: &[u8],
        column: &str,
    ) -> Result<Option<Vec<u8>>> {
        let c = self.shared.schema(table)?.column_index(column)?;
        Ok(self.select(table, key)?.map(|mut row| row.swap_remove(c)))
    }

    /// The rows whose primary keys are in `range`, in key order, 100 per batch.
    ///
    /// # Errors
    /// [`Error::NoSuchTable`], [`Error::LockTimeout`], a device error.
    pub fn scan(
        &mut self,
        table: TableId,
        range: impl std::ops::RangeBounds<Vec<u8>>,
    ) -> Result<Scan<'_>> {
        self.check_open()?;
        let range = (range.start_bound().cloned(), range.end_bound().cloned());
        self.lock_for_scan(table)?;
        self.shared.storage().table(table.0)?;
        Ok(Scan::new(crate::scan::ScanTxn::Borrowed(self), table, range))
    }

    /// The rows whose value of `column` is in `range` (compared as bytes), in primary-key
    /// order, 100 per batch: the paper's `scan(table, column, range)`. By the primary key
    /// (column 0) this is [`Transaction::scan`]; by any other column there is no index of it,
    /// so the scan walks the whole table and reads every row to keep those in range (the
    /// module `scan`).
    ///
    /// # Errors
    /// [`Error::NoSuchColumn`], and as [`Transaction::scan`].
    pub fn scan_column(
        &mut self,
        table: TableId,
        column: &str,
        range: impl std::ops::RangeBounds<Vec<u8>>,
    ) -> Result<Scan<'_>> {
        let c = self.shared.schema(table)?.column_index(column)?;
        if c == 0 {
            return self.scan(table, range);
        }
        self.check_open()?;
        let range = (range.start_bound().cloned(), range.end_bound().cloned());
        self.lock_for_scan(table)?;
        self.shared.storage().table(table.0)?;
        let filter = crate::scan::ColumnRange { column: c, range };
        Ok(Scan::by_column(crate::scan::ScanTxn::Borrowed(self), table, filter))
    }

    /// Commits: makes every change durable, then releases the locks.
    ///
    /// # Errors
    /// [`Error::Stopped`] or the device's error; the store is then stopped and the changes
    /// are rolled back at the next open.
    pub fn commit(mut self) -> Result<()> {
        self.check_open()?;
        self.finished = true;
        let r = self.commit_changes();
        self.release();
        r
    }

    /// Commit stage 1 (the dirty blocks' writes and the device flush, outside the store's
    /// mutex) through the store's shared flusher, then stages 2 and 3 under the mutex, and
    /// the write of the expiry where the spill area's page log packed it (a group's, outside
    /// the mutex). The row locks are held throughout, so no other transaction sees the rows
    /// before the commit is durable.
    fn commit_changes(&mut self) -> Result<()> {
        if self.changes.is_empty() {
            return Ok(());
        }
        self.shared.check_running()?;
        // Every change is in the cache: a round begun from here on writes its blocks and
        // then flushes them.
        self.shared.flush_round()?;
        let ended = self.shared.commit_flushed(self.id, &self.changes)?;
        let packed = match ended {
            CommitEnd::Committed { expiry_packed } => expiry_packed,
            CommitEnd::MarkRefused(e) => {
                self.abort_changes()?;
                return Err(e);
            }
        };
        if packed {
            // The expiry (the commit point) is packed in the undo log's page log: written
            // for every commit waiting by one write, before this one returns.
            let synced = self.shared.group.sync_log(|| self.shared.sync_spill_log());
            if let Err(e) = synced {
                return Err(self.shared.storage().stop(e));
            }
        }
        Ok(())
    }

    /// Aborts: writes every change's before-image back, then releases the locks.
    ///
    /// # Errors
    /// As [`Transaction::commit`].
    pub fn abort(mut self) -> Result<()> {
        self.check_open()?;
        self.finish_abort()
    }

    fn finish_abort(&mut self) -> Result<()> {
        self.finished = true;
        let r = self.abort_changes();
        self.release();
        r
    }

    /// Abort stages 1 to 3 (`storage.rs`): the before-images written back in the cache under
    /// the store's mutex; the blocks written and the device flushed outside it; the records
    /// expired under it (`Shared::roll_back`).
    fn abort_changes(&mut self) -> Result<()> {
        if self.changes.is_empty() {
            return Ok(());
        }
        self.shared.roll_back(&self.changes)
    }

    fn release(&mut self) {
        self.shared.locks.release_all(self.id, &self.locks);
        self.locks.clear();
        self.changes.clear();
    }

    /// The row of `key`, with the store's lock shared where that serves (issue #45 part
    /// 2): where the ordered index places its record and every block of it is cached, read
    /// there in one shared hold; where blocks are missing, they are registered in that hold,
    /// read outside the lock (`unlocked_read.rs`) and the row put together from them in a
    /// further shared hold, which registers the blocks the record runs on into if still
    /// missing (up to [`POINT_READ_STEPS`] reads); the blocks read are left for the cache,
    /// cached by the reader only if the lock is free at once. Anything else (a key the
    /// ordered index does not know, a block raced by a change, a record still missing
    /// blocks after the last step) goes the exclusive way as before: one hold for a cached
    /// row, else the blocks read outside the lock and the row read in the hold that ends
    /// that read, a step more for a record running into blocks not cached; past
    /// [`POINT_READ_STEPS`] (blocks evicted as fast as they are read), the row is read under
    /// the lock.
    fn point_read(&self, table: TableId, key: &[u8]) -> Result<Option<Row>> {
        match self.shared.select_cached(table, key) {
            Some(PointRead::Row(row)) => return Ok(row),
            Some(PointRead::Read(mut wanted)) => {
                let _loading = self.shared.loading_read();
                let mut held = Vec::new();
                for step in 1..=POINT_READ_STEPS {
                    let read = crate::unlocked_read::read_registered(&self.shared, &wanted);
                    let more = step < POINT_READ_STEPS;
                    match self.shared.end_read_shared(table, key, &wanted, read, &mut held, more) {
                        Some(PointRead::Row(row)) => return Ok(row),
                        Some(PointRead::Read(next)) => wanted = next,
                        None => break,
                    }
                }
            }
            None => {}
        }
        let mut step = self.shared.storage_at(&mutex_site::READ).select_or_read(table.0, key)?;
        for n in 1.. {
            let wanted = match step {
                PointRead::Row(row) => return Ok(row),
                PointRead::Read(wanted) => wanted,
            };
            let read = crate::unlocked_read::read_registered(&self.shared, &wanted);
            let last = n >= POINT_READ_STEPS;
            step = self
                .shared
                .storage_at(&mutex_site::READ)
                .end_read_and_select(table.0, key, &wanted, read, last)?;
        }
        unreachable!("the last step reads the row")
    }

    /// Reads for a scan's batch: the row of `key` under this transaction's locks, as
    /// `select` reads it, but found by the ordered index (no index page is read).
    pub(crate) fn scan_read(&mut self, table: TableId, key: &[u8]) -> Result<Option<Row>> {
        self.check_open()?;
        let short = self.lock_for_read(table, key)?;
        let got = self.shared.storage_at(&mutex_site::READ).select_scanned(table.0, key);
        if let Some(k) = short {
            self.shared.locks.release(self.id, &k);
        }
        got
    }

    /// What the transaction's store shares.
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        if !self.finished {
            // An error here leaves the changes active in the undo log (the store stopped):
            // the next open rolls them back.
            let _ = self.finish_abort();
        }
    }
}

impl Transaction {
    /// Ends a transaction that made no change (a store's own lock holder).
    pub(crate) fn commit_empty(mut self) {
        debug_assert!(self.changes.is_empty());
        self.finished = true;
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use shale_io::SimDevice;

    use crate::{Column, Isolation, Schema, SimPmem, TableOptions, TableStore, UndoLogPlace};

    /// A commit of one change with its undo record in the spill area expires it holding
    /// the undo log latch alone: while the latch is taken (as a write of the log holds
    /// it), the store's lock stays free for everyone else, and the commit ends once the
    /// latch is let go.
    #[test]
    fn a_one_change_commit_waits_for_the_undo_log_latch_without_the_store_lock() {
        let d = SimDevice::new((8 << 10) + 2 * (64 << 10) + 32 * (64 << 10), 4096, 7).unwrap();
        let opts = TableOptions {
            space_reclaim_interval: None,
            segment_bytes: 64 << 10,
            undo_spill_bytes: 128 << 10,
            version_log_bytes: 64 << 10,
            undo_log: UndoLogPlace::Volume,
            ..TableOptions::default()
        };
        let store = TableStore::open_device(
            Arc::new(d.clone()),
            SimPmem::new(crate::RING_OFFSET + (64 << 10)).boxed(),
            opts,
        )
        .unwrap();
        let schema = Schema::new(vec![Column::fixed("id", 8), Column::var("v", 100)]).unwrap();
        let t = store.create_table("t", schema).unwrap();
        let mut txn = store.begin(Isolation::ReadCommitted);
        txn.insert(t, &[b"k0000001".to_vec(), b"one".to_vec()]).unwrap();
        assert_eq!(txn.changes.len(), 1);
        assert_eq!(txn.changes[0].0.ring, crate::undo_log::Ring::Spill);
        // The round first (its write of the log takes the latch too), then the latch held
        // across the commit's expiry.
        txn.shared.flush_round().unwrap();
        let shared = txn.shared.clone();
        shale_space::contention::enable(true);
        let latch_waits = || {
            shale_space::contention::snapshot()
                .iter()
                .filter(|s| s.name == "table: undo log latch")
                .map(|s| s.contended)
                .sum::<u64>()
        };
        let waited_before = latch_waits();
        let latch = shared.hold_undo_latch();
        let committing = std::thread::spawn(move || {
            let ended = txn.shared.commit_flushed(txn.id, &txn.changes);
            (ended.is_ok(), txn)
        });
        // Once the commit waits for the latch (counted before it blocks), the store's lock
        // is free.
        while latch_waits() == waited_before {
            std::thread::yield_now();
        }
        assert!(shared.store_lock_free(), "the commit holds the store's lock");
        assert!(!committing.is_finished(), "the commit ended with the latch held");
        drop(latch);
        let (ok, mut txn) = committing.join().unwrap();
        assert!(ok);
        txn.finished = true;
        txn.release();
        let row = store.select(t, b"k0000001").unwrap().expect("committed");
        assert_eq!(row[1], b"one");
        shale_space::contention::enable(false);
    }
}
