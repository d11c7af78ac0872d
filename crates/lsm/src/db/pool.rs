//! The background threads: one flushes memtables, the others run compactions, several at once
//! (`db/picker.rs` keeps them on disjoint SSTs and key ranges).
//!
//! `max_background_jobs` threads in all, split as RocksDB splits them at its default of 2: one
//! flush thread and `jobs - 1` compaction threads. Flushes stay on one thread because they
//! must commit in memtable order (L0 order and WAL group recycling follow it); ADOC's tuner
//! adds threads where the debt is, in compaction.
//!
//! The number of compaction threads changes while the store runs ([`Db::set_background_jobs`]):
//! missing threads are spawned at once; surplus threads retire when they next look for work,
//! so a compaction that is running always finishes first. A thread retires by taking itself
//! off `live` under the state lock, so two threads never retire for one surplus slot.
//!
//! A thread whose job fails or panics stops the store and ends (`Inner::background_loop`),
//! also counting itself off `live`; a thread that ends because the store stopped counts itself
//! off in `Inner::next_job`. Either way exactly once, so `live` is right after a failure too.

use std::sync::Arc;
use std::thread::JoinHandle;

use crate::error::{Error, Result};
use crate::options::BACKGROUND_JOBS_MAX;

use super::{AsyncApi, Db, Inner, Job, Worker, stopped_error};

/// The compaction threads wanted and running, under the state lock.
#[derive(Debug, Default)]
pub(super) struct PoolSize {
    /// Compaction threads wanted.
    pub target: usize,
    /// Compaction threads started and not retired.
    pub live: usize,
}

impl PoolSize {
    /// Background jobs in all: the flush thread and the compaction threads wanted.
    pub fn background_jobs(&self) -> usize {
        1 + self.target
    }

    /// Whether a compaction thread looking for work should retire instead; if so, it is
    /// counted out at once.
    pub fn retire_one(&mut self) -> bool {
        let surplus = self.live > self.target;
        if surplus {
            self.live -= 1;
        }
        surplus
    }
}

impl Worker {
    /// What the thread does, for messages.
    pub(super) fn name(self) -> &'static str {
        match self {
            Worker::Flush => "flush",
            Worker::Compaction => "compaction",
        }
    }
}

impl Inner {
    /// Runs jobs until the thread is to end (`Ok`) or a job fails (`Err`, why).
    pub(super) fn run_jobs(&self, kind: Worker) -> std::result::Result<(), String> {
        loop {
            let Some(job) = self.next_job(&mut self.state.lock(), kind) else {
                return Ok(());
            };
            #[cfg(feature = "failpoints")]
            self.failpoint(&job);
            let result = match job {
                Job::Flush(mem, ltn) => self.flush_when_room(&mem, ltn),
                Job::Compact(c) => self.run_compaction(c),
            };
            result.map_err(|e| format!("background work failed: {}", shale_io::Chain(&e)))?;
        }
    }

    /// Panics where the options' failpoints say so (tests only).
    #[cfg(feature = "failpoints")]
    fn failpoint(&self, job: &Job) {
        let (after, done, what) = {
            let st = self.state.lock();
            match job {
                Job::Flush(..) => (self.opts.panic_in_flush_after, st.flushes, "flush"),
                Job::Compact(_) => {
                    (self.opts.panic_in_compaction_after, st.compactions, "compaction")
                }
            }
        };
        if after.is_some_and(|n| done >= u64::from(n)) {
            panic!("failpoint: a {what} after {done} committed");
        }
    }
}

/// The message of a panic's payload (`panic!` makes a `&str` or a `String`).
pub(super) fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message")
}

/// Compaction threads for `jobs` background jobs: all but the flush thread.
fn compaction_threads(jobs: usize) -> usize {
    jobs - 1
}

fn check_jobs(jobs: usize) -> Result<()> {
    if (2..=BACKGROUND_JOBS_MAX).contains(&jobs) {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "{jobs} background jobs: outside 2..={BACKGROUND_JOBS_MAX} (one flush thread and at least one compaction thread)"
        )))
    }
}

fn spawn(inner: &Arc<Inner>, kind: Worker) -> Result<JoinHandle<()>> {
    let name = match kind {
        Worker::Flush => "shale-flush",
        Worker::Compaction => "shale-compaction",
    };
    spawn_named(inner, name, move |inner| {
        lower_cpu_priority(inner.opts.background_cpu_priority);
        inner.background_loop(kind);
    })
}

/// Moves the calling background thread to `priority` (`Options::background_cpu_priority`);
/// a kernel that refuses leaves it where it was, which costs latency, not correctness.
fn lower_cpu_priority(priority: shale_io::CpuPriority) {
    if let Err(e) = shale_io::set_thread_cpu_priority(priority) {
        log::warn!(
            "a background thread keeps its CPU priority (the kernel refused {priority}): {e}"
        );
    }
}

