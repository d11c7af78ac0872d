//! Weighted dispatch of requests over several queues (LATTE).
//!
//! A device serves reads, sequential writes and random writes at different costs: on flash a
//! random write costs more than a sequential one, which costs more than a read. Counting
//! requests per queue therefore balances badly; LATTE instead weighs each request by
//! `lambda * bytes`, with one lambda per class, and sends each request to the queue whose
//! in-flight requests weigh least.
//!
//! Submission stages:
//! 1. Classify the request: read, sequential write (it starts where the previous write
//!    submitted through this dispatcher ended), random write (anything else, including the
//!    first write), or flush (weight 0).
//! 2. Pick the queue with the least pending weight among those not full; ties go to the lowest
//!    index. If every queue is full, hand the request back with [`Error::Busy`].
//! 3. Swap the caller's tag for a dispatcher tag (callers may reuse tags across queues), submit,
//!    and add the request's weight to the queue's pending weight.
//!
//! Reaping gives back the caller's tag and subtracts the request's weight.
//!
//! ```
//! use shale_io::{AlignedBuf, Device, Dispatcher, MemoryDevice, Op, QueueOptions, Request, Weights};
//!
//! let dev = MemoryDevice::new(1 << 20, 4096)?;
//! let queues = (0..2).map(|_| dev.open_queue(&QueueOptions::default())).collect::<Result<_, _>>()?;
//! let mut dispatch = Dispatcher::new(queues, Weights::default())?;
//! let write = Op::Write { offset: 0, buf: AlignedBuf::zeroed(4096), durable: false };
//! assert_eq!(dispatch.submit(Request { tag: 7, op: write }).map_err(|(e, _)| e)?, 0);
//! assert_eq!(dispatch.pending(0), 3 * 4096);
//! let mut done = Vec::new();
//! dispatch.reap(1, &mut done)?;
//! assert_eq!((done[0].tag, dispatch.pending(0)), (7, 0));
//! # Ok::<(), shale_io::Error>(())
//! ```

use std::collections::HashMap;

use crate::device::{Completion, Op, Queue, Request};
use crate::error::{Error, Result};

/// The lambdas: how much one byte of each class of request weighs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Weights {
    /// Weight of a read byte.
    pub read: u32,
    /// Weight of a byte written right after the previous write.
    pub seq_write: u32,
    /// Weight of a byte written anywhere else.
    pub rand_write: u32,
}

impl Weights {
    /// `lambda * bytes` of `op`, where `previous_write_end` is where the write before it
    /// ended (a write starting there is sequential; `None`: no write yet, so random).
    pub(crate) fn weight(&self, op: &Op, previous_write_end: Option<u64>) -> u64 {
        let lambda = match op {
            Op::Read { .. } => self.read,
            Op::Write { offset, .. } if previous_write_end == Some(*offset) => self.seq_write,
            Op::Write { .. } => self.rand_write,
            Op::Flush => 0,
        };
        u64::from(lambda) * op.len() as u64
    }
}

impl Default for Weights {
    /// LATTE's defaults: a random write costs three reads, a sequential write two.
    fn default() -> Weights {
        Weights { read: 1, seq_write: 2, rand_write: 3 }
    }
}

/// A request in flight through the dispatcher.
#[derive(Debug)]
struct Dispatched {
    /// The caller's tag, given back in the completion.
    tag: u64,
    queue: usize,
    weight: u64,
}

/// Sends each request to the queue whose in-flight requests weigh least.
pub struct Dispatcher {
    queues: Vec<Box<dyn Queue>>,
    weights: Weights,
    /// Per queue: the sum of `lambda * bytes` of its requests in flight.
    pending: Vec<u64>,
    /// Keyed by the dispatcher tag that replaced the caller's.
    in_flight: HashMap<u64, Dispatched>,
    next_tag: u64,
    /// Where the previous write submitted through the dispatcher ended; None before the first.
    last_write_end: Option<u64>,
}

impl Dispatcher {
    /// A dispatcher over `queues` (typically one device's queues, or one queue per device).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `queues` is empty.
    pub fn new(queues: Vec<Box<dyn Queue>>, weights: Weights) -> Result<Dispatcher> {
        if queues.is_empty() {
            return Err(Error::InvalidArgument("a dispatcher needs at least one queue".into()));
        }
        let pending = vec![0; queues.len()];
        Ok(Dispatcher {
            queues,
            weights,
            pending,
            in_flight: HashMap::new(),
            next_tag: 0,
            last_write_end: None,
        })
    }

