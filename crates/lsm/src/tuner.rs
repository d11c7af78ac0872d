//! ADOC's tuner: each window, the overflow a store shows decides how many background threads
//! it runs and how large its batches are (memtable size = L0 SST size = compaction output
//! size), so that write stalls are headed off before they happen. This module is the pure
//! decision ([`decide`]: a snapshot in, an action out); `db/tuner_thread.rs` samples the
//! store and applies the action.
//!
//! Overflows (ADOC's names), detected over one window:
//! - **L0O**, L0 overflow: L0 files at or past the slowdown trigger, or rising and past half
//!   of it (L0 -> L1 compaction falls behind the flushes);
//! - **RDO**, redundancy overflow: pending compaction bytes past the soft limit, or a
//!   pending-bytes stall in the window (deep compactions fall behind);
//! - **MMO**, memory overflow: the active memtable filled while a sealed one was still
//!   unflushed, or a memtable stall in the window (flushes fall behind the writes); a stall
//!   is a stop here, not the memtable pace's waits (`memtable_pace.rs`), which head stops off.
//!
//! Rules, one action per window, the first overflow found in ADOC's priority order:
//!
//! | overflow | background threads          | batch            |
//! |----------|-----------------------------|------------------|
//! | L0O      | + 2                         | unchanged (*)    |
//! | RDO      | + 2                         | halved           |
//! | MMO      | halved                      | + one step       |
//!
//! (*) + one step when the threads cannot grow (at their cap, or ADOC-B, which does not turn
//! them); see below.
//!
//! Additive increase, multiplicative decrease, clamped to `[threads_min, threads_max]` and
//! `[batch_min, batch_max]`. ADOC-T (`TunerMode::Threads`) turns only the threads, ADOC-B
//! (`TunerMode::Batch`) only the batch.
//!
//! Where the paper is silent, decided here:
//! - a window without overflow holds both knobs (as ADOC's public code does): shrinking back
//!   on quiet windows would undo the last correction just before the next burst;
//! - one action per window (the highest-priority overflow): two knobs moved at once by
//!   different rules could cancel out (RDO halves the batch MMO grows);
//! - the batch step is the store's configured write buffer (64 MiB at the defaults, ADOC's
//!   +64 MB exactly), the floor is that size too and the cap eight times it (512 MiB at the
//!   defaults, ADOC's cap): a store configured with small memtables gets steps of its own
//!   scale, not 64 MB jumps;
//! - L0O with the threads at their cap (or under ADOC-B) grows the batch by one step. ADOC's
//!   rule then changes nothing, and on a machine with few cores the cap comes early (4
//!   threads on 2 cores): in the evaluation 210 of 300 windows were L0 overflows at the cap,
//!   with L0 parked at the slowdown trigger. The L0 trigger counts files, so a larger batch
//!   lets the same bytes sit in L0 in fewer files, and each L0 -> L1 compaction merges more
//!   new bytes per byte of L1 it rewrites (lower write amplification). Measured
//!   (BENCHMARKS.md, "ADOC with the batch grown at the thread cap"): 1.34x to 1.88x
//!   tuner-off's throughput on three device classes; on the NVMe class, without the space
//!   bound below, the store filled its volume;
//! - the batch is bounded by the space the volume has for it ([`batch_room_cap`]): L0 may
//!   hold up to the stop trigger's count of batch-sized SSTs, compacting them into L1 needs
//!   room for as much again plus the L1 it rewrites, and two memtables need room to flush.
//!   Other compactions are left out of that sum because a compaction reserves room for its
//!   outputs and one that would not fit waits for the running ones (docs/lsm.md, "Room for
//!   compactions"); the bound first counted each other thread's merge of a batch-sized SST
//!   with the SSTs below it, 105 batches at the defaults against 74 now. Each window the
//!   cap is taken from the free space of the tiers SSTs go to (a volume file counts what its
//!   file system can still give it), so as a store fills, its batch shrinks back (to no less
//!   than the configured write buffer, the size its owner chose). The bound is a worst case
//!   and costs throughput on small volumes (BENCHMARKS.md, "ADOC with its batch bounded by
//!   the volume's room": 103-281 MiB batches on 33 GiB volumes);
//! - the batch is bounded by memory too (`memory_limit::batch_memory_cap`, every window):
//!   the block cache, the index and filter blocks the SST readers hold, the memtables and
//!   their records in the WAL tail within half of `Options::memory_limit` (the host's memory
//!   cgroup limit within its RAM by default). A batch grown to 128 MiB in a 1 GiB cgroup with
//!   a 256 MiB cache got the process OOM-killed (BENCHMARKS.md, regime (c));
//! - thread bounds: at least 2 (one flush, one compaction thread: the engine's minimum), at
//!   most `threads_max` (default: twice the machine's cores, at least 4): compaction threads
//!   wait on the device as much as they compute;
//! - ADOC sets flush threads to max(1, total / 4) after each change; shale has one flush
//!   thread whatever the total (flushes commit in memtable order, docs/lsm.md), which is what
//!   that rule gives for up to 7 threads, so the rule is not applied separately.

