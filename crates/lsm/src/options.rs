//! Options of a store, with RocksDB's names and defaults where RocksDB has the same knob.

use std::sync::Arc;

use shale_io::CpuPriority;
use shale_space::{AREA_ALIGN, LayoutOptions, VolumeOptions};

use crate::error::{Error, Result};
use crate::memory_limit::MemoryLimit;
use crate::sst::{IndexAndFilter, SstOptions};
use crate::tiering::TierOptions;
use crate::tuner::TunerOptions;
use crate::wal::page::PAGE_BYTES;
pub use crate::wal::{MemoryTail, WalTail};

/// Largest key accepted, in bytes.
pub const KEY_BYTES_MAX: usize = 64 << 10;
/// Default of [`Options::wal_loggers`]: SpanDB's largest number of loggers.
pub const WAL_LOGGERS_DEFAULT: usize = 3;

/// Most background threads a store runs (`max_background_jobs`).
pub const BACKGROUND_JOBS_MAX: usize = 64;
/// Most async requests a store admits and has not completed ([`Options::async_queue_depth`]):
/// each may hold a batch of up to half a memtable, so the bound is what keeps a unit mistake
/// from queueing without limit; a million requests in flight is past any use.
pub const ASYNC_QUEUE_DEPTH_MAX: usize = 1 << 20;
/// Most async worker threads ([`Options::async_workers`]), as many as background jobs.
pub const ASYNC_WORKERS_MAX: usize = 64;

// The limits of the options, each from a format or a structure that the option sizes
// (docs/lsm.md, "Option limits"). `Options::validate` checks every one at open.

/// Smallest memtable (`write_buffer_bytes`; `Db::set_write_buffer_bytes` checks the same).
pub const WRITE_BUFFER_BYTES_MIN: usize = 64 << 10;
/// Largest SST the engine makes on purpose: a flush writes a whole memtable as one SST, and a
/// compaction output passes its target by at most one entry (at most half a memtable). Every
/// block of an SST (its index and filter too) is smaller than the SST, and a block's length
/// is a u32 on disk, so SSTs must stay under 4 GiB: 2 GiB, plus one entry of at most 1 GiB.
pub const SST_BYTES_MAX: u64 = 2 << 30;
/// Largest memtable: its SST must fit [`SST_BYTES_MAX`]. Half a memtable bounds a batch, so
/// values stay under 1 GiB, within the u32 lengths of memtable nodes and block entries.
pub const WRITE_BUFFER_BYTES_MAX: usize = SST_BYTES_MAX as usize;
/// Fewest memtables: the active one and one being flushed.
pub const WRITE_BUFFER_NUMBER_MIN: usize = 2;
/// Most memtables. Each has a WAL group (one more as a spare, [`Options::wal_groups`]), and
/// the WAL metadata page has room for 254 groups; 64 memtables are already far past use.
pub const WRITE_BUFFER_NUMBER_MAX: usize = 64;
/// Largest L0 trigger: a volume has at most `u32::MAX` slots and an SST takes at least one,
/// so L0 can never hold more SSTs than this.
pub const L0_TRIGGER_MAX: usize = u32::MAX as usize;
/// Smallest level size multiplier: with 1 a level would be no larger than the one above.
pub const LEVEL_MULTIPLIER_MIN: u64 = 2;
/// Largest block cache budget: the most bytes a Rust process can address as one object;
/// a budget above it cannot mean anything.
pub const BLOCK_CACHE_BYTES_MAX: usize = isize::MAX as usize;
/// Largest pre-allocation of a new volume file (`volume.initial_slots` slots) or growth step
/// (`volume.grow_slots_min` slots): a policy, not a format limit. `fallocate` of more fails
/// with ENOSPC on any device this engine targets, and a failed creation leaves an empty volume
/// file behind; volumes still grow past it, a quarter of their size at a time.
pub const VOLUME_STEP_BYTES_MAX: u64 = 1 << 40;
/// A WAL group holds a full memtable's batches plus their framing (page and fragment headers,
/// pages left part-filled by synced appends): half as much again is room.
const WAL_GROUP_HEADROOM: (u64, u64) = (3, 2);

/// The largest share of a device that cannot grow that a WAL area derived for the tuner's
/// batches may take (numerator, denominator): an eighth
/// ([`Options::volume_options_for`]).
pub(crate) const WAL_SHARE_OF_FIXED_DEVICE_MAX: (u64, u64) = (1, 8);
/// The WAL area's two metadata pages before the first group (`wal::META_PAGES`).
const WAL_META_BYTES: u64 = 2 * PAGE_BYTES as u64;
/// Fewest pages in a WAL group (`wal::WalLayout::new`).
const WAL_GROUP_PAGES_MIN: u64 = 2;
/// Most pages in a WAL group: the WAL metadata records page counts as u32.
const WAL_GROUP_PAGES_MAX: u64 = u32::MAX as u64;
/// Slots a new volume file starts with: a small store needs no more, and the volume grows by
/// at least `grow_slots_min` slots (or a quarter of itself) whenever an SST does not fit.
pub const INITIAL_SLOTS_DEFAULT: u32 = 4;

/// Decides during compaction whether a key's value is dead, so that the key stops existing
/// without a delete from the application: keys past an expiry kept in the value
/// (`shale serve`'s TTLs), say.
///
/// Compaction asks only about the newest version of a key, a put, and only once every reader
/// sees that version (it is at or below the oldest snapshot), so no snapshot's answer
/// changes and no older version can come back: a removed value becomes a tombstone at the
/// same sequence number, which hides the versions below and is itself dropped where nothing
/// deeper holds the key, as any delete is. Keys that are never compacted again keep their
/// values: readers must still check the value themselves (a filter makes the space come
/// back, not the answer change). Called from compaction threads: it must be quick and must
/// not call into the store.
///
/// ```
/// use std::sync::Arc;
/// use shale_lsm::{CompactionFilter, Db, Options};
///
/// /// Drops every value that starts with "dead:".
/// struct DeadPrefix;
/// impl CompactionFilter for DeadPrefix {
///     fn name(&self) -> &str {
///         "dead-prefix"
///     }
///     fn remove(&self, _key: &[u8], value: &[u8]) -> bool {
///         value.starts_with(b"dead:")
///     }
/// }
///
/// let dir = tempfile::tempdir()?;
/// let opts = Options { compaction_filter: Some(Arc::new(DeadPrefix)), ..Options::small_for_tests() };
/// let db = Db::open(dir.path(), opts)?;
/// db.put(b"a", b"dead: gone after compaction")?;
/// db.put(b"b", b"alive")?;
/// db.compact_range()?;
/// assert_eq!(db.get(b"a")?, None);
/// assert_eq!(db.get(b"b")?.as_deref(), Some(&b"alive"[..]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait CompactionFilter: Send + Sync {
    /// A name for `Debug` output and logs.
    fn name(&self) -> &str;
    /// Whether the value of `key` is dead and the key should stop existing.
    fn remove(&self, key: &[u8], value: &[u8]) -> bool;
}

