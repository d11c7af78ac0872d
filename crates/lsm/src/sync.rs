//! The synchronisation primitives of the code that a model checker explores: the memtable's
//! skiplist and arena, and the write group's hand-over (`db/write_group.rs`; its queue of
//! writers and its publication order are the page log's, `space/src/page_log/`, which names
//! its primitives the same way).
//!
//! Those files name their atomics, mutexes and condition variables through this module (as
//! `super::sync`), never directly, so that `crates/lsm-model` can compile the very same
//! files against shuttle's primitives and explore their interleavings. Here they are the
//! real ones: std's atomics and parking_lot's locks.

pub(crate) use parking_lot::{Condvar, Mutex};
pub(crate) use std::sync::atomic::{AtomicPtr, AtomicU8, AtomicU64, AtomicUsize, Ordering, fence};
