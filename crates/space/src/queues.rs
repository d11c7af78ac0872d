//! One way to get I/O queues on a volume: opened for an owner that keeps them, checked out of
//! a pool and given back, or as LATTE's queue pairs.
//!
//! Every volume has one [`Queues`] ([`crate::Volume::queues`]); each engine gets its queues
//! from it, whatever its policy:
//! - [`Queues::open`]: a queue of its own for a thread that keeps it as long as it runs (the
//!   lsm WAL's loggers, the hash engine's shard worker, the table engine's writer). Any
//!   [`QueueOptions`]: depth, poll mode, a polling kernel thread.
//! - [`Queues::checkout`]: a queue taken from the pool of its [`PoolSpec`] (class and depth),
//!   opened when none is idle, and given back when its [`PooledQueue`] guard drops, for the
//!   short reads and writes that any thread makes (a block-cache miss, a multi-get's batch,
//!   a record read for a caller). A queue is one io_uring (a file descriptor and a few KiB of
//!   rings): setting one up and tearing it down costs system calls and mmaps, so a pool keeps
//!   up to the spec's `idle_max` rather than churn rings under concurrent readers.
//! - [`Queues::pairs`]: several queues with a completion poller each, in one of LATTE's
//!   affinity modes ([`QueuePairs`]), for an engine that shares them between all its users
//!   (the table engine with `TableOptions::queue_pairs`).
//!
//! Whichever way, a queue is a [`VolumeQueue`]: confined to its class's area and counted in
//! the volume's I/O counters ([`crate::Volume::io`]), and the provisioner counts the queues
//! it opened, reused and discarded ([`QueueStats`]).
//!
//! Rules of a pooled queue:
//! 1. A checkout takes the most recently returned idle queue of its spec (its rings are the
//!    warmest), else opens one with `QueueOptions { depth, ..default }`: pooled queues never
//!    have a polling kernel thread, which would keep a kernel thread per idle queue.
//! 2. The guard gives the queue back on drop only when nothing is in flight on it, no reap on
//!    it failed and the thread is not panicking: a queue with requests in flight would hand
//!    their completions to the next user, a failed reap (the queue failing as a whole, not one
//!    request's error, which comes back in its completion) leaves its state unknown, and a
//!    panic may have left it anywhere. Such a queue is closed instead (its drop waits for what
//!    the kernel still holds). A user may also close its queue itself
//!    ([`PooledQueue::discard`]).
//! 3. A queue given back to a pool that already keeps `idle_max` idle queues is closed.
//! 4. A queue kept idle forgets which tiers its user wrote since its last flush, so that it
//!    comes to the next user as a queue just opened: that user's flush covers its own writes
//!    (on a tiered store, a flush after writes to both tiers is refused as a caller's bug).

use std::ops::{Deref, DerefMut, Range};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use shale_io::{
    Completion, DeviceRef, Error as IoError, Queue, QueueOptions, QueuePairOptions, QueuePairs,
    Request,
};

use crate::counters::{IoClass, IoCounters, LazyLane, VolumeQueue};
use crate::error::{Error, Result};
use crate::tier::CAPACITY_ADDRESS_BIT;

/// A kind of pooled queue: what it is for, how deep, and how many idle ones its pool keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolSpec {
    /// The class of its I/O (WAL pages or slots).
    pub class: IoClass,
    /// Its depth: most requests in flight at once.
    pub depth: u32,
    /// Idle queues of this class and depth the pool keeps when this one comes back; past
    /// that it is closed. Users of one class and depth share one pool, each with its own
    /// bound.
    pub idle_max: usize,
}

/// What a volume's provisioner has done since the volume was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Queues opened, by every way (a queue of a tiered store counts once: its capacity lane
    /// opens at its first request there).
    pub opened: u64,
    /// Checkouts answered with an idle queue.
    pub reused: u64,
    /// Pooled queues given back and kept idle.
    pub returned: u64,
    /// Pooled queues closed instead of kept: given back to a full pool, dropped with
    /// requests in flight or in a panic, or discarded by their user.
    pub discarded: u64,
    /// Idle queues in every pool now.
    pub idle: usize,
}

/// The provisioner of one volume's queues: see the module comment. Cheap to clone; clones
/// share the pools and counts.
#[derive(Clone)]
pub struct Queues {
    shared: Arc<Shared>,
}

struct Shared {
    source: QueueSource,
    pools: Mutex<Pools>,
    /// Counted apart from the pools' lock: opening and closing are the slow paths.
    opened: AtomicU64,
    discarded: AtomicU64,
}

