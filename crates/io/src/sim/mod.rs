//! The simulated device: a seeded, deterministic device with a volatile write cache, for
//! crash-point enumeration and fault injection in the tests of every layer above.
//!
//! # Model
//! - A write lands in a volatile cache; reads see it at once. A write submitted `durable` (FUA)
//!   is on stable media when it completes; a flush makes every write completed before it durable.
//! - The device records a trace of every write (where its data landed, its bytes, its durable
//!   flag), every flush and every [`SimDevice::corrupt`], in order.
//! - Writes are numbered 1, 2, ... in the order they reach the device, *failed ones included*:
//!   [`SimDevice::writes`] counts them, and so do the ordinals of [`Fault`]s. A failed write
//!   has no effect on any image, so crash point `k` for a failed write `k` holds the same data
//!   as crash point `k - 1` (plus any flush between them). Counting them keeps crash points and
//!   fault ordinals on one numbering: "fail write 7, then crash after write 7" means what it says.
//!   Requests refused as misaligned or out of range never reach the device and are not counted.
//! - [`SimDevice::crash_image`] rebuilds from the trace what stable media could hold after a
//!   power cut right after write `k`, treating unsynced writes per [`Damage`]; the same
//!   arguments give the same image, always.
//! - A failed flush has no effect: writes it should have made durable stay unsynced.
//! - [`Device::release_range`] is a write of zeros without FUA, as a file system's punched
//!   hole reads back: numbered, traced and counted with the writes (so crash points fall
//!   before and after it and an [`Fault::Eio`] on writes can fail it), unsynced until the next
//!   flush, so a power cut may lose or tear it like any other such write. [`Fault::NoSpace`]
//!   and [`Fault::Misdirect`] spare it: giving storage back needs none, and it moves no data.
//!   [`Device::allocate_range`] only checks its range: every byte of the device is there.
//!
//! Invariants the tests check: `current_image() == crash_image(writes(), Damage::Keep)` and
//! `durable_image() == crash_image(writes(), Damage::Lose)`.
//!
//! ```
//! use shale_io::{AlignedBuf, Damage, Device, QueueExt, QueueOptions, SimDevice};
//!
//! let dev = SimDevice::new(1 << 16, 4096, 42)?;
//! let mut queue = dev.open_queue(&QueueOptions::default())?;
//! queue.write_at(0, AlignedBuf::padded_copy(b"synced", 4096), false)?;
//! queue.flush()?;
//! queue.write_at(4096, AlignedBuf::padded_copy(b"cached", 4096), false)?;
//! assert_eq!(dev.writes(), 2);
//!
//! let image = dev.crash_image(2, Damage::Lose);
//! assert_eq!(&image[..6], b"synced");
//! assert_eq!(&image[4096..4102], &[0; 6]);
//! # Ok::<(), shale_io::Error>(())
//! ```

mod crash;
mod fault;
mod rng;
mod trace;

#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;

pub use crash::Damage;
pub use fault::{Fault, FaultPlan};

use crate::device::{Device, DeviceInfo, Queue, QueueOptions};
use crate::error::{Error, Result};
use crate::inline::{InlineQueue, SyncBackend};
use fault::{FaultState, ReadFate, WriteFate};
use trace::{Event, Trace};

/// Counters of what the simulated device was asked to do.
///
/// Request counts include requests that an injected fault failed (so `writes` equals
/// [`SimDevice::writes`]); byte counts include only requests that succeeded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Reads received.
    pub reads: u64,
    /// Writes received.
    pub writes: u64,
    /// Flushes received.
    pub flushes: u64,
    /// Writes received with the durable (FUA) flag.
    pub durable_writes: u64,
    /// Bytes returned by successful reads.
    pub bytes_read: u64,
    /// Bytes acknowledged by successful writes (a misdirected write counts: it was acknowledged).
    pub bytes_written: u64,
    /// Requests that an injected fault failed or altered.
    pub faults: u64,
    /// Releases received ([`Device::release_range`]), also counted in `writes`.
    pub releases: u64,
}

/// A simulated device; clones are cheap handles on the same device.
#[derive(Clone, Debug)]
pub struct SimDevice {
    inner: Arc<SimBackend>,
}

