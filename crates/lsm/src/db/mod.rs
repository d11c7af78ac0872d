//! The store: write path, read path, background flush and compaction, recovery.
//!
//! Write path, in order (group commit, see `write_group`):
//! 1. Check the batch (key and batch sizes) and queue it; the first writer with no leader
//!    before it leads a group of the writers queued, holding the WAL writer's lock.
//! 2. The leader makes room under the state lock: switch to a new memtable when this one is
//!    full, stalling while too many memtables wait for flush (MT stall), L0 holds the stop
//!    trigger of SSTs (L0 stop) or compaction debt is past the hard limit (PS stop); while L0
//!    is past the slowdown trigger or the debt past the soft limit, pace the groups to the
//!    delayed write rate, which adapts to whether the debt shrinks (`write_controller`). It
//!    stamps consecutive sequence numbers on the group's batches.
//! 3. The leader appends the group's records to the active WAL group in one append, synced
//!    if any writer asked; without sync the records go to the WAL tail and the append does
//!    not wait for the device. A full group switches the memtable and retries; a failed
//!    append stops the store (P5).
//! 4. A small group's leader inserts every writer's ops into the memtable itself; in a
//!    larger group each writer inserts its own, concurrently. Either way no state lock is
//!    held; the leader then publishes the group's last sequence number, tells the writers
//!    they are done and hands leadership on.
//!
//! Read path: the active memtable, sealed memtables newest first, L0 SSTs newest first, then one
//! SST per deeper level; each SST checks its bloom filter with the key's hash, computed once.
//! Each source's range tombstones over the key are weighed before its entries (the filter
//! knows nothing of them): an entry older than the newest such tombstone seen so far is
//! deleted, and a tombstone with no newer entry in its own source ends the search, since every
//! older source holds only older versions of the key (docs/lsm.md, "Range deletes").
//!
//! Background: one thread flushes the oldest sealed memtable to an L0 SST; the others
//! (`max_background_jobs - 1`, resizable while running, `pool.rs`) run compactions, several at
//! once on disjoint SSTs and key ranges (`picker.rs`), so a long compaction never holds up a
//! flush. Each result is committed as one version edit under the state lock, against the
//! version current then (SSTs are removed by id, so a flush or compaction committed meanwhile
//! is kept); inputs are freed only once no reader holds them.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};
use shale_io::{AlignedBuf, BufferedReader, BufferedWriter, DeviceRef, FileOptions};
use shale_space::{Edit, Extent, IoClass, Volume};

use crate::batch::{BatchOp, WriteBatch, record_ops};
use crate::cache::{BlockCache, BlockKind};
use crate::db_iter::{DbIterator, IterBounds};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{self, Kind};
use crate::level_targets::LevelTargets;
use crate::memtable::Memtable;
use crate::memtable_pace::{self, FlushProgress, FlushPublisher};
use crate::merge::MergingIterator;
use crate::options::{KEY_BYTES_MAX, Options, ReadOptions, WriteOptions};
use crate::sst::{
    IndexAndFilter, PageCacheFiles, Probe, QueuePool, SstReader, VolumeSource, bloom_hash,
};
use crate::stats::{Stall, StallCounters, Stats};
use crate::version::{LEVELS, SstHandle, Version};
use crate::version_edit::{SstMeta, VersionEdit};
use crate::wal::{AppendError, LogPipeline, Logger, WalWriter};

mod async_api;
mod compaction;
mod multi_get;
mod output;
mod picker;
mod pool;
mod published;
mod read_only;
mod recovery;
pub(crate) use recovery::refuse_other_engine;
mod tier_head;
mod tuner_thread;
mod write_group;
mod write_timing;
// The write group takes its primitives from here (see `crate::sync`).
use crate::sync;
use crate::write_controller::{self, Pressure};
use async_api::AsyncApi;
pub use async_api::ScanEntries;
use compaction::Compaction;
use output::MadeBy;
use picker::CompactionState;
use pool::{PoolSize, panic_message};
use published::{Publication, View};
use shale_space::StoreLock;
use shale_space::page_log::write_queue;
use write_group::{GroupSync, Outcome, Pending, WriteQueue};

use shale_space::contention;

/// The contention profile's sites of the write path (`shale_space::contention`): a writer
/// waiting to lead or for its group's outcome; a follower waiting for its group to be
/// published; a sync leader waiting for a WAL logger; the WAL's mutex (held through a group's
/// append, and through its inserts where groups do not overlap).
static WRITE_GROUP_JOIN: contention::Site = contention::Site::new("lsm: write group join");
static GROUP_PUBLISHED: contention::Site = contention::Site::new("lsm: group publish wait");
static WAL_LOGGER: contention::Site = contention::Site::new("lsm: WAL logger wait");
static WAL_MUTEX: contention::Site = contention::Site::new("lsm: WAL mutex");
/// A writer that became leader within this counts as not having waited (the join's own
/// bookkeeping).
const SPIN_WAIT_MAX: std::time::Duration = std::time::Duration::from_micros(2);
use write_timing::WriteTimings;

/// Memory a batch may take in a memtable beyond its encoded bytes, per op: an upper bound
/// (node header 24, a tower of up to 12 links 96, key trailer 8, alignment), for the arena's
/// capacity, never the flush decision.
pub(crate) const MEMTABLE_OVERHEAD_PER_OP: usize = 160;
/// A memtable's arena may take this many write buffers. It only bounds: chunks come as
/// entries arrive, and a memtable is switched when its entries' real bytes
/// ([`Memtable::used_bytes`]) reach the write buffer size. The bound is kept with the
/// per-op upper bound above, at half the capacity (the arena strands up to a quarter chunk at
/// each chunk change), so it must sit well above what a full memtable reserves: 116-byte
/// entries reserve 1.84 times their real bytes.
const MEMTABLE_CAPACITY_WRITE_BUFFERS: usize = 4;
/// WAL pages kept in flight by one append.
const WAL_QUEUE_DEPTH: u32 = 16;

/// How often a flush or compaction waiting for a dropped SST's release looks whether the
/// store stopped meanwhile (a release or a close wakes it at once).
const HELD_ROOM_RECHECK: Duration = Duration::from_millis(50);

/// The longest a flush or compaction out of room waits for a dropped SST's release before
/// the store stops for want of room (`Inner::wait_for_held_room`): longer than any get or
/// short scan holds a version, short enough that a store no reader will let go of says so.
const HELD_ROOM_WAIT_MAX: Duration = Duration::from_secs(60);

/// An open store.
///
/// ```
/// use shale_lsm::{Db, Options};
///
/// let dir = tempfile::tempdir()?;
/// let db = Db::open(dir.path(), Options::small_for_tests())?;
/// db.put(b"apple", b"red")?;
/// assert_eq!(db.get(b"apple")?, Some(b"red".to_vec()));
/// db.delete(b"apple")?;
/// assert_eq!(db.get(b"apple")?, None);
/// db.close()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Db {
    inner: Arc<Inner>,
    /// The async API's queue and workers (`async_api.rs`).
    async_api: AsyncApi,
    /// Held while open (stores opened by path).
    _locks: Vec<StoreLock>,
}

/// What a background thread does. Flushes get a thread of their own so that a long
/// compaction never holds up the flush that frees a memtable (and with it, waiting writers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Worker {
    Flush,
    Compaction,
}

struct Inner {
    opts: Options,
    /// Set by `Db::shutdown` once the last flush is done: running compactions stop at their
    /// next check and are abandoned (`compact`), as RocksDB's close abandons them, instead
    /// of a close waiting for gigabytes of merging that the next open would redo anyway.
    closing: AtomicBool,
    /// Puts the compaction filter turned into tombstones since open.
    filtered_removals: AtomicU64,
    /// Whether compactions run in the idle I/O class now (`write_controller::compactions_yield`
    /// of the newest shape; `observe_shape` sets it, running compactions read it).
    compactions_yield: AtomicBool,
    /// Compactions begun in the idle I/O class, and times a running one went back to the
    /// thread's own class because the store fell behind, since open.
    compaction_io: compaction::CompactionIoCounts,
    volume: Arc<Volume>,
    pool: Arc<QueuePool>,
    cache: Arc<BlockCache>,
    /// Opened by [`Db::open_read_only`]: every write, flush and compaction is refused.
    read_only: bool,
    state: Mutex<State>,
    /// The state's memtables, version and last sequence, for point reads without the state
    /// mutex: every change to them under the mutex publishes them here (`published.rs`).
    published: Publication,
    /// Wakes the worker (work queued) and waiters (work done, room made).
    cv: Condvar,
    next_sst_id: AtomicU64,
    stalls: StallCounters,
    /// When the store opened: the clock of the slowdown's pacing (`State::delayed`).
    opened: Instant,
    user_bytes_written: AtomicU64,
    writes: AtomicU64,
    write_groups: AtomicU64,
    parallel_insert_groups: AtomicU64,
    /// Whether the machine has the cores for write groups to overlap
    /// ([`cores_to_overlap_groups`]).
    overlap_groups: bool,
    /// Whether the writers of a large group insert their own ops, in parallel
    /// ([`inserted_by_leader`]; [`cores_to_overlap_groups`] again).
    parallel_inserts: bool,
    /// Memtable size (and so L0 SST size), changeable while running (`set_write_buffer_bytes`).
    write_buffer_bytes: AtomicU64,
    /// The write buffer the store opened with: `Options::write_buffer_bytes` within the memory
    /// limit (`Options::write_buffer_within`); the tuner's smallest batch.
    opened_write_buffer_bytes: u64,
    /// `Options::memory_limit` as read at open, in bytes (0: none).
    memory_limit: u64,
    /// The index and filter bytes SST readers may hold outside the block cache
    /// (`Options::held_meta_room`; `u64::MAX` without a limit), and those the committed
    /// version's readers hold (set at every commit by [`Inner::fit_block_cache`]). A reader
    /// opened while they pass the room keeps its blocks in the cache.
    held_meta_room: u64,
    held_meta_bytes: AtomicU64,
    /// The WAL, owned by the write-group leader (and by whoever switches memtables). Lock
    /// order: `wal` before `state`.
    wal: Mutex<WalWriter>,
    /// Where write groups' time goes (`write_timing.rs`).
    timings: WriteTimings,
    /// The publication order of every write group, and the sync groups' page writes in
    /// flight side by side (`space/src/page_log/pipeline.rs`; without loggers, only the order).
    pipeline: LogPipeline,
    /// The WAL's allocated bytes ([`WalWriter::allocated_bytes`]), read by `stats` without
    /// the WAL lock.
    wal_bytes_allocated: Arc<AtomicU64>,
    /// [`WalWriter::deferred_dropped_bytes`], read without the WAL lock.
    wal_bytes_never_written: Arc<AtomicU64>,
    /// The thread giving back freed WAL groups' storage ([`WalWriter::releases`]; `None` when
    /// read-only), waited for without the WAL lock.
    wal_releases: Option<Arc<crate::wal::WalReleases>>,
    writers: WriteQueue,
    /// Compaction output size, changeable while running (`set_target_file_size`).
    target_file_bytes: AtomicU64,
    /// Levels above it get new SSTs on the fast volume of a tiered store (`tier_head.rs`).
    level_pointer: tier_head::LevelPointer,
    /// The background threads: flush, compaction (`pool.rs`), the tier head and the tuner.
    /// Here rather than in `Db` so that the tuner thread can resize the pool; joined by
    /// `Db::shutdown`.
    workers: Mutex<Vec<JoinHandle<()>>>,
    /// Times the active memtable filled while a sealed one was still unflushed: ADOC's memory
    /// overflow, counted by `switch_memtable`, read by the tuner (`tuner_thread.rs`).
    memory_overflows: AtomicU64,
    /// The running flush's progress, which paces writes into the last memtable
    /// (`memtable_pace.rs`).
    flush_progress: FlushProgress,
    /// Waits (of up to 100 ms each) of writers stopped for want of a memtable: the memtable
    /// stalls the tuner reads, without the memtable pace's waits, which `Stats::stalls`
    /// counts as memtable stall time too.
    memtable_stops: AtomicU64,
    /// The tuner's state and counters (`tuner_thread.rs`).
    tuner: tuner_thread::TunerState,
}