/// One pool per class and depth checked out so far (a few: a linear search is cheap), and the
/// counts of the fast paths, kept under the lock they take anyway so that a checkout and its
/// return touch no other shared cache line.
#[derive(Default)]
struct Pools {
    pools: Vec<Pool>,
    reused: u64,
    returned: u64,
}

impl Pools {
    fn pool(&mut self, class: IoClass, depth: u32) -> &mut Pool {
        let i = match self.pools.iter().position(|p| p.class == class && p.depth == depth) {
            Some(i) => i,
            None => {
                self.pools.push(Pool { class, depth, idle: Vec::new() });
                self.pools.len() - 1
            }
        };
        &mut self.pools[i]
    }
}

struct Pool {
    class: IoClass,
    depth: u32,
    idle: Vec<VolumeQueue>,
}

/// Where queues are opened: the fast volume's device with its WAL and slot areas, and the
/// capacity volume's, on a tiered store.
pub(crate) struct QueueSource {
    pub(crate) fast: TierSource,
    pub(crate) capacity: Option<TierSource>,
}

/// One tier's device, its areas (device offsets) and counters.
pub(crate) struct TierSource {
    pub(crate) device: DeviceRef,
    pub(crate) wal_area: Range<u64>,
    pub(crate) slot_offset: u64,
    pub(crate) counters: Arc<IoCounters>,
}

impl Queues {
    pub(crate) fn new(source: QueueSource) -> Queues {
        Queues {
            shared: Arc::new(Shared {
                source,
                pools: Mutex::new(Pools::default()),
                opened: AtomicU64::new(0),
                discarded: AtomicU64::new(0),
            }),
        }
    }

    /// Opens a queue for data I/O of one class (WAL pages or slots), confined to its area and
    /// counted, for an owner that keeps it. A slot queue of a tiered store reaches both
    /// tiers by address ([`VolumeQueue`]); the WAL is on the fast volume.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for the header and version-log classes, which only the
    /// volume itself writes; otherwise the device's error (bad options included).
    pub fn open(&self, class: IoClass, opts: &QueueOptions) -> Result<VolumeQueue> {
        let q = self.shared.source.open(class, opts)?;
        self.shared.opened.fetch_add(1, Ordering::Relaxed);
        Ok(q)
    }

    /// A queue of `spec`'s class and depth from its pool, opened when none is idle; it goes
    /// back when the guard drops (the module comment's rules).
    ///
    /// # Errors
    /// As [`Queues::open`], when a queue has to be opened.
    pub fn checkout(&self, spec: PoolSpec) -> Result<PooledQueue> {
        let idle = {
            let mut pools = self.shared.pools.lock();
            let idle = pools.pool(spec.class, spec.depth).idle.pop();
            pools.reused += u64::from(idle.is_some());
            idle
        };
        let queue = match idle {
            Some(q) => q,
            None => {
                let opts = QueueOptions { depth: spec.depth, ..QueueOptions::default() };
                self.open(spec.class, &opts)?
            }
        };
        Ok(PooledQueue { queue: Some(queue), spec, failed: false, shared: self.shared.clone() })
    }

    /// LATTE's queue pairs over queues of `class` opened here: `opts.pairs` queues of
    /// `opts.depth`, each with a completion poller, placed by `opts.affinity`, with a
    /// polling kernel thread each when `opts.sq_poll` ([`QueuePairs::new`]).
    ///
    /// # Errors
    /// Bad options, a queue that cannot be opened (as [`Queues::open`]), or a poller thread
    /// that cannot start.
    pub fn pairs(&self, class: IoClass, opts: &QueuePairOptions) -> Result<QueuePairs> {
        QueuePairs::new(opts, |o| Ok::<_, Error>(Box::new(self.open(class, o)?) as Box<dyn Queue>))
    }

    /// Idle queues of `class` and `depth` in their pool now.
    pub fn idle(&self, class: IoClass, depth: u32) -> usize {
        let pools = self.shared.pools.lock();
        let pool = pools.pools.iter().find(|p| p.class == class && p.depth == depth);
        pool.map_or(0, |p| p.idle.len())
    }

    /// The counts since the volume was opened.
    pub fn stats(&self) -> QueueStats {
        let s = &self.shared;
        let pools = s.pools.lock();
        QueueStats {
            opened: s.opened.load(Ordering::Relaxed),
            reused: pools.reused,
            returned: pools.returned,
            discarded: s.discarded.load(Ordering::Relaxed),
            idle: pools.pools.iter().map(|p| p.idle.len()).sum(),
        }
    }
}

