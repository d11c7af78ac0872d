//! The table store's handle: opening (recovery), tables, transactions and the auto-commit
//! calls.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use parking_lot::{Mutex, RwLock};
use shale_io::{DeviceRef, FileOptions};
use shale_space::Volume;

use crate::error::{Error, Result};
use crate::group_flush::GroupFlush;
use crate::lock::{LockKey, LockManager, LockMode};
use crate::options::{TableOptions, UndoLogPlace};
use crate::pmem::{FilePmem, PmemLog, SimPmem};
use crate::scan::{Scan, ScanTxn};
use crate::schema::{Row, Schema};
use crate::storage::{Storage, UndoSetup};

/// The contention profile's sites of the store's mutex, one per part of the engine that
/// takes it, so that the profile says which part holds it (their sum is the mutex's).
pub(crate) mod mutex_site {
    use shale_space::contention::Site;
    /// A read: the read-ahead's checks, a scan's reads, a point read that missed the
    /// shared fast path.
    pub(crate) static READ: Site = Site::new("table: store mutex: read");
    /// A point read's steps with the lock taken shared (`Storage::select_cached`, and
    /// `Storage::end_read_shared` after a read of the blocks it lacked): such reads run side
    /// by side.
    pub(crate) static READ_SHARED: Site = Site::new("table: store mutex: shared read");
    /// The blocks point reads read with the lock shared, cached by the reader when the
    /// lock was free (taken only if free at once: `Shared::end_read_shared`).
    pub(crate) static CACHING: Site = Site::new("table: store mutex: caching reads");
    /// A change: stages 2 to 6 of an insert, update or erase.
    pub(crate) static CHANGE: Site = Site::new("table: store mutex: change");
    /// A commit's share of its group's round: the dirty blocks' writes.
    pub(crate) static ROUND: Site = Site::new("table: store mutex: commit round");
    /// A commit's end: the check before it (the lock shared), and the expiry of its undo
    /// records.
    pub(crate) static COMMIT: Site = Site::new("table: store mutex: commit expiry");
    /// An abort, and everything else (tables, stats, the reclaiming pass, checkpoints).
    pub(crate) static OTHER: Site = Site::new("table: store mutex: other");
}

/// The contention profile's site of the block writer's latch (`Shared::writer`).
static BLOCK_WRITER: shale_space::contention::Site =
    shale_space::contention::Site::new("table: block writer latch");
use crate::txn::{Declared, Isolation, Transaction};
use crate::undo_file::{self, FileId};
use crate::undo_log::UndoStats;

/// A table's id, given by [`TableStore::create_table`]; never used again once it is
/// dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableId(pub u32);

/// Blocks deferred by point reads past which one that is not alone caches them
/// (`Shared::end_read_shared`).
const CACHING_BATCH: usize = 32;

/// Tries of the store's lock exclusive, each after yielding the core, before a thread
/// queues for it (`Site::write_yielding`): a queued writer lets no reader in, so with 64
/// threads on 2 cores its wait behind a preempted reader stopped every reader for
/// milliseconds.
const WRITE_TRIES: usize = 32;

/// The store's lock taken exclusive.
pub(crate) type StorageGuard<'a> =
    shale_space::contention::Timed<parking_lot::RwLockWriteGuard<'a, Storage>>;

/// The store's lock over its storage: exclusive for everything but a point read's steps
/// ([`Shared::select_cached`], [`Shared::end_read_shared`]), which take it shared.
struct StorageLock(RwLock<Storage>);

// SAFETY: `RwLock<Storage>` is `Sync` only if `Storage` is, and it is not (its queues and
// its persistent memory log are `Send` trait objects, used through `&mut`). Threads share
// a `&Storage` at once only through `Shared::select_cached`, `Shared::end_read_shared` and
// `Shared::check_running`, the three places the lock is taken shared, and
// `Storage::select_cached`, `Storage::end_read_shared`, `Storage::deferred_blocks` and
// `Storage::check_running` read no more than the tables' metadata and ordered indexes,
// the block cache, the volume's layout and the stop's reason, which are `Sync` (asserted
// below): the cache's changes through `&self` are a CLOCK bit (an atomic) and reads
// registered, forgotten or deferred under its own mutexes. Every other access holds the
// lock exclusive, where `Storage: Send` is all that is needed.
unsafe impl Sync for StorageLock {}

const _: () = {
    const fn sync<T: Sync>() {}
    sync::<crate::catalog::TableMeta>();
    sync::<crate::ordered_index::OrderedIndex>();
    sync::<crate::cache::BlockCache>();
    sync::<crate::schema::Schema>();
    sync::<shale_space::Volume>();
    sync::<Option<String>>();
};

