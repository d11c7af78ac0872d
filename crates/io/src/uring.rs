//! The io_uring backend: one ring per queue, requests overlapping in the kernel.
//!
//! Life of a request:
//! 1. `submit` checks it, parks it (and its buffer) in a free slot and pushes an SQE whose
//!    user_data is the slot index; no system call.
//! 2. `reap` hands all pushed SQEs to the kernel in one `io_uring_enter` and waits per the
//!    queue's [`PollMode`].
//! 3. Each CQE finds its slot by user_data. A short transfer or EINTR/EAGAIN pushes an SQE for
//!    the rest and the request stays in flight; anything else completes it, and only then does
//!    the buffer leave the slot, inside the [`Completion`].
//!
//! Invariant: a buffer whose SQE reached the kernel stays in its slot until that SQE's CQE has
//! been seen. `Drop` keeps it by waiting for every CQE before the slots are freed.

use std::io;
use std::sync::Arc;
use std::time::Instant;

use io_uring::{IoUring, cqueue, opcode, squeue, types};

use crate::device::{
    Completion, Op, PollMode, Queue, QueueOptions, Request, SqPoll, check_request,
};
use crate::error::{Error, OpKind, Result};
use crate::file::OpenFile;

/// Most bytes one SQE moves; longer requests finish through the short-transfer path.
/// The kernel caps a single read or write near 2 GiB anyway.
const SQE_BYTES_MAX: usize = 1 << 30;

/// Resubmissions of one request after EINTR/EAGAIN before it is failed.
const RETRIES_MAX: u32 = 64;

/// Adaptive polling stops spinning after this many reaps in a row whose spin ran out before
/// the completions came (the device is slower than the spin window)...
const SPIN_MISSES_MAX: u32 = 4;
/// ...and then spins again on one reap in this many, to notice when the device got faster.
const SPIN_PROBE_EVERY: u32 = 32;

/// A request the kernel may be working on.
struct Inflight {
    tag: u64,
    op: Op,
    /// Bytes already moved by earlier (short) transfers.
    done: usize,
    retries: u32,
}

/// A queue with its own io_uring.
pub(crate) struct UringQueue {
    ring: IoUring,
    file: Arc<OpenFile>,
    poll: PollMode,
    /// Requests by slot; the slot index is the SQE's user_data.
    slots: Vec<Option<Inflight>>,
    free: Vec<u32>,
    in_flight: usize,
    /// Reused between reaps so reaping does not allocate.
    cqes: Vec<(u64, i32)>,
    /// Adaptive polling: reaps in a row whose spin ran out, and reaps since it stopped
    /// spinning (see [`UringQueue::spin_deadline`]).
    spin_misses: u32,
    reaps_unspun: u32,
}

fn ring_error(source: io::Error) -> Error {
    // The ring failing is not one request failing; the kind is the closest the error type has.
    Error::Io { op: OpKind::Read, offset: 0, source }
}

impl UringQueue {
    /// Checks that this process may set up an io_uring at all.
    pub(crate) fn probe() -> io::Result<()> {
        IoUring::new(1).map(drop)
    }

    /// A ring of `entries` SQEs. Cooperative task running spares the thread an interrupt (an
    /// IPI on another core) per completion; the kernel instead flags pending completion work,
    /// which the next `io_uring_enter` runs. Kernels before 5.19 refuse the flags (EINVAL) and
    /// get a plain ring. SINGLE_ISSUER would be cheaper still, but a queue may move between
    /// threads (it is `Send`), which that mode forbids.
    ///
    /// A queue with a polling kernel thread ([`SqPoll`]) gets neither flag: that thread
    /// submits, so it runs the completion work, and whichever thread reaps finds the
    /// completions posted.
    fn ring(entries: u32, sq_poll: Option<SqPoll>) -> io::Result<IoUring> {
        if let Some(p) = sq_poll {
            let mut b = IoUring::builder();
            b.setup_sqpoll(p.idle.as_millis().min(u128::from(u32::MAX)) as u32);
            if let Some(index) = p.cpu {
                b.setup_sqpoll_cpu(crate::affinity::cpu_at(index) as u32);
            }
            return b.build(entries);
        }
        let coop = IoUring::builder().setup_coop_taskrun().setup_taskrun_flag().build(entries);
        match coop {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => IoUring::new(entries),
            other => other,
        }
    }