impl std::fmt::Debug for dyn CompactionFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CompactionFilter({})", self.name())
    }
}

/// A test failpoint's code (feature `failpoints`): the engine calls it at the failpoint, on
/// the thread that reaches it; a test blocks in it until it lets that thread go on.
#[cfg(feature = "failpoints")]
#[doc(hidden)]
#[derive(Clone)]
pub struct FailpointHook(pub Arc<dyn Fn() + Send + Sync>);

#[cfg(feature = "failpoints")]
impl std::fmt::Debug for FailpointHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FailpointHook")
    }
}

/// How a store is opened and tuned.
#[derive(Clone, Debug)]
pub struct Options {
    /// Bytes a memtable holds before it is sealed and flushed (RocksDB `write_buffer_size`);
    /// also the target size of L0 SSTs (ADOC's batch size).
    pub write_buffer_bytes: usize,
    /// Memtables, active and sealed, before writes stall (`max_write_buffer_number`).
    pub max_write_buffer_number: usize,
    /// L0 SSTs that start a compaction into L1.
    pub level0_file_num_compaction_trigger: usize,
    /// L0 SSTs from which each write is delayed.
    pub level0_slowdown_writes_trigger: usize,
    /// L0 SSTs at which writes wait for compaction.
    pub level0_stop_writes_trigger: usize,
    /// Target size of L1 with static level sizing, of the base level (the level L0 compacts
    /// into) with dynamic sizing (`max_bytes_for_level_base`).
    pub max_bytes_for_level_base: u64,
    /// Each level's target is this many times the one above.
    pub max_bytes_for_level_multiplier: u64,
    /// Derive level targets from the largest level upward and compact L0 straight into the
    /// first level that needs to exist, instead of sizing from L1 down (RocksDB's
    /// `level_compaction_dynamic_level_bytes`; on by default, as in RocksDB since 8.4). About
    /// 90% of the data then sits in the last level. See `level_targets`.
    pub dynamic_level_bytes: bool,
    /// Size at which compaction output is cut into a new SST (`target_file_size_base`),
    /// rounded down to whole slots: an output is cut before the entry that would make it spill
    /// into one more slot. Changeable while running (`Db::set_target_file_size`).
    pub target_file_size_base: u64,
    /// Which SST of a level (below L0) a compaction takes: RocksDB's `compaction_pri`.
    pub compaction_pri: CompactionPri,
    /// LDS's odd-chunk rule: the last, part-filled output of a compaction from Ln (n >= 1)
    /// into Ln+1 stays in Ln when it overlaps nothing there, and is merged into a later
    /// compaction, so part-filled SSTs do not pile up in the levels (at most one per level).
    pub odd_chunk_rule: bool,
    /// Background threads: one flushes memtables, the others (`max_background_jobs - 1`, at
    /// least one) run compactions, several at once on disjoint key ranges. At least 2 (RocksDB's
    /// default is also 2). Changeable while running (`Db::set_background_jobs`).
    pub max_background_jobs: usize,
    /// Most write groups whose sync appends have their WAL page writes in flight at once
    /// (SpanDB's loggers, `space/src/page_log/pipeline.rs`). The store adapts how many it uses
    /// (`adaptive_wal_loggers`), from none (each group's leader holds the WAL lock until its
    /// group is published: the biggest groups) up to this many, to whichever commits the most
    /// sync writes a second. 0 turns the pipeline off.
    pub wal_loggers: usize,
    /// Whether the number of loggers adapts (the default: it starts with none and moves
    /// between none and `wal_loggers` to whichever commits the most sync writes a second), or
    /// stays at `wal_loggers` (for a device known to want that many writes in flight).
    pub adaptive_wal_loggers: bool,
    /// Most requests of the async API (`Db::submit_*`) admitted and not yet complete, queued
    /// or being served; a submission beyond it answers [`Error::Busy`] at once and the caller
    /// resubmits later (SpanDB's Busy). Reads the memtables answer at submission never count.
    pub async_queue_depth: usize,
    /// Threads serving the async API's queue, started at the first queued request. Each takes
    /// every queued write at once and commits them together, or one queued read; while one
    /// waits for the device, another serves the queue.
    pub async_workers: usize,
    /// Compaction debt from which each write is delayed (0 = off).
    pub soft_pending_compaction_bytes_limit: u64,
    /// Compaction debt at which writes wait for compaction (0 = off).
    pub hard_pending_compaction_bytes_limit: u64,
    /// Bytes a second that writes go at while L0 is past its slowdown trigger or the
    /// compaction debt past its soft limit (RocksDB's `delayed_write_rate`): where a slowdown
    /// starts, and the most it lets through. 0 (the default): each slowdown starts at four
    /// fifths of the rate writes went in just before it, at least 16 MiB/s (RocksDB's default
    /// rate), and has no cap. While it lasts the pace adapts to whether the background work
    /// is catching up, down to 16 KiB/s (`write_controller::DelayedWrites`).
    pub delayed_write_rate: u64,
    /// Block size, restart interval, bloom bits and compression of SSTs.
    pub sst: SstOptions,
    /// Byte budget of the block cache: data blocks, and index and filter blocks with
    /// `cache_index_and_filter_blocks`.
    pub block_cache_bytes: usize,
    /// Where each SST's index and filter blocks live (RocksDB's
    /// `BlockBasedTableOptions::cache_index_and_filter_blocks` and db_bench's flag, `false` by
    /// default in both). `false`: read when the SST is opened and held by its reader, outside
    /// the block cache: never charged to it nor evicted, so the cache's budget is all for data
    /// blocks, and a lookup never waits for an index or filter read; their memory grows with
    /// the data and no budget bounds it (`Stats::sst_index_and_filter_held_bytes`). `true`:
    /// they live in the block cache like data blocks, charged to it and evictable, so the
    /// cache bounds all of a store's block memory; a lookup that finds one evicted reads it
    /// again (and checks its checksum). The cache has no high-priority pool (RocksDB's
    /// `cache_index_and_filter_blocks_with_high_priority`): they compete with data blocks on
    /// equal terms, kept by being used on every lookup of their SST. With `true` and a block
    /// cache of 0 every lookup reads both again.
    pub cache_index_and_filter_blocks: bool,
    /// Read SST blocks that miss the block cache with O_DIRECT (`true`), or through the
    /// kernel's page cache (`false`, the default, as RocksDB's and db_bench's
    /// `use_direct_reads`). Through the page cache, data bigger than the block cache but
    /// smaller than RAM is read from memory: on 2M keys of 400 B with a 256 MiB block cache,
    /// readrandom ran about 9 times faster (docs/lsm.md, "Reads through the page cache"). New
    /// SSTs are then prefetched into the page cache as they are written (a device read of
    /// each), so reads after a compaction do not start cold.
    /// Direct reads keep the store's memory to the block cache and leave the page cache to
    /// others. How SSTs are written is [`Options::use_direct_io_for_flush_and_compaction`];
    /// with buffered writes nothing is prefetched, the written pages being in the page cache
    /// already. A store opened on a device rather than a path ([`crate::Db::open_device`])
    /// has no file to read through the page cache and reads directly whatever this says.
    pub use_direct_reads: bool,
    /// Write the SSTs of flushes and compactions with O_DIRECT (`true`), or through the
    /// kernel's page cache (`false`, the default, as RocksDB's and db_bench's
    /// `use_direct_io_for_flush_and_compaction`). RocksDB then writes SST files buffered and
    /// syncs each before the MANIFEST names it; shale `pwrite`s each SST into its extent
    /// through a buffered read-write descriptor of the volume file and syncs its range
    /// before the version edit naming it is committed, so the durability promises are the
    /// same either way. The written pages stay cached, so reads through the page cache find
    /// new SSTs there without the prefetch that O_DIRECT writes need (a device read of each
    /// SST); the cost is page-cache memory. WAL pages and the version log are written with
    /// O_DIRECT either way. A volume on a block device writes SSTs with O_DIRECT whatever this
    /// says ([`Options::writes_ssts_through_page_cache`]); so does a store opened on a device
    /// rather than a path ([`crate::Db::open_device`]), which has no file to write through
    /// the page cache; read-only opens write nothing.
    pub use_direct_io_for_flush_and_compaction: bool,
    /// Put each flush and compaction output's blocks into the block cache as it is written
    /// (RocksDB's `prepopulate_block_cache`, there for flushes only). A compaction retires its
    /// inputs' cached blocks, and with O_DIRECT SST writes or reads no page cache holds the
    /// new SST: without this, reads after a compaction go to the device until the cache warms.
    /// A flush's blocks, and a compaction's where SSTs are written or read with O_DIRECT, push
    /// older blocks out; a compaction's written and read through the page cache only fill
    /// free room, so that it does not sweep out the blocks readers use.
    pub prepopulate_block_cache: bool,
    /// Run compactions' reads in the kernel's idle I/O class while the store is not behind
    /// (`shale_io::IdleIo`; RocksDB offers the same for its compaction pool,
    /// `Env::LowerThreadPoolIOPriority`, off by default), reading around the page cache
    /// what it does not hold, so that a client's read waits behind no compaction read queued
    /// at the scheduler. "Behind" is halfway to a write slowdown (`write_controller::
    /// compactions_yield`): from there on a compaction runs at its thread's own priority, so
    /// that the work that keeps writers from slowing down is never starved by reads. Write-back,
    /// flushes and commits always keep their priority. Honoured by the `mq-deadline` and `bfq`
    /// schedulers (usual for SATA and virtio disks); `none` (usual for NVMe) ignores it.
    /// `false` by default: it moves compaction work to later, it does not remove it
    /// (docs/lsm.md, "Compactions in the idle I/O class").
    pub idle_compaction_io: bool,
    /// How the flush and compaction threads compete for the CPU with the threads that call
    /// the store ([`CpuPriority`]; RocksDB's `Env::LowerThreadPoolCPUPriority`, off
    /// by default). `Low` (niceness 19) and `Idle` (`SCHED_IDLE`: a background thread runs
    /// only on a core no caller wants, and gives it up the moment one wakes) keep a write from
    /// waiting out a background thread's time slice on a machine with few cores; a store
    /// whose callers keep every core busy then leaves its background work to the write
    /// controller's slowdowns and stops, which give the cores back. The threads' I/O priority
    /// stays as it was. The process's one memtable prefaulter runs at the lowest priority any
    /// of its stores asked for. `Normal` by default (docs/lsm.md, "Background threads' CPU
    /// priority").
    pub background_cpu_priority: CpuPriority,
    /// The volume: layout of a new one, growth. A `volume.layout.wal_bytes` of 0 (the
    /// default) sizes the WAL area of a new volume from these options
    /// ([`Options::derived_wal_bytes`]); any other value is used as it is. An existing volume
    /// keeps the layout its header records, whatever these say.
    pub volume: VolumeOptions,
    /// Where writes without sync wait for their WAL pages (see [`WalTail`]): by default a
    /// file in `/dev/shm`, so such a write costs a memory copy yet survives a crash of the
    /// process (P2). Records stay there until their memtable is flushed, and then never
    /// reach the device, unless a write with sync (or a tail too full) writes them out: the
    /// tail holds up to about two memtables of records in memory (of the largest the tuner
    /// may make), as RocksDB's live log files do in the page cache (docs/lsm.md, "Deferred
    /// groups").
    pub wal_tail: WalTail,
    /// A capacity volume beside the store's (fast) volume, and where SSTs go between them
    /// (SpanDB's tiers; see [`TierOptions`]). None by default.
    pub tiers: TierOptions,
    /// ADOC's tuner: which knobs it turns each window (`TunerMode::Full`, ADOC, by default;
    /// `TunerMode::Off` runs none; see [`TunerOptions`]).
    pub tuner: TunerOptions,
    /// The memory the process may use ([`MemoryLimit`]): by default the host's, the limit of
    /// the process's memory cgroup within the machine's RAM, read at open. The tuner grows
    /// the batch only as far as the block cache, the index and filter blocks held beside it,
    /// the memtables and their records in the WAL tail fit in half of it
    /// (`memory_limit::batch_memory_cap`), and the store opens with `write_buffer_bytes`
    /// lowered to that bound where it is smaller (never below 4 MiB;
    /// [`Options::write_buffer_within`]): a store in a container with a memory limit is not
    /// grown, nor opened, into the OOM killer (docs/lsm.md, "Memory").
    pub memory_limit: MemoryLimit,
    /// Asked by compaction whether a value is dead (RocksDB's compaction filter, for
    /// removal): an application's own expiry, say. `None` by default. See
    /// [`CompactionFilter`] for what it is asked and what a removal does.
    pub compaction_filter: Option<Arc<dyn CompactionFilter>>,
    /// Test failpoint (feature `failpoints`): the flush thread panics before its flush once
    /// this many flushes have committed.
    #[cfg(feature = "failpoints")]
    #[doc(hidden)]
    pub panic_in_flush_after: Option<u32>,
    /// Test failpoint (feature `failpoints`): a compaction thread panics before its
    /// compaction once this many compactions have committed.
    #[cfg(feature = "failpoints")]
    #[doc(hidden)]
    pub panic_in_compaction_after: Option<u32>,
    /// Test failpoint (feature `failpoints`): the leader of a group of several writers panics
    /// before it publishes the group once this many groups have been appended.
    #[cfg(feature = "failpoints")]
    #[doc(hidden)]
    pub panic_in_write_leader_after: Option<u64>,
    /// Test knob (feature `failpoints`): whether groups of unsynced writes overlap with the
    /// next group whatever the machine's cores (`None`: as the cores say), so that a 2-core
    /// machine tests the path a 16-core one takes.
    #[cfg(feature = "failpoints")]
    #[doc(hidden)]
    pub overlap_write_groups: Option<bool>,
    /// Test knob (feature `failpoints`): whether the writers of a large write group insert
    /// their own ops, in parallel, whatever the machine's cores (`None`: as the cores say),
    /// so that a 2-core machine tests the path a 16-core one takes.
    #[cfg(feature = "failpoints")]
    #[doc(hidden)]
    pub parallel_group_inserts: Option<bool>,
    /// Test failpoint (feature `failpoints`): every write group's inserts start this long
    /// after its append, widening the window in which later groups append, memtables
    /// switch and flushes start while the group is still to insert.
    #[cfg(feature = "failpoints")]
    #[doc(hidden)]
    pub pause_before_group_inserts: Option<std::time::Duration>,
    /// Test failpoint (feature `failpoints`): every point read (`get`, `multi_get`) calls
    /// this between loading the published view and the last sequence (`db/published.rs`),
    /// so that a test can hold a read there while writes, flushes and compactions come
    /// between the two, and let it go when they are done.
    #[cfg(feature = "failpoints")]
    #[doc(hidden)]
    pub point_read_hook: Option<FailpointHook>,
    /// Test failpoint (feature `failpoints`): every compaction that rewrites its inputs
    /// calls this once its room is reserved and before it writes any output, so that a test
    /// can hold a compaction there, its reservation unspent, while flushes come.
    #[cfg(feature = "failpoints")]
    #[doc(hidden)]
    pub compaction_hook: Option<FailpointHook>,
    /// Test failpoint (feature `failpoints`): a flush calls this each time it publishes its
    /// progress (`memtable_pace.rs`), so that a test can make a flush slow against the
    /// writes behind it.
    #[cfg(feature = "failpoints")]
    #[doc(hidden)]
    pub flush_progress_hook: Option<FailpointHook>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            write_buffer_bytes: 64 << 20,
            max_write_buffer_number: 2,
            level0_file_num_compaction_trigger: 4,
            level0_slowdown_writes_trigger: 20,
            level0_stop_writes_trigger: 36,
            max_bytes_for_level_base: 256 << 20,
            max_bytes_for_level_multiplier: 10,
            dynamic_level_bytes: true,
            target_file_size_base: 64 << 20,
            compaction_pri: CompactionPri::default(),
            odd_chunk_rule: true,
            max_background_jobs: 2,
            wal_loggers: WAL_LOGGERS_DEFAULT,
            adaptive_wal_loggers: true,
            async_queue_depth: 1024,
            async_workers: 2,
            soft_pending_compaction_bytes_limit: 64 << 30,
            hard_pending_compaction_bytes_limit: 256 << 30,
            delayed_write_rate: 0,
            sst: SstOptions::default(),
            block_cache_bytes: 32 << 20,
            cache_index_and_filter_blocks: false,
            use_direct_reads: false,
            use_direct_io_for_flush_and_compaction: false,
            prepopulate_block_cache: true,
            idle_compaction_io: false,
            background_cpu_priority: CpuPriority::Normal,
            // The layout's `wal_bytes` is 0: a new volume's WAL area is sized from these
            // options ([`Options::volume_options`]).
            volume: VolumeOptions {
                initial_slots: INITIAL_SLOTS_DEFAULT,
                ..VolumeOptions::default()
            },
            wal_tail: WalTail::default(),
            tiers: TierOptions::default(),
            tuner: TunerOptions::default(),
            memory_limit: MemoryLimit::default(),
            compaction_filter: None,
            #[cfg(feature = "failpoints")]
            panic_in_flush_after: None,
            #[cfg(feature = "failpoints")]
            panic_in_compaction_after: None,
            #[cfg(feature = "failpoints")]
            panic_in_write_leader_after: None,
            #[cfg(feature = "failpoints")]
            overlap_write_groups: None,
            #[cfg(feature = "failpoints")]
            parallel_group_inserts: None,
            #[cfg(feature = "failpoints")]
            pause_before_group_inserts: None,
            #[cfg(feature = "failpoints")]
            point_read_hook: None,
            #[cfg(feature = "failpoints")]
            compaction_hook: None,
            #[cfg(feature = "failpoints")]
            flush_progress_hook: None,
        }
    }
}

