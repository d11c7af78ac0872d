//! Queue pairs: several queues of one device used at once by any number of threads, each
//! with a completion poller thread of its own, in one of LATTE's four CPU affinity modes (its
//! Algorithm 2 and Table III).
//!
//! Life of a batch of requests ([`QueuePairs::run`]):
//! 1. The caller weighs each request (`lambda * bytes` of its class, [`Weights`], as the
//!    single-threaded [`crate::Dispatcher`] does) and pushes it on the queue of the pair whose
//!    requests in flight weigh least among those with room, under that pair's lock. A pair
//!    whose lock is taken is passed over for the next lightest; if every pair is full, the
//!    caller waits for a poller to free room.
//! 2. The pair's poller, woken if it slept, hands the pushed requests to the kernel and polls
//!    for their completions; each completion goes back to its batch, and the batch's last one
//!    wakes its caller. Results come back in the order of the requests.
//!
//! Only pollers enter the kernel. An io_uring request's completion work runs in the thread
//! that handed it to the kernel (in cooperative mode, only when that thread next enters the
//! kernel), so a caller that submitted and then slept on its batch could hold its own
//! completions hostage. With a polling kernel thread per queue ([`SqPoll`], on by default,
//! io_uring only) that thread picks requests up from the ring and runs their completion work;
//! without one the poller's `reap(0)` submits them.
//!
//! The affinity modes place each pair's two sides: the submission side (the queue's polling
//! kernel thread) and the completion poller. CPUs are indices into the process's CPUs, taken
//! modulo their count ([`crate::affinity::cpu_at`]), for pair `i` of `n` CPUs:
//!
//! | mode        | submission side            | completion poller | LATTE's trade-off            |
//! |-------------|----------------------------|-------------------|------------------------------|
//! | Naive       | the scheduler's choice     | the scheduler's   | migrations, cache misses     |
//! | PairBinding | CPU `i`                    | CPU `i`           | SQ and CQ compete for a core |
//! | Separated   | CPU `2i`                   | CPU `2i + 1`      | half the cores poll          |
//! | Skew        | CPU `1 + i mod (n - 1)`    | CPU 0, every pair | one core checks every CQ     |
//!
//! Pollers wait the way [`PollerWait`] says: `Spin` polls without pause while its pair has
//! requests in flight (LATTE's design: a core per poller); `Adaptive`, the default, polls for
//! its window and then sleeps in the kernel until a completion, holding its pair's lock (a
//! caller passes over a locked pair). A poller whose pair has nothing in flight sleeps until
//! a request arrives.
//!
//! ```
//! use shale_io::{AlignedBuf, Device, MemoryDevice, Op, QueuePairOptions, QueuePairs};
//!
//! let dev = MemoryDevice::new(1 << 20, 4096)?;
//! let pairs = QueuePairs::new(&QueuePairOptions { pairs: 2, ..Default::default() }, |o| {
//!     dev.open_queue(o)
//! })?;
//! pairs.write_at(8192, AlignedBuf::padded_copy(b"pair", 4096), false)?;
//! let ops = vec![Op::Read { offset: 8192, buf: AlignedBuf::zeroed(4096) }];
//! let read = pairs.run(ops).pop().unwrap()?.unwrap();
//! assert_eq!(&read[..4], b"pair");
//! # Ok::<(), shale_io::Error>(())
//! ```

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::affinity;
use crate::buf::AlignedBuf;
use crate::device::{Completion, Op, PollMode, Queue, QueueOptions, Request, SqPoll};
use crate::dispatch::Weights;
use crate::error::{Error, OpKind, Result};

/// Most queue pairs in one [`QueuePairs`].
pub const QUEUE_PAIRS_MAX: usize = 64;

