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

/// The slowest pace a slowdown sets (RocksDB's floor): writes are slowed, never stopped,
/// by a delay.
pub const MIN_DELAYED_WRITE_RATE: u64 = 16 << 10;
/// Credit for the rate is granted at most this often, and a delayed write waits at least
/// this long: a writer sleeps in slices of a millisecond, not of a few microseconds.
const REFILL_US: u64 = 1_000;
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

/// Paces writes under slowdown pressure to a byte rate that adapts to the store's shape,
/// after RocksDB's `WriteController` and `SetupDelay`:
///
/// - Each write group asks [`DelayedWrites::delay`] for its bytes. Credit accrues at the rate
///   (granted at most once a millisecond); a group covered by credit passes at once, one that
///   is not waits for the bytes over its credit at the rate, at least a millisecond.
/// - At each new shape (a flush or a compaction committed, [`DelayedWrites::observe`]) while
///   slowed down, the rate is multiplied by 0.6 near a stop, by 0.8 if the compaction debt
///   did not shrink, by 1.25 if it did, within [`MIN_DELAYED_WRITE_RATE`] and the rate the
///   user set (`Options::delayed_write_rate`); on leaving the slowdown it is multiplied by
///   1.4 (within the same cap).
///
/// Pure: the caller passes the time, so tests drive it exactly.
#[derive(Clone, Debug)]
pub struct DelayedWrites {
    max_rate: u64,
    rate: u64,
    credit: u64,
    /// Microseconds at which credit may next be granted; None before the first delay.
    next_refill_us: Option<u64>,
    /// The debt at the last shape seen under pressure; None while writes go freely.
    prev_debt: Option<u64>,
}

impl DelayedWrites {
    /// A controller whose rate starts at, and never exceeds, `max_rate` bytes a second.
    pub fn new(max_rate: u64) -> DelayedWrites {
        let max_rate = max_rate.max(MIN_DELAYED_WRITE_RATE);
        DelayedWrites { max_rate, rate: max_rate, credit: 0, next_refill_us: None, prev_debt: None }
    }