struct SimBackend {
    /// Kept so that a failing test's `{:?}` of the device names the seed to replay it from;
    /// no behaviour draws on it yet (faults are scripted, crash damage brings its own seed).
    seed: u64,
    capacity: u64,
    block_size: u32,
    state: Mutex<SimState>,
    /// [`SimDevice::set_late_completions`].
    late_completions: std::sync::atomic::AtomicBool,
}

struct SimState {
    /// Stable media at creation: where every crash image's replay starts.
    initial: Vec<u8>,
    /// What stable media holds now.
    durable: Vec<u8>,
    /// What reads return now: `durable` plus the volatile cache.
    current: Vec<u8>,
    /// Byte ranges written without durability since the last flush. `durable` and `current`
    /// differ only inside them, so a flush copies just these instead of the whole device.
    unsynced_ranges: Vec<(usize, usize)>,
    trace: Trace,
    faults: FaultState,
    stats: SimStats,
}

impl SimDevice {
    /// A zero-filled device of `capacity` bytes, all of it durable. `seed` is kept for the
    /// device's own random choices; crash damage takes its own seed.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] unless the block size is a power of two of at least 512 and
    /// the capacity a multiple of it.
    pub fn new(capacity: u64, block_size: u32, seed: u64) -> Result<SimDevice> {
        let len = usize::try_from(capacity)
            .map_err(|_| Error::InvalidArgument(format!("simulated device of {capacity} bytes")))?;
        Self::from_image(vec![0; len], block_size, seed)
    }

    /// A device whose stable media holds `image` (a crash image, say, to recover from).
    ///
    /// # Errors
    /// As [`SimDevice::new`].
    pub fn from_image(image: Vec<u8>, block_size: u32, seed: u64) -> Result<SimDevice> {
        if !block_size.is_power_of_two()
            || block_size < 512
            || image.len() % block_size as usize != 0
        {
            return Err(Error::InvalidArgument(format!(
                "simulated device of {} bytes with block size {block_size}",
                image.len()
            )));
        }
        let state = SimState {
            durable: image.clone(),
            current: image.clone(),
            initial: image,
            unsynced_ranges: Vec::new(),
            trace: Trace::default(),
            faults: FaultState::default(),
            stats: SimStats::default(),
        };
        let capacity = state.initial.len() as u64;
        Ok(SimDevice {
            inner: Arc::new(SimBackend {
                seed,
                capacity,
                block_size,
                state: Mutex::new(state),
                late_completions: std::sync::atomic::AtomicBool::new(false),
            }),
        })
    }

    /// Writes the device has received so far, failed ones included: the crash-point counter.
    pub fn writes(&self) -> u64 {
        self.inner.state.lock().trace.writes()
    }

    /// Where write number `number` (1-based) landed and whether it was durable on completion:
    /// `(offset, bytes, durable)`; `None` for a write that failed or was never received.
    pub fn write_at(&self, number: u64) -> Option<(u64, usize, bool)> {
        self.inner.state.lock().trace.events.iter().find_map(|e| match e {
            trace::Event::Write { number: n, offset, data, durable } if *n == number => {
                Some((*offset, data.len(), *durable))
            }
            _ => None,
        })
    }

    /// The earlier writes whose completions the queue that submitted write `number` had not
    /// yet handed back (reaped) when it was submitted: writes the host could not yet count
    /// on, so a power cut right after `number` may have lost any of them while keeping it
    /// (`Damage::LostInFlight`). Empty for a write submitted with nothing unreaped.
    pub fn unreaped_at(&self, number: u64) -> Vec<u64> {
        self.inner.state.lock().trace.unreaped.get(&number).cloned().unwrap_or_default()
    }

    /// Whether queues hand back each completion one reap late (off by default): a reap
    /// returns the completions an earlier reap left, and newer ones only as many as its
    /// `min` needs. Requests still run at submission; only their completions wait, so an
    /// engine sees several of its requests in flight at once, as on a real device.
    pub fn set_late_completions(&self, late: bool) {
        self.inner.late_completions.store(late, std::sync::atomic::Ordering::Relaxed);
    }

    /// What stable media holds now.
    pub fn durable_image(&self) -> Vec<u8> {
        self.inner.state.lock().durable.clone()
    }

    /// What reads return now: stable media plus the volatile cache.
    pub fn current_image(&self) -> Vec<u8> {
        self.inner.state.lock().current.clone()
    }

