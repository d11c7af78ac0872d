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
        MutexGuard {
            guard: Some(self.0.lock().expect("a panic ends the model run")),
            lock: &self.0,
        }
    }

    /// The guard, or `None` when another thread holds the lock.
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        match self.0.try_lock() {
            Ok(g) => Some(MutexGuard { guard: Some(g), lock: &self.0 }),
            Err(std::sync::TryLockError::WouldBlock) => None,
            Err(std::sync::TryLockError::Poisoned(_)) => panic!("a panic ends the model run"),
        }
    }
}

/// The guard of [`Mutex`]; the option lets [`Condvar::wait`] hand it to shuttle and back,
/// and the lock lets a spurious wake-up take it again.
pub(crate) struct MutexGuard<'a, T> {
    guard: Option<shuttle::sync::MutexGuard<'a, T>>,
    lock: &'a shuttle::sync::Mutex<T>,
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.guard.as_ref().expect("guard held")
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.guard.as_mut().expect("guard held")
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
        if self.guard.is_some() {
            shuttle::thread::yield_now();
            self.guard = None;
            shuttle::thread::yield_now();
        }
    }
}

/// Whether a `Condvar::wait` may end without a notify, as the operating system's may
/// (parking_lot's never do, std's may): set by a model that must show its code checks its
/// condition again after every wake-up, not only after those it was sent.
pub static SPURIOUS_WAKEUPS: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// A condition variable that waits on a `&mut` guard.
#[derive(Default)]
pub(crate) struct Condvar(shuttle::sync::Condvar);

impl Condvar {
    pub(crate) fn new() -> Condvar {
        Condvar(shuttle::sync::Condvar::new())
    }

    pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
        let held = guard.guard.take().expect("guard held");
        if SPURIOUS_WAKEUPS.load(std::sync::atomic::Ordering::Relaxed)
            && shuttle::rand::RngCore::next_u32(&mut shuttle::rand::thread_rng()) % 2 == 0
        {
            // A wake-up nobody sent: the lock let go, other threads run, the lock again.
            drop(held);
            shuttle::thread::yield_now();
            guard.guard = Some(guard.lock.lock().expect("a panic ends the model run"));
            return;
        }
        guard.guard = Some(self.0.wait(held).expect("a panic ends the model run"));
    }

    pub(crate) fn notify_one(&self) {
        self.0.notify_one();
    }

    pub(crate) fn notify_all(&self) {
        self.0.notify_all();
    }
}
