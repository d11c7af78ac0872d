//! Which number of WAL loggers to run: a search over levels `0..=max` by the commit rate each
//! gives, robust to the noise of short periods on a shared machine.
//!
//! The search stays at a *home* level, keeping a running average of its rate, and from time
//! to time *probes* a neighbour (one level up or down, alternately) for [`PROBE_PERIODS`]
//! periods. A probe that beats home's average by more than [`RATE_TOLERANCE`] in each of
//! them becomes home (one lucky period is not enough: a store warming up, or a noisy
//! neighbour, moves the rate by more than the tolerance); one that does not sends the search
//! back home for twice as long as the last stay (from [`DWELL_PERIODS`] up to
//! [`DWELL_PERIODS_MAX`]), so that once the best level is found, probing costs a few percent
//! of the time.
//!
//! Why not a hill climb on consecutive periods (the first version): each step compared one
//! period with the one before, so a worse level whose first period happened to fall within
//! the tolerance of the period before it was taken as no loss, and the climb walked on
//! through the other worse levels and back before it met a loss again. On a loop device
//! (fillsync, 32 threads, 1 KB values) it ran pipelined for 42,001 of 48,613 groups, at
//! 52.9-54.5k writes/s, where no pipelining gave 59.4k with groups twice as large.

/// Fall (or gain) in the commit rate, against home's average, that counts.
pub const RATE_TOLERANCE: f64 = 0.03;

/// Periods spent at home before the first probe, and after a probe that moved home.
pub const DWELL_PERIODS: u32 = 4;

/// Most periods spent at home between probes (6.4 s of 100 ms periods).
pub const DWELL_PERIODS_MAX: u32 = 64;

/// Periods a probe lasts; it wins only if it wins in every one.
pub const PROBE_PERIODS: u32 = 2;

/// Weight of the newest period in home's running average.
const AVERAGE_WEIGHT: f64 = 0.5;

/// The state of the search (see the module's comment).
#[derive(Debug)]
pub struct LevelSearch {
    max: usize,
    home: usize,
    /// Running average of home's rate; `None` until home has had a period.
    home_rate: Option<f64>,
    /// The level being probed, if any, and the probe's periods left to run.
    probe: Option<usize>,
    probe_left: u32,
    /// The side the next probe goes to (+1 or -1).
    side: i8,
    /// Periods left at home before the next probe, and the length of the next stay.
    dwell: u32,
    dwell_len: u32,
}

impl LevelSearch {
    /// A search over `0..=max`, starting at home level `start`.
    pub fn new(max: usize, start: usize) -> LevelSearch {
        LevelSearch {
            max,
            home: start.min(max),
            home_rate: None,
            probe: None,
            probe_left: 0,
            side: 1,
            dwell: DWELL_PERIODS,
            dwell_len: DWELL_PERIODS,
        }
    }

    /// The level to run now.
    pub fn level(&self) -> usize {
        self.probe.unwrap_or(self.home)
    }

