//! Scenarios for `QueuePairs` (LATTE's queue pairs with completion pollers): many threads'
//! batches over io_uring queues with and without polling kernel threads, in every affinity
//! mode and both poller waits, read back byte for byte; threads placed where the mode says
//! (pollers and the kernel's submission threads, as /proc shows them); requests weighed
//! across pairs while they are in flight; full queues; pollers gone after the drop.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use shale_io::{
    Affinity, AlignedBuf, Backend, Completion, Device, Error, MemoryDevice, Op, PollerWait, Queue,
    QueuePairOptions, QueuePairs, Request, Result, affinity,
};

const BLOCK: usize = 4096;

/// One scenario at a time: the placement test counts this process's threads by name.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `threads` threads each write `blocks` blocks of their own region in batches of 8, then
/// read them back in one batch, while they all run at once; every byte checked.
fn hammer(pairs: &QueuePairs, threads: u64, blocks: u64) {
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                let first = t * blocks;
                for chunk in (0..blocks).collect::<Vec<_>>().chunks(8) {
                    let ops = chunk
                        .iter()
                        .map(|&b| Op::Write {
                            offset: (first + b) * BLOCK as u64,
                            buf: common::pattern(BLOCK, first + b),
                            durable: false,
                        })
                        .collect();
                    for r in pairs.run(ops) {
                        assert_eq!(r.unwrap().unwrap().len(), BLOCK);
                    }
                }
                let reads = (0..blocks)
                    .map(|b| Op::Read {
                        offset: (first + b) * BLOCK as u64,
                        buf: AlignedBuf::zeroed(BLOCK),
                    })
                    .collect();
                for (b, r) in pairs.run(reads).into_iter().enumerate() {
                    let got = r.unwrap().unwrap();
                    assert!(got[..] == common::pattern(BLOCK, first + b as u64)[..], "block {b}");
                }
            });
        }
    });
    pairs.flush().unwrap();
}

#[test]
fn every_mode_and_wait_moves_every_byte_on_io_uring() {
    let _serial = serial();
    let dir = common::scratch_dir();
    let dev = common::new_device(dir.path(), "f", 8 << 20, Backend::Uring);
    let waits =
        [PollerWait::Spin, PollerWait::default(), PollerWait::Adaptive { spin: Duration::ZERO }];
    for affinity in Affinity::ALL {
        for (w, poller) in waits.into_iter().enumerate() {
            // The polling kernel threads with one wait, the pollers' own submissions with the
            // others: both ways requests reach the kernel.
            let opts = QueuePairOptions {
                pairs: 3,
                depth: 4,
                affinity,
                poller,
                sq_poll: w == 0,
                ..Default::default()
            };
            let pairs = QueuePairs::new(&opts, |o| dev.open_queue(o)).unwrap();
            hammer(&pairs, 4, 48);
            let stats = pairs.stats();
            let requests: u64 = stats.iter().map(|s| s.requests).sum();
            assert_eq!(requests, 4 * 48 * 2 + 1, "{affinity:?} {poller:?}");
            assert!(stats.iter().all(|s| s.pending == 0));
            assert!(stats.iter().filter(|s| s.requests > 0).count() > 1, "{stats:?}");
        }
    }
}