/// What the store and its transactions share.
pub(crate) struct Shared {
    /// The store's lock (named "the store's mutex" throughout: every change and most reads
    /// take it exclusive); a point read of a row whose blocks are cached takes it shared.
    storage: StorageLock,
    /// Held by a running checkpoint: one at a time (`checkpoint.rs`).
    pub checkpoint_running: Mutex<()>,
    /// Commits share device flushes, made outside `storage`'s mutex.
    pub group: GroupFlush,
    /// The block writer's latch and queue: held by a round's leader while it writes the
    /// dirty blocks outside `storage`'s mutex (`Shared::flush_round`), so one writer of
    /// blocks runs at a time and two writes of one block never race; and by a table's drop,
    /// so that no write in flight lands in the slots it frees. Taken before `storage`'s
    /// mutex, never while holding it.
    writer: Mutex<crate::batch_io::BlockQueue>,
    /// The undo log latch over the spill area's log (`Storage`'s, shared): the rounds'
    /// writes of the log are made under it alone, outside `storage`'s mutex.
    spill: crate::storage::SpillLatch,
    pub locks: LockManager,
    /// Each table's schema, read by every operation to check its row or key: kept apart
    /// from `storage` (and shared, not cloned) so that those checks do not take the
    /// store's mutex. Changed only under that mutex, beside the catalog.
    schemas: RwLock<HashMap<u32, Arc<Schema>>>,
    /// Where scans' reads outside `storage`'s mutex take a queue, one per read-ahead: the
    /// volume's pool (a queue opened when none is idle: at most one per thread scanning at
    /// once), or the store's queue pairs.
    pub read_queues: crate::batch_io::ReadQueues,
    pub opts: TableOptions,
    next_txn: AtomicU64,
    /// Point reads loading blocks with the store's lock shared right now
    /// ([`Shared::loading_read`]): where one is alone, it caches what it read at once.
    loading_reads: AtomicUsize,
}

/// A point read loading blocks with the store's lock shared, counted in
/// `Shared::loading_reads` while it lives.
pub(crate) struct LoadingRead<'a>(&'a AtomicUsize);

