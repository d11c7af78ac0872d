//! The contention profile (issue #45): per lock or hand-off of each engine, how often a
//! thread had to wait for it, how long it waited and how long the holder held it, so that a
//! run on 2 cores with 16 or 64 client threads shows what 16 cores would queue on.
//!
//! A [`Site`] is a static per place (`table: store mutex`, `lsm: write group leader`, ...).
//! Off by default: a site then costs one relaxed load per acquisition. [`enable`] turns every
//! site on (the benchmarks' `--contention` flag), [`snapshot`] reads them and [`reset`]
//! zeroes them between benchmarks.
//!
//! - A lock through [`Site::lock`] (a read-write lock through [`Site::read`],
//!   [`Site::write`] and [`Site::write_yielding`]): an acquisition that finds the mutex free counts as
//!   uncontended; one that finds it held counts as contended, with the time until it got it
//!   as its wait. The guard ([`Held`]) adds the time from the acquisition to its drop as
//!   the hold.
//! - A hand-off through [`Site::wait`]: a thread that waits for another (a write group's
//!   follower for its leader, a committer for a group flush, a transaction for a row lock)
//!   counts one contended acquisition with the time the closure took.

use std::ops::{Deref, DerefMut};
use std::sync::Mutex as StdMutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

static ENABLED: AtomicBool = AtomicBool::new(false);
/// Every site used since the program started, in the order first used.
static SITES: StdMutex<Vec<&'static Site>> = StdMutex::new(Vec::new());

/// Turns the profile on or off for every site.
pub fn enable(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// Whether the profile is on.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// One lock or hand-off's counters.
#[derive(Debug)]
pub struct Site {
    name: &'static str,
    registered: AtomicBool,
    acquisitions: AtomicU64,
    contended: AtomicU64,
    wait_ns: AtomicU64,
    hold_ns: AtomicU64,
}

/// A site's counters as read by [`snapshot`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteStats {
    /// The site's name.
    pub name: &'static str,
    /// Acquisitions (locks taken, or hand-offs waited for).
    pub acquisitions: u64,
    /// Acquisitions that had to wait.
    pub contended: u64,
    /// Nanoseconds waited, over every acquisition.
    pub wait_ns: u64,
    /// Nanoseconds held, over every lock taken (0 for a hand-off).
    pub hold_ns: u64,
}

impl Site {
    /// A site named `name` (what the profile prints: "engine: what").
    pub const fn new(name: &'static str) -> Site {
        Site {
            name,
            registered: AtomicBool::new(false),
            acquisitions: AtomicU64::new(0),
            contended: AtomicU64::new(0),
            wait_ns: AtomicU64::new(0),
            hold_ns: AtomicU64::new(0),
        }
    }

    fn register(&'static self) {
        if !self.registered.swap(true, Ordering::Relaxed) {
            SITES.lock().unwrap_or_else(|e| e.into_inner()).push(self);
        }
    }

    fn count(&'static self, contended: bool, wait_ns: u64) {
        self.register();
        self.acquisitions.fetch_add(1, Ordering::Relaxed);
        if contended {
            self.contended.fetch_add(1, Ordering::Relaxed);
            self.wait_ns.fetch_add(wait_ns, Ordering::Relaxed);
        }
    }

    /// Locks `mutex`, counting the acquisition (and its wait, if it had to) here while the
    /// profile is on; the guard counts the hold when dropped.
    pub fn lock<'a, T>(&'static self, mutex: &'a Mutex<T>) -> Held<'a, T> {
        self.take(|| mutex.try_lock(), || mutex.lock())
    }

    /// Takes `lock` shared, counted as [`Site::lock`] counts a mutex.
    pub fn read<'a, T>(&'static self, lock: &'a RwLock<T>) -> Timed<RwLockReadGuard<'a, T>> {
        self.take(|| lock.try_read(), || lock.read())
    }

    /// Takes `lock` exclusive, counted as [`Site::lock`] counts a mutex.
    pub fn write<'a, T>(&'static self, lock: &'a RwLock<T>) -> Timed<RwLockWriteGuard<'a, T>> {
        self.take(|| lock.try_write(), || lock.write())
    }

