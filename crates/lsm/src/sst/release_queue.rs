//! The hand-over between the threads that drop SSTs and the thread that gives them back
//! (`sst/release.rs`), and between the WAL's writer and the thread that gives freed groups'
//! storage back (`wal/release.rs`): a queue of jobs served in order by one thread.
//!
//! Generic over the job so that `crates/lsm-model` compiles this very file against shuttle's
//! primitives (through `super::sync`) and checks it: every job handed is run exactly once,
//! [`ReleaseQueue::wait_idle`] returns only once every job handed before it is done (a job
//! taken off the queue but still running counts), and the serving thread ends after
//! [`ReleaseQueue::close`] with nothing left behind.

use std::collections::VecDeque;

use super::sync::{Condvar, Mutex};

/// Jobs waiting, the one running, and whether the queue is closed.
struct State<J> {
    jobs: VecDeque<J>,
    /// A job taken off `jobs` and not done yet.
    running: bool,
    /// No more jobs will come: the serving thread ends once `jobs` is empty.
    closed: bool,
    /// Jobs handed since the queue was made.
    handed: u64,
}

/// A queue of jobs for one serving thread.
pub struct ReleaseQueue<J> {
    state: Mutex<State<J>>,
    /// Signalled when a job is handed, when one is done and when the queue closes.
    cv: Condvar,
}

impl<J> Default for ReleaseQueue<J> {
    fn default() -> Self {
        ReleaseQueue {
            state: Mutex::new(State {
                jobs: VecDeque::new(),
                running: false,
                closed: false,
                handed: 0,
            }),
            cv: Condvar::new(),
        }
    }
}

impl<J> ReleaseQueue<J> {
    /// Queues `job` for the serving thread.
    pub fn hand(&self, job: J) {
        let mut s = self.state.lock();
        s.jobs.push_back(job);
        s.handed += 1;
        self.cv.notify_all();
    }

    /// The serving thread's loop: runs the jobs in the order handed until the queue is closed
    /// and empty.
    pub fn serve(&self, mut run: impl FnMut(J)) {
        let mut s = self.state.lock();
        loop {
            if let Some(job) = s.jobs.pop_front() {
                s.running = true;
                drop(s);
                run(job);
                s = self.state.lock();
                s.running = false;
                self.cv.notify_all();
            } else if s.closed {
                return;
            } else {
                self.cv.wait(&mut s);
            }
        }
    }

    /// No more jobs: the serving thread ends once it has run those queued.
    pub fn close(&self) {
        self.state.lock().closed = true;
        self.cv.notify_all();
    }

    /// Waits until every job handed so far is done.
    pub fn wait_idle(&self) {
        let mut s = self.state.lock();
        while !s.jobs.is_empty() || s.running {
            self.cv.wait(&mut s);
        }
    }

    /// Jobs handed since the queue was made.
    pub fn handed(&self) -> u64 {
        self.state.lock().handed
    }
}
