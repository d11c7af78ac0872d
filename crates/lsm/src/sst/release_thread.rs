//! One thread serving a [`ReleaseQueue`]: started on the first job handed (most stores never
//! need one), joined when dropped, after it has run every job handed to it. The SST release
//! thread (`sst/release.rs`) and the WAL's (`wal/release.rs`) are each one.

use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::Mutex;

use crate::sst::release_queue::ReleaseQueue;

/// A [`ReleaseQueue`] and the thread that serves it.
pub(crate) struct ReleaseThread<J: Send + 'static> {
    /// The thread's name.
    name: &'static str,
    /// What the thread does with each job.
    run: fn(J),
    queue: Arc<ReleaseQueue<J>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl<J: Send + 'static> ReleaseThread<J> {
    /// A thread named `name` that will `run` each job handed, not started yet.
    pub fn new(name: &'static str, run: fn(J)) -> Self {
        ReleaseThread { name, run, queue: Arc::default(), thread: Mutex::new(None) }
    }

    /// Hands `job` to the thread, starting it first if need be; should the OS refuse to start
    /// it, runs the job at once.
    pub fn hand(&self, job: J) {
        let mut thread = self.thread.lock();
        if thread.is_none() {
            let (queue, run) = (self.queue.clone(), self.run);
            match std::thread::Builder::new()
                .name(self.name.into())
                .spawn(move || queue.serve(run))
            {
                Ok(handle) => *thread = Some(handle),
                Err(e) => {
                    drop(thread);
                    log::warn!("cannot start the thread {}: {e}; releasing inline", self.name);
                    return (self.run)(job);
                }
            }
        }
        drop(thread);
        self.queue.hand(job);
    }

    /// Waits until every job handed so far is done.
    pub fn wait_idle(&self) {
        self.queue.wait_idle();
    }

    /// Jobs handed to the thread since it was made.
    pub fn handed(&self) -> u64 {
        self.queue.handed()
    }
}

impl<J: Send + 'static> Drop for ReleaseThread<J> {
    fn drop(&mut self) {
        self.queue.close();
        if let Some(thread) = self.thread.get_mut().take() {
            // Only a bug panics there. What the thread did not reach stays allocated until
            // the next open, which gives back every slot no live SST names and every WAL
            // group.
            let _ = thread.join();
        }
    }
}
