//! The calling thread's I/O priority (`ioprio_set(2)`), for background work that should give
//! way to the reads and writes a client waits for.
//!
//! Linux's block layer tags each request with the priority of the task that issues it (a
//! `pread` or `pwrite` of the thread, the write-back a thread's `sync_file_range` or
//! `fdatasync` starts, an io_uring request prepared on the thread without a priority of its
//! own). The `mq-deadline` and `bfq` schedulers dispatch the *idle* class only when no request
//! of a higher class waits (`mq-deadline` lets one wait at most `prio_aging_expire`, 10 s by
//! default); the `none` scheduler, usual for NVMe devices, ignores priorities, and so does a
//! device's own queue once a request reached it. RocksDB offers the same for its compaction
//! pool (`Env::LowerThreadPoolIOPriority`, off by default).
//!
//! A thread's priority is a property of its I/O context, which a thread has to itself unless
//! it was made with `CLONE_IO` (io_uring's own workers share their creator's, so a ring's
//! punted requests follow the thread that owns it).

use std::cell::Cell;
use std::io;

/// The priority classes this module sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoPriority {
    /// The thread's priority before [`IdleIo`] lowered it: whatever the process was started
    /// with (`ionice`), or by default derived from its CPU niceness.
    Inherited(u16),
    /// The idle class: served when no other class has a request waiting.
    Idle,
}

/// `ioprio_set`/`ioprio_get`'s `which`: one thread (or process), by id; 0 is the caller.
const IOPRIO_WHO_PROCESS: libc::c_int = 1;
/// The class field's shift within a priority value.
const IOPRIO_CLASS_SHIFT: u16 = 13;
/// The idle class.
const IOPRIO_CLASS_IDLE: u16 = 3;

/// The best-effort class.
const IOPRIO_CLASS_BEST_EFFORT: u16 = 2;

/// The raw priority value of the idle class (its only level, 0).
const IDLE_VALUE: u16 = IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT;
/// The raw priority value a thread of niceness 0 derives: best effort, level 4.
pub(crate) const BEST_EFFORT_NORMAL_VALUE: u16 =
    (IOPRIO_CLASS_BEST_EFFORT << IOPRIO_CLASS_SHIFT) | 4;

/// The raw I/O priority of thread `tid` (0: the caller): class in the top 3 bits, level in
/// the low 13 (0 for "none": derived from the CPU niceness).
///
/// # Errors
/// The kernel's, e.g. `ESRCH` for a thread that does not exist.
pub fn thread_io_priority(tid: libc::pid_t) -> io::Result<IoPriority> {
    let value = raw_io_priority(tid)?;
    Ok(if value == IDLE_VALUE { IoPriority::Idle } else { IoPriority::Inherited(value) })
}

