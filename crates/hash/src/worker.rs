//! The shard's worker: one thread that serves every submitted request, with its own queue
//! of device requests, as KV-SSD's device serves its submission queue.
//!
//! Each turn of its loop, in order:
//! 1. Take every queued submission. Reads (retrieve, exist) look the key up in the index at
//!    once: an absent key completes now, a present one becomes a device read.
//! 2. When no batch is in flight, build one from the pending stores and deletes, oldest
//!    first (see [`Worker::build_batch`]): mode checks against the index, records packed into
//!    fresh pages of the active segment, one durable write. Stores and deletes behind one of
//!    the same digest wait for the next batch, so every decision is taken against an index
//!    that holds every earlier write.
//! 3. Submit reads while the device queue has room: record reads for retrieves and exists,
//!    and the reads that confirm whose key a digest entry is (needed to update the index).
//! 4. Reap completions, waiting for one only when nothing new can be done. A read completes
//!    its request (the full key compared); the batch's write, once every confirmation of it
//!    is back, updates the index and completes its requests: acknowledged means durable and
//!    visible.
//!
//! Batches in flight: the next batch forms while earlier ones are written (group commit).
//! With [`HashOptions::batches_in_flight`](crate::HashOptions::batches_in_flight) above 1,
//! queued writes are packed and submitted as the next batch while up to that many earlier
//! batches are still being written, so packing, answering and the device's writes overlap.
//! Its mode checks see the index before those batches reach it, which is sound because a
//! store or delete of a digest that a batch in flight holds waits for it (as within one
//! batch). Batches are applied and acknowledged in the order they were built, each only
//! once its own write and every earlier one's are done: a later batch's pages name the
//! oldest in flight's first page as the log's durable end, so a crash that keeps a later
//! batch and loses an earlier one ends the log at the hole, losing only unacknowledged
//! writes. Whatever must see the whole log in order (a new segment, garbage collection, a
//! checkpoint, the close) waits until every batch is written.
//!
//! Garbage collection runs in the same loop, in turns with the user's batches (see
//! [`Worker::start_gc`]): a victim segment's records still needed are copied, as they are
//! (same sequence numbers), in batches of their own, then the segment's removal is committed. A failed write stops the store (P5): its
//! requests, and every later store or delete, complete with the error; reads go on.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use shale_space::contention::Site;
use shale_space::page_log::driver::Step;
use shale_space::page_log::scan::Scanner;
use shale_space::page_log::{NotBegun, Round};

/// The contention profile's sites (`shale_space::contention`): the submission queue's mutex,
/// which callers and the worker share, and a caller waiting for room in the queue.
static SUBMIT_MUTEX: Site = Site::new("hash: submission queue mutex");
static ROOM_WAIT: Site = Site::new("hash: queue room wait");
use rustc_hash::FxHashSet;
use shale_io::ticket::Answers;
use shale_io::{AlignedBuf, Completion, Op, Queue, QueueOptions, Request as IoRequest};
use shale_space::IoClass;
use shale_space::log_page::{PAGE_BYTES, PageBuf};

use crate::completion::Reply;
use crate::error::{Error, Result};
use crate::index::{Location, Probe};
use crate::log::{Batch, LogWriter};
use crate::options::{GC_SCAN_PAGES, StoreMode};
use crate::record::{Kind, Record};
use crate::shard::Shard;

/// A submitted request.
pub(crate) enum Request {
    Store { key: Vec<u8>, value: Vec<u8>, mode: StoreMode, done: Reply<()> },
    Delete { key: Vec<u8>, done: Reply<bool> },
    Retrieve { key: Vec<u8>, done: Reply<Option<Vec<u8>>> },
    Exist { keys: Vec<Vec<u8>>, done: Reply<Vec<u8>> },
}

/// The submission queue: requests, how many are outstanding, and the close flag.
pub(crate) struct Submissions {
    state: Mutex<SubmitState>,
    /// Wakes a turn that lingers for more writes to fill a carried page (`take_submissions`).
    work: Condvar,
    /// Wakes submitters waiting for room.
    room: Condvar,
    depth: usize,
}

struct SubmitState {
    queue: VecDeque<Request>,
    /// Submitted and not yet completed.
    outstanding: usize,
    closing: bool,
    /// The worker panicked ([`Submissions::break_down`]): nothing is admitted any more.
    broken: bool,
}

impl Submissions {
    pub fn new(depth: usize) -> Submissions {
        Submissions {
            state: Mutex::new(SubmitState {
                queue: VecDeque::new(),
                outstanding: 0,
                closing: false,
                broken: false,
            }),
            work: Condvar::new(),
            room: Condvar::new(),
            depth,
        }
    }

    /// Queues `req`, or hands it back when `depth` requests are outstanding (and `wait` is
    /// false; with `wait`, blocks for room), or when the worker broke down.
    pub fn submit(&self, req: Request, wait: bool) -> std::result::Result<(), Request> {
        let mut s = SUBMIT_MUTEX.lock(&self.state);
        while s.broken || s.outstanding >= self.depth {
            if s.broken || !wait {
                return Err(req);
            }
            ROOM_WAIT.wait(|| s.unlocked(|g| self.room.wait(g)));
        }
        s.outstanding += 1;
        s.queue.push_back(req);
        drop(s);
        self.work.notify_one();
        Ok(())
    }

    /// Whether requests are queued that no turn has taken yet.
    pub fn queued(&self) -> bool {
        !SUBMIT_MUTEX.lock(&self.state).queue.is_empty()
    }

    /// Takes note that `n` requests completed.
    fn completed(&self, n: usize) {
        if n == 0 {
            return;
        }
        let mut s = SUBMIT_MUTEX.lock(&self.state);
        s.outstanding -= n;
        drop(s);
        self.room.notify_all();
    }

    /// Asks the worker to finish every outstanding request and end (its driver's thread,
    /// woken after this, runs the turns that do).
    pub fn close(&self) {
        self.state.lock().closing = true;
        self.work.notify_one();
    }

    /// Whether the store is closing.
    fn closing(&self) -> bool {
        self.state.lock().closing
    }

    /// The worker panicked: from now on nothing is admitted (`submit` hands every request
    /// back, and its caller is told the store stopped), and what is queued is dropped, each
    /// dropped reply answering its caller with the abandoned error. Submitters waiting for
    /// room are woken to be told the same.
    fn break_down(&self) {
        let queued = {
            let mut s = SUBMIT_MUTEX.lock(&self.state);
            s.broken = true;
            std::mem::take(&mut s.queue)
        };
        // Outside the lock: a dropped reply may run a task's waker.
        drop(queued);
        self.room.notify_all();
        self.work.notify_all();
    }
}

/// A device read in flight or waiting for room, and what it is for.
enum ReadFor {
    /// A retrieve's record.
    Retrieve { key: Vec<u8>, done: Reply<Option<Vec<u8>>> },
    /// One key of an exist.
    Exist { key: Vec<u8>, bit: usize, job: usize },
    /// Whether the digest entry is the key's: for entry `entry` of batch `batch` (in flight).
    Confirm { key: Vec<u8>, batch: u64, entry: usize },
}

struct Read {
    loc: Location,
    for_: ReadFor,
}

impl Read {
    /// The bytes of the record the read needs when not all of it: an exist and a
    /// confirmation ask whose record it is, so its header and key do (the first page or two,
    /// not a large value's every page).
    fn head(&self) -> Option<usize> {
        match &self.for_ {
            ReadFor::Retrieve { .. } => None,
            ReadFor::Exist { key, .. } | ReadFor::Confirm { key, .. } => {
                Some(crate::record::HEADER_BYTES + key.len())
            }
        }
    }

    /// Bytes to read, from the record's first page.
    fn len(&self) -> usize {
        match self.head() {
            None => usize::from(self.loc.pages) * PAGE_BYTES,
            Some(want) => crate::log::head_len(self.loc, want),
        }
    }

    /// The record, or its head, from `image` (what [`Read::len`] asked for).
    fn decode(&self, shard: &Shard, image: &[u8]) -> Result<Vec<u8>> {
        match self.head() {
            None => shard.record_from(image, self.loc),
            Some(want) => shard.record_head_from(image, self.loc, want),
        }
    }
}

/// An exist waiting for its reads.
struct ExistJob {
    bits: Vec<u8>,
    reads_left: usize,
    error: Option<Error>,
    done: Option<Reply<Vec<u8>>>,
}

/// What to do with the index once the batch is durable.
enum Apply {
    Store {
        key: Vec<u8>,
        /// Kept for the value cache once the index names the record.
        value: Vec<u8>,
        d: u64,
        owner: bool,
        done: Reply<()>,
    },
    Delete {
        key: Vec<u8>,
        d: u64,
        owner: bool,
        done: Reply<bool>,
    },
    /// A record copied by garbage collection from `from`: the index follows a store's copy
    /// if it still points at `from`.
    Copy {
        key: Vec<u8>,
        d: u64,
        from: Location,
        store: bool,
    },
}