/// Where each queue pair's submission side and completion poller run (see the module
/// comment's table).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Affinity {
    /// No binding: the scheduler places every thread (LATTE's evaluation default).
    #[default]
    Naive,
    /// Pair `i`'s submission side and poller both on CPU `i`.
    PairBinding,
    /// Pair `i`'s submission side on CPU `2i`, its poller on CPU `2i + 1`.
    Separated,
    /// Submission sides spread over CPUs 1.., every poller on CPU 0.
    Skew,
}

impl Affinity {
    /// The four modes, in the paper's order.
    pub const ALL: [Affinity; 4] =
        [Affinity::Naive, Affinity::PairBinding, Affinity::Separated, Affinity::Skew];

    /// The mode named `name`: naive, pair-binding, separated, skew.
    pub fn parse(name: &str) -> Option<Affinity> {
        Affinity::ALL.into_iter().find(|m| m.name() == name.to_ascii_lowercase())
    }

    /// The name [`Affinity::parse`] reads.
    pub fn name(self) -> &'static str {
        match self {
            Affinity::Naive => "naive",
            Affinity::PairBinding => "pair-binding",
            Affinity::Separated => "separated",
            Affinity::Skew => "skew",
        }
    }

    /// The placement of `pairs` queue pairs on `cpus` CPUs in `mode` (the module comment's
    /// table); a machine with fewer CPUs than the mode wants shares them round the table.
    pub fn plan(self, pairs: usize, cpus: usize) -> Vec<PairCpus> {
        let cpus = cpus.max(1);
        (0..pairs)
            .map(|i| {
                let (sq, poller) = match self {
                    Affinity::Naive => return PairCpus { sq: None, poller: None },
                    Affinity::PairBinding => (i % cpus, i % cpus),
                    Affinity::Separated => ((2 * i) % cpus, (2 * i + 1) % cpus),
                    Affinity::Skew if cpus == 1 => (0, 0),
                    Affinity::Skew => (1 + i % (cpus - 1), 0),
                };
                PairCpus { sq: Some(sq), poller: Some(poller) }
            })
            .collect()
    }
}

/// The CPUs (indices into the process's CPUs) of one pair's two sides; `None`: unbound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairCpus {
    /// The submission side (the queue's polling kernel thread).
    pub sq: Option<usize>,
    /// The completion poller.
    pub poller: Option<usize>,
}

/// How a poller waits for its pair's completions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PollerWait {
    /// Poll without pause while requests are in flight: the lowest latency, a busy core per
    /// poller (LATTE's design, for machines with cores to spare).
    Spin,
    /// Poll for `spin`, then sleep in the kernel until a completion arrives.
    Adaptive {
        /// How long to poll before sleeping.
        spin: Duration,
    },
}

impl Default for PollerWait {
    fn default() -> PollerWait {
        PollerWait::Adaptive { spin: Duration::from_micros(20) }
    }
}

/// Options for [`QueuePairs::new`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueuePairOptions {
    /// Queue pairs, 1 to [`QUEUE_PAIRS_MAX`].
    pub pairs: usize,
    /// Each queue's depth.
    pub depth: u32,
    /// Where the pairs' threads run.
    pub affinity: Affinity,
    /// The lambdas that weigh requests.
    pub weights: Weights,
    /// A polling kernel thread per queue for submissions ([`SqPoll`]; io_uring only, ignored
    /// by the other backends): on by default, as the submission side of LATTE's pairs.
    pub sq_poll: bool,
    /// How long a polling kernel thread polls an empty ring before it sleeps.
    pub sq_idle: Duration,
    /// How pollers wait.
    pub poller: PollerWait,
}

impl Default for QueuePairOptions {
    fn default() -> QueuePairOptions {
        QueuePairOptions {
            pairs: 2,
            depth: 32,
            affinity: Affinity::default(),
            weights: Weights::default(),
            sq_poll: true,
            sq_idle: Duration::from_millis(1),
            poller: PollerWait::default(),
        }
    }
}

