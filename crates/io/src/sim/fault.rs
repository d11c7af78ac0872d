//! Fault injection for the simulated device: which requests fail or misbehave, and when.
//!
//! A [`FaultPlan`] is a list of [`Fault`]s. Every fault that names an ordinal ("the nth write")
//! counts requests of its kind that reached the device since [`crate::SimDevice::set_faults`],
//! failed ones included, starting at 1; misaligned or out-of-range requests are refused by the
//! queue before they reach the device and are not counted.
//!
//! When several faults match one request, a failure wins over a misdirection: an Io error
//! first, then NoSpace, then Misdirect (a failed write lands nowhere).

use crate::error::{Error, OpKind};

/// A set of faults to inject; the default injects none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultPlan {
    /// The faults, all active at once.
    pub faults: Vec<Fault>,
}

/// One injected misbehaviour of the device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The `nth` request of kind `op` (1-based, counted from `set_faults`) fails with an Io
    /// error carrying EIO; with `sticky`, so does every later one of that kind. A failed write
    /// or flush has no effect on the media.
    Eio {
        /// Which kind of request fails.
        op: OpKind,
        /// The first failing request of that kind, 1-based.
        nth: u64,
        /// Whether every later request of that kind fails too (a dead device).
        sticky: bool,
    },
    /// Every write that ends past `from_offset` fails with [`Error::NoSpace`] and has no effect
    /// (a thin-provisioned device that ran out of backing space).
    NoSpace {
        /// Writes whose last byte lies at or beyond this offset fail.
        from_offset: u64,
    },
    /// The `nth_write` write is acknowledged but its data lands at `to_offset` (which must be
    /// block-aligned); the part that would run past the device's end is lost.
    Misdirect {
        /// Which write goes astray, 1-based.
        nth_write: u64,
        /// Where its data lands instead.
        to_offset: u64,
    },
    /// The `nth_read` read returns its data with `buf[byte] ^= xor`; the media is untouched, so
    /// reading again returns the right bytes.
    ReadBitFlip {
        /// Which read is damaged, 1-based.
        nth_read: u64,
        /// Index of the damaged byte inside the read's buffer.
        byte: u64,
        /// The bits to flip.
        xor: u8,
    },
}

/// What the plan decided for one write.
#[derive(Debug)]
pub(crate) enum WriteFate {
    /// Write the data where it was asked to go.
    Land,
    /// Write the data at this offset instead.
    Misdirect(u64),
    /// Fail the write with this error; nothing reaches the media.
    Fail(Error),
}

/// What the plan decided for one read.
#[derive(Debug)]
pub(crate) enum ReadFate {
    /// Return the media's bytes.
    Clean,
    /// Return the media's bytes with bits flipped: `(byte index, xor)` pairs.
    Flip(Vec<(u64, u8)>),
    /// Fail the read with this error.
    Fail(Error),
}

/// A plan and the per-kind request counters that its ordinals refer to.
#[derive(Debug, Default)]
pub(crate) struct FaultState {
    plan: FaultPlan,
    reads: u64,
    writes: u64,
    flushes: u64,
}

impl FaultState {
    /// A fresh state for `plan`, counters at zero.
    ///
    /// # Panics
    /// On an ordinal of 0 (it would never fire, which is a bug in the test that wrote it) or a
    /// misdirection target that is not aligned to `block_size`.
    pub(crate) fn new(plan: FaultPlan, block_size: u32) -> FaultState {
        for fault in &plan.faults {
            match *fault {
                Fault::Eio { nth, .. } => assert!(nth >= 1, "Fault::Eio nth is 1-based"),
                Fault::Misdirect { nth_write, to_offset } => {
                    assert!(nth_write >= 1, "Fault::Misdirect nth_write is 1-based");
                    assert!(
                        to_offset % u64::from(block_size) == 0,
                        "Fault::Misdirect to_offset {to_offset} not aligned to {block_size}"
                    );
                }
                Fault::ReadBitFlip { nth_read, .. } => {
                    assert!(nth_read >= 1, "Fault::ReadBitFlip nth_read is 1-based")
                }
                Fault::NoSpace { .. } => {}
            }
        }
        FaultState { plan, reads: 0, writes: 0, flushes: 0 }
    }

    /// Counts a write of `len` bytes at `offset` and decides its fate.
    pub(crate) fn on_write(&mut self, offset: u64, len: u64) -> WriteFate {
        self.writes += 1;
        if let Some(err) = self.eio(OpKind::Write, self.writes, offset) {
            return WriteFate::Fail(err);
        }
        let end = offset + len;
        let full = self
            .plan
            .faults
            .iter()
            .any(|f| matches!(*f, Fault::NoSpace { from_offset } if end > from_offset));
        if full {
            return WriteFate::Fail(Error::NoSpace { offset });
        }
        let n = self.writes;
        let target = self.plan.faults.iter().find_map(|f| match *f {
            Fault::Misdirect { nth_write, to_offset } if nth_write == n => Some(to_offset),
            _ => None,
        });
        target.map_or(WriteFate::Land, WriteFate::Misdirect)
    }

    /// Counts a release (a write of zeros) at `offset`; `Some` if an Eio fault fails it.
    /// NoSpace and misdirection do not apply: a release needs no room and moves no data.
    pub(crate) fn on_release(&mut self, offset: u64) -> Option<Error> {
        self.writes += 1;
        self.eio(OpKind::Write, self.writes, offset)
    }

    /// Counts a read at `offset` and decides its fate.
    pub(crate) fn on_read(&mut self, offset: u64) -> ReadFate {
        self.reads += 1;
        if let Some(err) = self.eio(OpKind::Read, self.reads, offset) {
            return ReadFate::Fail(err);
        }
        let n = self.reads;
        let flips: Vec<(u64, u8)> = self
            .plan
            .faults
            .iter()
            .filter_map(|f| match *f {
                Fault::ReadBitFlip { nth_read, byte, xor } if nth_read == n => Some((byte, xor)),
                _ => None,
            })
            .collect();
        if flips.is_empty() { ReadFate::Clean } else { ReadFate::Flip(flips) }
    }

    /// Counts a flush; `Some` if it must fail.
    pub(crate) fn on_flush(&mut self) -> Option<Error> {
        self.flushes += 1;
        self.eio(OpKind::Flush, self.flushes, 0)
    }

    fn eio(&self, kind: OpKind, n: u64, offset: u64) -> Option<Error> {
        let hit = self.plan.faults.iter().any(|f| match *f {
            Fault::Eio { op, nth, sticky } => op == kind && (n == nth || (sticky && n > nth)),
            _ => false,
        });
        hit.then(|| Error::Io {
            op: kind,
            offset,
            source: std::io::Error::from_raw_os_error(libc::EIO),
        })
    }
}
