//! Opening a store: recovery of the committed version and of the WAL.
//!
//! 1. The volume recovers its version log; the base and its deltas are folded into the live
//!    SSTs (`version_edit::fold`) and only those are opened.
//! 2. The WAL is read with the geometry its metadata records, from the oldest unflushed
//!    generation, in LTN order.
//!    Then the WAL tail's records that continue them (writes without sync whose pages had not
//!    completed when the process died).
//! 3. The replayed records become L0 SSTs committed in one edit that marks every old WAL
//!    generation flushed, before any new write.
//! 4. A new WAL group starts, and the flush and compaction threads (`pool.rs`).
//!
//! A read-only open (`read_only.rs`) runs 1 and 2 the same way, reading the WAL tail without
//! changing it, and keeps the replayed records in memtables instead of 3 and 4.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};
use shale_io::QueueOptions;
use shale_space::{IoClass, Opened};

use crate::batch;
use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::memtable::Memtable;
use crate::options::Options;
use crate::sst::{PageCacheFiles, QueuePool};
use crate::stats::StallCounters;
use crate::version::Version;
use crate::version_edit::{SstMeta, VersionEdit};
use crate::wal::{LogPipeline, RecoveredGroup, TailLog, WalLayout, WalWriter};
use crate::write_controller::DelayedWrites;

use super::published::Publication;
use super::{
    Db, Inner, MEMTABLE_OVERHEAD_PER_OP, State, WAL_QUEUE_DEPTH, WriteQueue, memtable_has_room,
    new_memtable, open_sst,
};

/// What stages 1 and 2 found: the engine with its committed version, and the WAL's records
/// to replay (the device's groups, then the tail's).
pub(super) struct Recovered {
    pub(super) inner: Arc<Inner>,
    pub(super) groups: Vec<RecoveredGroup>,
    pub(super) tail_records: Vec<Vec<u8>>,
}

impl Db {
    pub(super) fn open_volume(
        opened: Opened,
        opts: Options,
        files: [PageCacheFiles; 2],
    ) -> Result<Db> {
        let started = Instant::now();
        // Memtable chunks faulted in ahead of the writers, once the store writes.
        crate::memtable::start_prefaulter(opts.background_cpu_priority);
        let Recovered { inner, groups, tail_records } = Db::recover(opened, opts, files)?;
        let l = inner.volume.layout();
        // 3. Replay the WAL into memtables and flush them before accepting writes, so every
        //    old group can be recycled and recovery work stays bounded.
        let records: usize = groups.iter().map(|g| g.records.len()).sum();
        let from_tail = inner.replay_wal(&groups, &tail_records)?;
        // Free slots take no disk space: give back any a crash or an older version left
        // allocated (the WAL's free groups were given back with the replay's commit).
        inner.volume.release_free_storage()?;
        {
            let mut wal = inner.wal.lock();
            wal.clear_tail();
            let mut st = inner.state.lock();
            let ltn = st.next_ltn;
            st.next_ltn += 1;
            wal.start_group(ltn)?.ok_or_else(|| {
                Error::corruption("no free WAL group after recovery", l.wal_offset)
            })?;
            st.mem_ltn = ltn;
        }
        log::info!(
            "opened store: {} WAL records replayed from {} groups and {} from the WAL tail, \
             last sequence {}, {:?}",
            records,
            groups.len(),
            from_tail,
            inner.state.lock().last_seq,
            started.elapsed()
        );
        Db::start_workers(inner)
    }

