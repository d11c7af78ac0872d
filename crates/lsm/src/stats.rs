//! Statistics: what the store holds, what it wrote, and how long writes stalled.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Why a write waited (ADOC's stall kinds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stall {
    /// Too many memtables waiting for flush (MT).
    Memtable = 0,
    /// L0 at the slowdown trigger: each write delayed.
    L0Slowdown = 1,
    /// L0 at the stop trigger: writes wait for compaction.
    L0Stop = 2,
    /// Pending compaction bytes past the soft limit: each write delayed (PS).
    PendingSlowdown = 3,
    /// Pending compaction bytes past the hard limit: writes wait (PS).
    PendingStop = 4,
}

/// Count and total duration of stalls of one kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
// Reports grow fields: users read them, only the engine makes them.
#[non_exhaustive]
pub struct StallTotal {
    /// How many times writes stalled.
    pub count: u64,
    /// Total time spent stalled, in microseconds.
    pub duration_us: u64,
}

/// Stall totals by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
// Reports grow fields: users read them, only the engine makes them.
#[non_exhaustive]
pub struct Stalls {
    /// Memtable (MT) stalls.
    pub memtable: StallTotal,
    /// L0 slowdown delays.
    pub l0_slowdown: StallTotal,
    /// L0 stop stalls.
    pub l0_stop: StallTotal,
    /// Pending-compaction-bytes delays.
    pub pending_slowdown: StallTotal,
    /// Pending-compaction-bytes stops.
    pub pending_stop: StallTotal,
}

#[derive(Debug, Default)]
pub(crate) struct StallCounters {
    counts: [AtomicU64; 5],
    micros: [AtomicU64; 5],
}

