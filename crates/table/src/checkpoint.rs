//! Checkpoints of a table store: a new store holding the committed state of a live one at
//! one instant, made while transactions go on (RocksDB's `Checkpoint::CreateCheckpoint`).
//!
//! The engine changes rows in place and keeps only undo records (LATTE): there is no older
//! version of a row to read once a writer has changed it. The instant is therefore made
//! with locks, and the state at it kept with copy-before-write (`frozen.rs`):
//! - A serializable transaction takes the shared lock of every table, in id order. A writer
//!   holds its table's intention-exclusive lock (or its exclusive one) until it commits or
//!   aborts, so once every shared lock is granted no transaction has an uncommitted change
//!   in any table: the rows are the committed state after some prefix of the commits, with
//!   no partial transaction. That is the instant: the storage starts keeping, for every row
//!   changed from then on ahead of the copy, its image at the instant, and the shared locks
//!   are released. Writers wait only for that moment (the transactions in flight to end),
//!   not for the copy: a writer whose `lock_timeout` passes meanwhile gets
//!   [`Error::LockTimeout`] (abort and retry it, as after any lock timeout); readers go on.
//! - The copy reads each table in key order, in batches, each under the storage's mutex,
//!   taking a row's image where it changed since the instant.
//! - A second transaction holds every table's intention-shared lock from before the instant
//!   to the end of the copy, so no table is dropped under it (a `drop_table` meanwhile
//!   waits, up to its `lock_timeout`); tables created after the instant are not copied.
//!
//! Taking the table locks one after another can meet a writer holding one table and
//! waiting for another the checkpoint holds: whichever waits past its timeout first gives
//! up, and a checkpoint that does releases what it holds and tries again, up to
//! [`LOCK_ATTEMPTS_MAX`] times. One checkpoint of a store runs at a time; a second waits.
//!
//! A logical copy: every committed row is read and inserted into a new store, which costs a
//! read and a rewrite of the data; the copy holds no dead row records and no undo log.
//! Tables keep their names and schemas; their ids in the copy are given anew. A plain copy
//! (`cp -a`) of the directory of a store that is open holds whatever the volume file and
//! the undo log held at each moment the copy read them, not a committed state.
//!
//! Stages, in this order:
//! 1. Check the destination and make a staging directory beside it
//!    ([`shale_space::CheckpointDir`]); a destination that holds anything is refused before
//!    anything is written.
//! 2. The instant: lock every table intention-shared (held to the end), then shared
//!    (serializable), then list the tables again: a table created meanwhile means starting
//!    over, so that the list and the locks describe one instant. Start keeping images,
//!    release the shared locks.
//! 3. Create a new store in the staging directory with the source's options and slot size,
//!    its undo log inside it, and the tables with their schemas.
//! 4. Read each table's rows at the instant, batch by batch, and insert them into the new
//!    store, in committed transactions of [`COPY_TXN_ROWS`] rows.
//! 5. Stop keeping images, end the guarding transaction, close the new store (every commit
//!    was durable when it returned) and rename the staging directory to the destination.

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use shale_space::CheckpointDir;

use crate::error::{Error, Result};
use crate::options::TableOptions;
use crate::scan::SCAN_BATCH_ROWS;
use crate::store::{Shared, TableId, TableStore};
use crate::txn::{Isolation, Transaction};

/// Rows the copy inserts in one transaction: few enough that its undo records stay far
/// within the undo log, many enough that commits (each a device flush) are a small cost.
pub const COPY_TXN_ROWS: usize = 256;

/// Attempts at taking every table's lock before the checkpoint gives up with
/// [`Error::LockTimeout`].
pub const LOCK_ATTEMPTS_MAX: u32 = 16;

/// Rows between two calls of a checkpoint's progress callback.
pub const PROGRESS_ROWS: u64 = 100_000;

impl TableStore {
    /// Makes a checkpoint of the store at `dst`: a new store, in a new directory, holding
    /// its committed rows at one instant. Returns the rows copied. See
    /// [`TableStore::checkpoint_with`].
    ///
    /// ```
    /// use shale_table::{Column, Schema, TableOptions, TableStore};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = TableStore::open(dir.path().join("live"), TableOptions::default())?;
    /// let schema = Schema::new(vec![Column::fixed("id", 4), Column::var("name", 32)])?;
    /// let users = store.create_table("users", schema)?;
    /// store.insert(users, &[&b"0001"[..], b"ada"])?;
    /// assert_eq!(store.checkpoint(&dir.path().join("copy"))?, 1);
    ///
    /// let copy = TableStore::open(dir.path().join("copy"), TableOptions::default())?;
    /// let users = copy.table_id("users").unwrap();
    /// assert_eq!(copy.select_cell(users, b"0001", "name")?, Some(b"ada".to_vec()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`TableStore::checkpoint_with`].
    pub fn checkpoint(&self, dst: &Path) -> Result<u64> {
        self.checkpoint_with(dst, &mut |_| {})
    }