impl Options {
    /// Small sizes for tests and examples: 256 KiB memtables, 64 KiB slots, a few MiB in all.
    /// No WAL tail ([`WalTail::Off`]): a test that reopens a copy of a device at some instant
    /// cannot copy a tail as of that instant; tests of the tail choose one explicitly. No
    /// tuner ([`TunerMode::Off`](crate::TunerMode::Off)), for the same reason.
    pub fn small_for_tests() -> Options {
        Options {
            write_buffer_bytes: 256 << 10,
            max_bytes_for_level_base: 1 << 20,
            target_file_size_base: 256 << 10,
            block_cache_bytes: 1 << 20,
            volume: VolumeOptions {
                layout: LayoutOptions {
                    slot_bytes: 64 << 10,
                    version_log_bytes: 256 << 10,
                    wal_bytes: 4 << 20,
                },
                grow_slots_min: 64,
                initial_slots: 64,
                ..VolumeOptions::default()
            },
            wal_tail: WalTail::Off,
            // Off: a tuner acts on wall-clock windows, which would make seeded tests depend
            // on the machine's speed. Tests of the tuner turn it on.
            tuner: TunerOptions { mode: crate::tuner::TunerMode::Off, ..TunerOptions::default() },
            ..Options::default()
        }
    }

    /// Whether a store at `path` (a directory, a volume file or a block device) writes its
    /// SSTs through the page cache: when `use_direct_io_for_flush_and_compaction` is false
    /// and `path` is not a block device.
    ///
    /// A block device's cached pages are written back one 4 KiB request per page (the
    /// kernel's buffer heads; merged later, but each counted by whatever limits requests): a
    /// loop device throttled to 500 MB/s and 50K IOPS took buffered writes at 144-204 MB/s
    /// and O_DIRECT writes of 1 MiB at 487 MB/s, and fillrandom of 1 KB values with 16
    /// threads ran at 105-108k ops/s buffered against 209-232k with O_DIRECT writes and the
    /// new SSTs prefetched into the page cache (BENCHMARKS-history.md, from docs/lsm.md's
    /// "Writes through the page cache"). A file system writes
    /// a file's pages back in large requests, so a volume file keeps the choice.
    pub fn writes_ssts_through_page_cache(&self, path: &std::path::Path) -> bool {
        use std::os::unix::fs::FileTypeExt;
        let block_device = std::fs::metadata(shale_space::volume_file(path))
            .is_ok_and(|m| m.file_type().is_block_device());
        !self.use_direct_io_for_flush_and_compaction && !block_device
    }