impl Drop for LoadingRead<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Shared {
    /// The store's mutex over its storage, taken through the contention profile's site
    /// of everything but reads, changes and commits (`shale_space::contention`).
    pub(crate) fn storage(&self) -> StorageGuard<'_> {
        self.storage_at(&mutex_site::OTHER)
    }

    /// The store's mutex, counted at `site` of [`mutex_site`].
    pub(crate) fn storage_at(
        &self,
        site: &'static shale_space::contention::Site,
    ) -> StorageGuard<'_> {
        site.write_yielding(&self.storage.0, WRITE_TRIES)
    }

    /// A point read's first step with the store's lock shared (`Storage::select_cached`):
    /// the row, or the blocks to read for it; `None` where the caller reads with the lock
    /// exclusive.
    pub(crate) fn select_cached(
        &self,
        table: TableId,
        key: &[u8],
    ) -> Option<crate::storage::PointRead> {
        let storage = mutex_site::READ_SHARED.read(&self.storage.0);
        storage.select_cached(table.0, key)
    }

    /// The store's lock for a change (stages 2 to 6), taken once the undo log latch is
    /// free: a change appends its undo record under the latch with the lock exclusive, and
    /// a write of the spill area's log holds the latch across its device write, so a
    /// change that met such a write with the lock held stopped the store meanwhile. Waiting
    /// for the latch first, holding nothing (and letting it go: the order is the lock,
    /// then the latch), leaves only a write that begins in between to wait for under the
    /// lock.
    pub(crate) fn storage_for_change(&self) -> StorageGuard<'_> {
        drop(crate::storage::lock_spill(&self.spill));
        self.storage_at(&mutex_site::CHANGE)
    }

    /// [`Error::Stopped`] if the store stopped, with the store's lock shared (a commit's
    /// first check: taken exclusive, it stopped every reader behind it for a flag).
    pub(crate) fn check_running(&self) -> Result<()> {
        mutex_site::COMMIT.read(&self.storage.0).check_running()
    }

    /// Commit stages 2 and 3 (`Storage::commit_flushed`) once the commit's round is done.
    /// A transaction of one change whose undo record is in the spill area (the log on the
    /// volume: the default) expires it under the undo log latch alone, then settles it with
    /// the store's lock exclusive for a moment: that latch is held across the log's device
    /// writes (a round's, a group's expiries), and a commit waiting for it with the lock
    /// exclusive held up every reader and writer of the store meanwhile. Expiring before
    /// settling keeps the record's row away from the reclaiming pass until after the commit
    /// point, as before. Every other commit takes the lock for both stages.
    ///
    /// # Errors
    /// [`Error::Stopped`]; the log's error, which stops the store.
    pub(crate) fn commit_flushed(
        &self,
        txn: u64,
        changes: &[crate::storage::Change],
    ) -> Result<crate::storage::CommitEnd> {
        let [(handle, _)] = changes else {
            return self.storage_at(&mutex_site::COMMIT).commit_flushed(txn, changes);
        };
        if handle.ring != crate::undo_log::Ring::Spill {
            return self.storage_at(&mutex_site::COMMIT).commit_flushed(txn, changes);
        }
        self.check_running()?;
        let expired = crate::storage::lock_spill(&self.spill)
            .as_mut()
            .expect("a spilled record has a spill area")
            .expire_packed(&[*handle]);
        let expiry_packed = expired.map_err(|e| self.storage().stop(e))?;
        self.storage_at(&mutex_site::COMMIT).settle_commit(txn, changes);
        Ok(crate::storage::CommitEnd::Committed { expiry_packed })
    }

    /// The undo log latch, taken (tests: a write of the log holding it).
    #[cfg(test)]
    pub(crate) fn hold_undo_latch(
        &self,
    ) -> shale_space::contention::Held<'_, Option<crate::spill::SpillLog>> {
        crate::storage::lock_spill(&self.spill)
    }

    /// Whether the store's lock could be taken exclusive at once (tests).
    #[cfg(test)]
    pub(crate) fn store_lock_free(&self) -> bool {
        self.storage.0.try_write().is_some()
    }

    /// Counts a point read that loads blocks with the store's lock shared, until the
    /// returned guard drops.
    pub(crate) fn loading_read(&self) -> LoadingRead<'_> {
        self.loading_reads.fetch_add(1, Ordering::Relaxed);
        LoadingRead(&self.loading_reads)
    }

    /// A point read's next step with the store's lock shared (`Storage::end_read_shared`):
    /// the row, the blocks to read next, or `None` where the caller reads with the lock
    /// exclusive. Once the read ends, the blocks deferred are cached, if the lock is free
    /// at that instant, by a reader alone (so a row read twice in a row is cached the
    /// second time) or by one that finds [`CACHING_BATCH`] waiting; else they wait for the
    /// next holder. A reader never waits for the lock exclusive: that wait stops every
    /// reader that comes after it, and with 64 threads on 2 cores, a shared holder
    /// preempted meanwhile made it milliseconds long; and each exclusive hold, however
    /// short, is a moment readers meet it taken, hence the batches.
    pub(crate) fn end_read_shared(
        &self,
        table: TableId,
        key: &[u8],
        wanted: &[(u64, u64)],
        read: Result<Vec<shale_io::AlignedBuf>>,
        held: &mut Vec<(u64, Vec<u8>)>,
        more: bool,
    ) -> Option<crate::storage::PointRead> {
        let (step, cache_now) = {
            let storage = mutex_site::READ_SHARED.read(&self.storage.0);
            let step = storage.end_read_shared(table.0, key, wanted, read, held, more);
            let ended = !matches!(step, Some(crate::storage::PointRead::Read(_)));
            let alone = self.loading_reads.load(Ordering::Relaxed) <= 1;
            (step, ended && (alone || storage.deferred_blocks() >= CACHING_BATCH))
        };
        if cache_now {
            if let Some(mut storage) = mutex_site::CACHING.try_write(&self.storage.0) {
                storage.cache_deferred();
            }
        }
        step
    }

    pub(crate) fn schema(&self, table: TableId) -> Result<Arc<Schema>> {
        self.schemas
            .read()
            .get(&table.0)
            .cloned()
            .ok_or_else(|| Error::NoSuchTable(format!("id {}", table.0)))
    }

    /// Makes every change made so far durable for a commit: joins the next write round of
    /// the group flush, whose leader writes every dirty block ([`Shared::write_dirty`]), and
    /// then the next device flush, each for every commit waiting. A failure stops the store.
    ///
    /// # Errors
    /// [`Error::Stopped`], the device's error.
    pub(crate) fn flush_round(&self) -> Result<()> {
        self.group.flush(|| self.write_dirty()).map_err(|e| self.storage().stop(e))
    }

    /// Abort stages 1 to 3 (`storage.rs`) of `changes`, in two holds of the store's mutex:
    /// under the block writer's latch, (1) the before-images written back in the cache and
    /// the dirty blocks taken as a round takes them (`Storage::begin_write_dirty`), in one
    /// hold; (2) outside it, the undo log written, the blocks written and the device
    /// flushed, at once, in this thread, without joining a round (the group's counts stay
    /// those of commits); (3) in the second hold, the blocks unpinned and the records
    /// expired. A failed write or flush stops the store.
    ///
    /// # Errors
    /// [`Error::Stopped`], the device's error, a read's error during the rollback.
    pub(crate) fn roll_back(&self, changes: &[crate::storage::Change]) -> Result<()> {
        let mut queue = BLOCK_WRITER.lock(&self.writer);
        let batch = {
            let mut storage = self.storage();
            storage.roll_back_changes(changes)?;
            storage.begin_write_dirty()?
        };
        let Some(batch) = batch else {
            drop(queue);
            self.group.flush_device().map_err(|e| self.storage().stop(e))?;
            return self.storage().expire_rolled_back(changes);
        };
        let written = self
            .sync_spill_log()
            .and_then(|()| crate::batch_io::write_blocks(&mut queue, batch.blocks))
            .and_then(|()| self.group.flush_device());
        drop(queue);
        let mut storage = self.storage();
        storage.end_write_dirty(&batch.keys, written)?;
        storage.expire_rolled_back(changes)
    }

    /// Writes every dirty block, under the block writer's latch: the blocks copied and
    /// pinned under the store's mutex (`Storage::begin_write_dirty`); then, outside the
    /// mutex, so that reads and changes go on meanwhile, the undo records appended so far
    /// made durable (the undo log latch's sync: every record of a change in the copies was
    /// appended before them) and then the blocks written; then the blocks unpinned under
    /// the mutex. Not durable: a device flush follows where it must (a round's, an
    /// abort's); a change that left half the cache dirty calls it alone (write-behind). A
    /// failure stops the store, the blocks left dirty.
    ///
    /// # Errors
    /// [`Error::Stopped`], the device's error.
    pub(crate) fn write_dirty(&self) -> Result<()> {
        let mut queue = BLOCK_WRITER.lock(&self.writer);
        let Some(batch) = self.storage_at(&mutex_site::ROUND).begin_write_dirty()? else {
            return Ok(());
        };
        let written = self
            .sync_spill_log()
            .and_then(|()| crate::batch_io::write_blocks(&mut queue, batch.blocks));
        self.storage_at(&mutex_site::ROUND).end_write_dirty(&batch.keys, written)
    }

    /// Makes every undo record and expiry appended to the spill area's page log so far
    /// durable (one FUA write of what it packed), under the undo log latch alone: a round's
    /// before its block writes, and a group of commits' expiries (`GroupFlush::sync_log`).
    /// The caller stops the store on failure.
    ///
    /// # Errors
    /// The device's error.
    pub(crate) fn sync_spill_log(&self) -> Result<()> {
        crate::storage::lock_spill(&self.spill)
            .as_mut()
            .map_or(Ok(()), crate::spill::SpillLog::sync)
    }

    pub(crate) fn begin(shared: &Arc<Shared>, isolation: Isolation) -> Transaction {
        let id = shared.next_txn.fetch_add(1, Ordering::Relaxed);
        Transaction::new(shared.clone(), id, isolation)
    }
}

