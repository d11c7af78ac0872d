//! Devices and queues: the interface every backend implements.
//!
//! A *device* is something with byte offsets that can be read, written and flushed. A thread
//! that wants to do I/O opens a *queue* on it (one submission/completion pair, owned by that
//! thread), submits several requests, and reaps their completions; that is how one thread keeps
//! several requests in flight. Requests own their buffers and completions hand them back.
//!
//! Every request is checked the same way on every backend ([`check_request`]) so that a
//! misaligned request fails in a memory-device unit test exactly as it would under O_DIRECT.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::buf::AlignedBuf;
use crate::error::{Error, OpKind, Result};

/// What a device is and how big it is now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Size in bytes; grows when [`Device::grow`] succeeds.
    pub capacity: u64,
    /// Logical block size: offsets and lengths of requests are multiples of it.
    pub block_size: u32,
    /// Which backend serves the device ("uring", "pread", "memory", "sim", ...).
    pub backend: &'static str,
    /// Whether [`Device::grow`] can add capacity (a regular file, not a block device).
    pub growable: bool,
}

/// How a queue waits for completions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PollMode {
    /// Busy-poll the completion queue: lowest latency, burns a core while waiting.
    Spin,
    /// Busy-poll for up to `spin`, then sleep in the kernel until a completion arrives.
    /// The default: a 2-core machine cannot afford a spinning thread per queue. A queue whose
    /// spins keep running out (a device slower than the window) stops spinning and sleeps
    /// at once, spinning again now and then to notice a faster device (the io_uring queue's
    /// `spin_deadline`).
    Adaptive {
        /// How long to spin before sleeping.
        spin: Duration,
    },
    /// Sleep in the kernel until a completion arrives.
    Blocking,
}

impl Default for PollMode {
    fn default() -> PollMode {
        PollMode::Adaptive { spin: Duration::from_micros(20) }
    }
}

/// A kernel thread that takes an io_uring queue's submissions off its ring by polling it
/// (`IORING_SETUP_SQPOLL`): while it is awake a submission costs no system call, and the
/// completions of the queue's requests are posted by it, so any thread may reap them. LATTE's
/// submission side of a queue pair, bound to a CPU in its affinity modes
/// ([`crate::QueuePairs`]). Only io_uring queues have one; the other backends ignore it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SqPoll {
    /// The CPU it is bound to (`IORING_SETUP_SQ_AFF`), as an index into the CPUs this process
    /// may use, modulo their count ([`crate::affinity::cpu_at`]); `None`: the scheduler's
    /// choice.
    pub cpu: Option<usize>,
    /// How long it keeps polling an empty ring before it sleeps (whole milliseconds; the next
    /// submission then wakes it with a system call).
    pub idle: Duration,
}

/// Options for [`Device::open_queue`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueOptions {
    /// Most requests in flight at once; [`Queue::submit`] answers [`Error::Busy`] past it.
    pub depth: u32,
    /// How [`Queue::reap`] waits.
    pub poll: PollMode,
    /// A polling kernel thread for submissions (io_uring only; `None`, the default: the
    /// reaping thread hands them to the kernel).
    pub sq_poll: Option<SqPoll>,
}

/// Upper bound of [`QueueOptions::depth`]; deeper queues gain nothing on NVMe and waste memory.
pub const QUEUE_DEPTH_MAX: u32 = 4096;

impl Default for QueueOptions {
    fn default() -> QueueOptions {
        QueueOptions { depth: 32, poll: PollMode::default(), sq_poll: None }
    }
}

impl QueueOptions {
    /// Checks the options, so every backend refuses the same bad input.
    pub fn validate(&self) -> Result<()> {
        if self.depth == 0 || self.depth > QUEUE_DEPTH_MAX {
            return Err(Error::InvalidArgument(format!(
                "queue depth {} outside 1..={QUEUE_DEPTH_MAX}",
                self.depth
            )));
        }
        Ok(())
    }
}

/// One I/O operation; buffers travel with the request and come back in the completion.
#[derive(Debug)]
pub enum Op {
    /// Read `buf.len()` bytes at `offset` into `buf`.
    Read {
        /// Byte offset on the device.
        offset: u64,
        /// Destination; its length is the read length.
        buf: AlignedBuf,
    },
    /// Write all of `buf` at `offset`.
    Write {
        /// Byte offset on the device.
        offset: u64,
        /// Source; its length is the write length.
        buf: AlignedBuf,
        /// Complete only once the data is on stable media (FUA / RWF_DSYNC).
        durable: bool,
    },
    /// Make every write completed before this flush was submitted durable.
    Flush,
}