    /// Number of WAL log groups: one per memtable that may exist at once, and one spare so a
    /// new memtable can start while the oldest sealed one finishes its flush.
    pub fn wal_groups(&self) -> u32 {
        self.max_write_buffer_number as u32 + 1
    }

    /// The WAL area a new volume gets when `volume.layout.wal_bytes` is 0: its two metadata
    /// pages and [`Options::wal_groups`] groups, each with room for a full memtable's batches
    /// and their framing (`write_buffer_bytes` and half again, in whole pages).
    pub fn derived_wal_bytes(&self) -> u64 {
        // A tuner that grows the batch needs groups for its largest memtables: a WAL group
        // that fills seals its memtable whatever the write buffer size says.
        self.wal_bytes_for_batch(self.largest_memtable_bytes())
    }

    /// The write buffer a store with these options opens with under a memory limit of
    /// `limit` bytes (`None`: none): `write_buffer_bytes`, lowered where two (or
    /// `max_write_buffer_number`) memtables of it, their records in the WAL tail and the block
    /// cache would pass half the limit, never below 4 MiB (docs/lsm.md, "Memory"). A store
    /// resolves [`Options::memory_limit`] once at open and calls this.
    pub fn write_buffer_within(&self, limit: Option<u64>) -> usize {
        crate::memory_limit::write_buffer_within(
            limit,
            self.write_buffer_bytes as u64,
            self.block_cache_bytes as u64,
            self.max_write_buffer_number as u64,
            self.keeps_wal_tail(),
        ) as usize
    }