    /// Takes `lock` exclusive without shutting readers out while it waits: tries again up
    /// to `tries` times, yielding the core before each, and only then queues for it (a
    /// queued writer lets no reader in, so a wait behind a holder preempted among many
    /// threads stops every reader too). Counted as [`Site::write`], the whole time until
    /// it got the lock as its wait.
    pub fn write_yielding<'a, T>(
        &'static self,
        lock: &'a RwLock<T>,
        tries: usize,
    ) -> Timed<RwLockWriteGuard<'a, T>> {
        let take = || {
            for _ in 0..tries {
                std::thread::yield_now();
                if let Some(guard) = lock.try_write() {
                    return guard;
                }
            }
            lock.write()
        };
        self.take(|| lock.try_write(), take)
    }

    /// Takes `lock` exclusive if it is free at once, counted as an acquisition that did
    /// not wait; `None` (and nothing counted) if it is held.
    pub fn try_write<'a, T>(
        &'static self,
        lock: &'a RwLock<T>,
    ) -> Option<Timed<RwLockWriteGuard<'a, T>>> {
        let guard = lock.try_write()?;
        if !enabled() {
            return Some(Timed { guard, since: None });
        }
        self.count(false, 0);
        Some(Timed { guard, since: Some((self, Instant::now())) })
    }

    fn take<G>(
        &'static self,
        try_take: impl FnOnce() -> Option<G>,
        take: impl FnOnce() -> G,
    ) -> Timed<G> {
        if !enabled() {
            return Timed { guard: take(), since: None };
        }
        if let Some(guard) = try_take() {
            self.count(false, 0);
            return Timed { guard, since: Some((self, Instant::now())) };
        }
        // Counted before it blocks, so that a holder can see it is wanted; its wait is
        // added once it has the lock.
        let t0 = Instant::now();
        self.count(true, 0);
        let guard = take();
        let got = Instant::now();
        self.wait_ns.fetch_add((got - t0).as_nanos() as u64, Ordering::Relaxed);
        Timed { guard, since: Some((self, got)) }
    }

    /// Runs `waiting`, a wait for another thread (a hand-off), counting it here with the
    /// time it took while the profile is on.
    pub fn wait<R>(&'static self, waiting: impl FnOnce() -> R) -> R {
        if !enabled() {
            return waiting();
        }
        let t0 = Instant::now();
        let r = waiting();
        self.count(true, t0.elapsed().as_nanos() as u64);
        r
    }

    /// Counts an acquisition the caller timed itself: whether it had to wait, and how long,
    /// while on (a caller that knows only afterwards whether it waited).
    pub fn record(&'static self, waited: bool, wait: std::time::Duration) {
        if enabled() {
            self.count(waited, wait.as_nanos() as u64);
        }
    }

    /// Counts an acquisition that did not wait (the fast path of a hand-off), while on.
    pub fn pass(&'static self) {
        if enabled() {
            self.count(false, 0);
        }
    }

    fn stats(&self) -> SiteStats {
        SiteStats {
            name: self.name,
            acquisitions: self.acquisitions.load(Ordering::Relaxed),
            contended: self.contended.load(Ordering::Relaxed),
            wait_ns: self.wait_ns.load(Ordering::Relaxed),
            hold_ns: self.hold_ns.load(Ordering::Relaxed),
        }
    }
}