/// Counters of a store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableStats {
    /// Tables.
    pub tables: usize,
    /// Rows in the indexes (uncommitted inserts included).
    pub rows: usize,
    /// Segments of all tables (each `TableOptions::segment_bytes` on the volume).
    pub segments: usize,
    /// Bytes of dead row records known free (by the open's scan and the reclaiming pass)
    /// and not yet reused.
    pub free_bytes: u64,
    /// Rows placed into reclaimed space since the open.
    pub reused: u64,
    /// Block writes since the open: a block changed by several transactions between two
    /// commit flushes is written once (write-behind, `cache.rs`).
    pub block_writes: u64,
    /// Index entries in index pages on the volume (past `index_memory_entries`).
    pub index_paged_entries: usize,
    /// Blocks in the block cache.
    pub cached_blocks: usize,
    /// The undo log's counters (persistent memory).
    pub undo: UndoStats,
    /// The spill area's counters (all zero while the undo log has never spilled).
    pub spill: UndoStats,
    /// Device flushes made for commits since the open (group commit: one serves every
    /// commit that waited for it).
    pub commit_flushes: u64,
    /// Commits that waited for a device flush since the open.
    pub flushed_commits: u64,
}

/// Records the reclaiming pass walks per hold of the store's lock, so that a pass over a
/// large table never stalls transactions for long.
pub const RECLAIM_STEP_RECORDS: usize = 256;

