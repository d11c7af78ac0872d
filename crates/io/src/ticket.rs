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
//! # Answers given together, and the wakes handed on
//!
//! A worker that answers many requests at once (the hash engine's batch of stores, one
//! durable write for all of them) would otherwise pay one futex wake per sleeping caller on
//! its own thread, each a system call and often a context switch: about four fifths of the
//! hash engine's time applying a batch at 64 threads (issue #45). [`Answers`] gives the
//! results out first (each a lock and a store, no wake) and then wakes only the first
//! [`HAND_ON`] of the threads asleep on them; each thread woken wakes [`HAND_ON`] more before
//! it returns, so the wakes spread over the callers' threads and the worker goes back to
//! its work. Asynchronous tasks are woken by the worker, as before (a [`Waker`] is the
//! executor's, and cheap).
//!
//! Why no sleeper is stranded: a thread asleep on a ticket when its result is given is
//! *held*: it may not return, even if it wakes by itself, until the chain releases it, so
//! every thread the chain releases is still in [`Ticket::wait`] and hands the chain on. Each
//! entry of the chain is taken once (a counter), and every release is followed by its
//! thread taking [`HAND_ON`] more, so the chain runs until every entry is released. An
//! [`Answers`] dropped with sleepers gathered (a panic mid-batch) starts its chain as it
//! drops. A thread that calls [`Ticket::wait`] after its result was given finds it at once.
//!
//! The primitives come through `crate::sync`, so `crates/lsm-model` compiles this very
//! file against shuttle's and explores the hand-on (`tests/wake_chain.rs` there).
//!
//! Moved down from the lsm engine when the hash engine needed the same tickets: engines share
//! code by moving it down a layer, never by copying it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use crate::sync::{AtomicUsize, Condvar, Mutex, Ordering};

/// How many held threads a chain's starter and each thread it releases wake: the chain
/// reaches `n` sleepers in about log2(n) steps, each thread paying two wakes.
pub const HAND_ON: usize = 2;

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
    /// A thread is in [`Ticket::wait`] and has not taken the result.
    waiting: bool,
    /// The result was given through [`Answers`] while a thread waited: it stays until the
    /// chain releases it (module comment).
    held: bool,
    /// The chain the release came from, for the woken thread to hand on.
    hand_on: Option<Arc<WakeChain>>,
}

/// The worker's end of a ticket: completes it once, with a result or, if dropped without
/// one, with [`Abandoned::abandoned`].
pub struct Completer<T, E: Abandoned> {
    slot: Option<Arc<Slot<T, E>>>,
}

