//! The synchronisation primitives of the group commit (commit.rs), hand-over code that a model
//! checker explores.
//!
//! commit.rs names its mutexes, atomics, `Notify` and `watch` through this module, never
//! directly, so that `crates/serve-model` can compile the very same file against shuttle's
//! primitives and explore its interleavings (as `crates/lsm-model` does with the lsm engine's
//! `sync` module). Here they are the real ones: std's atomics and mutexes, tokio's `Notify`
//! and `watch`.

pub(crate) use std::sync::atomic::{AtomicUsize, Ordering};
pub(crate) use std::sync::{Mutex, MutexGuard};
pub(crate) use tokio::sync::{Notify, watch};

/// Locks `m`; a lock whose holder panicked is taken as it is (what it guards is kept
/// consistent at every step, and a panicking run must not stop every other).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
