//! A device that behaves like a slower one, to see how shale would run on it.
//!
//! Requests go to the wrapped device at once; their completions are held back until the time a
//! device of the emulated [`Profile`] would have finished them:
//!
//! `due = max(submit time, bytes budget, ops budget) + latency`
//!
//! The budgets are token buckets, one for bytes and one for operations, shared by every queue
//! of the device (bandwidth is a property of the device, not of a queue). Each bucket is kept as
//! the instant its tokens run out ("free at"): a request pushes that instant forward by its
//! cost. Idle time earns back at most [`THROTTLE_BURST`] of credit, so a device that was idle cannot then
//! run at unlimited speed. A completion is never released before the wrapped device produced it,
//! so a throttled device is never faster than the real one under it.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::device::{
    Completion, Device, DeviceInfo, DeviceRef, Op, PollMode, Queue, QueueOptions, Request,
};
use crate::error::{Error, Result};

/// Most credit an idle device accumulates, as time at full rate.
pub const THROTTLE_BURST: Duration = Duration::from_millis(1);

/// Speed of an emulated device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    /// Name shown in reports.
    pub name: String,
    /// Sustained transfer rate, reads and writes together.
    pub bandwidth_bytes_per_s: u64,
    /// Most requests per second, whatever their size (flushes count too).
    pub iops: u64,
    /// Time added to every request after its budget allows it to run.
    pub latency: Duration,
}

impl Profile {
    /// Names accepted by [`Profile::named`].
    pub const NAMES: [&'static str; 4] = ["hdd", "sata-ssd", "nvme", "optane"];

    /// A preset:
    /// - `hdd`: a 7200 rpm disk: 110 MB/s, 200 IOPS (a seek plus half a rotation per random
    ///   request), 4.2 ms latency (half a rotation). The IOPS bound applies to every request,
    ///   so small sequential requests are as slow as random ones: no write merging here.
    /// - `sata-ssd`: 510 MB/s (the SATA 6 Gb/s ceiling), 95,000 IOPS, 90 us latency.
    /// - `nvme`: a PCIe 3.0 x4 TLC drive: 2.9 GB/s, 450,000 IOPS, 80 us latency.
    /// - `optane`: 3D XPoint: 2.4 GB/s, 550,000 IOPS, 10 us latency.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for any other name; the message lists the valid ones.
    pub fn named(name: &str) -> Result<Profile> {
        let (bandwidth_bytes_per_s, iops, latency_us) = match name {
            "hdd" => (110_000_000, 200, 4_200),
            "sata-ssd" => (510_000_000, 95_000, 90),
            "nvme" => (2_900_000_000, 450_000, 80),
            "optane" => (2_400_000_000, 550_000, 10),
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "unknown device profile {name:?}; valid profiles: {}",
                    Profile::NAMES.join(", ")
                )));
            }
        };
        Ok(Profile {
            name: name.to_string(),
            bandwidth_bytes_per_s,
            iops,
            latency: Duration::from_micros(latency_us),
        })
    }

    fn validate(&self) -> Result<()> {
        if self.bandwidth_bytes_per_s == 0 || self.iops == 0 {
            return Err(Error::InvalidArgument(format!(
                "profile {:?} needs a positive bandwidth and IOPS",
                self.name
            )));
        }
        Ok(())
    }
}

/// The instant one bucket's tokens run out.
#[derive(Debug)]
struct Bucket {
    free_at: Instant,
}

impl Bucket {
    /// Takes `cost` worth of tokens at `now`; returns when they will have been earned.
    fn reserve(&mut self, now: Instant, cost: Duration) -> Instant {
        let credit_floor = now.checked_sub(THROTTLE_BURST).unwrap_or(now);
        self.free_at = self.free_at.max(credit_floor) + cost;
        self.free_at
    }
}

/// The budgets shared by all queues of one throttled device.
#[derive(Debug)]
struct Budget {
    profile: Profile,
    buckets: Mutex<(Bucket, Bucket)>,
}

impl Budget {
    /// When a request of `bytes` submitted `now` is due to complete.
    fn due(&self, now: Instant, bytes: u64) -> Instant {
        let p = &self.profile;
        let byte_cost = Duration::from_secs_f64(bytes as f64 / p.bandwidth_bytes_per_s as f64);
        let op_cost = Duration::from_secs_f64(1.0 / p.iops as f64);
        let mut buckets = self.buckets.lock();
        let bytes_at = buckets.0.reserve(now, byte_cost);
        let ops_at = buckets.1.reserve(now, op_cost);
        now.max(bytes_at).max(ops_at) + p.latency
    }
}

