//! The write controller: when writes must wait or slow down, from RocksDB's stall conditions,
//! and how much a slowed-down write waits.
//!
//! [`pressure`] is a pure function of the store's shape, so the conditions are tested exactly
//! and a tuner can ask the same question the write path does. [`DelayedWrites`] paces writes
//! under slowdown pressure to a byte rate, as RocksDB's delayed write rate does: a fixed sleep
//! per write group (shale's first design, 1 ms) holds a lone writer to about 900 groups a
//! second whatever the size of its writes and however little the store is behind, and the
//! store then swings between full speed and a crawl; a rate lets writes through at what the
//! background work can absorb and adapts to whether that work is catching up.

use std::cmp::Ordering;
use std::time::Duration;

use crate::options::Options;
use crate::stats::Stall;

/// What the write path must do before a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pressure {
    /// Go ahead.
    None,
    /// Delay this write a little (and count it as a stall of this kind).
    Delay(Stall),
    /// Wait until background work changes the shape (a stall of this kind).
    Stop(Stall),
}

/// The pressure on writes with `l0_files` SSTs in L0 and `pending_compaction_bytes` of
/// compaction debt. Stops win over delays; L0 over pending bytes. A limit of 0 is off.
pub fn pressure(opts: &Options, l0_files: usize, pending_compaction_bytes: u64) -> Pressure {
    let over = |limit: u64| limit > 0 && pending_compaction_bytes >= limit;
    if l0_files >= opts.level0_stop_writes_trigger {
        Pressure::Stop(Stall::L0Stop)
    } else if over(opts.hard_pending_compaction_bytes_limit) {
        Pressure::Stop(Stall::PendingStop)
    } else if l0_files >= opts.level0_slowdown_writes_trigger {
        Pressure::Delay(Stall::L0Slowdown)
    } else if over(opts.soft_pending_compaction_bytes_limit) {
        Pressure::Delay(Stall::PendingSlowdown)
    } else {
        Pressure::None
    }
}

/// Whether compactions may run in the idle I/O class (`Options::idle_compaction_io`) with
/// `l0_files` SSTs in L0 and `pending_compaction_bytes` of debt: while the store is less than
/// halfway from L0's compaction trigger to its slowdown trigger (12 files of the default 4 and
/// 20), and under half the soft pending-bytes limit. A compaction in the idle class is served
/// only when no client request waits at the scheduler, so under a steady stream of reads it
/// can fall behind; from halfway on, compactions take their share of the device again,
/// before any writer is slowed.
pub fn compactions_yield(opts: &Options, l0_files: usize, pending_compaction_bytes: u64) -> bool {
    let (trigger, slowdown) =
        (opts.level0_file_num_compaction_trigger, opts.level0_slowdown_writes_trigger);
    let l0_halfway = trigger + slowdown.saturating_sub(trigger) / 2;
    let soft = opts.soft_pending_compaction_bytes_limit;
    opts.idle_compaction_io
        && l0_files < l0_halfway
        && (soft == 0 || pending_compaction_bytes < soft / 2)
}

/// How a paced write waited ([`pace_wait`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PaceWaitKind {
    /// Nothing to wait.
    None,
    /// On the core, reading the clock.
    Spun,
    /// Asleep.
    Slept,
}

/// Waits `wait`, as the write path does for a delayed group.
///
/// A wait of at most `spin_limit` spins on the core: a sleep and its wake-up cost tens of
/// microseconds on a virtual machine, and a writer that wakes may find its core held by a
/// thread in the kernel, which a kernel built without preemption gives back only at its next
/// preemption point (100 us and more behind a compaction's reads: the scheduler's trace in
/// BENCHMARKS-history.md, "background threads at a lower CPU priority"). The write path
/// passes a limit only where the background threads are lowered
/// (`Options::background_cpu_priority`): at equal priority the scheduler takes a spinning
/// writer's core for a whole slice, and spinning made the tail worse.
///
/// A longer wait sleeps, with the calling thread's timer slack set to a microsecond for its
/// length and then put back. The kernel's default slack (50 us) lets a sleep of a few tens
/// of microseconds run several times its length, and yielding the core instead (as this did
/// first) gave it away for a whole scheduler slice on a machine busy with compactions: beside
/// four busy loops on two cores, the memtable pace's waits of about 33 us took 5 ms each
/// yielded and 114 us slept so (`tests/memtable_pace.rs`'s counters; BENCHMARKS-history.md,
/// "the slowdown's start and the memtable pace").
pub fn pace_wait(wait: Duration, spin_limit: Duration) -> PaceWaitKind {
    if wait.is_zero() {
        return PaceWaitKind::None;
    }
    if wait <= spin_limit {
        let until = std::time::Instant::now() + wait;
        while std::time::Instant::now() < until {
            std::hint::spin_loop();
        }
        return PaceWaitKind::Spun;
    }
    // SAFETY: PR_GET_TIMERSLACK and PR_SET_TIMERSLACK take and return plain integers and
    // touch only the calling thread's timer slack.
    let slack = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
    // SAFETY: as above.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, PACE_TIMER_SLACK_NS, 0, 0, 0) };
    std::thread::sleep(wait);
    if slack > 0 {
        // SAFETY: as above.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, slack as libc::c_ulong, 0, 0, 0) };
    }
    PaceWaitKind::Slept
}

