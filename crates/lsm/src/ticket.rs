//! Tickets: the results of asynchronous requests ([`crate::Db::submit_put`] and its kin),
//! polled (SpanDB's `A_check`), waited on, or awaited as a [`Future`].
//!
//! A ticket and its `Completer` share one slot: the worker that serves the request puts the
//! result there once, wakes the thread waiting in [`Ticket::wait`] (a condition variable) and
//! the task awaiting the ticket (the [`Waker`] its last poll left). Nothing here knows of a
//! runtime: the waker is whatever executor polled the ticket, tokio's or a plain `block_on`.
//!
//! Every ticket completes exactly once. A completer dropped without a result (its worker
//! panicked, a bug) completes its ticket with [`Error::Stopped`] as it drops, so no ticket
//! waits forever. A request answered at submission (a read the memtables decided, an empty
//! batch) gets a ticket that is complete from the start and shares nothing.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};

/// The result of an asynchronous request, to poll ([`Ticket::is_done`], [`Ticket::try_take`]),
/// wait on ([`Ticket::wait`]) or `.await` (a ticket is a [`Future`], under any executor).
///
/// The result is handed out once: after [`Ticket::try_take`] returned it, the ticket is spent
/// ([`Ticket::is_done`] stays true, [`Ticket::try_take`] answers `None`), and waiting on or
/// polling a spent ticket panics, as polling a finished future may. Dropping a ticket leaves
/// its request to complete unobserved; a write still happens.
///
/// ```
/// use shale_lsm::{Db, Options, WriteOptions};
///
/// let dir = tempfile::tempdir()?;
/// let db = Db::open(dir.path(), Options::small_for_tests())?;
/// let mut ticket = db.submit_put(b"k", b"v", &WriteOptions::default())?;
/// while !ticket.is_done() {
///     std::thread::yield_now(); // or do other work: the put goes on without this thread
/// }
/// assert!(ticket.try_take().expect("done").is_ok());
/// assert!(ticket.try_take().is_none(), "a result is handed out once");
/// assert_eq!(db.get(b"k")?, Some(b"v".to_vec()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Awaited, under any executor (here a plain `block_on`; tokio's works the same): the
/// worker that completes the request wakes the task.
///
/// ```
/// use shale_lsm::{Db, Options, ReadOptions, WriteOptions};
///
/// let dir = tempfile::tempdir()?;
/// let db = Db::open(dir.path(), Options::small_for_tests())?;
/// let value = pollster::block_on(async {
///     db.submit_put(b"k", b"v", &WriteOptions::default())?.await?;
///     db.submit_get(b"k", &ReadOptions::default())?.await
/// })?;
/// assert_eq!(value, Some(b"v".to_vec()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use = "a ticket is how the request's result, and any error, comes back"]
pub struct Ticket<T> {
    state: State<T>,
}

enum State<T> {
    /// Answered at submission: nothing shared, nothing to wait for.
    Ready(Result<T>),
    /// Served by a worker, which completes the slot.
    Pending(Arc<Slot<T>>),
    /// The result was taken.
    Spent,
}

/// Where a worker leaves a result for its ticket.
struct Slot<T> {
    inner: Mutex<SlotState<T>>,
    /// Wakes a thread in [`Ticket::wait`].
    done: Condvar,
}

struct SlotState<T> {
    result: Option<Result<T>>,
    /// The task that last polled the ticket and found it pending.
    waker: Option<Waker>,
}

/// The worker's end of a ticket: completes it once, with a result or, if dropped without
/// one, with an error.
pub(crate) struct Completer<T> {
    slot: Option<Arc<Slot<T>>>,
}

/// A ticket that a worker completes through the [`Completer`].
pub(crate) fn pending<T>() -> (Ticket<T>, Completer<T>) {
    let slot = Arc::new(Slot {
        inner: Mutex::new(SlotState { result: None, waker: None }),
        done: Condvar::new(),
    });
    (Ticket { state: State::Pending(slot.clone()) }, Completer { slot: Some(slot) })
}

impl<T> Ticket<T> {
    /// A ticket complete from the start, with `result`.
    pub(crate) fn ready(result: Result<T>) -> Ticket<T> {
        Ticket { state: State::Ready(result) }
    }

    /// Whether the request has completed (and stays true once the result is taken). Never
    /// blocks: SpanDB's `A_check`.
    pub fn is_done(&self) -> bool {
        match &self.state {
            State::Ready(_) | State::Spent => true,
            State::Pending(slot) => slot.inner.lock().result.is_some(),
        }
    }

