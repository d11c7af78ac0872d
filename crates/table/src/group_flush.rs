//! Commits share block writes and device flushes (group commit).
//!
//! A commit's rows are in the cache, their blocks dirty (`cache.rs`); what it needs before
//! it may expire its undo records is those blocks written and then a device flush. The
//! leader of a round does both for every commit waiting: it writes every dirty block,
//! each once, under the store's mutex (`write` below: every block write goes through that
//! mutex, so two writes of one block never race), then flushes outside it, so other
//! transactions change rows meanwhile. A flush covers every write completed before it
//! starts, so commits that arrive while one round runs all wait for the next one, which
//! one of them leads: under load one round serves many commits, and the changes of several
//! to one block (a table's last block, as inserts fill it) reach the device as one write.
//!
//! Numbering: `started` counts the flushes begun, `done` the flushes finished, one at a time
//! in order. A commit takes `target = started + 1` (the first flush to begin from now on) and
//! returns once `done >= target`, leading that flush itself when none is running.

use parking_lot::{Condvar, Mutex};

/// The contention profile's site of a commit waiting for another's group flush.
static FLUSH_WAIT: shale_space::contention::Site =
    shale_space::contention::Site::new("table: group flush wait");
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

    /// Returns once a round that began after this call has completed: `write` (the dirty
    /// blocks) and then a device flush.
    ///
    /// # Errors
    /// The error of that round's write or flush (or of an earlier failed one): the caller
    /// stops the store; its changes stay active in the undo log, rolled back at the next
    /// open.
    pub(crate) fn flush(&self, write: impl Fn() -> Result<()>) -> Result<()> {
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
                // A hand-off: this commit waits for the round another leads.
                FLUSH_WAIT.wait(|| self.cv.wait(&mut st));
                continue;
            }
            st.running = true;
            st.started += 1;
            let n = st.started;
            drop(st);
            let result = write().and_then(|()| Ok(self.queue.lock().flush()?));
            st = self.state.lock();
            st.running = false;
            st.flushes += 1;
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

    /// (device flushes made, commits that waited for one).
    pub(crate) fn counts(&self) -> (u64, u64) {
        let st = self.state.lock();
        (st.flushes, st.commits)
    }
}