/// The longest paced wait that spins where the background threads are lowered
/// ([`pace_spin_limit`]): about two slices, most of the pace's waits. Spun waits of 50 us
/// beside `SCHED_IDLE` background threads took the p99.9 of ADOC's SATA class from 115-123 to
/// 82-83 us, at the same throughput (BENCHMARKS-history.md, "background threads at a lower
/// CPU priority").
pub const PACE_SPIN_US: u64 = 50;

/// The spin limit of [`pace_wait`] for a store whose background threads run at `priority`:
/// [`PACE_SPIN_US`] where they are lowered, none at normal priority.
pub fn pace_spin_limit(priority: shale_io::CpuPriority) -> Duration {
    match priority {
        shale_io::CpuPriority::Normal => Duration::ZERO,
        shale_io::CpuPriority::Low | shale_io::CpuPriority::Idle => {
            Duration::from_micros(PACE_SPIN_US)
        }
    }
}

/// The timer slack of a paced write's sleep, nanoseconds.
const PACE_TIMER_SLACK_NS: libc::c_ulong = 1_000;

/// The slowest pace a slowdown sets (RocksDB's floor): writes are slowed, never stopped,
/// by a delay.
pub const MIN_DELAYED_WRITE_RATE: u64 = 16 << 10;
/// Credit for the rate is granted at most this often, and a delayed write waits at least
/// this long. RocksDB's slice is a millisecond, and so was shale's: then every write past
/// its credit waited a whole millisecond, whatever its bytes, and a store in slowdown had a
/// p99.9 of a millisecond at any pace (ADOC's evaluation, BENCHMARKS.md). A tenth of that
/// keeps a sleep long against its own cost (a few microseconds of system calls, and the
/// kernel's 50 us timer slack) while a delayed write waits about its own bytes at the rate.
pub const PACE_SLICE_US: u64 = 20;
/// The rate's factor when the debt did not shrink since the last shape: slow down further.
const SLOWER: f64 = 0.8;
/// Its factor when the debt shrank: the background work is catching up.
const FASTER: f64 = 1.25;
/// Its factor when the store is at or near a stop: slowing by more than a shrinking debt
/// speeds up, so that the long-run signal is to slow down.
const NEAR_STOP: f64 = 0.6;
/// Its factor on leaving the slowdown, so that the next slowdown starts less harsh.
const RECOVERED: f64 = 1.4;
/// L0 files this close to the stop trigger count as near a stop.
pub const NEAR_STOP_L0_FILES: usize = 2;
/// With `Options::delayed_write_rate` 0 (the default), a slowdown starts at this share of the
/// rate the store took writes at just before it: slower than the writes that put the store
/// behind, by no more than the first step of the adaptation. A fixed start (RocksDB's
/// 16 MiB/s) cut a store ingesting 170 MB/s to a tenth at once: on ADOC's SATA class the
/// write rate fell from about 170,000 to 13,000 writes a second for the length of an L0 -> L1
/// compaction, 8 s at a time (BENCHMARKS-history.md, "the slowdown's start and the memtable
/// pace").
const ADAPTIVE_START_SHARE: f64 = 0.8;
/// The slowest an adaptive slowdown starts (RocksDB's default rate): a store that was taking
/// few writes is not held to what it took while idle.
pub const ADAPTIVE_START_FLOOR: u64 = 16 << 20;
/// The window over which the ingest meter measures the write rate.
const INGEST_WINDOW_US: u64 = 500_000;

/// The rate writes went into the store, over the last window and the one before it: the
/// adaptive slowdown's starting point. Pure: the caller passes the time.
#[derive(Clone, Copy, Debug, Default)]
struct IngestMeter {
    /// Start of the current window, microseconds (None before the first write).
    start_us: Option<u64>,
    bytes: u64,
    /// The last full window: its bytes and its length.
    prev_bytes: u64,
    prev_us: u64,
}

impl IngestMeter {
    fn record(&mut self, now_us: u64, bytes: u64) {
        let start = *self.start_us.get_or_insert(now_us);
        let len = now_us.saturating_sub(start);
        if len >= INGEST_WINDOW_US {
            // An idle gap ends up in this window's length, so it lowers the rate as it should.
            (self.prev_bytes, self.prev_us) = (self.bytes, len);
            (self.start_us, self.bytes) = (Some(now_us), 0);
        }
        self.bytes += bytes;
    }

    /// Bytes a second over the last full window and the current one (0 with no writes).
    fn rate(&self, now_us: u64) -> u64 {
        let Some(start) = self.start_us else { return 0 };
        let us = self.prev_us + now_us.saturating_sub(start);
        if us == 0 {
            return 0;
        }
        ((self.prev_bytes + self.bytes) as u128 * 1_000_000 / us as u128) as u64
    }
}