/// The background thread of the reclaiming pass; stopped and joined when dropped.
struct Reclaimer {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Reclaimer {
    /// Starts a thread that, every `interval`, looks at the records that died since the
    /// last time (`Storage::reclaim_dead`), until the store is dropped.
    fn start(shared: &Arc<Shared>, interval: std::time::Duration) -> Reclaimer {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let weak = Arc::downgrade(shared);
        let thread = std::thread::Builder::new()
            .name("shale-table-reclaim".into())
            .spawn(move || {
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(interval)
                {
                    let Some(shared) = weak.upgrade() else { return };
                    // An error (a device error, damage) is the next caller's to meet; the
                    // pass only reads, so it just ends here and tries again later.
                    let _ = reclaim_recorded(&shared);
                }
            })
            .expect("spawn the reclaiming thread");
        Reclaimer { stop: Some(stop), thread: Some(thread) }
    }
}

impl Drop for Reclaimer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Looks at the records recorded dead when the pass begins (those still held by a
/// transaction go back for later), a step per hold of the lock.
fn reclaim_recorded(shared: &Shared) -> Result<()> {
    let mut left = shared.storage().dead_recorded();
    while left > 0 {
        let looked = shared.storage().reclaim_dead(left.min(RECLAIM_STEP_RECORDS))?;
        if looked == 0 {
            return Ok(());
        }
        left -= looked;
        std::thread::yield_now();
    }
    Ok(())
}

/// One whole reclaiming pass, a step per hold of the lock.
fn reclaim_pass(shared: &Shared) -> Result<u64> {
    let mut cursor = (0, crate::Pos::default());
    loop {
        let mut storage = shared.storage();
        if storage.reclaim_step(&mut cursor, RECLAIM_STEP_RECORDS)? {
            return Ok(storage.stats().free_bytes);
        }
        drop(storage);
        std::thread::yield_now();
    }
}

/// A store of tables on one volume, with its undo log in persistent memory.
pub struct TableStore {
    /// Dropped first: the thread is joined before the store's lock is let go.
    _reclaimer: Option<Reclaimer>,
    shared: Arc<Shared>,
    /// One handle per store (`shale_space::StoreLock`); `None` on a device opened directly.
    _lock: Option<shale_space::StoreLock>,
    /// The persistent memory file the undo log is in, if it is in one.
    undo_path: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for TableStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableStore").field("storage", &*self.shared.storage()).finish()
    }
}

impl TableStore {
    /// Opens the store in the directory `path` (its volume is `volume.shale` there, its undo
    /// log `undo.pmem` unless [`TableOptions::pmem_path`] names another file), creating it
    /// when missing and the options allow. Changes not committed before the last close or
    /// crash are rolled back.
    ///
    /// ```
    /// use shale_table::{Column, Schema, TableOptions, TableStore};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = TableStore::open(dir.path(), TableOptions::default())?;
    /// let schema = Schema::new(vec![Column::fixed("id", 4), Column::var("name", 32)])?;
    /// let users = store.create_table("users", schema)?;
    /// store.insert(users, &[&b"0001"[..], b"ada"])?;
    /// store.update(users, b"0001", "name", b"ada lovelace")?;
    /// drop(store);
    /// let store = TableStore::open(dir.path(), TableOptions::default())?;
    /// let users = store.table_id("users").unwrap();
    /// assert_eq!(store.select_cell(users, b"0001", "name")?, Some(b"ada lovelace".to_vec()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// One handle at a time: the store lock of the space layer refuses a second open with
    /// `shale_space::Error::InUse`.
    ///
    /// # Errors
    /// Bad options ([`Error::InvalidArgument`]), a volume of another engine
    /// ([`Error::NotTableStore`]), a persistent memory file of another store
    /// ([`Error::InvalidArgument`]), damage ([`Error::Corruption`]), a store in use, or the
    /// space layer's error.
    pub fn open(path: impl AsRef<Path>, opts: TableOptions) -> Result<TableStore> {
        opts.validate()?;
        let path = path.as_ref();
        if opts.create_if_missing && !path.exists() && path.symlink_metadata().is_err() {
            std::fs::create_dir_all(path).map_err(|e| {
                Error::Space(shale_io::Error::at_path(shale_io::PathOp::CreateDir, path, e).into())
            })?;
        }
        // A table store is a directory (its volume and its undo log side by side), checked
        // before the space layer's open, which would take a file or a device too.
        if !path.is_dir() {
            return Err(Error::InvalidArgument(format!(
                "{} is not a directory: a table store is a directory holding its volume and \
                 its undo log",
                path.display()
            )));
        }
        let (opened, lock) =
            Volume::open_path_locked(path, &opts.volume_options(), &FileOptions::default())?;
        let volume_file = shale_space::volume_file(path);
        let instance = FileId::of_path(&volume_file)?;
        let bound = crate::catalog::decode(&opened.versions)?.undo_file;
        let volume_id = opened.volume.header().volume_id;
        let plan = undo_file::plan(path, &opts, bound.as_ref(), volume_id, instance)?;
        // With the log on the volume, a region in memory stands in for persistent memory,
        // unless the store's file is there to be read (and retired after the open).
        let pmem: Box<dyn PmemLog> = match &plan.file {
            // An existing file keeps its size: `undo_log_bytes` sizes a new one.
            Some(f) => {
                let len = crate::pmem_owner::log_bytes_at(f).unwrap_or(opts.undo_log_bytes);
                let file = FilePmem::open(f, len, opts.pmem)?;
                if !plan.on_volume {
                    // The log stays in the file: it names this store for `shale orphans`.
                    let volume = std::path::absolute(&volume_file).unwrap_or(volume_file.clone());
                    file.record_owner(f, &volume)?;
                }
                Box::new(file)
            }
            None => Box::new(SimPmem::new(crate::undo_log::RING_OFFSET + (64 << 10))),
        };
        let record = match (&plan.file, plan.on_volume) {
            (Some(f), false) => {
                let now = undo_file::entry(path, f)?;
                (bound.as_ref() != Some(&now)).then_some(Some(now))
            }
            _ => plan.record.clone(),
        };
        let setup = UndoSetup {
            pmem,
            binding: if plan.file.is_some() { instance.encode() } else { [0; 16] },
            on_volume: plan.on_volume,
            retire: plan.on_volume && plan.file.is_some(),
            record,
            read_only: false,
        };
        let mut store = TableStore::recover(opened, setup, opts)?;
        store._lock = Some(lock);
        store.undo_path = if plan.on_volume { None } else { plan.file.clone() };
        if let (true, Some(f)) = (plan.on_volume, &plan.file) {
            // Retired: the catalog no longer names it and nothing of it is live.
            std::fs::remove_file(f).map_err(|e| {
                Error::Space(shale_io::Error::at_path(shale_io::PathOp::Remove, f, e).into())
            })?;
        }
        Ok(store)
    }

