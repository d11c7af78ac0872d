//! Sync appends with their page writes in flight side by side (SpanDB's parallel WAL).
//!
//! A write group's leader packs its records into pages under the WAL lock, as before, but
//! then takes a ticket, lets go of the lock and writes its pages as durable writes on a
//! logger queue of its own, while the next group's leader packs and writes the next pages.
//! Several groups' durable writes are then in flight at once, which is what the device is
//! fast at: on this project's machine a durable 4 KiB write takes about 125 us alone, and 8
//! of them in flight complete at 36k a second instead of 8k (`shale iobench --durable`,
//! docs/lsm.md, "The parallel WAL").
//!
//! Acknowledgement stays in order, with no hole: a group publishes its sequence numbers (and
//! its writers return) only when its own pages are durable and every earlier ticket has
//! published. Pages are durable writes, so "earlier tickets published" means every earlier
//! page is durable too; a crash can leave a later group's pages on the device after an
//! earlier group's lost ones, and recovery stops at the hole (the pages' checksum chain),
//! dropping only writes nobody was told about. A failed write fails its ticket and every
//! later one; earlier ones still complete.
//!
//! Stages of one ticket: [`LogPipeline::begin`] (under the WAL lock, so tickets follow the
//! pages' order) -> [`LogPipeline::write`] on a logger queue -> insert into the memtable ->
//! [`LogPipeline::wait_turn`] -> [`LogPipeline::published`]. A group appended under the WAL
//! lock takes its ticket with [`LogPipeline::begin_appended`] and goes the same way from the
//! insert on: groups insert side by side, and publish in ticket order.
//!
//! Loggers. How many groups may have writes in flight adapts to the load (SpanDB's head
//! thread, done inline: no thread polls), between 0 and the pool's size, where 0 means no
//! pipelining: a leader holds the WAL lock until its group has published, which gathers the
//! biggest groups. Which level is best depends on the writers and the device (measured here,
//! 2 vCPUs, fillsync of 1 KB values: with 8 threads 3 loggers gave 23.8k writes/s and none
//! 20.7k; with 32 threads none gave 49.9k and 3 loggers 44.1k, their groups four times
//! smaller), so the pipeline measures instead of guessing: every [`ADAPT_PERIOD`] it hands
//! the sync writes committed per second to a `LevelSearch`, which stays at the best level
//! it knows and probes its neighbours less and less often while they lose.

use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use shale_io::{AlignedBuf, Completion, Op, Queue, Request};

use super::level_search::LevelSearch;
use super::turns::Turns;
use crate::error::{Error, Result};

/// How often the number of loggers is reconsidered.
pub const ADAPT_PERIOD: Duration = Duration::from_millis(100);

/// Most loggers a pipeline may have (`Options::wal_loggers`' upper limit).
pub const LOGGERS_MAX: usize = 8;

/// What the pipeline's counters say, for the engine's statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PipelineStats {
    /// Sync groups whose pages went through the pipeline.
    pub groups: u64,
    /// Loggers allowed now (0: no pipelining), as of [`LogPipeline::stats`].
    pub loggers: usize,
    /// Times the number of loggers went up, and down.
    pub logger_increases: u64,
    pub logger_decreases: u64,
    /// Microseconds groups spent with their page writes in flight, summed.
    pub device_micros: u64,
    /// Microseconds groups (pipelined or appended) spent waiting for their turn after their
    /// writes completed and their inserts were done.
    pub turn_wait_micros: u64,
}

/// The logger queues and the adaptation of their number.
struct Loggers {
    /// Idle logger queues.
    idle: Vec<Box<dyn Queue>>,
    /// Loggers allowed (0: none, the leader appends with the WAL lock held), and those
    /// writing now.
    allowed: usize,
    busy: usize,
    /// The current adaptation period: when it started and the sync writes committed in it.
    period_start: Instant,
    period_writes: u64,
    /// Which level to run next, from the rates the periods committed at.
    search: LevelSearch,
    stats: PipelineStats,
}

/// The tickets of the write groups in flight ([`Turns`]), and the logger queues the sync
/// groups' pages are written on.
pub struct LogPipeline {
    turns: Turns,
    loggers: Mutex<Loggers>,
    /// Wakes leaders waiting for a logger.
    cv: Condvar,
    /// Whether the number of loggers adapts ([`LogPipeline::adapt`]).
    adaptive: bool,
}