/// Paces writes under slowdown pressure to a byte rate that adapts to the store's shape,
/// after RocksDB's `WriteController` and `SetupDelay`:
///
/// - A slowdown starts at the rate the user set (`Options::delayed_write_rate`), or, with
///   none set (0, the default), at `ADAPTIVE_START_SHARE` of the rate writes went in just
///   before it ([`DelayedWrites::note_write`] meters every group), at least
///   [`ADAPTIVE_START_FLOOR`].
/// - Each write group asks [`DelayedWrites::delay`] for its bytes. Credit accrues at the rate
///   (granted at most once a [`PACE_SLICE_US`]); a group covered by credit passes at once, one
///   that is not waits for the bytes over its credit at the rate, at least a slice. So no
///   group waits longer than its own bytes at the rate plus a slice ([`DelayedWrites::delay`]
///   says why), and over a run the bytes let through follow the rate.
/// - At each new shape (a flush or a compaction committed, [`DelayedWrites::observe`]) while
///   slowed down, the rate is multiplied by 0.6 near a stop; under the pending-bytes
///   slowdown by 0.8 if the compaction debt did not shrink, by 1.25 if it did; under L0's
///   slowdown by 0.8 if L0 grew, by 1.25 if it shrank (held if neither); within
///   [`MIN_DELAYED_WRITE_RATE`] and the rate the user set (`Options::delayed_write_rate`; no
///   cap when adaptive); on leaving the slowdown it is multiplied by 1.4 (within the same
///   cap), which matters only to a fixed start.
///
/// Pure: the caller passes the time, so tests drive it exactly.
#[derive(Clone, Debug)]
pub struct DelayedWrites {
    /// The user's rate; None when the start adapts to the ingest.
    fixed: Option<u64>,
    max_rate: u64,
    rate: u64,
    credit: u64,
    /// Microseconds at which credit may next be granted; None before the first delay.
    next_refill_us: Option<u64>,
    /// The debt at the last shape seen under pressure; None while writes go freely.
    prev_debt: Option<u64>,
    /// L0's SSTs at the last observation under pressure.
    prev_l0: usize,
    pace: SlowdownPace,
    ingest: IngestMeter,
}

/// What the slowdown's pace asked of writers since the store opened: the waits it scheduled,
/// not the time the writers then slept (which a loaded machine stretches).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
// Reports grow fields: users read them, only the engine makes them.
#[non_exhaustive]
pub struct SlowdownPace {
    /// Write groups told to wait.
    pub delayed_groups: u64,
    /// Bytes of those groups.
    pub delayed_bytes: u64,
    /// Microseconds of waiting scheduled, all groups together.
    pub scheduled_us: u64,
    /// The longest single wait scheduled, in microseconds.
    pub longest_us: u64,
    /// The longest single wait scheduled less the bound it must keep to (its group's bytes at
    /// the rate then in force, plus one pacing slice, `PACE_SLICE_US`), in microseconds; zero
    /// while every wait kept to its bound. Shown so that a pace that puts writes in the tail is seen in
    /// the store's statistics, not only in a benchmark's percentiles.
    pub longest_past_bound_us: u64,
}

impl DelayedWrites {
    /// A controller whose rate starts at, and never exceeds, `rate` bytes a second; with
    /// `rate` 0, one whose slowdowns start from the write rate metered before them.
    pub fn new(rate: u64) -> DelayedWrites {
        let fixed = (rate > 0).then(|| rate.max(MIN_DELAYED_WRITE_RATE));
        DelayedWrites {
            fixed,
            max_rate: fixed.unwrap_or(u64::MAX),
            rate: fixed.unwrap_or(ADAPTIVE_START_FLOOR),
            credit: 0,
            next_refill_us: None,
            prev_debt: None,
            prev_l0: 0,
            pace: SlowdownPace::default(),
            ingest: IngestMeter::default(),
        }
    }

    /// Starts pacing afresh (no credit, no pending refill), keeping the rate and the counts
    /// of what was scheduled: for a pace that restarts with each flush (`memtable_pace`).
    pub fn restart(&mut self) {
        self.credit = 0;
        self.next_refill_us = None;
    }

    /// Sets the pace to `rate` bytes a second at `now_us`, within the floor and the cap, for
    /// a pace worked out afresh for each group (`memtable_pace`). Credit is kept up to a
    /// slice's at the new rate, and time since the last grant not yet granted is dropped, so
    /// that neither credit granted while the rate was high (a projection just after a flush
    /// published its progress) nor an idle spell lets a burst through once it is low.
    pub fn set_rate(&mut self, now_us: u64, rate: u64) {
        self.rate = rate.clamp(MIN_DELAYED_WRITE_RATE, self.max_rate);
        let slice = (PACE_SLICE_US as u128 * self.rate as u128).div_ceil(1_000_000);
        self.credit = self.credit.min(slice.min(u64::MAX as u128) as u64);
        if let Some(next) = &mut self.next_refill_us {
            *next = (*next).max(now_us);
        }
    }

