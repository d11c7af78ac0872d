//! I/O counters by kind, and the queue wrapper that keeps them.
//!
//! Every request the volume or an engine sends goes through a [`VolumeQueue`] of one
//! [`IoClass`], which counts it and refuses it if it strays outside that class's area: an
//! engine bug that would write WAL pages over the version log fails loudly instead.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use shale_io::{Completion, Error as IoError, Op, OpKind, Queue, Request};

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

/// Counters of one volume, shared by all its queues.
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
    fn record(&self, class: IoClass, kind: OpKind, bytes: u64) {
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
pub struct VolumeQueue {
    inner: Box<dyn Queue>,
    class: IoClass,
    area: Range<u64>,
    counters: Arc<IoCounters>,
}

impl VolumeQueue {
    pub(crate) fn new(
        inner: Box<dyn Queue>,
        class: IoClass,
        area: Range<u64>,
        counters: Arc<IoCounters>,
    ) -> VolumeQueue {
        VolumeQueue { inner, class, area, counters }
    }

    /// The byte range this queue may touch.
    pub fn area(&self) -> Range<u64> {
        self.area.clone()
    }
}

impl Queue for VolumeQueue {
    fn depth(&self) -> usize {
        self.inner.depth()
    }

    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }

    fn submit(&mut self, req: Request) -> Result<(), (IoError, Request)> {
        let (offset, len) = (req.op.offset(), req.op.len() as u64);
        let inside = matches!(req.op, Op::Flush)
            || (offset >= self.area.start && offset.saturating_add(len) <= self.area.end);
        if !inside {
            let what = format!(
                "{} I/O of {len} bytes at {offset} outside its area {:?}",
                self.class.name(),
                self.area
            );
            return Err((IoError::InvalidArgument(what), req));
        }
        let kind = req.op.kind();
        self.inner.submit(req)?;
        self.counters.record(self.class, kind, len);
        Ok(())
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> shale_io::Result<usize> {
        self.inner.reap(min, out)
    }
}
