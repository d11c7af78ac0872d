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