    /// The largest memtable within `limit` beside the block cache and `held_meta` bytes of
    /// index and filter blocks held by SST readers (`memory_limit::batch_memory_cap`).
    pub(crate) fn memory_cap(&self, limit: u64, held_meta: u64) -> u64 {
        crate::memory_limit::batch_memory_cap(
            limit,
            (self.block_cache_bytes as u64).saturating_add(held_meta),
            self.max_write_buffer_number as u64,
            self.keeps_wal_tail(),
        )
    }

    /// The block cache's budget under a memory limit of `limit` bytes beside memtables of the
    /// opened `write_buffer` and `held_meta` bytes of index and filter blocks held by SST
    /// readers (`memory_limit::block_cache_within`).
    pub(crate) fn block_cache_within(&self, limit: u64, write_buffer: u64, held_meta: u64) -> u64 {
        crate::memory_limit::block_cache_within(
            Some(limit),
            self.block_cache_bytes as u64,
            write_buffer,
            self.max_write_buffer_number as u64,
            self.keeps_wal_tail(),
            held_meta,
        )
    }

    /// The index and filter bytes SST readers may hold outside the cache under a memory limit
    /// of `limit` (`None`: none) beside memtables of the opened `write_buffer`
    /// (`memory_limit::held_meta_room`).
    pub(crate) fn held_meta_room(&self, limit: Option<u64>, write_buffer: u64) -> u64 {
        crate::memory_limit::held_meta_room(
            limit,
            write_buffer,
            self.max_write_buffer_number as u64,
            self.keeps_wal_tail(),
        )
    }