/// A ticket that a worker completes through the [`Completer`].
pub fn pending<T, E: Abandoned>() -> (Ticket<T, E>, Completer<T, E>) {
    let slot = Arc::new(Slot {
        inner: Mutex::new(SlotState {
            result: None,
            waker: None,
            waiting: false,
            held: false,
            hand_on: None,
        }),
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
                while g.result.is_none() || g.held {
                    g.waiting = true;
                    slot.done.wait(&mut g);
                }
                g.waiting = false;
                let result = g.result.take().expect("checked above");
                let chain = g.hand_on.take();
                drop(g);
                if let Some(chain) = chain {
                    chain.hand_on(HAND_ON);
                }
                result
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

/// Results of many tickets given together, the threads asleep on them woken in a chain
/// (module comment). Gather with [`Answers::complete`], then [`Answers::wake`]; the same
/// `Answers` gathers again after. Dropping it wakes what it gathered.
#[derive(Default)]
pub struct Answers {
    /// Tickets whose results were given while a thread waited on them, not yet released.
    held: Vec<Arc<dyn Release>>,
}

impl Answers {
    /// An empty gathering.
    pub fn new() -> Answers {
        Answers::default()
    }

    /// Gives `completer`'s ticket its `result` now: a task awaiting it is woken at once; a
    /// thread asleep on it is held until [`Answers::wake`] (or until this is dropped).
    pub fn complete<T, E>(&mut self, mut completer: Completer<T, E>, result: Result<T, E>)
    where
        T: Send + 'static,
        E: Abandoned + Send + 'static,
    {
        let slot = completer.slot.take().expect("a completer completes once");
        let (waker, sleeping) = {
            let mut g = slot.inner.lock();
            debug_assert!(g.result.is_none(), "a ticket completes once");
            g.result = Some(result);
            g.held = g.waiting;
            (g.waker.take(), g.waiting)
        };
        if sleeping {
            self.held.push(slot);
        }
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// How many sleeping threads wait for [`Answers::wake`].
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Starts the chain that wakes every thread held so far: this thread wakes the first
    /// [`HAND_ON`], each of them the next ones.
    pub fn wake(&mut self) {
        if self.held.is_empty() {
            return;
        }
        let chain = Arc::new(WakeChain {
            sleepers: std::mem::take(&mut self.held),
            next: AtomicUsize::new(0),
        });
        chain.hand_on(HAND_ON);
    }
}

impl Drop for Answers {
    fn drop(&mut self) {
        self.wake();
    }
}

impl fmt::Debug for Answers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Answers").field("held", &self.held.len()).finish()
    }
}

/// The threads one [`Answers::wake`] releases, in order, and the next one to release.
struct WakeChain {
    sleepers: Vec<Arc<dyn Release>>,
    next: AtomicUsize,
}

impl WakeChain {
    /// Releases up to `n` more sleepers, each of which hands the chain on in turn.
    fn hand_on(self: &Arc<Self>, n: usize) {
        for _ in 0..n {
            // Each index is taken by one thread: the counter alone orders nothing else.
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            match self.sleepers.get(i) {
                Some(s) => s.release(self),
                None => return,
            }
        }
    }
}

/// A ticket's slot whose held thread a chain releases, whatever the ticket's types.
trait Release: Send + Sync {
    /// Lets the held thread take its result, hands it `chain` to continue, and wakes it.
    fn release(&self, chain: &Arc<WakeChain>);
}

impl<T: Send, E: Send> Release for Slot<T, E> {
    fn release(&self, chain: &Arc<WakeChain>) {
        let mut g = self.inner.lock();
        debug_assert!(g.held && g.waiting, "only a held thread is released");
        g.held = false;
        g.hand_on = Some(chain.clone());
        self.done.notify_one();
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

    /// The shared slot of a pending ticket, to watch it from the test's thread.
    fn slot_of<T>(t: &Ticket<T>) -> Arc<Slot<T, Stopped>> {
        match &t.state {
            State::Pending(slot) => slot.clone(),
            _ => panic!("a pending ticket"),
        }
    }

    /// Blocks until a thread is asleep in `wait` on `slot`.
    fn until_waiting<T>(slot: &Slot<T, Stopped>) {
        while !slot.inner.lock().waiting {
            std::thread::yield_now();
        }
    }

    #[test]
    fn answers_hold_sleepers_until_woken_and_the_chain_wakes_every_one() {
        const N: usize = 23;
        let mut completers = Vec::new();
        let mut slots = Vec::new();
        let mut waiters = Vec::new();
        for i in 0..N {
            let (t, c) = pending::<usize>();
            slots.push(slot_of(&t));
            completers.push(c);
            waiters.push(std::thread::spawn(move || (i, t.wait())));
        }
        for slot in &slots {
            until_waiting(slot);
        }
        let mut answers = Answers::new();
        for (i, c) in completers.into_iter().enumerate() {
            answers.complete(c, Ok(i * 10));
        }
        assert_eq!(answers.held(), N, "every thread was asleep: each is held");
        for slot in &slots {
            let g = slot.inner.lock();
            // Held: the result is there, and the thread may not take it yet.
            assert!(g.result.is_some() && g.held && g.waiting);
        }
        answers.wake();
        assert_eq!(answers.held(), 0);
        for w in waiters {
            let (i, result) = w.join().unwrap();
            assert_eq!(result, Ok(i * 10));
        }
    }

    #[test]
    fn a_ticket_waited_on_after_its_answer_is_not_held() {
        let (t, c) = pending::<u8>();
        let mut answers = Answers::new();
        answers.complete(c, Ok(3));
        assert_eq!(answers.held(), 0, "nobody was asleep on it");
        assert_eq!(t.wait(), Ok(3));
    }

    #[test]
    fn dropped_answers_release_what_they_held() {
        let (t, c) = pending::<u8>();
        let slot = slot_of(&t);
        let waiter = std::thread::spawn(move || t.wait());
        until_waiting(&slot);
        {
            let mut answers = Answers::new();
            answers.complete(c, Err(Stopped));
            assert_eq!(answers.held(), 1);
        }
        assert_eq!(waiter.join().unwrap(), Err(Stopped));
    }

    #[test]
    fn answers_wake_an_awaiting_task_at_once() {
        let (mut t, c) = pending::<u32>();
        let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let waker = Waker::from(counter.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut t).poll(&mut cx).is_pending());
        let mut answers = Answers::new();
        answers.complete(c, Ok(9));
        assert_eq!(counter.0.load(Ordering::SeqCst), 1, "before any wake of the chain");
        assert_eq!(answers.held(), 0);
        assert!(matches!(Pin::new(&mut t).poll(&mut cx), Poll::Ready(Ok(9))));
    }
}