/// The raw I/O priority value of thread `tid` (0: the caller), as `ioprio_get` returns it.
pub(crate) fn raw_io_priority(tid: libc::pid_t) -> io::Result<u16> {
    // SAFETY: ioprio_get reads two integer arguments and returns an integer.
    let rc = unsafe { libc::syscall(libc::SYS_ioprio_get, IOPRIO_WHO_PROCESS, tid) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    u16::try_from(rc).map_err(|_| io::Error::from_raw_os_error(libc::ERANGE))
}

/// Fixes the calling thread's I/O priority where it is derived from its CPU priority (class
/// "none") at what a thread of niceness 0 derives, so that lowering the CPU priority
/// (`cpu_priority`) leaves the I/O priority as it is; one set explicitly (`ionice`, an
/// [`IdleIo`]) no longer follows the CPU's and is kept.
pub(crate) fn pin_io_priority() -> io::Result<()> {
    if raw_io_priority(0)? >> IOPRIO_CLASS_SHIFT != 0 {
        return Ok(());
    }
    set_raw(BEST_EFFORT_NORMAL_VALUE)
}

thread_local! {
    /// The priority the outermost [`IdleIo`] of this thread will restore, while it is held.
    static RESTORE: Cell<Option<u16>> = const { Cell::new(None) };
}

/// Runs `f` at the calling thread's own priority, even within an [`IdleIo`], and then returns
/// to the idle class: for I/O that others wait on. Write-back is such I/O: a process whose
/// memory is bounded (a memory cgroup) reclaims page cache by waiting for pages under
/// write-back, so idle write-back stalls whatever thread allocates. Outside an `IdleIo` it
/// just runs `f`.
pub fn at_own_io_priority<T>(f: impl FnOnce() -> T) -> T {
    struct BackToIdle;
    impl Drop for BackToIdle {
        fn drop(&mut self) {
            if let Err(e) = set_raw(IDLE_VALUE) {
                log::debug!("could not return a thread to the idle I/O class: {e}");
            }
        }
    }
    match RESTORE.with(Cell::get) {
        Some(own) if set_raw(own).is_ok() => {
            let _back = BackToIdle;
            f()
        }
        _ => f(),
    }
}

fn set_raw(value: u16) -> io::Result<()> {
    // SAFETY: ioprio_set reads three integer arguments; 0 names the calling thread.
    let rc =
        unsafe { libc::syscall(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, value as libc::c_int) };
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// The calling thread in the idle I/O class until this drops, then back to the priority it
/// had. Held across the bulk reads and writes of background work, never across a write a
/// client waits on (a commit): that would wait behind every client request queued.
#[must_use = "the priority goes back when the guard drops"]
#[derive(Debug)]
pub struct IdleIo {
    /// The value to restore; `None` where the kernel refused the change (nothing to undo).
    before: Option<u16>,
}

impl IdleIo {
    /// Lowers the calling thread to the idle class. A kernel that refuses (no
    /// `ioprio_set`, a seccomp filter) leaves the thread as it was: the work runs at its
    /// normal priority, which [`IdleIo::lowered`] reports.
    pub fn enter() -> IdleIo {
        let before = match thread_io_priority(0) {
            Ok(IoPriority::Idle) => return IdleIo { before: None },
            Ok(IoPriority::Inherited(v)) => v,
            Err(e) => {
                log::debug!("ioprio_get refused ({e}): background I/O keeps its priority");
                return IdleIo { before: None };
            }
        };
        match set_raw(IDLE_VALUE) {
            Ok(()) => {
                RESTORE.with(|r| r.set(Some(before)));
                IdleIo { before: Some(before) }
            }
            Err(e) => {
                log::debug!("ioprio_set refused ({e}): background I/O keeps its priority");
                IdleIo { before: None }
            }
        }
    }

    /// Whether this guard lowered the thread (false where it was idle already or the kernel
    /// refused).
    pub fn lowered(&self) -> bool {
        self.before.is_some()
    }
}

impl Drop for IdleIo {
    fn drop(&mut self) {
        if let Some(before) = self.before {
            RESTORE.with(|r| r.set(None));
            if let Err(e) = set_raw(before) {
                // Not fatal: the thread's later I/O is only served later than it would be.
                log::warn!("could not restore a thread's I/O priority {before:#x}: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guard_lowers_the_thread_and_restores_it() {
        std::thread::spawn(|| {
            let before = thread_io_priority(0).unwrap();
            assert_ne!(before, IoPriority::Idle, "a new thread starts idle");
            {
                let guard = IdleIo::enter();
                assert!(guard.lowered());
                assert_eq!(thread_io_priority(0).unwrap(), IoPriority::Idle);
                // Nested: the inner guard finds the thread idle and leaves it so.
                let inner = IdleIo::enter();
                assert!(!inner.lowered());
                drop(inner);
                assert_eq!(thread_io_priority(0).unwrap(), IoPriority::Idle);
            }
            assert_eq!(thread_io_priority(0).unwrap(), before);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn own_priority_within_a_guard_then_idle_again() {
        std::thread::spawn(|| {
            let own = thread_io_priority(0).unwrap();
            assert_eq!(at_own_io_priority(|| thread_io_priority(0).unwrap()), own, "no guard");
            let _guard = IdleIo::enter();
            assert_eq!(at_own_io_priority(|| thread_io_priority(0).unwrap()), own);
            assert_eq!(thread_io_priority(0).unwrap(), IoPriority::Idle, "idle again after");
            let caught = std::panic::catch_unwind(|| at_own_io_priority(|| panic!("in f")));
            assert!(caught.is_err());
            assert_eq!(thread_io_priority(0).unwrap(), IoPriority::Idle, "idle after a panic");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn one_threads_priority_is_not_anothers() {
        let main_before = thread_io_priority(0).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            let _guard = IdleIo::enter();
            // SAFETY: gettid takes no arguments.
            tx.send(unsafe { libc::gettid() }).unwrap();
            done_rx.recv().unwrap();
        });
        let tid = rx.recv().unwrap();
        assert_eq!(thread_io_priority(tid).unwrap(), IoPriority::Idle);
        assert_eq!(thread_io_priority(0).unwrap(), main_before);
        done_tx.send(()).unwrap();
        t.join().unwrap();
    }

    #[test]
    fn an_unknown_thread_is_an_error() {
        assert!(thread_io_priority(i32::MAX).is_err());
    }
}