    /// Whether completions wait in the kernel for this thread to enter it (cooperative mode).
    fn completions_pending_in_kernel(&mut self) -> bool {
        self.ring.submission().taskrun()
    }

    pub(crate) fn new(file: Arc<OpenFile>, opts: &QueueOptions) -> Result<UringQueue> {
        let depth = opts.depth as usize;
        let ring = Self::ring(opts.depth, opts.sq_poll).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOSYS | libc::EPERM) => {
                Error::Unsupported(format!("io_uring setup failed: {e}"))
            }
            _ => ring_error(e),
        })?;
        Ok(UringQueue {
            ring,
            file,
            poll: opts.poll,
            slots: (0..depth).map(|_| None).collect(),
            free: (0..depth as u32).rev().collect(),
            in_flight: 0,
            cqes: Vec::with_capacity(depth),
            spin_misses: 0,
            reaps_unspun: 0,
        })
    }

    /// When an Adaptive reap gives up spinning, or `None` to sleep at once. A spin is worth
    /// it only where completions come within the window (a fast NVMe device); where they take
    /// longer (a virtio disk: fio's 4 KiB reads at depth 16 ran 70.8k IOPS, over 200 us
    /// each), every reap burned
    /// the whole window before sleeping anyway: 16 reader threads on 2 cores spent a quarter
    /// of their CPU time spinning (`perf`, readrandom with O_DIRECT reads). So after
    /// [`SPIN_MISSES_MAX`] spins in a row ran out, the queue sleeps at once, and spins again
    /// on one reap in [`SPIN_PROBE_EVERY`] to see whether completions got faster.
    fn spin_deadline(&mut self) -> Option<Instant> {
        let PollMode::Adaptive { spin } = self.poll else { return None };
        if self.spin_misses >= SPIN_MISSES_MAX {
            self.reaps_unspun += 1;
            if self.reaps_unspun < SPIN_PROBE_EVERY {
                return None;
            }
            self.reaps_unspun = 0;
        }
        Some(Instant::now() + spin)
    }

    /// Records whether a reap that spun until `until` got its completions in time.
    fn spin_outcome(&mut self, until: Option<Instant>) {
        if let Some(until) = until {
            if Instant::now() < until {
                self.spin_misses = 0;
            } else {
                self.spin_misses = self.spin_misses.saturating_add(1);
            }
        }
    }

    /// The SQE that moves the rest of the request in `slot`.
    fn entry(&mut self, slot: u32) -> squeue::Entry {
        let fd = types::Fd(self.file.fd());
        let flight = self.slots[slot as usize].as_mut().expect("entry for an empty slot");
        let done = flight.done;
        let entry = match &mut flight.op {
            Op::Read { offset, buf } => {
                let len = (buf.len() - done).min(SQE_BYTES_MAX) as u32;
                opcode::Read::new(fd, buf.as_mut_ptr().wrapping_add(done), len)
                    .offset(*offset + done as u64)
                    .build()
            }
            Op::Write { offset, buf, durable } => {
                let len = (buf.len() - done).min(SQE_BYTES_MAX) as u32;
                let flags = if *durable { libc::RWF_DSYNC } else { 0 };
                opcode::Write::new(fd, buf.as_ptr().wrapping_add(done), len)
                    .offset(*offset + done as u64)
                    .rw_flags(flags)
                    .build()
            }
            Op::Flush => opcode::Fsync::new(fd).flags(types::FsyncFlags::DATASYNC).build(),
        };
        entry.user_data(u64::from(slot))
    }

    /// Pushes the SQE for `slot`, handing earlier SQEs to the kernel first if the ring is full
    /// (it cannot be while each request has at most one SQE outstanding, but a full ring must
    /// never drop a request).
    fn push(&mut self, slot: u32) -> Result<()> {
        let entry = self.entry(slot);
        loop {
            // SAFETY: the SQE points into the buffer owned by `slots[slot]`, which is neither
            // moved out nor dropped until its CQE is reaped (see the module invariant); the
            // buffer's heap memory does not move when the slot vector's element does.
            let pushed = unsafe { self.ring.submission().push(&entry) };
            if pushed.is_ok() {
                return Ok(());
            }
            self.enter(0)?;
        }
    }

    /// SQEs pushed but not yet taken by the kernel (it may take fewer than offered).
    fn unsubmitted(&mut self) -> usize {
        self.ring.submission().len()
    }

    /// Hands unsubmitted SQEs to the kernel and waits for `want` CQEs.
    fn enter(&mut self, want: usize) -> Result<()> {
        loop {
            match self.ring.submit_and_wait(want) {
                Ok(_) => return Ok(()),
                // Interrupted waits did nothing harmful; EBUSY means the CQ must drain first,
                // which the caller's next harvest does.
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => return Ok(()),
                Err(e) => return Err(ring_error(e)),
            }
        }
    }

    /// Takes every ready CQE and turns finished requests into completions.
    fn harvest(&mut self, out: &mut Vec<Completion>) -> Result<usize> {
        let mut cqes = std::mem::take(&mut self.cqes);
        cqes.extend(self.ring.completion().map(|c: cqueue::Entry| (c.user_data(), c.result())));
        let mut completed = 0;
        for &(user_data, res) in &cqes {
            completed += usize::from(self.settle(user_data as u32, res, out)?);
        }
        cqes.clear();
        self.cqes = cqes;
        Ok(completed)
    }

    /// Applies one CQE to its request: completes it, or pushes an SQE for what is left.
    /// Returns whether the request completed.
    fn settle(&mut self, slot: u32, res: i32, out: &mut Vec<Completion>) -> Result<bool> {
        let flight = self.slots[slot as usize].as_mut().expect("CQE for an empty slot");
        let kind = flight.op.kind();
        let offset = flight.op.offset() + flight.done as u64;
        let outcome = if res < 0 {
            let transient = matches!(-res, libc::EINTR | libc::EAGAIN);
            if transient && flight.retries < RETRIES_MAX {
                flight.retries += 1;
                self.push(slot)?;
                return Ok(false);
            }
            Err(Error::from_os(kind, offset, io::Error::from_raw_os_error(-res)))
        } else if kind == OpKind::Flush {
            Ok(())
        } else {
            flight.done += res as usize;
            if flight.done == flight.op.len() {
                Ok(())
            } else if res == 0 {
                // No progress without an error: the file shrank under us. Retrying would spin.
                let what = match kind {
                    OpKind::Read => io::ErrorKind::UnexpectedEof,
                    _ => io::ErrorKind::WriteZero,
                };
                Err(Error::from_os(kind, offset, io::Error::new(what, "no bytes moved")))
            } else {
                self.push(slot)?;
                return Ok(false);
            }
        };
        let flight = self.slots[slot as usize].take().expect("slot checked above");
        self.free.push(slot);
        self.in_flight -= 1;
        out.push(Completion { tag: flight.tag, kind, result: outcome, buf: flight.op.into_buf() });
        Ok(true)
    }

    /// Waits for one CQE the way the poll mode says; `spin_until` is when Adaptive gives up
    /// spinning.
    fn wait(&mut self, want: usize, spin_until: Option<Instant>) -> Result<()> {
        let spinning = match (self.poll, spin_until) {
            (PollMode::Spin, _) => true,
            (PollMode::Adaptive { .. }, Some(until)) => Instant::now() < until,
            _ => false,
        };
        if !spinning {
            return self.enter(want);
        }
        if self.unsubmitted() > 0 || self.completions_pending_in_kernel() {
            self.enter(0)?;
        }
        std::hint::spin_loop();
        Ok(())
    }
}