/// Starts a background thread named `name` running `body` on the store; a thread the OS
/// will not start is an I/O error.
pub(super) fn spawn_named(
    inner: &Arc<Inner>,
    name: &str,
    body: impl FnOnce(Arc<Inner>) + Send + 'static,
) -> Result<JoinHandle<()>> {
    let inner = inner.clone();
    let body = move || {
        // Its waits are no caller's: it gives back the SSTs whose last handle it drops itself.
        crate::sst::release::mark_background_thread();
        body(inner);
    };
    std::thread::Builder::new().name(name.into()).spawn(body).map_err(|source| {
        Error::Io(shale_io::Error::Io { op: shale_io::OpKind::Read, offset: 0, source })
    })
}

impl Db {
    /// Starts the flush thread and `opts.max_background_jobs - 1` compaction threads.
    pub(super) fn start_workers(inner: Arc<Inner>) -> Result<Db> {
        let compactions = compaction_threads(inner.opts.max_background_jobs);
        {
            let mut st = inner.state.lock();
            st.pool = PoolSize { target: compactions, live: compactions };
        }
        let async_api = AsyncApi::new(inner.opts.async_queue_depth, inner.opts.async_workers);
        let db = Db { inner, async_api, _locks: Vec::new() };
        let kinds = std::iter::once(Worker::Flush)
            .chain(std::iter::repeat_n(Worker::Compaction, compactions));
        for kind in kinds {
            // On failure `db` drops, which shuts down the threads already started.
            let handle = spawn(&db.inner, kind)?;
            db.inner.workers.lock().push(handle);
        }
        if let Some(head) = super::tier_head::start(&db.inner)? {
            db.inner.workers.lock().push(head);
        }
        if let Some(tuner) = super::tuner_thread::start(&db.inner)? {
            db.inner.workers.lock().push(tuner);
        }
        Ok(db)
    }

    /// Changes the number of background threads while the store runs: one flushes, `jobs - 1`
    /// compact (RocksDB's `max_background_jobs`). New compaction threads start at once; surplus
    /// ones retire as soon as they finish the compaction they are running. ADOC's tuner turns
    /// this knob.
    ///
    /// ```
    /// use shale_lsm::{Db, Options};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::small_for_tests())?;
    /// db.set_background_jobs(5)?; // 1 flush + 4 compaction threads
    /// assert_eq!(db.stats().background_jobs, 5);
    /// db.set_background_jobs(2)?;
    /// # db.close()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] outside `2..=BACKGROUND_JOBS_MAX`; [`Error::Stopped`] after a
    /// background failure; an I/O error when a thread cannot be spawned (the threads that did
    /// start stay).
    pub fn set_background_jobs(&self, jobs: usize) -> Result<()> {
        self.inner.resize_pool(jobs)
    }
}

impl Inner {
    /// [`Db::set_background_jobs`], for the tuner thread too.
    pub(super) fn resize_pool(self: &Arc<Self>, jobs: usize) -> Result<()> {
        check_jobs(jobs)?;
        self.refuse_if_read_only("set_background_jobs")?;
        // Resizes run one at a time, so the handles and the counts move together; and the
        // handles' lock is taken before the shutdown flag is read, so a shutdown that drains
        // the handles either waits for this resize or is seen by it.
        let mut workers = self.workers.lock();
        let missing = {
            let mut st = self.state.lock();
            stopped_error(&st)?;
            if st.shutting_down {
                return Err(Error::InvalidArgument("the store is closing".into()));
            }
            st.pool.target = compaction_threads(jobs);
            let missing = st.pool.target.saturating_sub(st.pool.live);
            st.pool.live += missing;
            missing
        };
        // Wake idle threads so that surplus ones retire now rather than at the next job.
        self.cv.notify_all();
        let (finished, running): (Vec<_>, Vec<_>) =
            workers.drain(..).partition(|h| h.is_finished());
        *workers = running;
        for h in finished {
            let _ = h.join();
        }
        for started in 0..missing {
            match spawn(self, Worker::Compaction) {
                Ok(h) => workers.push(h),
                Err(e) => {
                    self.state.lock().pool.live -= missing - started;
                    return Err(e);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn surplus_threads_retire_one_at_a_time() {
        let mut p = PoolSize { target: 1, live: 3 };
        assert!(p.retire_one());
        assert!(p.retire_one());
        assert!(!p.retire_one(), "at the target");
        assert_eq!((p.live, p.background_jobs()), (1, 2));
        assert!(check_jobs(1).is_err() && check_jobs(BACKGROUND_JOBS_MAX + 1).is_err());
        assert!(check_jobs(2).is_ok());
    }
}
