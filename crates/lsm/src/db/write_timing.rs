//! Where a write group's time goes: the WAL append, the whole group as its leader sees it,
//! and the hand-off of the leadership to the next leader (the wake-up of a sleeping thread,
//! which on a 2-vCPU virtual machine is not free). `Stats` reports the sums, so that the
//! cost of group commit can be measured rather than guessed (issue #15, docs/lsm.md, "The
//! parallel WAL").

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The counters, summed over groups since open.
pub(super) struct WriteTimings {
    base: Instant,
    /// When a leader last passed the leadership on, in ns since `base`.
    passed_at_ns: AtomicU64,
    handoffs: AtomicU64,
    handoff_ns: AtomicU64,
    group_ns: AtomicU64,
    append_ns: AtomicU64,
}

/// The sums in microseconds: hand-offs counted, their time, group time, append time.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct TimingTotals {
    pub handoffs: u64,
    pub handoff_micros: u64,
    pub group_micros: u64,
    pub append_micros: u64,
}

impl WriteTimings {
    pub fn new() -> WriteTimings {
        WriteTimings {
            base: Instant::now(),
            passed_at_ns: AtomicU64::new(0),
            handoffs: AtomicU64::new(0),
            handoff_ns: AtomicU64::new(0),
            group_ns: AtomicU64::new(0),
            append_ns: AtomicU64::new(0),
        }
    }

    fn now_ns(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    /// A writer is about to queue; pass the result to [`WriteTimings::became_leader`].
    pub fn joining(&self) -> u64 {
        self.now_ns()
    }

    /// The writer that started queueing at `joined_ns` leads: if a leader passed the
    /// leadership on since, it was woken for it, and the time since the pass is a hand-off.
    pub fn became_leader(&self, joined_ns: u64) {
        let passed = self.passed_at_ns.load(Ordering::Relaxed);
        if passed > joined_ns {
            self.handoffs.fetch_add(1, Ordering::Relaxed);
            self.handoff_ns.fetch_add(self.now_ns().saturating_sub(passed), Ordering::Relaxed);
        }
    }

    /// A leader passes the leadership on after leading since `led_since` (a
    /// [`WriteTimings::joining`] reading).
    pub fn passing(&self, led_since: u64) {
        let now = self.now_ns();
        self.group_ns.fetch_add(now.saturating_sub(led_since), Ordering::Relaxed);
        self.passed_at_ns.store(now, Ordering::Relaxed);
    }

    /// A WAL append (or a pipelined group's page writes) took `since` until now.
    pub fn appended(&self, since: Instant) {
        self.append_ns.fetch_add(since.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    pub fn totals(&self) -> TimingTotals {
        let micros = |a: &AtomicU64| a.load(Ordering::Relaxed) / 1000;
        TimingTotals {
            handoffs: self.handoffs.load(Ordering::Relaxed),
            handoff_micros: micros(&self.handoff_ns),
            group_micros: micros(&self.group_ns),
            append_micros: micros(&self.append_ns),
        }
    }
}