struct State {
    /// Generations whose flush committed; their WAL groups are freed, and their storage
    /// released, by the next write or memtable switch (under the WAL lock, which the flush
    /// thread never takes).
    freed_ltns: Vec<u64>,
    mem: Arc<Memtable>,
    /// Arena bytes reserved for the batches admitted to `mem`, by the per-op upper bound
    /// (`MEMTABLE_OVERHEAD_PER_OP`): kept within half its capacity, so an insert never finds
    /// the arena full. Which memtable is full is decided by its real bytes instead.
    mem_bytes: usize,
    mem_ltn: u64,
    /// Sealed memtables waiting for flush, oldest first, with their WAL generation.
    imm: VecDeque<(Arc<Memtable>, u64)>,
    version: Arc<Version>,
    /// Last sequence number published: every write up to it is in a memtable, readable.
    last_seq: u64,
    /// Last sequence number handed to a write group; ahead of `last_seq` while pipelined
    /// groups are in flight.
    allocated_seq: u64,
    next_ltn: u64,
    snapshots: BTreeMap<u64, usize>,
    /// Highest `last_seq` of any committed edit.
    persisted_seq: u64,
    /// Compaction debt of `version`, kept with it so the write path does not walk the levels.
    pending_compaction_bytes: u64,
    /// The pace of writes under slowdown pressure, adapted at each new version.
    delayed: write_controller::DelayedWrites,
    /// The pace of writes into the last memtable the store may fill while the flush ahead of
    /// it runs (`Inner::memtable_pace`), and the start of the flush it was set for.
    memtable_paced: write_controller::DelayedWrites,
    memtable_paced_flush: Option<u64>,
    stopped: Option<String>,
    shutting_down: bool,
    full_compaction: bool,
    /// The running full compaction still owes the compaction filter its rewrite of the last
    /// level (`Inner::bottom_rewrite`).
    rewrite_bottom: bool,
    /// Running compactions, round-robin pointers, odd chunks (`picker.rs`).
    compaction: CompactionState,
    /// Compaction threads wanted and running (`pool.rs`).
    pool: PoolSize,
    /// Bytes of room the running compactions reserved for the outputs they have not written
    /// yet, by tier index (`Inner::room_for_compaction`, `Inner::wait_for_flush_room`).
    compaction_room_reserved: [u64; 2],
    /// Picks of a compaction put off because its outputs would not fit beside the running
    /// ones', since open.
    compactions_deferred_for_room: u64,
    /// Flushes and compactions that ran out of room while a compaction ran, gave back their
    /// outputs and ran again once one ended (`Inner::flush_when_room`,
    /// `Inner::run_compaction`), since open.
    retried_for_room: u64,
    /// Flushes that waited for room a running compaction had reserved, since open
    /// (`Inner::wait_for_flush_room`).
    flushes_waited_for_room: u64,
    /// Flushes and compactions that ran out of room with none left to free any while
    /// dropped SSTs still held room, and waited for a release (`Inner::wait_for_held_room`),
    /// since open.
    waited_for_held_room: u64,
    /// `compactions` when a compaction last ran out of room beside running ones: no
    /// compaction starts again until one of those ends (`pick_compaction`), so a pick that
    /// cannot fit does not write and give back its outputs over and over meanwhile.
    out_of_room_at: Option<u64>,
    /// At most this many L0 SSTs in the next L0 compaction: one of more ran out of room
    /// alone (`run_compaction`); cleared when a compaction commits.
    l0_inputs_max: Option<usize>,
    flushes: u64,
    compactions: u64,
    /// Bytes into and out of each level since open (`Stats::level_io`).
    level_io: [crate::stats::LevelIo; LEVELS],
}

/// A consistent view of the store as of one sequence number. Reads through
/// [`ReadOptions::snapshot`] see exactly the writes before it, and compaction keeps every
/// version it needs while it is alive.
pub struct Snapshot {
    seq: u64,
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot").field("seq", &self.seq).finish_non_exhaustive()
    }
}

impl Clone for Snapshot {
    /// Another hold on the same sequence number: the versions it reads are kept until every
    /// clone has dropped.
    fn clone(&self) -> Snapshot {
        let mut st = self.inner.state.lock();
        *st.snapshots.entry(self.seq).or_insert(0) += 1;
        Snapshot { seq: self.seq, inner: self.inner.clone() }
    }
}

impl Snapshot {
    /// The sequence number the snapshot reads at.
    pub fn seq(&self) -> u64 {
        self.seq
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        let mut st = self.inner.state.lock();
        if let Some(n) = st.snapshots.get_mut(&self.seq) {
            *n -= 1;
            if *n == 0 {
                st.snapshots.remove(&self.seq);
            }
        }
    }
}

