//! Commits share device flushes (group commit).
//!
//! A commit's rows are in place once their block writes complete (each write waits for its
//! completion, under the store's mutex); what it still needs before it may expire its undo
//! records is a device flush that starts after those writes completed. A flush covers every
//! write completed before it starts, so commits that arrive while one flush runs all wait for
//! the next one, which one of them starts: under load one flush serves many commits, and the
//! flush runs outside the store's mutex, so other transactions write meanwhile.
//!
//! Numbering: `started` counts the flushes begun, `done` the flushes finished, one at a time
//! in order. A commit takes `target = started + 1` (the first flush to begin from now on) and
//! returns once `done >= target`, leading that flush itself when none is running.

use parking_lot::{Condvar, Mutex};
use shale_io::QueueExt;
use shale_space::VolumeQueue;

use crate::error::{Error, Result};

struct State {
    started: u64,
    done: u64,
    running: bool,
    /// The first failed flush: every commit waiting then, and every later one, fails.
    failed: Option<String>,
    /// Device flushes made, and commits that waited for one, for the stats.
    flushes: u64,
    commits: u64,
}

/// The store's shared flusher: a queue of its own for flushes, and who waits for which.
pub(crate) struct GroupFlush {
    queue: Mutex<VolumeQueue>,
    state: Mutex<State>,
    cv: Condvar,
}

impl GroupFlush {
    pub(crate) fn new(queue: VolumeQueue) -> GroupFlush {
        GroupFlush {
            queue: Mutex::new(queue),
            state: Mutex::new(State {
                started: 0,
                done: 0,
                running: false,
                failed: None,
                flushes: 0,
                commits: 0,
            }),
            cv: Condvar::new(),
        }
    }

    /// Returns once a device flush that began after this call has completed.
    ///
    /// # Errors
    /// The device's error for that flush (or an earlier failed one): the caller stops the
    /// store; its changes stay active in the undo log, rolled back at the next open.
    pub(crate) fn flush(&self) -> Result<()> {
        let mut st = self.state.lock();
        let target = st.started + 1;
        st.commits += 1;
        loop {
            if let Some(why) = &st.failed {
                return Err(Error::Stopped(why.clone()));
            }
            if st.done >= target {
                return Ok(());
            }
            if st.running {
                self.cv.wait(&mut st);
                continue;
            }
            st.running = true;
            st.started += 1;
            let n = st.started;
            drop(st);
            let result = self.queue.lock().flush();
            st = self.state.lock();
            st.running = false;
            st.flushes += 1;
            match result {
                Ok(()) => st.done = n,
                Err(e) => {
                    let e = Error::from(e);
                    st.failed.get_or_insert_with(|| e.to_string());
                    self.cv.notify_all();
                    return Err(e);
                }
            }
            self.cv.notify_all();
        }
    }

    /// (device flushes made, commits that waited for one).
    pub(crate) fn counts(&self) -> (u64, u64) {
        let st = self.state.lock();
        (st.flushes, st.commits)
    }
}
