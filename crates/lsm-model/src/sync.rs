//! shuttle's primitives behind the API the borrowed files expect (parking_lot's: `lock()`
//! returns the guard, `Condvar::wait` takes `&mut` guard).

use std::ops::{Deref, DerefMut};

pub(crate) use shuttle::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU8, AtomicU64, AtomicUsize, Ordering, fence,
};

/// The engine's brief wait before sleeping, as one yield and one check: spinning is only a
/// shortcut, and the model explores both of its outcomes (ready at once, or the condition
/// variable's wait after it).
pub(crate) fn spin_until(done: impl Fn() -> bool) -> bool {
    shuttle::thread::yield_now();
    done()
}

/// A mutex whose `lock` returns its guard (no poisoning: a panic ends the shuttle run).
#[derive(Default)]
pub(crate) struct Mutex<T>(shuttle::sync::Mutex<T>);

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Mutex<T> {
        Mutex(shuttle::sync::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        MutexGuard(Some(self.0.lock().expect("a panic ends the model run")))
    }

    /// The guard, or `None` when another thread holds the lock.
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        match self.0.try_lock() {
            Ok(g) => Some(MutexGuard(Some(g))),
            Err(std::sync::TryLockError::WouldBlock) => None,
            Err(std::sync::TryLockError::Poisoned(_)) => panic!("a panic ends the model run"),
        }
    }
}

/// The guard of [`Mutex`]; the option lets [`Condvar::wait`] hand it to shuttle and back.
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

/// Releasing a lock is a point where another thread may run, just before the release and
/// just after: on real cores another thread's steps fall anywhere between the holder's last
/// look at what the lock guards and its next step. shuttle switches threads only where one
/// acquires or waits, so without these yields the model would never see, say, a request
/// queued and a try of the lock failing between a worker's last look at its queue and the
/// release of the worker.
impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        if self.0.is_some() {
            shuttle::thread::yield_now();
            self.0 = None;
            shuttle::thread::yield_now();
        }
    }
}

/// A condition variable that waits on a `&mut` guard.
#[derive(Default)]
pub(crate) struct Condvar(shuttle::sync::Condvar);

impl Condvar {
    pub(crate) fn new() -> Condvar {
        Condvar(shuttle::sync::Condvar::new())
    }

    pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
        let held = guard.0.take().expect("guard held");
        guard.0 = Some(self.0.wait(held).expect("a panic ends the model run"));
    }

    pub(crate) fn notify_one(&self) {
        self.0.notify_one();
    }

    pub(crate) fn notify_all(&self) {
        self.0.notify_all();
    }
}
