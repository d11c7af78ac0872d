//! The process's memtable prefaulter: one thread that keeps arena chunks faulted in ahead of
//! the writers (`arena.rs`, the spare list's "Ready chunks"), and the CPU priority it runs at.
//!
//! Its work is background work: zeroing huge pages that a writer would otherwise fault in
//! itself. So it runs at the lowest CPU priority any store of the process gave its background
//! threads (`Options::background_cpu_priority`), not at the priority of the thread that
//! happened to open the first store. At the opener's priority it competed with the threads
//! clients wait on: on 2 cores beside a client, its slices of zeroing (milliseconds each while
//! the first memtables fill) took a core a foreground thread then had to share, and beside
//! `SCHED_IDLE` background threads the core it ran on did not count as free when the kernel
//! placed a woken client thread. (What that did to `shale serve`'s tail measured within the
//! spread of its passes: BENCHMARKS-history.md, "where unpipelined serve requests wait".)
//! Starved at a low priority, it costs a writer at most what it would cost without it: the
//! writer maps and faults its chunk itself.
//!
//! A priority is only ever lowered (a thread cannot raise itself back without privilege):
//! once a store asked for `idle`, the prefaulter stays there for the process's life. A store
//! that asks for a lower priority after the thread started has it applied when the thread
//! next wakes: when a chunk is wanted, and at least every second.

use super::arena;
use shale_io::CpuPriority;
use std::sync::Once;
use std::sync::atomic::{AtomicU8, Ordering};

/// The lowest priority asked for so far, as [`rank`]s: the thread moves there when it wakes.
static WANTED: AtomicU8 = AtomicU8::new(0);

/// How low a priority is: `Normal` 0, `Low` 1, `Idle` 2 (`SCHED_IDLE` runs after every
/// niceness).
fn rank(p: CpuPriority) -> u8 {
    match p {
        CpuPriority::Normal => 0,
        CpuPriority::Low => 1,
        CpuPriority::Idle => 2,
    }
}

fn priority_of(rank: u8) -> CpuPriority {
    match rank {
        0 => CpuPriority::Normal,
        1 => CpuPriority::Low,
        _ => CpuPriority::Idle,
    }
}

/// Starts the prefaulter once per process (later calls do nothing but lower its priority),
/// at `priority` or the lowest one an earlier store asked for. A store calls it when it
/// opens, with its `Options::background_cpu_priority`; arenas work the same without the
/// thread, only slower to fill while no chunk is spare.
pub(crate) fn start_prefaulter(priority: CpuPriority) {
    WANTED.fetch_max(rank(priority), Ordering::Relaxed);
    static STARTED: Once = Once::new();
    STARTED.call_once(|| {
        let spawned = std::thread::Builder::new().name("shale-prefault".into()).spawn(|| {
            let mut applied = 0;
            arena::prefault_forever(move || {
                let wanted = WANTED.load(Ordering::Relaxed);
                if wanted > applied {
                    // Tried once per lowering: a kernel that refuses leaves the thread where
                    // it was, which costs latency, not correctness.
                    applied = wanted;
                    if let Err(e) = shale_io::set_thread_cpu_priority(priority_of(wanted)) {
                        log::warn!("the memtable prefaulter keeps its CPU priority: {e}");
                    }
                }
            })
        });
        if let Err(e) = spawned {
            log::warn!("memtable chunk prefaulter not started: {e}");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_order_the_priorities_from_normal_to_idle() {
        for p in CpuPriority::ALL {
            assert_eq!(priority_of(rank(p)), p);
        }
        assert!(rank(CpuPriority::Normal) < rank(CpuPriority::Low));
        assert!(rank(CpuPriority::Low) < rank(CpuPriority::Idle));
    }
}