    /// Stages 1 and 2, for a read-write open or (on a read-only volume) a read-only one: the
    /// only difference is the WAL tail, opened to be written on, or only read.
    /// SSTs are read and written through `files` where given (the page cache), else with
    /// O_DIRECT.
    pub(super) fn recover(
        opened: Opened,
        opts: Options,
        files: [PageCacheFiles; 2],
    ) -> Result<Recovered> {
        let read_only = opened.volume.is_read_only();
        let volume = Arc::new(opened.volume);
        let [fast_files, capacity_files] = files;
        let pool = Arc::new(QueuePool::with_tier_files(volume.clone(), fast_files, capacity_files));
        let cache = Arc::new(BlockCache::new(opts.block_cache_bytes));
        // 0. Another engine's store is refused, untouched, before anything of it is read as
        //    this engine's state.
        refuse_other_engine(&opened.versions, &volume.layout())?;
        // 1. The committed version: fold the base's complete state and each delta into the set
        //    of live SSTs first, then open only those (see `version_edit::fold`).
        let folded = crate::version_edit::fold(&opened.versions)?;
        // A store whose version log holds no edit of this engine has never taken a write:
        // every read-write open commits an edit (`replay_wal`) before it accepts one. Nothing
        // in its WAL area is its own then, whatever lies there: an older store's groups and
        // metadata, left where a tool wiped only the header and version logs, which must not
        // be replayed into this one. It starts its WAL generations at a point of its own
        // (`log_page::first_generation`), so that no old page is ever read as one of its
        // groups', and the edit `replay_wal` commits makes that point the store's.
        let never_written = std::iter::once(&opened.versions.base.engine)
            .chain(opened.versions.deltas.iter().map(|d| &d.engine))
            .all(|bytes| bytes.is_empty());
        let fresh = never_written && !read_only;
        let (oldest_unflushed_ltn, next_ltn) = if fresh {
            let first = shale_space::log_page::first_generation(&volume.header().volume_id);
            (first, first)
        } else {
            (folded.oldest_unflushed_ltn, folded.next_ltn)
        };
        let replayed = VersionEdit {
            last_seq: folded.last_seq,
            oldest_unflushed_ltn,
            next_ltn,
            ..Default::default()
        };
        let max_id = folded.max_sst_id;
        let live = folded.live;
        let all_live = VersionEdit { added: live.into_values().collect(), ..Default::default() };
        // The memory limit, read once (a cgroup's limit is set before its processes start),
        // and the write buffer within it (`memory_limit::write_buffer_within`); the readers
        // hold index and filter blocks up to their room, the rest go to the cache.
        let memory_limit = opts.memory_limit.resolve();
        let write_buffer = opts.write_buffer_within(memory_limit);
        let held_meta_room = opts.held_meta_room(memory_limit, write_buffer as u64);
        let mut held = 0;
        let mut open = |m: &SstMeta| {
            let h = open_sst(&pool, &cache, opts.index_and_filter_within(held, held_meta_room), m)?;
            held += h.reader.held_bytes() as u64;
            Ok(h)
        };
        let version = Version::empty().apply(&all_live, &mut open)?.0;
        // 2. The WAL: the groups of unflushed generations.
        let l = volume.layout();
        let mut q = volume
            .queue(IoClass::Wal, &QueueOptions { depth: WAL_QUEUE_DEPTH, ..Default::default() })?;
        let wanted = WalLayout::new(l.wal_offset, l.wal_bytes, opts.wal_groups())?;
        let (mut meta, groups) = if fresh {
            // Not read as this store's: an empty WAL whose metadata supersedes whatever copy
            // of another store's the area holds.
            let mut meta = crate::wal::meta::WalMeta::empty(wanted.groups, wanted.pages_per_group);
            meta.generation = crate::wal::meta_generation(&wanted, &mut q)?;
            (meta, Vec::new())
        } else {
            crate::wal::recover(&wanted, &mut q, replayed.oldest_unflushed_ltn)?
        };
        let max_meta_ltn = meta.groups.iter().map(|g| g.ltn).max().unwrap_or(0);
        if meta.groups.len() as u32 != wanted.groups
            || meta.pages_per_group != wanted.pages_per_group
        {
            // The options now ask for another WAL geometry. Every recovered group is flushed
            // below before a page is written, and the generation keeps growing, so the old
            // layout is simply forgotten (a crash before the new metadata lands leaves the old
            // one, whose groups the committed version already marks flushed).
            let generation = meta.generation;
            meta = crate::wal::meta::WalMeta::empty(wanted.groups, wanted.pages_per_group);
            meta.generation = generation;
        }
        // The WAL tail: records of writes without sync whose pages had not completed.
        let owner = crate::wal::tail::TailOwner {
            volume_id: volume.header().volume_id,
            instance_id: volume.instance_id(),
        };
        let (tail, tail_records) = if read_only {
            (None, TailLog::read_records(&opts.wal_tail, &owner)?)
        } else {
            match TailLog::open(
                &opts.wal_tail,
                &owner,
                volume.volume_path(),
                wal_tail_ring_bytes(&opts),
            )? {
                Some((t, records)) => (Some(t), records),
                None => (None, Vec::new()),
            }
        };
        let device = volume.device().clone();
        let mut wal = WalWriter::new(wanted, Box::new(q), device, meta).with_tail(tail);
        if !read_only {
            // Freed groups' storage goes back off the write path (`wal/release.rs`).
            wal = wal.with_release_thread();
        }
        // One queue per logger, of the WAL's class so its bytes count as WAL bytes.
        let loggers = if read_only { 0 } else { opts.wal_loggers };
        let logger_queue = || -> Result<Box<dyn shale_io::Queue>> {
            let o = QueueOptions { depth: WAL_QUEUE_DEPTH, ..Default::default() };
            Ok(Box::new(volume.queue(IoClass::Wal, &o)?))
        };
        let queues = (0..loggers).map(|_| logger_queue()).collect::<Result<_>>()?;
        // Without loggers it still orders the publication of every write group.
        let pipeline = LogPipeline::new(queues, opts.adaptive_wal_loggers);
        if !read_only {
            warn_of_memory(&opts, memory_limit, write_buffer);
        }
        let (mem, version) = (Arc::new(new_memtable(write_buffer)), Arc::new(version));
        let inner = Arc::new(Inner {
            published: Publication::new(&mem, &version, replayed.last_seq),
            read_only,
            opts: opts.clone(),
            volume: volume.clone(),
            pool,
            cache,
            wal_bytes_allocated: wal.allocated_bytes(),
            wal_bytes_never_written: wal.deferred_dropped_bytes(),
            wal_releases: wal.releases(),
            wal: Mutex::new(wal),
            pipeline,
            overlap_groups: overlap_write_groups(&opts),
            parallel_inserts: parallel_group_inserts(&opts),
            timings: super::WriteTimings::new(),
            filtered_removals: std::sync::atomic::AtomicU64::new(0),
            // The first commit after open sets it from the store's shape.
            compactions_yield: std::sync::atomic::AtomicBool::new(false),
            compaction_io: super::compaction::CompactionIoCounts::default(),
            closing: std::sync::atomic::AtomicBool::new(false),
            writers: WriteQueue::default(),
            state: Mutex::new(State {
                freed_ltns: Vec::new(),
                mem,
                mem_bytes: 0,
                mem_ltn: 0,
                imm: VecDeque::new(),
                version,
                last_seq: replayed.last_seq,
                allocated_seq: replayed.last_seq,
                next_ltn: replayed.next_ltn.max(max_meta_ltn + 1),
                snapshots: BTreeMap::new(),
                persisted_seq: replayed.last_seq,
                pending_compaction_bytes: 0,
                delayed: DelayedWrites::new(opts.delayed_write_rate),
                memtable_paced: DelayedWrites::new(u64::MAX),
                memtable_paced_flush: None,
                stopped: None,
                shutting_down: false,
                full_compaction: false,
                rewrite_bottom: false,
                compaction: Default::default(),
                pool: Default::default(),
                compaction_room_reserved: [0; 2],
                compactions_deferred_for_room: 0,
                retried_for_room: 0,
                flushes_waited_for_room: 0,
                waited_for_held_room: 0,
                out_of_room_at: None,
                l0_inputs_max: None,
                flushes: 0,
                compactions: 0,
                level_io: Default::default(),
            }),
            cv: Condvar::new(),
            next_sst_id: AtomicU64::new(max_id + 1),
            stalls: StallCounters::default(),
            opened: Instant::now(),
            user_bytes_written: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            write_groups: AtomicU64::new(0),
            parallel_insert_groups: AtomicU64::new(0),
            write_buffer_bytes: AtomicU64::new(write_buffer as u64),
            opened_write_buffer_bytes: write_buffer as u64,
            memory_limit: memory_limit.unwrap_or(0),
            held_meta_room,
            held_meta_bytes: AtomicU64::new(0),
            target_file_bytes: AtomicU64::new(opts.target_file_size_base),
            level_pointer: super::tier_head::LevelPointer::new(opts.tiers.fast_levels),
            workers: Default::default(),
            memory_overflows: AtomicU64::new(0),
            flush_progress: Default::default(),
            memtable_stops: AtomicU64::new(0),
            tuner: Default::default(),
        });
        // A store reopened with its data in a small container: the held index and filter
        // blocks may leave the cache less than the owner's budget from the start.
        inner.fit_block_cache(&inner.state.lock().version.clone());
        Ok(Recovered { inner, groups, tail_records })
    }
}