    /// What stable media could hold after a power cut right after write `after_writes`
    /// (0: before any write), every flush and corruption before the next write included.
    /// Unsynced writes are treated per `damage`. Costs O(device + trace).
    ///
    /// # Panics
    /// If `after_writes` exceeds [`SimDevice::writes`], or a `torn_unit` is not a power of two
    /// of at least 512.
    pub fn crash_image(&self, after_writes: u64, damage: Damage) -> Vec<u8> {
        let state = self.inner.state.lock();
        let events = state.trace.until_crash_point(after_writes);
        let mut image = state.initial.clone();
        crash::replay(&mut image, events, damage);
        image
    }

    /// Replaces the fault plan; the ordinals of its faults count requests from now on.
    ///
    /// # Panics
    /// On an ordinal of 0 or a misaligned misdirection target: such a plan is a bug in the test.
    pub fn set_faults(&self, plan: FaultPlan) {
        self.inner.state.lock().faults = FaultState::new(plan, self.inner.block_size);
    }

    /// Flips the bits `xor` of the persisted byte at `offset`, in stable media and in what reads
    /// return; crash images taken at or after this point show the flip too.
    ///
    /// # Panics
    /// If `offset` is past the device's end.
    pub fn corrupt(&self, offset: u64, xor: u8) {
        assert!(offset < self.inner.capacity, "corrupt({offset}) past the device's end");
        let mut state = self.inner.state.lock();
        state.durable[offset as usize] ^= xor;
        state.current[offset as usize] ^= xor;
        state.trace.push(Event::Corrupt { offset, xor });
    }

    /// Counters of the requests received so far.
    pub fn stats(&self) -> SimStats {
        self.inner.state.lock().stats
    }
}

impl Device for SimDevice {
    fn info(&self) -> DeviceInfo {
        self.inner.info()
    }

    fn open_queue(&self, opts: &QueueOptions) -> Result<Box<dyn Queue>> {
        opts.validate()?;
        let inline = InlineQueue::new(self.inner.clone(), opts.depth as usize);
        Ok(Box::new(SimQueue {
            inline,
            backend: self.inner.clone(),
            unreaped: Vec::new(),
            held: std::collections::VecDeque::new(),
        }))
    }

    fn release_range(&self, offset: u64, len: u64) -> Result<()> {
        crate::device::check_range(&self.info(), "release", offset, len)?;
        self.inner.release(offset, len)
    }
}

impl SimBackend {
    /// A release: a traced write of zeros without FUA (see the module doc).
    fn release(&self, offset: u64, len: u64) -> Result<()> {
        let mut state = self.state.lock();
        let number = state.trace.begin_write();
        state.stats.writes += 1;
        state.stats.releases += 1;
        if let Some(err) = state.faults.on_release(offset) {
            state.stats.faults += 1;
            return Err(err);
        }
        let (start, end) = (offset as usize, (offset + len) as usize);
        state.current[start..end].fill(0);
        state.unsynced_ranges.push((start, end));
        let data = vec![0; end - start].into_boxed_slice();
        state.trace.push(Event::Write { number, offset, data, durable: false });
        Ok(())
    }
}

impl SyncBackend for SimBackend {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            capacity: self.capacity,
            block_size: self.block_size,
            backend: "sim",
            growable: false,
        }
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let mut state = self.state.lock();
        state.stats.reads += 1;
        let fate = state.faults.on_read(offset);
        if !matches!(fate, ReadFate::Clean) {
            state.stats.faults += 1;
        }
        let flips = match fate {
            ReadFate::Fail(err) => return Err(err),
            ReadFate::Clean => Vec::new(),
            ReadFate::Flip(flips) => flips,
        };
        let start = offset as usize;
        buf.copy_from_slice(&state.current[start..start + buf.len()]);
        for (byte, xor) in flips {
            assert!(
                byte < buf.len() as u64,
                "Fault::ReadBitFlip byte {byte} outside a {}-byte read",
                buf.len()
            );
            buf[byte as usize] ^= xor;
        }
        state.stats.bytes_read += buf.len() as u64;
        Ok(())
    }

    fn write(&self, offset: u64, buf: &[u8], durable: bool) -> Result<()> {
        let mut state = self.state.lock();
        let number = state.trace.begin_write();
        state.stats.writes += 1;
        state.stats.durable_writes += u64::from(durable);
        let fate = state.faults.on_write(offset, buf.len() as u64);
        if !matches!(fate, WriteFate::Land) {
            state.stats.faults += 1;
        }
        let target = match fate {
            WriteFate::Fail(err) => return Err(err),
            WriteFate::Land => offset,
            WriteFate::Misdirect(to_offset) => to_offset,
        };
        // Only a misdirected write can aim past the end; the part beyond it is lost.
        let start = target.min(self.capacity) as usize;
        let data = &buf[..buf.len().min(self.capacity as usize - start)];
        let end = start + data.len();
        state.current[start..end].copy_from_slice(data);
        if durable {
            state.durable[start..end].copy_from_slice(data);
        } else {
            state.unsynced_ranges.push((start, end));
        }
        state.trace.push(Event::Write { number, offset: start as u64, data: data.into(), durable });
        LAST_WRITE.with(|w| w.set(number));
        state.stats.bytes_written += buf.len() as u64;
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        let mut state = self.state.lock();
        state.stats.flushes += 1;
        if let Some(err) = state.faults.on_flush() {
            state.stats.faults += 1;
            return Err(err);
        }
        let state = &mut *state;
        for (start, end) in state.unsynced_ranges.drain(..) {
            state.durable[start..end].copy_from_slice(&state.current[start..end]);
        }
        state.trace.push(Event::Flush);
        Ok(())
    }
}