/// A garbage collection in progress: the victim and the records to copy out of it.
struct Gc {
    slot: u32,
    /// The victim's image being read on the worker's queue, a chunk at a time (tag
    /// [`GC_READ_TAG`]); its survivors are not known yet.
    reading: Option<VictimRead>,
    /// The victim's image, back and being scanned for its survivors a slice a turn.
    scan: Option<GcScan>,
    /// Survivors found so far, to be copied once the scan is done.
    pending: VecDeque<(Location, Vec<u8>)>,
}

/// A victim's image being read ([`Worker::gc_victim_read`]).
struct VictimRead {
    /// The chunks read so far, in order.
    image: Vec<u8>,
    /// The victim's first byte on the volume.
    start: u64,
    /// Bytes of the whole image.
    total: usize,
}

/// A victim's image being scanned ([`Worker::gc_scan_step`]).
struct GcScan {
    image: Vec<u8>,
    scanner: Scanner,
    /// Whether a segment older than the victim exists (its tombstones may hide stores there).
    older_exists: bool,
}

/// A batch being written.
struct InFlight {
    /// Its number, in the order batches are built (its write's tag has it).
    id: u64,
    batch: Batch,
    applies: Vec<(Apply, usize)>,
    /// The applies of the records an earlier batch carried into this one's first page,
    /// handed on once that batch was written (apart from `applies`, whose indices
    /// confirmations and `carried_from` name).
    handed: Vec<(Apply, usize)>,
    confirms_left: usize,
    /// The write's result, once it completed.
    written: Option<Result<()>>,
    /// Why the batch fails even if its write succeeds: a confirmation that failed, or an
    /// earlier batch that failed (nothing after a hole in the log may be acknowledged).
    failed: Option<Error>,
    /// A batch of garbage collection's copies.
    gc: bool,
    /// Where the batch carried its last, partial page into the next batch (not written by
    /// this one: `log.rs`, module comment): its applies from this index on are the records
    /// ending in that page, handed on to the batch that writes it once this one is written.
    carried_from: Option<usize>,
    /// The group-commit round its write is (`Shard::rounds`).
    round: Round,
}

/// A partial page carried from a written batch into the next, and the records ending in it,
/// acknowledged once that batch is written.
struct Carry {
    page: PageBuf,
    locations: Vec<Location>,
    /// Each with its index into `locations`.
    applies: Vec<(Apply, usize)>,
}

/// Tags of batch writes have this bit, with the batch's number below it; reads are tagged by
/// their slot in `reads_in_flight`, garbage collection's read of its victim by
/// [`GC_READ_TAG`].
const WRITE_TAG: u64 = 1 << 63;
/// The tag of garbage collection's reads of its victim (reads of records use small indices).
const GC_READ_TAG: u64 = 1 << 62;

/// Bytes of a victim read at a time: read whole, an 8 MiB victim is one request the device
/// serves ahead of the batches' durable writes queued behind it (at 64 writers on a loop
/// device, the writes completing while it was read took 2.2 ms at the median against 0.4
/// otherwise). A chunk at a time, the victim takes one slot of the queue and a chunk's time.
const GC_READ_CHUNK_BYTES: usize = 256 << 10;

pub(crate) struct Worker {
    shard: Arc<Shard>,
    submissions: Arc<Submissions>,
    log: LogWriter,
    queue: Box<dyn Queue>,
    writes: VecDeque<Request>,
    reads_waiting: VecDeque<Read>,
    reads_in_flight: Vec<Option<Read>>,
    free_tags: Vec<usize>,
    exists: Vec<Option<ExistJob>>,
    /// Batches being written, oldest first.
    in_flight: VecDeque<InFlight>,
    /// The next batch's number.
    next_batch: u64,
    completions: Vec<Completion>,
    gc: Option<Gc>,
    /// The next batch is garbage collection's turn, if it has copies to make.
    gc_turn: bool,
    /// Log bytes written since the last checkpoint.
    since_checkpoint: u64,
    /// Bytes the last checkpoint of this open wrote (0 before the first): what
    /// `checkpoint_log_ratio` scales the interval by.
    last_checkpoint_bytes: u64,
    /// Batches applied since garbage collection last looked for a victim.
    since_gc_check: u32,
    /// The segment the log appended to at garbage collection's last look for a victim.
    gc_checked_in: Option<u32>,
    /// What the last batch carried into the next one.
    carry: Option<Carry>,
    /// Requests answered whose sleeping callers are not woken yet ([`Worker::complete`]);
    /// in a cell because answers are given from the many `&self` paths that complete.
    answers: RefCell<Answers>,
    /// A turn panicked ([`Worker::break_down`]): the worker serves nothing any more.
    broken: bool,
}

/// A batch carries its last page only when it holds at least this many new writes: several
/// callers' writes are in flight, and those the batch answers will write again. A lone write
/// (one caller waiting on each) is written whole at once, not a write later.
const CARRY_WRITES_MIN: usize = 2;

/// How long a carried page waits for new writes to fill it once its batch is written, the
/// worker having nothing else to do, before it is written alone (padded, as it would have been
/// without the carry). The callers the batch answered write again within microseconds when
/// they stream; where the device writes in about that time (memory, tmpfs) the next batch
/// would otherwise often go out before they do, with the carried page alone.
const CARRY_LINGER: Duration = Duration::from_micros(50);

/// While stores and deletes wait, garbage collection looks for a victim once every this many
/// batches, and whenever the log has begun a new segment since its last look: the look walks
/// the segment table, which should not cost each batch, but a look per segment written keeps
/// collection at the pace of the writes. With the batch count alone, a synchronous caller
/// under load (its write always waiting, so the worker never idle) wrote a segment every 16
/// stores and collection looked once per 32: segments piled up (tests/gc.rs failed once on CI,
/// 35 segments where a handful hold the live data).
const GC_CHECK_BATCHES: u32 = 32;

impl Worker {
    pub fn new(shard: Arc<Shard>, submissions: Arc<Submissions>, log: LogWriter) -> Result<Worker> {
        let opts = QueueOptions { depth: shard.opts.io_depth, ..QueueOptions::default() };
        let queue = Box::new(shard.volume().queue(IoClass::Slot, &opts)?);
        Ok(Worker {
            shard,
            submissions,
            log,
            queue,
            writes: VecDeque::new(),
            reads_waiting: VecDeque::new(),
            reads_in_flight: Vec::new(),
            free_tags: Vec::new(),
            exists: Vec::new(),
            in_flight: VecDeque::new(),
            next_batch: 0,
            completions: Vec::new(),
            gc: None,
            gc_turn: false,
            since_checkpoint: 0,
            last_checkpoint_bytes: 0,
            since_gc_check: GC_CHECK_BATCHES,
            gc_checked_in: None,
            carry: None,
            answers: RefCell::new(Answers::new()),
            broken: false,
        })
    }

    /// Whether a turn would find nothing to do: nothing queued for a batch or a read, nothing
    /// in flight, no carried page, no garbage collection under way (the queue of submissions
    /// aside: [`Driver`](shale_space::page_log::Driver) is woken for those).
    fn quiet(&self) -> bool {
        self.queue.in_flight() == 0
            && self.writes.is_empty()
            && self.carry.is_none()
            && self.reads_waiting.is_empty()
            && self.in_flight.is_empty()
            && self.gc.is_none()
    }
}

/// The worker's turns, run by its thread or by a caller waiting for its own request
/// (`shale_space::page_log::driver`: run to completion, so a lone synchronous caller pays no
/// thread hand-off).
impl shale_space::page_log::driver::Worker for Worker {
    /// One turn, in the order of the module comment. A turn that panics (a bug) breaks the
    /// worker down instead of leaving its callers asleep forever ([`Worker::break_down`]).
    fn turn(&mut self) -> Step {
        if self.broken {
            return self.broken_turn();
        }
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.run_turn())) {
            Ok(step) => {
                self.wake_answered();
                step
            }
            Err(panic) => {
                self.break_down(panic.as_ref());
                self.broken_turn()
            }
        }
    }

    fn idle(&self) -> bool {
        self.broken || (self.quiet() && !self.submissions.queued())
    }
}