/// Which knobs the tuner turns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TunerMode {
    /// No tuner thread.
    Off,
    /// ADOC: threads and batch size. The default: on all four device classes of ADOC's
    /// evaluation it beat the tuner off on throughput and stall time (BENCHMARKS.md). Its
    /// cost is memory: memtables grow up to `TunerOptions::batch_max` (eight times the write
    /// buffer, 512 MiB at the defaults) under write pressure, as far as `Options::memory_limit`
    /// leaves room (the host's memory cgroup limit by default); set `batch_max` to bound them
    /// further, or `Off` for RocksDB's fixed behaviour. Space is bounded by the tuner itself: the batch
    /// stays within what the volume's free space leaves safe (the tuner's `batch_room_cap`).
    #[default]
    Full,
    /// ADOC-T: the number of background threads only.
    Threads,
    /// ADOC-B: the batch size only.
    Batch,
}

impl TunerMode {
    /// The mode named `name`: off, adoc, adoc-t, adoc-b.
    pub fn parse(name: &str) -> Option<TunerMode> {
        match name.to_ascii_lowercase().as_str() {
            "off" | "none" => Some(TunerMode::Off),
            "adoc" | "full" => Some(TunerMode::Full),
            "adoc-t" | "threads" => Some(TunerMode::Threads),
            "adoc-b" | "batch" => Some(TunerMode::Batch),
            _ => None,
        }
    }

    /// The name [`TunerMode::parse`] reads.
    pub fn name(self) -> &'static str {
        match self {
            TunerMode::Off => "off",
            TunerMode::Full => "adoc",
            TunerMode::Threads => "adoc-t",
            TunerMode::Batch => "adoc-b",
        }
    }
}

/// How the tuner runs (`Options::tuner`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TunerOptions {
    /// Which knobs it turns; `Off` runs no tuner.
    pub mode: TunerMode,
    /// Length of a window, milliseconds (ADOC: one second).
    pub window_ms: u64,
    /// Most background threads (0: twice the machine's cores, at least 4).
    pub threads_max: usize,
    /// Largest batch, bytes (0: eight times `Options::write_buffer_bytes`).
    pub batch_max: u64,
}

impl TunerOptions {
    /// The largest batch for a store whose write buffer is `write_buffer_bytes`: `batch_max`,
    /// or eight times the write buffer within the largest write buffer a store takes.
    pub fn batch_max_for(&self, write_buffer_bytes: u64) -> u64 {
        if self.batch_max > 0 {
            self.batch_max
        } else {
            let max = crate::options::WRITE_BUFFER_BYTES_MAX as u64;
            write_buffer_bytes.saturating_mul(8).min(max.max(write_buffer_bytes))
        }
    }
}

impl Default for TunerOptions {
    fn default() -> TunerOptions {
        TunerOptions { mode: TunerMode::Full, window_ms: 1000, threads_max: 0, batch_max: 0 }
    }
}