    /// Number of queues.
    pub fn queues(&self) -> usize {
        self.queues.len()
    }

    /// The pending weight of queue `q`: the sum of `lambda * bytes` of its requests in flight.
    ///
    /// # Panics
    /// If `q` is not a queue index.
    pub fn pending(&self, q: usize) -> u64 {
        self.pending[q]
    }

    /// Requests submitted through the dispatcher and not yet reaped.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Sends `req` to the least-loaded queue that has room and returns that queue's index.
    ///
    /// # Errors
    /// [`Error::Busy`] when every queue is full (reap and resubmit), or the chosen queue's
    /// refusal (a misaligned request, say); either way the request comes back with its tag.
    pub fn submit(&mut self, mut req: Request) -> std::result::Result<usize, (Error, Request)> {
        let weight = self.weight(&req.op);
        let Some(q) = self.least_loaded() else {
            return Err((Error::Busy, req));
        };
        let caller_tag = req.tag;
        let tag = self.next_tag;
        req.tag = tag;
        let write_end = match &req.op {
            Op::Write { offset, buf, .. } => Some(offset + buf.len() as u64),
            Op::Read { .. } | Op::Flush => None,
        };
        if let Err((err, mut req)) = self.queues[q].submit(req) {
            req.tag = caller_tag;
            return Err((err, req));
        }
        self.next_tag += 1;
        self.pending[q] += weight;
        self.in_flight.insert(tag, Dispatched { tag: caller_tag, queue: q, weight });
        if write_end.is_some() {
            self.last_write_end = write_end;
        }
        Ok(q)
    }

    /// Waits until at least `min` requests have completed across the queues and appends every
    /// ready completion to `out`, with the caller's tags; returns how many were appended.
    /// When it must wait, it waits on one queue at a time, which is enough to guarantee
    /// progress because every queue it waits on has requests in flight.
    ///
    /// # Panics
    /// If `min` exceeds [`Dispatcher::in_flight`].
    ///
    /// # Errors
    /// A queue's own failure; completions reaped before it are still appended, tags restored.
    pub fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<usize> {
        assert!(min <= self.in_flight.len(), "reap({min}) with {} in flight", self.in_flight.len());
        let start = out.len();
        let reaped = self.reap_queues(min, out);
        for done in &mut out[start..] {
            let sent = self
                .in_flight
                .remove(&done.tag)
                .expect("a completion answers a request the dispatcher submitted");
            done.tag = sent.tag;
            self.pending[sent.queue] -= sent.weight;
        }
        reaped.map(|()| out.len() - start)
    }

