//! The async API: SpanDB's `A_put`, `A_delete`, `A_commit`, `A_get` and `A_scan`, each
//! answered at once with a [`Ticket`] that the caller polls (`A_check`), waits on or awaits.
//!
//! One request, in order:
//! 1. Submission, on the caller's thread (`Db::submit_*`). A write is checked as
//!    [`Db::write`] checks it (key sizes, ranges, the batch limit): bad input is refused here
//!    with [`Error::InvalidArgument`], never queued. A get first asks the memtables, as a
//!    synchronous get would (`ReadView::memtables`), then the SSTs as far as memory goes
//!    (held indexes and filters, cached data blocks: `Inner::get_from_memory`): when that
//!    decides, the ticket comes back already complete, with no queue hop and no other thread
//!    involved (SpanDB's "lucky read", widened to the block cache).
//! 2. Admission: at most `Options::async_queue_depth` requests are admitted and not yet
//!    complete; past that the submission answers [`Error::Busy`] at once, nothing is queued,
//!    and the caller resubmits. So a caller never blocks, and the queue's memory is bounded.
//! 3. A worker (`Options::async_workers` threads, started by the first queued request) takes
//!    either every queued write, or the oldest queued read, alternating between the two when
//!    both wait, so neither starves.
//! 4. Writes: the worker appends the queued batches, in submission order, into combined
//!    batches of at most [`COMBINED_BATCH_BYTES_MAX`] (and the store's batch limit), and
//!    commits each through the synchronous write path, synced if any of its writes asked
//!    (SpanDB's worker that "grabs all and builds the WAL batch"). A combined batch is one
//!    WAL record, atomic, so each write in it stays atomic, and async writers get group commit
//!    without a thread per write; the write path still groups the commit with concurrent
//!    synchronous writers. A failed commit fails every write in it.
//! 5. Reads: a get through the whole read path, a scan through an iterator.
//! 6. Completion: the request's place is freed, then its ticket completed, so a caller that
//!    saw its ticket complete finds room for the next submission.
//!
//! What a completed ticket promises is what the synchronous call promises on return: a write
//! is in the WAL (durable with `sync`, surviving a crash of the process without) and visible
//! to every read that starts after; a read saw every write whose ticket (or synchronous call)
//! completed before it was submitted. Requests outstanding together have no order among
//! them: two workers may commit two writes in either order, and a get submitted while a put
//! of its key is outstanding may see the put or not. To order two writes, wait for the first
//! ticket, or put both in one batch.
//!
//! Shutdown (`Db::close` and drop): the queue stops taking work, the workers serve every
//! request still queued, with the background threads still running (so a write stalled for
//! room gets it), and are joined before the store flushes. Every ticket outstanding then
//! completes with its real result; none is left hanging. A worker that panics (a bug) drops
//! its requests' completers, which complete their tickets with [`Error::Stopped`], and goes on
//! serving the queue.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::options::{ReadOptions, WriteOptions};
use crate::stats::Stats;
use crate::ticket::{self, Completer, Ticket};

use super::pool::panic_message;
use super::{Db, Inner, MEMTABLE_OVERHEAD_PER_OP, Snapshot};

/// Most bytes (memtable footprint) of one batch a worker builds from queued writes: as the
/// write path's group cap, so one commit does not keep the writes behind it waiting on a long
/// append. A single write larger than this is committed alone.
const COMBINED_BATCH_BYTES_MAX: usize = 1 << 20;

/// A scan's result: its entries, key and value, in key order.
pub type ScanEntries = Vec<(Vec<u8>, Vec<u8>)>;

/// The async API's queue and workers, one per store.
pub(super) struct AsyncApi {
    queue: Arc<Queue>,
    /// The worker threads, once started.
    workers: Mutex<Vec<JoinHandle<()>>>,
    /// Whether every worker runs (the first queued request starts them).
    started: AtomicBool,
    /// `Options::async_workers`.
    worker_count: usize,
}

struct Queue {
    state: Mutex<Queued>,
    /// Wakes a worker: a request queued, or shutdown.
    work: Condvar,
    /// `Options::async_queue_depth`.
    depth: usize,
    counters: Counters,
}

#[derive(Default)]
struct Queued {
    writes: VecDeque<WriteRequest>,
    reads: VecDeque<ReadRequest>,
    /// Admitted and not yet complete: queued, or being served.
    outstanding: usize,
    /// Set by shutdown: the workers end once nothing is queued.
    closing: bool,
}

#[derive(Default)]
struct Counters {
    submitted: AtomicU64,
    completed: AtomicU64,
    lucky_reads: AtomicU64,
    busy: AtomicU64,
    write_batches: AtomicU64,
}