impl QueuePairOptions {
    /// Checks the options.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the option and what is accepted.
    pub fn validate(&self) -> Result<()> {
        if self.pairs == 0 || self.pairs > QUEUE_PAIRS_MAX {
            return Err(Error::InvalidArgument(format!(
                "{} queue pairs outside 1..={QUEUE_PAIRS_MAX}",
                self.pairs
            )));
        }
        QueueOptions { depth: self.depth, ..QueueOptions::default() }.validate()
    }
}

/// What one pair did, and where its poller runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PairStats {
    /// Requests it took.
    pub requests: u64,
    /// Bytes they moved.
    pub bytes: u64,
    /// `lambda * bytes` of its requests in flight now.
    pub pending: u64,
    /// Where the plan put its two sides.
    pub cpus: Option<PairCpus>,
    /// The CPUs its poller found itself allowed on once started (its binding, as the kernel
    /// sees it).
    pub poller_cpus: Vec<usize>,
}

/// Several queues of one device, each with a completion poller: see the module comment.
pub struct QueuePairs {
    shared: Arc<Shared>,
    pollers: Vec<JoinHandle<()>>,
    plan: Vec<PairCpus>,
}

struct Shared {
    pairs: Vec<Pair>,
    weights: Weights,
    /// Where the previous write ended, plus one (0: no write yet).
    last_write_end: AtomicU64,
    /// Callers waiting for room in a full set of pairs.
    room_waiters: AtomicUsize,
    room: Mutex<()>,
    room_freed: Condvar,
}

struct Pair {
    inner: Mutex<PairInner>,
    /// Wakes a poller whose pair had nothing in flight.
    work: Condvar,
    /// `lambda * bytes` of the requests in flight: read without the lock to choose a pair.
    pending: AtomicU64,
    /// Requests in flight (the queue's count, for choosing without the lock).
    in_flight: AtomicUsize,
    depth: usize,
    /// Set when the queue failed as a whole: no request goes to it again.
    broken: AtomicBool,
    requests: AtomicU64,
    bytes: AtomicU64,
    poller_cpus: Mutex<Vec<usize>>,
}

struct PairInner {
    queue: Box<dyn Queue>,
    /// The requests in flight by tag (the index here), and where their results go.
    slots: Vec<Option<Waiting>>,
    free: Vec<usize>,
    /// Why the queue failed as a whole, once it has.
    broken: Option<String>,
    stop: bool,
}

/// A request in flight: its batch, its place in the batch, its weight.
struct Waiting {
    batch: Arc<Batch>,
    index: usize,
    weight: u64,
}

/// The results of one [`QueuePairs::run`], filled in by the pollers.
struct Batch {
    state: Mutex<BatchState>,
    done: Condvar,
}

struct BatchState {
    left: usize,
    results: Vec<Option<Result<Option<AlignedBuf>>>>,
}

/// What pushing a request on one pair came to.
enum Push {
    Pushed,
    /// No room (or the lock was taken): the request comes back to try elsewhere.
    Again(Op),
}

