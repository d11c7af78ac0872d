//! Scenario: a throttled memory device moves N bytes no faster than its bandwidth allows.
//! Only a lower bound is checked: a loaded machine may run slower, never faster.

use std::sync::Arc;
use std::time::{Duration, Instant};

use shale_io::{
    AlignedBuf, Device, MemoryDevice, Op, Profile, QueueOptions, Request, ThrottledDevice,
};

#[test]
fn throttled_device_takes_at_least_bytes_over_bandwidth() {
    let bandwidth = 4_000_000u64;
    let profile = Profile {
        name: "test".into(),
        bandwidth_bytes_per_s: bandwidth,
        iops: 1_000_000,
        latency: Duration::ZERO,
    };
    let dev =
        ThrottledDevice::new(Arc::new(MemoryDevice::new(4 << 20, 4096).unwrap()), profile).unwrap();
    // Two queues share one budget: splitting the work does not double the bandwidth.
    let mut queues: Vec<_> = (0..2)
        .map(|_| dev.open_queue(&QueueOptions { depth: 4, ..Default::default() }).unwrap())
        .collect();
    let total_bytes = 2u64 << 20;
    let block = 65536u64;
    let start = Instant::now();
    let mut out = Vec::new();
    for i in 0..total_bytes / block {
        let q = &mut queues[(i % 2) as usize];
        let op = Op::Write {
            offset: i * block,
            buf: AlignedBuf::zeroed(block as usize),
            durable: false,
        };
        if let Err((_, req)) = q.submit(Request { tag: i, op }) {
            q.reap(1, &mut out).unwrap();
            q.submit(req).unwrap();
        }
    }
    for q in &mut queues {
        let n = q.in_flight();
        q.reap(n, &mut out).unwrap();
    }
    let elapsed = start.elapsed();
    assert_eq!(out.len() as u64, total_bytes / block);
    assert!(out.iter().all(|c| c.result.is_ok()));
    let expected = Duration::from_secs_f64(total_bytes as f64 / bandwidth as f64);
    // Allow the bucket's burst credit of the two idle buckets at the start.
    assert!(elapsed + 2 * shale_io::THROTTLE_BURST >= expected, "{elapsed:?} < {expected:?}");
}

#[test]
fn latency_is_added_to_every_request() {
    let profile = Profile::named("hdd").unwrap();
    let latency = profile.latency;
    let dev =
        ThrottledDevice::new(Arc::new(MemoryDevice::new(1 << 20, 4096).unwrap()), profile).unwrap();
    let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
    let start = Instant::now();
    let mut out = Vec::new();
    for i in 0..3 {
        q.submit(Request { tag: i, op: Op::Flush }).unwrap();
        q.reap(1, &mut out).unwrap();
    }
    assert!(start.elapsed() >= 3 * latency, "{:?}", start.elapsed());
}