    /// Collects ready completions from every queue, then waits for more until `min` arrived.
    fn reap_queues(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<()> {
        let start = out.len();
        for queue in self.queues.iter_mut().filter(|q| q.in_flight() > 0) {
            queue.reap(0, out)?;
        }
        while out.len() - start < min {
            let need = min - (out.len() - start);
            let queue = self
                .queues
                .iter_mut()
                .max_by_key(|q| q.in_flight())
                .expect("a dispatcher has at least one queue");
            let wait_for = need.min(queue.in_flight());
            queue.reap(wait_for, out)?;
        }
        Ok(())
    }

    /// Stage 1: `lambda * bytes` of the request's class.
    fn weight(&self, op: &Op) -> u64 {
        self.weights.weight(op, self.last_write_end)
    }

    /// Stage 2: the non-full queue with the least pending weight, lowest index on ties.
    fn least_loaded(&self) -> Option<usize> {
        (0..self.queues.len())
            .filter(|&q| self.queues[q].in_flight() < self.queues[q].depth())
            .min_by_key(|&q| (self.pending[q], q))
    }
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("queues", &self.queues.len())
            .field("weights", &self.weights)
            .field("pending", &self.pending)
            .field("in_flight", &self.in_flight.len())
            .field("last_write_end", &self.last_write_end)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::AlignedBuf;
    use crate::device::{Device, QueueOptions};
    use crate::memory::MemoryDevice;

    const KB4: usize = 4096;

    fn dispatcher(depths: &[u32]) -> (MemoryDevice, Dispatcher) {
        let dev = MemoryDevice::new(1 << 20, 512).unwrap();
        let queues = depths
            .iter()
            .map(|&depth| dev.open_queue(&QueueOptions { depth, ..Default::default() }).unwrap())
            .collect();
        (dev, Dispatcher::new(queues, Weights::default()).unwrap())
    }

    fn read(tag: u64, offset: u64, len: usize) -> Request {
        Request { tag, op: Op::Read { offset, buf: AlignedBuf::zeroed(len) } }
    }

    fn write(tag: u64, offset: u64, len: usize, byte: u8) -> Request {
        let mut buf = AlignedBuf::zeroed(len);
        buf.fill(byte);
        Request { tag, op: Op::Write { offset, buf, durable: false } }
    }

    fn submit(d: &mut Dispatcher, req: Request) -> usize {
        d.submit(req).map_err(|(e, _)| e).unwrap()
    }

    #[test]
    fn the_lightest_queue_wins_where_counting_requests_would_not() {
        let (_dev, mut d) = dispatcher(&[8, 8]);
        assert_eq!(submit(&mut d, write(1, 64 * 1024, KB4, 1)), 0);
        assert_eq!(submit(&mut d, read(2, 0, KB4)), 1);
        assert_eq!((d.pending(0), d.pending(1)), (3 * KB4 as u64, KB4 as u64));
        // Both queues hold one request: counting would tie and pick queue 0, but the random
        // write on queue 0 weighs three times the read on queue 1.
        assert_eq!(submit(&mut d, read(3, 0, KB4)), 1);
        assert_eq!(submit(&mut d, read(4, 0, KB4)), 1);
        assert_eq!(d.pending(1), 3 * KB4 as u64);
        // Now tied on weight: the lowest index wins.
        assert_eq!(submit(&mut d, read(5, 0, 512)), 0);
    }

    #[test]
    fn a_write_continuing_the_previous_one_weighs_as_sequential() {
        let (_dev, mut d) = dispatcher(&[8, 8, 8]);
        // The first write has no predecessor, so it is random even at offset 0.
        assert_eq!(submit(&mut d, write(1, 0, KB4, 1)), 0);
        assert_eq!(d.pending(0), 3 * KB4 as u64);
        assert_eq!(submit(&mut d, write(2, KB4 as u64, KB4, 2)), 1);
        assert_eq!(d.pending(1), 2 * KB4 as u64);
        // A read in between does not break the sequence of writes.
        assert_eq!(submit(&mut d, read(3, 0, 512)), 2);
        assert_eq!(submit(&mut d, write(4, 2 * KB4 as u64, 512, 3)), 2);
        assert_eq!(d.pending(2), 512 + 2 * 512);
        assert_eq!(submit(&mut d, write(5, 0, 512, 4)), 2);
        assert_eq!(d.pending(2), 512 + 2 * 512 + 3 * 512);
    }

    #[test]
    fn a_flush_weighs_nothing_and_goes_to_the_least_loaded_queue() {
        let (_dev, mut d) = dispatcher(&[8, 8]);
        submit(&mut d, read(1, 0, KB4));
        assert_eq!(submit(&mut d, Request { tag: 2, op: Op::Flush }), 1);
        assert_eq!(d.pending(1), 0);
        assert_eq!(submit(&mut d, Request { tag: 3, op: Op::Flush }), 1);
        assert_eq!(d.in_flight(), 3);
    }

    #[test]
    fn full_queues_are_skipped_and_all_full_is_busy() {
        let (_dev, mut d) = dispatcher(&[1, 2]);
        assert_eq!(submit(&mut d, read(1, 0, 512)), 0);
        assert_eq!(submit(&mut d, read(2, 0, KB4)), 1);
        // Queue 0 weighs least but is full.
        assert_eq!(submit(&mut d, read(3, 0, 512)), 1);
        let (err, req) = d.submit(read(4, 0, 512)).unwrap_err();
        assert!(matches!(err, Error::Busy), "{err}");
        assert_eq!(req.tag, 4);
        assert_eq!(d.pending(1), (KB4 + 512) as u64);
    }

    #[test]
    fn reaping_restores_tags_and_drops_the_weights() {
        let (_dev, mut d) = dispatcher(&[4, 4]);
        // Callers may reuse a tag; each completion still finds its own.
        let tags = [40, 40, 41, 42, 43];
        submit(&mut d, write(tags[0], 0, KB4, 0xA1));
        submit(&mut d, read(tags[1], 8192, 512));
        submit(&mut d, write(tags[2], KB4 as u64, 512, 0xA2));
        submit(&mut d, Request { tag: tags[3], op: Op::Flush });
        submit(&mut d, read(tags[4], 0, KB4));
        let mut out = Vec::new();
        assert_eq!(d.reap(5, &mut out).unwrap(), 5);
        let mut got: Vec<u64> = out.iter().map(|c| c.tag).collect();
        got.sort_unstable();
        assert_eq!(got, tags);
        assert!(out.iter().all(|c| c.result.is_ok()));
        let last_read = out.iter().find(|c| c.tag == 43).unwrap();
        assert!(last_read.buf.as_ref().unwrap().iter().all(|&b| b == 0xA1));
        assert_eq!((d.pending(0), d.pending(1), d.in_flight()), (0, 0, 0));
    }

    #[test]
    fn reaping_part_lowers_only_the_reaped_weights() {
        let (_dev, mut d) = dispatcher(&[4, 4]);
        submit(&mut d, write(1, 0, KB4, 1));
        submit(&mut d, read(2, 0, 512));
        let mut out = Vec::new();
        // Inline queues complete at once, so reap(0) collects everything ready.
        assert_eq!(d.reap(0, &mut out).unwrap(), 2);
        assert_eq!((d.pending(0), d.pending(1)), (0, 0));
        submit(&mut d, read(3, 0, 512));
        assert_eq!(d.pending(0), 512);
    }

    #[test]
    fn a_refused_request_comes_back_with_its_tag_and_weighs_nothing() {
        let (_dev, mut d) = dispatcher(&[4]);
        let (err, req) = d.submit(read(9, 100, 512)).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert_eq!((req.tag, d.pending(0), d.in_flight()), (9, 0, 0));
        // A refused write does not count as the previous write either.
        submit(&mut d, write(1, 0, 512, 1));
        assert!(d.submit(write(2, (1 << 20) - 512, 1024, 1)).is_err());
        submit(&mut d, write(3, 512, 512, 1));
        assert_eq!(d.pending(0), 3 * 512 + 2 * 512);
    }

    /// A queue whose requests complete only when a reap waits for them, one per awaited
    /// completion: it makes the dispatcher's waiting path run, which inline queues never need.
    struct LazyQueue {
        waiting: Vec<Request>,
    }

    impl Queue for LazyQueue {
        fn depth(&self) -> usize {
            8
        }
        fn in_flight(&self) -> usize {
            self.waiting.len()
        }
        fn submit(&mut self, req: Request) -> std::result::Result<(), (Error, Request)> {
            self.waiting.push(req);
            Ok(())
        }
        fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<usize> {
            assert!(min <= self.waiting.len());
            for req in self.waiting.drain(..min) {
                let kind = req.op.kind();
                out.push(Completion { tag: req.tag, kind, result: Ok(()), buf: req.op.into_buf() });
            }
            Ok(min)
        }
    }

    #[test]
    fn reap_waits_across_queues_until_min_completions_arrive() {
        let lazy = || Box::new(LazyQueue { waiting: Vec::new() }) as Box<dyn Queue>;
        let mut d = Dispatcher::new(vec![lazy(), lazy()], Weights::default()).unwrap();
        for tag in 10..14 {
            submit(&mut d, read(tag, 0, 512));
        }
        let mut out = Vec::new();
        assert_eq!(d.reap(0, &mut out).unwrap(), 0);
        assert_eq!(d.reap(3, &mut out).unwrap(), 3);
        assert_eq!(d.in_flight(), 1);
        assert_eq!(d.pending(0) + d.pending(1), 512);
        assert_eq!(d.reap(1, &mut out).unwrap(), 1);
        let mut tags: Vec<u64> = out.iter().map(|c| c.tag).collect();
        tags.sort_unstable();
        assert_eq!(tags, [10, 11, 12, 13]);
        assert_eq!((d.pending(0), d.pending(1)), (0, 0));
    }

    #[test]
    #[should_panic(expected = "reap(1) with 0 in flight")]
    fn reaping_more_than_in_flight_is_a_bug() {
        let (_dev, mut d) = dispatcher(&[4]);
        let _ = d.reap(1, &mut Vec::new());
    }

    #[test]
    fn no_queues_is_invalid() {
        assert!(matches!(
            Dispatcher::new(Vec::new(), Weights::default()),
            Err(Error::InvalidArgument(_))
        ));
    }
}
