//! Group commit's sequencer: numbered rounds of a durable step (a device flush, a log write),
//! led one at a time by whichever caller finds none running, shared by every caller that
//! arrives meanwhile, and stopped for good by the first failure.
//!
//! Numbering: `started` counts the rounds begun, `done` the rounds finished, one at a time in
//! order. A caller takes `target = started + 1` (the first round to begin from now on: a
//! round already running may have begun before the caller's data was ready) and returns once
//! `done >= target`, leading that round itself when none is running. So commits that arrive
//! while one round runs all wait for the next one, which one of them leads: under load one
//! round serves many callers.
//!
//! A failed round is sticky: its error fails every caller waiting then and every later one,
//! without another round, because a failed write or flush cannot be trusted or retried
//! (promise P5): the engine stops, and the next open recovers. A failure found outside a
//! round (an index update that could not be made, say) stops the rounds the same way
//! ([`Sequencer::fail`]).
//!
//! Two ways to run a round, with the same rules:
//! - [`Sequencer::join`], for engines whose callers wait for their commit on their own
//!   thread (the table engine's group flush): the caller leads or waits.
//! - [`Sequencer::begin`] and [`Sequencer::end`], for an engine whose durable step completes
//!   later on a device queue that one thread polls (the hash engine's shard worker submits its
//!   batch's write in one turn and reaps it in a later one): nobody blocks, and `begin` says
//!   whether a round may start now. A round begun this way is led by whoever began it; callers
//!   of `join` meanwhile wait for it like for any other. [`Sequencer::begin_overlapping`]
//!   begins one while others begun so run (the hash engine's batches in flight side by side);
//!   such rounds end in the order they began, and `done` counts the last one ended.

use std::fmt::Display;

use parking_lot::{Condvar, Mutex};

use crate::contention::Site;

struct State {
    started: u64,
    done: u64,
    /// Rounds begun and not yet ended (more than one only with
    /// [`Sequencer::begin_overlapping`]).
    running: u64,
    /// Why the first failed round failed.
    failed: Option<String>,
    /// Rounds run and callers served, for the engines' stats.
    rounds: u64,
    joined: u64,
}

/// A round begun with [`Sequencer::begin`], ended by handing it to [`Sequencer::end`].
#[must_use = "a round begun must be ended, or no other round can begin"]
#[derive(Debug)]
pub struct Round {
    n: u64,
}

impl Round {
    /// The round's number: rounds are numbered from 1 in the order they begin.
    pub fn number(&self) -> u64 {
        self.n
    }
}

/// Why [`Sequencer::begin`] began no round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotBegun {
    /// A round is running: one at a time.
    Running,
    /// A round failed, or the sequencer was stopped, for this reason.
    Stopped(String),
}

/// The sequencer of one store's group commit.
pub struct Sequencer {
    state: Mutex<State>,
    cv: Condvar,
    /// The contention profile's site of a caller waiting for a round another leads.
    wait_site: &'static Site,
}

impl std::fmt::Debug for Sequencer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.state.lock();
        f.debug_struct("Sequencer")
            .field("started", &st.started)
            .field("done", &st.done)
            .field("failed", &st.failed)
            .finish()
    }
}

impl Sequencer {
    /// A sequencer whose waits count at `wait_site` in the contention profile.
    pub fn new(wait_site: &'static Site) -> Sequencer {
        Sequencer {
            state: Mutex::new(State {
                started: 0,
                done: 0,
                running: 0,
                failed: None,
                rounds: 0,
                joined: 0,
            }),
            cv: Condvar::new(),
            wait_site,
        }
    }

    /// Returns once a round that began after this call has completed, running `round` as that
    /// round's leader if no round is running when its turn comes (`round` is not called
    /// otherwise).
    ///
    /// # Errors
    /// The error of this caller's round, if it led it; `stopped(why)` if that round, or an
    /// earlier one, failed under another leader.
    pub fn join<E: Display>(
        &self,
        round: impl FnOnce() -> Result<(), E>,
        stopped: impl FnOnce(String) -> E,
    ) -> Result<(), E> {
        let mut round = Some(round);
        let mut st = self.state.lock();
        let target = st.started + 1;
        st.joined += 1;
        loop {
            if let Some(why) = &st.failed {
                return Err(stopped(why.clone()));
            }
            if st.done >= target {
                return Ok(());
            }
            if st.running > 0 {
                // A hand-off: this caller waits for the round another leads.
                self.wait_site.wait(|| self.cv.wait(&mut st));
                continue;
            }
            st.running = 1;
            st.started += 1;
            let n = st.started;
            drop(st);
            let lead = round.take().expect("a caller leads at most one round");
            let result = lead();
            st = self.state.lock();
            st.running = 0;
            st.rounds += 1;
            match result {
                Ok(()) => st.done = n,
                Err(e) => {
                    st.failed.get_or_insert_with(|| e.to_string());
                    self.cv.notify_all();
                    return Err(e);
                }
            }
            self.cv.notify_all();
        }
    }