    /// Makes a checkpoint of the store at `dst` (which must not exist, or be an empty
    /// directory), calling `progress` with the rows copied so far every [`PROGRESS_ROWS`]
    /// rows and after each table's copy (the last of which is the end). The new store holds
    /// the committed state after a prefix of the commits: every transaction committed
    /// before the call, none that commits after it returns, no part of any other. Writers
    /// wait only for the instant the state is taken at (the transactions in flight then to
    /// end), not for the copy; tables cannot be dropped until it ends (the module
    /// `checkpoint.rs` says why). It is built under a temporary name in `dst`'s parent
    /// (`.NAME.checkpoint-...`) and renamed to `dst` once durable: a crash midway never
    /// leaves at `dst` anything that looks like a checkpoint.
    ///
    /// # Errors
    /// [`Error::Space`] with an invalid argument when `dst` holds anything or is not a
    /// directory; [`Error::LockTimeout`] when the tables' locks could not all be had in
    /// [`LOCK_ATTEMPTS_MAX`] attempts; the source's read errors; the new store's errors. On
    /// any error nothing is left at `dst`.
    pub fn checkpoint_with(&self, dst: &Path, progress: &mut dyn FnMut(u64)) -> Result<u64> {
        let shared = self.shared();
        let _one_at_a_time = shared.checkpoint_running.lock();
        // Stage 1.
        let staged = CheckpointDir::begin(dst)?;
        // Stage 2.
        let Instant { guard, tables, keeping } = freeze(self)?;
        // Stage 3.
        let copy = TableStore::open(staged.staging(), copy_options(shared))?;
        // Stage 4.
        let copied = copy_tables(shared, &tables, &copy, progress);
        // Stage 5: both transactions only read; their end releases the locks.
        drop(keeping);
        let ended = guard.abort();
        drop(copy);
        let rows = copied?;
        ended?;
        staged.commit()?;
        Ok(rows)
    }
}

/// Keeps the images of stage 2 while it lives, and stops keeping them when dropped (at the
/// copy's end, or on any error).
struct Keeping<'s>(&'s Shared);

impl Drop for Keeping<'_> {
    fn drop(&mut self) {
        self.0.storage().frozen = None;
    }
}

/// What stage 2 leaves for the copy.
struct Instant<'s> {
    /// The transaction holding every table's intention-shared lock.
    guard: Transaction,
    /// The tables (name, id) at the instant.
    tables: Vec<(String, TableId)>,
    /// The images kept from then on.
    keeping: Keeping<'s>,
}

/// Stage 2: see [`Instant`].
fn freeze(store: &TableStore) -> Result<Instant<'_>> {
    for _ in 0..LOCK_ATTEMPTS_MAX {
        let mut tables = store.tables();
        tables.sort_by_key(|(_, id)| *id);
        let mut guard = store.begin(Isolation::ReadCommitted);
        let mut instant = store.begin(Isolation::Serializable);
        let locked = tables
            .iter()
            .try_for_each(|(_, id)| guard.lock_for_scan(*id))
            .and_then(|()| tables.iter().try_for_each(|(_, id)| instant.lock_for_scan(*id)));
        match locked {
            Ok(()) => {
                let mut now = store.tables();
                now.sort_by_key(|(_, id)| *id);
                if now == tables {
                    let ids = tables.iter().map(|(_, id)| id.0);
                    store.shared().storage().frozen = Some(crate::frozen::Frozen::new(ids));
                    let keeping = Keeping(store.shared());
                    instant.abort()?;
                    return Ok(Instant { guard, tables, keeping });
                }
                // A table created (or dropped) between the list and the locks: again.
                instant.abort()?;
                guard.abort()?;
            }
            // A table dropped between the list and its lock: again, without it.
            Err(Error::LockTimeout | Error::NoSuchTable(_)) => {
                instant.abort()?;
                guard.abort()?;
            }
            Err(e) => {
                instant.abort()?;
                guard.abort()?;
                return Err(e);
            }
        }
    }
    Err(Error::LockTimeout)
}

/// The new store's options: the source's, with its slot size, and its undo log in its own
/// directory (never the source's persistent memory file).
fn copy_options(shared: &Arc<Shared>) -> TableOptions {
    let mut opts = shared.opts.clone();
    let layout = shared.storage().layout();
    opts.segment_bytes = layout.slot_bytes;
    opts.version_log_bytes = layout.version_log_bytes;
    opts.pmem_path = None;
    opts.create_if_missing = true;
    opts
}

/// Stage 4: every table's rows at the instant, in transactions of [`COPY_TXN_ROWS`].
fn copy_tables(
    shared: &Arc<Shared>,
    tables: &[(String, TableId)],
    copy: &TableStore,
    progress: &mut dyn FnMut(u64),
) -> Result<u64> {
    let mut rows = 0u64;
    let mut next_report = PROGRESS_ROWS;
    for (name, id) in tables {
        let schema = (*shared.schema(*id)?).clone();
        let to = copy.create_table(name, schema)?;
        let mut writer = copy.begin(Isolation::ReadCommitted);
        let mut in_txn = 0;
        let mut range: (Bound<Vec<u8>>, Bound<Vec<u8>>) = (Bound::Unbounded, Bound::Unbounded);
        loop {
            // The keys (under the mutex), their blocks read ahead (outside it), then the rows
            // at the instant (under it again: a change meanwhile left its image).
            let batch = shared.storage().scan_batch(id.0, &range, SCAN_BATCH_ROWS)?;
            let positions: Vec<_> = batch.entries.iter().map(|e| e.1).collect();
            crate::unlocked_read::read_records_ahead(shared, id.0, &positions)?;
            let through = match (batch.ended, batch.entries.last()) {
                (false, Some((last, _))) => Some(last.clone()),
                _ => None,
            };
            let got = shared.storage().checkpoint_rows(id.0, &batch.entries, through.clone())?;
            for row in got {
                writer.insert(to, &row)?;
                in_txn += 1;
                rows += 1;
                if in_txn == COPY_TXN_ROWS {
                    writer.commit()?;
                    writer = copy.begin(Isolation::ReadCommitted);
                    in_txn = 0;
                }
                if rows >= next_report {
                    progress(rows);
                    next_report = rows + PROGRESS_ROWS;
                }
            }
            match through {
                Some(last) => range.0 = Bound::Excluded(last),
                None => break,
            }
        }
        writer.commit()?;
        // After each table, so a caller sees the copy pass from one table to the next.
        progress(rows);
    }
    if tables.is_empty() {
        progress(0);
    }
    Ok(rows)
}