    /// Where a new SST reader keeps its index and filter blocks, the readers holding `held`
    /// bytes of them already and `room` bytes allowed ([`Options::held_meta_room`]): in the
    /// cache with `cache_index_and_filter_blocks`, and where the room is taken.
    pub(crate) fn index_and_filter_within(&self, held: u64, room: u64) -> IndexAndFilter {
        if held >= room { IndexAndFilter::Cached } else { self.index_and_filter() }
    }

    /// Whether unsynced writes keep their records in a WAL tail in memory beside the
    /// memtables (any tail the options ask for: one in a directory may be on tmpfs too).
    pub(crate) fn keeps_wal_tail(&self) -> bool {
        !matches!(self.wal_tail, WalTail::Off)
    }

    /// The largest memtable the store may fill: the write buffer, or the tuner's largest
    /// batch where it turns the batch (ADOC, ADOC-B).
    pub fn largest_memtable_bytes(&self) -> u64 {
        match self.tuner.mode {
            crate::tuner::TunerMode::Off | crate::tuner::TunerMode::Threads => {
                self.write_buffer_bytes as u64
            }
            _ => self.tuner.batch_max_for(self.write_buffer_bytes as u64),
        }
    }

    /// A WAL area whose groups each hold a memtable of `batch` bytes and half again.
    fn wal_bytes_for_batch(&self, batch: u64) -> u64 {
        let (num, den) = WAL_GROUP_HEADROOM;
        let group = (batch * num / den).next_multiple_of(AREA_ALIGN);
        WAL_META_BYTES + u64::from(self.wal_groups()) * group
    }

    /// The largest memtable a WAL group of `group_bytes` holds (the inverse of the sizing
    /// above): the tuner grows the batch no further on a volume whose groups are smaller.
    pub(crate) fn batch_held_by_wal_group(group_bytes: u64) -> u64 {
        let (num, den) = WAL_GROUP_HEADROOM;
        group_bytes * den / num
    }

    /// The volume options a store opens its volume with: `volume`, with the WAL area sized
    /// from the options where `volume.layout.wal_bytes` is 0.
    pub fn volume_options(&self) -> VolumeOptions {
        let mut v = self.volume.clone();
        // Whatever the caller's volume options say, a volume the lsm engine makes is an lsm
        // store, and it opens no other engine's.
        v.engine = Some(shale_space::EngineKind::Lsm);
        if v.layout.wal_bytes == 0 {
            v.layout.wal_bytes = self.derived_wal_bytes();
        }
        v
    }

    /// [`Options::volume_options`] for a store on a device of `fixed_capacity` bytes that
    /// cannot grow (a block device; `None` for a volume file, which grows). A WAL area
    /// derived for the tuner's largest batches (2.25 GiB at the defaults) that would take more
    /// than [`WAL_SHARE_OF_FIXED_DEVICE_MAX`] of such a device is derived from the write
    /// buffer instead (288 MiB at the defaults): the slots are the device's room for data,
    /// and the tuner then grows the batch only as far as the WAL groups hold. Only a new
    /// volume takes the layout; an existing one keeps the one its header records.
    pub(crate) fn volume_options_for(&self, fixed_capacity: Option<u64>) -> VolumeOptions {
        let mut v = self.volume_options();
        let (num, den) = WAL_SHARE_OF_FIXED_DEVICE_MAX;
        if let Some(capacity) = fixed_capacity
            && self.volume.layout.wal_bytes == 0
            && v.layout.wal_bytes > capacity / den * num
        {
            v.layout.wal_bytes = self.wal_bytes_for_batch(self.write_buffer_bytes as u64);
        }
        v
    }

    /// Checks every option against its range, and the options that must agree with each
    /// other, so that a store opened with them never meets one later (in a background thread,
    /// say). Called by `Db::open` before anything is read or written.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for the first bad option: the message names it as a field
    /// path (`write_buffer_bytes`, `sst.block_bytes`, `volume.layout.slot_bytes`), its value
    /// and the range accepted.
    pub fn validate(&self) -> Result<()> {
        self.validate_sizes()?;
        self.validate_levels()?;
        self.sst.validate()?;
        self.validate_volume()?;
        self.tiers.validate()?;
        self.validate_tuner()?;
        self.validate_wal_tail()?;
        self.validate_async()
    }

    /// Where SST readers keep index and filter blocks (`cache_index_and_filter_blocks`).
    pub(crate) fn index_and_filter(&self) -> IndexAndFilter {
        IndexAndFilter::from_option(self.cache_index_and_filter_blocks)
    }

    fn validate_sizes(&self) -> Result<()> {
        check_range(
            "write_buffer_bytes",
            self.write_buffer_bytes,
            WRITE_BUFFER_BYTES_MIN,
            WRITE_BUFFER_BYTES_MAX,
        )?;
        check_range(
            "max_write_buffer_number",
            self.max_write_buffer_number,
            WRITE_BUFFER_NUMBER_MIN,
            WRITE_BUFFER_NUMBER_MAX,
        )?;
        check_range("max_background_jobs", self.max_background_jobs, 2, BACKGROUND_JOBS_MAX)
            .map_err(|e| note(e, "one flush thread and at least one compaction thread"))?;
        check_range("wal_loggers", self.wal_loggers, 0, crate::wal::pipeline::LOGGERS_MAX)
            .map_err(|e| note(e, "loggers writing WAL pages at once"))?;
        check_range("block_cache_bytes", self.block_cache_bytes, 0, BLOCK_CACHE_BYTES_MAX)
    }

    fn validate_async(&self) -> Result<()> {
        check_range("async_queue_depth", self.async_queue_depth, 1, ASYNC_QUEUE_DEPTH_MAX)
            .map_err(|e| note(e, "at least one request; ASYNC_QUEUE_DEPTH_MAX bounds memory"))?;
        check_range("async_workers", self.async_workers, 1, ASYNC_WORKERS_MAX)
            .map_err(|e| note(e, "at least one thread serves the queue"))
    }