    /// The result if the request has completed, else `None`; never blocks. The result is
    /// handed out once: later calls answer `None`.
    pub fn try_take(&mut self) -> Option<Result<T>> {
        let taken = match &self.state {
            State::Spent => return None,
            State::Ready(_) => None,
            State::Pending(slot) => Some(slot.inner.lock().result.take()?),
        };
        match std::mem::replace(&mut self.state, State::Spent) {
            State::Ready(result) => Some(result),
            _ => taken,
        }
    }

    /// Blocks the calling thread until the request completes, and returns its result.
    ///
    /// # Errors
    /// The request's error: those of the matching synchronous call ([`crate::Db::write`],
    /// [`crate::Db::get_opt`], an iterator's status), or [`Error::Stopped`] if the worker
    /// serving it failed before answering.
    ///
    /// # Panics
    /// If the result was already taken by [`Ticket::try_take`] or an `.await`.
    pub fn wait(mut self) -> Result<T> {
        match std::mem::replace(&mut self.state, State::Spent) {
            State::Ready(result) => result,
            State::Pending(slot) => {
                let mut g = slot.inner.lock();
                loop {
                    if let Some(result) = g.result.take() {
                        return result;
                    }
                    slot.done.wait(&mut g);
                }
            }
            State::Spent => panic!("Ticket::wait after its result was taken"),
        }
    }
}

impl<T> Future for Ticket<T> {
    type Output = Result<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        let this = self.get_mut();
        if let State::Pending(slot) = &this.state {
            let mut g = slot.inner.lock();
            if g.result.is_none() {
                // The completer wakes whoever polled last (a task may move between threads,
                // and its waker with it).
                match &mut g.waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    w => *w = Some(cx.waker().clone()),
                }
                return Poll::Pending;
            }
        }
        match this.try_take() {
            Some(result) => Poll::Ready(result),
            None => panic!("Ticket polled after its result was taken"),
        }
    }
}

// A ticket never pins anything: its result moves out by value whatever `T` is.
impl<T> Unpin for Ticket<T> {}

impl<T> fmt::Debug for Ticket<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Spent => "spent",
            _ if self.is_done() => "done",
            _ => "pending",
        };
        f.debug_struct("Ticket").field("state", &state).finish()
    }
}

impl<T> Completer<T> {
    /// Completes the ticket with `result`, waking its waiter and its task.
    pub(crate) fn complete(mut self, result: Result<T>) {
        let slot = self.slot.take().expect("a completer completes once");
        finish(&slot, result);
    }
}

impl<T> Drop for Completer<T> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            finish(
                &slot,
                Err(Error::Stopped(
                    "the async worker serving this request failed before answering".into(),
                )),
            );
        }
    }
}

fn finish<T>(slot: &Slot<T>, result: Result<T>) {
    let waker = {
        let mut g = slot.inner.lock();
        debug_assert!(g.result.is_none(), "a ticket completes once");
        g.result = Some(result);
        slot.done.notify_all();
        g.waker.take()
    };
    // Outside the lock: a waker may run the task at once, on this thread.
    if let Some(w) = waker {
        w.wake();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_ready_ticket_hands_its_result_out_once() {
        let mut t = Ticket::ready(Ok(7));
        assert!(t.is_done());
        assert_eq!(t.try_take().unwrap().unwrap(), 7);
        assert!(t.is_done() && t.try_take().is_none());
        assert_eq!(Ticket::ready(Ok(8)).wait().unwrap(), 8);
    }

    #[test]
    fn polling_stores_the_waker_and_completion_wakes_it_once() {
        let (mut t, c) = pending::<u32>();
        let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let waker = Waker::from(counter.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut t).poll(&mut cx).is_pending());
        assert!(Pin::new(&mut t).poll(&mut cx).is_pending());
        assert!(!t.is_done());
        c.complete(Ok(5));
        assert_eq!(counter.0.load(Ordering::SeqCst), 1);
        assert!(t.is_done());
        assert!(matches!(Pin::new(&mut t).poll(&mut cx), Poll::Ready(Ok(5))));
        assert!(t.try_take().is_none());
    }

    #[test]
    fn wait_blocks_until_another_thread_completes() {
        let (t, c) = pending::<&str>();
        let worker = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            c.complete(Ok("done"));
        });
        assert_eq!(t.wait().unwrap(), "done");
        worker.join().unwrap();
    }

    #[test]
    fn a_dropped_completer_completes_its_ticket_with_an_error() {
        let (t, c) = pending::<()>();
        drop(c);
        assert!(matches!(t.wait(), Err(Error::Stopped(_))));
    }

    #[test]
    #[should_panic(expected = "after its result was taken")]
    fn waiting_on_a_spent_ticket_panics() {
        let mut t = Ticket::ready(Ok(()));
        let _ = t.try_take();
        let _ = t.wait();
    }
}