impl Db {
    /// Opens the store at `path` (a directory, created if missing, or a volume file or block
    /// device), creating a new one where nothing is stored, recovering after a crash.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for bad options; [`Error::InUse`] when the store is open
    /// already (one handle per store); the volume's errors (foreign, damaged or newer-format
    /// volume, I/O); [`Error::Corruption`] for damaged engine state or WAL.
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        opts.validate()?;
        let path = path.as_ref();
        // (A dangling symlink is left to the lock, which says its target does not exist.)
        if !path.exists() && path.symlink_metadata().is_err() && opts.volume.create_if_blank {
            std::fs::create_dir_all(path)
                .map_err(|e| shale_io::Error::at_path(shale_io::PathOp::CreateDir, path, e))?;
        }
        // The lock is on the volume file (made empty here for a new store), whatever name
        // `path` gives the store (`shale_space::store_lock`).
        let lock = if opts.volume.create_if_blank {
            StoreLock::acquire_creating(path)?
        } else {
            StoreLock::acquire(path)?
        };
        let vopts = opts.volume_options_for(block_device_bytes(path)?);
        let no_files = FileOptions::default();
        let capacity = opts.tiers.capacity_path.clone();
        let (opened, locks) = match &capacity {
            None => (Volume::open_path(path, &vopts, &no_files)?, vec![lock]),
            Some(cap) => {
                let opened = Volume::open_path_tiered(path, cap, &vopts, &no_files)?;
                // The capacity volume is locked too, once it exists (a new store's was just
                // made): one handle per store, whichever volume names it.
                (opened, vec![lock, StoreLock::acquire(cap)?])
            }
        };
        let files = [
            page_cache_files(path, &opts, Access::ReadWrite)?,
            match &capacity {
                Some(cap) => page_cache_files(cap, &opts, Access::ReadWrite)?,
                None => PageCacheFiles::default(),
            },
        ];
        let mut db = Db::open_volume(opened, opts, files)?;
        db._locks = locks;
        Ok(db)
    }

    /// Opens the store at `path` (its directory, its volume file or its block device) for
    /// reading only, writing nothing anywhere, as RocksDB's `OpenForReadOnly`: the WAL and
    /// the WAL tail are replayed into memory, the tail is left where it is, and the volume
    /// is opened O_RDONLY, so it works on a read-only mount and on a full file system. Other
    /// read-only handles may be open at the same time, a read-write one may not (in either
    /// order). Writes, flushes, compactions and option changes answer [`Error::ReadOnly`].
    ///
    /// ```
    /// use shale_lsm::{Db, Error, Options};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::small_for_tests())?;
    /// db.put(b"k", b"v")?;
    /// drop(db);
    /// let a = Db::open_read_only(dir.path(), Options::small_for_tests())?;
    /// let b = Db::open_read_only(dir.path().join("volume.shale"), Options::small_for_tests())?;
    /// assert_eq!(b.get(b"k")?, Some(b"v".to_vec()));
    /// assert!(matches!(a.put(b"k", b"w"), Err(Error::ReadOnly(_))));
    /// assert!(matches!(Db::open(dir.path(), Options::small_for_tests()), Err(Error::InUse(_))));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`Db::open`] ([`Error::InUse`] only while a read-write handle is open); nothing is
    /// ever created, so a missing path or blank volume is an error.
    pub fn open_read_only(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        opts.validate()?;
        let path = path.as_ref();
        let mut locks = vec![StoreLock::acquire_shared(path)?];
        let vopts = opts.volume_options();
        let no_files = FileOptions::default();
        let capacity = opts.tiers.capacity_path.clone();
        let opened = match &capacity {
            None => Volume::open_path_read_only(path, &vopts, &no_files)?,
            Some(cap) => {
                locks.push(StoreLock::acquire_shared(cap)?);
                Volume::open_path_tiered_read_only(path, cap, &vopts, &no_files)?
            }
        };
        let files = [
            page_cache_files(path, &opts, Access::ReadOnly)?,
            match &capacity {
                Some(cap) => page_cache_files(cap, &opts, Access::ReadOnly)?,
                None => PageCacheFiles::default(),
            },
        ];
        let mut db = Db::open_volume_read_only(opened, opts, files)?;
        db._locks = locks;
        Ok(db)
    }

    /// Opens the store on a device (a simulated one in tests, say). SSTs are read and written
    /// through the device's queues whatever [`Options::use_direct_reads`] and
    /// [`Options::use_direct_io_for_flush_and_compaction`] say: without a path there is no
    /// file to read or write through the page cache.
    ///
    /// # Errors
    /// As [`Db::open`].
    pub fn open_device(device: DeviceRef, opts: Options) -> Result<Db> {
        opts.validate()?;
        let vopts = opts.volume_options_for(fixed_capacity(&device));
        let opened = Volume::open(device, &vopts)?;
        Db::open_volume(opened, opts, Default::default())
    }

    /// Opens the tiered store on a fast device (WAL, version log, the top levels' SSTs) and
    /// a capacity device (the other SSTs), creating both volumes when both devices are blank
    /// ([`shale_space::Volume::open_tiered`]); `opts.tiers` places the SSTs, and its
    /// `capacity_path` is not used. SSTs are read and written with O_DIRECT, as for
    /// [`Db::open_device`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// use shale_io::MemoryDevice;
    /// use shale_lsm::{Db, Options};
    ///
    /// let fast = Arc::new(MemoryDevice::new(32 << 20, 4096)?);
    /// let capacity = Arc::new(MemoryDevice::new(64 << 20, 4096)?);
    /// let mut opts = Options::small_for_tests();
    /// opts.tiers.fast_levels = 1; // L0 on the fast device, the rest on the capacity one
    /// opts.tiers.adaptive = false; // and no head thread to move that line
    /// let db = Db::open_tiered_devices(fast.clone(), capacity.clone(), opts.clone())?;
    /// for i in 0..20_000u32 {
    ///     db.put(format!("key{i:06}").as_bytes(), &[7; 100])?;
    /// }
    /// db.compact_range()?;
    /// let stats = db.stats();
    /// assert!(stats.tiers[1].live_bytes > 0, "compacted SSTs live on the capacity device");
    /// drop(db);
    /// let db = Db::open_tiered_devices(fast, capacity, opts)?;
    /// assert_eq!(db.get(b"key000042")?, Some(vec![7; 100]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`Db::open_device`]; [`shale_space::Error::Tiers`] (as [`Error::Space`]) when the
    /// devices are not one store's fast and capacity volumes.
    pub fn open_tiered_devices(fast: DeviceRef, capacity: DeviceRef, opts: Options) -> Result<Db> {
        opts.validate()?;
        let vopts = opts.volume_options_for(fixed_capacity(&fast));
        let opened = Volume::open_tiered(fast, capacity, &vopts)?;
        Db::open_volume(opened, opts, Default::default())
    }

    /// Sets `key` to `value`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an oversized key or value; [`Error::Stopped`] after a
    /// failed write; the device's errors.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put(key, value);
        self.write(&b, &WriteOptions::default())
    }

    /// Deletes `key`.
    ///
    /// # Errors
    /// As [`Db::put`].
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(key);
        self.write(&b, &WriteOptions::default())
    }

    /// Deletes every key `k` with `start <= k < end` (bytewise; `end` excluded), as one write
    /// that takes one sequence number whatever the range holds: a range tombstone, not a scan.
    /// Snapshots taken before it still see the keys; writes after it are untouched.
    ///
    /// ```
    /// use shale_lsm::{Db, Options};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::small_for_tests())?;
    /// for k in [&b"log/001"[..], b"log/002", b"log/003", b"user/1"] {
    ///     db.put(k, b"x")?;
    /// }
    /// db.delete_range(b"log/", b"log/003")?;
    /// assert_eq!(db.get(b"log/002")?, None);
    /// assert_eq!(db.get(b"log/003")?, Some(b"x".to_vec())); // the end is excluded
    /// assert_eq!(db.get(b"user/1")?, Some(b"x".to_vec()));
    /// assert!(db.delete_range(b"b", b"a").is_err()); // an empty range is refused
    /// db.close()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `start >= end` (an empty range, `start == end`
    /// included) or a key is oversized; otherwise as [`Db::put`].
    pub fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete_range(start, end);
        self.write(&b, &WriteOptions::default())
    }

    /// Applies a batch atomically.
    ///
    /// # Errors
    /// As [`Db::put`].
    pub fn write(&self, batch: &WriteBatch, opts: &WriteOptions) -> Result<()> {
        self.inner.refuse_if_read_only("write")?;
        self.inner.write(batch, opts)
    }

    /// The value of `key`, or `None`.
    ///
    /// # Errors
    /// [`Error::Corruption`] when a damaged block is read; the device's errors.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_opt(key, &ReadOptions::default())
    }

    /// The value of `key` with read options (a snapshot).
    ///
    /// # Errors
    /// As [`Db::get`].
    pub fn get_opt(&self, key: &[u8], opts: &ReadOptions) -> Result<Option<Vec<u8>>> {
        self.inner.get(key, opts)
    }

    /// The values of `keys`, in their order (`None` where a key has none), as one
    /// [`Db::get`] per key would answer at one snapshot taken at the call. The data blocks
    /// the keys need that the block cache does not hold are read together, one batch per
    /// round, so a batch whose keys miss the cache waits for about one read, not one per
    /// key (`multi_get.rs`).
    ///
    /// ```
    /// use shale_lsm::{Db, Options, ReadOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::small_for_tests())?;
    /// db.put(b"a", b"1")?;
    /// db.put(b"c", b"3")?;
    /// let got = db.multi_get(&[b"a", b"b", b"c"], &ReadOptions::default())?;
    /// assert_eq!(got, [Some(b"1".to_vec()), None, Some(b"3".to_vec())]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`Db::get`]: a damaged block read for any key fails the whole call.
    pub fn multi_get(&self, keys: &[&[u8]], opts: &ReadOptions) -> Result<Vec<Option<Vec<u8>>>> {
        self.inner.multi_get(keys, opts)
    }

    /// An iterator over the store (as of a snapshot, within bounds or a prefix).
    pub fn iter(&self, opts: &ReadOptions) -> DbIterator {
        self.inner.iter(opts)
    }

    /// A snapshot of the current state.
    pub fn snapshot(&self) -> Snapshot {
        let mut st = self.inner.state.lock();
        let seq = st.last_seq;
        *st.snapshots.entry(seq).or_insert(0) += 1;
        Snapshot { seq, inner: self.inner.clone() }
    }

    /// Flushes every memtable to L0 and waits for it, and for the freed WAL groups' storage
    /// to be given back.
    ///
    /// # Errors
    /// [`Error::Stopped`] if a background failure stopped the store.
    pub fn flush(&self) -> Result<()> {
        self.inner.refuse_if_read_only("flush")?;
        // SSTs a caller let go of are given back first, so that a release the device refused
        // (it stops the volume) fails this flush's commit rather than going unreported; and
        // so are freed WAL groups.
        self.inner.pool.wait_for_releases();
        self.inner.wait_for_wal_releases()?;
        self.inner.flush()?;
        // The flushed memtables' WAL groups are free, and their storage is back when this
        // returns, as a compaction's room is when `compact_range` returns. A flush that
        // committed while the WAL was held (by a writer, or by this flush's own memtable
        // switch) left its group to the next append: freed here.
        self.inner.free_flushed_wal_groups()?;
        self.inner.wait_for_wal_releases()
    }

    /// Compacts the whole key space down to one level and waits for it.
    ///
    /// # Errors
    /// As [`Db::flush`].
    pub fn compact_range(&self) -> Result<()> {
        self.inner.refuse_if_read_only("compaction")?;
        self.inner.pool.wait_for_releases();
        self.inner.flush()?;
        let mut st = self.inner.state.lock();
        st.full_compaction = true;
        st.rewrite_bottom = self.inner.opts.compaction_filter.is_some();
        // Its caller waits: running compactions leave the idle I/O class at their next look.
        self.inner.compactions_yield.store(false, Ordering::Relaxed);
        self.inner.cv.notify_all();
        while st.full_compaction && st.stopped.is_none() {
            self.inner.cv.wait(&mut st);
        }
        stopped_error(&st)
    }

    /// Waits until no flush or compaction is pending (db_bench's `waitforcompaction`).
    ///
    /// # Errors
    /// [`Error::Stopped`] if a background failure stopped the store.
    pub fn wait_for_compaction(&self) -> Result<()> {
        if self.inner.read_only {
            // No background thread runs: nothing will ever be done, so nothing is waited for.
            return Ok(());
        }
        let mut st = self.inner.state.lock();
        while self.inner.work_pending(&st) && st.stopped.is_none() {
            self.inner.cv.notify_all();
            self.inner.cv.wait_for(&mut st, Duration::from_millis(50));
        }
        drop(st);
        // And what compactions dropped is back in the volume, wherever its last handle went,
        // and what flushes freed of the WAL is back in the device.
        self.inner.pool.wait_for_releases();
        self.inner.wait_for_wal_releases()?;
        stopped_error(&self.inner.state.lock())
    }

    /// Changes the memtable size (and so the size of the L0 SSTs flushed from it) while the
    /// store runs; it applies from the next memtable. ADOC's tuner turns this knob.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] below 64 KiB, or where a batch already accepted could not fit.
    pub fn set_write_buffer_bytes(&self, bytes: usize) -> Result<()> {
        self.inner.refuse_if_read_only("set_write_buffer_bytes")?;
        if bytes < 64 << 10 {
            return Err(Error::InvalidArgument(format!(
                "write buffer of {bytes} bytes is below 64 KiB"
            )));
        }
        self.inner.write_buffer_bytes.store(bytes as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Changes the size compaction outputs are cut at (`target_file_size_base`, rounded down
    /// to whole slots) while the store runs; compactions starting from now on use it. ADOC's
    /// tuner turns this knob with the write buffer size.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] below one slot.
    pub fn set_target_file_size(&self, bytes: u64) -> Result<()> {
        self.inner.refuse_if_read_only("set_target_file_size")?;
        let slot = self.inner.volume.layout().slot_bytes;
        if bytes < slot {
            return Err(Error::InvalidArgument(format!(
                "target file size of {bytes} bytes is below one {slot}-byte slot"
            )));
        }
        self.inner.target_file_bytes.store(bytes, Ordering::Relaxed);
        Ok(())
    }

    /// Statistics and properties.
    pub fn stats(&self) -> Stats {
        let mut stats = self.inner.stats();
        self.async_api.add_stats(&mut stats);
        stats
    }

    /// Verifies every checksum of the store and the LSM invariants: levels sorted and
    /// disjoint, every live slot referenced by exactly one SST, free + live = all slots.
    ///
    /// # Errors
    /// [`Error::Corruption`] naming the first problem found; the device's errors.
    pub fn check(&self) -> Result<crate::check::CheckReport> {
        // A dropped SST handed to the release thread still holds its extent until given back.
        self.inner.pool.wait_for_releases();
        let (version, live) = {
            // Under the state lock no commit is half done, so the version and the volume's
            // live extents describe the same state.
            let st = self.inner.state.lock();
            self.inner.volume.check_slots()?;
            (st.version.clone(), self.inner.volume.live_extents())
        };
        crate::check::check_version(&version, &live)
    }

    /// The options the store was opened with (a checkpoint makes its copy with them).
    pub(crate) fn options(&self) -> &Options {
        &self.inner.opts
    }

    /// The most memtable footprint one batch may take now (the tuner's batch size moves
    /// it): a checkpoint cuts its copy into batches within it.
    pub(crate) fn batch_footprint_max(&self) -> usize {
        self.inner.batch_limit()
    }

    crate::internal_fn! {
        /// The raw volume under the store, for the project's tools (`internals` feature).
        fn volume(&self) -> &Arc<Volume> {
            &self.inner.volume
        }
    }

    /// Flushes memtables, stops background work and closes the store. A compaction under
    /// way is abandoned, not finished (nothing of it is committed; the next open picks the
    /// work up again), and none starts: a close after a write burst returns in milliseconds
    /// rather than after every compaction the burst made due.
    ///
    /// # Errors
    /// The flush's error.
    pub fn close(mut self) -> Result<()> {
        // Async requests still queued are served first, so the flush below covers their
        // writes.
        self.async_api.shutdown();
        if self.inner.read_only {
            // Nothing to flush, and the WAL tail stays for the next read-write open.
            self.shutdown();
            return Ok(());
        }
        let flushed = self.inner.flush();
        self.shutdown();
        if flushed.is_ok() {
            // Every record is in a sealed, flushed WAL group: the tail holds nothing needed.
            if let Some(tail) = self.inner.wal.lock().take_tail() {
                tail.remove_file();
            }
        }
        flushed
    }

    fn shutdown(&mut self) {
        // Before the background threads end: a queued write may wait for room they make.
        self.async_api.shutdown();
        self.inner.closing.store(true, Ordering::Relaxed);
        self.inner.state.lock().shutting_down = true;
        self.inner.cv.notify_all();
        // A thread waiting for a dropped SST's release sees the shutdown.
        self.inner.pool.held_room().wake();
        // Taken out of the lock first: a thread being joined may want it (the tuner resizing
        // the pool) before it sees the shutdown.
        let workers: Vec<_> = self.inner.workers.lock().drain(..).collect();
        for w in workers {
            let _ = w.join();
        }
        self.inner.pool.wait_for_releases();
        // Before the volume can be opened again: a release still to run would punch out the
        // next instance's WAL pages. A refusal stopped nothing left to stop.
        let _ = self.inner.wait_for_wal_releases();
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        self.shutdown();
        if self.inner.read_only {
            // Nothing was written, and the WAL tail stays for the next read-write open.
            return;
        }
        // Dropped without `close`: write out and sync the WAL's last pages, so the writes kept
        // only in the WAL tail also survive a power cut from now on and the tail file can go.
        // On failure the tail stays, for the next open to replay.
        let mut wal = self.inner.wal.lock();
        if self.inner.state.lock().stopped.is_none() && wal.active().is_some() && wal.sync().is_ok()
        {
            if let Some(tail) = wal.take_tail() {
                tail.remove_file();
            }
        }
    }
}

/// A memtable for a write buffer of `write_buffer_bytes`.
fn new_memtable(write_buffer_bytes: usize) -> Memtable {
    Memtable::new(MEMTABLE_CAPACITY_WRITE_BUFFERS * write_buffer_bytes)
}

/// Whether a batch reserving `footprint` arena bytes goes into `mem`, which holds `reserved`:
/// its entries' real bytes stay within the write buffer (RocksDB's rule, on its arena usage:
/// charging the upper bound instead made 10 flushes of fillrandom and overwrite of 1M
/// 116-byte entries where 6 hold them, and 427 MB of SST writes against 342 MB), and the
/// reservation within half the arena.
fn memtable_has_room(
    mem: &Memtable,
    reserved: usize,
    footprint: usize,
    write_buffer: usize,
) -> bool {
    mem.used_bytes() + footprint <= write_buffer && reserved + footprint <= mem.capacity_bytes() / 2
}

/// What a read returns for the newest visible entry of a key, given the newest range
/// tombstone over the key in the sources consulted so far (0 for none).
fn visible_value(seq: u64, kind: Kind, value: Vec<u8>, covering: u64) -> Option<Vec<u8>> {
    (kind == Kind::Put && seq > covering).then_some(value)
}

/// [`visible_value`] of an entry an SST returned (its internal key and value).
fn visible_sst_value(ikey: &[u8], value: Vec<u8>, covering: u64) -> Result<Option<Vec<u8>>> {
    let p = key::parse(ikey).ok_or_else(|| Error::corruption("SST entry: bad internal key", 0))?;
    Ok(visible_value(p.seq, p.kind, value, covering))
}

/// What a point read consults: the published memtables (newest first) and version, and the
/// sequence it reads at.
struct ReadView {
    view: arc_swap::Guard<Arc<View>>,
    snapshot: u64,
}

impl ReadView {
    /// The memtables' answer for `user_key`: `Ok` when one decides (an entry, or a range
    /// tombstone over the key), else `Err` with the newest covering tombstone's sequence seen
    /// (0 for none), for the SSTs to go on with.
    fn memtables(&self, user_key: &[u8]) -> std::result::Result<Option<Vec<u8>>, u64> {
        let mut covering = 0;
        for m in &self.view.mems {
            covering = covering.max(m.max_covering_tombstone_seq(user_key, self.snapshot));
            if let Some((seq, kind, value)) = m.get_entry(user_key, self.snapshot) {
                return Ok(visible_value(seq, kind, value, covering));
            }
            if covering > 0 {
                return Ok(None);
            }
        }
        Err(covering)
    }
}

/// Room a flush of a memtable whose entries take `memtable_bytes` reserves for its output:
/// the entries' bytes and less per entry than a skiplist node, plus its filter and index:
/// an eighth more covers those (a shorter reservation only costs a relocation), and two
/// slots. The room compactions leave for flushes is counted the same way
/// (`Inner::flush_room`), so that a flush finds what they left.
pub(crate) fn flush_reserve_for(memtable_bytes: u64, slot_bytes: u64) -> u64 {
    memtable_bytes.saturating_mul(9) / 8 + 2 * slot_bytes
}

/// The rule of `Inner::wait_for_flush_room`: whether a flush needing `need` bytes waits,
/// with `reserved` bytes reserved by running compactions on a tier with `room` free bytes
/// (`None`: unbounded).
pub(crate) fn flush_waits_for_room(room: Option<u64>, reserved: u64, need: u64) -> bool {
    room.is_some_and(|room| room < reserved.saturating_add(need))
}

fn stopped_error(st: &State) -> Result<()> {
    match &st.stopped {
        Some(why) => Err(Error::Stopped(why.clone())),
        None => Ok(()),
    }
}

/// How a store is opened, for [`page_cache_files`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    ReadWrite,
    ReadOnly,
}

/// The buffered descriptors SSTs are read and written through (`sst/volume_io.rs`), on the
/// volume file or block device that `path` names, unless the options ask for direct reads
/// or direct writes ([`Options::writes_ssts_through_page_cache`]: never on a block device);
/// a read-only store writes nothing. Opened after the volume, so the file exists (a new
/// store's was just created).
fn page_cache_files(path: &Path, opts: &Options, access: Access) -> Result<PageCacheFiles> {
    let target = shale_space::volume_file(path);
    let reads =
        if opts.use_direct_reads { None } else { Some(Arc::new(BufferedReader::open(&target)?)) };
    let writes = if access == Access::ReadOnly || !opts.writes_ssts_through_page_cache(path) {
        None
    } else {
        Some(Arc::new(BufferedWriter::open(&target)?))
    };
    Ok(PageCacheFiles { reads, writes })
}

/// Opens the reader of SST `m`, its index and filter held or cached as `opts` says.
fn open_sst(
    pool: &Arc<QueuePool>,
    cache: &Arc<BlockCache>,
    place: IndexAndFilter,
    m: &SstMeta,
) -> Result<Arc<SstHandle>> {
    let source = Arc::new(VolumeSource::new(pool.clone(), m.extent));
    let reader = SstReader::open(source, cache.clone(), m.id, place)?;
    Ok(Arc::new(SstHandle::new(m.clone(), reader, pool.clone(), cache.clone())))
}

/// Abandons a group's publication if dropped before the leader published it (it panicked,
/// or its turn never came): its writers give up instead of waiting forever. Forgotten once
/// the group is published.
struct AbandonUnpublished<'a>(&'a GroupSync);