impl Worker {
    /// After a panic in a turn: the store is stopped (every request the worker would serve
    /// answers [`Error::Stopped`] naming the panic; reads answered on the caller's thread,
    /// from the value cache or the page cache, go on, as after a failed write, P5), every
    /// request the worker holds (queued for a batch, in a batch in flight, a read waiting or
    /// in flight, a collection's copies) is dropped, each dropped reply answering its caller
    /// with the abandoned error ([`shale_io::ticket`]), and nothing is admitted any more
    /// ([`Submissions::break_down`]). Without this the worker's state would stay behind the
    /// driver's lock with every reply in it unanswered, and its callers asleep forever. What
    /// the panic interrupted is not trusted again: no turn runs after it.
    fn break_down(&mut self, panic: &(dyn std::any::Any + Send)) {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into());
        let e = self.shard.stop(Error::Stopped(format!("the store's worker panicked: {why}")));
        log::error!("{}", shale_io::Chain(&e));
        self.broken = true;
        self.in_flight.clear();
        self.writes.clear();
        self.reads_waiting.clear();
        self.reads_in_flight.clear();
        self.exists.clear();
        self.carry = None;
        self.gc = None;
        self.submissions.break_down();
        // Answers given before the panic: their sleepers are woken.
        self.wake_answered();
    }

    /// A turn of a broken-down worker: nothing to serve; it ends when the store closes.
    fn broken_turn(&self) -> Step {
        if self.submissions.closing() { Step::Closed } else { Step::Idle }
    }

    /// One turn, in the order of the module comment; its answers' sleepers are woken by
    /// [`shale_space::page_log::driver::Worker::turn`] when it ends.
    fn run_turn(&mut self) -> Step {
        #[cfg(test)]
        if self.shard.panic_next_turn.swap(false, Ordering::Relaxed) {
            panic!("a test asked this turn to panic");
        }
        let (incoming, closing) = self.take_submissions();
        let got_new = !incoming.is_empty();
        for req in incoming {
            self.accept(req);
        }
        // Reads the index answered (a cached value, an absent key) go now: what follows may
        // write a checkpoint or commit a segment's removal before the turn ends.
        self.wake_answered();
        self.gc_scan_step();
        if !closing && self.in_flight.is_empty() {
            self.finish_gc();
            self.maybe_checkpoint();
            self.start_gc();
        }
        if !self.in_flight.is_empty() {
            if self.may_overlap(closing) {
                self.build_batch(true, true);
            }
        } else {
            let gc_copies =
                self.gc.as_ref().is_some_and(|g| g.scan.is_none() && !g.pending.is_empty());
            // A carried page goes on in a user batch: garbage collection's waits a turn.
            if gc_copies
                && !closing
                && self.carry.is_none()
                && (self.gc_turn || self.writes.is_empty())
            {
                self.build_gc_batch();
                self.gc_turn = false;
            } else if !self.writes.is_empty() || self.carry.is_some() {
                // Never carry past what must follow a batch that ends on a record: garbage
                // collection's turn, a checkpoint (its replay starts on a page boundary),
                // the close.
                let may_carry = !closing && !gc_copies && !self.checkpoint_due();
                self.build_batch(may_carry, false);
                self.gc_turn = true;
            }
        }
        self.submit_reads();
        let busy = self.queue.in_flight() > 0;
        if !busy
            && self.writes.is_empty()
            && self.carry.is_none()
            && self.reads_waiting.is_empty()
            && self.in_flight.is_empty()
            && (closing || self.gc.is_none())
        {
            if closing {
                self.close_bounded();
                return Step::Closed;
            }
            // Nothing waits: the moment to look for a victim without the every-32-batches
            // limit, as the worker's own loop did between a caller's requests. A caller that
            // runs the turns always has its write waiting when the turn's first look comes,
            // so without this look collection would start a tenth as often and segments
            // pile up (tests/gc.rs, under load). Its copying is then the thread's, woken by
            // the caller leaving a busy worker.
            self.start_gc();
            if self.gc.is_some() {
                return Step::Busy;
            }
            return if self.submissions.queued() { Step::Busy } else { Step::Idle };
        }
        if busy {
            // Wait for a completion only when this turn brought nothing new (new requests
            // may have been answered or batched without waiting) and no victim's scan has a
            // slice left for the next turn.
            let scanning = self.gc.as_ref().is_some_and(|g| g.scan.is_some());
            let min = usize::from(!got_new && !scanning);
            if min > 0 {
                // Nobody answered so far waits for the device's next completion.
                self.wake_answered();
            }
            self.reap(min);
        }
        Step::Busy
    }

    /// Takes the queued requests (the thread that runs turns sleeps in the driver, not here,
    /// so that a caller may run them meanwhile).
    fn take_submissions(&mut self) -> (VecDeque<Request>, bool) {
        let mut s = SUBMIT_MUTEX.lock(&self.submissions.state);
        let lingers = self.carry.is_some()
            && self.queue.in_flight() == 0
            && self.writes.is_empty()
            && self.in_flight.is_empty();
        if lingers {
            // Until writes enough for the next batch to carry in turn are queued: one write
            // alone would fill the page and answer its callers, but leave its own last page
            // padded. A read that comes meanwhile waits with the page, 50 us at most.
            let until = Instant::now() + CARRY_LINGER;
            while s.queue.len() < CARRY_WRITES_MIN && !s.closing {
                if s.unlocked(|g| self.submissions.work.wait_until(g, until)).timed_out() {
                    break;
                }
            }
        }
        (std::mem::take(&mut s.queue), s.closing)
    }

    /// Completes a request. Its room in the queue is given back first: a caller woken by
    /// its ticket may submit again at once, and must find the room. A caller asleep on its
    /// ticket is woken once the turn has taken its submissions, at its end, or before it
    /// waits for the device, by the chain of [`Worker::wake_answered`].
    fn complete<T: Send + 'static>(&self, done: Reply<T>, result: Result<T>) {
        self.submissions.completed(1);
        done.complete_among(result, &mut self.answers.borrow_mut());
    }

    /// Wakes the callers asleep on the requests answered since the last call: the first two
    /// here, each of them the next ones (`shale_io::ticket::Answers`), so the worker pays two
    /// wakes for a batch, not one for each of its callers.
    fn wake_answered(&self) {
        self.answers.borrow_mut().wake();
    }

    /// Step 1: answers what the index answers, queues the rest.
    fn accept(&mut self, req: Request) {
        match req {
            Request::Store { .. } | Request::Delete { .. } => self.writes.push_back(req),
            Request::Retrieve { key, done } => {
                // Callers look first (`caller_reads.rs`); a value may have entered since.
                if let Some(value) = self.shard.values.get(&key) {
                    self.shard.counters.cache_hits.fetch_add(1, Ordering::Relaxed);
                    self.complete(done, Ok(Some(value)));
                    return;
                }
                let d = self.shard.digest(&key);
                let probe = self.shard.index.read().probe(d, &key);
                match probe {
                    Err(e) => self.complete(done, Err(e)),
                    Ok(Probe::Absent) => self.complete(done, Ok(None)),
                    Ok(Probe::Exact(loc) | Probe::Candidate(loc)) => self
                        .reads_waiting
                        .push_back(Read { loc, for_: ReadFor::Retrieve { key, done } }),
                }
            }
            Request::Exist { keys, done } => {
                let mut bits = vec![0u8; keys.len().div_ceil(8)];
                let mut reads = Vec::new();
                let probed: Result<()> = (|| {
                    let index = self.shard.index.read();
                    for (bit, key) in keys.into_iter().enumerate() {
                        match index.probe(self.shard.digest(&key), &key)? {
                            Probe::Absent => {}
                            // In the collision map: the full key is the map's key.
                            Probe::Exact(_) => bits[bit / 8] |= 1 << (bit % 8),
                            // A cached value is the key's current one: no read needed.
                            Probe::Candidate(_) if self.shard.values.contains(&key) => {
                                bits[bit / 8] |= 1 << (bit % 8)
                            }
                            Probe::Candidate(loc) => reads.push((loc, key, bit)),
                        }
                    }
                    Ok(())
                })();
                if let Err(e) = probed {
                    self.complete(done, Err(e));
                    return;
                }
                if reads.is_empty() {
                    self.complete(done, Ok(bits));
                    return;
                }
                let job = self.exists.iter().position(Option::is_none).unwrap_or_else(|| {
                    self.exists.push(None);
                    self.exists.len() - 1
                });
                self.exists[job] =
                    Some(ExistJob { bits, reads_left: reads.len(), error: None, done: Some(done) });
                for (loc, key, bit) in reads {
                    self.reads_waiting
                        .push_back(Read { loc, for_: ReadFor::Exist { key, bit, job } });
                }
            }
        }
    }

    /// Step 2: packs the oldest pending stores and deletes into a batch and submits its
    /// durable write.
    ///
    /// Per request, against the index (which holds every acknowledged write, as no batch is
    /// in flight):
    /// - a digest already in this batch ends the batch (the request waits for the next);
    /// - an absent key: a store (unless update-only) is packed, a delete answers `false`;
    /// - a key in the collision map is known present;
    /// - a candidate digest entry needs a read to tell whose it is. A plain store or a delete
    ///   is packed at once and the read made beside the batch's write; a store whose mode
    ///   depends on presence is decided by a read made now (rare), ending the batch before it
    ///   unless it is the first.
    ///
    /// A page the last batch carried starts this one, with its records, whose digests count
    /// as in this batch (they are not in the index yet). With `may_carry` and at least
    /// [`CARRY_WRITES_MIN`] new writes, this batch carries its own last page in turn.
    fn build_batch(&mut self, may_carry: bool, overlapped: bool) {
        if let Err(e) = self.shard.refuse_if_stopped() {
            self.fail_writes(&e);
            return;
        }
        let mut batch = None;
        let mut applies = Vec::new();
        let mut confirms = Vec::new();
        // A write of a digest that a batch in flight holds waits for it to reach the index,
        // as one within this batch does.
        let mut digests: FxHashSet<u64> = self
            .in_flight
            .iter()
            .flat_map(|f| f.applies.iter().chain(&f.handed))
            .map(|(apply, _)| match apply {
                Apply::Store { d, .. } | Apply::Delete { d, .. } | Apply::Copy { d, .. } => *d,
            })
            .collect();
        // Whether the batch goes on from a carried page: it has that page to write even when
        // the records ending in it are not yet its own (their batch is still in flight).
        let mut resumed = false;
        if let Some(c) = self.carry.take() {
            resumed = true;
            // The carried page is the active segment's next: the batch goes on from it.
            let mut b = self.log.batch(&self.shard).expect("a carried page is in the segment");
            b.resume(c.page, c.locations);
            for (apply, at) in c.applies {
                // A write of the same digest waits for these to reach the index, as within
                // a batch.
                if let Apply::Store { d, .. } | Apply::Delete { d, .. } = &apply {
                    digests.insert(*d);
                }
                applies.push((apply, at));
            }
            batch = Some(b);
        }
        let carried_in = applies.len();
        while let Some(req) = self.writes.pop_front() {
            let key = match &req {
                Request::Store { key, .. } | Request::Delete { key, .. } => key.clone(),
                _ => unreachable!("only stores and deletes wait for a batch"),
            };
            let d = self.shard.digest(&key);
            if digests.contains(&d) {
                self.writes.push_front(req);
                break;
            }
            let probe = match self.shard.index.read().probe(d, &key) {
                Ok(p) => p,
                Err(e) => {
                    self.answer_write(req, Err(e));
                    continue;
                }
            };
            // Presence and digest ownership, where known without a read.
            let (present, owner) = match probe {
                Probe::Absent => (Some(false), Some(false)),
                Probe::Exact(_) => (Some(true), Some(false)),
                Probe::Candidate(_) => (None, None),
            };
            let mode_matters =
                matches!(&req, Request::Store { mode, .. } if *mode != StoreMode::Overwrite);
            let (present, owner) = if present.is_none() && mode_matters {
                // Decide now, synchronously: only where a mode asks for presence and the
                // digest is another key's or this one's.
                if !applies.is_empty() {
                    self.writes.push_front(req);
                    break;
                }
                match self.shard.digest_owner(d, &key) {
                    Ok(o) => (Some(o), Some(o)),
                    Err(e) => {
                        self.answer_write(req, Err(e));
                        continue;
                    }
                }
            } else {
                (present, owner)
            };
            let rec = match &req {
                Request::Store { key, value, mode, .. } => {
                    match (mode, present) {
                        (StoreMode::NoOverwrite, Some(true)) => {
                            self.answer_write(req, Err(Error::KeyExists));
                            continue;
                        }
                        (StoreMode::UpdateOnly, Some(false)) => {
                            self.answer_write(req, Err(Error::KeyNotFound));
                            continue;
                        }
                        _ => {}
                    }
                    Record { kind: Kind::Store, seq: self.log.next_seq, key, value }.encode()
                }
                Request::Delete { key, .. } => {
                    if present == Some(false) {
                        self.answer_write(req, Ok(()));
                        continue;
                    }
                    Record { kind: Kind::Delete, seq: self.log.next_seq, key, value: b"" }.encode()
                }
                _ => unreachable!(),
            };
            if batch.is_none() && overlapped && self.log.batch(&self.shard).is_none() {
                // The segment is full: the next one starts once every batch is written (its
                // commit seals this one at its durable end).
                self.writes.push_front(req);
                break;
            }
            if batch.is_none() {
                batch = match self.open_batch() {
                    Ok(b) => Some(b),
                    Err(e) => {
                        let e = self.shard.stop(e);
                        self.answer_write(req, Err(e.clone_for_request()));
                        self.fail_writes(&e);
                        return;
                    }
                };
            }
            let fresh = applies.is_empty() && !resumed;
            if fresh && !batch.as_ref().expect("opened above").fits(rec.len()) {
                // The active segment's pages left cannot hold this record: the batch starts a
                // new segment (it holds nothing yet). Without this the request would wait
                // for a batch that never comes. Not behind batches in flight (as above).
                if overlapped {
                    self.writes.push_front(req);
                    break;
                }
                match self.next_segment_batch() {
                    Ok(b) => batch = Some(b),
                    Err(e) => {
                        let e = self.shard.stop(e);
                        self.answer_write(req, Err(e.clone_for_request()));
                        self.fail_writes(&e);
                        return;
                    }
                }
            }
            let b = batch.as_mut().expect("opened above");
            let room = b.fits(rec.len())
                && (b.image.len() + rec.len() <= self.shard.opts.batch_bytes_max || fresh);
            if !room {
                self.writes.push_front(req);
                break;
            }
            let at = b.add(&rec);
            self.log.next_seq += 1;
            digests.insert(d);
            let entry = applies.len();
            if let (None, Probe::Candidate(loc)) = (owner, probe) {
                let batch = self.next_batch;
                confirms
                    .push(Read { loc, for_: ReadFor::Confirm { key: key.clone(), batch, entry } });
            }
            let owner = owner.unwrap_or(false);
            let apply = match req {
                Request::Store { key, value, done, .. } => {
                    Apply::Store { key, value, d, owner, done }
                }
                Request::Delete { key, done } => Apply::Delete { key, d, owner, done },
                _ => unreachable!(),
            };
            applies.push((apply, at));
        }
        let Some(mut batch) = batch else { return };
        if applies.is_empty() && !resumed {
            return;
        }
        let carried = if may_carry && applies.len() - carried_in >= CARRY_WRITES_MIN {
            batch.finish_carrying()
        } else {
            batch.finish();
            None
        };
        let confirms_left = confirms.len();
        let Some(round) = self.begin_round(applies.len()) else {
            // Stopped since the batch was built (by a failure outside a round): nothing of
            // it is written. Its carried-in records were answered by nothing yet either.
            let e = self.shard.refuse_if_stopped().expect_err("no round begins after a stop");
            self.fail_applies(applies, &e);
            self.fail_writes(&e);
            return;
        };
        let mut carried_from = None;
        if let Some(page) = carried {
            // The records ending in the carried page are acknowledged with the next batch,
            // which writes that page and may be built before this one is written: the page
            // and their locations go on now, their applies once this batch is written
            // (`Worker::apply`; confirmations name them here until then).
            let cut = batch.end_page();
            let ends = |at: usize| {
                let loc = batch.locations[at];
                loc.page + u32::from(loc.pages) - 1
            };
            let split =
                applies.iter().position(|&(_, at)| ends(at) >= cut).unwrap_or(applies.len());
            let locations = applies[split..].iter().map(|&(_, at)| batch.locations[at]).collect();
            self.carry = Some(Carry { page, locations, applies: Vec::new() });
            self.shard.counters.tails_carried.fetch_add(1, Ordering::Relaxed);
            carried_from = Some(split);
        }
        self.reads_waiting.extend(confirms);
        self.submit_batch(batch, applies, confirms_left, carried_from, round);
    }

    /// Whether a batch of the queued writes may be built now behind the batches in flight:
    /// while fewer than `batches_in_flight` are, all of them the user's, at least
    /// [`CARRY_WRITES_MIN`] writes wait (fewer wait better for the batch in flight to end,
    /// with the writes its callers send next), and nothing needs the whole log written first:
    /// garbage collection, its next look for a victim, a checkpoint, the close.
    fn may_overlap(&self, closing: bool) -> bool {
        self.in_flight.len() < self.shard.opts.batches_in_flight
            && self.writes.len() >= CARRY_WRITES_MIN
            && !closing
            && self.gc.is_none()
            && self.since_gc_check < GC_CHECK_BATCHES
            && !self.checkpoint_due()
            && self.in_flight.iter().all(|f| !f.gc)
            && self.shard.refuse_if_stopped().is_ok()
    }

    /// Begins the group-commit round of a batch of `writes` records (beside the rounds of
    /// the batches in flight, which end first). `None` once the store has stopped.
    fn begin_round(&self, writes: usize) -> Option<Round> {
        match self.shard.rounds.begin_overlapping(writes as u64) {
            Ok(round) => Some(round),
            Err(NotBegun::Stopped(_)) => None,
            Err(NotBegun::Running) => unreachable!("overlapping rounds may begin while others run"),
        }
    }

    /// Submits the durable write of a batch whose round has begun.
    fn submit_batch(
        &mut self,
        batch: Batch,
        applies: Vec<(Apply, usize)>,
        confirms_left: usize,
        carried_from: Option<usize>,
        round: Round,
    ) {
        let gc = applies.iter().any(|(a, _)| matches!(a, Apply::Copy { .. }));
        let id = self.next_batch;
        self.next_batch += 1;
        if !self.in_flight.is_empty() {
            self.shard.counters.batches_overlapped.fetch_add(1, Ordering::Relaxed);
        }
        self.log.submitted(&batch);
        let buf = AlignedBuf::padded_copy(&batch.image, PAGE_BYTES);
        let op = Op::Write { offset: batch.address, buf, durable: true };
        self.in_flight.push_back(InFlight {
            id,
            batch,
            applies,
            handed: Vec::new(),
            confirms_left,
            written: None,
            failed: None,
            gc,
            carried_from,
            round,
        });
        if let Err((e, _)) = self.queue.submit(IoRequest { tag: WRITE_TAG | id, op }) {
            self.finish_write(id, Err(e.into()));
        }
    }

    /// Answers the writes of a batch that was never written with `e`.
    fn fail_applies(&self, applies: Vec<(Apply, usize)>, e: &Error) {
        for (apply, _) in applies {
            match apply {
                Apply::Store { done, .. } => self.complete(done, Err(e.clone_for_request())),
                Apply::Delete { done, .. } => self.complete(done, Err(e.clone_for_request())),
                Apply::Copy { .. } => {}
            }
        }
    }

    /// Picks a victim when none is being collected: the sealed segment with the smallest
    /// share of live records, below `gc_live_ratio` (never the segment being appended to, nor
    /// the newest, whose end a later segment has not sealed). Reads it whole on the worker's
    /// queue, beside the user's requests (read synchronously, an 8 MiB segment held every
    /// writer until it was in). Once it is back ([`Worker::gc_victim_read`]) the records
    /// still needed are kept:
    /// - a store the index points at (by location: no key read is needed);
    /// - a delete whose key is absent, while an older segment exists that may hold a store of
    ///   it (a tombstone in the oldest segment is dropped: nothing older is left to hide).
    fn start_gc(&mut self) {
        let ratio = self.shard.opts.gc_live_ratio;
        if self.gc.is_some() || ratio <= 0.0 || self.shard.refuse_if_stopped().is_err() {
            return;
        }
        // The victim's read takes a slot of the queue, never one kept for the batches' writes
        // (`submit_reads`); with the queue that full, the next look finds room.
        if self.queue.in_flight() + self.shard.opts.batches_in_flight >= self.queue.depth() {
            return;
        }
        let new_segment = self.log.active_slot() != self.gc_checked_in;
        if self.since_gc_check < GC_CHECK_BATCHES && !self.writes.is_empty() && !new_segment {
            return;
        }
        self.since_gc_check = 0;
        self.gc_checked_in = self.log.active_slot();
        let segments = self.shard.segments();
        let newest = segments.last().map(|(slot, _)| *slot);
        let usage = self.shard.usage();
        let victim = segments
            .iter()
            .filter(|(slot, _)| Some(*slot) != self.log.active_slot() && Some(*slot) != newest)
            .map(|(slot, _)| (*slot, usage[*slot as usize]))
            .filter(|(_, u)| (u.live as f64) < ratio * u.records as f64 || u.records == 0)
            .min_by(|a, b| {
                let share = |u: &crate::shard::Usage| u.live as f64 / u.records.max(1) as f64;
                share(&a.1).total_cmp(&share(&b.1))
            });
        let Some((slot, _)) = victim else { return };
        let seg = self.shard.segment(slot);
        let total =
            (self.shard.volume().layout().slot_bytes * u64::from(seg.extent.count)) as usize;
        let read = VictimRead { image: Vec::with_capacity(total), start: seg.start, total };
        let buf = AlignedBuf::zeroed(total.min(GC_READ_CHUNK_BYTES));
        match self
            .queue
            .submit(IoRequest { tag: GC_READ_TAG, op: Op::Read { offset: seg.start, buf } })
        {
            Ok(()) => {
                self.gc =
                    Some(Gc { slot, reading: Some(read), scan: None, pending: VecDeque::new() });
            }
            Err((e, _)) => self.gc_stopped(e.into()),
        }
    }

    /// A chunk of the victim's image is back (or its read failed): the next chunk's read is
    /// submitted, in the slot this one freed; once the image is whole, its scan for survivors
    /// begins, a slice a turn ([`Worker::gc_scan_step`]). A read that outlived its collection
    /// (the store stopped meanwhile) is dropped.
    fn gc_victim_read(&mut self, chunk: Result<AlignedBuf>) {
        let Some(gc) = self.gc.as_mut() else { return };
        let Some(read) = gc.reading.as_mut() else { return };
        let slot = gc.slot;
        let buf = match chunk {
            Ok(buf) => buf,
            Err(e) => {
                self.gc = None;
                self.gc_stopped(e);
                return;
            }
        };
        read.image.extend_from_slice(&buf);
        if read.image.len() < read.total {
            let len = (read.total - read.image.len()).min(GC_READ_CHUNK_BYTES);
            // The read overwrites every byte of the buffer: the last one's is reused as it is.
            let buf = if buf.len() == len { buf } else { AlignedBuf::zeroed(len) };
            let offset = read.start + read.image.len() as u64;
            if let Err((e, _)) =
                self.queue.submit(IoRequest { tag: GC_READ_TAG, op: Op::Read { offset, buf } })
            {
                self.gc = None;
                self.gc_stopped(e.into());
            }
            return;
        }
        let image = std::mem::take(&mut read.image);
        let seg = self.shard.segment(slot);
        // No segment is freed while this one is collected: those older now were then.
        let older_exists = self.shard.segments().iter().any(|(_, s)| s.generation < seg.generation);
        let scanner = Scanner::new(seg.generation, seg.sealed_pages);
        let gc = self.gc.as_mut().expect("checked above");
        gc.scan = Some(GcScan { image, scanner, older_exists });
        gc.reading = None;
    }

    /// Scans the next [`GC_SCAN_PAGES`] of the victim's image, if one is being scanned,
    /// keeping the records that must be copied before it is freed: a store the index points
    /// at, and a tombstone whose key is absent while an older segment exists. Damage found
    /// stops the store, as a failed read does.
    fn gc_scan_step(&mut self) {
        let Some(gc) = self.gc.as_mut() else { return };
        let Some(mut scan) = gc.scan.take() else { return };
        let slot = gc.slot;
        let mut records = Vec::new();
        let step = scan.scanner.step(&mut &scan.image[..], GC_SCAN_PAGES, |r| {
            records.push(crate::log::located(slot, r));
            std::ops::ControlFlow::Continue(())
        });
        let seg = self.shard.segment(slot);
        let kept = step.map_err(|e| crate::log::scan_error(&seg, e)).and_then(|end| {
            let mut keep = Vec::new();
            for (loc, rec) in records {
                if self.gc_needed(loc, &rec, scan.older_exists)? {
                    keep.push((loc, rec));
                }
            }
            Ok((keep, end.is_some()))
        });
        match kept {
            Ok((keep, done)) => {
                let gc = self.gc.as_mut().expect("taken from above");
                gc.pending.extend(keep);
                if !done {
                    gc.scan = Some(scan);
                }
            }
            Err(e) => {
                self.gc = None;
                self.gc_stopped(e);
            }
        }
    }

    /// A failure of garbage collection: the store stops (P5), as for a failed write.
    fn gc_stopped(&self, e: Error) {
        let e = self.shard.stop(e);
        log::error!("garbage collection stopped the store: {}", shale_io::Chain(&e));
    }

    /// Whether the victim's record `rec`, at `loc`, must be copied before the victim is
    /// freed (`older_exists`: a segment older than the victim exists).
    fn gc_needed(&self, loc: Location, rec: &[u8], older_exists: bool) -> Result<bool> {
        let r = Record::decode(rec)
            .ok_or_else(|| self.shard.corruption(loc, "record does not parse"))?;
        let d = self.shard.digest(r.key);
        match r.kind {
            Kind::Store => self.shard.index.read().points_at(d, r.key, loc),
            Kind::Delete => Ok(older_exists && !self.present(d, r.key)?),
        }
    }

    /// Whether `key` is live, by the index (a candidate's key read to confirm).
    fn present(&self, d: u64, key: &[u8]) -> Result<bool> {
        let probe = self.shard.index.read().probe(d, key)?;
        match probe {
            Probe::Absent => Ok(false),
            Probe::Exact(_) => Ok(true),
            Probe::Candidate(_) => self.shard.digest_owner(d, key),
        }
    }

    /// Packs garbage collection's pending copies into a batch, skipping stores overwritten
    /// since the victim was read, and submits its durable write.
    fn build_gc_batch(&mut self) {
        let mut batch = match self.open_batch() {
            Ok(b) => b,
            Err(e) => {
                let e = self.shard.stop(e);
                self.fail_writes(&e);
                self.gc = None;
                return;
            }
        };
        let mut pending =
            std::mem::take(&mut self.gc.as_mut().expect("a collection in progress").pending);
        let mut applies = Vec::new();
        while let Some((from, rec)) = pending.pop_front() {
            let r = Record::decode(&rec).expect("scanned above");
            let d = self.shard.digest(r.key);
            let store = r.kind == Kind::Store;
            // A store overwritten, or a deleted key stored again, since the victim was read:
            // nothing to copy.
            let still_needed = if store {
                // Keep it if the index cannot tell: a needless copy is harmless.
                self.shard.index.read().points_at(d, r.key, from).unwrap_or(true)
            } else {
                match self.present(d, r.key) {
                    Ok(present) => !present,
                    Err(_) => true, // keep it: a needless copy is harmless, a lost one is not
                }
            };
            if !still_needed {
                continue;
            }
            if applies.is_empty() && !batch.fits(rec.len()) {
                // As for the user's batches: a copy that the active segment cannot hold
                // starts a new one.
                match self.next_segment_batch() {
                    Ok(b) => batch = b,
                    Err(e) => {
                        let e = self.shard.stop(e);
                        self.fail_writes(&e);
                        self.gc = None;
                        return;
                    }
                }
            }
            let fits = batch.fits(rec.len())
                && (batch.image.len() + rec.len() <= self.shard.opts.batch_bytes_max
                    || applies.is_empty());
            if !fits {
                pending.push_front((from, rec));
                break;
            }
            let at = batch.add(&rec);
            applies.push((Apply::Copy { key: r.key.to_vec(), d, from, store }, at));
        }
        self.gc.as_mut().expect("a collection in progress").pending = pending;
        if applies.is_empty() {
            return;
        }
        batch.finish();
        let Some(round) = self.begin_round(applies.len()) else {
            self.gc = None;
            return;
        };
        self.submit_batch(batch, applies, 0, None, round);
    }

    /// Checkpoints the index once [`Worker::checkpoint_interval`] bytes of log were written
    /// since the last one, between batches and collections (the index then holds exactly
    /// the log written so far): the checkpoint is written into an extent of its own, durably,
    /// then the version log names it in place of the previous one, whose slots that frees.
    /// Writes wait meanwhile (about 16 bytes of checkpoint per key). A checkpoint that finds
    /// no room is skipped with a warning (the log still recovers everything); a failed write
    /// or commit stops the store.
    fn maybe_checkpoint(&mut self) {
        // Not while a page is carried: the checkpoint's replay starts on a page boundary,
        // which must be a record's (`checkpoint_due` keeps the batch before from carrying).
        if !self.checkpoint_due() || self.gc.is_some() || self.carry.is_some() {
            return;
        }
        if self.shard.refuse_if_stopped().is_err() {
            return;
        }
        self.since_checkpoint = 0;
        if let Err(e) = self.checkpoint() {
            if matches!(e, Error::Space(shale_space::Error::NoSpace(_))) {
                log::warn!("index checkpoint skipped: {}", shale_io::Chain(&e));
                return;
            }
            let e = self.shard.stop(e);
            log::error!("an index checkpoint stopped the store: {}", shale_io::Chain(&e));
        }
    }

    /// Whether enough log was written for a checkpoint.
    fn checkpoint_due(&self) -> bool {
        self.shard.opts.checkpoint_bytes != 0 && self.since_checkpoint >= self.checkpoint_interval()
    }

    /// Log bytes between checkpoints: `checkpoint_bytes`, or `checkpoint_log_ratio` times what
    /// the last one wrote where that is more (the index outgrew the fixed interval).
    fn checkpoint_interval(&self) -> u64 {
        let opts = &self.shard.opts;
        let scaled =
            self.last_checkpoint_bytes.saturating_mul(u64::from(opts.checkpoint_log_ratio));
        opts.checkpoint_bytes.max(scaled)
    }

    /// Writes a checkpoint and names it in the version log. In bounded mode the digest
    /// entries stay in pages: the working table is first copied into a snapshot, written and
    /// flushed, which the commit names in place of the previous one (`bounded.rs`).
    fn checkpoint(&mut self) -> Result<()> {
        let shard = self.shard.clone();
        let snapshot = {
            let index = shard.index.read();
            match index.paged_table() {
                Some(t) => Some((t.write_snapshot()?, t.snapshot())),
                None => None,
            }
        };
        let written = self.write_checkpoint(snapshot);
        if let (Err(_), Some((snap, _))) = (&written, snapshot) {
            shard.volume().release(snap.extent);
        }
        written
    }

    /// Writes and commits the checkpoint record of [`Worker::checkpoint`], naming
    /// `snapshot` (written, and the one it replaces) in bounded mode.
    fn write_checkpoint(
        &mut self,
        snapshot: Option<(crate::paged_table::TableAt, Option<shale_space::Extent>)>,
    ) -> Result<()> {
        use crate::checkpoint::{BoundedAt, Checkpoint, SegmentAt};
        let shard = self.shard.clone();
        let usage = shard.usage();
        let segments: Vec<SegmentAt> = shard
            .segments()
            .iter()
            .map(|(slot, seg)| SegmentAt {
                slot: *slot,
                generation: seg.generation,
                pages: self.log.written_pages(seg),
                usage: usage[*slot as usize],
            })
            .collect();
        let (entries, keyed) = shard.index.read().entries();
        let bounded = snapshot.map(|(t, _)| BoundedAt {
            table_generation: t.generation,
            buckets: t.buckets,
            entries: t.entries,
        });
        let ck = Checkpoint { max_seq: self.log.max_seq(), segments, entries, keyed, bounded };
        let generation = self.log.take_generation();
        let image = ck.image(generation);
        let volume = shard.volume();
        let slot_bytes = volume.layout().slot_bytes;
        let slots = (image.len() as u64).div_ceil(slot_bytes).max(1) as u32;
        let extent = volume.allocate(slots)?;
        let written = shard
            .write_durable(
                volume.extent_range(extent).start,
                AlignedBuf::padded_copy(&image, PAGE_BYTES),
            )
            .and_then(|()| {
                let old = *shard.checkpoint.lock();
                let new = crate::meta::CheckpointMeta { generation, extent };
                let mut edit = shale_space::Edit {
                    added: vec![extent],
                    removed: old.map(|c| c.extent).into_iter().collect(),
                    engine: crate::meta::encode_checkpoint(generation),
                    ..shale_space::Edit::default()
                };
                let mut bounded = None;
                if let Some((t, replaced)) = snapshot {
                    edit.added.push(t.extent);
                    edit.removed.extend(replaced);
                    edit.engine = crate::meta::encode_bounded_checkpoint(generation, t.extent);
                    bounded = Some(crate::meta::BoundedMeta { snapshot: Some(t.extent) });
                }
                let mut full = || {
                    crate::meta::encode_base(
                        &shard.segment_metas(),
                        Some(new),
                        *shard.membership.lock(),
                        bounded,
                    )
                };
                volume.commit(&edit, &mut full)?;
                *shard.checkpoint.lock() = Some(new);
                if let Some((t, _)) = snapshot {
                    *shard.bounded.lock() = bounded;
                    if let Some(table) = shard.index.read().paged_table() {
                        table.snapshot_named(t.extent);
                    }
                }
                Ok(())
            });
        if let Err(e) = written {
            volume.release(extent);
            return Err(e);
        }
        // The record's pages, and the table copy's (one page a bucket) in bounded mode.
        let table_bytes = snapshot.map_or(0, |(t, _)| u64::from(t.buckets) * PAGE_BYTES as u64);
        let bytes = image.len().next_multiple_of(PAGE_BYTES) as u64 + table_bytes;
        self.last_checkpoint_bytes = bytes;
        shard.counters.checkpoints.fetch_add(1, Ordering::Relaxed);
        shard.counters.checkpoint_bytes.fetch_add(bytes, Ordering::Relaxed);
        Ok(())
    }

    /// At close, in bounded mode: a checkpoint, so the next open copies it and replays no
    /// log. Skipped when nothing changed since the newest one, and when the store stopped
    /// (the next open replays the log after the last checkpoint).
    fn close_bounded(&mut self) {
        let snapshot = match self.shard.index.read().paged_table() {
            Some(t) => t.snapshot(),
            None => return,
        };
        // Nothing written since the newest snapshot, and nothing replayed after it: the
        // next open would copy the same table.
        let unchanged = snapshot.is_some()
            && self.since_checkpoint == 0
            && self.shard.recovered_records.load(Ordering::Relaxed) == 0;
        if unchanged || self.shard.refuse_if_stopped().is_err() {
            return;
        }
        if let Err(e) = self.checkpoint() {
            let e = self.shard.stop(e);
            log::error!("the bounded index's closing checkpoint failed: {}", shale_io::Chain(&e));
        }
    }

    /// Frees the victim once every copy is durable and no read in flight or waiting still
    /// names it: commits its removal, which frees its slots.
    fn finish_gc(&mut self) {
        let Some(gc) = &self.gc else { return };
        if gc.reading.is_some() || gc.scan.is_some() || !gc.pending.is_empty() {
            return;
        }
        let slot = gc.slot;
        if self.shard.open_iterators.load(Ordering::Acquire) > 0 {
            return; // an iterator's candidates may name the victim
        }
        let reading = self
            .reads_waiting
            .iter()
            .chain(self.reads_in_flight.iter().flatten())
            .any(|r| r.loc.segment == slot);
        if reading {
            return;
        }
        self.gc = None;
        match self.log.remove_segment(&self.shard, slot) {
            Ok(()) => {
                self.shard.counters.segments_freed.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                let e = self.shard.stop(e);
                log::error!("garbage collection stopped the store: {}", shale_io::Chain(&e));
            }
        }
    }

    /// A batch on a new segment, for a record the active one cannot hold.
    fn next_segment_batch(&mut self) -> Result<Batch> {
        self.log.start_segment(&self.shard)?;
        Ok(self.log.batch(&self.shard).expect("a new segment has pages"))
    }

    /// A batch on the active segment, starting a segment when it has no page left.
    fn open_batch(&mut self) -> Result<Batch> {
        if let Some(b) = self.log.batch(&self.shard) {
            return Ok(b);
        }
        self.log.start_segment(&self.shard)?;
        Ok(self.log.batch(&self.shard).expect("a new segment has pages"))
    }

    /// Answers a store or delete that writes nothing: `result` for a store, `Ok(false)` for
    /// a delete of an absent key.
    fn answer_write(&self, req: Request, result: Result<()>) {
        match req {
            Request::Store { done, .. } => self.complete(done, result),
            Request::Delete { done, .. } => self.complete(done, result.map(|()| false)),
            _ => unreachable!(),
        }
    }

    /// Answers every write not yet written with `e`: those queued, and those carried.
    fn fail_writes(&mut self, e: &Error) {
        while let Some(req) = self.writes.pop_front() {
            self.answer_write(req, Err(e.clone_for_request()));
        }
        let carried = self.carry.take().map(|c| c.applies).unwrap_or_default();
        self.fail_applies(carried, e);
    }

    /// Step 3: submits waiting reads while the queue has room (a slot is kept for each
    /// batch's write that may be in flight).
    ///
    /// Through the page cache ([`crate::RecordReads::PageCache`]), a record whose pages the
    /// cache holds is read from it at once (`preadv2(RWF_NOWAIT)`, which never waits for the
    /// device). A miss goes to the device with O_DIRECT on the worker's ring as before, so
    /// the worker never blocks on a read and keeps many in flight; the kernel is asked to
    /// read the same pages into its cache beside it (`POSIX_FADV_WILLNEED`), so the next read
    /// of the record hits. A cached image that fails its checks may be a stale page (one the
    /// kernel did not invalidate when the slot was rewritten with O_DIRECT, or one a buffered
    /// read cached while that write was in flight): it is dropped from the cache, and the
    /// record read from the device decides (`caller_reads.rs` has why a page that passes
    /// can only be the right one).
    fn submit_reads(&mut self) {
        let kept = self.shard.opts.batches_in_flight;
        while self.queue.in_flight() + kept < self.queue.depth() {
            let Some(read) = self.reads_waiting.pop_front() else { break };
            let seg = self.shard.segment(read.loc.segment);
            let at = seg.page_address(read.loc.page);
            let len = read.len();
            let shard = self.shard.clone();
            if let Some(reader) = &shard.reader {
                if let Some(image) = reader.read_at_cached(at, len) {
                    if let Ok(rec) = read.decode(&shard, &image) {
                        self.finish_read(read, Ok(rec));
                        continue;
                    }
                    shard.counters.cached_pages_dropped.fetch_add(1, Ordering::Relaxed);
                    let _ = reader.drop_cached(at, len as u64);
                } else {
                    // Only a hint: the O_DIRECT read below answers either way.
                    let _ = reader.prefetch(at, len as u64);
                }
            }
            let buf = AlignedBuf::zeroed(len);
            let op = Op::Read { offset: at, buf };
            let tag = self.free_tags.pop().unwrap_or_else(|| {
                self.reads_in_flight.push(None);
                self.reads_in_flight.len() - 1
            });
            match self.queue.submit(IoRequest { tag: tag as u64, op }) {
                Ok(()) => self.reads_in_flight[tag] = Some(read),
                Err((e, _)) => {
                    self.free_tags.push(tag);
                    self.finish_read(read, Err(e.into()));
                }
            }
        }
    }

    /// Step 4: reaps completions (waiting for `min`) and acts on each.
    fn reap(&mut self, min: usize) {
        let mut out = std::mem::take(&mut self.completions);
        if let Err(e) = self.queue.reap(min, &mut out) {
            // The ring itself failed: nothing in flight will complete.
            let e: Error = self.shard.stop(e.into());
            for slot in 0..self.reads_in_flight.len() {
                if let Some(read) = self.reads_in_flight[slot].take() {
                    self.free_tags.push(slot);
                    self.finish_read(read, Err(e.clone_for_request()));
                }
            }
            let unwritten: Vec<u64> =
                self.in_flight.iter().filter(|f| f.written.is_none()).map(|f| f.id).collect();
            for id in unwritten {
                self.finish_write(id, Err(e.clone_for_request()));
            }
            if self.gc.as_ref().is_some_and(|g| g.reading.is_some()) {
                self.gc = None;
            }
            return;
        }
        for c in out.drain(..) {
            if c.tag == GC_READ_TAG {
                let image = c
                    .result
                    .map_err(Error::from)
                    .map(|()| c.buf.expect("a read hands its buffer back"));
                self.gc_victim_read(image);
                continue;
            }
            if c.tag & WRITE_TAG != 0 {
                self.finish_write(c.tag & !WRITE_TAG, c.result.map_err(Error::from));
                continue;
            }
            let tag = c.tag as usize;
            let read = self.reads_in_flight[tag].take().expect("a read in flight");
            self.free_tags.push(tag);
            let result = c.result.map_err(Error::from).and_then(|()| {
                let image = c.buf.expect("a read hands its buffer back");
                read.decode(&self.shard, &image)
            });
            self.finish_read(read, result);
        }
        self.completions = out;
    }

    /// Acts on a read's record (its head, for an exist or a confirmation: [`Read::head`]).
    fn finish_read(&mut self, read: Read, rec: Result<Vec<u8>>) {
        let loc = read.loc;
        let whole = read.head().is_none();
        let is_key = |key: &[u8]| {
            rec.as_ref().map_err(Error::clone_for_request).and_then(|r| {
                if whole {
                    self.shard.record_is(r, loc, key)
                } else {
                    self.shard.head_is(r, loc, key)
                }
            })
        };
        match read.for_ {
            ReadFor::Retrieve { key, done } => {
                let result = is_key(&key).map(|yes| {
                    yes.then(|| {
                        let mut r = rec.expect("checked above");
                        r.split_off(crate::record::HEADER_BYTES + key.len())
                    })
                });
                if let Ok(Some(value)) = &result {
                    // Only while the index still names this record: a store applied during
                    // the read moved the key, and this value must not outlive it.
                    let d = self.shard.digest(&key);
                    let current = matches!(
                        self.shard.index.read().probe(d, &key),
                        Ok(Probe::Exact(at) | Probe::Candidate(at)) if at == loc
                    );
                    if current {
                        self.shard.values.insert(key.clone(), value.clone());
                    }
                }
                self.complete(done, result);
            }
            ReadFor::Exist { key, bit, job } => {
                let result = is_key(&key);
                let j = self.exists[job].as_mut().expect("an exist job");
                match result {
                    Ok(true) => j.bits[bit / 8] |= 1 << (bit % 8),
                    Ok(false) => {}
                    Err(e) => j.error = j.error.take().or(Some(e)),
                }
                j.reads_left -= 1;
                if j.reads_left == 0 {
                    let mut j = self.exists[job].take().expect("an exist job");
                    let done = j.done.take().expect("completed once");
                    let result = match j.error {
                        Some(e) => Err(e),
                        None => Ok(j.bits),
                    };
                    self.complete(done, result);
                }
            }
            ReadFor::Confirm { key, batch, entry } => {
                let confirmed = is_key(&key);
                let stopped = match &confirmed {
                    Err(e) => Some(self.shard.stop(e.clone_for_request())),
                    Ok(_) => None,
                };
                let f = self
                    .in_flight
                    .iter_mut()
                    .find(|f| f.id == batch)
                    .expect("a confirmation belongs to a batch in flight");
                match confirmed {
                    Ok(yes) => match &mut f.applies[entry].0 {
                        Apply::Store { owner, .. } | Apply::Delete { owner, .. } => *owner = yes,
                        Apply::Copy { .. } => unreachable!("copies need no confirmation"),
                    },
                    // The index cannot be updated without knowing: stop, as for a failed
                    // write (the batch still waits for its write before it is answered).
                    Err(_) => {
                        f.failed = f.failed.take().or(stopped);
                    }
                }
                f.confirms_left -= 1;
                self.try_apply();
            }
        }
    }

    /// Applies a change to the index that must not fail: in bounded mode a page read or
    /// write-back can, and then the store stops (its next open recovers the index from the
    /// newest checkpoint and the log, which holds the change). Returns the change's answer,
    /// or false.
    fn index_update(&self, change: impl FnOnce(&mut crate::index::Index) -> Result<bool>) -> bool {
        let result = change(&mut self.shard.index.write());
        result.unwrap_or_else(|e| {
            let e = self.shard.stop(e);
            log::error!("an index update stopped the store: {}", shale_io::Chain(&e));
            false
        })
    }

    /// The write of batch `id` completed with `result`.
    fn finish_write(&mut self, id: u64, result: Result<()>) {
        let result = match result {
            Ok(()) => Ok(()),
            Err(e) => Err(self.shard.stop(e)),
        };
        let f = self
            .in_flight
            .iter_mut()
            .find(|f| f.id == id)
            .expect("a write completes for a batch in flight");
        debug_assert!(f.written.is_none(), "a batch's write completes once");
        f.written = Some(result);
        self.try_apply();
    }

    /// Applies the oldest batches in flight that are ready, in order: written, every
    /// confirmation back. Each updates the index and completes its requests.
    fn try_apply(&mut self) {
        while self.in_flight.front().is_some_and(|f| f.written.is_some() && f.confirms_left == 0) {
            let f = self.in_flight.pop_front().expect("checked above");
            self.apply(f);
        }
    }

    /// Hands the applies of the records ending in a carried page to the batch that writes
    /// that page: the next batch in flight, which resumed it, or the carry, if the next batch
    /// is not built yet. With neither (the store stopped before the next batch began), they
    /// fail: their records' last page was never written.
    fn hand_on_carried(&mut self, carried: Vec<(Apply, usize)>) {
        // The next batch's locations begin with the carried records'.
        let carried = carried.into_iter().enumerate().map(|(i, (a, _))| (a, i));
        if let Some(next) = self.in_flight.front_mut() {
            next.handed.extend(carried);
        } else if let Some(c) = &mut self.carry {
            c.applies.extend(carried);
        } else {
            let e = match self.shard.refuse_if_stopped() {
                Err(e) => e,
                Ok(()) => Error::Stopped("a carried page was never written".into()),
            };
            self.fail_applies(carried.collect(), &e);
        }
    }

    /// Applies batch `f`, the oldest: acknowledged if its write and every earlier one
    /// succeeded, else failed, and with it every batch still in flight.
    fn apply(&mut self, mut f: InFlight) {
        let written = match (f.written.take().expect("applied once written"), f.failed.take()) {
            (Err(e), _) | (Ok(()), Some(e)) => Err(e),
            (Ok(()), None) => Ok(()),
        };
        if let Err(e) = &written {
            // Nothing after a failed batch may be acknowledged: recovery ends the log at the
            // first batch lost.
            for later in &mut self.in_flight {
                later.failed = later.failed.take().or_else(|| Some(e.clone_for_request()));
            }
        }
        // The round ends here, not when the write completes: a confirmation that failed
        // fails the batch too.
        let why = written.as_ref().map_err(|e| shale_io::Chain(e).to_string()).copied();
        self.shard.rounds.end(f.round, why);
        if let (Ok(()), Some(split)) = (&written, f.carried_from) {
            let carried = f.applies.split_off(split);
            self.hand_on_carried(carried);
        }
        let handed = std::mem::take(&mut f.handed);
        f.applies.extend(handed);
        if written.is_ok() {
            self.log.written(&f.batch);
            self.since_checkpoint += f.batch.image.len() as u64;
            self.since_gc_check = self.since_gc_check.saturating_add(1);
            let c = &self.shard.counters;
            if f.gc {
                c.gc_bytes.fetch_add(f.batch.image.len() as u64, Ordering::Relaxed);
                c.gc_records.fetch_add(f.applies.len() as u64, Ordering::Relaxed);
            } else {
                c.log_bytes.fetch_add(f.batch.image.len() as u64, Ordering::Relaxed);
                c.batches.fetch_add(1, Ordering::Relaxed);
            }
        } else if f.gc {
            self.gc = None;
        }
        for (apply, at) in f.applies {
            let loc = f.batch.locations[at];
            match apply {
                Apply::Copy { key, d, from, store } => {
                    if written.is_ok() {
                        let moved =
                            store && self.index_update(|ix| ix.relocate(d, &key, from, loc));
                        self.shard.count_record(loc.segment, moved);
                        if moved {
                            self.shard.count_dead(from);
                        }
                    }
                }
                Apply::Store { key, value, d, owner, done } => {
                    let user_bytes = key.len() + value.len();
                    let result = match &written {
                        Ok(()) => 'stored: {
                            let changed = {
                                let mut index = self.shard.index.write();
                                // Under the index's write lock, before it changes, and so
                                // before the answer: a read after it must not find the old
                                // value, and a caller filling the cache (under the read
                                // lock, `caller_reads.rs`) puts it back before this or not
                                // at all.
                                self.shard.values.remove(&key);
                                index.insert(d, &key, loc, owner)
                            };
                            let old = match changed {
                                Ok(old) => old,
                                Err(e) => break 'stored Err(self.shard.stop(e)),
                            };
                            self.shard.count_record(loc.segment, true);
                            if let Some(old) = old {
                                self.shard.count_dead(old);
                            }
                            let c = &self.shard.counters;
                            c.stores.fetch_add(1, Ordering::Relaxed);
                            c.user_bytes.fetch_add(user_bytes as u64, Ordering::Relaxed);
                            // Once the index names the record, not before: a reader that
                            // finds this value and a later one that misses must both see
                            // the index changed (`value_cache.rs`).
                            self.shard.values.insert(key, value);
                            Ok(())
                        }
                        Err(e) => Err(e.clone_for_request()),
                    };
                    self.complete(done, result);
                }
                Apply::Delete { key, d, owner, done } => {
                    let result = match &written {
                        Ok(()) => 'deleted: {
                            let changed = {
                                let mut index = self.shard.index.write();
                                // As for a store: under the write lock, before the change.
                                self.shard.values.remove(&key);
                                index.remove(d, &key, owner)
                            };
                            let old = match changed {
                                Ok(old) => old,
                                Err(e) => break 'deleted Err(self.shard.stop(e)),
                            };
                            self.shard.count_record(loc.segment, false);
                            if let Some(old) = old {
                                self.shard.count_dead(old);
                                self.shard.counters.deletes.fetch_add(1, Ordering::Relaxed);
                            }
                            Ok(old.is_some())
                        }
                        Err(e) => Err(e.clone_for_request()),
                    };
                    self.complete(done, result);
                }
            }
        }
        if let Err(e) = written {
            self.fail_writes(&e);
        }
    }
}

impl Error {
    /// The error to give each of several requests that one failure answers: the failure
    /// itself where it can be copied, else [`Error::Stopped`] naming it.
    pub(crate) fn clone_for_request(&self) -> Error {
        match self {
            Error::Corruption { what, offset } => {
                Error::Corruption { what: what.clone(), offset: *offset }
            }
            Error::Stopped(why) => Error::Stopped(why.clone()),
            Error::KeyExists => Error::KeyExists,
            Error::KeyNotFound => Error::KeyNotFound,
            other => Error::Stopped(other.to_string()),
        }
    }
}

impl shale_io::ticket::Abandoned for Error {
    fn abandoned() -> Error {
        Error::Stopped("the worker serving this request failed before answering".into())
    }
}
