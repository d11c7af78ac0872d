//! Checkpoints: a new store holding one consistent state of a live one, made while writes
//! go on (RocksDB's `Checkpoint::CreateCheckpoint`).
//!
//! A checkpoint is a logical copy: it reads the source at one snapshot and writes every
//! live entry into a new store. It costs a read of the data and a rewrite of it (and the new
//! store's flushes and compactions), where RocksDB hard-links SST files; shale's SSTs live
//! in the slots of one volume file, which cannot be linked in parts. In exchange the copy is
//! compact (no overwritten versions, no tombstones) and holds exactly one state: the writes
//! at or below the snapshot's sequence number, which are a prefix of the acknowledged
//! writes, with every batch whole. Range deletions need no copying: the iterator has
//! already applied them. Values are copied byte for byte (`shale serve` keeps each key's
//! expiry inside its value), and no compaction filter runs on the copy while it is made.
//!
//! A plain copy of the directory (`cp -a`) of a store that is open holds whatever the
//! volume file held at each moment the copy read it: not a consistent state. A copy of a
//! store that is closed, or that crashed, opens as the original would after a machine
//! crash: writes acknowledged without sync that waited in the WAL tail (`/dev/shm`) belong
//! to the original store and stay with it.
//!
//! Stages, in this order:
//! 1. Check the destination and make a staging directory beside it
//!    ([`shale_space::CheckpointDir`]); a tiered store's capacity volume gets one too.
//!    A destination that holds anything is refused before anything is written.
//! 2. Take a snapshot: the state the checkpoint holds.
//! 3. Create a new store in the staging directory with the source's options and layout
//!    (slot size, version log and WAL area from the source's header), no compaction
//!    filter, and no WAL tail (the copy is synced as a whole at its close).
//! 4. Iterate the snapshot and write its entries in unsynced batches of at most
//!    [`COPY_BATCH_BYTES`].
//! 5. Close the new store: its memtables are flushed and the version that names its SSTs
//!    committed, durably.
//! 6. Rename the staging directories into place: the capacity volume's first, the store's
//!    last, so the destination appears only once the whole checkpoint is there.

use std::path::{Path, PathBuf};

use shale_space::{CheckpointDir, LayoutOptions};

use crate::db::{Db, MEMTABLE_OVERHEAD_PER_OP};
use crate::error::{Error, Result};
use crate::options::{ReadOptions, WalTail, WriteOptions};
use crate::{Options, WriteBatch};

/// Memtable footprint a batch of the copy takes at most (less where the store's batch limit,
/// half a memtable, is smaller): large enough that the cost per batch is small.
pub const COPY_BATCH_BYTES: usize = 256 << 10;

/// Most bytes a put adds to a batch's encoding beside its key and value: its tag and two
/// length varints.
const PUT_FRAMING_BYTES_MAX: usize = 16;

/// Entries between two calls of a checkpoint's progress callback.
pub const PROGRESS_ENTRIES: u64 = 100_000;

/// How a checkpoint is made.
#[derive(Clone, Debug, Default)]
pub struct CheckpointOptions {
    /// Where the checkpoint's capacity volume goes (a directory, created; it must not exist
    /// or be empty, as the destination): required when the store is tiered, refused when
    /// it is not. Open the checkpoint with it as [`crate::TierOptions::capacity_path`].
    pub capacity_path: Option<PathBuf>,
}

impl Db {
    /// Makes a checkpoint of the store at `dst`: a new store, in a new directory, holding the
    /// state of this store at one snapshot, while writes go on. Returns the entries copied.
    /// See [`Db::checkpoint_with`].
    ///
    /// ```
    /// use shale_lsm::{Db, Options};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path().join("live"), Options::small_for_tests())?;
    /// db.put(b"apple", b"red")?;
    /// assert_eq!(db.checkpoint(&dir.path().join("copy"))?, 1);
    /// db.put(b"pear", b"green")?; // after the checkpoint: not in it
    ///
    /// let copy = Db::open(dir.path().join("copy"), Options::small_for_tests())?;
    /// assert_eq!(copy.get(b"apple")?, Some(b"red".to_vec()));
    /// assert_eq!(copy.get(b"pear")?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`Db::checkpoint_with`].
    pub fn checkpoint(&self, dst: &Path) -> Result<u64> {
        self.checkpoint_with(dst, &CheckpointOptions::default(), &mut |_| {})
    }

