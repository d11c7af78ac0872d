//! Run to completion: a worker's turns, run by its own thread or by a caller that waits for
//! them.
//!
//! An engine whose requests one worker serves (the hash engine's shard worker: its queue of
//! requests, its device queue, its batches and their group commit) pays two thread hand-offs
//! for every request a caller waits on: the submission wakes the worker, the answer wakes the
//! caller, and a shard busy with one client keeps two threads busy (issue #45, part 4). When
//! nobody is running the worker, the caller can run its turns itself and skip both, as
//! KV-SSD's host driver and SpanDB's run-to-completion clients do. [`Driver`] keeps the
//! worker's state behind a lock held by whoever runs a turn:
//!
//! - A caller that queued a request and waits for it calls [`Driver::drive_until`]: if nobody
//!   holds the worker it runs turns until its request is answered; otherwise it wakes the
//!   worker's thread ([`Driver::wake`]) and returns, to wait for its answer as before.
//! - A caller that queued a request it does not wait for (a ticket, the completion queue)
//!   wakes the thread.
//! - The worker's thread ([`Driver::run`]) sleeps until woken, then runs turns until the
//!   worker is idle (nothing queued, nothing in flight) or closed.
//! - A caller that leaves a worker not idle (others' requests in flight, a batch being
//!   written) wakes the thread, so nothing waits for a caller that is gone.
//!
//! Why nothing queued is stranded: whenever the worker is not idle or a request is queued,
//! someone holds the worker or the thread has been woken since. A request is queued before
//! its caller tries the lock; a caller that fails the try wakes the thread, which then takes
//! the lock (waiting for the holder) and runs a turn that takes the request; a holder that
//! leaves checks idleness while it still holds the lock and wakes the thread if it is not.
//! A wake-up is a flag set under the wake lock, so one given before the thread sleeps is not
//! lost. Lock order: the worker, then the wake state; a thread holding the wake state never
//! takes the worker.
//!
//! The primitives come through `super::sync`, so `crates/lsm-model` compiles this very file
//! against shuttle's and explores the hand-over (`tests/driver.rs` there).

use super::sync::{Condvar, Mutex};

/// What a turn of the worker left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// There is more to do: queued requests, requests in flight, a batch being written.
    Busy,
    /// Nothing queued and nothing in flight.
    Idle,
    /// The worker has finished every request and closed; no turn runs after this.
    Closed,
}

/// A worker whose turns a [`Driver`] runs.
pub trait Worker {
    /// Runs one turn: takes what is queued, starts what it can, reaps what completed (waiting
    /// for a completion only when the turn found nothing else to do).
    fn turn(&mut self) -> Step;
    /// Whether a turn would find nothing to do now.
    fn idle(&self) -> bool;
}

#[derive(Default)]
struct Wake {
    /// The thread must run turns (someone queued work, or left the worker busy).
    woken: bool,
    /// Turns run by callers and by the thread since the driver was made.
    caller_turns: u64,
    thread_turns: u64,
}

/// A worker, and who runs its turns (module comment).
pub struct Driver<W> {
    worker: Mutex<W>,
    wake: Mutex<Wake>,
    cv: Condvar,
}

/// Turns run so far, by callers and by the worker's thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DriverStats {
    /// Turns callers ran while they waited for their requests.
    pub caller_turns: u64,
    /// Turns the worker's thread ran.
    pub thread_turns: u64,
}

impl<W: Worker> Driver<W> {
    /// A driver of `worker`; start its thread with [`Driver::run`].
    pub fn new(worker: W) -> Driver<W> {
        Driver { worker: Mutex::new(worker), wake: Mutex::new(Wake::default()), cv: Condvar::new() }
    }

    /// Wakes the worker's thread: work was queued, or left in flight, that no caller runs.
    pub fn wake(&self) {
        let mut w = self.wake.lock();
        w.woken = true;
        drop(w);
        self.cv.notify_one();
    }

    /// Runs the worker's turns on this thread until `done` holds, if nobody else is running
    /// them; returns whether it did. A caller calls it after queuing the request that `done`
    /// watches, then waits for that request's answer either way.
    pub fn drive_until(&self, done: impl Fn() -> bool) -> bool {
        let Some(mut worker) = self.worker.try_lock() else {
            // Whoever holds it may have looked at the queue before this caller's request
            // reached it, and be about to leave: the thread will look again.
            self.wake();
            return false;
        };
        let mut turns = 0;
        while !done() {
            turns += 1;
            match worker.turn() {
                Step::Busy => {}
                // The request is not the worker's to answer any more (a closing store answers
                // every request before it closes): the caller's own wait settles it.
                Step::Idle | Step::Closed => break,
            }
        }
        let busy = !worker.idle();
        drop(worker);
        let mut w = self.wake.lock();
        w.caller_turns += turns;
        if busy {
            w.woken = true;
            drop(w);
            self.cv.notify_one();
        }
        true
    }

    /// The worker's thread: sleeps until woken, runs turns until the worker is idle, and
    /// returns once a turn says the worker closed.
    pub fn run(&self) {
        loop {
            {
                let mut w = self.wake.lock();
                while !w.woken {
                    self.cv.wait(&mut w);
                }
                w.woken = false;
            }
            let mut worker = self.worker.lock();
            let mut turns = 0;
            let step = loop {
                turns += 1;
                match worker.turn() {
                    Step::Busy => {}
                    step => break step,
                }
            };
            drop(worker);
            self.wake.lock().thread_turns += turns;
            if step == Step::Closed {
                return;
            }
        }
    }

    /// Turns run so far.
    pub fn stats(&self) -> DriverStats {
        let w = self.wake.lock();
        DriverStats { caller_turns: w.caller_turns, thread_turns: w.thread_turns }
    }
}