impl Queue for UringQueue {
    fn depth(&self) -> usize {
        self.slots.len()
    }

    fn in_flight(&self) -> usize {
        self.in_flight
    }

    fn submit(&mut self, req: Request) -> std::result::Result<(), (Error, Request)> {
        if self.free.is_empty() {
            return Err((Error::Busy, req));
        }
        if let Err(e) = check_request(&self.file.info(), &req.op) {
            return Err((e, req));
        }
        let slot = self.free.pop().expect("checked above");
        self.slots[slot as usize] =
            Some(Inflight { tag: req.tag, op: req.op, done: 0, retries: 0 });
        self.in_flight += 1;
        if let Err(e) = self.push(slot) {
            // The SQE never reached the ring, so the request can go back to the caller.
            let flight = self.slots[slot as usize].take().expect("slot just filled");
            self.free.push(slot);
            self.in_flight -= 1;
            return Err((e, Request { tag: flight.tag, op: flight.op }));
        }
        Ok(())
    }

    fn reap(&mut self, min: usize, out: &mut Vec<Completion>) -> Result<usize> {
        assert!(min <= self.in_flight, "reap({min}) with {} in flight", self.in_flight);
        // Unsubmitted SQEs go to the kernel in the same system call that waits, when there is
        // a wait: one io_uring_enter per reap, not two.
        if self.completions_pending_in_kernel() {
            self.enter(0)?;
        }
        let mut got = self.harvest(out)?;
        if got < min {
            let spin_until = self.spin_deadline();
            while got < min {
                // Each request still to complete yields at least one more CQE, so waiting for
                // as many CQEs as completions are missing never waits for one that will not
                // come.
                self.wait(min - got, spin_until)?;
                got += self.harvest(out)?;
            }
            self.spin_outcome(spin_until);
        }
        // New requests, and resubmissions made while harvesting, must reach the kernel before
        // we return: the caller may not reap again until they complete.
        if self.unsubmitted() > 0 {
            self.enter(0)?;
        }
        Ok(got)
    }
}

