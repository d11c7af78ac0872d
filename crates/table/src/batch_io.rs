//! Block reads and writes in batches, several in flight at once.
//!
//! - Reads: a scan's batch knows the positions of its rows from the ordered index before it
//!   reads a byte, so it reads every block it lacks at once, in block order, each block once
//!   however many of the batch's rows it holds (`Storage::scan_batch`).
//! - Writes: the dirty blocks of the cache, written when a commit needs them durable
//!   (`Storage::write_dirty`), each once however many changes it took.
//!
//! This machine's disk serves about 19K random 4 KiB reads a second one at a time and 87K at
//! depth 64, 5.1K O_DSYNC writes at depth 1 and 23K at depth 8: depth is most of the speed.
//!
//! Where the requests go ([`BlockQueue`]): by default each user of the volume (the store's
//! writer, each thread reading outside the mutex) has a queue of its own and waits on it;
//! with `TableOptions::queue_pairs`, every user shares the store's queue pairs (LATTE's
//! parallel queues: requests weighed by kind onto the lightest of several queues, each
//! with its completion poller, in the affinity mode chosen; `shale_io::QueuePairs`).

use std::sync::Arc;

use shale_io::{AlignedBuf, Op, Queue, QueueExt, QueuePairs, Request};
use shale_space::VolumeQueue;

use crate::block::BLOCK_BYTES;
use crate::error::Result;

/// The queue a user of the volume sends its block requests to.
pub(crate) enum BlockQueue {
    /// A queue of its own, waited on by the calling thread.
    Own(VolumeQueue),
    /// The store's queue pairs, shared.
    Pairs(Arc<QueuePairs>),
}

impl BlockQueue {
    /// Reads `len` bytes at `offset`.
    pub fn read_at(&mut self, offset: u64, len: usize) -> shale_io::Result<AlignedBuf> {
        match self {
            BlockQueue::Own(q) => q.read_at(offset, len),
            BlockQueue::Pairs(p) => p.read_at(offset, len),
        }
    }

    /// Writes `buf` at `offset`, giving it back.
    pub fn write_at(
        &mut self,
        offset: u64,
        buf: AlignedBuf,
        durable: bool,
    ) -> shale_io::Result<AlignedBuf> {
        match self {
            BlockQueue::Own(q) => q.write_at(offset, buf, durable),
            BlockQueue::Pairs(p) => p.write_at(offset, buf, durable),
        }
    }

    /// Makes every completed write durable.
    pub fn flush(&mut self) -> shale_io::Result<()> {
        match self {
            BlockQueue::Own(q) => q.flush(),
            BlockQueue::Pairs(p) => p.flush(),
        }
    }
}

/// Most requests of one batch in flight at once (and at most the queue's depth).
pub const BATCH_IN_FLIGHT: usize = 32;

/// Reads the block at each of `addresses`; the blocks come back in the order of
/// `addresses`.
///
/// # Errors
/// The first failed read's error (the requests still in flight are reaped first, so the
/// queue is left empty).
pub fn read_blocks(queue: &mut BlockQueue, addresses: &[u64]) -> Result<Vec<AlignedBuf>> {
    let ops =
        addresses.iter().map(|&offset| Op::Read { offset, buf: AlignedBuf::zeroed(BLOCK_BYTES) });
    let bufs = run(queue, ops.collect())?;
    Ok(bufs.into_iter().map(|b| b.expect("a read returns its buffer")).collect())
}

/// Writes each block at its address, not durably (a flush follows).
///
/// # Errors
/// The first failed write's error, as [`read_blocks`].
pub fn write_blocks(queue: &mut BlockQueue, blocks: Vec<(u64, AlignedBuf)>) -> Result<()> {
    let ops = blocks.into_iter().map(|(offset, buf)| Op::Write { offset, buf, durable: false });
    run(queue, ops.collect()).map(|_| ())
}

/// Runs `ops` (on queue pairs: all at once, as the pairs' depth allows); their buffers
/// come back in order.
fn run(queue: &mut BlockQueue, ops: Vec<Op>) -> Result<Vec<Option<AlignedBuf>>> {
    match queue {
        BlockQueue::Own(q) => run_own(q, ops),
        BlockQueue::Pairs(p) => Ok(p.run(ops).into_iter().collect::<shale_io::Result<_>>()?),
    }
}

/// Runs `ops` on a queue of its own with up to [`BATCH_IN_FLIGHT`] in flight; their buffers
/// come back in order.
fn run_own(queue: &mut VolumeQueue, ops: Vec<Op>) -> Result<Vec<Option<AlignedBuf>>> {
    assert_eq!(queue.in_flight(), 0, "a batch on a queue with requests in flight");
    let depth = BATCH_IN_FLIGHT.min(queue.depth()).max(1);
    let n = ops.len();
    let mut out: Vec<Option<AlignedBuf>> = (0..n).map(|_| None).collect();
    let mut ops = ops.into_iter().enumerate().peekable();
    let mut failed = None;
    let mut done = Vec::with_capacity(depth);
    loop {
        while failed.is_none() && queue.in_flight() < depth {
            let Some((tag, op)) = ops.next() else { break };
            if let Err((e, _)) = queue.submit(Request { tag: tag as u64, op }) {
                failed = Some(e);
            }
        }
        if queue.in_flight() == 0 {
            break;
        }
        done.clear();
        queue.reap(1, &mut done)?;
        for c in done.drain(..) {
            match c.result {
                Ok(()) => out[c.tag as usize] = c.buf,
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
    }
    match failed {
        Some(e) => Err(e.into()),
        None => Ok(out),
    }
}