    /// Makes a checkpoint of the store at `dst` (which must not exist, or be an empty
    /// directory), calling `progress` with the entries copied so far every
    /// [`PROGRESS_ENTRIES`] entries and once at the end. The new store holds exactly the
    /// writes at or below one snapshot, taken when the call starts: every write acknowledged
    /// before the call, none acknowledged after it returns, every batch whole. It is built
    /// under a temporary name in `dst`'s parent (`.NAME.checkpoint-...`), synced, and
    /// renamed to `dst` at the end: a crash midway never leaves at `dst` anything that
    /// looks like a checkpoint. A logical copy: see the module's documentation for its cost.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `dst` (or the capacity path) holds anything or is not
    /// a directory, when the store is tiered and no capacity path was given (or one was
    /// given for a store that is not tiered); the source's read errors; the new store's
    /// errors ([`Error::NoSpace`], [`Error::Io`]). On any error nothing is left at `dst`.
    pub fn checkpoint_with(
        &self,
        dst: &Path,
        opts: &CheckpointOptions,
        progress: &mut dyn FnMut(u64),
    ) -> Result<u64> {
        let tiered = self.volume().is_tiered();
        match (&opts.capacity_path, tiered) {
            (None, true) => {
                return Err(Error::InvalidArgument(format!(
                    "the store is tiered: its checkpoint at {} needs a capacity path too",
                    dst.display()
                )));
            }
            (Some(cap), false) => {
                return Err(Error::InvalidArgument(format!(
                    "the store has no capacity volume: its checkpoint takes no capacity path \
                     ({} given)",
                    cap.display()
                )));
            }
            _ => {}
        }
        // Stage 1.
        let staged = CheckpointDir::begin(dst)?;
        let staged_capacity = opts.capacity_path.as_deref().map(CheckpointDir::begin);
        let staged_capacity = staged_capacity.transpose()?;
        // Stage 2.
        let snapshot = self.snapshot();
        // Stage 3.
        let copy_opts = self.copy_options(staged_capacity.as_ref().map(|c| c.staging()));
        let copy = Db::open(staged.staging(), copy_opts)?;
        // Stage 4.
        let copied = copy_entries(self, &snapshot, &copy, progress);
        drop(snapshot);
        // Stage 5, on success and failure alike: the staging store is closed before it is
        // renamed or removed.
        let closed = copy.close();
        let entries = copied?;
        closed?;
        // Stage 6.
        if let Some(capacity) = staged_capacity {
            capacity.commit()?;
        }
        staged.commit()?;
        Ok(entries)
    }

    /// The options of the new store: the source's, with its layout, without what would
    /// change values or keep state outside the checkpoint.
    fn copy_options(&self, capacity: Option<&Path>) -> Options {
        let mut opts = self.options().clone();
        let layout = self.volume().layout();
        opts.volume.layout = LayoutOptions {
            slot_bytes: layout.slot_bytes,
            version_log_bytes: layout.version_log_bytes,
            wal_bytes: layout.wal_bytes,
        };
        opts.volume.create_if_blank = true;
        opts.tiers.capacity_path = capacity.map(Path::to_path_buf);
        opts.compaction_filter = None;
        opts.wal_tail = WalTail::Off;
        opts
    }
}

/// Stage 4: every entry of the snapshot, in batches.
fn copy_entries(
    source: &Db,
    snapshot: &crate::Snapshot,
    copy: &Db,
    progress: &mut dyn FnMut(u64),
) -> Result<u64> {
    let read = ReadOptions { snapshot: Some(snapshot), ..ReadOptions::default() };
    let mut it = source.iter(&read);
    it.seek_to_first();
    let unsynced = WriteOptions { sync: false };
    let mut batch = WriteBatch::new();
    let mut footprint = 0;
    let mut entries = 0u64;
    while it.valid() {
        let adds =
            it.key().len() + it.value().len() + PUT_FRAMING_BYTES_MAX + MEMTABLE_OVERHEAD_PER_OP;
        // Half the batch limit: room for the tuner to shrink the memtable meanwhile.
        let room = COPY_BATCH_BYTES.min(copy.batch_footprint_max() / 2);
        if !batch.is_empty() && footprint + adds > room {
            copy.write(&batch, &unsynced)?;
            batch = WriteBatch::new();
            footprint = 0;
        }
        batch.put(it.key(), it.value());
        footprint += adds;
        entries += 1;
        if entries % PROGRESS_ENTRIES == 0 {
            progress(entries);
        }
        it.next();
    }
    it.status()?;
    if !batch.is_empty() {
        copy.write(&batch, &unsynced)?;
    }
    progress(entries);
    Ok(entries)
}