    /// Opens the store on `device` with its undo log in `pmem` (the simulated device and
    /// persistent memory in tests, say), as [`TableStore::open`].
    ///
    /// # Errors
    /// As [`TableStore::open`].
    pub fn open_device(
        device: DeviceRef,
        pmem: Box<dyn PmemLog>,
        opts: TableOptions,
    ) -> Result<TableStore> {
        opts.validate()?;
        let opened = Volume::open(device, &opts.volume_options())?;
        let setup = UndoSetup {
            pmem,
            binding: [0; 16],
            on_volume: opts.undo_log == UndoLogPlace::Volume,
            retire: false,
            record: None,
            read_only: false,
        };
        TableStore::recover(opened, setup, opts)
    }

    fn recover(
        opened: shale_space::Opened,
        undo: UndoSetup,
        opts: TableOptions,
    ) -> Result<TableStore> {
        let storage = Storage::recover(opened.volume, &opened.versions, undo, &opts)?;
        let next_txn = AtomicU64::new(storage.max_txn + 1);
        let interval = opts.space_reclaim_interval;
        let group = GroupFlush::new(storage.flush_queue()?);
        let writer = Mutex::new(storage.writer_queue()?);
        let spill = storage.spill_latch();
        let read_queues = storage.read_queues();
        let mut schemas = HashMap::new();
        for (_, id) in storage.tables() {
            schemas.insert(id, Arc::new(storage.table(id)?.schema.clone()));
        }
        let shared = Shared {
            storage: StorageLock(RwLock::new(storage)),
            checkpoint_running: Mutex::new(()),
            group,
            writer,
            spill,
            locks: LockManager::default(),
            schemas: RwLock::new(schemas),
            read_queues,
            opts,
            next_txn,
            loading_reads: AtomicUsize::new(0),
        };
        let shared = Arc::new(shared);
        let reclaimer = interval.map(|i| Reclaimer::start(&shared, i));
        Ok(TableStore { _reclaimer: reclaimer, shared, _lock: None, undo_path: None })
    }

    /// The persistent memory file the undo log is in; `None` when the log is on the volume
    /// (or in a region given to [`TableStore::open_device`]).
    pub fn undo_log_path(&self) -> Option<&Path> {
        self.undo_path.as_deref()
    }

