//! shale serve's group commit (`crates/serve/src/commit.rs`), compiled against shuttle's
//! primitives so a model checker can explore its interleavings.
//!
//! The file is serve's own, included by path, not a copy. It takes its mutexes and atomics
//! from a `sync` module (serve's `crate::sync`); here that module (`sync`) hands it
//! shuttle's, whose every operation is a point where shuttle's scheduler may switch tasks,
//! and tokio's own `Notify` and `watch` (they need no runtime: they wake whatever waker polled
//! them, here shuttle's), with a scheduling point before each wake-up. The engine's write is
//! the one step not real: commit.rs reaches it through `GroupWriter`, which [`store::Store`]
//! implements with a map, a scheduling point for the sync, and failures on demand. The steps
//! run.rs takes around the group commit are stated again in [`run`].
//!
//! What is checked, in `tests/group_commit.rs`: batches queued concurrently by several runs
//! are written in ticket order and every waiter is told, none stranded, also when a waiting
//! run is dropped; a read-modify-write of a pending entry sees the value queued before it and
//! no increment is lost; a read of a pending entry answers only once the entry is written;
//! a failed group fails every later batch and read that depended on it.
//!
//! shuttle explores schedules, not weak memory (every atomic runs sequentially consistent).
//! The lib is never built in test mode (`test = false`).

#![allow(dead_code, unreachable_pub)]

#[path = "../../serve/src/commit.rs"]
pub mod commit;
pub mod run;
pub mod store;
mod sync;
/// `crate::value` of commit.rs: serve's own stored value type.
pub use shale_serve::value;