impl Inner {
    /// Replays recovered WAL groups into memtables, writes them as L0 SSTs, and commits them
    /// in one edit that also marks every old WAL generation flushed. One edit, because a crash
    /// in the middle must leave the WAL groups in charge of all of the replayed writes.
    ///
    /// Then the records of the WAL tail that continue the sequence numbers: writes without
    /// sync whose pages had not completed when the process died. Returns how many of those.
    fn replay_wal(&self, groups: &[RecoveredGroup], tail_records: &[Vec<u8>]) -> Result<usize> {
        // No snapshot exists while the store opens: only each key's newest version is kept.
        const NO_SNAPSHOT: u64 = u64::MAX;
        let (mut outputs, mut opened) = (Vec::new(), Vec::new());
        let (last_seq, from_tail) = self.replay_records(groups, tail_records, &mut |mem| {
            for (meta, reader) in self.write_memtable(&mem, NO_SNAPSHOT)? {
                outputs.push(meta);
                opened.push(reader);
            }
            Ok(())
        })?;
        let mut st = self.state.lock();
        self.publish_last_seq(&mut st, last_seq);
        let edit = VersionEdit {
            last_seq,
            oldest_unflushed_ltn: st.next_ltn,
            added: outputs.iter().map(|m| (0, m.clone())).collect(),
            ..Default::default()
        };
        let extents = outputs.iter().map(|m| m.extent).collect();
        self.commit_edit(&mut st, edit, extents, Vec::new(), opened)?;
        let next = st.next_ltn;
        drop(st);
        // Committed: no old group is read again, so their storage goes back too.
        self.wal.lock().free_generations_below(next)?;
        Ok(from_tail)
    }