/// Waits for the kernel to end the submission threads of rings already closed, which it
/// does soon after the close, not at it (within 10 s, or the test fails).
fn wait_for_no_submission_threads() {
    let closed = std::time::Instant::now();
    while !affinity::threads_named("iou-sqp-").is_empty() {
        assert!(closed.elapsed() < Duration::from_secs(10), "submission threads outlive");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn pollers_and_submission_threads_run_where_the_mode_puts_them() {
    let _serial = serial();
    // An earlier test's rings may still have their submission threads, which this one
    // would count as its own (CI saw three where two were made).
    wait_for_no_submission_threads();
    let dir = common::scratch_dir();
    let dev = common::new_device(dir.path(), "f", 2 << 20, Backend::Uring);
    let cpus = affinity::process_cpus();
    for mode in Affinity::ALL {
        let opts = QueuePairOptions { pairs: 2, affinity: mode, ..Default::default() };
        let pairs = QueuePairs::new(&opts, |o| dev.open_queue(o)).unwrap();
        hammer(&pairs, 2, 8);
        let plan = mode.plan(2, cpus.len());
        for (stats, planned) in pairs.stats().iter().zip(&plan) {
            let want = planned.poller.map_or(cpus.clone(), |i| vec![cpus[i % cpus.len()]]);
            assert_eq!(stats.poller_cpus, want, "{mode:?}");
        }
        let pollers = affinity::threads_named("shale-poller-");
        assert_eq!(pollers.len(), 2, "{pollers:?}");
        // The kernel's submission threads are threads of this process, "iou-sqp-<pid>"; an
        // unbound one may run on any CPU online, whatever this process's set.
        let mut sq: Vec<Vec<usize>> =
            affinity::threads_named("iou-sqp-").into_iter().map(|t| t.1).collect();
        assert_eq!(sq.len(), 2, "{mode:?}: {sq:?}");
        if mode != Affinity::Naive {
            let mut want: Vec<Vec<usize>> =
                plan.iter().map(|p| vec![cpus[p.sq.unwrap() % cpus.len()]]).collect();
            sq.sort();
            want.sort();
            assert_eq!(sq, want, "{mode:?}");
        }
        drop(pairs);
        assert!(affinity::threads_named("shale-poller-").is_empty(), "pollers stop with the drop");
        // The kernel ends a ring's submission thread after the ring closes, soon after.
        wait_for_no_submission_threads();
    }
}

/// A queue whose requests complete only once `open` is set: requests stay in flight while
/// the test looks at the weights.
struct Gate {
    open: Arc<AtomicBool>,
    waiting: Vec<Request>,
}

impl Queue for Gate {
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
        while min > 0 && !self.open.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_micros(50));
        }
        if !self.open.load(Ordering::Relaxed) {
            return Ok(0);
        }
        let n = self.waiting.len();
        for req in self.waiting.drain(..) {
            let kind = req.op.kind();
            out.push(Completion { tag: req.tag, kind, result: Ok(()), buf: req.op.into_buf() });
        }
        Ok(n)
    }
}

#[test]
fn requests_in_flight_go_to_the_pair_that_weighs_least() {
    let open = Arc::new(AtomicBool::new(false));
    let gate = open.clone();
    let _serial = serial();
    // Spinning pollers: an adaptive one would sleep in the gate's reap holding its pair.
    let opts = QueuePairOptions { pairs: 2, poller: PollerWait::Spin, ..Default::default() };
    let pairs = QueuePairs::new(&opts, move |_| {
        Ok::<_, Error>(Box::new(Gate { open: gate.clone(), waiting: Vec::new() }) as Box<dyn Queue>)
    })
    .unwrap();
    std::thread::scope(|s| {
        let runner = s.spawn(|| {
            let write =
                Op::Write { offset: 1 << 20, buf: AlignedBuf::zeroed(BLOCK), durable: false };
            let read = || Op::Read { offset: 0, buf: AlignedBuf::zeroed(BLOCK) };
            pairs.run(vec![write, read(), read(), read(), read()])
        });
        while pairs.stats().iter().map(|s| s.requests).sum::<u64>() < 5 {
            std::thread::sleep(Duration::from_millis(1));
        }
        let stats = pairs.stats();
        // The random write weighs 3 x 4 KiB and each read 4 KiB. With no pair's lock taken
        // at the wrong moment: the write to pair 0, three reads to pair 1 until it weighs as
        // much, the last to pair 0 on the tie ([2, 3] requests, where counting would give
        // [3, 2]). A caller passes over a pair whose poller holds its lock, so the split
        // may differ, but a pair with nothing in flight has a sleeping poller and takes the
        // first request that finds it lighter: both pairs get some.
        assert_eq!(stats.iter().map(|s| s.pending).sum::<u64>(), 7 * 4096);
        assert!(stats.iter().all(|s| s.requests >= 1), "{stats:?}");
        open.store(true, Ordering::Relaxed);
        let results = runner.join().unwrap();
        assert!(results.iter().all(Result::is_ok));
    });
    assert!(pairs.stats().iter().all(|s| s.pending == 0));
}

#[test]
fn batches_larger_than_every_queue_wait_for_room() {
    let _serial = serial();
    let dev = MemoryDevice::new(4 << 20, 512).unwrap();
    let opts = QueuePairOptions { pairs: 2, depth: 1, ..Default::default() };
    let pairs = QueuePairs::new(&opts, |o| dev.open_queue(o)).unwrap();
    hammer(&pairs, 3, 40);
}