impl QueuePairs {
    /// `opts.pairs` queues, each opened by `open` with the options it is given (its depth,
    /// its polling kernel thread placed by the affinity plan), and a poller thread per queue.
    ///
    /// # Errors
    /// Bad options ([`QueuePairOptions::validate`]), `open`'s error (a kernel refusing a
    /// polling thread included), or [`Error::Unsupported`] if a poller thread cannot start.
    pub fn new<E: From<Error>>(
        opts: &QueuePairOptions,
        mut open: impl FnMut(&QueueOptions) -> std::result::Result<Box<dyn Queue>, E>,
    ) -> std::result::Result<QueuePairs, E> {
        opts.validate()?;
        let plan = opts.affinity.plan(opts.pairs, affinity::process_cpus().len());
        let mut pairs = Vec::with_capacity(plan.len());
        for cpus in &plan {
            let queue = open(&QueueOptions {
                depth: opts.depth,
                // The poller does its own polling; a queue's wait is the sleep after it.
                poll: PollMode::Blocking,
                sq_poll: opts.sq_poll.then_some(SqPoll { cpu: cpus.sq, idle: opts.sq_idle }),
            })?;
            let depth = queue.depth();
            pairs.push(Pair {
                inner: Mutex::new(PairInner {
                    queue,
                    slots: (0..depth).map(|_| None).collect(),
                    free: (0..depth).rev().collect(),
                    broken: None,
                    stop: false,
                }),
                work: Condvar::new(),
                pending: AtomicU64::new(0),
                in_flight: AtomicUsize::new(0),
                depth,
                broken: AtomicBool::new(false),
                requests: AtomicU64::new(0),
                bytes: AtomicU64::new(0),
                poller_cpus: Mutex::new(Vec::new()),
            });
        }
        let shared = Arc::new(Shared {
            pairs,
            weights: opts.weights,
            last_write_end: AtomicU64::new(0),
            room_waiters: AtomicUsize::new(0),
            room: Mutex::new(()),
            room_freed: Condvar::new(),
        });
        let mut pairs = QueuePairs { shared, pollers: Vec::with_capacity(plan.len()), plan };
        for i in 0..pairs.plan.len() {
            let (shared, cpu, wait) = (pairs.shared.clone(), pairs.plan[i].poller, opts.poller);
            let poller = std::thread::Builder::new()
                .name(format!("shale-poller-{i}"))
                .spawn(move || shared.poll(i, cpu, wait))
                .map_err(|e| Error::Unsupported(format!("cannot start a poller thread: {e}")))
                .map_err(E::from)?;
            // Pushed at once, so that a failure here still stops the pollers started.
            pairs.pollers.push(poller);
        }
        Ok(pairs)
    }

    /// Number of queue pairs.
    pub fn pairs(&self) -> usize {
        self.shared.pairs.len()
    }

    /// Runs every request of `ops` across the pairs and waits for all of them; their results
    /// come back in the order of `ops` (a read's or a write's buffer, `None` for a flush).
    /// Requests of one batch may complete in any order: a batch that needs one write before
    /// another sends them in two.
    pub fn run(&self, ops: Vec<Op>) -> Vec<Result<Option<AlignedBuf>>> {
        if ops.is_empty() {
            return Vec::new();
        }
        let batch = Arc::new(Batch::new(ops.len()));
        for (index, op) in ops.into_iter().enumerate() {
            self.shared.send(&batch, index, op);
        }
        batch.wait()
    }

    /// Runs one request and waits for it.
    ///
    /// # Errors
    /// The request's own failure.
    pub fn execute(&self, op: Op) -> Result<Option<AlignedBuf>> {
        self.run(vec![op]).pop().expect("one result per request")
    }

    /// Reads `len` bytes at `offset`.
    ///
    /// # Errors
    /// The read's failure.
    pub fn read_at(&self, offset: u64, len: usize) -> Result<AlignedBuf> {
        let read = self.execute(Op::Read { offset, buf: AlignedBuf::zeroed(len) })?;
        Ok(read.expect("a read gives its buffer back"))
    }

    /// Writes `buf` at `offset` (`durable`: through to stable media), giving the buffer back.
    ///
    /// # Errors
    /// The write's failure.
    pub fn write_at(&self, offset: u64, buf: AlignedBuf, durable: bool) -> Result<AlignedBuf> {
        let written = self.execute(Op::Write { offset, buf, durable })?;
        Ok(written.expect("a write gives its buffer back"))
    }

    /// Makes every write completed so far durable (one flush covers the device, whichever
    /// queue it goes through).
    ///
    /// # Errors
    /// The flush's failure.
    pub fn flush(&self) -> Result<()> {
        self.execute(Op::Flush).map(drop)
    }

    /// Each pair's counters and placement.
    pub fn stats(&self) -> Vec<PairStats> {
        self.shared
            .pairs
            .iter()
            .zip(&self.plan)
            .map(|(p, cpus)| PairStats {
                requests: p.requests.load(Ordering::Relaxed),
                bytes: p.bytes.load(Ordering::Relaxed),
                pending: p.pending.load(Ordering::Relaxed),
                cpus: Some(*cpus),
                poller_cpus: p.poller_cpus.lock().clone(),
            })
            .collect()
    }
}