    /// Begins a round now, serving `served` writes, if none is running and none failed.
    /// The caller leads it and ends it with [`Sequencer::end`].
    ///
    /// # Errors
    /// [`NotBegun::Running`] while another round runs; [`NotBegun::Stopped`] after a failure.
    pub fn begin(&self, served: u64) -> Result<Round, NotBegun> {
        self.begin_with(served, false)
    }

    /// Begins a round now, serving `served` writes, even while rounds begun with
    /// [`Sequencer::begin`] or this run: their leader ends them, with [`Sequencer::end`], in
    /// the order they began. Not to be mixed with [`Sequencer::join`]'s rounds, which run
    /// alone (a joiner waits while any round runs).
    ///
    /// # Errors
    /// [`NotBegun::Stopped`] after a failure.
    pub fn begin_overlapping(&self, served: u64) -> Result<Round, NotBegun> {
        self.begin_with(served, true)
    }

    fn begin_with(&self, served: u64, overlap: bool) -> Result<Round, NotBegun> {
        let mut st = self.state.lock();
        if let Some(why) = &st.failed {
            return Err(NotBegun::Stopped(why.clone()));
        }
        if st.running > 0 && !overlap {
            return Err(NotBegun::Running);
        }
        st.running += 1;
        st.started += 1;
        st.joined += served;
        Ok(Round { n: st.started })
    }

    /// Ends a round begun with [`Sequencer::begin`]: done if `result` is `Ok`, else the
    /// sequencer stops with `result`'s reason (unless it stopped before). Wakes the callers
    /// of [`Sequencer::join`] that wait for it.
    pub fn end(&self, round: Round, result: Result<(), String>) {
        let mut st = self.state.lock();
        debug_assert!(
            st.running > 0 && round.n == st.started + 1 - st.running,
            "the round ended is the oldest running"
        );
        st.running -= 1;
        st.rounds += 1;
        match result {
            Ok(()) => st.done = round.n,
            Err(why) => {
                st.failed.get_or_insert(why);
            }
        }
        drop(st);
        self.cv.notify_all();
    }

    /// Stops the sequencer for a failure found outside a round: no round begins after this,
    /// and every caller waiting or to come is told `why` (the first reason given stays). A
    /// round running now still ends as it ends.
    pub fn fail(&self, why: String) {
        self.state.lock().failed.get_or_insert(why);
        self.cv.notify_all();
    }

    /// Why the sequencer stopped, if a round failed.
    pub fn stopped(&self) -> Option<String> {
        self.state.lock().failed.clone()
    }