impl std::fmt::Debug for Queues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queues").field("stats", &self.stats()).finish()
    }
}

impl Shared {
    /// Rule 3: keeps `queue` idle in its pool unless the pool holds `spec.idle_max` already.
    fn give_back(&self, spec: PoolSpec, mut queue: VolumeQueue) {
        queue.forget_writes();
        let mut pools = self.pools.lock();
        let pool = pools.pool(spec.class, spec.depth);
        if pool.idle.len() < spec.idle_max {
            pool.idle.push(queue);
            pools.returned += 1;
        } else {
            drop(pools);
            self.discard(queue);
        }
    }

    fn discard(&self, queue: VolumeQueue) {
        self.discarded.fetch_add(1, Ordering::Relaxed);
        drop(queue);
    }
}

impl QueueSource {
    fn open(&self, class: IoClass, opts: &QueueOptions) -> Result<VolumeQueue> {
        let fast = &self.fast;
        let area = match class {
            IoClass::Wal => fast.wal_area.clone(),
            IoClass::Slot => fast.slot_offset..CAPACITY_ADDRESS_BIT,
            IoClass::Header | IoClass::VersionLog => {
                return Err(Error::InvalidArgument(format!(
                    "{} I/O belongs to the volume itself",
                    class.name()
                )));
            }
        };
        let inner = fast.device.open_queue(opts)?;
        match (class, &self.capacity) {
            (IoClass::Slot, Some(c)) => {
                let lane = LazyLane {
                    device: c.device.clone(),
                    opts: opts.clone(),
                    area: c.slot_offset..CAPACITY_ADDRESS_BIT,
                    counters: c.counters.clone(),
                };
                Ok(VolumeQueue::tiered(inner, class, area, fast.counters.clone(), lane))
            }
            _ => Ok(VolumeQueue::new(inner, class, area, fast.counters.clone())),
        }
    }
}

/// A queue checked out of a pool ([`Queues::checkout`]): a [`Queue`] (and, by deref, its
/// [`VolumeQueue`]) that goes back to the pool when dropped (the module comment's rule 2).
pub struct PooledQueue {
    /// `Some` until dropped or discarded.
    queue: Option<VolumeQueue>,
    spec: PoolSpec,
    /// A reap through the guard failed.
    failed: bool,
    shared: Arc<Shared>,
}

impl PooledQueue {
    /// Closes the queue instead of giving it back: for a user that saw it fail as a whole
    /// (a failed reap leaves its state unknown).
    pub fn discard(mut self) {
        let q = self.queue.take().expect("a pooled queue is held until dropped");
        self.shared.discard(q);
    }

    /// The spec it was checked out with.
    pub fn spec(&self) -> PoolSpec {
        self.spec
    }
}

impl Deref for PooledQueue {
    type Target = VolumeQueue;

    fn deref(&self) -> &VolumeQueue {
        self.queue.as_ref().expect("a pooled queue is held until dropped")
    }
}

impl DerefMut for PooledQueue {
    fn deref_mut(&mut self) -> &mut VolumeQueue {
        self.queue.as_mut().expect("a pooled queue is held until dropped")
    }
}

/// The queue's own, but a failed reap is remembered (rule 2).
impl Queue for PooledQueue {
    fn depth(&self) -> usize {
        (**self).depth()
    }

    fn in_flight(&self) -> usize {
        (**self).in_flight()
    }

    fn submit(&mut self, req: Request) -> std::result::Result<(), (IoError, Request)> {
        (**self).submit(req)
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> shale_io::Result<usize> {
        let reaped = (**self).reap(min, out);
        self.failed |= reaped.is_err();
        reaped
    }
}

impl Drop for PooledQueue {
    fn drop(&mut self) {
        let Some(q) = self.queue.take() else { return };
        if self.failed || std::thread::panicking() || q.in_flight() > 0 {
            self.shared.discard(q);
        } else {
            self.shared.give_back(self.spec, q);
        }
    }
}

impl std::fmt::Debug for PooledQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PooledQueue").field("spec", &self.spec).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Volume, VolumeOptions};
    use shale_io::{AlignedBuf, MemoryDevice, Op, QueueExt, Request};

    const READS: PoolSpec = PoolSpec { class: IoClass::Slot, depth: 1, idle_max: 4 };