    /// Applies the device's WAL records, then the tail's that continue them, to memtables of
    /// the write buffer's size, handing each full one (and the last, if not empty) to `seal`.
    /// Returns the last sequence number replayed and how many records came from the tail.
    pub(super) fn replay_records(
        &self,
        groups: &[RecoveredGroup],
        tail_records: &[Vec<u8>],
        seal: &mut dyn FnMut(Arc<Memtable>) -> Result<()>,
    ) -> Result<(u64, usize)> {
        let new_mem = || Arc::new(new_memtable(self.write_buffer_bytes()));
        let mut mem = new_mem();
        let mut mem_bytes = 0;
        let mut last_seq = self.state.lock().last_seq;
        // The device's records, then the tail's that carry on from them: a tail record wholly
        // below the last sequence number is already in (or was flushed); the first one that
        // does not start right after it ends the replay (a gap: power was lost, the tail is
        // from another time, or its pages made it to the device).
        let device = groups.iter().flat_map(|g| g.records.iter().map(move |r| (r, Some(g))));
        let mut from_tail = 0;
        let tail = tail_records.iter().map(|r| (r, None));
        // Records bound for `mem`, inserted a chunk at a time by several threads.
        let mut chunk: Vec<(batch::DecodedBatch<'_>, Option<&RecoveredGroup>)> = Vec::new();
        let mut chunk_bytes = 0;
        for (rec, group) in device.chain(tail) {
            let b = batch::decode(rec, group.map_or(0, |g| g.ltn))?;
            let (first, last) = (b.first_seq, b.first_seq + b.ops.len() as u64 - 1);
            if group.is_none() {
                if last <= last_seq {
                    continue;
                }
                if first != last_seq + 1 {
                    log::warn!(
                        "WAL tail skips from sequence {last_seq} to {first}: its remaining \
                         records are not replayed"
                    );
                    break;
                }
                from_tail += 1;
            }
            let footprint: usize = rec.len() + b.ops.len() * MEMTABLE_OVERHEAD_PER_OP;
            // The chunk's records are not in `mem` yet: its real bytes lag by at most a chunk
            // (REPLAY_CHUNK_BYTES), while the reservation keeps the arena from filling.
            let room = memtable_has_room(&mem, mem_bytes, footprint, self.write_buffer_bytes());
            if !room && mem_bytes > 0 {
                insert_replayed(&mem, &mut chunk)?;
                chunk_bytes = 0;
                seal(std::mem::replace(&mut mem, new_mem()))?;
                mem_bytes = 0;
            }
            mem_bytes += footprint;
            chunk_bytes += rec.len();
            chunk.push((b, group));
            if chunk_bytes >= REPLAY_CHUNK_BYTES {
                insert_replayed(&mem, &mut chunk)?;
                chunk_bytes = 0;
            }
            last_seq = last_seq.max(last);
        }
        insert_replayed(&mem, &mut chunk)?;
        if !mem.is_empty() {
            seal(mem)?;
        }
        Ok((last_seq, from_tail))
    }
}

/// The ring a new WAL tail gets: room for the records of two memtables (one sealed and
/// being flushed, one filling) and some to spare, so that writes without sync keep their
/// groups deferred (`wal/writer.rs`) and their pages never reach the device. A record in the
/// tail takes fewer bytes than its memtable entry (no skiplist node), so two memtables'
/// bytes hold two memtables' records. The memtables are the largest the store may fill: the
/// tuner's largest batch where it turns the batch. A ring of two write buffers under a
/// tuner that had grown the batch to 364-391 MiB was full all the time, and every record's WAL
/// page went to the device: 12.6 GB in a 300 s run of fillrandom on the hard-disk-class
/// device, a third of its bandwidth (BENCHMARKS.md). Its storage is taken as records arrive
/// (`wal::tail::CHUNK_BYTES`), not for the whole ring.
fn wal_tail_ring_bytes(opts: &Options) -> u64 {
    2 * opts.largest_memtable_bytes() + (16 << 20)
}

/// Bytes of replayed records inserted into a memtable at once, by [`replay_threads`] threads.
const REPLAY_CHUNK_BYTES: usize = 8 << 20;

/// Threads that insert a chunk of replayed records: the machine's cores, at most 4. Replay is
/// mostly skiplist inserts (38% of a 1 GiB WAL's recovery, `perf`), which the skiplist takes
/// concurrently, in any order: each op carries its own sequence number.
fn replay_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(4)
}