/// A lock taken through a [`Site`]: the lock's guard, and the time it was taken.
pub struct Timed<G> {
    guard: G,
    since: Option<(&'static Site, Instant)>,
}

/// A mutex taken through [`Site::lock`].
pub type Held<'a, T> = Timed<MutexGuard<'a, T>>;

impl<'a, T> Timed<MutexGuard<'a, T>> {
    /// Runs `wait`, a condition variable's wait on the mutex's own guard (which lets the
    /// mutex go while it waits), with the hold's clock stopped meanwhile: a wait is not a
    /// hold. A wait for another thread is counted by wrapping this in [`Site::wait`].
    pub fn unlocked<R>(&mut self, wait: impl FnOnce(&mut MutexGuard<'a, T>) -> R) -> R {
        if let Some((site, since)) = self.since {
            site.hold_ns.fetch_add(since.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
        let r = wait(&mut self.guard);
        if let Some((site, _)) = self.since {
            self.since = Some((site, Instant::now()));
        }
        r
    }
}

impl<G: Deref> Deref for Timed<G> {
    type Target = G::Target;
    fn deref(&self) -> &G::Target {
        &self.guard
    }
}

impl<G: DerefMut> DerefMut for Timed<G> {
    fn deref_mut(&mut self) -> &mut G::Target {
        &mut self.guard
    }
}

impl<G> Drop for Timed<G> {
    fn drop(&mut self) {
        if let Some((site, since)) = self.since {
            site.hold_ns.fetch_add(since.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
    }
}

/// Every site used so far, with its counters, in the order first used.
pub fn snapshot() -> Vec<SiteStats> {
    SITES.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|s| s.stats()).collect()
}

/// Zeroes every site's counters (between two benchmarks).
pub fn reset() {
    for s in SITES.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        for c in [&s.acquisitions, &s.contended, &s.wait_ns, &s.hold_ns] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

/// The profile as lines for a benchmark of `ops` operations: per site with any acquisition,
/// its waits, wait time and hold time per operation.
pub fn report(ops: u64) -> Vec<String> {
    let ops = ops.max(1) as f64;
    snapshot()
        .into_iter()
        .filter(|s| s.acquisitions > 0)
        .map(|s| {
            format!(
                "contention {:<32}: {:.3} acquisitions/op, {:.3} waits/op ({:.1}%), waited \
                 {:.3} us/op, held {:.3} us/op",
                s.name,
                s.acquisitions as f64 / ops,
                s.contended as f64 / ops,
                100.0 * s.contended as f64 / s.acquisitions as f64,
                s.wait_ns as f64 / 1e3 / ops,
                s.hold_ns as f64 / 1e3 / ops,
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    static CONTENDED: Site = Site::new("test: contended mutex");
    static HANDED: Site = Site::new("test: hand-off");
    static YIELDING: Site = Site::new("test: yielding writer");

    #[test]
    fn a_contended_lock_counts_its_wait_and_every_lock_its_hold() {
        enable(true);
        let m = std::sync::Arc::new(Mutex::new(0u32));
        let mut held = CONTENDED.lock(&m);
        *held += 1;
        // Another thread finds it held: counted as contended before it blocks. The holder
        // lets go once that is counted (an event, not a time).
        let other = {
            let m = m.clone();
            std::thread::spawn(move || *CONTENDED.lock(&m) += 1)
        };
        while CONTENDED.stats().contended == 0 {
            std::thread::yield_now();
        }
        drop(held);
        other.join().unwrap();
        let s = CONTENDED.stats();
        assert_eq!((s.acquisitions, s.contended), (2, 1));
        assert!(s.wait_ns > 0 && s.hold_ns > 0, "{s:?}");
        assert_eq!(*m.lock(), 2);
        assert_eq!(HANDED.wait(|| 7), 7);
        HANDED.pass();
        let h = HANDED.stats();
        assert_eq!((h.acquisitions, h.contended, h.hold_ns), (2, 1, 0));
        let lines = report(2);
        assert!(lines.iter().any(|l| l.contains("test: contended mutex") && l.contains("1.000 acquisitions/op")), "{lines:?}");
        let names: Vec<_> = snapshot().into_iter().map(|s| s.name).collect();
        assert!(names.contains(&"test: hand-off"));
        // A writer trying again (yielding) while a reader holds the lock does not queue:
        // readers still get in, however often they try; once they let go it has the lock,
        // its whole wait counted.
        let rw = std::sync::Arc::new(RwLock::new(0u32));
        let reader = rw.read();
        let started = std::sync::Arc::new(AtomicBool::new(false));
        let writer = {
            let (rw, started) = (rw.clone(), started.clone());
            std::thread::spawn(move || {
                started.store(true, Ordering::SeqCst);
                *YIELDING.write_yielding(&rw, usize::MAX) += 1;
            })
        };
        while !started.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        for _ in 0..1000 {
            assert!(rw.try_read().is_some(), "a yielding writer shut a reader out");
            std::thread::yield_now();
        }
        drop(reader);
        writer.join().unwrap();
        assert_eq!(*rw.read(), 1);
        let y = YIELDING.stats();
        assert_eq!((y.acquisitions, y.contended), (1, 1));
        assert!(y.wait_ns > 0 && y.hold_ns > 0, "{y:?}");
        reset();
        assert_eq!(CONTENDED.stats().acquisitions, 0);
    }
}