    /// The pace now, in bytes a second.
    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// Takes in a new shape of the store: its `pressure`, its compaction `debt` in bytes and
    /// whether it is `near_stop`.
    pub fn observe(&mut self, pressure: Pressure, debt: u64, near_stop: bool) {
        if pressure == Pressure::None {
            if self.prev_debt.take().is_some() {
                self.scale(RECOVERED);
            }
            return;
        }
        let Some(prev) = self.prev_debt else {
            // A new slowdown: no credit from the time since the last one ended, which would
            // let a burst through unpaced.
            self.credit = 0;
            self.next_refill_us = None;
            self.prev_debt = Some(debt);
            return;
        };
        if near_stop || matches!(pressure, Pressure::Stop(_)) {
            self.scale(NEAR_STOP);
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
    pub fn delay(&mut self, now_us: u64, bytes: u64) -> Duration {
        if self.credit >= bytes {
            self.credit -= bytes;
            return Duration::ZERO;
        }
        let next = *self.next_refill_us.get_or_insert(now_us);
        if next <= now_us {
            // Credit for the time since the last grant, and for one interval ahead.
            let elapsed = now_us - next + REFILL_US;
            self.credit += (elapsed as u128 * self.rate as u128).div_ceil(1_000_000) as u64;
            self.next_refill_us = Some(now_us + REFILL_US);
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
        Duration::from_micros(next.saturating_sub(now_us).max(REFILL_US))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn credit_lets_writes_through_at_the_rate() {
        let mut d = DelayedWrites::new(MIB);
        // The first group is granted a millisecond's credit (1049 bytes): 1000 pass.
        assert_eq!(d.delay(0, 1000), Duration::ZERO);
        // The next 1000 bytes are 951 over the 49 left: 906 us at 1 MiB/s, counted from the
        // end of the millisecond already credited.
        assert_eq!(d.delay(10, 1000), Duration::from_micros(1_000 + 906 - 10));
        // A small group past the credit waits the minimum, not its few microseconds.
        assert_eq!(d.delay(1_000, 10), Duration::from_micros(REFILL_US));
        // Over a long run the bytes let through follow the rate.
        let mut d = DelayedWrites::new(MIB);
        let (mut now, mut bytes) = (0u64, 0u64);
        while now < 2_000_000 {
            now += d.delay(now, 4096).as_micros() as u64;
            bytes += 4096;
        }
        let per_s = bytes as f64 / (now as f64 / 1e6);
        assert!((per_s / MIB as f64 - 1.0).abs() < 0.02, "{per_s} B/s against 1 MiB/s");
    }

    #[test]
    fn a_big_group_waits_its_bytes_at_the_rate() {
        let mut d = DelayedWrites::new(MIB);
        let w = d.delay(0, MIB + 1049);
        assert_eq!(w, Duration::from_micros(1_001_000), "1 MiB past the first millisecond");
    }

    #[test]
    fn the_rate_slows_while_the_debt_grows_and_recovers_as_it_shrinks() {
        let slow = Pressure::Delay(Stall::L0Slowdown);
        let mut d = DelayedWrites::new(16 * MIB);
        d.observe(slow, 100, false);
        assert_eq!(d.rate(), 16 * MIB, "entering a slowdown keeps the rate");
        d.observe(slow, 100, false);
        assert_eq!(d.rate(), (16.0 * MIB as f64 * 0.8) as u64, "a debt that did not shrink");
        d.observe(slow, 150, false);
        let r = (16.0 * MIB as f64 * 0.8) as u64;
        let r = (r as f64 * 0.8) as u64;
        assert_eq!(d.rate(), r);
        d.observe(slow, 120, false);
        assert_eq!(d.rate(), (r as f64 * 1.25) as u64, "a shrinking debt speeds up");
        let r = d.rate();
        d.observe(slow, 100, true);
        assert_eq!(d.rate(), (r as f64 * 0.6) as u64, "near a stop, even as the debt shrinks");
        let r = d.rate();
        d.observe(Pressure::Stop(Stall::L0Stop), 90, false);
        assert_eq!(d.rate(), (r as f64 * 0.6) as u64, "a stop");
        let r = d.rate();
        d.observe(Pressure::None, 0, false);
        assert_eq!(d.rate(), (r as f64 * 1.4) as u64, "leaving the slowdown");
        d.observe(Pressure::None, 0, false);
        assert_eq!(d.rate(), (r as f64 * 1.4) as u64, "once");
    }

    #[test]
    fn a_new_slowdown_starts_without_the_credit_of_the_time_between() {
        let slow = Pressure::Delay(Stall::L0Slowdown);
        let mut d = DelayedWrites::new(MIB);
        d.observe(slow, 10, false);
        assert_eq!(d.delay(0, 1000), Duration::ZERO);
        d.observe(Pressure::None, 0, false);
        let rate = d.rate();
        // Ten seconds later, a new slowdown: a millisecond's credit, not ten seconds'.
        d.observe(slow, 10, false);
        let now = 10_000_000;
        let credit = (REFILL_US * rate).div_ceil(1_000_000);
        assert_eq!(d.delay(now, credit), Duration::ZERO);
        assert_eq!(d.delay(now, 1), Duration::from_micros(REFILL_US));
    }

    #[test]
    fn the_rate_stays_within_its_floor_and_the_users_rate() {
        let slow = Pressure::Delay(Stall::PendingSlowdown);
        let mut d = DelayedWrites::new(MIB);
        for debt in 0..100 {
            d.observe(slow, debt, false);
        }
        assert_eq!(d.rate(), MIN_DELAYED_WRITE_RATE);
        for debt in (0..100).rev() {
            d.observe(slow, debt, false);
        }
        assert_eq!(d.rate(), MIB);
        d.observe(Pressure::None, 0, false);
        assert_eq!(d.rate(), MIB, "no faster than the user's rate");
        assert_eq!(DelayedWrites::new(1).rate(), MIN_DELAYED_WRITE_RATE);
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
}
