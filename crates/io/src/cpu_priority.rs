//! The calling thread's CPU scheduling priority, for background threads that should give
//! their core to the threads a client waits on.
//!
//! On a machine with few cores a client's thread shares its core with the engine's background
//! threads (flushes, compactions). At the same priority the kernel's fair scheduler lets a
//! background thread that wakes run out its slice (0.75 ms and more) before the client's
//! thread gets the core back, and a write waits that long: on ADOC's SATA class on 2 cores
//! that was the p99.9 of shale's writes (BENCHMARKS-history.md, "background threads at a
//! lower CPU priority"). RocksDB offers the same per thread pool
//! (`Env::LowerThreadPoolCPUPriority`, its `kLow` a niceness of 19 and `kIdle` the
//! `SCHED_IDLE` policy), off by default.
//!
//! - [`CpuPriority::Low`]: niceness 19. The thread's weight is 15 against a normal thread's
//!   1,024: it gets about 1.5% of a core a normal thread also wants, and the scheduler's load
//!   balancing moves it away from the cores busy with normal threads.
//! - [`CpuPriority::Idle`]: the `SCHED_IDLE` policy. The thread runs only on a core no
//!   normal thread wants, and a normal thread that wakes takes the core from it at once.
//!   Background work that every core's clients keep from running is what the store's write
//!   controller exists for: writers that wait for it (a slowdown, a stop) give the cores back.
//!
//! A thread's CPU priority also chooses its I/O priority where none was set (`ioprio_set(2)`:
//! a `SCHED_IDLE` thread's I/O goes to the idle class, a nice one's to the lowest level of
//! best effort). That would starve the background writes the store waits on behind every
//! client read, so [`set_thread_cpu_priority`] first fixes the thread's I/O priority at what
//! it was (best effort, level 4, where it was derived): CPU and I/O priority stay separate
//! choices (the I/O one is `io_priority`'s, `IdleIo`).

use std::fmt;
use std::io;

/// How a background thread competes for the CPU with the threads clients wait on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CpuPriority {
    /// As it was created: the process's own policy and niceness. Nothing is changed.
    #[default]
    Normal,
    /// Niceness 19 (RocksDB's `kLow`).
    Low,
    /// The `SCHED_IDLE` policy (RocksDB's `kIdle`).
    Idle,
}

impl CpuPriority {
    /// Every value, for help texts and parsers.
    pub const ALL: [CpuPriority; 3] = [CpuPriority::Normal, CpuPriority::Low, CpuPriority::Idle];

