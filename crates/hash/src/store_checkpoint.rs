//! Checkpoints of a hash store: a new store holding the state of a live one at one instant,
//! made while writes go on (RocksDB's `Checkpoint::CreateCheckpoint`). Not to be confused
//! with `checkpoint.rs`, the index checkpoint that shortens recovery.
//!
//! The store has no snapshots, and its iterator (`iterator.rs`) returns each key as it is
//! when reached, so a copy made with it could hold one key's new value beside another's old
//! one. The instant of a checkpoint is instead the index itself, read under its lock in one
//! go: the worker changes the index one request at a time (a store's or delete's entry
//! changes atomically once its record is durable, and the request is answered after), so
//! the entries read at once are the state after some prefix of the writes the worker
//! applied. That prefix holds every write acknowledged before the checkpoint started; it may
//! hold writes in flight then (applied, not yet answered), never one submitted after the
//! index was read. The records those entries name stay where they are while the checkpoint
//! holds the segments pinned, as an open iterator does: garbage collection copies records
//! but frees no segment, so each entry's record is read as it was at the instant, however
//! the key changed since.
//!
//! A logical copy: every live record is read and stored again in a new store, which costs a
//! read and a rewrite of the live data; the copy holds no dead records. Values are copied
//! byte for byte. A plain copy (`cp -a`) of the directory of a store that is open holds
//! whatever the volume file held at each moment the copy read it, not one instant.
//!
//! Stages, in this order:
//! 1. Check the destination and make a staging directory beside it
//!    ([`shale_space::CheckpointDir`]); a destination that holds anything is refused before
//!    anything is written.
//! 2. Pin the segments ([`Pin`]), then read the index's entries under its lock: the instant.
//! 3. Create a new store in the staging directory with the source's options and layout
//!    (its slot, the segment, and version log sizes from the source's header).
//! 4. Read each entry's record, in log order (segment, page), and store it in the new store,
//!    with up to [`COPY_IN_FLIGHT`] stores submitted at once, so that the new store's worker
//!    batches them into few durable writes.
//! 5. Unpin, close the new store (every store was durable when answered) and rename the
//!    staging directory to the destination.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use shale_space::CheckpointDir;

use crate::error::Result;
use crate::index::Location;
use crate::meta::Membership;
use crate::options::StoreMode;
use crate::record::{Kind, Record};
use crate::shard::Shard;
use crate::store::{HashStore, HashTicket};

/// Stores of the copy submitted and not yet answered, at most: enough for the new store's
/// worker to batch many records into one durable write.
pub const COPY_IN_FLIGHT: usize = 256;

/// Entries between two calls of a checkpoint's progress callback.
pub const PROGRESS_ENTRIES: u64 = 100_000;

/// Keeps garbage collection from freeing any segment while held, as an open iterator does
/// (`Worker::finish_gc` frees none while `open_iterators` is above zero). It does not count
/// against `max_iterators`: a checkpoint is never refused for iterators the caller opened.
pub(crate) struct Pin(Arc<Shard>);

impl Pin {
    fn new(shard: &Arc<Shard>) -> Pin {
        shard.open_iterators.fetch_add(1, Ordering::AcqRel);
        Pin(shard.clone())
    }
}

impl Drop for Pin {
    fn drop(&mut self) {
        self.0.open_iterators.fetch_sub(1, Ordering::AcqRel);
    }
}

impl HashStore {
    /// Makes a checkpoint of the store at `dst`: a new store, in a new directory, holding the
    /// state of this store at one instant, while writes go on. Returns the keys copied. See
    /// [`HashStore::checkpoint_with`].
    ///
    /// ```
    /// use shale_hash::{HashOptions, HashStore, StoreMode};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = HashStore::open(dir.path().join("live"), HashOptions::default())?;
    /// store.store(b"key-1", b"one", StoreMode::Overwrite)?;
    /// assert_eq!(store.checkpoint(&dir.path().join("copy"))?, 1);
    /// store.store(b"key-2", b"two", StoreMode::Overwrite)?; // not in the checkpoint
    ///
    /// let copy = HashStore::open(dir.path().join("copy"), HashOptions::default())?;
    /// assert_eq!(copy.retrieve(b"key-1")?, Some(b"one".to_vec()));
    /// assert_eq!(copy.retrieve(b"key-2")?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`HashStore::checkpoint_with`].
    pub fn checkpoint(&self, dst: &Path) -> Result<u64> {
        self.checkpoint_with(dst, &mut |_| {})
    }