/// Inserts the chunk's records into `mem`, split over [`replay_threads`] threads, and empties
/// it.
fn insert_replayed(
    mem: &Memtable,
    chunk: &mut Vec<(batch::DecodedBatch<'_>, Option<&RecoveredGroup>)>,
) -> Result<()> {
    let insert = |part: &[(batch::DecodedBatch<'_>, Option<&RecoveredGroup>)]| -> Result<()> {
        for (b, group) in part {
            for (j, op) in b.ops.iter().enumerate() {
                mem.apply(op, b.first_seq + j as u64).map_err(|_| {
                    let source = match group {
                        Some(g) => format!("a WAL record of group {}", g.group),
                        None => "a WAL tail record".to_string(),
                    };
                    Error::corruption(format!("{source} does not fit a memtable"), 0)
                })?;
            }
        }
        Ok(())
    };
    let threads = replay_threads();
    let result = if threads < 2 || chunk.len() < 2 * threads {
        insert(chunk)
    } else {
        let per = chunk.len().div_ceil(threads);
        std::thread::scope(|scope| {
            let workers: Vec<_> =
                chunk.chunks(per).skip(1).map(|part| scope.spawn(move || insert(part))).collect();
            let first = insert(&chunk[..per.min(chunk.len())]);
            workers.into_iter().fold(first, |acc, w| {
                let r = w.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
                acc.and(r)
            })
        })
    };
    chunk.clear();
    result
}

/// The prefix of every version-log payload of the hash engine (`shale-hash`, its `meta.rs`):
/// a volume holding one is that engine's store.
const HASH_ENGINE_MAGIC: &[u8] = b"SHHASH";

/// Refuses a volume of another engine written before format 3 put the engine in the header
/// (the space layer refuses a newer one before recovery): one whose version log holds the
/// hash engine's payloads, or that has no WAL area (the lsm engine always gives its volumes
/// one; the hash and table engines never do).
///
/// # Errors
/// [`Error::NotLsmStore`] saying what the volume holds.
pub(crate) fn refuse_other_engine(
    versions: &shale_space::Versions,
    layout: &shale_space::Layout,
) -> Result<()> {
    let payloads =
        std::iter::once(&versions.base.engine).chain(versions.deltas.iter().map(|d| &d.engine));
    if payloads.into_iter().any(|p| p.starts_with(HASH_ENGINE_MAGIC)) {
        return Err(Error::NotLsmStore(
            "the volume holds a hash-engine store (shale-hash); nothing was written to it".into(),
        ));
    }
    if layout.wal_bytes == 0 {
        return Err(Error::NotLsmStore(
            "the volume has no WAL area (a hash-engine or table store?); nothing was written to it"
                .into(),
        ));
    }
    Ok(())
}

/// Whether the writers of a large group insert their own ops in parallel
/// ([`super::cores_to_overlap_groups`]: where there are cores to spare), unless a test says.
fn parallel_group_inserts(opts: &Options) -> bool {
    #[cfg(feature = "failpoints")]
    if let Some(parallel) = opts.parallel_group_inserts {
        return parallel;
    }
    let _ = opts;
    super::cores_to_overlap_groups()
}

/// Whether groups of unsynced writes overlap ([`super::cores_to_overlap_groups`]), unless a
/// test says.
fn overlap_write_groups(opts: &Options) -> bool {
    #[cfg(feature = "failpoints")]
    if let Some(overlap) = opts.overlap_write_groups {
        return overlap;
    }
    let _ = opts;
    super::cores_to_overlap_groups()
}

/// Says at open what the memory limit did to the write buffer: lowered it (the owner's
/// write buffer would not fit), or could not lower it far enough (the block cache, or the
/// owner's floor, takes the store's share already).
fn warn_of_memory(opts: &Options, limit: Option<u64>, write_buffer: usize) {
    let Some(limit) = limit else { return };
    let memtables = opts.max_write_buffer_number;
    let tail = if opts.keeps_wal_tail() { " and their WAL tail" } else { "" };
    let cap = opts.memory_cap(limit, 0);
    if (write_buffer as u64) > cap {
        log::warn!(
            "the block cache ({} MiB) and {memtables} memtables of {} MiB{tail} take more than \
             half the memory limit of {} MiB (Options::memory_limit): a smaller block cache \
             keeps the store within it",
            opts.block_cache_bytes >> 20,
            write_buffer >> 20,
            limit >> 20
        );
    } else if write_buffer < opts.write_buffer_bytes {
        log::info!(
            "write buffer {} MiB, lowered from {} MiB: the block cache ({} MiB) and \
             {memtables} memtables{tail} within half the memory limit of {} MiB \
             (Options::memory_limit)",
            write_buffer >> 20,
            opts.write_buffer_bytes >> 20,
            opts.block_cache_bytes >> 20,
            limit >> 20
        );
    }
}