impl Drop for QueuePairs {
    fn drop(&mut self) {
        // No batch is in flight: `run` borrows the pairs until its batch is done.
        for pair in &self.shared.pairs {
            pair.inner.lock().stop = true;
            pair.work.notify_all();
        }
        for poller in self.pollers.drain(..) {
            if poller.join().is_err() {
                log::error!("a queue pair's poller panicked");
            }
        }
    }
}

impl std::fmt::Debug for QueuePairs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueuePairs")
            .field("pairs", &self.shared.pairs.len())
            .field("plan", &self.plan)
            .field("weights", &self.shared.weights)
            .finish()
    }
}

impl Shared {
    /// Stage 1 of the module comment for one request: weighs it, pushes it on the lightest
    /// pair that takes it, and waits for room while none does.
    fn send(&self, batch: &Arc<Batch>, index: usize, mut op: Op) {
        let weight = self.weigh(&op);
        loop {
            let mut order: Vec<usize> = (0..self.pairs.len())
                .filter(|&p| {
                    let pair = &self.pairs[p];
                    !pair.broken.load(Ordering::Relaxed)
                        && pair.in_flight.load(Ordering::Relaxed) < pair.depth
                })
                .collect();
            if order.is_empty() && self.pairs.iter().all(|p| p.broken.load(Ordering::Relaxed)) {
                batch.finish(index, Err(self.broken_error()));
                return;
            }
            order.sort_by_key(|&p| (self.pairs[p].pending.load(Ordering::Relaxed), p));
            // Each pair without waiting for its lock, then the lightest waiting for it.
            let tries = order.iter().map(|&p| (p, false)).chain(order.first().map(|&p| (p, true)));
            for (p, wait) in tries {
                let pair = &self.pairs[p];
                let guard = if wait { Some(pair.inner.lock()) } else { pair.inner.try_lock() };
                let Some(inner) = guard else { continue };
                match pair.push(inner, batch, index, op, weight) {
                    Ok(Push::Pushed) => return,
                    Ok(Push::Again(back)) => op = back,
                    Err(e) => {
                        batch.finish(index, Err(e));
                        return;
                    }
                }
            }
            self.wait_for_room();
        }
    }

    /// `lambda * bytes` of `op`, noting where a write ends for the next one's class.
    fn weigh(&self, op: &Op) -> u64 {
        let previous = match op {
            Op::Write { offset, .. } => {
                let end = offset + op.len() as u64;
                self.last_write_end.swap(end + 1, Ordering::Relaxed).checked_sub(1)
            }
            Op::Read { .. } | Op::Flush => None,
        };
        self.weights.weight(op, previous)
    }

    /// Waits until a poller frees room, or a millisecond (a wake-up sent just before this
    /// waiter counted itself is missed, and the next look finds the room anyway).
    fn wait_for_room(&self) {
        let mut room = self.room.lock();
        self.room_waiters.fetch_add(1, Ordering::SeqCst);
        self.room_freed.wait_for(&mut room, Duration::from_millis(1));
        self.room_waiters.fetch_sub(1, Ordering::SeqCst);
    }

    fn broken_error(&self) -> Error {
        let why = self.pairs.iter().find_map(|p| p.inner.lock().broken.clone());
        queue_failed(why.as_deref().unwrap_or("every queue failed"))
    }