    /// The value's name on command lines: `normal`, `low`, `idle`.
    pub fn name(self) -> &'static str {
        match self {
            CpuPriority::Normal => "normal",
            CpuPriority::Low => "low",
            CpuPriority::Idle => "idle",
        }
    }

    /// The value named `name` (any case), if any.
    pub fn parse(name: &str) -> Option<CpuPriority> {
        CpuPriority::ALL.into_iter().find(|p| p.name().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for CpuPriority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The niceness of [`CpuPriority::Low`].
const LOW_NICE: libc::c_int = 19;

/// Moves the calling thread to `priority`. [`CpuPriority::Normal`] changes nothing (a thread
/// cannot raise itself back without privilege, and one made at normal priority is there).
/// Only lowers: no privilege is needed.
///
/// # Errors
/// The kernel's refusal (a seccomp filter, a kernel without `SCHED_IDLE`); the thread then
/// keeps its priority, and its I/O priority too.
pub fn set_thread_cpu_priority(priority: CpuPriority) -> io::Result<()> {
    if priority == CpuPriority::Normal {
        return Ok(());
    }
    crate::io_priority::pin_io_priority()?;
    match priority {
        CpuPriority::Normal => Ok(()),
        CpuPriority::Low => {
            // SAFETY: setpriority reads three integers; a thread id names one thread.
            let rc =
                unsafe { libc::setpriority(libc::PRIO_PROCESS, gettid() as libc::id_t, LOW_NICE) };
            if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
        }
        CpuPriority::Idle => {
            let param = libc::sched_param { sched_priority: 0 };
            // SAFETY: `param` is a valid sched_param for the call's duration; 0 is the caller.
            let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
            if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
        }
    }
}

/// The CPU priority of thread `tid` (0: the caller), as this module names it: `Idle` for the
/// `SCHED_IDLE` policy, `Low` for niceness 19 (`LOW_NICE`), `Normal` otherwise.
///
/// # Errors
/// The kernel's, e.g. `ESRCH` for a thread that does not exist.
pub fn thread_cpu_priority(tid: libc::pid_t) -> io::Result<CpuPriority> {
    // SAFETY: sched_getscheduler reads one integer.
    let policy = unsafe { libc::sched_getscheduler(tid) };
    if policy < 0 {
        return Err(io::Error::last_os_error());
    }
    if policy == libc::SCHED_IDLE {
        return Ok(CpuPriority::Idle);
    }
    let who = if tid == 0 { gettid() } else { tid };
    // getpriority returns the niceness, which may be -1: errno tells an error apart.
    // SAFETY: errno is this thread's; getpriority reads two integers.
    let nice = unsafe {
        *libc::__errno_location() = 0;
        libc::getpriority(libc::PRIO_PROCESS, who as libc::id_t)
    };
    if nice == -1 && io::Error::last_os_error().raw_os_error() != Some(0) {
        return Err(io::Error::last_os_error());
    }
    Ok(if nice == LOW_NICE { CpuPriority::Low } else { CpuPriority::Normal })
}

fn gettid() -> libc::pid_t {
    // SAFETY: gettid takes no arguments.
    unsafe { libc::gettid() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io_priority::BEST_EFFORT_NORMAL_VALUE;

    /// Runs `f` on a thread of its own: a lowered thread cannot be raised back.
    fn on_a_new_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::spawn(f).join().unwrap()
    }

    fn io_priority_raw() -> u16 {
        crate::io_priority::raw_io_priority(0).unwrap()
    }

    #[test]
    fn names_parse_back() {
        for p in CpuPriority::ALL {
            assert_eq!(CpuPriority::parse(p.name()), Some(p));
            assert_eq!(CpuPriority::parse(&p.name().to_uppercase()), Some(p));
        }
        assert_eq!(CpuPriority::parse("lowest"), None);
        assert_eq!(CpuPriority::default(), CpuPriority::Normal);
    }

    #[test]
    fn each_priority_is_what_the_thread_reads_back() {
        for p in CpuPriority::ALL {
            let (got, io) = on_a_new_thread(move || {
                assert_eq!(thread_cpu_priority(0).unwrap(), CpuPriority::Normal, "starts normal");
                set_thread_cpu_priority(p).unwrap();
                (thread_cpu_priority(0).unwrap(), io_priority_raw())
            });
            assert_eq!(got, p);
            if p == CpuPriority::Normal {
                assert_eq!(io, 0, "normal touches nothing, I/O neither: class none");
            } else {
                // Neither idle nor the lowest best-effort level: what a normal thread derives.
                assert_eq!(io, BEST_EFFORT_NORMAL_VALUE, "{p}");
            }
        }
    }

    #[test]
    fn one_threads_priority_is_not_anothers() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            set_thread_cpu_priority(CpuPriority::Idle).unwrap();
            tx.send(gettid()).unwrap();
            done_rx.recv().unwrap();
        });
        let tid = rx.recv().unwrap();
        assert_eq!(thread_cpu_priority(tid).unwrap(), CpuPriority::Idle);
        assert_eq!(thread_cpu_priority(0).unwrap(), CpuPriority::Normal);
        done_tx.send(()).unwrap();
        t.join().unwrap();
    }

    #[test]
    fn idle_io_within_a_lowered_thread_comes_back_to_best_effort() {
        on_a_new_thread(|| {
            set_thread_cpu_priority(CpuPriority::Idle).unwrap();
            {
                let guard = crate::IdleIo::enter();
                assert!(guard.lowered());
                assert_eq!(crate::thread_io_priority(0).unwrap(), crate::IoPriority::Idle);
            }
            // Not "none", which a SCHED_IDLE thread would read as the idle class.
            assert_eq!(io_priority_raw(), BEST_EFFORT_NORMAL_VALUE);
        });
    }

    #[test]
    fn an_io_priority_set_before_is_kept() {
        on_a_new_thread(|| {
            let _guard = crate::IdleIo::enter();
            set_thread_cpu_priority(CpuPriority::Low).unwrap();
            assert_eq!(crate::thread_io_priority(0).unwrap(), crate::IoPriority::Idle);
        });
    }
}