impl Op {
    /// The kind of the operation.
    pub fn kind(&self) -> OpKind {
        match self {
            Op::Read { .. } => OpKind::Read,
            Op::Write { .. } => OpKind::Write,
            Op::Flush => OpKind::Flush,
        }
    }

    /// Byte offset (0 for a flush).
    pub fn offset(&self) -> u64 {
        match self {
            Op::Read { offset, .. } | Op::Write { offset, .. } => *offset,
            Op::Flush => 0,
        }
    }

    /// Number of data bytes moved (0 for a flush).
    pub fn len(&self) -> usize {
        match self {
            Op::Read { buf, .. } | Op::Write { buf, .. } => buf.len(),
            Op::Flush => 0,
        }
    }

    /// True for a flush, which moves no data.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes the buffer out of the operation, for the completion.
    pub fn into_buf(self) -> Option<AlignedBuf> {
        match self {
            Op::Read { buf, .. } | Op::Write { buf, .. } => Some(buf),
            Op::Flush => None,
        }
    }
}

/// A request: an operation and a caller-chosen tag that identifies its completion.
#[derive(Debug)]
pub struct Request {
    /// Returned unchanged in the completion.
    pub tag: u64,
    /// What to do.
    pub op: Op,
}

/// The outcome of one request.
#[derive(Debug)]
pub struct Completion {
    /// The request's tag.
    pub tag: u64,
    /// The request's kind.
    pub kind: OpKind,
    /// Success, or why the device failed it.
    pub result: Result<()>,
    /// The request's buffer, handed back (filled, for a read).
    pub buf: Option<AlignedBuf>,
}

/// A submission/completion pair on a device, owned by one thread at a time.
pub trait Queue: Send {
    /// The most requests this queue keeps in flight.
    fn depth(&self) -> usize;

    /// Requests submitted and not yet reaped.
    fn in_flight(&self) -> usize;

    /// Queues a request. It may only reach the device at the next [`Queue::reap`] (backends
    /// batch submissions into one system call).
    ///
    /// # Errors
    /// [`Error::Busy`] when `depth` requests are in flight; [`Error::InvalidArgument`] for a
    /// misaligned or out-of-range request. Either way the request comes back in the `Err`
    /// tuple, untouched, so it can be resubmitted after reaping.
    fn submit(&mut self, req: Request) -> std::result::Result<(), (Error, Request)>;

    /// Sends submitted requests to the device, waits (per the queue's [`PollMode`]) until at
    /// least `min` completions are ready, and appends every ready completion to `out`.
    /// Returns how many were appended.
    ///
    /// # Panics
    /// If `min` exceeds [`Queue::in_flight`]: waiting for requests that were never submitted
    /// would block forever, and is a bug in the caller.
    ///
    /// # Errors
    /// Only when the queue itself fails (the ring is broken); a failed request is reported in
    /// its completion's `result`.
    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<usize>;
}

/// A device: byte-addressed storage that hands out queues.
pub trait Device: Send + Sync + fmt::Debug {
    /// Size, block size and backend.
    fn info(&self) -> DeviceInfo;

    /// Opens a new queue for the calling thread.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for bad options; [`Error::Io`] if the backend cannot set one up.
    fn open_queue(&self, opts: &QueueOptions) -> Result<Box<dyn Queue>>;

    /// Adds capacity so that the device holds at least `capacity` bytes (a multiple of the
    /// block size), durably (the new size survives a crash once this returns). On a file the
    /// new range is sparse: [`Device::allocate_range`] gives it storage before it is written.
    ///
    /// # Errors
    /// [`Error::Unsupported`] where the device cannot grow; [`Error::NoSpace`] if the room is
    /// not there.
    fn grow(&self, capacity: u64) -> Result<()> {
        let _ = capacity;
        Err(Error::Unsupported(format!("{} device cannot grow", self.info().backend)))
    }

    /// Makes sure storage backs `[offset, offset + len)` (block-aligned, within the device),
    /// so that later writes there need not allocate: on a file, an O_DIRECT write into a hole
    /// is slower and may find the file system full halfway through a log. The range's bytes
    /// are unchanged. Storage already there counts; the default (a device that has all its
    /// storage from the start) only checks the range.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a misaligned or out-of-range range; [`Error::Io`] or
    /// [`Error::NoSpace`] when the storage cannot be had.
    fn allocate_range(&self, offset: u64, len: u64) -> Result<()> {
        check_range(&self.info(), "allocation", offset, len)
    }

    /// Bytes of storage the device can still give to ranges that hold none yet, where that is
    /// bounded by something other than its capacity: on a volume file, what its file system
    /// has free for it (a sparse file's holes and growth take storage from there). `None`
    /// (the default) where every byte within the capacity already has storage (a block
    /// device, memory) or the bound is unknown.
    fn free_storage(&self) -> Option<u64> {
        None
    }