    /// Makes a checkpoint of the store at `dst` (which must not exist, or be an empty
    /// directory), calling `progress` with the keys copied so far every
    /// [`PROGRESS_ENTRIES`] keys and once at the end. The new store holds the state after a
    /// prefix of the writes: every store and delete acknowledged before the call, none
    /// submitted after it returns. It is built under a temporary name in `dst`'s parent
    /// (`.NAME.checkpoint-...`) and renamed to `dst` once durable: a crash midway never
    /// leaves at `dst` anything that looks like a checkpoint. A logical copy: see
    /// `store_checkpoint.rs` for its cost.
    ///
    /// # Errors
    /// [`crate::Error::Space`] with an invalid argument when `dst` holds anything or is not
    /// a directory; the source's read errors ([`crate::Error::Corruption`], the device's);
    /// the new store's errors. On any error nothing is left at `dst`.
    pub fn checkpoint_with(&self, dst: &Path, progress: &mut dyn FnMut(u64)) -> Result<u64> {
        // Stage 1.
        let staged = CheckpointDir::begin(dst)?;
        // Stage 2.
        let read = HashStore::checkpoint_instant(&[self])?.pop().expect("one store's");
        let keys = self.checkpoint_into(read, staged.staging(), None, progress)?;
        staged.commit()?;
        Ok(keys)
    }

    /// Stage 2: the segments pinned, and the index's entries at one instant, in log order.
    /// For a set, every shard's at once (`Shards::checkpoint_with`): each shard's index lock
    /// is held until every shard's entries are read.
    pub(crate) fn checkpoint_instant(stores: &[&HashStore]) -> Result<Vec<(Pin, Vec<Location>)>> {
        // Pinned before the index is read, so no location read can be freed.
        let pins: Vec<Pin> = stores.iter().map(|s| Pin::new(s.shard())).collect();
        let guards: Vec<_> = stores.iter().map(|s| s.shard().index.read()).collect();
        let mut read = Vec::with_capacity(stores.len());
        for (pin, index) in pins.into_iter().zip(&guards) {
            let mut entries = index.in_buckets(0, 0)?;
            entries.sort_unstable_by_key(|l| (l.segment, l.page, l.offset));
            read.push((pin, entries));
        }
        Ok(read)
    }

    /// Stages 3 and 4 and the close of stage 5 of a checkpoint into the staging directory
    /// `staging`, from the instant `read` (its pin released at the end); the copy joins the
    /// set `membership` names, if any, before it is closed (`Shards::checkpoint_with`).
    pub(crate) fn checkpoint_into(
        &self,
        read: (Pin, Vec<Location>),
        staging: &Path,
        membership: Option<Membership>,
        progress: &mut dyn FnMut(u64),
    ) -> Result<u64> {
        let shard = self.shard();
        let (pin, entries) = read;
        // Stage 3.
        let copy = HashStore::open(staging, copy_options(shard))?;
        // Stage 4.
        let copied = copy_records(shard, &entries, &copy, progress);
        // Stage 5.
        drop(pin);
        let joined = match (&copied, membership) {
            (Ok(_), Some(m)) => copy.join_set(m),
            _ => Ok(()),
        };
        copy.close();
        let keys = copied?;
        joined?;
        Ok(keys)
    }
}

/// The new store's options: the source's, with its segment and version log sizes.
fn copy_options(shard: &Shard) -> crate::options::HashOptions {
    let mut opts = shard.opts.clone();
    let layout = shard.volume().layout();
    opts.segment_bytes = layout.slot_bytes;
    opts.version_log_bytes = layout.version_log_bytes;
    opts.create_if_missing = true;
    opts
}

/// Stage 4: the record of each entry, stored in the copy.
fn copy_records(
    shard: &Shard,
    entries: &[Location],
    copy: &HashStore,
    progress: &mut dyn FnMut(u64),
) -> Result<u64> {
    // Never more than the new store queues (its `queue_depth`, the source's): past it a
    // submission would be refused as Busy.
    let window = COPY_IN_FLIGHT.min(shard.opts.queue_depth).max(1);
    let mut in_flight: VecDeque<HashTicket<()>> = VecDeque::with_capacity(window);
    let mut keys = 0u64;
    for &loc in entries {
        let image = shard.read_record(loc)?;
        let r =
            Record::decode(&image).ok_or_else(|| shard.corruption(loc, "record does not parse"))?;
        if r.kind != Kind::Store {
            continue;
        }
        if in_flight.len() == window
            && let Some(t) = in_flight.pop_front()
        {
            t.wait()?;
        }
        in_flight.push_back(copy.submit_store(r.key, r.value, StoreMode::Overwrite)?);
        keys += 1;
        if keys % PROGRESS_ENTRIES == 0 {
            progress(keys);
        }
    }
    for t in in_flight {
        t.wait()?;
    }
    progress(keys);
    Ok(keys)
}
