//! Tickets answered together under shuttle (`io/src/ticket.rs`: `Answers`, the hash engine's
//! way of answering a batch): a worker gives many tickets their results and wakes only the
//! first of the threads asleep on them; each woken thread wakes the next ones. Checked: every
//! waiter gets its own result (a stranded one blocks for good, which shuttle reports as a
//! deadlock), with waiters that go to sleep before, during and after the answers, tickets
//! polled rather than waited on, answers given in two gatherings, an `Answers` dropped
//! instead of woken, and condition variables that wake threads nobody sent a wake-up to.
//!
//! Each part of the hand-on is needed (checked by hand): with no hand-on from a woken thread,
//! the test of five sleepers in one gathering deadlocks (in the others no gathering holds
//! more sleepers than the worker wakes itself); with sleepers not held until released (a
//! thread woken by itself taking its result and leaving), every test fails, the chain's
//! release of that thread reaching nobody.

use std::sync::Arc;
use std::sync::atomic::Ordering as StdOrdering;

use shale_lsm_model::sync::SPURIOUS_WAKEUPS;
use shale_lsm_model::ticket::{Abandoned, Answers, Completer, Ticket, pending};

const ITERATIONS: usize = 2000;
const PCT_DEPTH: usize = 3;

#[derive(Debug, PartialEq)]
struct Stopped;

impl Abandoned for Stopped {
    fn abandoned() -> Stopped {
        Stopped
    }
}

/// How a client thread takes its ticket's result.
#[derive(Clone, Copy)]
enum Taker {
    /// Blocks in `Ticket::wait`.
    Wait,
    /// Polls `try_take`, yielding between polls, as a caller of the async API may.
    Poll,
}

/// `takers.len()` clients, one ticket each; a worker answers them in `gatherings` rounds of
/// `Answers` (the last one dropped rather than woken when `drop_last`), then every client
/// must have its own result.
fn answer_together(takers: &[Taker], gatherings: usize, drop_last: bool) {
    let mut completers: Vec<Completer<usize, Stopped>> = Vec::new();
    let mut clients = Vec::new();
    for (i, &taker) in takers.iter().enumerate() {
        let (ticket, completer): (Ticket<usize, Stopped>, _) = pending();
        completers.push(completer);
        clients.push(shuttle::thread::spawn(move || {
            let result = match taker {
                Taker::Wait => ticket.wait(),
                Taker::Poll => {
                    let mut ticket = ticket;
                    loop {
                        if let Some(r) = ticket.try_take() {
                            break r;
                        }
                        shuttle::thread::yield_now();
                    }
                }
            };
            assert_eq!(result, Ok(i * 7), "client {i} got another's result");
        }));
    }
    let worker = shuttle::thread::spawn(move || {
        let per = completers.len().div_ceil(gatherings);
        let mut answers = Answers::new();
        let mut completers = completers.into_iter().enumerate();
        for round in 1..=gatherings {
            for (i, c) in completers.by_ref().take(per) {
                answers.complete(c, Ok(i * 7));
            }
            if round == gatherings && drop_last {
                drop(answers);
                return;
            }
            answers.wake();
        }
    });
    worker.join().unwrap();
    for c in clients {
        c.join().unwrap();
    }
}

/// Runs `run` under shuttle's random and PCT schedulers, with condition variables that may
/// wake a thread nobody sent a wake-up to (set for every test of this file, which runs in a
/// process of its own).
fn check(run: impl Fn() + Send + Sync + 'static) {
    SPURIOUS_WAKEUPS.store(true, StdOrdering::Relaxed);
    let run = Arc::new(run);
    let r = run.clone();
    shuttle::check_random(move || r(), ITERATIONS);
    shuttle::check_pct(move || run(), ITERATIONS, PCT_DEPTH);
}

#[test]
fn every_sleeper_is_woken_by_the_chain() {
    check(|| answer_together(&[Taker::Wait; 5], 1, false));
}

#[test]
fn sleepers_and_pollers_answered_in_two_gatherings() {
    check(|| {
        answer_together(
            &[Taker::Wait, Taker::Poll, Taker::Wait, Taker::Wait, Taker::Poll, Taker::Wait],
            2,
            false,
        )
    });
}

#[test]
fn a_dropped_gathering_wakes_what_it_held() {
    check(|| answer_together(&[Taker::Wait; 4], 2, true));
}

#[test]
fn pollers_and_sleepers_answered_by_a_dropped_second_gathering() {
    check(|| answer_together(&[Taker::Wait, Taker::Poll, Taker::Wait, Taker::Wait], 2, true));
}