/// A device wrapped to run no faster than a [`Profile`].
pub struct ThrottledDevice {
    inner: DeviceRef,
    budget: Arc<Budget>,
}

impl fmt::Debug for ThrottledDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThrottledDevice")
            .field("profile", &self.budget.profile)
            .field("inner", &self.inner)
            .finish()
    }
}

impl ThrottledDevice {
    /// Wraps `inner` so that it runs like `profile`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use shale_io::{Device, MemoryDevice, Profile, ThrottledDevice};
    ///
    /// let slow = ThrottledDevice::new(Arc::new(MemoryDevice::new(1 << 20, 4096)?), Profile::named("hdd")?)?;
    /// assert_eq!(slow.info().capacity, 1 << 20);
    /// # Ok::<(), shale_io::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a profile with zero bandwidth or IOPS.
    pub fn new(inner: DeviceRef, profile: Profile) -> Result<ThrottledDevice> {
        profile.validate()?;
        let now = Instant::now();
        let budget = Budget {
            profile,
            buckets: Mutex::new((Bucket { free_at: now }, Bucket { free_at: now })),
        };
        Ok(ThrottledDevice { inner, budget: Arc::new(budget) })
    }

    /// The emulated profile.
    pub fn profile(&self) -> &Profile {
        &self.budget.profile
    }
}

impl Device for ThrottledDevice {
    fn info(&self) -> DeviceInfo {
        self.inner.info()
    }

    fn open_queue(&self, opts: &QueueOptions) -> Result<Box<dyn Queue>> {
        let inner = self.inner.open_queue(opts)?;
        let depth = inner.depth();
        Ok(Box::new(ThrottledQueue {
            inner,
            budget: self.budget.clone(),
            poll: opts.poll,
            slots: (0..depth).map(|_| None).collect(),
            free: (0..depth).rev().collect(),
            arrived: Vec::with_capacity(depth),
        }))
    }

    fn grow(&self, capacity: u64) -> Result<()> {
        self.inner.grow(capacity)
    }

    fn free_storage(&self) -> Option<u64> {
        self.inner.free_storage()
    }

    // Allocating and releasing move no data: they pass through unthrottled.
    fn allocate_range(&self, offset: u64, len: u64) -> Result<()> {
        self.inner.allocate_range(offset, len)
    }

    fn release_range(&self, offset: u64, len: u64) -> Result<()> {
        self.inner.release_range(offset, len)
    }
}

/// A request on its way through a throttled queue.
struct Held {
    tag: u64,
    due: Instant,
    /// The wrapped device's completion, once it has arrived.
    done: Option<Completion>,
}

/// A queue whose completions wait for their due time. Requests are tagged with their slot
/// index on the wrapped queue.
struct ThrottledQueue {
    inner: Box<dyn Queue>,
    budget: Arc<Budget>,
    poll: PollMode,
    slots: Vec<Option<Held>>,
    free: Vec<usize>,
    /// Reused between reaps of the wrapped queue.
    arrived: Vec<Completion>,
}

impl ThrottledQueue {
    /// Moves completions of the wrapped queue into their slots; waits for at least `min`.
    fn collect(&mut self, min: usize) -> Result<()> {
        self.inner.reap(min, &mut self.arrived)?;
        for c in self.arrived.drain(..) {
            let held = self.slots[c.tag as usize].as_mut().expect("completion for an empty slot");
            held.done = Some(c);
        }
        Ok(())
    }

    /// Hands out every completion that arrived and is due; returns how many.
    fn release(&mut self, now: Instant, out: &mut Vec<Completion>) -> usize {
        let mut released = 0;
        for (slot, entry) in self.slots.iter_mut().enumerate() {
            let ready = matches!(entry, Some(h) if h.done.is_some() && h.due <= now);
            if ready {
                let held = entry.take().expect("checked above");
                let mut c = held.done.expect("checked above");
                c.tag = held.tag;
                out.push(c);
                self.free.push(slot);
                released += 1;
            }
        }
        released
    }

    /// Earliest due time among requests, split by whether their completion has arrived.
    fn next_due(&self) -> (Option<Instant>, Option<Instant>) {
        let mut arrived = None::<Instant>;
        let mut pending = None::<Instant>;
        for held in self.slots.iter().flatten() {
            let which = if held.done.is_some() { &mut arrived } else { &mut pending };
            *which = Some(which.map_or(held.due, |d| d.min(held.due)));
        }
        (arrived, pending)
    }