/// What the tuner saw in one window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// L0 files now, and at the end of the previous window.
    pub l0_files: usize,
    pub l0_files_before: usize,
    /// The L0 slowdown trigger (`Options::level0_slowdown_writes_trigger`).
    pub l0_slowdown_trigger: usize,
    /// Pending compaction bytes now.
    pub pending_compaction_bytes: u64,
    /// The soft limit on them (`Options::soft_pending_compaction_bytes_limit`).
    pub pending_soft_limit: u64,
    /// Pending-bytes stalls (slowdown or stop) in the window.
    pub pending_stalls: u64,
    /// Memtables that filled while a sealed one was unflushed, in the window.
    pub memory_overflows: u64,
    /// Memtable stalls in the window.
    pub memtable_stalls: u64,
    /// Background threads now (`Db::set_background_jobs`).
    pub threads: usize,
    /// Batch bytes now (memtable size).
    pub batch: u64,
}

/// An overflow the tuner reacts to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overflow {
    /// L0 overflow.
    L0,
    /// Redundancy overflow (pending compaction bytes).
    Redundancy,
    /// Memory overflow (memtables).
    Memory,
}

impl Overflow {
    /// ADOC's abbreviation.
    pub fn name(self) -> &'static str {
        match self {
            Overflow::L0 => "L0O",
            Overflow::Redundancy => "RDO",
            Overflow::Memory => "MMO",
        }
    }
}

/// The knobs' bounds for one store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    pub threads_min: usize,
    pub threads_max: usize,
    /// Batch floor, and the step of an increase.
    pub batch_min: u64,
    pub batch_max: u64,
}

/// What to do after one window: the overflow found (if any) and the knobs' new settings
/// (equal to the snapshot's when nothing changes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Action {
    pub overflow: Option<Overflow>,
    pub threads: usize,
    pub batch: u64,
}

/// The largest batch a volume with `free` bytes of room leaves safe, with `l0_bytes` and
/// `l1_bytes` in L0 and L1 now (see the module comment). The worst case a batch drives: L0
/// filled to `stop_trigger` batch-sized SSTs, whose compaction into L1 writes them and the
/// L1 it overlaps again while its inputs are still held, beside room for two memtables to
/// flush (the active one and one sealed). Other compactions need no room of their own in
/// this sum: a compaction whose outputs would not fit beside the running ones' waits for
/// them (`Inner::room_for_compaction`). L0's bytes now count as room (they are part of that
/// worst case), L1's do not.
pub fn batch_room_cap(free: u64, l0_bytes: u64, l1_bytes: u64, stop_trigger: usize) -> u64 {
    let batches = 2 * stop_trigger.max(1) as u64 + 2;
    free.saturating_add(l0_bytes).saturating_sub(l1_bytes) / batches
}

/// The overflow of highest priority in `s`, if any.
pub fn detect(s: &Snapshot) -> Option<Overflow> {
    let trigger = s.l0_slowdown_trigger.max(1);
    let l0_rising = s.l0_files > s.l0_files_before && 2 * s.l0_files >= trigger;
    if s.l0_files >= trigger || l0_rising {
        return Some(Overflow::L0);
    }
    if s.pending_compaction_bytes > s.pending_soft_limit || s.pending_stalls > 0 {
        return Some(Overflow::Redundancy);
    }
    if s.memory_overflows > 0 || s.memtable_stalls > 0 {
        return Some(Overflow::Memory);
    }
    None
}