    /// Meters a write group of `bytes` going into the store at `now_us`, paced or not.
    pub fn note_write(&mut self, now_us: u64, bytes: u64) {
        self.ingest.record(now_us, bytes);
    }

    /// The metered write rate at `now_us`, bytes a second.
    pub fn ingest_rate(&self, now_us: u64) -> u64 {
        self.ingest.rate(now_us)
    }

    /// The pace now, in bytes a second.
    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// The waits scheduled so far.
    pub fn pace(&self) -> SlowdownPace {
        self.pace
    }

    /// Takes in a new shape of the store at `now_us`: its `pressure`, its compaction `debt`
    /// in bytes, L0's SSTs and whether it is `near_stop`.
    ///
    /// Under the pending-bytes slowdown the pace follows the debt, as RocksDB's does: slower
    /// while it did not shrink, faster while it did. Under L0's slowdown it follows L0's count
    /// alone: slower when L0 grew (a flush), faster when it shrank (L0 -> L1 committed), held
    /// otherwise. The debt is the wrong signal there: the levels below commit several
    /// compactions between two flushes, each shedding debt, and a pace sped up at each let L0
    /// run from its slowdown trigger to its stop with hardly a write delayed (ADOC's NVMe
    /// class: 20 to 36 SSTs in 22 s, then a stop; BENCHMARKS-history.md, "the picker and the
    /// pace near L0's stop").
    pub fn observe(
        &mut self,
        now_us: u64,
        pressure: Pressure,
        debt: u64,
        l0_files: usize,
        near_stop: bool,
    ) {
        if pressure == Pressure::None {
            if self.prev_debt.take().is_some() {
                self.scale(RECOVERED);
            }
            return;
        }
        let prev_l0 = std::mem::replace(&mut self.prev_l0, l0_files);
        let Some(prev) = self.prev_debt else {
            // A new slowdown: no credit from the time since the last one ended, which would
            // let a burst through unpaced.
            self.credit = 0;
            self.next_refill_us = None;
            self.prev_debt = Some(debt);
            if self.fixed.is_none() {
                let start = self.ingest.rate(now_us) as f64 * ADAPTIVE_START_SHARE;
                self.rate = (start as u64).max(ADAPTIVE_START_FLOOR);
            }
            return;
        };
        if near_stop || matches!(pressure, Pressure::Stop(_)) {
            self.scale(NEAR_STOP);
        } else if pressure == Pressure::Delay(Stall::L0Slowdown) {
            match l0_files.cmp(&prev_l0) {
                Ordering::Greater => self.scale(SLOWER),
                Ordering::Less => self.scale(FASTER),
                Ordering::Equal => {}
            }
        } else if debt >= prev {
            self.scale(SLOWER);
        } else {
            self.scale(FASTER);
        }
        self.prev_debt = Some(debt);
    }

    fn scale(&mut self, factor: f64) {
        let rate = (self.rate as f64 * factor) as u64;
        self.rate = rate.clamp(MIN_DELAYED_WRITE_RATE, self.max_rate);
    }

    /// How long a write group of `bytes` must wait at `now_us` (microseconds on a monotonic
    /// clock) under slowdown pressure. Zero when its credit covers it.
    ///
    /// The bound: a wait is at most `bytes` at the rate plus one [`PACE_SLICE_US`], when the
    /// caller asks after the previous group's wait has passed (the write path's leaders take
    /// turns, each sleeping its wait before the next asks). A refill schedules the next one a
    /// slice ahead and the wait past it is the bytes over the credit at the rate; without a
    /// refill, the pending one is at most a slice ahead (a wait that pushed it further has
    /// been slept by then), and the wait is that plus the same bytes at the rate.
    pub fn delay(&mut self, now_us: u64, bytes: u64) -> Duration {
        let wait = self.schedule(now_us, bytes);
        if !wait.is_zero() {
            let us = wait.as_micros() as u64;
            let bound = PACE_SLICE_US + (bytes as u128 * 1_000_000).div_ceil(self.rate as u128) as u64;
            let p = &mut self.pace;
            p.delayed_groups += 1;
            p.delayed_bytes += bytes;
            p.scheduled_us += us;
            p.longest_us = p.longest_us.max(us);
            p.longest_past_bound_us = p.longest_past_bound_us.max(us.saturating_sub(bound));
        }
        wait
    }