    /// Gives back the storage behind `[offset, offset + len)` (block-aligned, within the
    /// device): the caller holds nothing there any more. Until written again the range reads
    /// as zeros or as its old bytes, whichever the device does, so a caller must take neither
    /// for data. A release is as durable as a write without FUA: a power cut before the next
    /// flush may undo it. The default (a device whose storage cannot be given back) only
    /// checks the range.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a misaligned or out-of-range range; [`Error::Io`] when
    /// the device fails the release.
    fn release_range(&self, offset: u64, len: u64) -> Result<()> {
        check_range(&self.info(), "release", offset, len)
    }
}

/// A shared handle on a device.
pub type DeviceRef = Arc<dyn Device>;

/// Checks a request against the device's block size and capacity, so every backend refuses the
/// same misuse with the same error.
pub fn check_request(info: &DeviceInfo, op: &Op) -> Result<()> {
    let (offset, len) = match op {
        Op::Flush => return Ok(()),
        Op::Read { offset, buf } | Op::Write { offset, buf, .. } => (*offset, buf.len() as u64),
    };
    let bs = u64::from(info.block_size);
    if offset % bs != 0 || len % bs != 0 {
        return Err(Error::InvalidArgument(format!(
            "{} of {len} bytes at {offset} is not aligned to the {bs}-byte block size",
            op.kind()
        )));
    }
    match offset.checked_add(len) {
        Some(end) if end <= info.capacity => Ok(()),
        _ => Err(Error::InvalidArgument(format!(
            "{} of {len} bytes at {offset} runs past the device's {} bytes",
            op.kind(),
            info.capacity
        ))),
    }
}

/// Checks a range of [`Device::allocate_range`] or [`Device::release_range`] as
/// [`check_request`] checks a request: aligned to the block size and within the capacity.
///
/// # Errors
/// [`Error::InvalidArgument`] naming `what`, the range and the device's size.
pub fn check_range(info: &DeviceInfo, what: &str, offset: u64, len: u64) -> Result<()> {
    let bs = u64::from(info.block_size);
    if offset % bs != 0 || len % bs != 0 {
        return Err(Error::InvalidArgument(format!(
            "{what} of {len} bytes at {offset} is not aligned to the {bs}-byte block size"
        )));
    }
    match offset.checked_add(len) {
        Some(end) if end <= info.capacity => Ok(()),
        _ => Err(Error::InvalidArgument(format!(
            "{what} of {len} bytes at {offset} runs past the device's {} bytes",
            info.capacity
        ))),
    }
}

/// One-request-at-a-time conveniences on any queue, for code that does not pipeline
/// (recovery, tools, tests).
pub trait QueueExt: Queue {
    /// Submits `op`, waits for it, and returns its buffer.
    ///
    /// # Panics
    /// If other requests are in flight on this queue: their completions would be lost.
    ///
    /// # Errors
    /// The request's error.
    fn execute(&mut self, op: Op) -> Result<Option<AlignedBuf>> {
        assert_eq!(self.in_flight(), 0, "execute() on a queue with requests in flight");
        self.submit(Request { tag: 0, op }).map_err(|(e, _)| e)?;
        let mut out = Vec::with_capacity(1);
        self.reap(1, &mut out)?;
        let done = out.pop().expect("reap(1) returned a completion");
        done.result.map(|()| done.buf)
    }

    /// Reads `len` bytes at `offset`.
    ///
    /// # Errors
    /// The device's error, or [`Error::InvalidArgument`] for a misaligned request.
    fn read_at(&mut self, offset: u64, len: usize) -> Result<AlignedBuf> {
        let buf = AlignedBuf::zeroed(len);
        Ok(self.execute(Op::Read { offset, buf })?.expect("read returns its buffer"))
    }

    /// Writes `buf` at `offset`, durably if asked, and hands the buffer back.
    ///
    /// # Errors
    /// The device's error, or [`Error::InvalidArgument`] for a misaligned request.
    fn write_at(&mut self, offset: u64, buf: AlignedBuf, durable: bool) -> Result<AlignedBuf> {
        Ok(self.execute(Op::Write { offset, buf, durable })?.expect("write returns its buffer"))
    }

    /// Flushes the device's volatile cache.
    ///
    /// # Errors
    /// The device's error.
    fn flush(&mut self) -> Result<()> {
        self.execute(Op::Flush).map(|_| ())
    }
}

impl<Q: Queue + ?Sized> QueueExt for Q {}
