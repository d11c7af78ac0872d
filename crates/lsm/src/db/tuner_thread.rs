//! The tuner thread: every window it samples the store, asks `tuner::decide` what to do and
//! turns the knobs (`Inner::resize_pool`, the write buffer and target file sizes). It runs
//! only on a writable store with `Options::tuner.mode` other than `Off`, stops with the other
//! background threads, and stops tuning (without stopping the store further) once the store
//! has stopped (P5).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::error::Result;
use crate::level_targets::LevelTargets;
use crate::tuner::{Action, Bounds, Overflow, Snapshot, TunerMode, decide};

use super::{Inner, level_sizes};

/// What the tuner did since open.
#[derive(Debug, Default)]
pub(super) struct TunerState {
    /// Windows in which each overflow was found: L0O, RDO, MMO.
    overflows: [AtomicU64; 3],
    /// Windows the tuner looked at.
    windows: AtomicU64,
    /// The last window's action, for the timeline.
    last: Mutex<Option<Action>>,
    /// The last window's cap on the batch (the bounds' cap within `tuner::batch_room_cap`
    /// and `memory_limit::batch_memory_cap`).
    batch_max: AtomicU64,
    /// Whether the tuner thread runs: set before it starts, cleared when it ends, however
    /// it ends (shutdown, a stopped store, a knob that could not be turned, a panic).
    running: AtomicBool,
}

impl TunerState {
    /// Windows with each overflow (L0O, RDO, MMO), and windows in all.
    pub(super) fn counts(&self) -> ([u64; 3], u64) {
        let o = |i: usize| self.overflows[i].load(Ordering::Relaxed);
        ([o(0), o(1), o(2)], self.windows.load(Ordering::Relaxed))
    }

    /// The last window's action.
    pub(super) fn last(&self) -> Option<Action> {
        *self.last.lock()
    }

    /// The last window's cap on the batch (0 before the first window, or without a tuner).
    pub(super) fn batch_max(&self) -> u64 {
        self.batch_max.load(Ordering::Relaxed)
    }

    /// Whether the tuner thread runs. Once it reads false the window counts change no more
    /// (the thread's last count happens before it clears the flag).
    pub(super) fn running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }
}

/// Clears [`TunerState::running`] when dropped: at the end of the tuner thread, unwinding
/// included.
struct Ended(Arc<Inner>);

impl Drop for Ended {
    fn drop(&mut self) {
        self.0.tuner.running.store(false, Ordering::Release);
    }
}

/// What the previous window left, to take differences from.
#[derive(Clone, Copy, Default)]
struct Previous {
    l0_files: usize,
    memory_overflows: u64,
    memtable_stalls: u64,
    pending_stalls: u64,
}

impl Inner {
    /// The knobs' bounds for this store (`tuner.rs`'s module comment).
    fn tuner_bounds(&self) -> Bounds {
        let t = &self.opts.tuner;
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads_max = if t.threads_max > 0 { t.threads_max } else { (2 * cores).max(4) };
        // The write buffer within the memory limit (`Options::write_buffer_within`); a store
        // whose cache leaves no room for it was warned of at open.
        let base = self.opened_write_buffer_bytes;
        // No larger than a WAL group holds: a full group seals its memtable whatever the
        // batch says (a volume made without the tuner, or on a small block device).
        let l = self.volume.layout();
        let held = crate::wal::WalLayout::new(l.wal_offset, l.wal_bytes, self.opts.wal_groups())
            .map_or(base, |w| crate::options::Options::batch_held_by_wal_group(w.group_bytes()));
        let batch_max = t.batch_max_for(base).min(held).max(base);
        Bounds {
            threads_min: 2,
            threads_max: threads_max.min(crate::options::BACKGROUND_JOBS_MAX),
            batch_min: base,
            batch_max,
        }
    }

    /// Free bytes on the tiers SSTs go to (`Volume::tier_room`), `None` where a tier's room
    /// has no known bound.
    fn sst_room(&self) -> Option<u64> {
        self.volume
            .tiers()
            .iter()
            .try_fold(0u64, |sum, &t| self.volume.tier_room(t).map(|r| sum.saturating_add(r)))
    }

    /// `bounds` with the batch capped by the volume's room (`tuner::batch_room_cap`), for
    /// L0 and L1 holding `sizes[0]` and `sizes[1]` bytes.
    fn bounds_within_room(&self, bounds: &Bounds, sizes: &[u64]) -> Bounds {
        let Some(free) = self.sst_room() else { return *bounds };
        let cap = crate::tuner::batch_room_cap(
            free,
            sizes[0],
            sizes[1],
            self.opts.level0_stop_writes_trigger,
        );
        Bounds { batch_max: bounds.batch_max.min(cap).max(bounds.batch_min), ..*bounds }
    }