    /// Removes the table store in the directory `dir`: its volume file, and its undo log's
    /// persistent memory file if the store has one of its own. The store is opened first
    /// with its log moved to the volume, which retires (removes) its own file and leaves one
    /// of the store it is a copy of untouched. The directory and anything else in it stay.
    ///
    /// # Errors
    /// As [`TableStore::open`] (no store there, another engine's, one in use, damage), or
    /// the operating system's error removing a file.
    pub fn destroy(dir: impl AsRef<Path>) -> Result<()> {
        let dir = dir.as_ref();
        let opts = TableOptions {
            create_if_missing: false,
            undo_log: UndoLogPlace::Volume,
            accept_lost_undo_log: true,
            space_reclaim_interval: None,
            ..TableOptions::default()
        };
        drop(TableStore::open(dir, opts)?);
        let volume = shale_space::volume_file(dir);
        std::fs::remove_file(&volume).map_err(|e| {
            Error::Space(shale_io::Error::at_path(shale_io::PathOp::Remove, &volume, e).into())
        })
    }

    /// What the store and its transactions share (its checkpoint reads through it).
    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Creates a table (one segment allocated) and returns its id.
    ///
    /// # Errors
    /// [`Error::TableExists`], [`Error::InvalidArgument`] for a bad name, the space layer's
    /// error.
    pub fn create_table(&self, name: &str, schema: Schema) -> Result<TableId> {
        let mut storage = self.shared.storage();
        let id = storage.create_table(name, schema.clone())?;
        self.shared.schemas.write().insert(id, Arc::new(schema));
        Ok(TableId(id))
    }

    /// Drops the table named `name`, once no transaction holds a lock on it.
    ///
    /// # Errors
    /// [`Error::NoSuchTable`], [`Error::LockTimeout`], the space layer's error.
    pub fn drop_table(&self, name: &str) -> Result<()> {
        let id = self.table_id(name).ok_or_else(|| Error::NoSuchTable(name.to_string()))?;
        let txn = Shared::begin(&self.shared, Isolation::Serializable);
        let key = LockKey::Table(id.0);
        self.shared.locks.acquire(
            txn.id(),
            &key,
            LockMode::Exclusive,
            self.shared.opts.lock_timeout,
        )?;
        let r = {
            // No round's write in flight lands in the table's slots once they are free.
            let _writer = BLOCK_WRITER.lock(&self.shared.writer);
            let mut storage = self.shared.storage();
            let r = storage.drop_table(id.0);
            if r.is_ok() {
                self.shared.schemas.write().remove(&id.0);
            }
            r
        };
        self.shared.locks.release(txn.id(), &key);
        txn.commit_empty();
        r
    }

    /// The id of the table named `name`.
    pub fn table_id(&self, name: &str) -> Option<TableId> {
        self.shared.storage().table_id(name).map(TableId)
    }

    /// The tables' names and ids.
    pub fn tables(&self) -> Vec<(String, TableId)> {
        self.shared.storage().tables().into_iter().map(|(n, i)| (n, TableId(i))).collect()
    }

    /// The schema of a table.
    ///
    /// # Errors
    /// [`Error::NoSuchTable`].
    pub fn schema(&self, table: TableId) -> Result<Schema> {
        self.shared.schema(table).map(|s| (*s).clone())
    }

    /// Begins a transaction.
    pub fn begin(&self, isolation: Isolation) -> Transaction {
        Shared::begin(&self.shared, isolation)
    }

    /// Begins a transaction that first locks the rows `rows` names, all of them, in one
    /// order (see [`Declared`]): LATTE's repeatable read. Transactions that declare the rows
    /// they touch never deadlock on them; the rows read stay as read, and a declared key not
    /// present stays absent unless this transaction inserts it.
    ///
    /// # Errors
    /// [`Error::NoSuchTable`] for a table named that does not exist; [`Error::LockTimeout`]
    /// when a row stays locked by another past `lock_timeout` (the locks taken are released
    /// and no transaction is left open).
    pub fn begin_declared(&self, isolation: Isolation, rows: &Declared) -> Result<Transaction> {
        let mut txn = self.begin(isolation);
        match txn.lock_declared(rows) {
            Ok(()) => Ok(txn),
            Err(e) => {
                txn.abort()?;
                Err(e)
            }
        }
    }

    /// Runs `f` in a read-committed transaction of its own, committing on success and
    /// aborting on error.
    fn auto<T>(&self, f: impl FnOnce(&mut Transaction) -> Result<T>) -> Result<T> {
        let mut txn = self.begin(Isolation::ReadCommitted);
        match f(&mut txn) {
            Ok(v) => txn.commit().map(|()| v),
            Err(e) => {
                txn.abort()?;
                Err(e)
            }
        }
    }

    /// Inserts a row, committed when it returns. See [`Transaction::insert`].
    ///
    /// # Errors
    /// As [`Transaction::insert`].
    pub fn insert<V: AsRef<[u8]>>(&self, table: TableId, row: &[V]) -> Result<()> {
        self.auto(|t| t.insert(table, row))
    }