struct WriteRequest {
    batch: WriteBatch,
    sync: bool,
    done: Completer<()>,
}

enum ReadRequest {
    Get { key: Vec<u8>, opts: QueuedReadOptions, done: Completer<Option<Vec<u8>>> },
    Scan { start: Vec<u8>, limit: usize, opts: QueuedReadOptions, done: Completer<ScanEntries> },
}

/// A read's options while it waits in the queue: the snapshot held by a clone of its own, so
/// that the versions it reads stay kept after the caller's snapshot drops.
struct QueuedReadOptions {
    snapshot: Option<Snapshot>,
    lower_bound: Option<Vec<u8>>,
    upper_bound: Option<Vec<u8>>,
    prefix: Option<Vec<u8>>,
}

impl QueuedReadOptions {
    fn new(opts: &ReadOptions<'_>) -> QueuedReadOptions {
        QueuedReadOptions {
            snapshot: opts.snapshot.cloned(),
            lower_bound: opts.lower_bound.clone(),
            upper_bound: opts.upper_bound.clone(),
            prefix: opts.prefix.clone(),
        }
    }

    fn options(&self) -> ReadOptions<'_> {
        ReadOptions {
            snapshot: self.snapshot.as_ref(),
            lower_bound: self.lower_bound.clone(),
            upper_bound: self.upper_bound.clone(),
            prefix: self.prefix.clone(),
        }
    }
}

/// What a worker takes from the queue in one turn.
enum Job {
    Writes(Vec<WriteRequest>),
    Read(ReadRequest),
}

impl Job {
    fn requests(&self) -> usize {
        match self {
            Job::Writes(w) => w.len(),
            Job::Read(_) => 1,
        }
    }
}

impl Db {
    /// Submits a put of `key` to `value` without waiting for it (SpanDB's `A_put`). The
    /// ticket completes once the write is done, as [`Db::write`] returns: in the WAL (durable
    /// with `opts.sync`), visible to every read that starts after.
    ///
    /// ```
    /// use shale_lsm::{Db, Error, Options, WriteOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::small_for_tests())?;
    /// let mut tickets = Vec::new();
    /// for i in 0..100u32 {
    ///     let key = format!("key{i:03}");
    ///     loop {
    ///         match db.submit_put(key.as_bytes(), b"v", &WriteOptions::default()) {
    ///             Ok(t) => break tickets.push(t),
    ///             // The queue is full: let the oldest request finish, then resubmit.
    ///             Err(Error::Busy) => tickets.remove(0).wait()?,
    ///             Err(e) => return Err(e.into()),
    ///         }
    ///     }
    /// }
    /// for t in tickets {
    ///     t.wait()?;
    /// }
    /// assert_eq!(db.get(b"key042")?, Some(b"v".to_vec()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// At submission, nothing queued: [`Error::Busy`] when `Options::async_queue_depth`
    /// requests are outstanding (resubmit later); [`Error::InvalidArgument`] for an oversized
    /// key or value; [`Error::ReadOnly`] on a read-only store; an I/O error if a worker thread
    /// cannot be started. Through the ticket: [`Db::write`]'s errors.
    pub fn submit_put(&self, key: &[u8], value: &[u8], opts: &WriteOptions) -> Result<Ticket<()>> {
        let mut b = WriteBatch::new();
        b.put(key, value);
        self.submit_batch(b, opts)
    }

    /// Submits a delete of `key` without waiting for it (SpanDB's `A_delete`).
    ///
    /// # Errors
    /// As [`Db::submit_put`].
    pub fn submit_delete(&self, key: &[u8], opts: &WriteOptions) -> Result<Ticket<()>> {
        let mut b = WriteBatch::new();
        b.delete(key);
        self.submit_batch(b, opts)
    }

    /// Submits a batch, applied atomically, without waiting for it (SpanDB's `A_commit`). The
    /// batch is copied only once admitted, so after [`Error::Busy`] the caller still has it to
    /// resubmit. An empty batch gets a ticket complete at once.
    ///
    /// # Errors
    /// As [`Db::submit_put`]; a batch over the limit of [`Db::write`] or with an empty range
    /// delete is [`Error::InvalidArgument`] at submission.
    pub fn submit_write(&self, batch: &WriteBatch, opts: &WriteOptions) -> Result<Ticket<()>> {
        if !self.check_async_write(batch)? {
            return Ok(self.async_api.answered(Ok(())));
        }
        self.async_api.enqueue(&self.inner, |done| {
            Request::Write(WriteRequest { batch: batch.clone(), sync: opts.sync, done })
        })
    }