    fn volume() -> Volume {
        let device = Arc::new(MemoryDevice::new(16 << 20, 4096).unwrap());
        Volume::open(device, &VolumeOptions::small_for_tests()).unwrap().volume
    }

    #[test]
    fn a_queue_given_back_is_checked_out_again_instead_of_opened() {
        let volume = volume();
        let queues = volume.queues();
        let at = volume.layout().slot_offset;
        for _ in 0..5 {
            let mut q = queues.checkout(READS).unwrap();
            q.write_at(at, AlignedBuf::zeroed(4096), false).unwrap();
        }
        let s = queues.stats();
        assert_eq!((s.opened, s.reused, s.returned, s.idle), (1, 4, 5, 1), "{s:?}");

        // Held at once, two are opened; both come back.
        let a = queues.checkout(READS).unwrap();
        let b = queues.checkout(READS).unwrap();
        assert_eq!(queues.stats().opened, 2);
        drop((a, b));
        assert_eq!(queues.idle(IoClass::Slot, 1), 2);

        // Past idle_max, a queue given back is closed.
        let held: Vec<_> = (0..6).map(|_| queues.checkout(READS).unwrap()).collect();
        assert_eq!(queues.stats().opened, 6, "two reused, four opened");
        drop(held);
        let s = queues.stats();
        assert_eq!((s.idle, s.discarded), (4, 2), "{s:?}");
    }

    #[test]
    fn each_spec_gets_its_depth_and_class_from_its_own_pool() {
        let volume = volume();
        let queues = volume.queues();
        let l = volume.layout();
        let mut q = queues.checkout(READS).unwrap();
        assert_eq!(q.depth(), 1);
        let read =
            |offset| Request { tag: 0, op: Op::Read { offset, buf: AlignedBuf::zeroed(4096) } };
        q.submit(read(l.slot_offset)).unwrap();
        assert!(matches!(q.submit(read(l.slot_offset)), Err((shale_io::Error::Busy, _))));
        let mut done = Vec::new();
        q.reap(1, &mut done).unwrap();
        drop(q);

        // Another depth is another pool: the idle depth-1 queue is not handed out.
        let batch = PoolSpec { depth: 32, ..READS };
        let q = queues.checkout(batch).unwrap();
        assert_eq!(q.depth(), 32);
        assert_eq!(queues.stats().opened, 2);
        assert_eq!(queues.idle(IoClass::Slot, 1), 1);
        drop(q);

        // A WAL queue reaches the WAL area only.
        let wal = PoolSpec { class: IoClass::Wal, depth: 4, idle_max: 1 };
        let mut q = queues.checkout(wal).unwrap();
        assert_eq!(q.area(), l.wal_offset..l.wal_offset + l.wal_bytes);
        assert!(q.read_at(l.wal_offset, 4096).is_ok());
        assert!(matches!(q.read_at(l.slot_offset, 4096), Err(shale_io::Error::InvalidArgument(_))));
        drop(q);
        assert_eq!(volume.io(IoClass::Wal).reads, 1);

        // The volume's own classes are refused, by every way.
        let header = PoolSpec { class: IoClass::Header, ..READS };
        assert!(matches!(queues.checkout(header), Err(Error::InvalidArgument(_))));
        let opts = QueueOptions::default();
        assert!(matches!(queues.open(IoClass::VersionLog, &opts), Err(Error::InvalidArgument(_))));
        assert_eq!(queues.stats().opened, 3);
    }