impl Drop for AbandonUnpublished<'_> {
    fn drop(&mut self) {
        self.0.abandon();
    }
}

/// Where [`Inner::append_group`] left a group.
enum Appended {
    /// In the WAL: each writer's first sequence number, the memtable, the last sequence, and
    /// the group's ticket (already written; none for a group that holds the WAL lock until it
    /// has published while no other group is in flight).
    Written { firsts: Vec<u64>, mem: Arc<Memtable>, last_seq: u64, ticket: Option<u64> },
    /// Packed for the pipeline: the same, its page writes and its ticket.
    Staged {
        firsts: Vec<u64>,
        mem: Arc<Memtable>,
        last_seq: u64,
        pages: Vec<(u64, AlignedBuf)>,
        ticket: u64,
    },
}

impl Inner {
    fn check_batch(&self, batch: &WriteBatch) -> Result<usize> {
        for op in batch.ops() {
            if op.key.len() > KEY_BYTES_MAX {
                return Err(Error::InvalidArgument(format!(
                    "key of {} bytes is over the {KEY_BYTES_MAX}-byte limit",
                    op.key.len()
                )));
            }
        }
        batch.check_ranges(KEY_BYTES_MAX)?;
        let footprint = batch.encoded_len() + batch.len() * MEMTABLE_OVERHEAD_PER_OP;
        let limit = self.batch_limit();
        if footprint > limit {
            return Err(Error::InvalidArgument(format!(
                "batch of {} bytes ({footprint} in a memtable) is over the {limit}-byte limit \
                 (half a memtable and half a WAL group)",
                batch.encoded_len()
            )));
        }
        Ok(footprint)
    }