    /// Waits until `due` the way the poll mode says.
    fn wait_until(&self, due: Instant) {
        let spin = match self.poll {
            PollMode::Spin => Duration::MAX,
            PollMode::Adaptive { spin } => spin,
            PollMode::Blocking => Duration::ZERO,
        };
        loop {
            let now = Instant::now();
            if now >= due {
                return;
            }
            if due - now <= spin {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(due - now - spin.min(due - now));
            }
        }
    }
}

impl Queue for ThrottledQueue {
    fn depth(&self) -> usize {
        self.slots.len()
    }

    fn in_flight(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    fn submit(&mut self, req: Request) -> std::result::Result<(), (Error, Request)> {
        let Some(&slot) = self.free.last() else {
            return Err((Error::Busy, req));
        };
        let bytes = match &req.op {
            Op::Read { buf, .. } | Op::Write { buf, .. } => buf.len() as u64,
            Op::Flush => 0,
        };
        let tag = req.tag;
        let inner_req = Request { tag: slot as u64, op: req.op };
        if let Err((e, back)) = self.inner.submit(inner_req) {
            return Err((e, Request { tag, op: back.op }));
        }
        self.free.pop();
        let due = self.budget.due(Instant::now(), bytes);
        self.slots[slot] = Some(Held { tag, due, done: None });
        Ok(())
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<usize> {
        assert!(min <= self.in_flight(), "reap({min}) with {} in flight", self.in_flight());
        let mut got = 0;
        loop {
            self.collect(0)?;
            got += self.release(Instant::now(), out);
            if got >= min {
                return Ok(got);
            }
            match self.next_due() {
                // Something is due sooner than anything that has arrived: wait for the device.
                (arrived, Some(pending)) if arrived.is_none_or(|a| pending < a) => {
                    self.collect(1)?;
                }
                (Some(arrived), _) => self.wait_until(arrived),
                (None, _) => self.collect(1)?,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::AlignedBuf;
    use crate::memory::MemoryDevice;

    #[test]
    fn unknown_profile_lists_the_valid_names() {
        let err = Profile::named("floppy").unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::InvalidArgument(_)));
        for name in Profile::NAMES {
            assert!(msg.contains(name), "{msg}");
            assert_eq!(Profile::named(name).unwrap().name, name);
        }
    }

    #[test]
    fn budget_is_shared_and_spends_bytes_and_ops() {
        let profile = Profile {
            name: "t".into(),
            bandwidth_bytes_per_s: 1_000_000,
            iops: 10,
            latency: Duration::ZERO,
        };
        let budget = Budget {
            profile,
            buckets: Mutex::new((
                Bucket { free_at: Instant::now() },
                Bucket { free_at: Instant::now() },
            )),
        };
        let now = Instant::now();
        // Ops bound: 10 requests of one byte take about one second whatever their size.
        let last = (0..10).map(|_| budget.due(now, 1)).last().unwrap();
        assert!(last - now >= Duration::from_millis(999) - THROTTLE_BURST, "{:?}", last - now);
        // Bytes bound, spent in parallel with the ops bound: 2 MB at 1 MB/s take two seconds.
        let due = budget.due(now, 2_000_000);
        assert!(due - now >= Duration::from_millis(1_999) - THROTTLE_BURST, "{:?}", due - now);
        // The next operation waits behind the bytes already promised.
        let next = budget.due(now, 1_000_000);
        assert!(next - due >= Duration::from_millis(999), "{:?}", next - due);
    }

    #[test]
    fn completions_keep_their_tags_and_wait_for_latency() {
        let inner: DeviceRef = Arc::new(MemoryDevice::new(1 << 20, 4096).unwrap());
        let profile = Profile {
            name: "slow".into(),
            bandwidth_bytes_per_s: u64::MAX / 2,
            iops: u64::MAX / 2,
            latency: Duration::from_millis(20),
        };
        let dev = ThrottledDevice::new(inner, profile).unwrap();
        let mut q = dev.open_queue(&QueueOptions { depth: 2, ..Default::default() }).unwrap();
        let start = Instant::now();
        for tag in [7, 3] {
            let op = Op::Read { offset: 0, buf: AlignedBuf::zeroed(4096) };
            q.submit(Request { tag, op }).unwrap();
        }
        let (err, _) = q.submit(Request { tag: 1, op: Op::Flush }).unwrap_err();
        assert!(matches!(err, Error::Busy));
        let mut out = Vec::new();
        assert_eq!(q.reap(0, &mut out).unwrap(), 0, "nothing is due yet");
        q.reap(2, &mut out).unwrap();
        assert!(start.elapsed() >= Duration::from_millis(20));
        let mut tags: Vec<u64> = out.iter().map(|c| c.tag).collect();
        tags.sort();
        assert_eq!(tags, vec![3, 7]);
        assert_eq!(q.in_flight(), 0);
    }
}