    #[test]
    fn a_guard_dropped_in_a_panic_or_with_requests_in_flight_discards_its_queue() {
        let volume = volume();
        let queues = volume.queues().clone();
        let at = volume.layout().slot_offset;
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut q = queues.checkout(READS).unwrap();
            q.read_at(at, 4096).unwrap();
            panic!("a user of a pooled queue panics");
        }));
        assert!(panicked.is_err());
        let s = queues.stats();
        assert_eq!((s.opened, s.discarded, s.idle), (1, 1, 0), "{s:?}");

        // A read submitted and never reaped: the next user must not get its completion.
        let mut q = queues.checkout(READS).unwrap();
        let req = Request { tag: 7, op: Op::Read { offset: at, buf: AlignedBuf::zeroed(4096) } };
        q.submit(req).unwrap();
        drop(q);
        let s = queues.stats();
        assert_eq!((s.opened, s.discarded, s.idle), (2, 2, 0), "{s:?}");

        // Discarded by its user.
        queues.checkout(READS).unwrap().discard();
        let s = queues.stats();
        assert_eq!((s.opened, s.discarded, s.idle), (3, 3, 0), "{s:?}");

        // The pool still works.
        drop(queues.checkout(READS).unwrap());
        assert_eq!(queues.stats().idle, 1);
    }

    /// A memory device whose queues' reaps fail while `broken` is set: a queue failing as a
    /// whole, as a broken ring would.
    #[derive(Debug)]
    struct BreakingDevice {
        inner: MemoryDevice,
        broken: Arc<std::sync::atomic::AtomicBool>,
    }

    struct BreakingQueue {
        inner: Box<dyn Queue>,
        broken: Arc<std::sync::atomic::AtomicBool>,
    }

    impl shale_io::Device for BreakingDevice {
        fn info(&self) -> shale_io::DeviceInfo {
            self.inner.info()
        }

        fn open_queue(&self, opts: &QueueOptions) -> shale_io::Result<Box<dyn Queue>> {
            let inner = self.inner.open_queue(opts)?;
            Ok(Box::new(BreakingQueue { inner, broken: self.broken.clone() }))
        }
    }

    impl Queue for BreakingQueue {
        fn depth(&self) -> usize {
            self.inner.depth()
        }

        fn in_flight(&self) -> usize {
            self.inner.in_flight()
        }

        fn submit(&mut self, req: Request) -> std::result::Result<(), (IoError, Request)> {
            self.inner.submit(req)
        }

        fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> shale_io::Result<usize> {
            if self.broken.load(Ordering::Relaxed) {
                // The request is reaped and lost, as a ring failing after completing it: the
                // queue has nothing in flight, and still must not be pooled.
                let mut lost = Vec::new();
                self.inner.reap(min, &mut lost)?;
                return Err(IoError::Unsupported("the ring broke".into()));
            }
            self.inner.reap(min, out)
        }
    }

    #[test]
    fn a_queue_whose_reap_failed_is_closed_not_given_back() {
        let broken = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let device = BreakingDevice {
            inner: MemoryDevice::new(16 << 20, 4096).unwrap(),
            broken: broken.clone(),
        };
        let opts = VolumeOptions::small_for_tests();
        let volume = Volume::open(Arc::new(device), &opts).unwrap().volume;
        let at = volume.layout().slot_offset;
        let queues = volume.queues();
        broken.store(true, Ordering::Relaxed);
        let mut q = queues.checkout(READS).unwrap();
        assert!(q.read_at(at, 4096).is_err());
        assert_eq!(q.in_flight(), 0);
        drop(q);
        let s = queues.stats();
        assert_eq!((s.opened, s.discarded, s.idle), (1, 1, 0), "{s:?}");
        broken.store(false, Ordering::Relaxed);
        drop(queues.checkout(READS).unwrap());
        let s = queues.stats();
        assert_eq!((s.opened, s.discarded, s.idle), (2, 1, 1), "{s:?}");
    }

    #[test]
    fn queue_pairs_and_owned_queues_are_opened_and_counted_here() {
        let volume = volume();
        let at = volume.layout().slot_offset;
        let opts = QueuePairOptions { pairs: 3, depth: 8, ..QueuePairOptions::default() };
        let pairs = volume.queues().pairs(IoClass::Slot, &opts).unwrap();
        assert_eq!(pairs.pairs(), 3);
        assert_eq!(volume.queues().stats().opened, 3);
        let mut buf = AlignedBuf::zeroed(4096);
        buf.fill(9);
        pairs.write_at(at, buf, true).unwrap();
        assert_eq!(pairs.read_at(at, 4096).unwrap()[..], [9; 4096][..]);
        // Slot queues: counted in the volume's counters, refused outside the slot area.
        assert_eq!(volume.io(IoClass::Slot).writes, 1);
        assert!(pairs.read_at(0, 4096).is_err());
        drop(pairs);

        let mut q = volume.queue(IoClass::Wal, &QueueOptions { depth: 2, ..Default::default() });
        assert_eq!(q.as_mut().unwrap().depth(), 2);
        assert_eq!(volume.queues().stats().opened, 4);
        let bad = QueueOptions { depth: 0, ..QueueOptions::default() };
        assert!(
            volume.queues().pairs(IoClass::Slot, &QueuePairOptions { depth: 0, ..opts }).is_err()
        );
        assert!(volume.queues().open(IoClass::Slot, &bad).is_err());
        assert_eq!(volume.queues().stats().opened, 4);
    }
}