    /// One period ran at [`LevelSearch::level`] and committed at `rate`; returns the level to
    /// run next. A period without commits (`rate` 0) teaches nothing and changes nothing.
    pub fn period(&mut self, rate: f64) -> usize {
        if rate <= 0.0 {
            return self.level();
        }
        if let Some(probe) = self.probe {
            let won = self.home_rate.is_none_or(|home| rate > home * (1.0 + RATE_TOLERANCE));
            self.probe_left -= 1;
            if won && self.probe_left > 0 {
                return self.level();
            }
            self.probe = None;
            if won {
                self.home = probe;
                self.home_rate = Some(rate);
                self.dwell_len = DWELL_PERIODS;
            } else {
                self.dwell_len = (self.dwell_len * 2).min(DWELL_PERIODS_MAX);
                // The other side next time (where there is one).
                self.side = -self.side;
            }
            self.dwell = self.dwell_len;
            return self.level();
        }
        self.home_rate = Some(match self.home_rate {
            Some(avg) => avg + AVERAGE_WEIGHT * (rate - avg),
            None => rate,
        });
        if self.dwell > 0 {
            self.dwell -= 1;
            return self.level();
        }
        if self.max == 0 {
            return self.level();
        }
        let mut next = self.home as i64 + i64::from(self.side);
        if next < 0 || next > self.max as i64 {
            self.side = -self.side;
            next = self.home as i64 + i64::from(self.side);
        }
        self.probe = Some(next as usize);
        self.probe_left = PROBE_PERIODS;
        self.level()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `periods` periods with the rate `rate_of(level, period)` gives; returns the
    /// periods spent at each level.
    fn run(
        search: &mut LevelSearch,
        periods: usize,
        mut rate_of: impl FnMut(usize, usize) -> f64,
    ) -> Vec<usize> {
        let mut at = vec![0; search.max + 1];
        for p in 0..periods {
            let level = search.level();
            at[level] += 1;
            search.period(rate_of(level, p));
        }
        at
    }

    /// A deterministic noise of +-`amp` (a fraction), different each period.
    fn noise(p: usize, amp: f64) -> f64 {
        let x = ((p as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as f64 / (1u64 << 24) as f64;
        1.0 + amp * (2.0 * x - 1.0)
    }

    #[test]
    fn stays_at_the_best_level_when_every_other_is_worse() {
        // Level 0 is best by 10%, the others alike (the loop device's fillsync at 32 threads).
        let mut s = LevelSearch::new(3, 0);
        let at = run(&mut s, 1000, |l, p| if l == 0 { 59.0 } else { 53.5 } * noise(p, 0.02));
        assert!(at[0] >= 950, "{at:?}");
        assert_eq!(s.level(), 0);
    }

    #[test]
    fn climbs_to_a_better_level_and_stays_there() {
        // More loggers help up to 2 (8 writers on a device with parallel syncs).
        let rates = [20.7, 22.5, 24.0, 23.0];
        let mut s = LevelSearch::new(3, 0);
        let at = run(&mut s, 1000, |l, p| rates[l] * noise(p, 0.01));
        assert!(at[2] >= 900, "{at:?}");
    }

    #[test]
    fn probes_back_off_to_the_longest_stay() {
        let mut s = LevelSearch::new(3, 0);
        run(&mut s, 400, |l, _| if l == 0 { 100.0 } else { 80.0 });
        assert_eq!(s.dwell_len, DWELL_PERIODS_MAX);
        // Once backed off, a losing probe takes one period (it loses in its first) in every
        // DWELL_PERIODS_MAX + 1.
        let at = run(&mut s, 650, |l, _| if l == 0 { 100.0 } else { 80.0 });
        assert!(at[1] + at[2] + at[3] <= 650 / (DWELL_PERIODS_MAX as usize + 1) + 1, "{at:?}");
    }

    #[test]
    fn one_lucky_period_does_not_move_home() {
        // Every probe's first period is lucky (20% up), its second is what the level gives.
        let mut s = LevelSearch::new(3, 0);
        let mut probing_since = None;
        let at = run(&mut s, 1000, |l, p| {
            if l == 0 {
                probing_since = None;
                return 100.0;
            }
            let first = *probing_since.get_or_insert(p) == p;
            if first { 120.0 } else { 90.0 }
        });
        assert!(at[0] >= 950, "{at:?}");
    }

    #[test]
    fn follows_a_change_of_load() {
        let mut s = LevelSearch::new(3, 0);
        // First no pipelining wins; then the load changes and 3 loggers win.
        run(&mut s, 300, |l, _| if l == 0 { 100.0 } else { 90.0 });
        assert_eq!(s.level(), 0);
        let at = run(&mut s, 600, |l, _| 100.0 + 10.0 * l as f64);
        assert_eq!(s.level(), 3, "{at:?}");
    }

    #[test]
    fn empty_periods_change_nothing_and_one_level_never_probes() {
        let mut s = LevelSearch::new(3, 1);
        for _ in 0..100 {
            assert_eq!(s.period(0.0), 1);
        }
        let mut only = LevelSearch::new(0, 0);
        for p in 0..100 {
            assert_eq!(only.period(10.0 * noise(p, 0.5)), 0);
        }
    }
}
