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
//! Where the requests go ([`BlockQueue`]), all of them provisioned by the volume
//! (`shale_space::queues`): by default each user of the volume has a queue of its own and
//! waits on it: the store's writer one it keeps, each thread reading outside the mutex one it
//! checks out of the volume's pool ([`BLOCK_QUEUES`]) for the read; with
//! `TableOptions::queue_pairs`, every user shares the store's queue pairs (LATTE's parallel
//! queues: requests weighed by kind onto the lightest of several queues, each with its
//! completion poller, in the affinity mode chosen; `shale_io::QueuePairs`).

use std::sync::Arc;

use shale_io::{AlignedBuf, Op, Queue, QueueExt, QueuePairs, Request};
use shale_space::{IoClass, PoolSpec, PooledQueue, Queues, VolumeQueue};

use crate::block::BLOCK_BYTES;
use crate::error::Result;

/// Idle queues the volume's pool keeps for reads outside the store's mutex and other short
/// uses: one per thread reading at once, of any sane number of threads.
pub const BLOCK_QUEUES_IDLE_MAX: usize = 128;

/// The volume's pool that reads outside the store's mutex (and the short reads and writes
/// of an open or a check) check their queue out of: queues of io's default depth, which
/// holds a batch's [`BATCH_IN_FLIGHT`].
pub const BLOCK_QUEUES: PoolSpec =
    PoolSpec { class: IoClass::Slot, depth: 32, idle_max: BLOCK_QUEUES_IDLE_MAX };

/// The queue a user of the volume sends its block requests to.
pub(crate) enum BlockQueue {
    /// A queue of its own, waited on by the calling thread.
    Own(VolumeQueue),
    /// A queue of the volume's pool, waited on by the calling thread; it goes back to the
    /// pool when dropped.
    Pooled(PooledQueue),
    /// The store's queue pairs, shared.
    Pairs(Arc<QueuePairs>),
}

/// Where a read outside the store's mutex gets its queue: the volume's pool, or the store's
/// queue pairs. Taken without the store's mutex.
pub(crate) enum ReadQueues {
    /// A queue checked out of [`BLOCK_QUEUES`] per read.
    Pool(Queues),
    /// The store's queue pairs, shared.
    Pairs(Arc<QueuePairs>),
}

impl ReadQueues {
    /// A queue for one read.
    ///
    /// # Errors
    /// The volume's, when a queue has to be opened.
    pub fn take(&self) -> Result<BlockQueue> {
        Ok(match self {
            ReadQueues::Pool(q) => BlockQueue::Pooled(q.checkout(BLOCK_QUEUES)?),
            ReadQueues::Pairs(p) => BlockQueue::Pairs(p.clone()),
        })
    }
}

impl BlockQueue {
    /// Reads `len` bytes at `offset`.
    pub fn read_at(&mut self, offset: u64, len: usize) -> shale_io::Result<AlignedBuf> {
        match self {
            BlockQueue::Own(q) => q.read_at(offset, len),
            BlockQueue::Pooled(q) => q.read_at(offset, len),
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
            BlockQueue::Pooled(q) => q.write_at(offset, buf, durable),
            BlockQueue::Pairs(p) => p.write_at(offset, buf, durable),
        }
    }

    /// Makes every completed write durable.
    pub fn flush(&mut self) -> shale_io::Result<()> {
        match self {
            BlockQueue::Own(q) => q.flush(),
            BlockQueue::Pooled(q) => q.flush(),
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
        BlockQueue::Pooled(q) => run_own(q, ops),
        BlockQueue::Pairs(p) => Ok(p.run(ops).into_iter().collect::<shale_io::Result<_>>()?),
    }
}

/// Runs `ops` on a queue of its own with up to [`BATCH_IN_FLIGHT`] in flight; their buffers
/// come back in order.
fn run_own(queue: &mut impl Queue, ops: Vec<Op>) -> Result<Vec<Option<AlignedBuf>>> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use shale_space::{Volume, VolumeOptions};

    fn volume() -> Volume {
        let device = Arc::new(shale_io::MemoryDevice::new(16 << 20, 4096).unwrap());
        Volume::open(device, &VolumeOptions::small_for_tests()).unwrap().volume
    }

    fn block(fill: u8) -> AlignedBuf {
        let mut b = AlignedBuf::zeroed(BLOCK_BYTES);
        b.fill(fill);
        b
    }

    #[test]
    fn reads_outside_the_mutex_take_one_pooled_queue_per_thread_at_once() {
        let volume = volume();
        let at = volume.layout().slot_offset;
        let addresses: Vec<u64> = (0..40).map(|i| at + i * BLOCK_BYTES as u64).collect();
        let reads = ReadQueues::Pool(volume.queues().clone());
        let mut q = reads.take().unwrap();
        write_blocks(&mut q, addresses.iter().map(|&a| (a, block(a as u8))).collect()).unwrap();
        drop(q);
        for _ in 0..3 {
            let mut q = reads.take().unwrap();
            let got = read_blocks(&mut q, &addresses).unwrap();
            assert!(got.iter().zip(&addresses).all(|(b, &a)| b[..] == block(a as u8)[..]));
        }
        let s = volume.queues().stats();
        assert_eq!((s.opened, s.reused, s.idle), (1, 3, 1), "{s:?}");
        // Two readers at once: two queues, both kept.
        let (a, b) = (reads.take().unwrap(), reads.take().unwrap());
        drop((a, b));
        assert_eq!(volume.queues().idle(IoClass::Slot, BLOCK_QUEUES.depth), 2);
    }

    #[test]
    fn with_queue_pairs_every_reader_shares_them() {
        let volume = volume();
        let at = volume.layout().slot_offset;
        let opts = shale_io::QueuePairOptions { pairs: 2, depth: 4, ..Default::default() };
        let reads =
            ReadQueues::Pairs(Arc::new(volume.queues().pairs(IoClass::Slot, &opts).unwrap()));
        let addresses: Vec<u64> = (0..9).map(|i| at + i * BLOCK_BYTES as u64).collect();
        let mut q = reads.take().unwrap();
        assert!(matches!(q, BlockQueue::Pairs(_)));
        write_blocks(&mut q, addresses.iter().map(|&a| (a, block(3))).collect()).unwrap();
        for _ in 0..3 {
            let got = read_blocks(&mut reads.take().unwrap(), &addresses).unwrap();
            assert!(got.iter().all(|b| b[..] == block(3)[..]));
        }
        let s = volume.queues().stats();
        assert_eq!((s.opened, s.idle), (2, 0), "the pairs' queues only: {s:?}");
    }
}