impl LogPipeline {
    /// A pipeline writing on `queues` (one per logger). With `adaptive`, it starts with no
    /// logger allowed (no pipelining: the plain group commit, which wins on a machine where
    /// the writers' round trip limits more than the device) and adapts between none and
    /// `queues.len()`; without, every logger is allowed, always. Without a queue it never
    /// pipelines, and only orders the publication of the groups appended under the WAL lock
    /// ([`LogPipeline::begin_appended`]).
    pub fn new(queues: Vec<Box<dyn Queue>>, adaptive: bool) -> LogPipeline {
        let adaptive = adaptive && !queues.is_empty();
        let max_loggers = queues.len();
        let allowed = if adaptive { 0 } else { max_loggers };
        LogPipeline {
            turns: Turns::new(),
            loggers: Mutex::new(Loggers {
                idle: queues,
                allowed,
                busy: 0,
                period_start: Instant::now(),
                period_writes: 0,
                search: LevelSearch::new(max_loggers, allowed),
                stats: PipelineStats::default(),
            }),
            cv: Condvar::new(),
            adaptive,
        }
    }

    /// Takes a logger for a sync group's leader, waiting while the allowed loggers are all
    /// busy; `None` when no pipelining is allowed now (the leader appends with the WAL lock
    /// held) or a ticket has failed (nothing more is written). A leader takes one before it
    /// takes its group from the write queue, so that while it waits the queue fills: taking
    /// the group first left about one writer per group, each paying for a durable write of
    /// its own (fillsync, 16 threads: 1.2 writes per group and 5.4k writes/s with one logger).
    pub fn acquire(&self) -> Option<Logger<'_>> {
        let mut lg = self.loggers.lock();
        self.adapt(&mut lg);
        loop {
            if lg.allowed == 0 || self.turns.any_failed() {
                return None;
            }
            if lg.busy < lg.allowed {
                break;
            }
            self.cv.wait(&mut lg);
        }
        lg.busy += 1;
        let queue = lg.idle.pop().expect("an idle queue for every logger allowed");
        Some(Logger { pipeline: self, queue: Some(queue) })
    }

    /// A sync group of `writes` writes committed (pipelined or not): the rate the pipeline
    /// adapts to.
    pub fn committed(&self, writes: usize) {
        self.loggers.lock().period_writes += writes as u64;
    }

    /// Hands out the next ticket. Called under the WAL lock, right after the ticket's pages
    /// were packed, so tickets follow the pages' order.
    pub fn begin(&self) -> u64 {
        self.loggers.lock().stats.groups += 1;
        self.turns.begin()
    }

    /// Whether every ticket handed out has published ([`Turns::idle`]; under the WAL lock).
    pub fn idle(&self) -> bool {
        self.turns.idle()
    }

    /// Hands out the next ticket to a group appended to the WAL under the WAL lock (its
    /// pages, if any, already written): it inserts with the lock let go and publishes in
    /// ticket order. Called under the WAL lock.
    pub fn begin_appended(&self) -> u64 {
        self.turns.begin_written()
    }

    /// Writes ticket `ticket`'s pages (`(offset, page images)`) as durable writes on
    /// `logger`'s queue, gives the logger back and records the outcome for
    /// [`LogPipeline::wait_turn`]: a failed write fails this ticket and every later one.
    /// Without a logger (an earlier ticket failed) the ticket fails unwritten.
    pub fn write(&self, logger: Option<Logger<'_>>, ticket: u64, pages: Vec<(u64, AlignedBuf)>) {
        let Some(mut logger) = logger else {
            self.turns.failed(ticket, "an earlier WAL write failed".into());
            return;
        };
        let started = Instant::now();
        let queue = logger.queue.as_mut().expect("a logger holds its queue");
        let outcome = write_durably(queue.as_mut(), pages);
        let micros = started.elapsed().as_micros() as u64;
        drop(logger);
        self.loggers.lock().stats.device_micros += micros;
        match outcome {
            Ok(()) => self.turns.written(ticket),
            Err(e) => self.turns.failed(ticket, shale_io::Chain(&e).to_string()),
        }
    }

    /// Waits until `ticket` may publish: its writes completed and every earlier ticket
    /// published.
    ///
    /// # Errors
    /// [`Error::Stopped`] if this ticket's or an earlier ticket's writes failed: its writes
    /// may follow a hole, and must not be acknowledged.
    pub fn wait_turn(&self, ticket: u64) -> Result<()> {
        let started = Instant::now();
        let turn = self.turns.wait_turn(ticket);
        // Nearly every group's turn has come already: it then skips the loggers' lock, which
        // every group would take otherwise.
        let waited = started.elapsed().as_micros() as u64;
        if waited > 0 {
            self.loggers.lock().stats.turn_wait_micros += waited;
        }
        turn.map_err(|why| Error::Stopped(format!("WAL write failed: {why}")))
    }

    /// `ticket` published (it had its turn): the next one may.
    pub fn published(&self, ticket: u64) {
        self.turns.published(ticket);
    }

    /// Every ticket below this one has published: its pages, and all earlier pages, are
    /// durable (the lsm WAL writer's `tickets_published_below`).
    pub fn published_below(&self) -> u64 {
        self.turns.published_below()
    }

    /// Waits until every ticket handed out has its pages written (durably), or the pipeline
    /// failed: before an append that is not pipelined, whose pages follow theirs.
    ///
    /// # Errors
    /// [`Error::Stopped`] if a ticket failed.
    pub fn wait_written(&self) -> Result<()> {
        self.turns.wait_written().map_err(|why| Error::Stopped(format!("WAL write failed: {why}")))
    }

    /// Waits until every ticket handed out has published, or the pipeline failed.
    ///
    /// # Errors
    /// [`Error::Stopped`] if a ticket failed.
    pub fn wait_idle(&self) -> Result<()> {
        self.turns.wait_idle().map_err(|why| Error::Stopped(format!("WAL write failed: {why}")))
    }

    /// Every ticket not yet published fails with `why` (a leader panicked): no group waits
    /// for a turn that may never come.
    pub fn abandon(&self, why: &str) {
        self.turns.fail_unpublished(why.to_string());
        // Leaders waiting for a logger see the failure.
        self.cv.notify_all();
    }

    /// The counters, and the loggers allowed now.
    pub fn stats(&self) -> PipelineStats {
        let lg = self.loggers.lock();
        PipelineStats { loggers: lg.allowed, ..lg.stats }
    }

    /// Reconsiders the number of loggers once a period (see the module's comment).
    fn adapt(&self, st: &mut Loggers) {
        let elapsed = st.period_start.elapsed();
        if !self.adaptive || elapsed < ADAPT_PERIOD {
            return;
        }
        let rate = st.period_writes as f64 / elapsed.as_secs_f64();
        st.period_start = Instant::now();
        st.period_writes = 0;
        let next = st.search.period(rate);
        if next > st.allowed {
            st.stats.logger_increases += 1;
        } else if next < st.allowed {
            st.stats.logger_decreases += 1;
        }
        st.allowed = next;
    }
}

