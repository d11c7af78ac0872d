//! Scenario: a queue dropped with requests in flight waits for them, so no buffer is freed
//! while the kernel may still write it, and the writes it had accepted do land.

mod common;

use shale_io::{Backend, Op, QueueExt, QueueOptions, Request};

#[test]
fn dropping_a_busy_queue_waits_for_its_requests() {
    let dir = common::scratch_dir();
    let dev = common::new_device(dir.path(), "f", 8 << 20, Backend::Uring);
    for round in 0..20u64 {
        let mut q = dev.open_queue(&QueueOptions { depth: 8, ..Default::default() }).unwrap();
        for i in 0..8u64 {
            let op = Op::Write {
                offset: i << 20,
                buf: common::pattern(1 << 20, round * 8 + i),
                durable: false,
            };
            q.submit(Request { tag: i, op }).unwrap();
        }
        // Half the requests reach the kernel; the rest are still only in the ring.
        let mut out = Vec::new();
        q.reap(0, &mut out).unwrap();
        drop(q);
        let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
        for i in 0..8u64 {
            let got = q.read_at(i << 20, 1 << 20).unwrap();
            let landed_by_reap = out.iter().any(|c| c.tag == i);
            assert_eq!(
                &got[..],
                &common::pattern(1 << 20, round * 8 + i)[..],
                "round {round} write {i} (reaped: {landed_by_reap})"
            );
        }
    }
}
