//! The synchronisation primitives of the code that a model checker explores: the memtable's
//! skiplist and arena, and the write group's hand-over (`db/write_group.rs`).
//!
//! Those files name their atomics, mutexes and condition variables through this module (as
//! `super::sync`), never directly, so that `crates/lsm-model` can compile the very same
//! files against shuttle's primitives and explore their interleavings. Here they are the
//! real ones: std's atomics and parking_lot's locks.

pub(crate) use parking_lot::{Condvar, Mutex};
pub(crate) use std::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU8, AtomicU64, AtomicUsize, Ordering, fence,
};

pub(crate) use shale_space::page_log::sync::spin_until;