    /// Submits a get of `key` (SpanDB's `A_get`). Memory is asked first, on this thread: the
    /// memtables, then the SSTs whose index and filter their readers hold, as far as the block
    /// cache has their data blocks. When that decides (a value, a tombstone, or the key absent
    /// from every SST), the ticket is complete on return and no queue is involved
    /// ([`Stats::async_lucky_reads`] counts them; they never answer [`Error::Busy`]). A read
    /// that needs the device goes to a worker.
    ///
    /// ```
    /// use shale_lsm::{Db, Options, ReadOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::small_for_tests())?;
    /// db.put(b"hot", b"in the memtable")?;
    /// let lucky = db.submit_get(b"hot", &ReadOptions::default())?;
    /// assert!(lucky.is_done(), "answered on this thread");
    /// assert_eq!(lucky.wait()?, Some(b"in the memtable".to_vec()));
    /// db.flush()?; // the new SST's blocks are cached as they are written
    /// let from_cache = db.submit_get(b"hot", &ReadOptions::default())?;
    /// assert!(from_cache.is_done(), "a cached block answers on this thread too");
    /// assert_eq!(from_cache.wait()?, Some(b"in the memtable".to_vec()));
    /// assert_eq!(db.stats().async_lucky_reads, 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// At submission: [`Error::Busy`] (a read the memtables could not answer, with the queue
    /// full); an I/O error if a worker thread cannot be started. Through the ticket:
    /// [`Db::get_opt`]'s errors.
    pub fn submit_get(&self, key: &[u8], opts: &ReadOptions) -> Result<Ticket<Option<Vec<u8>>>> {
        let answer = match self.inner.get_from_memory(key, opts) {
            // Bad input is refused at submission, as for every async call.
            Err(e @ Error::InvalidArgument(_)) => return Err(e),
            Ok(None) => None,
            Ok(Some(value)) => Some(Ok(value)),
            Err(e) => Some(Err(e)),
        };
        if let Some(answer) = answer {
            self.async_api.queue.counters.lucky_reads.fetch_add(1, Ordering::Relaxed);
            return Ok(self.async_api.answered(answer));
        }
        self.async_api.enqueue(&self.inner, |done| {
            Request::Read(ReadRequest::Get {
                key: key.to_vec(),
                opts: QueuedReadOptions::new(opts),
                done,
            })
        })
    }

    /// Submits a scan (SpanDB's `A_scan`): up to `limit` entries from the first key at or
    /// after `start`, in key order, within the bounds or prefix of `opts` and at its snapshot
    /// (the latest state when the scan runs, without one). The entries come back together.
    ///
    /// ```
    /// use shale_lsm::{Db, Options, ReadOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::small_for_tests())?;
    /// for k in ["a", "b", "c", "d"] {
    ///     db.put(k.as_bytes(), b"x")?;
    /// }
    /// let below_d = ReadOptions { upper_bound: Some(b"d".to_vec()), ..Default::default() };
    /// let entries = db.submit_scan(b"b", 10, &below_d)?.wait()?;
    /// let keys: Vec<&[u8]> = entries.iter().map(|(k, _)| k.as_slice()).collect();
    /// assert_eq!(keys, [&b"b"[..], b"c"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// At submission: [`Error::Busy`]; an I/O error if a worker thread cannot be started.
    /// Through the ticket: an iterator's errors ([`Error::Corruption`], the device's).
    pub fn submit_scan(
        &self,
        start: &[u8],
        limit: usize,
        opts: &ReadOptions,
    ) -> Result<Ticket<ScanEntries>> {
        if limit == 0 {
            return Ok(self.async_api.answered(Ok(Vec::new())));
        }
        self.async_api.enqueue(&self.inner, |done| {
            Request::Read(ReadRequest::Scan {
                start: start.to_vec(),
                limit,
                opts: QueuedReadOptions::new(opts),
                done,
            })
        })
    }

    /// [`Db::submit_write`] of a batch built here, which needs no copy.
    fn submit_batch(&self, batch: WriteBatch, opts: &WriteOptions) -> Result<Ticket<()>> {
        if !self.check_async_write(&batch)? {
            return Ok(self.async_api.answered(Ok(())));
        }
        self.async_api.enqueue(&self.inner, |done| {
            Request::Write(WriteRequest { batch, sync: opts.sync, done })
        })
    }

