//! Where a write group's time goes: the WAL append, the whole group as its leader sees it,
//! and the hand-off of the leadership to the next leader (the wake-up of a sleeping thread,
//! which on a 2-vCPU virtual machine is not free). `Stats` reports them, so that the cost of
//! group commit can be measured rather than guessed (issue #15, docs/lsm.md, "The parallel
//! WAL").
//!
//! Sampled: reading the clock on every write and group cost 6% of fillrandom's time (`perf`:
//! `clock_gettime` and `Instant::now`), so one group in [`SAMPLE`] is timed, one append in
//! [`SAMPLE`], and one write in [`SAMPLE`] of each thread looks for a hand-off. The group and
//! append sums are scaled up by [`SAMPLE`] (estimates); hand-offs are reported as the ones
//! seen, with their time, whose ratio is the average hand-off.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// One in this many groups, appends and writes (per thread) is timed.
pub(super) const SAMPLE: u64 = 16;

/// The counters, summed over the sampled groups since open.
pub(super) struct WriteTimings {
    base: Instant,
    /// When a sampled leader last passed the leadership on, in ns since `base`.
    passed_at_ns: AtomicU64,
    groups: AtomicU64,
    appends: AtomicU64,
    handoffs: AtomicU64,
    handoff_ns: AtomicU64,
    group_ns: AtomicU64,
    append_ns: AtomicU64,
}

/// The sums in microseconds: hand-offs seen and their time, estimated group and append time.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct TimingTotals {
    pub handoffs: u64,
    pub handoff_micros: u64,
    pub group_micros: u64,
    pub append_micros: u64,
}

thread_local! {
    /// This thread's writes, for sampling them.
    static WRITES: Cell<u64> = const { Cell::new(0) };
}

impl WriteTimings {
    pub fn new() -> WriteTimings {
        WriteTimings {
            base: Instant::now(),
            passed_at_ns: AtomicU64::new(0),
            groups: AtomicU64::new(0),
            appends: AtomicU64::new(0),
            handoffs: AtomicU64::new(0),
            handoff_ns: AtomicU64::new(0),
            group_ns: AtomicU64::new(0),
            append_ns: AtomicU64::new(0),
        }
    }

    fn now_ns(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    /// A writer is about to queue: for a sampled write, the time, to pass to
    /// [`WriteTimings::became_leader`].
    pub fn joining(&self) -> Option<u64> {
        let n = WRITES.with(|w| {
            let n = w.get();
            w.set(n + 1);
            n
        });
        (n % SAMPLE == 0).then(|| self.now_ns())
    }

    /// The writer that started queueing at `joined_ns` leads: if a sampled leader passed the
    /// leadership on since, it was woken for it, and the time since the pass is a hand-off.
    pub fn became_leader(&self, joined_ns: Option<u64>) {
        let Some(joined_ns) = joined_ns else { return };
        let passed = self.passed_at_ns.load(Ordering::Relaxed);
        if passed > joined_ns {
            self.handoffs.fetch_add(1, Ordering::Relaxed);
            self.handoff_ns.fetch_add(self.now_ns().saturating_sub(passed), Ordering::Relaxed);
        }
    }

    /// A leader starts a group: for a sampled group, the time, to pass to
    /// [`WriteTimings::passing`].
    pub fn leading(&self) -> Option<u64> {
        let n = self.groups.fetch_add(1, Ordering::Relaxed);
        (n % SAMPLE == 0).then(|| self.now_ns())
    }

    /// A leader passes the leadership on after leading since `led_since`.
    pub fn passing(&self, led_since: Option<u64>) {
        let Some(led_since) = led_since else { return };
        let now = self.now_ns();
        self.group_ns.fetch_add(now.saturating_sub(led_since), Ordering::Relaxed);
        self.passed_at_ns.store(now, Ordering::Relaxed);
    }

    /// A WAL append (or a pipelined group's page writes) starts: for a sampled one, the time,
    /// to pass to [`WriteTimings::appended`].
    pub fn appending(&self) -> Option<Instant> {
        let n = self.appends.fetch_add(1, Ordering::Relaxed);
        (n % SAMPLE == 0).then(Instant::now)
    }

    /// A WAL append that started at `since` is done.
    pub fn appended(&self, since: Option<Instant>) {
        if let Some(since) = since {
            self.append_ns.fetch_add(since.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
    }

    pub fn totals(&self) -> TimingTotals {
        let micros = |a: &AtomicU64| a.load(Ordering::Relaxed) / 1000;
        TimingTotals {
            handoffs: self.handoffs.load(Ordering::Relaxed),
            handoff_micros: micros(&self.handoff_ns),
            group_micros: micros(&self.group_ns) * SAMPLE,
            append_micros: micros(&self.append_ns) * SAMPLE,
        }
    }
}