    /// Stage 2 for pair `i`: its poller's loop, until the pairs are dropped.
    fn poll(&self, i: usize, cpu: Option<usize>, wait: PollerWait) {
        let pair = &self.pairs[i];
        if let Some(cpu) = cpu {
            // A refusal leaves the poller where the scheduler puts it; stats show where.
            affinity::pin_current_thread(cpu);
        }
        *pair.poller_cpus.lock() = affinity::current_thread_cpus();
        let mut done: Vec<Completion> = Vec::new();
        let mut finished: Vec<(Arc<Batch>, usize, Result<Option<AlignedBuf>>)> = Vec::new();
        let mut empty_since: Option<Instant> = None;
        loop {
            let mut inner = pair.inner.lock();
            while inner.queue.in_flight() == 0 || inner.broken.is_some() {
                if inner.stop {
                    return;
                }
                empty_since = None;
                pair.work.wait(&mut inner);
            }
            let mut reaped = inner.queue.reap(0, &mut done);
            if reaped.is_ok() && done.is_empty() {
                let since = *empty_since.get_or_insert_with(Instant::now);
                let spin = match wait {
                    PollerWait::Spin => true,
                    PollerWait::Adaptive { spin } => since.elapsed() < spin,
                };
                if spin {
                    drop(inner);
                    std::hint::spin_loop();
                    continue;
                }
                reaped = inner.queue.reap(1, &mut done);
            }
            empty_since = None;
            for c in done.drain(..) {
                let w = inner.slots[c.tag as usize].take().expect("a completion of a request sent");
                inner.free.push(c.tag as usize);
                pair.pending.fetch_sub(w.weight, Ordering::Relaxed);
                pair.in_flight.fetch_sub(1, Ordering::Relaxed);
                finished.push((w.batch, w.index, c.result.map(|()| c.buf)));
            }
            if let Err(e) = reaped {
                // The queue failed as a whole: its requests still in the kernel keep their
                // buffers in the queue until it is dropped, and their callers hear now.
                let why = crate::Chain(&e).to_string();
                log::error!("queue pair {i} failed: {why}");
                for slot in inner.slots.iter_mut() {
                    if let Some(w) = slot.take() {
                        finished.push((w.batch, w.index, Err(queue_failed(&why))));
                    }
                }
                inner.broken = Some(why);
                pair.broken.store(true, Ordering::Relaxed);
            }
            drop(inner);
            let freed = !finished.is_empty();
            for (batch, index, result) in finished.drain(..) {
                batch.finish(index, result);
            }
            if freed && self.room_waiters.load(Ordering::SeqCst) > 0 {
                let _room = self.room.lock();
                self.room_freed.notify_all();
            }
        }
    }
}

impl Pair {
    /// Pushes `op` on this pair's queue (the caller holds `inner`, the pair's lock).
    fn push(
        &self,
        mut inner: MutexGuard<'_, PairInner>,
        batch: &Arc<Batch>,
        index: usize,
        op: Op,
        weight: u64,
    ) -> Result<Push> {
        if inner.broken.is_some() {
            return Ok(Push::Again(op));
        }
        let Some(slot) = inner.free.pop() else { return Ok(Push::Again(op)) };
        let bytes = op.len() as u64;
        match inner.queue.submit(Request { tag: slot as u64, op }) {
            Ok(()) => {}
            Err((Error::Busy, req)) => {
                inner.free.push(slot);
                return Ok(Push::Again(req.op));
            }
            Err((e, _)) => {
                inner.free.push(slot);
                return Err(e);
            }
        }
        inner.slots[slot] = Some(Waiting { batch: batch.clone(), index, weight });
        self.pending.fetch_add(weight, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
        if inner.queue.in_flight() == 1 {
            // The poller slept with nothing in flight.
            self.work.notify_one();
        }
        Ok(Push::Pushed)
    }
}

impl Batch {
    fn new(n: usize) -> Batch {
        Batch {
            state: Mutex::new(BatchState { left: n, results: (0..n).map(|_| None).collect() }),
            done: Condvar::new(),
        }
    }

    fn finish(&self, index: usize, result: Result<Option<AlignedBuf>>) {
        let mut state = self.state.lock();
        debug_assert!(state.results[index].is_none(), "request {index} finished twice");
        state.results[index] = Some(result);
        state.left -= 1;
        if state.left == 0 {
            self.done.notify_one();
        }
    }

