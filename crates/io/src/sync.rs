//! The synchronisation primitives of the io crate's hand-over code (`ticket.rs`), named
//! through this module (as `crate::sync`) so that `crates/lsm-model` compiles the very same
//! file against shuttle's primitives and explores its interleavings. Here they are the real
//! ones: std's atomics and parking_lot's locks.

pub(crate) use parking_lot::{Condvar, Mutex};
pub(crate) use std::sync::atomic::{AtomicUsize, Ordering};