    fn validate_levels(&self) -> Result<()> {
        let (t, s, p) = (
            self.level0_file_num_compaction_trigger,
            self.level0_slowdown_writes_trigger,
            self.level0_stop_writes_trigger,
        );
        let order = "L0 triggers must satisfy 0 < compaction <= slowdown <= stop";
        check_range("level0_file_num_compaction_trigger", t, 1, L0_TRIGGER_MAX)
            .map_err(|e| note(e, order))?;
        check_range("level0_slowdown_writes_trigger", s, t, L0_TRIGGER_MAX)
            .map_err(|e| note(e, order))?;
        check_range("level0_stop_writes_trigger", p, s, L0_TRIGGER_MAX)
            .map_err(|e| note(e, order))?;
        check_range("max_bytes_for_level_base", self.max_bytes_for_level_base, 1, u64::MAX)?;
        check_range(
            "max_bytes_for_level_multiplier",
            self.max_bytes_for_level_multiplier,
            LEVEL_MULTIPLIER_MIN,
            u64::MAX,
        )?;
        if self.delayed_write_rate != 0 {
            check_range(
                "delayed_write_rate",
                self.delayed_write_rate,
                crate::write_controller::MIN_DELAYED_WRITE_RATE,
                u64::MAX,
            )
            .map_err(|e| note(e, "0 starts each slowdown from the rate writes went in"))?;
        }
        let (soft, hard) =
            (self.soft_pending_compaction_bytes_limit, self.hard_pending_compaction_bytes_limit);
        if soft > 0 && hard > 0 && soft > hard {
            return Err(Error::InvalidArgument(format!(
                "soft_pending_compaction_bytes_limit {soft} is above \
                 hard_pending_compaction_bytes_limit {hard} (0 turns either off)"
            )));
        }
        Ok(())
    }

    fn validate_tuner(&self) -> Result<()> {
        let t = &self.tuner;
        check_range("tuner.window_ms", t.window_ms, 10, 60_000)?;
        if t.threads_max != 0 {
            check_range("tuner.threads_max", t.threads_max, 2, BACKGROUND_JOBS_MAX)?;
        }
        if t.batch_max != 0 {
            check_range(
                "tuner.batch_max",
                t.batch_max,
                self.write_buffer_bytes as u64,
                WRITE_BUFFER_BYTES_MAX as u64,
            )?;
        }
        // Any positive limit is taken (one below what the options need leaves the batch at
        // the write buffer); 0 is a mistake for `Unlimited`.
        if self.memory_limit == MemoryLimit::Bytes(0) {
            return Err(Error::InvalidArgument(
                "memory_limit of 0 bytes (MemoryLimit::Unlimited sets none)".into(),
            ));
        }
        Ok(())
    }

    fn validate_volume(&self) -> Result<()> {
        let v = &self.volume;
        let named = |e: shale_space::Error| match e {
            shale_space::Error::InvalidArgument(why) => {
                Error::InvalidArgument(format!("volume.layout.{why}"))
            }
            other => Error::from(other),
        };
        v.layout.validate().map_err(named)?;
        // Only now is the slot size known to be sane enough to compare with.
        let slot = v.layout.slot_bytes;
        check_range("target_file_size_base", self.target_file_size_base, slot, SST_BYTES_MAX)
            .map_err(|e| note(e, "at least one slot, volume.layout.slot_bytes"))?;
        let steps_max = u32::try_from(VOLUME_STEP_BYTES_MAX / slot).unwrap_or(u32::MAX);
        check_range("volume.initial_slots", v.initial_slots, 1, steps_max)
            .map_err(|e| note(e, "at most VOLUME_STEP_BYTES_MAX, 1 TiB, pre-allocated at once"))?;
        check_range("volume.grow_slots_min", v.grow_slots_min, 1, steps_max)
            .map_err(|e| note(e, "at most VOLUME_STEP_BYTES_MAX, 1 TiB, per growth step"))?;
        let groups = u64::from(self.wal_groups());
        if v.layout.wal_bytes == 0 {
            // Derived: within range by the write buffer's limits, but the whole layout must
            // still pass the volume's own checks.
            return self.volume_options().layout.validate().map_err(named);
        }
        let min = WAL_META_BYTES + groups * WAL_GROUP_PAGES_MIN * PAGE_BYTES as u64;
        let max = WAL_META_BYTES + groups * WAL_GROUP_PAGES_MAX * PAGE_BYTES as u64;
        check_range("volume.layout.wal_bytes", v.layout.wal_bytes, min, max).map_err(|e| {
            note(e, "0 sizes it from the options; else 2 metadata pages and max_write_buffer_number + 1 groups of 2 to u32::MAX 4 KiB pages")
        })
    }

    fn validate_wal_tail(&self) -> Result<()> {
        match &self.wal_tail {
            // Checked here, not when the tail file is made: by then a new volume would exist.
            WalTail::Dir(dir) if !dir.is_dir() => Err(Error::InvalidArgument(format!(
                "wal_tail directory {} is not an existing directory",
                dir.display()
            ))),
            _ => Ok(()),
        }
    }
}

/// Checks that option `name` lies in `min..=max`.
fn check_range<T: PartialOrd + std::fmt::Display>(name: &str, v: T, min: T, max: T) -> Result<()> {
    if v < min || v > max {
        return Err(Error::InvalidArgument(format!("{name} {v} outside {min}..={max}")));
    }
    Ok(())
}

/// Adds why a range is what it is to a range error.
fn note(e: Error, why: &str) -> Error {
    match e {
        Error::InvalidArgument(s) => Error::InvalidArgument(format!("{s} ({why})")),
        other => other,
    }
}

/// Which SST of a level a compaction takes (RocksDB's `compaction_pri`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CompactionPri {
    /// The SST that overlaps the fewest bytes of the next level per byte of its own
    /// (RocksDB's `kMinOverlappingRatio`, its default): each compaction rewrites the least
    /// below for what it moves down, so write amplification is lowest.
    #[default]
    MinOverlappingRatio,
    /// The SSTs in key order, one after the other (RocksDB's `kRoundRobin`).
    RoundRobin,
}