    /// (rounds run, callers served).
    pub fn counts(&self) -> (u64, u64) {
        let st = self.state.lock();
        (st.rounds, st.joined)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::mpsc;

    static SITE: Site = Site::new("test: sequencer wait");

    /// Waits until `n` callers have joined (the counts say so: an event, not a time).
    fn joined(seq: &Sequencer, n: u64) {
        while seq.counts().1 < n {
            std::thread::yield_now();
        }
    }

    #[test]
    fn a_caller_waits_for_a_round_that_began_after_it_and_one_round_serves_many() {
        let seq = Arc::new(Sequencer::new(&SITE));
        let ran = Arc::new(AtomicU64::new(0));
        // The first round runs until told to finish.
        let (go, wait) = mpsc::channel::<()>();
        let leader = {
            let (seq, ran) = (seq.clone(), ran.clone());
            std::thread::spawn(move || {
                seq.join(
                    || {
                        wait.recv().unwrap();
                        ran.fetch_add(1, Ordering::SeqCst);
                        Ok::<(), String>(())
                    },
                    |why| why,
                )
            })
        };
        while seq.state.lock().running == 0 {
            std::thread::yield_now();
        }
        // Three callers join while it runs: none may return with it, all share round 2.
        let rounds_seen: Vec<_> = (0..3)
            .map(|_| {
                let (seq, ran) = (seq.clone(), ran.clone());
                std::thread::spawn(move || {
                    seq.join(
                        || {
                            ran.fetch_add(1, Ordering::SeqCst);
                            Ok::<(), String>(())
                        },
                        |why| why,
                    )
                    .unwrap();
                    ran.load(Ordering::SeqCst)
                })
            })
            .collect();
        joined(&seq, 4);
        go.send(()).unwrap();
        leader.join().unwrap().unwrap();
        for t in rounds_seen {
            assert_eq!(t.join().unwrap(), 2, "a caller returned before a round after it ran");
        }
        assert_eq!(seq.counts(), (2, 4));
        assert_eq!(ran.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_failed_round_fails_its_waiters_and_every_later_caller_without_a_round() {
        let seq = Arc::new(Sequencer::new(&SITE));
        let (go, wait) = mpsc::channel::<()>();
        let leader = {
            let seq = seq.clone();
            std::thread::spawn(move || {
                seq.join(
                    || {
                        wait.recv().unwrap();
                        Err("device gone".to_string())
                    },
                    |why| format!("stopped: {why}"),
                )
            })
        };
        while seq.state.lock().running == 0 {
            std::thread::yield_now();
        }
        let waiter = {
            let seq = seq.clone();
            std::thread::spawn(move || {
                seq.join(|| panic!("no round after a failure"), |why| format!("stopped: {why}"))
            })
        };
        joined(&seq, 2);
        go.send(()).unwrap();
        assert_eq!(leader.join().unwrap(), Err("device gone".to_string()));
        assert_eq!(waiter.join().unwrap(), Err("stopped: device gone".to_string()));
        let later = seq.join(|| panic!("no round after a failure"), |why| format!("x {why}"));
        assert_eq!(later, Err("x device gone".to_string()));
        assert_eq!(seq.stopped().as_deref(), Some("device gone"));
        assert_eq!(seq.counts(), (1, 3));
    }

    #[test]
    fn begun_rounds_run_one_at_a_time_and_a_failed_one_stops_every_later_round() {
        let seq = Sequencer::new(&SITE);
        let first = seq.begin(3).expect("nothing runs");
        assert_eq!(first.number(), 1);
        assert_eq!(seq.begin(1).unwrap_err(), NotBegun::Running);
        seq.end(first, Ok(()));
        let second = seq.begin(2).expect("the first ended");
        assert_eq!(second.number(), 2);
        seq.end(second, Err("write failed".into()));
        assert_eq!(seq.begin(1).unwrap_err(), NotBegun::Stopped("write failed".into()));
        // `join` after a failed begun round: refused without a round.
        let later = seq.join(|| panic!("no round after a failure"), |why| format!("x {why}"));
        assert_eq!(later, Err("x write failed".to_string()));
        assert_eq!(seq.counts(), (2, 6));
    }

    #[test]
    fn overlapping_rounds_end_in_order_and_a_joiner_waits_for_all_of_them() {
        let seq = Arc::new(Sequencer::new(&SITE));
        let first = seq.begin(2).expect("nothing runs");
        assert_eq!(seq.begin(1).unwrap_err(), NotBegun::Running, "plain begins still run alone");
        let second = seq.begin_overlapping(3).expect("overlapping rounds may begin");
        assert_eq!(second.number(), 2);
        let (led, led_rx) = std::sync::mpsc::channel();
        let joiner = {
            let seq = seq.clone();
            std::thread::spawn(move || {
                seq.join(
                    || {
                        led.send(()).unwrap();
                        Ok::<(), String>(())
                    },
                    |why| why,
                )
            })
        };
        joined(&seq, 6);
        seq.end(first, Ok(()));
        assert!(led_rx.try_recv().is_err(), "a round still runs: the joiner may not lead yet");
        seq.end(second, Ok(()));
        assert_eq!(joiner.join().unwrap(), Ok(()));
        assert!(led_rx.try_recv().is_ok(), "the joiner's round began after both had ended");
        assert_eq!(seq.counts(), (3, 6));
        // A failure of the older of two overlapping rounds stops the sequencer; the younger
        // still ends (its leader hands it back) and no round begins after.
        let a = seq.begin_overlapping(1).unwrap();
        let b = seq.begin_overlapping(1).unwrap();
        seq.end(a, Err("write failed".into()));
        seq.end(b, Ok(()));
        assert_eq!(seq.begin_overlapping(1).unwrap_err(), NotBegun::Stopped("write failed".into()));
    }

    #[test]
    fn a_failure_outside_a_round_stops_the_next_round_but_not_the_running_one() {
        let seq = Sequencer::new(&SITE);
        let running = seq.begin(1).expect("nothing runs");
        seq.fail("index update failed".into());
        seq.fail("a second reason is not kept".into());
        seq.end(running, Ok(()));
        assert_eq!(seq.begin(1).unwrap_err(), NotBegun::Stopped("index update failed".into()));
        assert_eq!(seq.stopped().as_deref(), Some("index update failed"));
        assert_eq!(seq.counts(), (1, 1));
    }

    #[test]
    fn a_joiner_waits_for_a_begun_round_then_runs_its_own() {
        let seq = Arc::new(Sequencer::new(&SITE));
        let begun = seq.begin(1).expect("nothing runs");
        let led = Arc::new(AtomicU64::new(0));
        let joiner = {
            let (seq, led) = (seq.clone(), led.clone());
            std::thread::spawn(move || {
                seq.join(
                    || {
                        led.fetch_add(1, Ordering::SeqCst);
                        Ok::<(), String>(())
                    },
                    |why| why,
                )
            })
        };
        joined(&seq, 2);
        // The joiner's round may only begin after the running one: it has not led yet.
        assert_eq!(led.load(Ordering::SeqCst), 0);
        seq.end(begun, Ok(()));
        joiner.join().unwrap().unwrap();
        assert_eq!(led.load(Ordering::SeqCst), 1);
        assert_eq!(seq.counts(), (2, 2));
    }

    #[test]
    fn a_caller_alone_leads_its_own_round() {
        let seq = Sequencer::new(&SITE);
        let mut led = 0;
        for _ in 0..3 {
            seq.join(
                || {
                    led += 1;
                    Ok::<(), String>(())
                },
                |why| why,
            )
            .unwrap();
        }
        assert_eq!(led, 3);
        assert_eq!(seq.counts(), (3, 3));
    }
}
