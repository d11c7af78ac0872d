//! Scenario: every poll mode completes a pipelined mix of writes, reads and flushes.

mod common;

use std::time::Duration;

use shale_io::{AlignedBuf, Backend, Op, PollMode, QueueOptions, Request};

#[test]
fn each_poll_mode_completes_pipelined_io() {
    let dir = common::scratch_dir();
    let dev = common::new_device(dir.path(), "f", 2 << 20, Backend::Uring);
    let modes = [
        PollMode::Spin,
        PollMode::Adaptive { spin: Duration::from_micros(50) },
        PollMode::Adaptive { spin: Duration::ZERO },
        PollMode::Blocking,
    ];
    for (m, poll) in modes.into_iter().enumerate() {
        let mut q = dev.open_queue(&QueueOptions { depth: 8, poll, sq_poll: None }).unwrap();
        let seed = m as u64 * 100;
        let mut out = Vec::new();
        for i in 0..32u64 {
            let op = Op::Write {
                offset: i * 8192,
                buf: common::pattern(8192, seed + i),
                durable: false,
            };
            if let Err((_, req)) = q.submit(Request { tag: i, op }) {
                q.reap(1, &mut out).unwrap();
                q.submit(req).unwrap();
            }
        }
        let n = q.in_flight();
        q.reap(n, &mut out).unwrap();
        q.submit(Request { tag: 1000, op: Op::Flush }).unwrap();
        q.reap(1, &mut out).unwrap();
        assert_eq!(out.len(), 33, "{poll:?}");
        assert!(out.iter().all(|c| c.result.is_ok()), "{poll:?}");
        out.clear();
        for i in 0..8u64 {
            let op = Op::Read { offset: i * 8192, buf: AlignedBuf::zeroed(8192) };
            q.submit(Request { tag: i, op }).unwrap();
        }
        q.reap(8, &mut out).unwrap();
        for c in out {
            assert_eq!(&c.buf.unwrap()[..], &common::pattern(8192, seed + c.tag)[..], "{poll:?}");
        }
    }
}