impl StallCounters {
    pub(crate) fn record(&self, kind: Stall, took: Duration) {
        self.counts[kind as usize].fetch_add(1, Ordering::Relaxed);
        self.micros[kind as usize].fetch_add(took.as_micros() as u64, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> Stalls {
        let get = |k: Stall| StallTotal {
            count: self.counts[k as usize].load(Ordering::Relaxed),
            duration_us: self.micros[k as usize].load(Ordering::Relaxed),
        };
        Stalls {
            memtable: get(Stall::Memtable),
            l0_slowdown: get(Stall::L0Slowdown),
            l0_stop: get(Stall::L0Stop),
            pending_slowdown: get(Stall::PendingSlowdown),
            pending_stop: get(Stall::PendingStop),
        }
    }
}

/// Where a level's bytes came from and went, since open (RocksDB's compaction stats, by
/// level): what flushes and compactions wrote into it, and what compactions read out of it
/// and from the level below. Write amplification by level is `written / user bytes`; the
/// sum over levels, with the WAL's bytes, is the store's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
// Reports grow fields: users read them, only the engine makes them.
#[non_exhaustive]
pub struct LevelIo {
    /// Bytes of SSTs written into this level: flush outputs for L0, compaction outputs for
    /// the others (an odd chunk kept back in the compaction's source level counts there).
    pub written: u64,
    /// Flushes (L0) or compactions (other levels) that wrote into this level.
    pub runs: u64,
    /// Bytes compactions out of this level read from it (their inputs).
    pub read_from_level: u64,
    /// Bytes compactions into this level read from it (the SSTs below they merged with).
    pub read_from_below: u64,
    /// Bytes moved into this level unchanged (trivial moves): neither read nor written.
    pub moved_in: u64,
}

/// A snapshot of the store's statistics and properties.
#[derive(Clone, Debug, Default, PartialEq)]
// Reports grow fields: users read them, only the engine makes them.
#[non_exhaustive]
pub struct Stats {
    /// SSTs per level.
    pub files_per_level: Vec<usize>,
    /// Bytes per level.
    pub bytes_per_level: Vec<u64>,
    /// Target bytes per level (`level_targets`): 0 for L0 and for the levels above the base
    /// level, which are kept empty.
    pub level_target_bytes: Vec<u64>,
    /// The level L0 compacts into: 1 with static level sizing; with dynamic sizing the last
    /// level while the store is small, rising as the data grows.
    pub base_level: usize,
    /// Bytes by which levels exceed their targets (an estimate of compaction debt).
    pub pending_compaction_bytes: u64,
    /// The pace, in bytes a second, that writes go at while the store is slowed down: the
    /// delayed write rate as it has adapted so far (`Options::delayed_write_rate` at most,
    /// when set; 16 MiB/s until the first slowdown when not).
    pub delayed_write_rate: u64,
    /// The waits the slowdown's pace scheduled since open (each write group's, its longest,
    /// and by how much the longest passed its bound: zero while the pace kept to it).
    pub slowdown_pace: crate::write_controller::SlowdownPace,
    /// The waits the memtable's pace scheduled since open (`memtable_pace.rs`): write groups
    /// slowed so that the last memtable fills no sooner than the flush ahead of it ends.
    /// Their time is in `stalls` as memtable stall time.
    pub memtable_pace: crate::write_controller::SlowdownPace,
    /// Bytes written into and read out of each level since open (RocksDB's compaction stats).
    pub level_io: Vec<LevelIo>,
    /// Levels holding an odd chunk (LDS's odd-chunk rule), at most one each.
    pub odd_chunks: usize,
    /// Odd chunks kept back in their level since open.
    pub odd_chunks_kept: u64,
    /// Compactions running now.
    pub running_compactions: usize,
    /// Most compactions that ran at once since open.
    pub peak_running_compactions: usize,
    /// Bytes of room the running compactions hold reserved for the outputs they have not
    /// written yet (flushes leave it to them: `retried_for_room`).
    pub compaction_room_reserved: u64,
    /// Picks of a compaction put off, since open, because its outputs would not have fit in
    /// the volume's room beside the running compactions' and the memtables' (it ran once a
    /// running one ended).
    pub compactions_deferred_for_room: u64,
    /// Flushes and compactions, since open, that ran out of room on the volume while a
    /// compaction ran: each gave back what it had written and ran again once a running
    /// compaction ended, instead of stopping the store (a store stops for want of room only
    /// when no compaction is left to free any).
    pub retried_for_room: u64,
    /// Flushes, since open, that waited for a running compaction to end because the room
    /// left on the volume was what the running compactions had reserved for their outputs.
    pub flushes_waited_for_room: u64,
    /// Flushes and compactions, since open, that ran out of room with no compaction left
    /// to free any while SSTs that compactions had dropped still held room for their
    /// readers (iterators, `Db::check`, gets begun before the drop): each waited for one to
    /// be given back (or found one given back during its try) and ran again, instead of
    /// stopping the store.
    pub waited_for_held_room: u64,
    /// Bytes of SSTs that compactions dropped and readers still hold (RocksDB's
    /// `rocksdb.obsolete-sst-files-size`): taken on the volume until the last reader ends.
    pub obsolete_sst_bytes: u64,
    /// Background threads wanted: one flush thread and the compaction threads
    /// (`max_background_jobs`, `Db::set_background_jobs`).
    pub background_jobs: usize,
    /// Compaction threads running now (briefly more or fewer than wanted after a change).
    pub compaction_threads: usize,
    /// Size compaction outputs are cut at (`Db::set_target_file_size`).
    pub target_file_bytes: u64,
    /// Memtables, active and sealed.
    pub memtables: usize,
    /// Bytes in memtables.
    pub memtable_bytes: usize,
    /// Last sequence number handed out.
    pub last_seq: u64,
    /// Flushes completed since open.
    pub flushes: u64,
    /// Compactions completed since open (trivial moves included).
    pub compactions: u64,
    /// Puts that the compaction filter ([`crate::CompactionFilter`]) removed since open.
    pub compaction_filter_removals: u64,
    /// Compactions begun in the idle I/O class since open ([`crate::Options::idle_compaction_io`]).
    pub compactions_idle_io: u64,
    /// Times a compaction running in the idle I/O class went back to its thread's own class
    /// because the store fell halfway to a write slowdown, since open.
    pub compaction_io_raised: u64,
    /// Bytes of write batches accepted since open.
    pub user_bytes_written: u64,
    /// Write batches accepted since open.
    pub writes: u64,
    /// WAL appends that carried them (group commit: concurrent writes share one).
    pub write_groups: u64,
    /// Groups whose writers inserted their own batches into the memtable in parallel (the
    /// others' leaders inserted every batch themselves).
    pub parallel_insert_groups: u64,
    /// Hand-offs of group commit seen (a leader woken because the previous leader passed the
    /// leadership on), and the microseconds from each pass to the new leader running, summed:
    /// sampled (one write in 16 of each thread watches for one, `db/write_timing.rs`), so
    /// their ratio is the average hand-off.
    pub write_leader_handoffs: u64,
    pub write_leader_handoff_micros: u64,
    /// Microseconds leaders led groups (from taking the lead to passing it on), summed:
    /// estimated from one group in 16.
    pub write_group_micros: u64,
    /// Microseconds of WAL appends (pipelined groups: of their page writes), summed:
    /// estimated from one append in 16.
    pub wal_append_micros: u64,
    /// Sync groups whose WAL pages the pipeline wrote, durable writes of several groups in
    /// flight at once (`space/src/page_log/pipeline.rs`); the other groups appended with the WAL lock held.
    pub wal_pipelined_groups: u64,
    /// Loggers the pipeline allows now (it adapts between 1 and `Options::wal_loggers`), and
    /// how often it added and removed one.
    pub wal_loggers: usize,
    pub wal_logger_increases: u64,
    pub wal_logger_decreases: u64,
    /// Microseconds pipelined groups spent with their page writes in flight, summed over
    /// groups (so over 1 s a second when groups overlap).
    pub wal_pipeline_device_micros: u64,
    /// Microseconds pipelined groups spent, after their writes completed, waiting for every
    /// earlier group to publish, summed over groups.
    pub wal_pipeline_turn_wait_micros: u64,
    /// Bytes written to the WAL area since open.
    pub wal_bytes_written: u64,
    /// Bytes of the WAL area the store holds allocated on its device: the groups in use as
    /// far as written (4 MiB at a time), one free group kept for reuse, and the metadata
    /// pages. On a volume file that is its WAL area's disk usage, give or take the file
    /// system's rounding; the rest of the area is a hole. Counted from the open, which
    /// releases every group.
    pub wal_bytes_allocated: u64,
    /// Bytes of WAL records written without sync that never reached the device: their
    /// memtable's flush committed while they were still only in the WAL tail, as RocksDB's
    /// unsynced log files are deleted before the kernel writes their pages back. Counted as
    /// they lay in the tail (each record and its 8-byte tail header) since open; not in
    /// `wal_bytes_written`.
    pub wal_bytes_never_written: u64,
    /// Bytes of SSTs written since open.
    pub sst_bytes_written: u64,
    /// Bytes of flush and compaction outputs written with O_DIRECT since open
    /// (`use_direct_io_for_flush_and_compaction = true`, or a store on a device).
    pub sst_bytes_written_direct: u64,
    /// Bytes of flush and compaction outputs written through the page cache (and synced)
    /// since open (`use_direct_io_for_flush_and_compaction = false`).
    pub sst_bytes_written_buffered: u64,
    /// Flush and compaction outputs that outgrew the extent reserved for them as they were
    /// streamed, and were copied to a larger one (each costs a read and a write of the part
    /// streamed before; see `sst::writer`).
    pub sst_relocations: u64,
    /// Bytes written to the version log since open.
    pub version_log_bytes_written: u64,
    /// Block cache hits.
    pub block_cache_hits: u64,
    /// Block cache misses.
    pub block_cache_misses: u64,
    /// Blocks added to the block cache: by reads that missed it, and by flushes and
    /// compactions with `prepopulate_block_cache` (compactions' own reads add none).
    pub block_cache_adds: u64,
    /// Bytes held by the block cache.
    pub block_cache_bytes: usize,
    /// The block cache's budget now: `Options::block_cache_bytes`, or less where the memory
    /// limit lowered it beside the index and filter blocks held by SST readers (docs/lsm.md,
    /// "Memory").
    pub block_cache_capacity_bytes: usize,
    /// Of `block_cache_bytes`, those of index and filter blocks: 0 unless
    /// `Options::cache_index_and_filter_blocks`.
    pub block_cache_index_and_filter_bytes: usize,
    /// Lookups of index blocks in the block cache that found them (counted in
    /// `block_cache_hits` too; RocksDB's `rocksdb.block.cache.index.hit`). Only with
    /// `Options::cache_index_and_filter_blocks`, save for SSTs opened with it unset, whose
    /// readers hold their index.
    pub block_cache_index_hits: u64,
    /// Lookups of index blocks that missed the block cache: each read the block again.
    pub block_cache_index_misses: u64,
    /// Lookups of filter blocks in the block cache that found them.
    pub block_cache_filter_hits: u64,
    /// Lookups of filter blocks that missed the block cache: each read the block again.
    pub block_cache_filter_misses: u64,
    /// Bytes of index and filter blocks the live SSTs' readers hold outside the block cache
    /// (RocksDB's `rocksdb.estimate-table-readers-mem`, roughly): 0 with
    /// `Options::cache_index_and_filter_blocks`; memory no cache budget bounds without it.
    pub sst_index_and_filter_held_bytes: u64,
    /// Bytes of SSTs read with O_DIRECT since open (block-cache misses, scans' readahead,
    /// compaction inputs), whole device blocks: all of it came from the device.
    pub sst_bytes_read_direct: u64,
    /// Bytes of SSTs read through the page cache since open (`use_direct_reads = false`):
    /// an upper bound on what came from the device, since the kernel served some or all of
    /// it from memory.
    pub sst_bytes_read_buffered: u64,
    /// Bytes of compaction inputs read with O_DIRECT since open because the page cache did
    /// not hold them, in a store that reads through it (counted in neither figure above):
    /// a compaction leaves the page cache to readers (docs/lsm.md, "Compactions in the idle
    /// I/O class").
    pub sst_bytes_read_around_page_cache: u64,
    /// Readahead runs of scans and compactions read in the background, while the one before
    /// was being consumed (O_DIRECT reads only; through the page cache each run is read when
    /// it is needed), since open.
    pub sst_reads_ahead: u64,
    /// Data blocks that seeks read together, one per sorted run the block cache did not
    /// answer, before seeking (`DbIterator::with_batched_seeks`), since open.
    pub seek_batch_reads: u64,
    /// SSTs dropped by compactions whose last handle a caller's thread let go (a get or an
    /// iterator that began before the compaction committed), given back on the store's release
    /// thread rather than in that call, since open (`sst/release.rs`).
    pub sst_releases_deferred: u64,
    /// Requests the async API admitted since open (`Db::submit_*`): tickets handed out, the
    /// ones complete at submission (lucky reads, empty batches) included.
    pub async_submitted: u64,
    /// Async requests completed since open: equal to `async_submitted` once every ticket
    /// handed out has completed (each completes exactly once).
    pub async_completed: u64,
    /// Async gets answered from memory (memtables, held indexes and filters, cached blocks)
    /// on the caller's thread, with no queue hop (SpanDB's lucky reads); counted in
    /// `async_submitted` and `async_completed` too.
    pub async_lucky_reads: u64,
    /// Async submissions refused with `Error::Busy` (the queue was full; nothing was queued).
    pub async_busy: u64,
    /// Batches the async workers committed: each holds every async write queued when a
    /// worker took them (up to a size bound), so fewer batches than async writes means
    /// writes shared a commit. Each is one of `writes`.
    pub async_write_batches: u64,
    /// Write stalls by kind.
    pub stalls: Stalls,
    /// Why the store stopped, if it did.
    pub stopped: Option<String>,
    /// Per tier, fast then capacity (a store without a capacity volume has only the fast
    /// one): what lives there and what went to and from it since open.
    pub tiers: Vec<TierStats>,
    /// The level pointer of a tiered store: new SSTs of levels below it go to the fast
    /// volume (`TierOptions`); 0 without a capacity volume.
    pub level_pointer: usize,
    /// The tuner's mode ("off", "adoc", "adoc-t", "adoc-b").
    pub tuner_mode: &'static str,
    /// Windows the tuner looked at since open.
    pub tuner_windows: u64,
    /// Whether the tuner thread runs: false without a tuner; it turns false once the
    /// thread has returned, after the store stopped (P5), a knob could not be turned, or
    /// close. The tuner counts no windows after that.
    pub tuner_running: bool,
    /// Windows in which it found an L0 overflow (L0O), since open.
    pub tuner_l0_overflows: u64,
    /// Windows in which it found a redundancy overflow (RDO), since open.
    pub tuner_redundancy_overflows: u64,
    /// Windows in which it found a memory overflow (MMO), since open.
    pub tuner_memory_overflows: u64,
    /// The last window's overflow ("L0O", "RDO", "MMO"), or "" for none or no tuner.
    pub tuner_last_overflow: &'static str,
    /// The largest batch the tuner may set as of its last window: its cap, lowered to what
    /// the volume's free space leaves safe (0 without a tuner or before its first window).
    pub tuner_batch_max: u64,
    /// The memory limit the write buffer and the tuner's batch are bounded by
    /// (`Options::memory_limit` as read at open: the host's memory cgroup limit within its
    /// RAM by default; 0 for none).
    pub memory_limit: u64,
    /// Times the active memtable filled while a sealed one was still unflushed (ADOC's memory
    /// overflow, counted whether or not a tuner runs), since open.
    pub memory_overflows: u64,
    /// The memtable size now (ADOC's batch; `Db::set_write_buffer_bytes`).
    pub write_buffer_bytes: u64,
    /// Moves of the level pointer deeper (more levels on the fast volume) since open.
    pub level_pointer_deeper: u64,
    /// Moves of the level pointer shallower (fewer levels on the fast volume) since open.
    pub level_pointer_shallower: u64,
}

/// One tier's figures in [`Stats::tiers`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
// Reports grow fields: users read them, only the engine makes them.
#[non_exhaustive]
pub struct TierStats {
    /// "fast" or "capacity".
    pub name: &'static str,
    /// Live SSTs on the tier.
    pub ssts: usize,
    /// Bytes of the live SSTs on the tier (whole slots).
    pub live_bytes: u64,
    /// Slots of the tier's volume now (a volume file grows).
    pub total_bytes: u64,
    /// Bytes written to the tier since open: WAL, version log and SSTs (direct and through
    /// the page cache).
    pub write_bytes: u64,
    /// Write requests sent to the tier's device (page-cache writes are not requests of
    /// shale's and are not counted).
    pub writes: u64,
    /// Bytes read from the tier since open (through the page cache: an upper bound on what
    /// came from the device).
    pub read_bytes: u64,
    /// Read requests sent to the tier's device (page-cache reads not counted).
    pub reads: u64,
}

impl Stats {
    /// Device bytes written per user byte since open (WAL, SSTs and version log).
    pub fn write_amplification(&self) -> f64 {
        let device =
            self.wal_bytes_written + self.sst_bytes_written + self.version_log_bytes_written;
        if self.user_bytes_written == 0 {
            0.0
        } else {
            device as f64 / self.user_bytes_written as f64
        }
    }

    /// Block cache hit ratio, 0 to 1.
    pub fn block_cache_hit_ratio(&self) -> f64 {
        let total = self.block_cache_hits + self.block_cache_misses;
        if total == 0 { 0.0 } else { self.block_cache_hits as f64 / total as f64 }
    }
}
