//! How a request's result comes back: through its ticket (Rust's futures and polls), or into
//! the store's completion queue with the caller's tag, signalled on an eventfd a caller can
//! put in epoll (the SNIA KV API's completion model, and the C ABI's).
//!
//! Every request completes exactly once. A reply dropped unanswered (its worker failed, a
//! bug) answers [`Error::Stopped`] as it drops, by either path.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use parking_lot::Mutex;
use shale_io::ticket::{Abandoned, Answers, Completer};

use crate::error::{Error, Result};

/// What a completed request gives back, in the completion queue.
#[derive(Debug, PartialEq, Eq)]
pub enum Output {
    /// A store succeeded.
    Stored,
    /// A delete: whether the key was present.
    Deleted(bool),
    /// A retrieve: the value, if present.
    Retrieved(Option<Vec<u8>>),
    /// An exist: one bit per key.
    Exist(Vec<u8>),
}

/// One entry of the completion queue.
#[derive(Debug)]
pub struct Completion {
    /// The tag the request was submitted with.
    pub tag: u64,
    /// Its result.
    pub result: Result<Output>,
}

/// The store's completion queue and its eventfd.
pub(crate) struct CompletionQueue {
    entries: Mutex<VecDeque<Completion>>,
    eventfd: OwnedFd,
}

impl CompletionQueue {
    /// A queue with a non-blocking eventfd.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the kernel refuses an eventfd (out of descriptors).
    pub fn new() -> Result<CompletionQueue> {
        // SAFETY: eventfd takes no pointers; a negative result is checked below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            return Err(Error::InvalidArgument(format!("cannot make an eventfd: {e}")));
        }
        // SAFETY: `fd` is a new descriptor that nothing else owns.
        let eventfd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(CompletionQueue { entries: Mutex::new(VecDeque::new()), eventfd })
    }

    pub fn fd(&self) -> RawFd {
        self.eventfd.as_raw_fd()
    }

    fn push(&self, c: Completion) {
        self.entries.lock().push_back(c);
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our own eventfd. A full counter (EAGAIN
        // after 2^64 - 2 unread signals) cannot happen while the reader drains it; either
        // way the entry is already queued.
        let _ = unsafe { libc::write(self.fd(), (&raw const one).cast(), 8) };
    }

    /// Moves up to `max` completions into `out`; returns how many. Resets the eventfd when
    /// the queue is left empty, so a level-triggered epoll stops reporting it.
    pub fn poll(&self, out: &mut Vec<Completion>, max: usize) -> usize {
        let mut entries = self.entries.lock();
        let n = max.min(entries.len());
        out.extend(entries.drain(..n));
        if entries.is_empty() {
            let mut count: u64 = 0;
            // SAFETY: reads 8 bytes into a live u64 from our own non-blocking eventfd;
            // EAGAIN (nothing signalled) is fine.
            let _ = unsafe { libc::read(self.fd(), (&raw mut count).cast(), 8) };
        }
        n
    }
}

/// Where a request's result goes.
pub(crate) enum Reply<T> {
    /// Its ticket.
    Ticket(Completer<T, Error>),
    /// The completion queue, with the caller's tag.
    Queue(Tagged<T>),
}

/// A reply into the completion queue: the tag, the queue, and how the output is made. Once
/// taken (completed or silenced) `inner` is `None`.
pub(crate) struct Tagged<T> {
    inner: Option<Target<T>>,
}

/// The tag, the queue, and how the output is made.
type Target<T> = (u64, Arc<CompletionQueue>, fn(T) -> Output);

impl<T> Reply<T> {
    /// A reply into the completion queue.
    pub fn tagged(tag: u64, queue: Arc<CompletionQueue>, wrap: fn(T) -> Output) -> Reply<T> {
        Reply::Queue(Tagged { inner: Some((tag, queue, wrap)) })
    }

    /// Completes the request with `result`.
    pub fn complete(self, result: Result<T>) {
        match self {
            Reply::Ticket(done) => done.complete(result),
            Reply::Queue(mut t) => {
                let (tag, queue, wrap) = t.inner.take().expect("a reply completes once");
                queue.push(Completion { tag, result: result.map(wrap) });
            }
        }
    }

    /// Completes the request with `result` among `answers`: a thread asleep on its ticket
    /// is woken by the chain [`Answers::wake`] starts (`shale_io::ticket`), not here.
    pub fn complete_among(self, result: Result<T>, answers: &mut Answers)
    where
        T: Send + 'static,
    {
        match self {
            Reply::Ticket(done) => answers.complete(done, result),
            queued @ Reply::Queue(_) => queued.complete(result),
        }
    }

    /// Drops the reply without answering: for a request refused at submission, whose caller
    /// was told at once.
    pub fn silence(self) {
        if let Reply::Queue(mut t) = self {
            t.inner = None;
        }
    }
}

impl<T> Drop for Tagged<T> {
    fn drop(&mut self) {
        if let Some((tag, queue, _)) = self.inner.take() {
            queue.push(Completion { tag, result: Err(Error::abandoned()) });
        }
    }
}