/// A logger queue taken from the pipeline ([`LogPipeline::acquire`]); given back when
/// dropped.
pub struct Logger<'a> {
    pipeline: &'a LogPipeline,
    queue: Option<Box<dyn Queue>>,
}

impl Drop for Logger<'_> {
    fn drop(&mut self) {
        let mut lg = self.pipeline.loggers.lock();
        lg.idle.push(self.queue.take().expect("a logger holds its queue"));
        lg.busy -= 1;
        self.pipeline.cv.notify_all();
    }
}

/// Submits every page write as a durable write and waits for all of them.
fn write_durably(queue: &mut dyn Queue, pages: Vec<(u64, AlignedBuf)>) -> Result<()> {
    let mut first_error = None;
    let mut done: Vec<Completion> = Vec::with_capacity(pages.len());
    let mut pending = 0usize;
    for (i, (offset, buf)) in pages.into_iter().enumerate() {
        while queue.in_flight() >= queue.depth() {
            pending -= reap(queue, 1, &mut done, &mut first_error);
        }
        let req = Request { tag: i as u64, op: Op::Write { offset, buf, durable: true } };
        match queue.submit(req) {
            Ok(()) => pending += 1,
            Err((e, _)) => {
                first_error.get_or_insert(e.into());
                break;
            }
        }
    }
    while pending > 0 {
        let got = reap(queue, pending, &mut done, &mut first_error);
        if got == 0 && first_error.is_some() {
            break;
        }
        pending -= got;
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Reaps at least `min` completions; returns how many, noting the first error.
fn reap(
    queue: &mut dyn Queue,
    min: usize,
    done: &mut Vec<Completion>,
    first_error: &mut Option<Error>,
) -> usize {
    done.clear();
    if let Err(e) = queue.reap(min, done) {
        first_error.get_or_insert(e.into());
    }
    for c in done.iter_mut() {
        if let Err(e) = std::mem::replace(&mut c.result, Ok(())) {
            first_error.get_or_insert(e.into());
        }
    }
    done.len()
}
