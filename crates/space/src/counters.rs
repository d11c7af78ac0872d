//! I/O counters by kind, and the queue wrapper that keeps them.
//!
//! Every request the volume or an engine sends goes through a [`VolumeQueue`] of one
//! [`IoClass`], which counts it and refuses it if it strays outside that class's area: an
//! engine bug that would write WAL pages over the version log fails loudly instead.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use shale_io::{Completion, DeviceRef, Error as IoError, Op, OpKind, Queue, QueueOptions, Request};

use crate::tier::Tier;

/// What an I/O is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IoClass {
    /// The format header.
    Header = 0,
    /// The version log (both mirrors and anchors).
    VersionLog = 1,
    /// The WAL area.
    Wal = 2,
    /// SST data in slots.
    Slot = 3,
}

impl IoClass {
    /// Every class, in counter order.
    pub const ALL: [IoClass; 4] =
        [IoClass::Header, IoClass::VersionLog, IoClass::Wal, IoClass::Slot];

    /// Short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            IoClass::Header => "header",
            IoClass::VersionLog => "version-log",
            IoClass::Wal => "wal",
            IoClass::Slot => "slot",
        }
    }
}

#[derive(Debug, Default)]
struct ClassCounters {
    reads: AtomicU64,
    read_bytes: AtomicU64,
    writes: AtomicU64,
    write_bytes: AtomicU64,
    flushes: AtomicU64,
}

/// Counters of one volume (one tier's device), shared by all its queues.
#[derive(Debug, Default)]
pub struct IoCounters {
    classes: [ClassCounters; 4],
}

/// A snapshot of one class's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassSnapshot {
    /// Read requests.
    pub reads: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Write requests.
    pub writes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// Flush requests.
    pub flushes: u64,
}