/// ADOC's rule for `s` under `mode` within `b` (see the module comment).
pub fn decide(s: &Snapshot, mode: TunerMode, b: &Bounds) -> Action {
    let overflow = if mode == TunerMode::Off { None } else { detect(s) };
    // The threads cannot grow: at their cap, or a mode that does not turn them.
    let threads_stuck = mode == TunerMode::Batch || s.threads >= b.threads_max.max(b.threads_min);
    let (threads, batch) = match overflow {
        None => (s.threads, s.batch),
        Some(Overflow::L0) if threads_stuck => (s.threads, s.batch.saturating_add(b.batch_min)),
        Some(Overflow::L0) => (s.threads + 2, s.batch),
        Some(Overflow::Redundancy) => (s.threads + 2, s.batch / 2),
        Some(Overflow::Memory) => (s.threads / 2, s.batch.saturating_add(b.batch_min)),
    };
    let threads = match mode {
        TunerMode::Full | TunerMode::Threads => threads,
        _ => s.threads,
    };
    let batch = match mode {
        TunerMode::Full | TunerMode::Batch => batch,
        _ => s.batch,
    };
    Action {
        overflow,
        threads: threads.clamp(b.threads_min, b.threads_max.max(b.threads_min)),
        batch: batch.clamp(b.batch_min, b.batch_max.max(b.batch_min)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1 << 20;

    fn bounds() -> Bounds {
        Bounds { threads_min: 2, threads_max: 8, batch_min: 64 * MB, batch_max: 512 * MB }
    }

    fn quiet() -> Snapshot {
        Snapshot {
            l0_files: 2,
            l0_files_before: 2,
            l0_slowdown_trigger: 20,
            pending_compaction_bytes: 0,
            pending_soft_limit: 64 << 30,
            threads: 4,
            batch: 128 * MB,
            ..Snapshot::default()
        }
    }

    #[test]
    fn each_overflow_is_detected() {
        assert_eq!(detect(&quiet()), None);
        assert_eq!(detect(&Snapshot { l0_files: 20, ..quiet() }), Some(Overflow::L0));
        // Rising and past half the trigger; rising below half is not yet an overflow.
        let rising = Snapshot { l0_files: 10, l0_files_before: 8, ..quiet() };
        assert_eq!(detect(&rising), Some(Overflow::L0));
        assert_eq!(detect(&Snapshot { l0_files: 9, l0_files_before: 8, ..quiet() }), None);
        assert_eq!(detect(&Snapshot { l0_files: 12, l0_files_before: 12, ..quiet() }), None);
        let pending = Snapshot { pending_compaction_bytes: (64 << 30) + 1, ..quiet() };
        assert_eq!(detect(&pending), Some(Overflow::Redundancy));
        assert_eq!(detect(&Snapshot { pending_stalls: 1, ..quiet() }), Some(Overflow::Redundancy));
        assert_eq!(detect(&Snapshot { memory_overflows: 1, ..quiet() }), Some(Overflow::Memory));
        assert_eq!(detect(&Snapshot { memtable_stalls: 3, ..quiet() }), Some(Overflow::Memory));
    }

    #[test]
    fn priority_is_l0_then_redundancy_then_memory() {
        let all = Snapshot { l0_files: 25, pending_stalls: 1, memory_overflows: 1, ..quiet() };
        assert_eq!(detect(&all), Some(Overflow::L0));
        let two = Snapshot { pending_stalls: 1, memory_overflows: 1, ..quiet() };
        assert_eq!(detect(&two), Some(Overflow::Redundancy));
    }

    #[test]
    fn aimd_arithmetic() {
        let b = bounds();
        let l0 = decide(&Snapshot { l0_files: 20, ..quiet() }, TunerMode::Full, &b);
        assert_eq!((l0.threads, l0.batch), (6, 128 * MB), "L0O: +2 threads");
        let rdo = decide(&Snapshot { pending_stalls: 1, ..quiet() }, TunerMode::Full, &b);
        assert_eq!((rdo.threads, rdo.batch), (6, 64 * MB), "RDO: +2 threads, half the batch");
        let mmo = decide(&Snapshot { memory_overflows: 1, ..quiet() }, TunerMode::Full, &b);
        assert_eq!((mmo.threads, mmo.batch), (2, 192 * MB), "MMO: half the threads, +64 MB");
        let hold = decide(&quiet(), TunerMode::Full, &b);
        assert_eq!((hold.overflow, hold.threads, hold.batch), (None, 4, 128 * MB), "quiet");
    }

    #[test]
    fn clamps() {
        let b = bounds();
        let top = Snapshot { l0_files: 30, threads: 8, ..quiet() };
        assert_eq!(decide(&top, TunerMode::Full, &b).threads, 8, "thread cap");
        let full = Snapshot { l0_files: 30, threads: 8, batch: 500 * MB, ..quiet() };
        assert_eq!(decide(&full, TunerMode::Full, &b).batch, 512 * MB, "batch cap under L0O");
        let floor = Snapshot { memory_overflows: 1, threads: 3, ..quiet() };
        assert_eq!(decide(&floor, TunerMode::Full, &b).threads, 2, "thread floor");
        let big = Snapshot { memory_overflows: 1, batch: 500 * MB, ..quiet() };
        assert_eq!(decide(&big, TunerMode::Full, &b).batch, 512 * MB, "batch cap");
        let small = Snapshot { pending_stalls: 1, batch: 64 * MB, ..quiet() };
        assert_eq!(decide(&small, TunerMode::Full, &b).batch, 64 * MB, "batch floor");
    }

    #[test]
    fn l0_overflow_with_the_threads_stuck_grows_the_batch() {
        let b = bounds();
        // Below the cap: the threads grow, the batch holds (ADOC's rule).
        let l0 = Snapshot { l0_files: 20, threads: 6, ..quiet() };
        let a = decide(&l0, TunerMode::Full, &b);
        assert_eq!((a.overflow, a.threads, a.batch), (Some(Overflow::L0), 8, 128 * MB));
        // At the cap: the batch grows one step instead.
        let capped = Snapshot { threads: 8, ..l0 };
        let a = decide(&capped, TunerMode::Full, &b);
        assert_eq!((a.threads, a.batch), (8, 192 * MB));
        // ADOC-B never turns the threads, so L0O grows its batch at any thread count.
        let a = decide(&l0, TunerMode::Batch, &b);
        assert_eq!((a.threads, a.batch), (6, 192 * MB));
        // ADOC-T never turns the batch, even at the cap.
        let a = decide(&capped, TunerMode::Threads, &b);
        assert_eq!((a.threads, a.batch), (8, 128 * MB));
    }

    #[test]
    fn the_batch_is_bounded_by_the_room_the_volume_has() {
        const GB: u64 = 1 << 30;
        // 2 x 36 batches for L0 and its compaction, 2 for the memtables: 74.
        assert_eq!(batch_room_cap(74 * GB, 0, 0, 36), GB);
        // L0's bytes are part of the worst case, L1's must stay beside it.
        assert_eq!(batch_room_cap(69 * GB, 5 * GB, 0, 36), GB);
        assert_eq!(batch_room_cap(79 * GB, 0, 5 * GB, 36), GB);
        // A lower stop trigger, a larger batch; a full volume, none.
        assert_eq!(batch_room_cap(74 * GB, 0, 0, 18), 74 * GB / 38);
        assert_eq!(batch_room_cap(GB, 0, 2 * GB, 36), 0);
        // decide shrinks a batch past a lowered cap at once, quiet window or not, and no
        // lower than the floor.
        let b = Bounds { batch_max: 100 * MB, ..bounds() };
        let a = decide(&Snapshot { batch: 256 * MB, ..quiet() }, TunerMode::Full, &b);
        assert_eq!((a.overflow, a.batch), (None, 100 * MB));
        let b = Bounds { batch_max: 0, ..bounds() };
        let a = decide(&Snapshot { memory_overflows: 1, ..quiet() }, TunerMode::Full, &b);
        assert_eq!(a.batch, 64 * MB);
    }

    #[test]
    fn ablations_turn_one_knob() {
        let b = bounds();
        let rdo = Snapshot { pending_stalls: 1, ..quiet() };
        let t = decide(&rdo, TunerMode::Threads, &b);
        assert_eq!((t.overflow, t.threads, t.batch), (Some(Overflow::Redundancy), 6, 128 * MB));
        let bb = decide(&rdo, TunerMode::Batch, &b);
        assert_eq!((bb.threads, bb.batch), (4, 64 * MB));
        let off = decide(&rdo, TunerMode::Off, &b);
        assert_eq!((off.overflow, off.threads, off.batch), (None, 4, 128 * MB));
        for m in [TunerMode::Off, TunerMode::Full, TunerMode::Threads, TunerMode::Batch] {
            assert_eq!(TunerMode::parse(m.name()), Some(m));
        }
    }
}
