//! The synchronisation primitives of the page log's hand-over code (`turns.rs`, `write_queue.rs`), named
//! through this module (as `super::sync`) so that `crates/lsm-model` compiles the very same
//! file against shuttle's primitives and explores its interleavings beside the lsm engine's
//! write group. Here they are the real ones: std's atomics and parking_lot's locks.

pub(crate) use parking_lot::{Condvar, Mutex};
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// How long [`spin_until`] spins on the CPU before it yields it, and how long it waits in all.
const SPIN_NANOS: u64 = 2_000;
const WAIT_NANOS: u64 = 30_000;

/// Waits briefly, without sleeping in the kernel, for `done` to hold; `false` if it still does
/// not (the caller then sleeps on its condition variable). For hand-overs that usually come
/// within microseconds: a thread that sleeps costs the one waking it a futex call and itself
/// a context switch, which in a YCSB A run with two writers were 4% of the writers' time. The
/// wait spins for a moment and then also yields the CPU every 16 checks (on a machine of two
/// cores the thread it waits for may need that CPU), like RocksDB's adaptive yield in its
/// write thread.
pub fn spin_until(done: impl Fn() -> bool) -> bool {
    let start = std::time::Instant::now();
    let mut checks = 0u32;
    loop {
        if done() {
            return true;
        }
        checks += 1;
        // The clock is read every few checks: it costs about as much as one.
        if checks % 16 == 0 {
            let waited = start.elapsed().as_nanos() as u64;
            if waited >= WAIT_NANOS {
                return done();
            }
            if waited >= SPIN_NANOS {
                std::thread::yield_now();
                continue;
            }
        }
        std::hint::spin_loop();
    }
}
