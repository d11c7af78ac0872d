//! SIGINT and SIGTERM for `bench`, `ycsb` and `kvbench`: the first one asks the command to
//! stop, the second ends the process at once.
//!
//! Why not the default disposition: a benchmark without `--db` runs on a temporary store (a
//! volume file of hundreds of MB, and its WAL tail in `/dev/shm`, which holds memory until a
//! reboot). Killed by Ctrl-C, the process would leave both behind. So:
//! 1. [`install`] registers handlers that only set flags (async-signal-safe): which signal
//!    came, and that a stop is asked for.
//! 2. The benchmark loops poll [`requested`] (and the shared drivers a [`flag`]), stop
//!    starting operations, and the command closes its store and removes its temporary store
//!    by the path it takes at a normal end; it prints no result for the benchmark it cut.
//! 3. `main` then ends the process by the same signal ([`end_by_signal`]): its default
//!    action, so that a shell sees 130 (SIGINT) or 143 (SIGTERM) and a script running the
//!    tool in a loop stops too, as it would had the tool not caught the signal.
//!
//! A second signal while the command cleans up (a close that flushes a large memtable, a
//! compaction that will not stop) takes the default action at once: the user who presses
//! Ctrl-C twice gets the process ended, as with most tools.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use signal_hook::consts::{SIGINT, SIGTERM};

/// The flags the handlers set.
struct Flags {
    /// A stop is asked for.
    stop: Arc<AtomicBool>,
    /// The signal that asked for it (0 before any).
    signal: Arc<AtomicUsize>,
}

static FLAGS: OnceLock<Flags> = OnceLock::new();

fn flags() -> &'static Flags {
    FLAGS.get_or_init(|| Flags {
        stop: Arc::new(AtomicBool::new(false)),
        signal: Arc::new(AtomicUsize::new(0)),
    })
}

/// Installs the handlers for SIGINT and SIGTERM (stage 1 of the module comment).
///
/// # Errors
/// The operating system's refusal to install a handler.
pub fn install() -> std::io::Result<()> {
    let f = flags();
    for sig in [SIGINT, SIGTERM] {
        // A signal's handlers run in the order registered: the default action runs only when
        // a stop was asked for already, so it is the second signal that ends the process.
        signal_hook::flag::register_conditional_default(sig, f.stop.clone())?;
        signal_hook::flag::register_usize(sig, f.signal.clone(), sig as usize)?;
        signal_hook::flag::register(sig, f.stop.clone())?;
    }
    Ok(())
}

/// Whether SIGINT or SIGTERM asked the command to stop.
pub fn requested() -> bool {
    flags().stop.load(Ordering::Relaxed)
}

/// The flag the handlers set, for drivers outside this crate that poll one.
pub fn flag() -> Arc<AtomicBool> {
    flags().stop.clone()
}

/// The signal that asked for a stop, if one did.
pub fn signal() -> Option<i32> {
    match flags().signal.load(Ordering::Relaxed) {
        0 => None,
        s => i32::try_from(s).ok(),
    }
}

/// The signal's name, for messages.
pub fn name(signal: i32) -> &'static str {
    match signal {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        _ => "a signal",
    }
}

/// Ends the process by `signal`'s default action (stage 3 of the module comment). Returns
/// only if the signal could not be raised.
pub fn end_by_signal(signal: i32) {
    let _ = signal_hook::low_level::emulate_default_handler(signal);
}