    fn write(&self, batch: &WriteBatch, opts: &WriteOptions) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let footprint = self.check_batch(batch)?;
        let joined = self.timings.joining();
        let t0 = contention::enabled().then(std::time::Instant::now);
        let (id, outcome) = self.writers.join(batch.encode(0), batch.len(), footprint, opts.sync);
        if let Some(t0) = t0 {
            // A writer that leads at once did not wait; any other waited for a leader.
            let waited = t0.elapsed();
            let led_at_once = matches!(outcome, Outcome::Lead) && waited < SPIN_WAIT_MAX;
            WRITE_GROUP_JOIN.record(!led_at_once, waited);
        }
        match outcome {
            Outcome::Lead => {
                self.timings.became_leader(joined);
                let led = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    self.lead_group(id, batch, opts.sync)
                }));
                led.unwrap_or_else(|panic| {
                    Err(self.leader_panicked(id, panic_message(&*panic).to_string()))
                })
            }
            Outcome::Insert { first_seq, mem, group } => {
                insert_ops(batch.ops(), first_seq, &mem);
                group.inserted();
                if GROUP_PUBLISHED.wait(|| group.wait_published()) {
                    Ok(())
                } else {
                    // The leader gave up: its turn never came (the store stopped, and says
                    // why), or it panicked, whose unwinding abandons the group before its
                    // catch records the store's stop reason.
                    let why = self.state.lock().stopped.clone();
                    Err(Error::Stopped(why.unwrap_or_else(|| {
                        "the leader of this write's group panicked before publishing it".into()
                    })))
                }
            }
            Outcome::Done => Ok(()),
            Outcome::Failed(e) => Err(e),
        }
    }

    /// Most bytes (memtable footprint) of one batch: half a memtable and half a WAL group, so
    /// a batch always fits in a fresh one of each.
    fn batch_limit(&self) -> usize {
        let group_bytes = self.volume.layout().wal_bytes / u64::from(self.opts.wal_groups() + 1);
        (self.write_buffer_bytes() / 2).min(group_bytes as usize / 2)
    }

    /// Most bytes of one write group: what one batch may take (so a group fits where each of
    /// its batches would), at most 1 MiB so a group's writers do not wait on a long append.
    fn group_cap(&self) -> usize {
        self.batch_limit().min(1 << 20)
    }

    /// Commits a group as its leader (the writer `id`, first in the group).
    ///
    /// For unsynced writes on a machine with cores to spare, only the WAL append is done one
    /// group at a time, under the WAL lock: the leader takes a ticket (`space/src/page_log/turns.rs`)
    /// and lets go of the lock and of the leadership before its group inserts into the
    /// memtable, so the next group appends while this one inserts, and several groups insert
    /// side by side; each publishes once every earlier ticket has. Holding the lock through
    /// the inserts made them serial: on 16 cores fillrandom with 16 threads ran at 0.64x its
    /// speed on one thread, its leaders busy for 3.76 s of 4.07 (docs/lsm.md, "Write groups
    /// on many cores"). Otherwise the leader holds both until its group has published, as
    /// it always did ([`OVERLAPPED_GROUPS_MIN_CORES`] says why). A sync group whose append
    /// went to the pipeline (`space/src/page_log/pipeline.rs`) lets go once its pages are packed, and
    /// writes them on a logger queue while the next group packs its own.
    fn lead_group(&self, id: u64, batch: &WriteBatch, sync: bool) -> Result<()> {
        // A sync leader takes its logger first: writers queue behind it meanwhile and join
        // its group (`LogPipeline::acquire`).
        let led_since = self.timings.leading();
        let logger = if sync { WAL_LOGGER.wait(|| self.pipeline.acquire()) } else { None };
        let mut group = self.writers.take_group(self.group_cap());
        debug_assert_eq!(group[0].id, id, "the leader is first in its group");
        // An appended group holds on until it has published unless the machine has the
        // cores and no writer of the group asked for sync ([`OVERLAPPED_GROUPS_MIN_CORES`]).
        let overlap = self.overlap_groups && group.iter().all(|w| !w.sync);
        let mut wal = WAL_MUTEX.lock(&self.wal);
        let appended = self.append_group(&mut wal, &mut group, logger.is_some(), !overlap);
        let mut held = match &appended {
            Ok(Appended::Written { .. }) if !overlap => Some(wal),
            _ => {
                drop(wal);
                None
            }
        };
        if held.is_none() {
            self.timings.passing(led_since);
            self.writers.pass_leadership();
        }
        let let_go = |held: &mut Option<contention::Held<'_, WalWriter>>| {
            if held.take().is_some() {
                self.timings.passing(led_since);
                self.writers.pass_leadership();
            }
        };
        match appended {
            Ok(Appended::Written { firsts, mem, last_seq, ticket }) => {
                let group_seqs = (firsts.as_slice(), &mem, last_seq);
                let published = self.insert_and_publish(id, batch, &group, group_seqs, ticket);
                let_go(&mut held);
                published?;
                if group.iter().any(|w| w.sync) {
                    self.pipeline.committed(group.len());
                }
                Ok(())
            }
            Ok(Appended::Staged { firsts, mem, last_seq, pages, ticket }) => {
                let group_seqs = (firsts.as_slice(), &mem, last_seq);
                self.finish_staged(id, batch, &group, group_seqs, (logger, pages, ticket))
            }
            Err(e) => {
                self.fail_group(id, &group, &e);
                Err(e)
            }
        }
    }

    /// The rest of a pipelined group's commit, after its leader let go of the WAL and of the
    /// leadership: write its pages, then insert and publish in its turn.
    fn finish_staged(
        &self,
        id: u64,
        batch: &WriteBatch,
        group: &[Pending],
        group_seqs: (&[u64], &Arc<Memtable>, u64),
        (logger, pages, ticket): (Option<Logger<'_>>, Vec<(u64, AlignedBuf)>, u64),
    ) -> Result<()> {
        let writing = self.timings.appending();
        self.pipeline.write(logger, ticket, pages);
        self.timings.appended(writing);
        self.insert_and_publish(id, batch, group, group_seqs, Some(ticket))?;
        self.pipeline.committed(group.len());
        Ok(())
    }

    /// Stage 4 for a group in the WAL (its ticket `ticket`, if it took one): the memtable
    /// inserts, by the leader or by each writer, then, in the ticket's turn (every earlier
    /// group published), the publication of its last sequence number; every writer is told.
    ///
    /// Inserting before the turn is safe: an entry above the published sequence is seen by
    /// no read, and a memtable is sealed only once every group in flight has published
    /// (`switch_memtable`). If the turn never comes (this group's pages or an earlier
    /// group's failed), nothing of the group is acknowledged and the store stops (P5).
    fn insert_and_publish(
        &self,
        id: u64,
        batch: &WriteBatch,
        group: &[Pending],
        (firsts, mem, last_seq): (&[u64], &Arc<Memtable>, u64),
        ticket: Option<u64>,
    ) -> Result<()> {
        #[cfg(feature = "failpoints")]
        if let Some(pause) = self.opts.pause_before_group_inserts {
            std::thread::sleep(pause);
        }
        if inserted_by_leader(group, self.parallel_inserts) {
            // Waking each writer to insert a few ops, then again once the group is
            // published, costs more than the inserts: do them here, wake each once.
            for (p, &first_seq) in group.iter().zip(firsts) {
                insert_ops(record_ops(&p.record), first_seq, mem);
            }
            #[cfg(feature = "failpoints")]
            self.leader_failpoint(group.len());
            if let Err(e) = self.wait_turn(ticket) {
                self.fail_group(id, group, &e);
                return Err(e);
            }
            self.publish_last_seq(&mut self.state.lock(), last_seq);
            if let Some(ticket) = ticket {
                self.pipeline.published(ticket);
            }
            let outcomes = group.iter().map(|p| (p.id, Outcome::Done)).collect();
            self.writers.finish(id, outcomes);
            return Ok(());
        }
        self.parallel_insert_groups.fetch_add(1, Ordering::Relaxed);
        let sync = GroupSync::new(group.len());
        // Should this leader panic or its turn never come, its writers waiting for the
        // publication give up rather than wait forever.
        let abandon = AbandonUnpublished(&sync);
        let outcomes = group
            .iter()
            .zip(firsts)
            .map(|(p, &first_seq)| {
                let o = Outcome::Insert { first_seq, mem: mem.clone(), group: sync.clone() };
                (p.id, o)
            })
            .collect();
        self.writers.finish(id, outcomes);
        insert_ops(batch.ops(), firsts[0], mem);
        sync.inserted();
        sync.wait_inserted();
        #[cfg(feature = "failpoints")]
        self.leader_failpoint(group.len());
        self.wait_turn(ticket)?;
        self.publish_last_seq(&mut self.state.lock(), last_seq);
        if let Some(ticket) = ticket {
            self.pipeline.published(ticket);
        }
        sync.publish();
        std::mem::forget(abandon);
        Ok(())
    }

    /// Waits for `ticket`'s turn to publish (at once without a ticket). If it never comes
    /// (its pages or an earlier ticket's failed), nothing from here on may be acknowledged:
    /// the store stops (P5).
    fn wait_turn(&self, ticket: Option<u64>) -> Result<()> {
        let Some(ticket) = ticket else { return Ok(()) };
        self.pipeline.wait_turn(ticket).map_err(Error::from).inspect_err(|e| self.stop(e))
    }

    /// Tells every writer of a failed group its error.
    fn fail_group(&self, id: u64, group: &[Pending], e: &Error) {
        let outcomes =
            group.iter().map(|p| (p.id, Outcome::Failed(crate::sst::duplicate_error(e)))).collect();
        self.writers.finish(id, outcomes);
    }

    /// Stops the store after a WAL failure (P5) or a leader's panic, keeping the first
    /// reason.
    fn stop(&self, e: &Error) {
        let mut st = self.state.lock();
        if st.stopped.is_none() {
            st.stopped = Some(match e {
                Error::Stopped(why) => why.clone(),
                e => format!("WAL write failed: {}", shale_io::Chain(e)),
            });
        }
        self.cv.notify_all();
    }

    /// A write group's leader panicked (a bug): as a background thread's panic does, it stops
    /// the store instead of leaving every writer waiting for it. The writers of its group are
    /// told `Stopped`, the leadership passes on (the next leader finds the store stopped), and
    /// pipelined groups waiting for their turn give up. What the WAL holds is recovered by a
    /// reopen, as after any stop.
    fn leader_panicked(&self, leader_id: u64, why: String) -> Error {
        let e = Error::Stopped(format!("a write group's leader panicked: {why}"));
        self.stop(&e);
        self.pipeline.abandon(&e.to_string());
        self.writers.abandon(leader_id, || self.stopped_by_leader());
        e
    }

    /// Panics where `Options::panic_in_write_leader_after` says, in a group of several
    /// writers, so that others wait on it (tests only).
    #[cfg(feature = "failpoints")]
    fn leader_failpoint(&self, writers: usize) {
        if let Some(after) = self.opts.panic_in_write_leader_after {
            let groups = self.write_groups.load(Ordering::Relaxed);
            if groups > after && writers > 1 {
                panic!("failpoint: a write group's leader after {groups} groups");
            }
        }
    }

    /// The store's reason for stopping, as an error.
    fn stopped_by_leader(&self) -> Error {
        let why = self.state.lock().stopped.clone();
        Error::Stopped(why.unwrap_or_else(|| "a write group's leader gave up".into()))
    }

    /// Waits until every pipelined group's pages are written (the WAL lock held, so no new
    /// one starts): before an append that is not pipelined, whose pages follow theirs.
    fn wait_pipeline_written(&self, wal: &mut WalWriter) -> Result<()> {
        self.wait_pipeline(wal, LogPipeline::wait_written)
    }

    /// Waits until every group in flight has published (the WAL lock held, so no new one
    /// starts): before a memtable switch, so that the sealed memtable holds all its entries.
    fn drain_pipeline(&self, wal: &mut WalWriter) -> Result<()> {
        self.wait_pipeline(wal, LogPipeline::wait_idle)
    }

    /// Runs one of the pipeline's waits; after it every staged page is durable. A failed
    /// ticket stops the store (P5).
    fn wait_pipeline(
        &self,
        wal: &mut WalWriter,
        wait: fn(&LogPipeline) -> shale_space::Result<()>,
    ) -> Result<()> {
        wait(&self.pipeline).map_err(Error::from).inspect_err(|e| self.stop(e))?;
        wal.staged_pages_durable();
        Ok(())
    }

    /// Stages 2 and 3 for a group: room, sequence numbers, WAL. A sync group whose leader
    /// holds a logger (`with_logger`) is packed for the pipeline where the WAL allows
    /// ([`WalWriter::stage_sync`]); any other is appended once the pipeline has drained.
    ///
    /// An appended group that will hold the WAL lock until it has published (`held`) takes
    /// no ticket when no other group is in flight: nothing can come between it and its
    /// publication, and a lone writer on a small machine then pays for no ticket.
    fn append_group(
        &self,
        wal: &mut WalWriter,
        group: &mut [Pending],
        with_logger: bool,
        held: bool,
    ) -> Result<Appended> {
        let footprint: usize = group.iter().map(|p| p.footprint).sum();
        let sync = group.iter().any(|p| p.sync);
        let mut st = self.state.lock();
        stopped_error(&st)?;
        if !st.freed_ltns.is_empty() {
            // A flush committed since the last write: its group's storage goes back now
            // rather than at the next memtable switch.
            self.free_wal_groups(wal, &mut st)?;
        }
        let bytes = group.iter().map(|p| p.record.len() as u64).sum();
        st = self.make_room(st, wal, footprint, bytes)?;
        // Pipelined groups before this one may not have published yet: number from the last
        // sequence handed out, not the last published.
        let mut seq = st.allocated_seq + 1;
        let mut firsts = Vec::with_capacity(group.len());
        for p in group.iter_mut() {
            p.record[..8].copy_from_slice(&seq.to_le_bytes());
            firsts.push(seq);
            seq += p.ops as u64;
        }
        st.allocated_seq = seq - 1;
        st.mem_bytes += footprint;
        let mut mem = st.mem.clone();
        drop(st);
        let records: Vec<&[u8]> = group.iter().map(|p| p.record.as_slice()).collect();
        let staged = loop {
            let attempt = if sync && with_logger {
                wal.tickets_published_below(self.pipeline.published_below());
                wal.stage_sync(&records)
            } else {
                Ok(None)
            };
            let appended = match attempt {
                Ok(Some(pages)) => break Some(pages),
                Ok(None) => {
                    self.wait_pipeline_written(wal)?;
                    let appending = self.timings.appending();
                    let appended = wal.append(&records, sync);
                    self.timings.appended(appending);
                    appended
                }
                Err(e) => Err(e),
            };
            match appended {
                Ok(()) => break None,
                Err(AppendError::GroupFull) => {
                    let mut st = self.state.lock();
                    self.switch_memtable(wal, &mut st)?;
                    st.mem_bytes += footprint;
                    mem = st.mem.clone();
                }
                Err(AppendError::Failed(e)) => {
                    self.stop(&e);
                    return Err(e);
                }
            }
        };
        let bytes: usize = records.iter().map(|r| r.len()).sum();
        self.user_bytes_written.fetch_add(bytes as u64, Ordering::Relaxed);
        self.writes.fetch_add(group.len() as u64, Ordering::Relaxed);
        self.write_groups.fetch_add(1, Ordering::Relaxed);
        let last_seq = seq - 1;
        Ok(match staged {
            Some(pages) => {
                let ticket = self.pipeline.begin();
                wal.staged_as(ticket);
                Appended::Staged { firsts, mem, last_seq, pages, ticket }
            }
            None => {
                let ticket =
                    (!held || !self.pipeline.idle()).then(|| self.pipeline.begin_appended());
                Appended::Written { firsts, mem, last_seq, ticket }
            }
        })
    }

    /// Stage 2 of the write path.
    fn make_room<'a>(
        &'a self,
        mut st: MutexGuard<'a, State>,
        wal: &mut WalWriter,
        footprint: usize,
        bytes: u64,
    ) -> Result<MutexGuard<'a, State>> {
        let now_us = self.pacing_clock_us();
        st.delayed.note_write(now_us, bytes);
        if let Pressure::Delay(kind) = self.pressure(&st) {
            let wait = st.delayed.delay(now_us, bytes);
            if !wait.is_zero() {
                let started = Instant::now();
                drop(st);
                write_controller::pace_wait(wait, self.pace_spin_limit());
                self.stalls.record(kind, started.elapsed());
                st = self.state.lock();
            }
        }
        let wait = self.memtable_pace(&mut st, bytes);
        if !wait.is_zero() {
            let started = Instant::now();
            drop(st);
            write_controller::pace_wait(wait, self.pace_spin_limit());
            self.stalls.record(Stall::Memtable, started.elapsed());
            st = self.state.lock();
        }
        loop {
            stopped_error(&st)?;
            if let Pressure::Stop(kind) = self.pressure(&st) {
                self.stall(&mut st, kind);
                continue;
            }
            // The active memtable was sized when it started; a later change of the write
            // buffer size applies from the next one.
            // `mem_bytes`, not the memtable's entries: a group in flight may have room
            // reserved in it and not have inserted yet.
            if st.mem_bytes == 0 && footprint > st.mem.capacity_bytes() / 2 {
                // The write buffer shrank after this batch was sized: an empty memtable holds
                // nothing in the WAL, so swap in one big enough.
                st.mem = Arc::new(Memtable::new(2 * footprint));
                self.publish_view(&st);
            }
            if st.mem_bytes == 0
                || memtable_has_room(&st.mem, st.mem_bytes, footprint, self.write_buffer_bytes())
            {
                return Ok(st);
            }
            self.switch_memtable(wal, &mut st)?;
        }
    }

    /// How long a paced write may spin rather than sleep (`write_controller::pace_wait`).
    fn pace_spin_limit(&self) -> Duration {
        write_controller::pace_spin_limit(self.opts.background_cpu_priority)
    }

    /// A flush's step of progress (`published`) calls the test's hook.
    #[cfg(feature = "failpoints")]
    fn flush_step_failpoint(&self, published: bool) {
        if let (true, Some(hook)) = (published, &self.opts.flush_progress_hook) {
            (hook.0)();
        }
    }

    #[cfg(not(feature = "failpoints"))]
    fn flush_step_failpoint(&self, _published: bool) {}

    /// Microseconds since the store opened: the clock of the write path's pacing.
    fn pacing_clock_us(&self) -> u64 {
        self.opened.elapsed().as_micros() as u64
    }

    /// How long a write group of `bytes` waits so that the active memtable fills no sooner
    /// than the flush it would wait for ends (`memtable_pace.rs`): only while that switch
    /// would have to wait, that is while every other memtable the store may hold is sealed.
    fn memtable_pace(&self, st: &mut State, bytes: u64) -> Duration {
        if st.imm.is_empty() || st.imm.len() + 1 < self.opts.max_write_buffer_number {
            return Duration::ZERO;
        }
        let now_us = self.pacing_clock_us();
        let flush = self.flush_progress.snapshot();
        let room = (self.write_buffer_bytes() as u64).saturating_sub(st.mem.used_bytes() as u64);
        let Some(rate) = memtable_pace::rate(room, flush, now_us) else {
            return Duration::ZERO;
        };
        if st.memtable_paced_flush != Some(flush.started_us) {
            // A new flush: no credit from the last one's pace.
            st.memtable_paced.restart();
            st.memtable_paced_flush = Some(flush.started_us);
        }
        st.memtable_paced.set_rate(now_us, rate);
        st.memtable_paced.delay(now_us, bytes)
    }

    fn write_buffer_bytes(&self) -> usize {
        self.write_buffer_bytes.load(Ordering::Relaxed) as usize
    }

    /// Whether a flush or a compaction is running or waiting to run.
    fn work_pending(&self, st: &State) -> bool {
        let v = &st.version;
        let sizes = level_sizes(v);
        let targets = LevelTargets::compute(&self.opts, &sizes);
        !st.imm.is_empty()
            || st.compaction.running() > 0
            || v.levels[0].len() >= self.opts.level0_file_num_compaction_trigger
            || (1..LEVELS).any(|l| targets.is_over(&sizes, l))
    }

    fn pressure(&self, st: &State) -> Pressure {
        write_controller::pressure(
            &self.opts,
            st.version.levels[0].len(),
            st.pending_compaction_bytes,
        )
    }

    /// Tells the slowdown's pacing of a new version: its pressure, its debt (the levels'
    /// excess, and L0's bytes once L0 is due for compaction, as RocksDB estimates it) and
    /// whether L0 is near the stop trigger.
    fn observe_shape(&self, st: &mut State) {
        let l0_files = st.version.levels[0].len();
        let l0_due = l0_files >= self.opts.level0_file_num_compaction_trigger;
        let l0_debt = if l0_due { st.version.level_bytes(0) } else { 0 };
        let near_stop =
            l0_files + write_controller::NEAR_STOP_L0_FILES >= self.opts.level0_stop_writes_trigger;
        let pressure = self.pressure(st);
        let now_us = self.pacing_clock_us();
        let debt = st.pending_compaction_bytes + l0_debt;
        st.delayed.observe(now_us, pressure, debt, l0_files, near_stop);
        // A full compaction is a caller waiting: it never yields.
        let yields = !st.full_compaction
            && write_controller::compactions_yield(
                &self.opts,
                l0_files,
                st.pending_compaction_bytes,
            );
        self.compactions_yield.store(yields, Ordering::Relaxed);
    }

    /// Bytes by which levels exceed their targets: an estimate of compaction debt.
    fn pending_compaction_bytes(&self, v: &Version) -> u64 {
        let sizes = level_sizes(v);
        LevelTargets::compute(&self.opts, &sizes).excess_bytes(&sizes)
    }

    fn stall(&self, st: &mut MutexGuard<'_, State>, kind: Stall) {
        // Callers loop until the pressure is gone and return Stopped first thing in each turn;
        // a stopped store relieves no pressure, so waiting would only delay that answer.
        if st.stopped.is_some() {
            return;
        }
        let started = Instant::now();
        self.cv.notify_all();
        self.cv.wait_for(st, Duration::from_millis(100));
        self.stalls.record(kind, started.elapsed());
    }

    /// Seals the active memtable and its WAL group and starts new ones, waiting while too many
    /// memtables are sealed (MT stall).
    fn switch_memtable(&self, wal: &mut WalWriter, st: &mut MutexGuard<'_, State>) -> Result<()> {
        // Pipelined groups still writing into the memtable about to be sealed (or its WAL
        // group) finish first: the flush takes every entry, and the seal records every page.
        // They publish under the state lock, so it is let go meanwhile.
        MutexGuard::unlocked(st, || self.drain_pipeline(wal))?;
        if !st.imm.is_empty() {
            self.memory_overflows.fetch_add(1, Ordering::Relaxed);
        }
        while st.imm.len() + 1 >= self.opts.max_write_buffer_number {
            stopped_error(st)?;
            self.memtable_stops.fetch_add(1, Ordering::Relaxed);
            self.stall(st, Stall::Memtable);
        }
        self.free_wal_groups(wal, st)?;
        let result = (|| {
            wal.seal_group()?;
            let ltn = st.next_ltn;
            st.next_ltn += 1;
            wal.start_group(ltn)?.ok_or_else(|| Error::corruption("no free WAL group", 0))?;
            Ok(ltn)
        })();
        let ltn = match result {
            Ok(ltn) => ltn,
            Err(e) => {
                st.stopped = Some(format!("WAL group switch failed: {}", shale_io::Chain(&e)));
                self.cv.notify_all();
                return Err(e);
            }
        };
        let full =
            std::mem::replace(&mut st.mem, Arc::new(new_memtable(self.write_buffer_bytes())));
        st.mem_bytes = 0;
        let old_ltn = std::mem::replace(&mut st.mem_ltn, ltn);
        st.imm.push_back((full, old_ltn));
        self.publish_view(st);
        self.cv.notify_all();
        Ok(())
    }

    /// Frees the WAL groups of the flushes committed since the last append (see
    /// `free_wal_groups`).
    fn free_flushed_wal_groups(&self) -> Result<()> {
        let mut wal = self.wal.lock();
        let mut st = self.state.lock();
        if st.freed_ltns.is_empty() {
            return Ok(());
        }
        self.free_wal_groups(&mut wal, &mut st)
    }

    /// Waits until the storage of every freed WAL group is given back; a release the device
    /// refused stops the store (P5), as it would have in the write path.
    fn wait_for_wal_releases(&self) -> Result<()> {
        let Some(releases) = &self.wal_releases else {
            return Ok(());
        };
        releases.wait_idle();
        match releases.take_failure() {
            None => Ok(()),
            Some(e) => {
                let mut st = self.state.lock();
                // A store already stopped says so, as every call after the first failure does.
                stopped_error(&st)?;
                st.stopped = Some(format!("WAL group release failed: {}", shale_io::Chain(&e)));
                self.cv.notify_all();
                Err(e)
            }
        }
    }

    /// Frees the WAL groups of the generations whose flush committed, releasing their storage
    /// ([`WalWriter::free_group`]); a failed release stops the store, as a failed WAL write
    /// does (P5).
    fn free_wal_groups(&self, wal: &mut WalWriter, st: &mut MutexGuard<'_, State>) -> Result<()> {
        for ltn in std::mem::take(&mut st.freed_ltns) {
            if let Err(e) = wal.free_group(ltn) {
                st.stopped = Some(format!("WAL group release failed: {}", shale_io::Chain(&e)));
                self.cv.notify_all();
                return Err(e);
            }
        }
        Ok(())
    }

    /// Writes every entry of a memtable as L0 SSTs, durably, and opens their readers: one SST,
    /// or more where the device has no free run as long as the memtable's bytes (cut between
    /// user keys, `OutputSst::is_full_after`, as compaction cuts). The SSTs of one memtable
    /// hold disjoint user keys, so the order of L0 among them is moot.
    ///
    /// A version that a newer version of its key hides from every reader (the newer one is at
    /// or below `smallest_snapshot`, the oldest sequence any snapshot reads at) is left out,
    /// as compaction leaves it out, and as RocksDB's flush does: writing every version of keys
    /// overwritten within one memtable wrote 342 MB of SSTs for fillrandom and overwrite of 1M
    /// keys, 302 MB without them (RocksDB 295 MB). Tombstones stay (they hide older SSTs'
    /// entries).
    fn write_memtable(
        &self,
        mem: &Arc<Memtable>,
        smallest_snapshot: u64,
    ) -> Result<Vec<(SstMeta, SstReader)>> {
        let reserve = self.flush_reserve(mem);
        let tombstones = mem.range_tombstones();
        let progress =
            FlushPublisher::begin(&self.flush_progress, self.pacing_clock_us(), mem.len() as u64);
        let mut written = Vec::new();
        let mut builder = self.new_output(0, reserve, MadeBy::Flush);
        // User keys from here on belong to the current output (`None`: from the first on).
        let mut output_lower: Option<Vec<u8>> = None;
        let wrote_all = (|| -> Result<()> {
            let mut it = mem.iter();
            it.seek_to_first();
            // The current user key, and the sequence of its version just before (newer), if
            // any.
            let mut current = Vec::new();
            let mut newer_seq: Option<u64> = None;
            while it.valid() {
                let p = key::parse(it.key())
                    .ok_or_else(|| Error::corruption("memtable: bad internal key", 0))?;
                if newer_seq.is_none() || current != p.user_key {
                    let after =
                        builder.builder.bytes_after_adding(it.key().len(), it.value().len());
                    if builder.is_full_after(after) {
                        let mut full = std::mem::replace(
                            &mut builder,
                            self.new_output(0, reserve, MadeBy::Flush),
                        );
                        let lower = output_lower.replace(p.user_key.to_vec());
                        full.add_clipped(&tombstones, lower.as_deref(), Some(p.user_key));
                        written.extend(self.write_output(full)?);
                    }
                    current.clear();
                    current.extend_from_slice(p.user_key);
                    newer_seq = None;
                }
                if newer_seq.is_none_or(|newer| newer > smallest_snapshot) {
                    builder.add(it.key(), it.value())?;
                }
                self.flush_step_failpoint(progress.passed_one());
                if p.seq <= smallest_snapshot {
                    // Every older version of this key is hidden by this one from every
                    // reader: skip them without walking them (a key overwritten many times
                    // in one memtable has many).
                    it.next_user_key();
                    newer_seq = None;
                    continue;
                }
                newer_seq = Some(p.seq);
                it.next();
            }
            it.status()
        })();
        // What was written goes back if the flush fails: a flush out of room runs again
        // (`flush_when_room`).
        if let Err(e) = wrote_all {
            let (metas, opened) = written.into_iter().unzip();
            self.abandon_outputs(builder, metas, opened);
            return Err(e);
        }
        builder.add_clipped(&tombstones, output_lower.as_deref(), None);
        match self.write_output(builder) {
            Ok(last) => written.extend(last),
            Err(e) => {
                let (metas, opened) = written.into_iter().unzip();
                self.abandon_written(metas, opened);
                return Err(e);
            }
        }
        Ok(written)
    }

    /// Flushes a sealed memtable (`flush_memtable`); one that runs out of room on the volume
    /// while a compaction runs has given back what it wrote, and runs again once a running
    /// compaction ends (commits, or ends otherwise) and freed room: the compactions' inputs
    /// are what room there is to win. With no compaction running it waits for room that
    /// dropped SSTs hold for their readers (`wait_for_held_room`); with none held either the
    /// store stops for want of room, as for any failed flush.
    fn flush_when_room(&self, mem: &Arc<Memtable>, ltn: u64) -> Result<()> {
        let tier_of_flush = self.tier_for(0, self.flush_reserve(mem));
        loop {
            self.wait_for_flush_room(mem);
            let releases_before = self.pool.held_room().releases();
            match self.flush_memtable(mem, ltn) {
                Err(Error::NoSpace(why)) => {
                    let mut st = self.state.lock();
                    let running = st.compaction.running();
                    if st.stopped.is_some() {
                        return Err(Error::NoSpace(why));
                    }
                    if running == 0 {
                        // A close ends the wait too: the WAL keeps what this flush held.
                        if self.wait_for_held_room(&mut st, tier_of_flush, releases_before, &why)
                            && !self.closing.load(Ordering::Relaxed)
                        {
                            continue;
                        }
                        return Err(Error::NoSpace(why));
                    }
                    log::info!("a flush out of room ({why}) runs again when a compaction ends");
                    st.retried_for_room += 1;
                    let committed = st.compactions;
                    while st.stopped.is_none()
                        && st.compactions == committed
                        && st.compaction.running() >= running
                    {
                        self.cv.wait(&mut st);
                    }
                    if st.stopped.is_some() {
                        return Err(Error::NoSpace(why));
                    }
                }
                result => return result,
            }
        }
    }

    /// After a flush or compaction found no room with no compaction running to free any:
    /// whether room may come back, so that it runs again, rather than stop the store.
    /// Room came back if a dropped SST was given back since the try began (`since`, a count
    /// of `HeldRoom::releases`); it will if dropped SSTs that readers still use hold room
    /// on `tier` (an iterator, `Db::check`, a get begun before a compaction committed;
    /// `sst/held_room.rs`): then this waits for one of them to be given back, which the
    /// readers' end brings, or for the store to stop or close (whose threads then find no
    /// more work). With none held the store is full: `false`; and after
    /// `HELD_ROOM_WAIT_MAX` with none given back: a reader that lives that long, or one
    /// whose own thread waits on this flush (`Db::flush` with an iterator open), would
    /// otherwise hold the writes up for good, where a stopped store says why.
    fn wait_for_held_room(
        &self,
        st: &mut MutexGuard<'_, State>,
        tier: shale_space::Tier,
        since: u64,
        why: &str,
    ) -> bool {
        let held = self.pool.held_room();
        if held.releases() != since {
            log::info!("out of room ({why}) as a dropped SST was given back: running again");
            st.waited_for_held_room += 1;
            return true;
        }
        let bytes = held.held(tier);
        if bytes == 0 {
            return false;
        }
        st.waited_for_held_room += 1;
        log::warn!(
            "out of room ({why}), with {bytes} B of dropped SSTs still held by readers: waiting for them to end"
        );
        let deadline = Instant::now() + HELD_ROOM_WAIT_MAX;
        MutexGuard::unlocked(st, || {
            // The release wakes the wait; the recheck is for a stop, which does not.
            while !held.wait_for_release(since, HELD_ROOM_RECHECK) {
                if self.closing.load(Ordering::Relaxed) || self.state.lock().stopped.is_some() {
                    return true;
                }
                if Instant::now() >= deadline {
                    log::error!(
                        "out of room ({why}): no dropped SST given back in {HELD_ROOM_WAIT_MAX:?}"
                    );
                    return false;
                }
            }
            true
        })
    }

    /// Waits, before a flush, while the room the running compactions reserved and have not
    /// spent yet leaves too little for the flush's output: a flush that took that room
    /// would leave a compaction without it, and the compaction, alone, would fail and stop
    /// the store (the writers stall meanwhile, as for L0's stop). A compaction ending wakes
    /// it; with none running, or a room the volume cannot say, it does not wait.
    fn wait_for_flush_room(&self, mem: &Memtable) {
        let need = self.flush_reserve(mem);
        let tier = self.tier_for(0, need);
        let mut st = self.state.lock();
        let mut waited = false;
        while st.stopped.is_none() && st.compaction.running() > 0 {
            let reserved = st.compaction_room_reserved[tier.index()];
            if reserved == 0 {
                break;
            }
            if !flush_waits_for_room(self.volume.tier_room(tier), reserved, need) {
                break;
            }
            if !waited {
                waited = true;
                st.flushes_waited_for_room += 1;
            }
            self.cv.wait(&mut st);
        }
    }

    /// Room a flush of `mem` reserves for its output ([`flush_reserve_for`]).
    fn flush_reserve(&self, mem: &Memtable) -> u64 {
        flush_reserve_for(mem.used_bytes() as u64, self.volume.layout().slot_bytes)
    }

    /// Writes the oldest sealed memtable as L0 SSTs (`write_memtable`), commits them, and recycles its WAL
    /// group (generation `ltn`).
    fn flush_memtable(&self, mem: &Arc<Memtable>, ltn: u64) -> Result<()> {
        // A snapshot taken later reads at or above every sequence in the sealed memtable, so
        // it sees only the newest versions, which stay.
        let smallest_snapshot = {
            let st = self.state.lock();
            st.snapshots.keys().next().copied().unwrap_or(st.last_seq)
        };
        let (output, opened): (Vec<SstMeta>, Vec<SstReader>) =
            self.write_memtable(mem, smallest_snapshot)?.into_iter().unzip();
        let mut st = self.state.lock();
        let oldest_unflushed =
            st.imm.iter().map(|(_, x)| *x).filter(|x| *x > ltn).min().unwrap_or(st.mem_ltn);
        let edit = VersionEdit {
            last_seq: mem.max_seq().unwrap_or(0),
            oldest_unflushed_ltn: oldest_unflushed,
            added: output.iter().map(|m| (0, m.clone())).collect(),
            ..Default::default()
        };
        let extents = output.iter().map(|m| m.extent).collect();
        self.commit_edit(&mut st, edit, extents, Vec::new(), opened)?;
        st.freed_ltns.push(ltn);
        st.imm.retain(|(_, x)| *x != ltn);
        self.publish_view(&st);
        st.flushes += 1;
        st.level_io[0].written += output.iter().map(|m| m.bytes).sum::<u64>();
        st.level_io[0].runs += 1;
        // The group's storage goes back now unless a writer holds the WAL (its next append
        // frees it then): a store whose writes stopped kept the last flushed memtable's log,
        // 64 MiB and more, on disk (bytes on disk, BENCHMARKS.md). A try: the WAL lock is
        // taken before the state lock everywhere else.
        if let Some(mut wal) = self.wal.try_lock() {
            self.free_wal_groups(&mut wal, &mut st)?;
            // No writer holds the WAL: the tail's trimmed chunks go back now, not two at a
            // time with the next writes (the store may have stopped writing).
            wal.give_back_tail_storage();
        }
        self.cv.notify_all();
        Ok(())
    }

    /// Commits an edit to the volume and installs the new version. `added`/`removed` are the
    /// extents of SSTs written/dropped by it; `opened` holds readers of added SSTs opened
    /// already (by `write_output`), the others are opened here.
    fn commit_edit(
        &self,
        st: &mut MutexGuard<'_, State>,
        mut edit: VersionEdit,
        added: Vec<Extent>,
        removed: Vec<Extent>,
        mut opened: Vec<SstReader>,
    ) -> Result<()> {
        edit.next_ltn = st.next_ltn;
        // Every edit, and so every base after a trim, carries the highest sequence ever made
        // durable in an SST, so recovery never hands out a sequence number twice.
        edit.last_seq = edit.last_seq.max(st.persisted_seq);
        if edit.oldest_unflushed_ltn == 0 {
            edit.oldest_unflushed_ltn = st.imm.front().map_or(st.mem_ltn, |(_, l)| *l);
        }
        let mut open = |m: &SstMeta| match opened.iter().position(|r| r.cache_id() == m.id) {
            Some(at) => {
                let reader = opened.swap_remove(at);
                Ok(Arc::new(SstHandle::new(
                    m.clone(),
                    reader,
                    self.pool.clone(),
                    self.cache.clone(),
                )))
            }
            None => open_sst(&self.pool, &self.cache, self.index_and_filter_place(), m),
        };
        let (version, dropped) = match st.version.apply(&edit, &mut open) {
            Ok(v) => v,
            Err(e) => {
                for e2 in &added {
                    self.volume.release(*e2);
                }
                return Err(e);
            }
        };
        let space_edit = Edit { removed, added, engine: edit.encode(), hold_removed: true };
        let base = version.as_base_edit(edit.last_seq, edit.oldest_unflushed_ltn, edit.next_ltn);
        if let Err(e) = self.volume.commit(&space_edit, &mut || base.encode()) {
            st.stopped = Some(format!("version commit failed: {}", shale_io::Chain(&e)));
            self.cv.notify_all();
            return Err(e.into());
        }
        st.persisted_seq = edit.last_seq;
        for h in dropped {
            h.mark_obsolete();
        }
        st.pending_compaction_bytes = self.pending_compaction_bytes(&version);
        st.version = Arc::new(version);
        self.fit_block_cache(&st.version);
        self.observe_shape(st);
        self.publish_view(st);
        Ok(())
    }

    /// Fits the block cache's budget to the memory limit beside `version`'s held index and
    /// filter blocks (`memory_limit::block_cache_within`): called at open and at every
    /// commit of a version, so the cache gives up room as the data grows and takes it back
    /// as compactions drop SSTs. Without a limit the cache keeps the owner's budget.
    fn fit_block_cache(&self, version: &Version) {
        if self.memory_limit == 0 {
            return;
        }
        let held = version.held_index_and_filter_bytes();
        self.held_meta_bytes.store(held, Ordering::Relaxed);
        let budget =
            self.opts.block_cache_within(self.memory_limit, self.opened_write_buffer_bytes, held);
        self.cache.set_capacity_bytes(budget as usize);
    }

    /// Where a reader opened now keeps its index and filter blocks: held, or in the block
    /// cache with `cache_index_and_filter_blocks` and while the held ones fill their room
    /// under the memory limit (`memory_limit::held_meta_room`).
    fn index_and_filter_place(&self) -> IndexAndFilter {
        let held = self.held_meta_bytes.load(Ordering::Relaxed);
        self.opts.index_and_filter_within(held, self.held_meta_room)
    }

    /// Publishes the state's memtables and version to point reads (`published.rs`); called
    /// under the state mutex after every change to them, before it is released.
    fn publish_view(&self, st: &State) {
        self.published.publish_view(&st.mem, &st.imm, &st.version);
    }

    /// Sets the last complete sequence, for the state and for point reads: every write up to
    /// `seq` is in its memtable.
    fn publish_last_seq(&self, st: &mut State, seq: u64) {
        debug_assert!(seq >= st.last_seq, "publication went back from {} to {seq}", st.last_seq);
        st.last_seq = seq;
        st.allocated_seq = st.allocated_seq.max(seq);
        self.published.publish_last_seq(seq);
    }

    fn background_loop(self: Arc<Self>, kind: Worker) {
        // A panic in a job (a bug, or a test's failpoint) must stop the store as a failed job
        // does: left alone it would end this thread quietly, and everyone waiting for its work
        // (flush, compact_range, stalled writers, close) would wait forever. parking_lot's
        // guards unlock as the panic unwinds; what the job left half done is not trusted, so
        // the store stops (P5) and a reopen rebuilds it from the volume and the WAL.
        let unwound =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.run_jobs(kind)));
        let why = match unwound {
            Ok(Ok(())) => return,
            Ok(Err(why)) => why,
            Err(payload) => {
                format!("background {} panicked: {}", kind.name(), panic_message(&*payload))
            }
        };
        let mut st = self.state.lock();
        if st.stopped.is_none() {
            st.stopped = Some(why.clone());
        }
        if kind == Worker::Compaction {
            st.pool.live -= 1;
        }
        log::error!("{why}; store stopped");
        self.cv.notify_all();
    }

    /// The next job for a background thread, waiting for one; `None` when the thread is to
    /// end (the store stopped or shuts down, or a surplus compaction thread retires), already
    /// counted out of the pool.
    fn next_job(&self, st: &mut MutexGuard<'_, State>, kind: Worker) -> Option<Job> {
        let leave = |st: &mut State| {
            if kind == Worker::Compaction {
                st.pool.live -= 1;
            }
            None
        };
        loop {
            if st.stopped.is_some() {
                return leave(st);
            }
            if kind == Worker::Flush {
                if let Some((mem, ltn)) = st.imm.front().cloned() {
                    return Some(Job::Flush(mem, ltn));
                }
            } else {
                // A closing store starts no compaction (and abandons the running ones,
                // `Inner::closing`): the next open picks up where it left off.
                if st.shutting_down {
                    return leave(st);
                }
                if st.pool.retire_one() {
                    self.cv.notify_all();
                    return None;
                }
                if let Some(c) = self.pick_compaction(st) {
                    return Some(Job::Compact(c));
                }
                if st.full_compaction && st.imm.is_empty() && st.compaction.running() == 0 {
                    st.full_compaction = false;
                    self.cv.notify_all();
                }
            }
            // Shut down only once no flush is left, so close loses no memtable.
            if st.shutting_down && st.imm.is_empty() {
                return leave(st);
            }
            self.cv.wait(st);
        }
    }

    fn flush(&self) -> Result<()> {
        {
            let mut wal = self.wal.lock();
            let mut st = self.state.lock();
            stopped_error(&st)?;
            if !st.mem.is_empty() || st.mem_bytes > 0 {
                self.switch_memtable(&mut wal, &mut st)?;
            }
        }
        let mut st = self.state.lock();
        while !st.imm.is_empty() && st.stopped.is_none() {
            self.cv.notify_all();
            self.cv.wait(&mut st);
        }
        stopped_error(&st)
    }

    /// What a point read consults, without the state mutex (`published.rs`).
    /// The sequence number `opts` reads at, if it names a snapshot, which must be one of this
    /// store's.
    fn snapshot_seq(&self, opts: &ReadOptions) -> Result<Option<u64>> {
        match opts.snapshot {
            None => Ok(None),
            Some(s) if std::ptr::eq(Arc::as_ptr(&s.inner), self) => Ok(Some(s.seq)),
            Some(s) => Err(Error::InvalidArgument(format!(
                "ReadOptions::snapshot (at sequence {}) is a snapshot of another store",
                s.seq
            ))),
        }
    }

    fn read_view(&self, opts: &ReadOptions) -> Result<ReadView> {
        let snapshot = self.snapshot_seq(opts)?;
        // Debug builds check the publication against the state, under its mutex, on one read
        // in eight: the others run lock-free, as in release builds, so that the tests exercise
        // the ordering the publication relies on rather than the mutex's.
        if cfg!(debug_assertions) && published::sampled() {
            let st = self.state.lock();
            self.published.check(&st.mem, &st.imm, &st.version, st.last_seq);
        }
        let (last_seq, view) = self.published.load(|| {
            #[cfg(feature = "failpoints")]
            if let Some(hook) = &self.opts.point_read_hook {
                (hook.0)();
            }
        });
        Ok(ReadView { view, snapshot: snapshot.unwrap_or(last_seq) })
    }

    fn get(&self, user_key: &[u8], opts: &ReadOptions) -> Result<Option<Vec<u8>>> {
        let view = self.read_view(opts)?;
        // The newest range tombstone over the key seen so far, newest source first.
        let mut covering = match view.memtables(user_key) {
            Ok(answer) => return Ok(answer),
            Err(covering) => covering,
        };
        let snapshot = view.snapshot;
        let lookup = key::encode(user_key, snapshot, Kind::SEEK);
        let hash = bloom_hash(user_key);
        for f in view.view.version.candidates(user_key) {
            covering = covering.max(f.reader.max_covering_tombstone_seq(user_key, snapshot));
            if let Some((ikey, value)) = f.reader.get(&lookup, hash)? {
                return visible_sst_value(&ikey, value, covering);
            }
            if covering > 0 {
                return Ok(None);
            }
        }
        Ok(None)
    }

    /// [`Inner::get`] from memory alone: the memtables, then each SST whose reader holds its
    /// index and filter and whose block cache holds the data block the lookup needs. `None`
    /// when the answer needs a read from the device (or a cached index or filter), which the
    /// caller then makes elsewhere: the async API's lucky reads (SpanDB's) are these.
    fn get_from_memory(
        &self,
        user_key: &[u8],
        opts: &ReadOptions,
    ) -> Result<Option<Option<Vec<u8>>>> {
        let view = self.read_view(opts)?;
        let mut covering = match view.memtables(user_key) {
            Ok(answer) => return Ok(Some(answer)),
            Err(covering) => covering,
        };
        let snapshot = view.snapshot;
        let lookup = key::encode(user_key, snapshot, Kind::SEEK);
        let hash = bloom_hash(user_key);
        for f in view.view.version.candidates(user_key) {
            if !f.reader.holds_index_and_filter() {
                return Ok(None);
            }
            covering = covering.max(f.reader.max_covering_tombstone_seq(user_key, snapshot));
            match f.reader.probe(&lookup, hash)? {
                Probe::NeedsBlock(_) => return Ok(None),
                Probe::Found(Some((ikey, value))) => {
                    return visible_sst_value(&ikey, value, covering).map(Some);
                }
                Probe::Absent | Probe::Found(None) => {}
            }
            if covering > 0 {
                return Ok(Some(None));
            }
        }
        Ok(Some(None))
    }

    fn iter(&self, opts: &ReadOptions) -> DbIterator {
        let snapshot = match self.snapshot_seq(opts) {
            Ok(seq) => seq,
            Err(Error::InvalidArgument(why)) => {
                let refused = Box::new(crate::iter::RefusedIterator::new(why));
                return DbIterator::new(refused, 0, IterBounds::default());
            }
            Err(e) => unreachable!("snapshot_seq refuses only with InvalidArgument: {e}"),
        };
        let st = self.state.lock();
        let mut children: Vec<Box<dyn InternalIterator>> = vec![Box::new(st.mem.iter())];
        children
            .extend(st.imm.iter().map(|(m, _)| Box::new(m.iter()) as Box<dyn InternalIterator>));
        children.extend(st.version.iterators());
        let snapshot = snapshot.unwrap_or(st.last_seq);
        let mut tombstones = st.mem.range_tombstones();
        tombstones.extend(st.imm.iter().flat_map(|(m, _)| m.range_tombstones()));
        let version = st.version.clone();
        drop(st);
        let ssts = version.levels.iter().flatten();
        tombstones.extend(ssts.flat_map(|f| f.reader.range_tombstones()).cloned());
        let bounds = match &opts.prefix {
            Some(p) => IterBounds::prefix(p),
            None => IterBounds { lower: opts.lower_bound.clone(), upper: opts.upper_bound.clone() },
        };
        let mut it = DbIterator::new(Box::new(MergingIterator::new(children)), snapshot, bounds)
            .with_range_tombstones(tombstones);
        if self.cache.capacity_bytes() > 0 {
            // Blocks read ahead of a seek wait in the cache for it: without one, nothing would.
            it = it.with_batched_seeks(self.pool.clone());
        }
        it
    }

    fn stats(&self) -> Stats {
        let pipe = self.pipeline.stats();
        let times = self.timings.totals();
        let st = self.state.lock();
        let v = &st.version;
        let io = |c| self.volume.io(c);
        let sizes = level_sizes(v);
        let targets = LevelTargets::compute(&self.opts, &sizes);
        Stats {
            files_per_level: v.levels.iter().map(|l| l.len()).collect(),
            bytes_per_level: sizes.clone(),
            level_target_bytes: targets.bytes.to_vec(),
            base_level: targets.base_level,
            pending_compaction_bytes: targets.excess_bytes(&sizes),
            delayed_write_rate: st.delayed.rate(),
            slowdown_pace: st.delayed.pace(),
            memtable_pace: st.memtable_paced.pace(),
            level_io: st.level_io.to_vec(),
            odd_chunks: (0..LEVELS).filter_map(|l| st.compaction.odd_chunk(l)).count(),
            odd_chunks_kept: st.compaction.odd_chunks_kept(),
            running_compactions: st.compaction.running(),
            peak_running_compactions: st.compaction.peak_running(),
            compaction_room_reserved: st.compaction_room_reserved.iter().sum(),
            compactions_deferred_for_room: st.compactions_deferred_for_room,
            retried_for_room: st.retried_for_room,
            flushes_waited_for_room: st.flushes_waited_for_room,
            waited_for_held_room: st.waited_for_held_room,
            obsolete_sst_bytes: self.pool.held_room().held_total(),
            background_jobs: st.pool.background_jobs(),
            compaction_threads: st.pool.live,
            target_file_bytes: self.target_file_bytes.load(Ordering::Relaxed),
            memtables: 1 + st.imm.len(),
            memtable_bytes: st.mem.approximate_bytes()
                + st.imm.iter().map(|(m, _)| m.approximate_bytes()).sum::<usize>(),
            last_seq: st.last_seq,
            flushes: st.flushes,
            compactions: st.compactions,
            compaction_filter_removals: self.filtered_removals.load(Ordering::Relaxed),
            compactions_idle_io: self.compaction_io.idle.load(Ordering::Relaxed),
            compaction_io_raised: self.compaction_io.raised.load(Ordering::Relaxed),
            user_bytes_written: self.user_bytes_written.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
            write_groups: self.write_groups.load(Ordering::Relaxed),
            parallel_insert_groups: self.parallel_insert_groups.load(Ordering::Relaxed),
            write_leader_handoffs: times.handoffs,
            write_leader_handoff_micros: times.handoff_micros,
            write_group_micros: times.group_micros,
            wal_append_micros: times.append_micros,
            wal_pipelined_groups: pipe.groups,
            wal_loggers: pipe.loggers,
            wal_logger_increases: pipe.logger_increases,
            wal_logger_decreases: pipe.logger_decreases,
            wal_pipeline_device_micros: pipe.device_micros,
            wal_pipeline_turn_wait_micros: pipe.turn_wait_micros,
            wal_bytes_written: io(IoClass::Wal).write_bytes,
            wal_bytes_allocated: self.wal_bytes_allocated.load(Ordering::Relaxed),
            wal_bytes_never_written: self.wal_bytes_never_written.load(Ordering::Relaxed),
            // Buffered SST writes go around the volume's queues and their counters.
            sst_bytes_written: io(IoClass::Slot).write_bytes + self.pool.bytes_written().buffered,
            sst_bytes_written_direct: self.pool.bytes_written().direct,
            sst_bytes_written_buffered: self.pool.bytes_written().buffered,
            sst_relocations: self.pool.relocations(),
            version_log_bytes_written: io(IoClass::VersionLog).write_bytes,
            block_cache_hits: self.cache.hits(),
            block_cache_misses: self.cache.misses(),
            block_cache_adds: self.cache.adds(),
            block_cache_bytes: self.cache.usage_bytes(),
            block_cache_capacity_bytes: self.cache.capacity_bytes(),
            block_cache_index_and_filter_bytes: self.cache.usage_bytes_of(BlockKind::Index)
                + self.cache.usage_bytes_of(BlockKind::Filter),
            block_cache_index_hits: self.cache.hits_of(BlockKind::Index),
            block_cache_index_misses: self.cache.misses_of(BlockKind::Index),
            block_cache_filter_hits: self.cache.hits_of(BlockKind::Filter),
            block_cache_filter_misses: self.cache.misses_of(BlockKind::Filter),
            sst_index_and_filter_held_bytes: v.held_index_and_filter_bytes(),
            sst_bytes_read_direct: self.pool.bytes_read().direct,
            sst_bytes_read_buffered: self.pool.bytes_read().buffered,
            sst_bytes_read_around_page_cache: self.pool.bytes_read().around_page_cache,
            sst_reads_ahead: self.pool.reads_ahead(),
            seek_batch_reads: self.pool.seek_batch_reads(),
            sst_releases_deferred: self.pool.releases_deferred(),
            stalls: self.stalls.snapshot(),
            stopped: st.stopped.clone(),
            tiers: self.tier_stats(v),
            level_pointer: if self.volume.is_tiered() { self.level_pointer.get() } else { 0 },
            level_pointer_deeper: self.level_pointer.moves().0,
            level_pointer_shallower: self.level_pointer.moves().1,
            tuner_mode: self.opts.tuner.mode.name(),
            tuner_windows: self.tuner.counts().1,
            tuner_l0_overflows: self.tuner.counts().0[0],
            tuner_redundancy_overflows: self.tuner.counts().0[1],
            tuner_memory_overflows: self.tuner.counts().0[2],
            tuner_last_overflow: self
                .tuner
                .last()
                .and_then(|a| a.overflow)
                .map_or("", |o| o.name()),
            tuner_batch_max: self.tuner.batch_max(),
            memory_limit: self.memory_limit,
            tuner_running: self.tuner.running(),
            memory_overflows: self.memory_overflows.load(Ordering::Relaxed),
            write_buffer_bytes: self.write_buffer_bytes() as u64,
            // The async API's counters live with its queue (`Db::stats` adds them).
            ..Stats::default()
        }
    }
}

