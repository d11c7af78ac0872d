//! The lsm engine's lock-free and hand-over code, compiled against shuttle's primitives so a
//! model checker can explore its interleavings (issue #9).
//!
//! The files are shale-lsm's own, included by path, not copies: `memtable/skiplist.rs`,
//! `memtable/arena.rs`, `db/write_group.rs`, `sst/release_queue.rs` and `key.rs`. They take their atomics, mutexes
//! and condition variables from a `sync` module (shale-lsm's `crate::sync`); here that module
//! ([`sync`]) hands them shuttle's, whose every operation is a point where shuttle's scheduler
//! may switch threads. What is checked, in `tests/`:
//! - the skiplist: concurrent inserts and seeks (`memtable::List`), each read of a completed
//!   insert finding it, every seek landing at or after its target;
//! - the write group and the memtable switch: writers commit through the real `WriteQueue`
//!   and `GroupSync`, led through the stages of `Db::write` (stated again in
//!   [`db::Store`], which names the engine function each step stands for), with memtables
//!   switched as they fill, and each writer reads its write back at once;
//! - run to completion (`space/src/page_log/driver.rs`, the hash engine's shard worker's
//!   turns): callers that run the worker's turns themselves or hand them to its thread, and
//!   every request answered, none stranded, the thread ending at the close;
//! - the release queue (`sst/release_queue.rs`: dropped SSTs handed from callers' threads to
//!   the store's release thread, and freed WAL groups' storage from the WAL's writer to its
//!   release thread, `wal/release.rs`): every job run once, `wait_idle` returning only after every
//!   job handed before it is done, the thread ending at the close with nothing left;
//! - tickets answered together (`io/src/ticket.rs`, the hash engine's batch answers): the
//!   threads asleep on them woken in a chain, each handing it on, none stranded, with wake-ups
//!   nobody sent ([`sync::SPURIOUS_WAKEUPS`]) in the mix.
//!
//! shuttle explores schedules, not weak memory: it runs every atomic as sequentially
//! consistent, so it finds interleaving bugs (the seek bug of issue #9 was one), not missing
//! Acquire/Release pairs. The lib is never built in test mode (`test = false`), so the unit
//! tests inside the borrowed files run only in shale-lsm, on the real primitives.

#![allow(dead_code, unreachable_pub)]

pub mod db;
#[path = "../../space/src/page_log/driver.rs"]
pub mod driver;
#[path = "../../lsm/src/key.rs"]
pub mod key;
pub mod memtable;
#[path = "../../lsm/src/sst/release_queue.rs"]
pub mod release_queue;
pub mod sync;
#[path = "../../io/src/ticket.rs"]
pub mod ticket;