impl Drop for UringQueue {
    fn drop(&mut self) {
        // The kernel may still write into buffers of requests in flight: wait for every CQE
        // before the slots (and their buffers) are freed.
        while self.in_flight > 0 {
            if let Err(e) = self.enter(1) {
                log::error!(
                    "io_uring queue dropped with {} requests in flight and a failed ring ({e}); \
                     leaking their buffers rather than freeing memory the kernel may write",
                    self.in_flight
                );
                for flight in self.slots.iter_mut().filter_map(Option::take) {
                    std::mem::forget(flight);
                }
                return;
            }
            let ready: Vec<u64> = self.ring.completion().map(|c| c.user_data()).collect();
            for user_data in ready {
                if self.slots[user_data as usize].take().is_some() {
                    self.in_flight -= 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! The CQE paths a healthy file never takes (EAGAIN, EINTR, short transfers, ENOSPC) are
    //! driven here by feeding [`UringQueue::settle`] a made-up result for a parked request.

    use super::*;
    use crate::file::{Backend, Caching, describe, open_file};
    use std::time::Duration;

    fn file_bytes() -> Vec<u8> {
        (0..65536u32).map(|i| (i / 512 + i % 7) as u8).collect()
    }

    fn queue_on(dir: &std::path::Path) -> UringQueue {
        let path = dir.join("f");
        std::fs::write(&path, file_bytes()).unwrap();
        let file =
            describe(open_file(&path, Caching::Direct).unwrap(), &path, Backend::Uring).unwrap();
        UringQueue::new(Arc::new(file), &QueueOptions::default()).unwrap()
    }

    /// Puts a request in a slot as if its SQE had gone to the kernel and a CQE were arriving.
    /// The caller must settle it, or the queue's drop would wait for a CQE that never comes.
    fn park(q: &mut UringQueue, op: Op) -> u32 {
        let slot = q.free.pop().unwrap();
        q.slots[slot as usize] = Some(Inflight { tag: 5, op, done: 0, retries: 0 });
        q.in_flight += 1;
        slot
    }

    fn read_op(offset: u64) -> Op {
        Op::Read { offset, buf: crate::buf::AlignedBuf::zeroed(8192) }
    }

    #[test]
    fn adaptive_polling_stops_spinning_where_spins_run_out_and_probes_again() {
        let dir = tempfile::tempdir_in("/tmp").unwrap();
        let mut q = queue_on(dir.path());
        // A window no completion can beat: every spin runs out.
        q.poll = PollMode::Adaptive { spin: Duration::ZERO };
        let mut spun = Vec::new();
        for _ in 0..(SPIN_MISSES_MAX + 2 * SPIN_PROBE_EVERY) {
            let until = q.spin_deadline();
            spun.push(until.is_some());
            q.spin_outcome(until);
        }
        let first_unspun = spun.iter().position(|s| !s).unwrap();
        assert_eq!(first_unspun as u32, SPIN_MISSES_MAX);
        let spins_after = spun[first_unspun..].iter().filter(|s| **s).count();
        assert!((1..=3).contains(&spins_after), "probes: {spins_after} of {}", spun.len());
        // Reads complete, spinning or not.
        let mut out = Vec::new();
        for i in 0..2 * SPIN_PROBE_EVERY {
            let read = Request { tag: u64::from(i), op: read_op(8192) };
            q.submit(read).map_err(|(e, _)| e).unwrap();
            q.reap(1, &mut out).unwrap();
            let buf = out.pop().unwrap().buf.unwrap();
            assert_eq!(&buf[..], &file_bytes()[8192..16384]);
        }
        // A spin that beats its window turns spinning back on.
        q.poll = PollMode::Adaptive { spin: Duration::from_secs(3600) };
        q.spin_misses = SPIN_MISSES_MAX;
        q.reaps_unspun = SPIN_PROBE_EVERY - 1;
        let until = q.spin_deadline();
        assert!(until.is_some());
        q.spin_outcome(until);
        assert_eq!(q.spin_misses, 0);
        assert!(q.spin_deadline().is_some());
        // Blocking queues never spin.
        q.poll = PollMode::Blocking;
        assert!(q.spin_deadline().is_none());
    }

    #[test]
    fn eagain_and_eintr_resubmit_the_request() {
        let dir = tempfile::tempdir_in("/tmp").unwrap();
        let mut q = queue_on(dir.path());
        for errno in [libc::EAGAIN, libc::EINTR] {
            let slot = park(&mut q, read_op(8192));
            let mut out = Vec::new();
            assert!(!q.settle(slot, -errno, &mut out).unwrap());
            assert!(out.is_empty());
            q.reap(1, &mut out).unwrap();
            let c = out.pop().unwrap();
            c.result.unwrap();
            assert_eq!(&c.buf.unwrap()[..], &file_bytes()[8192..16384]);
        }
    }

    #[test]
    fn a_short_read_resubmits_the_rest_at_the_right_place() {
        let dir = tempfile::tempdir_in("/tmp").unwrap();
        let mut q = queue_on(dir.path());
        let slot = park(&mut q, read_op(16384));
        let mut out = Vec::new();
        // Pretend the kernel moved 4 KiB (it did not: those bytes stay zero).
        assert!(!q.settle(slot, 4096, &mut out).unwrap());
        q.reap(1, &mut out).unwrap();
        let buf = out.pop().unwrap().buf.unwrap();
        assert!(buf[..4096].iter().all(|&b| b == 0));
        assert_eq!(&buf[4096..], &file_bytes()[16384 + 4096..16384 + 8192]);
    }

    #[test]
    fn retries_are_bounded() {
        let dir = tempfile::tempdir_in("/tmp").unwrap();
        let mut q = queue_on(dir.path());
        let slot = park(&mut q, read_op(0));
        q.slots[slot as usize].as_mut().unwrap().retries = RETRIES_MAX;
        let mut out = Vec::new();
        assert!(q.settle(slot, -libc::EAGAIN, &mut out).unwrap());
        let err = out.pop().unwrap().result.unwrap_err();
        assert!(
            matches!(&err, Error::Io { source, .. } if source.raw_os_error() == Some(libc::EAGAIN)),
            "{err}"
        );
        assert_eq!(q.in_flight(), 0);
    }

    #[test]
    fn enospc_becomes_no_space_at_the_failed_offset() {
        let dir = tempfile::tempdir_in("/tmp").unwrap();
        let mut q = queue_on(dir.path());
        let buf = crate::buf::AlignedBuf::zeroed(8192);
        let slot = park(&mut q, Op::Write { offset: 4096, buf, durable: true });
        let mut out = Vec::new();
        assert!(!q.settle(slot, 4096, &mut out).unwrap());
        // The rest of the write went to the kernel for real; feed its CQE as ENOSPC instead.
        q.enter(1).unwrap();
        let real: Vec<u64> = q.ring.completion().map(|c| c.user_data()).collect();
        assert_eq!(real, vec![u64::from(slot)]);
        assert!(q.settle(slot, -libc::ENOSPC, &mut out).unwrap());
        let c = out.pop().unwrap();
        assert_eq!(c.tag, 5);
        assert!(matches!(c.result, Err(Error::NoSpace { offset: 8192 })), "{:?}", c.result);
        assert!(c.buf.is_some(), "a failed write still hands its buffer back");
    }
}