    fn wait(&self) -> Vec<Result<Option<AlignedBuf>>> {
        let mut state = self.state.lock();
        while state.left > 0 {
            self.done.wait(&mut state);
        }
        state.results.drain(..).map(|r| r.expect("every request of a batch finished")).collect()
    }
}

/// The error of a request on a queue that failed as a whole.
fn queue_failed(why: &str) -> Error {
    Error::Io {
        op: OpKind::Read,
        offset: 0,
        source: io::Error::other(format!("queue failed: {why}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Device;
    use crate::memory::MemoryDevice;

    const KB4: usize = 4096;

    #[test]
    fn each_mode_places_the_pairs_as_the_table_says() {
        let some = |v: &[(usize, usize)]| {
            v.iter().map(|&(sq, p)| PairCpus { sq: Some(sq), poller: Some(p) }).collect::<Vec<_>>()
        };
        assert!(Affinity::Naive.plan(3, 8).iter().all(|c| c.sq.is_none() && c.poller.is_none()));
        assert_eq!(Affinity::PairBinding.plan(3, 8), some(&[(0, 0), (1, 1), (2, 2)]));
        assert_eq!(Affinity::Separated.plan(3, 8), some(&[(0, 1), (2, 3), (4, 5)]));
        assert_eq!(Affinity::Skew.plan(3, 8), some(&[(1, 0), (2, 0), (3, 0)]));
        // Fewer CPUs than the mode wants: round the table.
        assert_eq!(Affinity::PairBinding.plan(3, 2), some(&[(0, 0), (1, 1), (0, 0)]));
        assert_eq!(Affinity::Separated.plan(3, 4), some(&[(0, 1), (2, 3), (0, 1)]));
        assert_eq!(Affinity::Skew.plan(3, 2), some(&[(1, 0), (1, 0), (1, 0)]));
        assert_eq!(Affinity::Skew.plan(2, 1), some(&[(0, 0), (0, 0)]));
        for m in Affinity::ALL {
            assert_eq!(Affinity::parse(m.name()), Some(m));
        }
        assert_eq!(Affinity::parse("Pair-Binding"), Some(Affinity::PairBinding));
        assert_eq!(Affinity::parse("pairs"), None);
    }

    #[test]
    fn bad_options_are_refused() {
        let dev = MemoryDevice::new(1 << 20, 512).unwrap();
        for pairs in [0, QUEUE_PAIRS_MAX + 1] {
            let opts = QueuePairOptions { pairs, ..Default::default() };
            let err = QueuePairs::new(&opts, |o| dev.open_queue(o)).unwrap_err();
            assert!(
                matches!(&err, Error::InvalidArgument(m) if m.contains("queue pairs")),
                "{err}"
            );
        }
        let opts = QueuePairOptions { depth: 0, ..Default::default() };
        assert!(matches!(
            QueuePairs::new(&opts, |o| dev.open_queue(o)),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn a_refused_request_fails_alone_in_its_place() {
        let dev = MemoryDevice::new(1 << 20, 512).unwrap();
        let pairs = QueuePairs::new(&QueuePairOptions::default(), |o| dev.open_queue(o)).unwrap();
        let mut buf = AlignedBuf::zeroed(KB4);
        buf.fill(7);
        let ops = vec![
            Op::Write { offset: 0, buf, durable: false },
            Op::Read { offset: 100, buf: AlignedBuf::zeroed(512) },
            Op::Read { offset: 0, buf: AlignedBuf::zeroed(KB4) },
        ];
        let got = pairs.run(ops);
        assert!(got[0].is_ok());
        assert!(matches!(got[1], Err(Error::InvalidArgument(_))), "{:?}", got[1].as_ref().err());
        // Requests of one batch may run in any order, so the read may or may not see the write.
        assert!(got[2].is_ok());
        assert_eq!(pairs.read_at(0, KB4).unwrap()[..], [7; KB4][..]);
        assert_eq!(pairs.run(Vec::new()).len(), 0);
    }
}