    /// Stage 1 for a write: what [`Db::write`] refuses is refused before it is queued.
    /// `Ok(false)` for an empty batch, which has nothing to queue.
    fn check_async_write(&self, batch: &WriteBatch) -> Result<bool> {
        self.inner.refuse_if_read_only("write")?;
        self.inner.check_batch(batch)?;
        Ok(!batch.is_empty())
    }
}

/// A request on its way into the queue.
enum Request {
    Write(WriteRequest),
    Read(ReadRequest),
}

impl AsyncApi {
    pub(super) fn new(queue_depth: usize, worker_count: usize) -> AsyncApi {
        AsyncApi {
            queue: Arc::new(Queue {
                state: Mutex::new(Queued::default()),
                work: Condvar::new(),
                depth: queue_depth,
                counters: Counters::default(),
            }),
            workers: Mutex::new(Vec::new()),
            started: AtomicBool::new(false),
            worker_count,
        }
    }

    /// A ticket answered at submission (counted as submitted and completed).
    fn answered<T>(&self, result: Result<T>) -> Ticket<T> {
        let c = &self.queue.counters;
        c.submitted.fetch_add(1, Ordering::Relaxed);
        c.completed.fetch_add(1, Ordering::Relaxed);
        Ticket::ready(result)
    }

    /// Stage 2: admits the request `make` builds around its completer, or answers
    /// [`Error::Busy`] without building it.
    fn enqueue<T>(
        &self,
        inner: &Arc<Inner>,
        make: impl FnOnce(Completer<T>) -> Request,
    ) -> Result<Ticket<T>> {
        self.start_workers(inner)?;
        let q = &self.queue;
        let ticket = {
            let mut st = q.state.lock();
            if st.closing {
                return Err(Error::Stopped("the store is closing".into()));
            }
            if st.outstanding >= q.depth {
                drop(st);
                q.counters.busy.fetch_add(1, Ordering::Relaxed);
                return Err(Error::Busy);
            }
            let (ticket, done) = ticket::pending();
            match make(done) {
                Request::Write(w) => st.writes.push_back(w),
                Request::Read(r) => st.reads.push_back(r),
            }
            st.outstanding += 1;
            ticket
        };
        q.counters.submitted.fetch_add(1, Ordering::Relaxed);
        q.work.notify_one();
        Ok(ticket)
    }

    /// Starts the workers if they do not all run yet. A store that never queues a request
    /// never has them.
    fn start_workers(&self, inner: &Arc<Inner>) -> Result<()> {
        if self.started.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut workers = self.workers.lock();
        while workers.len() < self.worker_count {
            let (queue, inner) = (self.queue.clone(), inner.clone());
            let handle = std::thread::Builder::new()
                .name("shale-async".into())
                .spawn(move || queue.serve(&inner))
                .map_err(|source| {
                    // The workers that did start stay; the next submission tries again.
                    Error::Io(shale_io::Error::Io { op: shale_io::OpKind::Read, offset: 0, source })
                })?;
            workers.push(handle);
        }
        self.started.store(true, Ordering::Release);
        Ok(())
    }

    /// Serves every queued request, then ends and joins the workers (close and drop). No
    /// request can be submitted meanwhile: both take the store by value.
    pub(super) fn shutdown(&self) {
        self.queue.state.lock().closing = true;
        self.queue.work.notify_all();
        for w in self.workers.lock().drain(..) {
            let _ = w.join();
        }
    }

    /// Adds the async API's counters to `stats`.
    pub(super) fn add_stats(&self, stats: &mut Stats) {
        let c = &self.queue.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        stats.async_submitted = get(&c.submitted);
        stats.async_completed = get(&c.completed);
        stats.async_lucky_reads = get(&c.lucky_reads);
        stats.async_busy = get(&c.busy);
        stats.async_write_batches = get(&c.write_batches);
    }
}

impl Queue {
    /// A worker's loop (stages 3 to 6), until shutdown finds the queue empty.
    fn serve(&self, inner: &Inner) {
        let mut last_was_writes = false;
        while let Some(job) = self.next_job(last_was_writes) {
            last_was_writes = matches!(job, Job::Writes(_));
            let mut places = Places { queue: self, left: job.requests() };
            // A panic here is a bug; the job's completers, dropped as it unwinds, complete
            // their tickets with an error, and `places` frees what the job held. The worker
            // goes on: the queue must never be left without one.
            let served = std::panic::catch_unwind(AssertUnwindSafe(|| match job {
                Job::Writes(writes) => self.commit_writes(inner, writes, &mut places),
                Job::Read(read) => self.serve_read(inner, read, &mut places),
            }));
            if let Err(payload) = served {
                log::error!("async worker panicked: {}", panic_message(&*payload));
            }
        }
    }