/// The capacity of `device` where it cannot grow (`Options::volume_options_for`).
fn fixed_capacity(device: &DeviceRef) -> Option<u64> {
    let info = device.info();
    (!info.growable).then_some(info.capacity)
}

/// The size of `path` where it is a block device (a device that cannot grow), else `None`
/// (a directory or a volume file, which grow; or nothing yet).
fn block_device_bytes(path: &Path) -> Result<Option<u64>> {
    use std::io::{Seek, SeekFrom};
    use std::os::unix::fs::FileTypeExt;
    match std::fs::metadata(path) {
        Ok(m) if m.file_type().is_block_device() => {
            let opened = std::fs::File::open(path).and_then(|mut f| f.seek(SeekFrom::End(0)));
            let bytes =
                opened.map_err(|e| shale_io::Error::at_path(shale_io::PathOp::Open, path, e))?;
            Ok(Some(bytes))
        }
        _ => Ok(None),
    }
}

/// Whether a group's leader inserts every writer's ops itself: for at most this many ops and
/// bytes, inserting them takes a few microseconds, less than waking the writers to do it.
/// Also on 16 cores: writers inserting their own single puts made fillrandom slower there
/// (16 threads, groups overlapped: 165k writes/s against 302k; BENCHMARKS-history.md).
///
/// And always where the machine lacks the cores (`parallel`: [`cores_to_overlap_groups`]):
/// a writer woken to insert its op, then again once the group is published, takes a core
/// the others need, and at most as many inserts run at once as there are cores: on 2 vCPUs
/// with 64 threads the leader inserting every group about doubled fillsync's and fillrandom's
/// writes (BENCHMARKS-history.md, "Issue #45 part 3: write groups inserted by their leader
/// where cores are few").
fn inserted_by_leader(group: &[Pending], parallel: bool) -> bool {
    const OPS_MAX: usize = 32;
    const BYTES_MAX: usize = 64 << 10;
    let ops: usize = group.iter().map(|p| p.ops).sum();
    let bytes: usize = group.iter().map(|p| p.record.len()).sum();
    !parallel || group.len() == 1 || (ops <= OPS_MAX && bytes <= BYTES_MAX)
}