impl IoCounters {
    pub(crate) fn record(&self, class: IoClass, kind: OpKind, bytes: u64) {
        let c = &self.classes[class as usize];
        let (ops, total) = match kind {
            OpKind::Read => (&c.reads, Some(&c.read_bytes)),
            OpKind::Write => (&c.writes, Some(&c.write_bytes)),
            OpKind::Flush => (&c.flushes, None),
        };
        ops.fetch_add(1, Ordering::Relaxed);
        if let Some(total) = total {
            total.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// The counters of one class now.
    pub fn snapshot(&self, class: IoClass) -> ClassSnapshot {
        let c = &self.classes[class as usize];
        ClassSnapshot {
            reads: c.reads.load(Ordering::Relaxed),
            read_bytes: c.read_bytes.load(Ordering::Relaxed),
            writes: c.writes.load(Ordering::Relaxed),
            write_bytes: c.write_bytes.load(Ordering::Relaxed),
            flushes: c.flushes.load(Ordering::Relaxed),
        }
    }
}

/// A queue confined to one area of a volume that counts what passes through it.
///
/// On a tiered store a slot queue has a *lane* per tier: requests carry byte addresses
/// ([`crate::Tier::split`]), each goes to its tier's device at its device offset, and is
/// counted there. The fast lane is opened with the queue, the capacity lane at its first
/// request (most queues read or write one SST, so one tier). A flush goes to the lane written
/// since the last flush; an SST is written to one tier, so a flush over both is refused as a
/// caller's bug.
pub struct VolumeQueue {
    class: IoClass,
    depth: usize,
    /// By tier index; one lane for a volume without a capacity tier or a class that is on
    /// the fast volume only.
    lanes: Vec<Lane>,
    /// Lanes written since their last flush.
    written: [bool; 2],
    /// The lane the next blocking reap waits on when both have requests in flight, so
    /// neither starves.
    next_wait: usize,
}

/// One tier's part of a [`VolumeQueue`].
struct Lane {
    queue: Option<Box<dyn Queue>>,
    /// How to open `queue` on first use.
    opener: Option<(DeviceRef, QueueOptions)>,
    /// Device offsets the lane may touch.
    area: Range<u64>,
    counters: Arc<IoCounters>,
}

impl Lane {
    fn queue(&mut self) -> Result<&mut Box<dyn Queue>, IoError> {
        if self.queue.is_none() {
            let (device, opts) = self.opener.as_ref().expect("a lane without a queue opens one");
            self.queue = Some(device.open_queue(opts)?);
        }
        Ok(self.queue.as_mut().expect("opened above"))
    }

    fn in_flight(&self) -> usize {
        self.queue.as_ref().map_or(0, |q| q.in_flight())
    }
}

/// A capacity lane to be opened on first use: its device, queue options, area and counters.
pub(crate) struct LazyLane {
    pub(crate) device: DeviceRef,
    pub(crate) opts: QueueOptions,
    pub(crate) area: Range<u64>,
    pub(crate) counters: Arc<IoCounters>,
}

impl VolumeQueue {
    /// A queue on the fast volume only (`area` in device offsets, which are its addresses).
    pub(crate) fn new(
        inner: Box<dyn Queue>,
        class: IoClass,
        area: Range<u64>,
        counters: Arc<IoCounters>,
    ) -> VolumeQueue {
        let depth = inner.depth();
        let lane = Lane { queue: Some(inner), opener: None, area, counters };
        VolumeQueue { class, depth, lanes: vec![lane], written: [false; 2], next_wait: 0 }
    }

    /// A queue on the fast volume (`inner`) and the capacity volume (`capacity`, opened on
    /// first use).
    pub(crate) fn tiered(
        inner: Box<dyn Queue>,
        class: IoClass,
        area: Range<u64>,
        counters: Arc<IoCounters>,
        capacity: LazyLane,
    ) -> VolumeQueue {
        let mut q = VolumeQueue::new(inner, class, area, counters);
        q.lanes.push(Lane {
            queue: None,
            opener: Some((capacity.device, capacity.opts)),
            area: capacity.area,
            counters: capacity.counters,
        });
        q
    }

    /// Forgets which lanes were written since their last flush, for a queue handed to a new
    /// user (`queues.rs`): its flush is to cover its own writes, as on a queue just opened,
    /// and not be refused for a lane another user wrote.
    pub(crate) fn forget_writes(&mut self) {
        self.written = [false; 2];
    }

    /// The byte range of the fast volume this queue may touch.
    pub fn area(&self) -> Range<u64> {
        self.lanes[0].area.clone()
    }

    /// The lane of `tier`, or why there is none.
    fn lane_index(&self, tier: Tier) -> Result<usize, IoError> {
        let i = tier.index();
        if i < self.lanes.len() {
            return Ok(i);
        }
        Err(IoError::InvalidArgument(format!(
            "{} I/O addressed to the {} tier, which this queue does not reach",
            self.class.name(),
            tier.name()
        )))
    }
}

/// `req` with its offset replaced.
fn with_offset(mut req: Request, offset: u64) -> Request {
    match &mut req.op {
        Op::Read { offset: o, .. } | Op::Write { offset: o, .. } => *o = offset,
        Op::Flush => {}
    }
    req
}

impl Queue for VolumeQueue {
    fn depth(&self) -> usize {
        self.depth
    }

    fn in_flight(&self) -> usize {
        self.lanes.iter().map(Lane::in_flight).sum()
    }

    fn submit(&mut self, req: Request) -> Result<(), (IoError, Request)> {
        if self.in_flight() >= self.depth {
            return Err((IoError::Busy, req));
        }
        let kind = req.op.kind();
        if matches!(req.op, Op::Flush) {
            let i = match self.written {
                [true, true] => {
                    let what = "a flush over both tiers (flush each tier's writes on its own \
                                queue)";
                    return Err((IoError::InvalidArgument(what.into()), req));
                }
                [_, true] => 1,
                _ => 0,
            };
            let lane = &mut self.lanes[i];
            let q = match lane.queue() {
                Ok(q) => q,
                Err(e) => return Err((e, req)),
            };
            q.submit(req)?;
            lane.counters.record(self.class, kind, 0);
            self.written[i] = false;
            return Ok(());
        }
        let address = req.op.offset();
        let len = req.op.len() as u64;
        let (tier, offset) = Tier::split(address);
        let i = match self.lane_index(tier) {
            Ok(i) => i,
            Err(e) => return Err((e, req)),
        };
        let lane = &mut self.lanes[i];
        if offset < lane.area.start || offset.saturating_add(len) > lane.area.end {
            let what = format!(
                "{} I/O of {len} bytes at {offset} of the {} tier outside its area {:?}",
                self.class.name(),
                tier.name(),
                lane.area
            );
            return Err((IoError::InvalidArgument(what), req));
        }
        let q = match lane.queue() {
            Ok(q) => q,
            Err(e) => return Err((e, req)),
        };
        // The device sees its own offset; a refused request goes back with its address, as
        // the caller submitted it.
        q.submit(with_offset(req, offset)).map_err(|(e, r)| (e, with_offset(r, address)))?;
        lane.counters.record(self.class, kind, len);
        if kind == OpKind::Write {
            self.written[i] = true;
        }
        Ok(())
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> shale_io::Result<usize> {
        let busy: Vec<usize> =
            (0..self.lanes.len()).filter(|&i| self.lanes[i].in_flight() > 0).collect();
        if busy.len() <= 1 {
            let i = busy.first().copied().unwrap_or(0);
            return match self.lanes[i].queue.as_mut() {
                Some(q) => q.reap(min, out),
                None => {
                    assert_eq!(min, 0, "reap of {min} on a queue with nothing in flight");
                    Ok(0)
                }
            };
        }
        // Both lanes have requests in flight: take what is ready on either, and wait on one
        // lane at a time (alternating) until `min` are in. Waiting on a lane that has
        // requests in flight always returns, so this never blocks on the wrong lane forever.
        assert!(min <= self.in_flight(), "reap of {min} with {} in flight", self.in_flight());
        let mut got = 0;
        loop {
            for lane in &mut self.lanes {
                if lane.in_flight() > 0 {
                    got += lane.queue.as_mut().expect("in flight").reap(0, out)?;
                }
            }
            if got >= min {
                return Ok(got);
            }
            let i = (0..self.lanes.len())
                .map(|k| (self.next_wait + k) % self.lanes.len())
                .find(|&k| self.lanes[k].in_flight() > 0)
                .expect("requests are still in flight");
            self.next_wait = (i + 1) % self.lanes.len();
            got += self.lanes[i].queue.as_mut().expect("in flight").reap(1, out)?;
        }
    }
}
