//! Queues for backends whose requests complete at submission (memory, pread/pwrite, simulated).
//!
//! Such a backend only has to say how to read, write and flush one range; [`InlineQueue`] gives
//! it the queue semantics (depth, tags, Busy, completions handed back in submission order).

use std::collections::VecDeque;
use std::sync::Arc;

use crate::device::{Completion, DeviceInfo, Op, Queue, Request, check_request};
use crate::error::{Error, OpKind, Result};

/// A device that executes each request synchronously.
pub trait SyncBackend: Send + Sync {
    /// Current size and block size, for request checks.
    fn info(&self) -> DeviceInfo;
    /// Fills `buf` from `offset`.
    ///
    /// # Errors
    /// The device's error.
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// Writes `buf` at `offset`; if `durable`, returns only once it is on stable media.
    ///
    /// # Errors
    /// The device's error.
    fn write(&self, offset: u64, buf: &[u8], durable: bool) -> Result<()>;
    /// Makes every completed write durable.
    ///
    /// # Errors
    /// The device's error.
    fn flush(&self) -> Result<()>;
}

/// A queue over a [`SyncBackend`]: each request runs inside `submit`, and its completion waits
/// in the queue until reaped, so callers see the same depth and Busy behaviour as on io_uring.
pub struct InlineQueue<B: SyncBackend + ?Sized> {
    backend: Arc<B>,
    depth: usize,
    done: VecDeque<Completion>,
}

impl<B: SyncBackend + ?Sized> InlineQueue<B> {
    /// A queue of `depth` over `backend`.
    pub fn new(backend: Arc<B>, depth: usize) -> InlineQueue<B> {
        InlineQueue { backend, depth, done: VecDeque::with_capacity(depth) }
    }

    fn run(&self, op: &mut Op) -> Result<()> {
        check_request(&self.backend.info(), op)?;
        match op {
            Op::Read { offset, buf } => self.backend.read(*offset, buf),
            Op::Write { offset, buf, durable } => self.backend.write(*offset, buf, *durable),
            Op::Flush => self.backend.flush(),
        }
    }
}

impl<B: SyncBackend + ?Sized> Queue for InlineQueue<B> {
    fn depth(&self) -> usize {
        self.depth
    }

    fn in_flight(&self) -> usize {
        self.done.len()
    }

    fn submit(&mut self, mut req: Request) -> std::result::Result<(), (Error, Request)> {
        if self.done.len() >= self.depth {
            return Err((Error::Busy, req));
        }
        let kind: OpKind = req.op.kind();
        let result = self.run(&mut req.op);
        if let Err(Error::InvalidArgument(_)) = &result {
            // A request that could never be valid is refused at submission, as io_uring
            // backends do, rather than failing later in its completion.
            return Err((result.unwrap_err(), req));
        }
        self.done.push_back(Completion { tag: req.tag, kind, result, buf: req.op.into_buf() });
        Ok(())
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<usize> {
        assert!(min <= self.done.len(), "reap({min}) with {} in flight", self.done.len());
        let n = self.done.len();
        out.extend(self.done.drain(..));
        Ok(n)
    }
}