    /// `bounds` with the batch capped by the memory limit (`memory_limit::batch_memory_cap`):
    /// the block cache and the index and filter blocks the SST readers hold (`held_meta`
    /// bytes, which grow with the data) come first, the memtables and their WAL tail get what
    /// is left of the store's share.
    fn bounds_within_memory(&self, bounds: &Bounds, held_meta: u64) -> Bounds {
        let limit = self.memory_limit;
        if limit == 0 {
            return *bounds;
        }
        let cap = self.opts.memory_cap(limit, held_meta);
        Bounds { batch_max: bounds.batch_max.min(cap).max(bounds.batch_min), ..*bounds }
    }

    /// The store as the tuner sees it now, with the window's differences from `prev`, and
    /// `bounds` within the volume's room and the memory limit now.
    fn tuner_snapshot(&self, prev: &mut Previous, bounds: &Bounds) -> (Snapshot, Bounds) {
        let stalls = self.stalls.snapshot();
        let memory_overflows = self.memory_overflows.load(Ordering::Relaxed);
        // Stops only: the memtable pace's waits (counted with them in `stalls`) are how a
        // store heads a stop off, and would read as an overflow in every window of a flush.
        let memtable_stalls = self.memtable_stops.load(Ordering::Relaxed);
        let pending_stalls = stalls.pending_slowdown.count + stalls.pending_stop.count;
        let st = self.state.lock();
        let sizes = level_sizes(&st.version);
        let held_meta = st.version.held_index_and_filter_bytes();
        let targets = LevelTargets::compute(&self.opts, &sizes);
        let s = Snapshot {
            l0_files: st.version.levels[0].len(),
            l0_files_before: prev.l0_files,
            l0_slowdown_trigger: self.opts.level0_slowdown_writes_trigger,
            pending_compaction_bytes: targets.excess_bytes(&sizes),
            pending_soft_limit: self.opts.soft_pending_compaction_bytes_limit,
            pending_stalls: pending_stalls - prev.pending_stalls,
            memory_overflows: memory_overflows - prev.memory_overflows,
            memtable_stalls: memtable_stalls - prev.memtable_stalls,
            threads: st.pool.background_jobs(),
            batch: self.write_buffer_bytes() as u64,
        };
        drop(st);
        *prev =
            Previous { l0_files: s.l0_files, memory_overflows, memtable_stalls, pending_stalls };
        (s, self.bounds_within_memory(&self.bounds_within_room(bounds, &sizes), held_meta))
    }

    /// Turns the knobs to `a`: threads through the pool, the batch as the memtable size and
    /// the compaction output size (ADOC's batch is both).
    fn apply_tuning(self: &Arc<Self>, s: &Snapshot, a: &Action) -> Result<()> {
        if a.threads != s.threads {
            self.resize_pool(a.threads)?;
        }
        if a.batch != s.batch {
            self.write_buffer_bytes.store(a.batch, Ordering::Relaxed);
            let slot = self.volume.layout().slot_bytes;
            self.target_file_bytes.store(a.batch.max(slot), Ordering::Relaxed);
        }
        Ok(())
    }

    /// The tuner thread's loop: one window at a time until shutdown, or until the store
    /// stops or a knob cannot be turned.
    fn tuner_loop(self: &Arc<Self>) {
        let window = Duration::from_millis(self.opts.tuner.window_ms);
        let bounds = self.tuner_bounds();
        let mode = self.opts.tuner.mode;
        let mut prev = Previous::default();
        self.tuner_snapshot(&mut prev, &bounds);
        let mut due = Instant::now() + window;
        loop {
            {
                let mut st = self.state.lock();
                while !st.shutting_down && Instant::now() < due {
                    // Woken by every notification: only a due window or shutdown acts.
                    self.cv.wait_for(&mut st, due.saturating_duration_since(Instant::now()));
                }
                if st.shutting_down || st.stopped.is_some() {
                    return;
                }
            }
            due += window;
            let (s, within) = self.tuner_snapshot(&mut prev, &bounds);
            self.tuner.batch_max.store(within.batch_max, Ordering::Relaxed);
            let a = decide(&s, mode, &within);
            self.tuner.windows.fetch_add(1, Ordering::Relaxed);
            if let Some(o) = a.overflow {
                let i = match o {
                    Overflow::L0 => 0,
                    Overflow::Redundancy => 1,
                    Overflow::Memory => 2,
                };
                self.tuner.overflows[i].fetch_add(1, Ordering::Relaxed);
            }
            *self.tuner.last.lock() = Some(a);
            if let Err(e) = self.apply_tuning(&s, &a) {
                log::warn!("the tuner stops: {}", shale_io::Chain(&e));
                return;
            }
        }
    }
}

/// Starts the tuner thread of a writable store whose options ask for one.
pub(super) fn start(inner: &Arc<Inner>) -> Result<Option<std::thread::JoinHandle<()>>> {
    if inner.read_only || inner.opts.tuner.mode == TunerMode::Off {
        return Ok(None);
    }
    inner.tuner.running.store(true, Ordering::Release);
    let spawned = super::pool::spawn_named(inner, "shale-tuner", |inner| {
        let ended = Ended(inner);
        ended.0.tuner_loop();
    });
    if spawned.is_err() {
        inner.tuner.running.store(false, Ordering::Release);
    }
    spawned.map(Some)
}