    /// Updates a cell, committed when it returns. See [`Transaction::update`].
    ///
    /// # Errors
    /// As [`Transaction::update`].
    pub fn update(&self, table: TableId, key: &[u8], column: &str, value: &[u8]) -> Result<()> {
        self.auto(|t| t.update(table, key, column, value))
    }

    /// Erases a row, committed when it returns. See [`Transaction::erase`].
    ///
    /// # Errors
    /// As [`Transaction::erase`].
    pub fn erase(&self, table: TableId, key: &[u8]) -> Result<()> {
        self.auto(|t| t.erase(table, key))
    }

    /// The committed row of `key`. See [`Transaction::select`].
    ///
    /// # Errors
    /// As [`Transaction::select`].
    pub fn select(&self, table: TableId, key: &[u8]) -> Result<Option<Row>> {
        self.auto(|t| t.select(table, key))
    }

    /// One committed cell. See [`Transaction::select_cell`].
    ///
    /// # Errors
    /// As [`Transaction::select_cell`].
    pub fn select_cell(&self, table: TableId, key: &[u8], column: &str) -> Result<Option<Vec<u8>>> {
        self.auto(|t| t.select_cell(table, key, column))
    }

    /// The committed rows of a range of primary keys, in key order, 100 per batch, each
    /// batch read committed, served by the table's ordered index. See [`Scan`].
    ///
    /// # Errors
    /// [`Error::NoSuchTable`], a device error.
    pub fn scan(
        &self,
        table: TableId,
        range: impl std::ops::RangeBounds<Vec<u8>>,
    ) -> Result<Scan<'static>> {
        let range = (range.start_bound().cloned(), range.end_bound().cloned());
        self.shared.storage().table(table.0)?;
        Ok(Scan::new(ScanTxn::Own(self.shared.clone()), table, range))
    }

    /// The committed rows whose value of `column` is in `range` (compared as bytes), in
    /// primary-key order, 100 per batch, each batch read committed. See
    /// [`Transaction::scan_column`]: by a column other than the primary key, a walk of the
    /// whole table.
    ///
    /// # Errors
    /// [`Error::NoSuchTable`], [`Error::NoSuchColumn`], a device error.
    pub fn scan_column(
        &self,
        table: TableId,
        column: &str,
        range: impl std::ops::RangeBounds<Vec<u8>>,
    ) -> Result<Scan<'static>> {
        let c = self.shared.schema(table)?.column_index(column)?;
        if c == 0 {
            return self.scan(table, range);
        }
        let range = (range.start_bound().cloned(), range.end_bound().cloned());
        self.shared.storage().table(table.0)?;
        let filter = crate::scan::ColumnRange { column: c, range };
        Ok(Scan::by_column(ScanTxn::Own(self.shared.clone()), table, filter))
    }

    /// Runs the reclaiming pass now, over every table: the space of rows erased by
    /// committed transactions (and of inserts rolled back) becomes free for new rows, which
    /// take it before growing their table. The background thread
    /// ([`TableOptions::space_reclaim_interval`]) runs the same pass. Returns the bytes now
    /// known free.
    ///
    /// # Errors
    /// A device error or [`Error::Corruption`] of a block read.
    pub fn reclaim_space(&self) -> Result<u64> {
        reclaim_pass(&self.shared)
    }

    /// Counters now.
    pub fn stats(&self) -> TableStats {
        let (commit_flushes, flushed_commits) = self.shared.group.counts();
        TableStats { commit_flushes, flushed_commits, ..self.shared.storage().stats() }
    }

    /// Each queue pair's requests, bytes and placement, with `TableOptions::queue_pairs`
    /// (empty without): how the weighted dispatch spread the store's block I/O.
    pub fn queue_pair_stats(&self) -> Vec<shale_io::PairStats> {
        self.shared.storage().queue_pair_stats()
    }

    /// The device address of index page `n` of `table`, once its index has spilled to
    /// pages (where tests damage a page).
    pub fn index_page_address(&self, table: TableId, n: u64) -> Option<u64> {
        self.shared.storage().index_page_address(table.0, n)
    }

    /// The device addresses of the undo log's spill area, once the log has spilled
    /// (where tests damage a spilled record).
    pub fn spill_address(&self) -> Option<std::ops::Range<u64>> {
        self.shared.storage().spill_address()
    }

    /// The device address of block `n` of `table`, where tests damage a block.
    pub fn block_address(&self, table: TableId, n: u64) -> Option<u64> {
        self.shared.storage().block_address(table.0, n)
    }
}
