//! The descriptor budget: how many clients the process's open-file limit (`RLIMIT_NOFILE`,
//! `ulimit -n`) leaves room for, checked when the server starts, as Redis checks it.
//!
//! Each client holds one descriptor. Past the limit, `accept` fails with EMFILE and the
//! kernel keeps the waiting clients in the listen queue, unanswered, so `max_clients` must
//! fit under the limit with room to spare. At start ([`fit`]):
//! 1. Count the descriptors open now (the store's, the listeners', the runtime's, stdio):
//!    the entries of `/proc/self/fd`.
//! 2. What `max_clients` needs: those, plus `max_clients`, plus [`RESERVED_FDS`] kept free
//!    for what opens later (the engine's files, the refusal of a client over the limit, the
//!    accept loops' spare descriptors).
//! 3. If the soft limit is lower, raise it toward that, up to the hard limit (an
//!    unprivileged process may; Redis does the same).
//! 4. If it is still lower, lower `max_clients` to what it leaves, and say so in a warning
//!    naming `--maxclients` and `ulimit -n`; if it leaves no client at all, refuse to start.

use crate::error::{Error, Result};

/// Descriptors kept free beyond the clients' and what is open at start: Redis's
/// `CONFIG_MIN_RESERVED_FDS`.
pub const RESERVED_FDS: u64 = 32;

/// What [`fit`] found and did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// The clients allowed: the requested number, or fewer where the limit is too low.
    pub max_clients: usize,
    /// The soft limit now.
    pub limit: u64,
    /// The soft limit before, when [`fit`] raised it.
    pub raised_from: Option<u64>,
    /// Descriptors open at start.
    pub open: u64,
}

impl Budget {
    /// Descriptors `max_clients` clients would need in all.
    fn needed(&self, max_clients: usize) -> u64 {
        self.open + max_clients as u64 + RESERVED_FDS
    }

    /// The warning to give when `requested` clients did not fit, naming the flag.
    pub fn warning(&self, requested: usize) -> Option<String> {
        (self.max_clients < requested).then(|| {
            format!(
                "--maxclients {requested} needs {} open files ({} open now, {RESERVED_FDS} in \
                 reserve), but the limit (ulimit -n) is {} and could not be raised further: \
                 --maxclients lowered to {}. Raise `ulimit -n` to serve more clients.",
                self.needed(requested),
                self.open,
                self.limit,
                self.max_clients
            )
        })
    }
}

/// Fits `requested` clients under the open-file limit (the stages of the module comment).
///
/// # Errors
/// [`Error::InvalidArgument`] when the limit leaves no room for a single client, naming the
/// limit to set; [`Error::Io`] when the limit or `/proc/self/fd` cannot be read.
pub fn fit(requested: usize) -> Result<Budget> {
    let open = open_descriptors()?;
    let needed = open + requested as u64 + RESERVED_FDS;
    let (soft, hard) = limits()?;
    let mut budget = Budget { max_clients: requested, limit: soft, raised_from: None, open };
    if soft < needed {
        let raised = raise(soft, needed.min(hard));
        if raised > soft {
            budget.limit = raised;
            budget.raised_from = Some(soft);
        }
    }
    let room = budget.limit.saturating_sub(open + RESERVED_FDS);
    if room == 0 {
        return Err(Error::InvalidArgument(format!(
            "the open-file limit (ulimit -n) of {} leaves no room for a client: {open} \
             descriptors are open (the store, the listeners) and {RESERVED_FDS} are kept in \
             reserve; raise it to at least {}",
            budget.limit,
            open + 1 + RESERVED_FDS
        )));
    }
    budget.max_clients = requested.min(usize::try_from(room).unwrap_or(usize::MAX));
    Ok(budget)
}

/// Descriptors open in this process: the entries of `/proc/self/fd`, less the one reading it.
fn open_descriptors() -> Result<u64> {
    let entries = std::fs::read_dir("/proc/self/fd")
        .map_err(|e| Error::io("listing /proc/self/fd", e))?
        .count() as u64;
    Ok(entries.saturating_sub(1))
}

/// The soft and hard `RLIMIT_NOFILE`.
fn limits() -> Result<(u64, u64)> {
    let mut l = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct it is given, which lives for the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) } != 0 {
        return Err(Error::io("reading the open-file limit", std::io::Error::last_os_error()));
    }
    Ok((l.rlim_cur, l.rlim_max))
}

/// Raises the soft limit toward `target` (at most the hard limit); the soft limit after. A
/// target over what the kernel allows (`fs.nr_open`) is refused whole, so the highest value
/// accepted between `soft` and `target` is searched for.
fn raise(soft: u64, target: u64) -> u64 {
    if set_soft(target) {
        return target;
    }
    // A failed set leaves the limit as it was, so the limit ends at the last `ok` set.
    let (mut ok, mut too_high) = (soft, target);
    while ok + 1 < too_high {
        let mid = ok + (too_high - ok) / 2;
        if set_soft(mid) {
            ok = mid;
        } else {
            too_high = mid;
        }
    }
    ok
}

/// Sets the soft limit, keeping the hard one; whether the kernel accepted it.
fn set_soft(soft: u64) -> bool {
    let Ok((_, hard)) = limits() else { return false };
    let l = libc::rlimit { rlim_cur: soft, rlim_max: hard };
    // SAFETY: setrlimit reads the struct it is given, which lives for the call.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &l) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_warning_names_the_flag_and_the_limit() {
        let b = Budget { max_clients: 90, limit: 256, raised_from: None, open: 134 };
        let w = b.warning(10_000).unwrap();
        assert!(w.contains("--maxclients 10000 needs 10166 open files"), "{w}");
        assert!(w.contains("ulimit -n) is 256"), "{w}");
        assert!(w.contains("lowered to 90"), "{w}");
        assert_eq!(b.warning(90), None);
    }

    #[test]
    fn clients_that_fit_are_left_alone() {
        let b = fit(1).unwrap();
        assert_eq!(b.max_clients, 1);
        assert!(b.limit >= b.open + 1 + RESERVED_FDS);
    }
}
