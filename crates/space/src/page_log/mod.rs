//! The page log: one writer's and one reader's rules over the shared log page format
//! (`log_page.rs`), for every log of shale: the lsm engine's WAL, the hash engine's record
//! log and checkpoints. Moved down from the engines, each of which had its own copy, so that
//! a fix to one rule lands once (issue #43).
//!
//! - [`packer`]: packing records into pages ([`PageCursor`]) and knowing beforehand where
//!   they end ([`packed_end`]).
//! - [`scan`]: reading a segment back after a crash, with the torn-tail and hole rules.
//! - [`sequencer`]: group commit's numbered rounds, one leader at a time, a failure sticky.
//! - [`write_queue`]: group commit's queue of writers: the first without a leader leads and
//!   takes the others' items as its group.
//! - [`driver`]: run to completion: a worker's turns run by a caller that waits for them
//!   when nobody else runs them, else by the worker's thread (the hash engine's shard).
//! - [`pipeline`]: durable page writes of several groups in flight side by side on logger
//!   queues, acknowledged in order ([`turns`]), with the adaptive search for the number of
//!   loggers (SpanDB's parallel WAL).
//!
//! Where each engine's pages lie (the WAL area's groups, a slot per record-log segment) and
//! when they are written stay the engine's: the layer knows pages, not keys.

pub mod driver;
mod level_search;
pub mod packer;
pub mod pipeline;
pub mod scan;
pub mod sequencer;
pub mod sync;
pub mod turns;
pub mod write_queue;
#[cfg(test)]
mod write_queue_tests;

pub use driver::{Driver, DriverStats, Step};
pub use packer::{PageCursor, Placed, packed_end};
pub use pipeline::{LogPipeline, Logger, PipelineStats};
pub use scan::{Pages, ScanEnd, ScanError, Scanned, head_pages, record_at, record_head_at};
pub use sequencer::{NotBegun, Round, Sequencer};
pub use turns::Turns;
pub use write_queue::WriteQueue;
