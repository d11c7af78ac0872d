//! Run to completion under shuttle (`space/src/page_log/driver.rs`): callers queue requests
//! and run the worker's turns themselves when nobody else does, or wake its thread; a toy
//! worker answers one request in flight per turn, so a caller often leaves others' requests
//! in flight and must hand the worker over. Checked: every request is answered (a stranded
//! one leaves its caller blocked for good, which shuttle reports as a deadlock), the thread
//! ends at the close, and callers did run turns themselves in some schedules. Each of the
//! driver's two wake-ups is needed by one test: without the wake of a caller that leaves the
//! worker busy, the first deadlocks (work left in flight); without the wake of a caller
//! that finds the worker held, the last does (a request queued just after the holder's last
//! look).

use std::collections::VecDeque;
use std::sync::Arc;

use shale_lsm_model::driver::{Driver, Step, Worker};
use shuttle::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use shuttle::sync::{Condvar, Mutex};

const ITERATIONS: usize = 2000;
const PCT_DEPTH: usize = 3;

/// A request's answer: set once, waited for on a condition variable.
#[derive(Default)]
struct Answer {
    done: AtomicBool,
    lock: Mutex<bool>,
    cv: Condvar,
}

impl Answer {
    fn give(&self) {
        *self.lock.lock().unwrap() = true;
        self.done.store(true, Ordering::SeqCst);
        self.cv.notify_all();
    }

    fn wait(&self) {
        let mut g = self.lock.lock().unwrap();
        while !*g {
            g = self.cv.wait(g).unwrap();
        }
    }
}

/// The submission queue the callers and the worker share, and the close flag.
#[derive(Default)]
struct Queue {
    requests: Mutex<VecDeque<Arc<Answer>>>,
    closing: AtomicBool,
}

/// A worker that takes every queued request in flight and answers the oldest one per turn;
/// each request it takes also leaves it a turn of work of its own, done once nothing is in
/// flight (as the hash engine's garbage collection or a carried page are), and `background`
/// is answered when the last of that work for all `expected` requests is done.
struct Toy {
    queue: Arc<Queue>,
    in_flight: VecDeque<Arc<Answer>>,
    answered: Arc<AtomicUsize>,
    background: Arc<Answer>,
    /// Turns of its own work the worker still has to do.
    background_left: usize,
    /// Whether requests leave the worker work of its own.
    leaves_work: bool,
    /// Requests taken so far, and how many the run makes.
    taken: usize,
    expected: usize,
}

impl Worker for Toy {
    fn turn(&mut self) -> Step {
        let taken: Vec<_> = self.queue.requests.lock().unwrap().drain(..).collect();
        if self.leaves_work {
            self.background_left += taken.len();
        }
        self.taken += taken.len();
        self.in_flight.extend(taken);
        if let Some(a) = self.in_flight.pop_front() {
            self.answered.fetch_add(1, Ordering::SeqCst);
            a.give();
            return Step::Busy;
        }
        if self.background_left > 0 {
            self.background_left -= 1;
            if self.background_left == 0 && self.taken == self.expected {
                self.background.give();
            }
            return Step::Busy;
        }
        if self.queue.requests.lock().unwrap().is_empty() {
            if self.queue.closing.load(Ordering::SeqCst) {
                return Step::Closed;
            }
            return Step::Idle;
        }
        Step::Busy
    }

    fn idle(&self) -> bool {
        self.in_flight.is_empty()
            && self.background_left == 0
            && self.queue.requests.lock().unwrap().is_empty()
    }
}

/// Three synchronous callers of two requests each, and one that queues without waiting in
/// the driver (a ticket's caller), then the worker's own work finishing, then the close.
fn callers_and_the_thread_answer_every_request() -> u64 {
    run_callers(&[(true, 2), (true, 2), (true, 2), (false, 2)], true)
}

/// `callers`: whether each drives (a synchronous caller) and how many requests it makes;
/// `background_work`: whether each request leaves the worker a turn of work of its own.
fn run_callers(callers_spec: &[(bool, usize)], background_work: bool) -> u64 {
    let expected = callers_spec.iter().map(|(_, n)| n).sum();
    let queue = Arc::new(Queue::default());
    let answered = Arc::new(AtomicUsize::new(0));
    let background = Arc::new(Answer::default());
    let toy = Toy {
        queue: queue.clone(),
        in_flight: VecDeque::new(),
        answered: answered.clone(),
        background: background.clone(),
        background_left: 0,
        leaves_work: background_work,
        taken: 0,
        expected,
    };
    let driver = Arc::new(Driver::new(toy));
    let thread = {
        let driver = driver.clone();
        shuttle::thread::spawn(move || driver.run())
    };
    let mut callers = Vec::new();
    for &(sync, requests) in callers_spec {
        let (driver, queue) = (driver.clone(), queue.clone());
        callers.push(shuttle::thread::spawn(move || {
            for _ in 0..requests {
                let a = Arc::new(Answer::default());
                queue.requests.lock().unwrap().push_back(a.clone());
                if sync {
                    let watched = a.clone();
                    driver.drive_until(move || watched.done.load(Ordering::SeqCst));
                } else {
                    driver.wake();
                }
                a.wait();
            }
        }));
    }
    for c in callers {
        c.join().unwrap();
    }
    assert_eq!(answered.load(Ordering::SeqCst), expected);
    // The work a caller's turn started and left goes on without any caller.
    if background_work {
        background.wait();
    }
    queue.closing.store(true, Ordering::SeqCst);
    driver.wake();
    thread.join().unwrap();
    driver.stats().caller_turns
}

#[test]
fn every_request_is_answered_and_the_thread_ends_at_the_close() {
    let run = || {
        callers_and_the_thread_answer_every_request();
    };
    shuttle::check_random(run, ITERATIONS);
    shuttle::check_pct(run, ITERATIONS, PCT_DEPTH);
}

#[test]
fn callers_run_turns_themselves_in_some_schedules() {
    // Not every schedule lets a caller drive (the thread may hold the worker), so this
    // counts over many: some must.
    let driven = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let d = driven.clone();
    shuttle::check_random(
        move || {
            d.fetch_add(
                callers_and_the_thread_answer_every_request(),
                std::sync::atomic::Ordering::SeqCst,
            );
        },
        200,
    );
    assert!(driven.load(std::sync::atomic::Ordering::SeqCst) > 0);
}

#[test]
fn a_caller_that_finds_the_worker_held_is_never_stranded() {
    // Two callers of one request each: the second may queue just after the first looked at
    // the queue for the last time, and find it still holding the worker.
    let run = || {
        run_callers(&[(true, 1), (true, 1)], false);
    };
    shuttle::check_random(run, 20_000);
    shuttle::check_pct(run, 20_000, 2);
    shuttle::check_pct(run, 20_000, PCT_DEPTH);
}
