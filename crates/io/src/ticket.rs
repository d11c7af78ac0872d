//! Tickets: the results of asynchronous requests of shale's engines (the lsm engine's
//! `Db::submit_put` and its kin, the hash engine's `HashStore::submit_store` and its kin),
//! polled (SpanDB's `A_check`), waited on, or awaited as a [`Future`].
//!
//! A ticket and its [`Completer`] share one slot: the worker that serves the request puts the
//! result there once, wakes the thread waiting in [`Ticket::wait`] (a condition variable) and
//! the task awaiting the ticket (the [`Waker`] its last poll left). Nothing here knows of a
//! runtime: the waker is whatever executor polled the ticket, tokio's or a plain `block_on`.
//!
//! Every ticket completes exactly once. A completer dropped without a result (its worker
//! panicked, a bug) completes its ticket with the engine's [`Abandoned::abandoned`] error as
//! it drops, so no ticket waits forever. A request answered at submission gets a ticket that
//! is complete from the start and shares nothing ([`Ticket::ready`]).
//!
//! Moved down from the lsm engine when the hash engine needed the same tickets: engines share
//! code by moving it down a layer, never by copying it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::{Condvar, Mutex};

/// The error an engine gives a ticket whose worker dropped its [`Completer`] unanswered.
pub trait Abandoned {
    /// The error (the engine's "stopped" error, say).
    fn abandoned() -> Self;
}

/// The result of an asynchronous request, to poll ([`Ticket::is_done`], [`Ticket::try_take`]),
/// wait on ([`Ticket::wait`]) or `.await` (a ticket is a [`Future`], under any executor).
///
/// The result is handed out once: after [`Ticket::try_take`] returned it, the ticket is spent
/// ([`Ticket::is_done`] stays true, [`Ticket::try_take`] answers `None`), and waiting on or
/// polling a spent ticket panics, as polling a finished future may. Dropping a ticket leaves
/// its request to complete unobserved; a write still happens.
///
/// ```
/// use shale_io::ticket::{Abandoned, pending};
///
/// #[derive(Debug)]
/// struct Stopped;
/// impl Abandoned for Stopped {
///     fn abandoned() -> Stopped { Stopped }
/// }
///
/// let (mut ticket, completer) = pending::<u32, Stopped>();
/// let worker = std::thread::spawn(move || completer.complete(Ok(42)));
/// while !ticket.is_done() {
///     std::thread::yield_now(); // or do other work
/// }
/// assert_eq!(ticket.try_take().expect("done").unwrap(), 42);
/// assert!(ticket.try_take().is_none(), "a result is handed out once");
/// worker.join().unwrap();
/// ```
#[must_use = "a ticket is how the request's result, and any error, comes back"]
pub struct Ticket<T, E> {
    state: State<T, E>,
}

enum State<T, E> {
    /// Answered at submission: nothing shared, nothing to wait for.
    Ready(Result<T, E>),
    /// Served by a worker, which completes the slot.
    Pending(Arc<Slot<T, E>>),
    /// The result was taken.
    Spent,
}

/// Where a worker leaves a result for its ticket.
struct Slot<T, E> {
    inner: Mutex<SlotState<T, E>>,
    /// Wakes a thread in [`Ticket::wait`].
    done: Condvar,
}

struct SlotState<T, E> {
    result: Option<Result<T, E>>,
    /// The task that last polled the ticket and found it pending.
    waker: Option<Waker>,
}

/// The worker's end of a ticket: completes it once, with a result or, if dropped without
/// one, with [`Abandoned::abandoned`].
pub struct Completer<T, E: Abandoned> {
    slot: Option<Arc<Slot<T, E>>>,
}

/// A ticket that a worker completes through the [`Completer`].
pub fn pending<T, E: Abandoned>() -> (Ticket<T, E>, Completer<T, E>) {
    let slot = Arc::new(Slot {
        inner: Mutex::new(SlotState { result: None, waker: None }),
        done: Condvar::new(),
    });
    (Ticket { state: State::Pending(slot.clone()) }, Completer { slot: Some(slot) })
}

impl<T, E> Ticket<T, E> {
    /// A ticket complete from the start, with `result`.
    pub fn ready(result: Result<T, E>) -> Ticket<T, E> {
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
    pub fn try_take(&mut self) -> Option<Result<T, E>> {
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
    /// The request's error: those of the matching synchronous call, or the engine's
    /// [`Abandoned::abandoned`] error if the worker serving it failed before answering.
    ///
    /// # Panics
    /// If the result was already taken by [`Ticket::try_take`] or an `.await`.
    pub fn wait(mut self) -> Result<T, E> {
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

impl<T, E> Future for Ticket<T, E> {
    type Output = Result<T, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T, E>> {
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
impl<T, E> Unpin for Ticket<T, E> {}

impl<T, E> fmt::Debug for Ticket<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Spent => "spent",
            _ if self.is_done() => "done",
            _ => "pending",
        };
        f.debug_struct("Ticket").field("state", &state).finish()
    }
}

impl<T, E: Abandoned> Completer<T, E> {
    /// Completes the ticket with `result`, waking its waiter and its task.
    pub fn complete(mut self, result: Result<T, E>) {
        let slot = self.slot.take().expect("a completer completes once");
        finish(&slot, result);
    }
}

impl<T, E: Abandoned> Drop for Completer<T, E> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            finish(&slot, Err(E::abandoned()));
        }
    }
}

fn finish<T, E>(slot: &Slot<T, E>, result: Result<T, E>) {
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

    #[derive(Debug, PartialEq)]
    struct Stopped;

    impl Abandoned for Stopped {
        fn abandoned() -> Stopped {
            Stopped
        }
    }

    type Ticket<T> = super::Ticket<T, Stopped>;

    fn pending<T>() -> (Ticket<T>, Completer<T, Stopped>) {
        super::pending()
    }

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
        assert_eq!(t.wait(), Err(Stopped));
    }

    #[test]
    #[should_panic(expected = "after its result was taken")]
    fn waiting_on_a_spent_ticket_panics() {
        let mut t = Ticket::ready(Ok(()));
        let _ = t.try_take();
        let _ = t.wait();
    }
}