impl fmt::Debug for SimBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The images are megabytes; show the seed, the shape and the counters only. try_lock:
        // formatting must not deadlock when a panic message is built while the state is held.
        let mut out = f.debug_struct("SimBackend");
        out.field("seed", &self.seed)
            .field("capacity", &self.capacity)
            .field("block_size", &self.block_size);
        if let Some(state) = self.state.try_lock() {
            out.field("writes", &state.trace.writes()).field("stats", &state.stats);
        }
        out.finish()
    }
}

thread_local! {
    /// The number of the last write this thread made to a simulated device (`SimQueue`).
    static LAST_WRITE: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// A queue of the simulated device: requests run at submission (`InlineQueue`), and the
/// device learns, for each write, which earlier writes of the queue had completed without
/// being reaped yet ([`SimDevice::unreaped_at`]). With late completions
/// ([`SimDevice::set_late_completions`]) a completion waits one reap in `held`.
struct SimQueue {
    inline: InlineQueue<SimBackend>,
    backend: Arc<SimBackend>,
    /// Writes submitted and not yet reaped: (tag, number).
    unreaped: Vec<(u64, u64)>,
    /// Completions a reap passed over, handed back by the next.
    held: std::collections::VecDeque<crate::Completion>,
}

impl Queue for SimQueue {
    fn depth(&self) -> usize {
        self.inline.depth()
    }

    fn in_flight(&self) -> usize {
        self.inline.in_flight() + self.held.len()
    }

    fn submit(&mut self, req: crate::Request) -> std::result::Result<(), (Error, crate::Request)> {
        if self.in_flight() >= self.depth() {
            return Err((Error::Busy, req));
        }
        let tag = req.tag;
        let is_write = matches!(req.op, crate::Op::Write { .. });
        LAST_WRITE.with(|w| w.set(0));
        self.inline.submit(req)?;
        let number = LAST_WRITE.with(|w| w.get());
        if is_write && number != 0 {
            if !self.unreaped.is_empty() {
                let before = self.unreaped.iter().map(|&(_, n)| n).collect();
                self.backend.state.lock().trace.unreaped.insert(number, before);
            }
            self.unreaped.push((tag, number));
        }
        Ok(())
    }

    fn reap(&mut self, min: usize, out: &mut Vec<crate::Completion>) -> Result<usize> {
        assert!(min <= self.in_flight(), "reap({min}) with {} in flight", self.in_flight());
        let mut fresh = Vec::new();
        self.inline.reap(0, &mut fresh)?;
        let late = self.backend.late_completions.load(std::sync::atomic::Ordering::Relaxed);
        let from = out.len();
        out.extend(self.held.drain(..));
        let mut fresh = fresh.into_iter();
        while !late || out.len() - from < min {
            match fresh.next() {
                Some(c) => out.push(c),
                None => break,
            }
        }
        self.held.extend(fresh);
        for c in &out[from..] {
            if let Some(i) = self.unreaped.iter().position(|&(tag, _)| tag == c.tag) {
                self.unreaped.swap_remove(i);
            }
        }
        Ok(out.len() - from)
    }
}