/// Options of one write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// Acknowledge only once the write is durable (survives power loss, P1). Without it the
    /// write survives a crash of the process (P2): it is in the WAL tail ([`WalTail`]), or,
    /// with the tail off, its WAL page write has completed.
    pub sync: bool,
}

/// Options of one read.
///
/// A snapshot is borrowed, so a read can only name a snapshot that is still alive: compaction
/// keeps the versions a live snapshot reads, and a bare sequence number could outlive them.
///
/// ```
/// use shale_lsm::{Db, Options, ReadOptions};
///
/// let dir = tempfile::tempdir()?;
/// let db = Db::open(dir.path(), Options::small_for_tests())?;
/// db.put(b"k", b"old")?;
/// let snapshot = db.snapshot();
/// db.put(b"k", b"new")?;
/// let then = ReadOptions { snapshot: Some(&snapshot), ..Default::default() };
/// assert_eq!(db.get_opt(b"k", &then)?.as_deref(), Some(&b"old"[..]));
/// assert_eq!(db.get(b"k")?.as_deref(), Some(&b"new"[..]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct ReadOptions<'a> {
    /// Read as of this snapshot instead of the latest state. A snapshot of another store is
    /// refused with [`Error::InvalidArgument`].
    pub snapshot: Option<&'a crate::Snapshot>,
    /// Iterators only: keys at or after this.
    pub lower_bound: Option<Vec<u8>>,
    /// Iterators only: keys before this.
    pub upper_bound: Option<Vec<u8>>,
    /// Iterators only: keys starting with this (overrides the bounds).
    pub prefix: Option<Vec<u8>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::WalLayout;

    #[test]
    fn defaults_and_test_options_are_valid() {
        Options::default().validate().unwrap();
        Options::small_for_tests().validate().unwrap();
    }

    #[test]
    fn a_memory_limit_of_zero_is_refused() {
        assert_eq!(Options::default().memory_limit, MemoryLimit::Host);
        let zero = Options { memory_limit: MemoryLimit::Bytes(0), ..Options::default() };
        let e = zero.validate().unwrap_err().to_string();
        assert!(e.contains("memory_limit") && e.contains("Unlimited"), "{e}");
        for ok in [MemoryLimit::Bytes(1), MemoryLimit::Unlimited] {
            Options { memory_limit: ok, ..Options::default() }.validate().unwrap();
        }
    }

    #[test]
    fn reads_go_through_the_page_cache_by_default_as_rocksdb_s() {
        // Issue 14: with direct reads by default, data bigger than the block cache but
        // smaller than RAM read at a fifth of RocksDB's speed. Both settings are valid.
        assert!(!Options::default().use_direct_reads);
        assert!(!Options::small_for_tests().use_direct_reads);
        Options { use_direct_reads: true, ..Options::default() }.validate().unwrap();
    }

    #[test]
    fn flushes_and_compactions_write_through_the_page_cache_by_default_as_rocksdb_s() {
        assert!(!Options::default().use_direct_io_for_flush_and_compaction);
        assert!(!Options::small_for_tests().use_direct_io_for_flush_and_compaction);
        let direct = Options { use_direct_io_for_flush_and_compaction: true, ..Options::default() };
        direct.validate().unwrap();
    }

    #[test]
    fn index_and_filter_blocks_stay_out_of_the_cache_by_default_as_rocksdb_s() {
        assert!(!Options::default().cache_index_and_filter_blocks);
        assert_eq!(Options::default().index_and_filter(), IndexAndFilter::Held);
        let cached = Options { cache_index_and_filter_blocks: true, ..Options::default() };
        cached.validate().unwrap();
        assert_eq!(cached.index_and_filter(), IndexAndFilter::Cached);
    }

    #[test]
    fn a_derived_wal_group_holds_a_memtable_and_half_again() {
        use crate::tuner::TunerMode;
        let sizes = [(64 << 10, 2), (64 << 20, 2), (WRITE_BUFFER_BYTES_MAX, 64), (100_001, 5)];
        for (mode, (wb, n)) in [TunerMode::Off, TunerMode::Full, TunerMode::Threads]
            .into_iter()
            .flat_map(|m| sizes.map(|s| (m, s)))
        {
            let o = Options {
                write_buffer_bytes: wb,
                max_write_buffer_number: n,
                tuner: TunerOptions { mode, ..TunerOptions::default() },
                ..Options::default()
            };
            o.validate().unwrap();
            let wal = o.volume_options().layout.wal_bytes;
            assert_eq!(wal, o.derived_wal_bytes());
            let l = WalLayout::new(0, wal, o.wal_groups()).unwrap();
            // The memtable a group must hold: the largest batch where the tuner grows it.
            let memtable = match mode {
                TunerMode::Full => (8 * wb as u64).min(WRITE_BUFFER_BYTES_MAX as u64),
                _ => wb as u64,
            };
            let what = format!("{mode:?} {wb} x {n}: {l:?}");
            assert!(l.group_bytes() >= memtable * 3 / 2, "{what}");
            assert!(l.group_bytes() < memtable * 3 / 2 + AREA_ALIGN, "{what}");
        }
        let mut explicit = Options::default();
        explicit.volume.layout.wal_bytes = 1 << 20;
        assert_eq!(explicit.volume_options().layout.wal_bytes, 1 << 20);
    }

    #[test]
    fn the_smallest_explicit_wal_area_is_what_the_wal_can_split() {
        let mut o = Options::small_for_tests();
        let groups = u64::from(o.wal_groups());
        o.volume.layout.wal_bytes = WAL_META_BYTES + groups * WAL_GROUP_PAGES_MIN * 4096;
        o.validate().unwrap();
        WalLayout::new(0, o.volume.layout.wal_bytes, o.wal_groups()).unwrap();
        o.volume.layout.wal_bytes -= 4096;
        assert!(matches!(o.validate(), Err(Error::InvalidArgument(m)) if m.contains("wal_bytes")));
    }
}