/// When a write group of unsynced writes overlaps with the next ([`Inner::lead_group`]): on
/// a machine of at least this many cores.
///
/// Measured (1 KB values, medians of two 3 s runs; docs/lsm.md, "Write groups on many
/// cores"): on 2 vCPUs every thread a hand-over wakes takes the core another needs
/// (fillrandom, 4 threads: 261k writes/s holding on, 137k overlapped, the leaders waiting
/// 6.4 s in all for their turns). On 16 cores, overlapped against holding on: fillrandom
/// 326k against 301k with 4 threads, 279k against 168k with 16, 361k against 199k with
/// 32; but fillsync with 64 threads 79k against 89k (two runs each, 74-84k and 87-91k): a
/// sync group's time is its device write, and its writers gain nothing from the next group
/// starting early, so sync groups hold on.
const OVERLAPPED_GROUPS_MIN_CORES: usize = 8;

/// Whether this machine has the cores for write groups to overlap
/// ([`OVERLAPPED_GROUPS_MIN_CORES`]; the cores this process may run on).
pub(super) fn cores_to_overlap_groups() -> bool {
    std::thread::available_parallelism().map_or(1, |n| n.get()) >= OVERLAPPED_GROUPS_MIN_CORES
}

/// Inserts a batch's ops, numbered from `first_seq`, into a memtable (stage 4; concurrent
/// with other writers' inserts).
fn insert_ops<'a>(ops: impl Iterator<Item = BatchOp<'a>> + Clone, first_seq: u64, mem: &Memtable) {
    mem.apply_all(ops, first_seq).expect("make_room left room for the group");
}

enum Job {
    Flush(Arc<Memtable>, u64),
    Compact(Compaction),
}

/// Bytes of each level of `v`, L0 first.
fn level_sizes(v: &Version) -> Vec<u64> {
    (0..LEVELS).map(|l| v.level_bytes(l)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(writers: usize, ops_each: usize) -> Vec<Pending> {
        (0..writers)
            .map(|id| Pending {
                id: id as u64,
                record: vec![0; 120 * ops_each],
                ops: ops_each,
                footprint: 0,
                sync: false,
            })
            .collect()
    }

    #[test]
    fn the_leader_inserts_small_groups_and_every_group_where_cores_are_few() {
        // Small: the leader inserts, whatever the machine.
        assert!(inserted_by_leader(&group(4, 1), true));
        assert!(inserted_by_leader(&group(1, 500), true));
        // Large: its writers insert in parallel only where there are cores to spare.
        assert!(!inserted_by_leader(&group(64, 1), true));
        assert!(inserted_by_leader(&group(64, 1), false));
        assert!(!inserted_by_leader(&group(2, 600), true));
        assert!(inserted_by_leader(&group(2, 600), false));
    }
}