    /// Stage 3: every queued write, or the oldest queued read (a read first if the last turn
    /// took writes and one waits); `None` once shutdown finds nothing queued.
    fn next_job(&self, last_was_writes: bool) -> Option<Job> {
        let mut st = self.state.lock();
        loop {
            let read_first = last_was_writes && !st.reads.is_empty();
            if !st.writes.is_empty() && !read_first {
                return Some(Job::Writes(st.writes.drain(..).collect()));
            }
            if let Some(read) = st.reads.pop_front() {
                return Some(Job::Read(read));
            }
            if st.closing {
                return None;
            }
            self.work.wait(&mut st);
        }
    }

    /// Stage 4: commits `writes` in combined batches, completing each batch's tickets as
    /// soon as it is committed.
    fn commit_writes(&self, inner: &Inner, writes: Vec<WriteRequest>, places: &mut Places<'_>) {
        let cap = inner.batch_limit().min(COMBINED_BATCH_BYTES_MAX);
        let mut combined = Combined::default();
        for w in writes {
            let footprint = w.batch.encoded_len() + w.batch.len() * MEMTABLE_OVERHEAD_PER_OP;
            if !combined.members.is_empty() && combined.footprint + footprint > cap {
                self.commit(inner, std::mem::take(&mut combined), places);
            }
            combined.add(w, footprint);
        }
        if !combined.members.is_empty() {
            self.commit(inner, combined, places);
        }
    }

    fn commit(&self, inner: &Inner, combined: Combined, places: &mut Places<'_>) {
        let batch = combined.batch.expect("a combined batch has members");
        let result = inner.write(&batch, &WriteOptions { sync: combined.sync });
        self.counters.write_batches.fetch_add(1, Ordering::Relaxed);
        let results: Vec<Result<()>> = combined
            .members
            .iter()
            .map(|_| result.as_ref().map(|_| ()).map_err(crate::sst::duplicate_error))
            .collect();
        self.complete(combined.members.into_iter().zip(results), places);
    }

    /// Stage 5.
    fn serve_read(&self, inner: &Inner, read: ReadRequest, places: &mut Places<'_>) {
        match read {
            ReadRequest::Get { key, opts, done } => {
                let result = inner.get(&key, &opts.options());
                self.complete([(done, result)], places);
            }
            ReadRequest::Scan { start, limit, opts, done } => {
                let result = scan(inner, &start, limit, &opts.options());
                self.complete([(done, result)], places);
            }
        }
    }

    /// Stage 6: frees the requests' places, then completes their tickets.
    fn complete<T>(
        &self,
        results: impl IntoIterator<Item = (Completer<T>, Result<T>), IntoIter: ExactSizeIterator>,
        places: &mut Places<'_>,
    ) {
        let results = results.into_iter();
        places.release(results.len());
        self.counters.completed.fetch_add(results.len() as u64, Ordering::Relaxed);
        for (done, result) in results {
            done.complete(result);
        }
    }
}

/// Up to `limit` entries from `start` on (stage 5 of a scan).
fn scan(inner: &Inner, start: &[u8], limit: usize, opts: &ReadOptions) -> Result<ScanEntries> {
    let mut it = inner.iter(opts);
    it.seek(start);
    let mut entries = Vec::new();
    while it.valid() && entries.len() < limit {
        entries.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status()?;
    Ok(entries)
}

/// Queued writes being packed into one batch.
#[derive(Default)]
struct Combined {
    /// The first write's own batch, then the others appended (no copy for a write alone).
    batch: Option<WriteBatch>,
    footprint: usize,
    sync: bool,
    members: Vec<Completer<()>>,
}

impl Combined {
    fn add(&mut self, w: WriteRequest, footprint: usize) {
        match &mut self.batch {
            Some(b) => b.append(&w.batch),
            None => self.batch = Some(w.batch),
        }
        self.footprint += footprint;
        self.sync |= w.sync;
        self.members.push(w.done);
    }
}

/// The queue places a job holds: freed as its requests complete, and whatever is left when
/// it drops (a job that panicked).
struct Places<'a> {
    queue: &'a Queue,
    left: usize,
}

impl Places<'_> {
    fn release(&mut self, n: usize) {
        debug_assert!(n <= self.left, "a job frees only the places it holds");
        let n = n.min(self.left);
        self.left -= n;
        self.queue.state.lock().outstanding -= n;
    }
}

impl Drop for Places<'_> {
    fn drop(&mut self) {
        if self.left > 0 {
            let left = self.left;
            self.release(left);
        }
    }
}