    fn schedule(&mut self, now_us: u64, bytes: u64) -> Duration {
        if self.credit >= bytes {
            self.credit -= bytes;
            return Duration::ZERO;
        }
        let next = *self.next_refill_us.get_or_insert(now_us);
        if next <= now_us {
            // Credit for the time since the last grant, and for one slice ahead.
            let elapsed = now_us - next + PACE_SLICE_US;
            self.credit += (elapsed as u128 * self.rate as u128).div_ceil(1_000_000) as u64;
            self.next_refill_us = Some(now_us + PACE_SLICE_US);
            if self.credit >= bytes {
                self.credit -= bytes;
                return Duration::ZERO;
            }
        }
        let over = bytes - self.credit;
        self.credit = 0;
        let wait_us = (over as u128 * 1_000_000 / self.rate as u128) as u64;
        let next = self.next_refill_us.unwrap_or(now_us) + wait_us;
        self.next_refill_us = Some(next);
        Duration::from_micros(next.saturating_sub(now_us).max(PACE_SLICE_US))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn credit_lets_writes_through_at_the_rate() {
        // 50 MB/s: a slice of 20 us is 1,000 bytes of credit.
        assert_eq!(PACE_SLICE_US, 20, "the figures below are for a slice of 20 us");
        let mut d = DelayedWrites::new(50_000_000);
        // The first group is granted a slice's credit: 1,000 bytes pass.
        assert_eq!(d.delay(0, 1000), Duration::ZERO);
        // The next 3,000 bytes are all over the credit: 60 us at 50 MB/s, counted from the
        // end of the slice already credited (20 us), asked at 5 us.
        assert_eq!(d.delay(5, 3000), Duration::from_micros(20 + 60 - 5));
        // A new slice's credit: 1,000 bytes pass at once.
        assert_eq!(d.delay(80, 1000), Duration::ZERO);
        // A small group past the credit within the slice waits the slice's rest and its own
        // bytes, at least a slice: not its fraction of a microsecond, nor a millisecond.
        assert_eq!(d.delay(85, 10), Duration::from_micros(PACE_SLICE_US));
    }

    #[test]
    fn a_pace_wait_lasts_at_least_its_time_and_puts_the_timer_slack_back() {
        // SAFETY: reads the calling thread's timer slack.
        let slack = || unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
        let before = slack();
        // Lower bounds only: a loaded machine makes a wait longer, never shorter.
        for us in [0, 30, 200, 1000] {
            let wait = Duration::from_micros(us);
            let started = std::time::Instant::now();
            let kind = pace_wait(wait, Duration::ZERO);
            assert!(started.elapsed() >= wait, "{wait:?}");
            assert_eq!(kind, if us == 0 { PaceWaitKind::None } else { PaceWaitKind::Slept });
            assert_eq!(slack(), before, "the slack put back after {wait:?}");
        }
    }

    #[test]
    fn waits_within_the_spin_limit_spin_and_longer_ones_sleep() {
        use shale_io::CpuPriority;
        assert_eq!(pace_spin_limit(CpuPriority::Normal), Duration::ZERO, "never at equal priority");
        let limit = pace_spin_limit(CpuPriority::Idle);
        assert_eq!(limit, pace_spin_limit(CpuPriority::Low));
        assert_eq!(limit, Duration::from_micros(PACE_SPIN_US));
        for (us, kind) in [
            (0, PaceWaitKind::None),
            (1, PaceWaitKind::Spun),
            (PACE_SPIN_US, PaceWaitKind::Spun),
            (PACE_SPIN_US + 1, PaceWaitKind::Slept),
            (1000, PaceWaitKind::Slept),
        ] {
            let wait = Duration::from_micros(us);
            let started = std::time::Instant::now();
            assert_eq!(pace_wait(wait, limit), kind, "{us} us");
            assert!(started.elapsed() >= wait, "{us} us: a spin ends at its time, not before");
        }
    }

    #[test]
    fn a_big_group_waits_its_bytes_at_the_rate() {
        let mut d = DelayedWrites::new(MIB);
        let slice_credit = (PACE_SLICE_US * MIB).div_ceil(1_000_000);
        let w = d.delay(0, MIB + slice_credit);
        assert_eq!(w, Duration::from_micros(1_000_000 + PACE_SLICE_US), "1 MiB past the first slice");
    }

    /// Runs a writer that asks again as soon as its wait is over, with groups of `size`
    /// bytes, for at least `secs` of the pace's clock: the bytes a second it got through.
    fn saturated(rate: u64, size: u64, secs: f64) -> f64 {
        let mut d = DelayedWrites::new(rate);
        let (mut now, mut bytes) = (0u64, 0u64);
        while (now as f64) < secs * 1e6 {
            now += d.delay(now, size).as_micros() as u64;
            bytes += size;
        }
        assert_eq!(d.pace().longest_past_bound_us, 0, "rate {rate}, groups of {size}");
        bytes as f64 / (now as f64 / 1e6)
    }

    #[test]
    fn the_rate_is_reached_whatever_the_size_of_the_groups() {
        for (rate, size) in [
            (MIN_DELAYED_WRITE_RATE, 1000),
            (MIB, 100),
            (MIB, 4096),
            (16 * MIB, 1000),
            (16 * MIB, 64 << 10),
            (1 << 30, MIB),
        ] {
            // The pace may be off by a slice's credit and a group: run long enough that this
            // is under 2%.
            let per_group = PACE_SLICE_US as f64 / 1e6 + size as f64 / rate as f64;
            let secs = (50.0 * per_group).max(1.0);
            let got = saturated(rate, size, secs);
            let off = got / rate as f64 - 1.0;
            assert!(off.abs() < 0.02, "{got} B/s for {rate} B/s in groups of {size} B");
        }
    }

    #[test]
    fn a_lone_small_writer_waits_about_its_bytes_not_a_millisecond() {
        // 1 KB writes at 16 MiB/s: 61 us of bytes each. The old slice of a millisecond made
        // one write in sixteen wait a millisecond; now each waits its own time, or a slice.
        let mut d = DelayedWrites::new(16 * MIB);
        let mut now = 0;
        for _ in 0..10_000 {
            now += d.delay(now, 1000).as_micros() as u64;
        }
        let p = d.pace();
        assert!(p.longest_us <= PACE_SLICE_US + 61, "{p:?}");
        assert!(p.longest_us < 200, "a wait in the tail: {p:?}");
        assert!(p.delayed_groups > 1_000, "the waits are spread over many writes: {p:?}");
    }

    proptest::proptest! {
        /// The schedule's bound, under any sizes, idle gaps and changes of the rate: no wait
        /// above its group's bytes at the rate in force plus a slice, none negative, and a
        /// group its credit covers never waits.
        #[test]
        fn no_wait_exceeds_its_bound(
            steps in proptest::collection::vec(
                (1u64..(256 << 10), 0u64..3_000, proptest::option::of(0usize..4)),
                1..400,
            ),
        ) {
            let slow = Pressure::Delay(Stall::L0Slowdown);
            let mut d = DelayedWrites::new(64 * MIB);
            d.observe(0, slow, 100, 20, false);
            let mut now = 0u64;
            let (mut debt, mut l0) = (100, 20);
            for (bytes, gap, shape) in steps {
                if let Some(kind) = shape {
                    // A new shape: L0 and the debt grow, shrink, near a stop, or are gone.
                    match kind {
                        0 => { debt += 10; l0 += 1; d.observe(0, slow, debt, l0, false) }
                        1 => {
                            debt = debt.saturating_sub(10);
                            l0 = l0.saturating_sub(1).max(20);
                            d.observe(0, slow, debt, l0, false)
                        }
                        2 => d.observe(0, slow, debt, l0, true),
                        _ => d.observe(0, Pressure::None, 0, 0, false),
                    }
                }
                now += gap;
                let rate = d.rate();
                let w = d.delay(now, bytes).as_micros() as u64;
                let bound = PACE_SLICE_US + (bytes as u128 * 1_000_000).div_ceil(rate as u128) as u64;
                proptest::prop_assert!(w <= bound, "waited {w} us for {bytes} B at {rate} B/s");
                now += w;
            }
            proptest::prop_assert_eq!(d.pace().longest_past_bound_us, 0);
        }
    }

    #[test]
    fn under_l0s_slowdown_the_rate_follows_l0s_count_not_the_debt() {
        let l0 = Pressure::Delay(Stall::L0Slowdown);
        let mut d = DelayedWrites::new(16 * MIB);
        d.observe(0, l0, 1000, 20, false);
        assert_eq!(d.rate(), 16 * MIB, "entering a slowdown keeps the rate");
        // The debt falls (the levels below shed their excess) while L0 climbs: slower.
        d.observe(0, l0, 900, 21, false);
        let r = (16.0 * MIB as f64 * 0.8) as u64;
        assert_eq!(d.rate(), r, "L0 grew");
        // Compactions below L0 commit, each shedding debt: the pace holds.
        for debt in [800, 700, 600, 500] {
            d.observe(0, l0, debt, 21, false);
            assert_eq!(d.rate(), r, "L0 held while the debt fell to {debt}");
        }
        // The debt grows while L0 holds: still held.
        d.observe(0, l0, 5000, 21, false);
        assert_eq!(d.rate(), r, "L0 held while the debt grew");
        d.observe(0, l0, 5000, 23, false);
        let r = (r as f64 * 0.8) as u64;
        assert_eq!(d.rate(), r, "L0 grew again");
        // L0 -> L1 committed: faster, whatever the debt.
        d.observe(0, l0, 6000, 21, false);
        assert_eq!(d.rate(), (r as f64 * 1.25) as u64, "L0 shrank");
        let r = d.rate();
        d.observe(0, l0, 6000, 22, true);
        assert_eq!(d.rate(), (r as f64 * 0.6) as u64, "near a stop");
    }

    #[test]
    fn under_the_pending_bytes_slowdown_the_rate_follows_the_debt() {
        let slow = Pressure::Delay(Stall::PendingSlowdown);
        let mut d = DelayedWrites::new(16 * MIB);
        d.observe(0, slow, 100, 5, false);
        assert_eq!(d.rate(), 16 * MIB, "entering a slowdown keeps the rate");
        d.observe(0, slow, 100, 5, false);
        assert_eq!(d.rate(), (16.0 * MIB as f64 * 0.8) as u64, "a debt that did not shrink");
        d.observe(0, slow, 150, 3, false);
        let r = (16.0 * MIB as f64 * 0.8) as u64;
        let r = (r as f64 * 0.8) as u64;
        assert_eq!(d.rate(), r, "a growing debt slows, L0's count aside");
        d.observe(0, slow, 120, 8, false);
        assert_eq!(d.rate(), (r as f64 * 1.25) as u64, "a shrinking debt speeds up");
        let r = d.rate();
        d.observe(0, slow, 100, 8, true);
        assert_eq!(d.rate(), (r as f64 * 0.6) as u64, "near a stop, even as the debt shrinks");
        let r = d.rate();
        d.observe(0, Pressure::Stop(Stall::L0Stop), 90, 36, false);
        assert_eq!(d.rate(), (r as f64 * 0.6) as u64, "a stop");
        let r = d.rate();
        d.observe(0, Pressure::None, 0, 0, false);
        assert_eq!(d.rate(), (r as f64 * 1.4) as u64, "leaving the slowdown");
        d.observe(0, Pressure::None, 0, 0, false);
        assert_eq!(d.rate(), (r as f64 * 1.4) as u64, "once");
    }

    #[test]
    fn a_new_slowdown_starts_without_the_credit_of_the_time_between() {
        let slow = Pressure::Delay(Stall::L0Slowdown);
        let mut d = DelayedWrites::new(MIB);
        d.observe(0, slow, 10, 0, false);
        let slice_credit = (PACE_SLICE_US * MIB).div_ceil(1_000_000);
        assert_eq!(d.delay(0, slice_credit), Duration::ZERO);
        d.observe(0, Pressure::None, 0, 0, false);
        let rate = d.rate();
        // Ten seconds later, a new slowdown: a slice's credit, not ten seconds'.
        d.observe(0, slow, 10, 0, false);
        let now = 10_000_000;
        let credit = (PACE_SLICE_US * rate).div_ceil(1_000_000);
        assert_eq!(d.delay(now, credit), Duration::ZERO);
        assert_eq!(d.delay(now, 1), Duration::from_micros(PACE_SLICE_US));
    }

    #[test]
    fn the_rate_stays_within_its_floor_and_the_users_rate() {
        let slow = Pressure::Delay(Stall::PendingSlowdown);
        let mut d = DelayedWrites::new(MIB);
        for debt in 0..100 {
            d.observe(0, slow, debt, 0, false);
        }
        assert_eq!(d.rate(), MIN_DELAYED_WRITE_RATE);
        for debt in (0..100).rev() {
            d.observe(0, slow, debt, 0, false);
        }
        assert_eq!(d.rate(), MIB);
        d.observe(0, Pressure::None, 0, 0, false);
        assert_eq!(d.rate(), MIB, "no faster than the user's rate");
        assert_eq!(DelayedWrites::new(1).rate(), MIN_DELAYED_WRITE_RATE);
    }

    /// Feeds `d` groups of `size` bytes at `rate` bytes a second from `from_us` for `secs`:
    /// the clock at the end.
    fn ingest(d: &mut DelayedWrites, from_us: u64, rate: u64, size: u64, secs: f64) -> u64 {
        let mut sent = 0u64;
        loop {
            let now = from_us + (sent as u128 * 1_000_000 / rate as u128) as u64;
            if ((now - from_us) as f64) >= secs * 1e6 {
                return now;
            }
            d.note_write(now, size);
            sent += size;
        }
    }

    #[test]
    fn an_adaptive_slowdown_starts_below_the_rate_writes_went_in() {
        let slow = Pressure::Delay(Stall::PendingSlowdown);
        let mut d = DelayedWrites::new(0);
        let now = ingest(&mut d, 0, 200 * MIB, 1000, 2.0);
        let metered = d.ingest_rate(now);
        assert!(metered.abs_diff(200 * MIB) < 2 * MIB, "metered {metered}");
        d.observe(now, slow, 100, 0, false);
        let start = d.rate();
        let expected = (metered as f64 * ADAPTIVE_START_SHARE) as u64;
        assert_eq!(start, expected, "four fifths of the metered rate, not 16 MiB/s");
        // The adaptation then goes on from there, without the user's cap.
        d.observe(now, slow, 150, 0, false);
        assert_eq!(d.rate(), (start as f64 * SLOWER) as u64);
        d.observe(now, slow, 100, 0, false);
        d.observe(now, slow, 50, 0, false);
        assert!(d.rate() > start, "a shrinking debt speeds up past the start: {}", d.rate());
        // The paced writes are metered too: a slowdown after the store went at 10 MiB/s
        // starts at the floor, not above the rate it ended at.
        d.observe(now, Pressure::None, 0, 0, false);
        let now = ingest(&mut d, now, 10 * MIB, 1000, 2.0);
        d.observe(now, slow, 100, 0, false);
        assert_eq!(d.rate(), ADAPTIVE_START_FLOOR);
    }

    #[test]
    fn an_adaptive_slowdown_after_an_idle_spell_starts_at_the_floor() {
        let slow = Pressure::Delay(Stall::PendingSlowdown);
        let mut d = DelayedWrites::new(0);
        assert_eq!(d.ingest_rate(0), 0, "nothing metered yet");
        d.observe(0, slow, 1, 0, false);
        assert_eq!(d.rate(), ADAPTIVE_START_FLOOR, "no writes metered");
        d.observe(0, Pressure::None, 0, 0, false);
        let now = ingest(&mut d, 0, 500 * MIB, 4096, 1.0);
        // Ten seconds without a write, then one: the window that ends holds the gap.
        let now = now + 10_000_000;
        d.note_write(now, 4096);
        assert!(d.ingest_rate(now + 1) < 100 * MIB, "{}", d.ingest_rate(now + 1));
        let later = now + 600_000;
        d.note_write(later, 4096);
        d.observe(later, slow, 1, 0, false);
        assert_eq!(d.rate(), ADAPTIVE_START_FLOOR);
    }

    #[test]
    fn a_rate_set_lower_keeps_no_more_than_a_slice_of_credit() {
        let mut d = DelayedWrites::new(u64::MAX);
        d.set_rate(0, 1 << 40);
        // A slice at a terabyte a second: the credit covers any group.
        assert_eq!(d.delay(0, 1), Duration::ZERO);
        assert_eq!(d.delay(1, MIB), Duration::ZERO);
        // A second later, at 1 MiB/s: a slice's credit at the new rate, neither the
        // terabyte's leftover nor the second's.
        d.set_rate(1_000_000, MIB);
        let slice_credit = (PACE_SLICE_US * MIB).div_ceil(1_000_000);
        assert_eq!(d.delay(1_000_000, slice_credit), Duration::ZERO);
        assert!(d.delay(1_000_001, 1000) >= Duration::from_micros(900));
    }

    #[test]
    fn a_fixed_rate_ignores_the_meter() {
        let slow = Pressure::Delay(Stall::L0Slowdown);
        let mut d = DelayedWrites::new(4 * MIB);
        let now = ingest(&mut d, 0, 200 * MIB, 1000, 1.0);
        d.observe(now, slow, 100, 0, false);
        assert_eq!(d.rate(), 4 * MIB, "the user's rate is the start, whatever the ingest");
    }

    #[test]
    fn stall_conditions_follow_rocksdb() {
        let o = Options {
            soft_pending_compaction_bytes_limit: 100,
            hard_pending_compaction_bytes_limit: 200,
            ..Options::default()
        };
        assert_eq!(pressure(&o, 0, 0), Pressure::None);
        assert_eq!(pressure(&o, 19, 99), Pressure::None);
        assert_eq!(pressure(&o, 20, 0), Pressure::Delay(Stall::L0Slowdown));
        assert_eq!(pressure(&o, 0, 100), Pressure::Delay(Stall::PendingSlowdown));
        assert_eq!(pressure(&o, 36, 0), Pressure::Stop(Stall::L0Stop));
        assert_eq!(pressure(&o, 0, 200), Pressure::Stop(Stall::PendingStop));
        assert_eq!(pressure(&o, 36, 500), Pressure::Stop(Stall::L0Stop), "L0 first");
        assert_eq!(pressure(&o, 20, 200), Pressure::Stop(Stall::PendingStop), "stops win");
        let off = Options {
            soft_pending_compaction_bytes_limit: 0,
            hard_pending_compaction_bytes_limit: 0,
            ..o
        };
        assert_eq!(pressure(&off, 0, u64::MAX), Pressure::None);
    }

    #[test]
    fn compactions_yield_until_halfway_to_a_slowdown() {
        let o = Options {
            soft_pending_compaction_bytes_limit: 100,
            idle_compaction_io: true,
            ..Options::default()
        };
        // L0: trigger 4, slowdown 20, so halfway is 12 files.
        assert!(compactions_yield(&o, 0, 0));
        assert!(compactions_yield(&o, 11, 49));
        assert!(!compactions_yield(&o, 12, 0), "halfway in L0 files");
        assert!(!compactions_yield(&o, 0, 50), "halfway in pending bytes");
        assert!(!compactions_yield(&o, 20, 0), "in a slowdown");
        assert!(
            (0..12).all(|l0| pressure(&o, l0, 49) == Pressure::None),
            "a store that lets compactions yield slows no writer"
        );
        let tight = Options {
            level0_file_num_compaction_trigger: 2,
            level0_slowdown_writes_trigger: 3,
            ..o.clone()
        };
        assert!(compactions_yield(&tight, 1, 0) && !compactions_yield(&tight, 2, 0), "halfway rounds down");
        let no_soft_limit = Options { soft_pending_compaction_bytes_limit: 0, ..o.clone() };
        assert!(compactions_yield(&no_soft_limit, 0, u64::MAX));
        let off = Options { idle_compaction_io: false, ..o };
        assert!(!compactions_yield(&off, 0, 0), "the option turns it off");
        assert!(!Options::default().idle_compaction_io, "off by default");
    }
}
