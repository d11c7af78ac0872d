//! shuttle's primitives, and tokio's `Notify` and `watch` with a scheduling point before each
//! wake-up, behind the API commit.rs expects (serve's `crate::sync`).
//!
//! tokio's `Notify` and `watch` are kept rather than written again: they need no runtime
//! (they wake the waker that polled them, shuttle's here), so the model checks commit.rs with
//! the very primitives it runs on, their permits and wake-ups included. Each of their
//! operations is one step to shuttle (nothing inside them switches tasks), which is what
//! their atomicity promises.

use std::ops::{Deref, DerefMut};

pub(crate) use shuttle::sync::atomic::{AtomicUsize, Ordering};

/// A mutex whose guard is a scheduling point when let go (as in `crates/lsm-model`).
#[derive(Default)]
pub(crate) struct Mutex<T>(shuttle::sync::Mutex<T>);

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Mutex<T> {
        Mutex(shuttle::sync::Mutex::new(value))
    }
}

/// Locks `m` (no poisoning: a panic ends the shuttle run).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    MutexGuard(Some(m.0.lock().expect("a panic ends the model run")))
}

/// The guard of [`Mutex`].
pub(crate) struct MutexGuard<'a, T>(Option<shuttle::sync::MutexGuard<'a, T>>);

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.0.as_ref().expect("guard held")
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.0.as_mut().expect("guard held")
    }
}

/// Releasing a lock is a point where another task may run, just before the release and just
/// after: shuttle switches tasks only where one acquires or waits, so without these yields
/// the model would never see, say, a batch queued between the committer's last look at the
/// pending table and its release.
impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        if self.0.is_some() {
            shuttle::thread::yield_now();
            self.0 = None;
            shuttle::thread::yield_now();
        }
    }
}

/// tokio's `Notify`, with a scheduling point before each `notify_one`.
#[derive(Default)]
pub(crate) struct Notify(tokio::sync::Notify);

impl Notify {
    pub(crate) fn new() -> Notify {
        Notify(tokio::sync::Notify::new())
    }

    pub(crate) fn notify_one(&self) {
        shuttle::thread::yield_now();
        self.0.notify_one();
    }

    pub(crate) fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.0.notified()
    }
}

/// tokio's `watch`, with a scheduling point before each send.
pub(crate) mod watch {
    pub(crate) use tokio::sync::watch::Receiver;

    /// tokio's `watch::Sender`.
    pub(crate) struct Sender<T>(tokio::sync::watch::Sender<T>);

    impl<T> Sender<T> {
        pub(crate) fn new(value: T) -> Sender<T> {
            Sender(tokio::sync::watch::Sender::new(value))
        }

        pub(crate) fn subscribe(&self) -> Receiver<T> {
            self.0.subscribe()
        }

        pub(crate) fn send_replace(&self, value: T) -> T {
            shuttle::thread::yield_now();
            self.0.send_replace(value)
        }
    }
}
