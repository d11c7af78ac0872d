//! Scenario: a full queue answers Busy and hands the request back; after reaping it accepts
//! the same request again.

mod common;

use shale_io::{AlignedBuf, Error, Op, QueueOptions, Request};

#[test]
fn busy_at_depth_on_each_backend() {
    let dir = common::scratch_dir();
    for backend in common::BACKENDS {
        let dev = common::new_device(dir.path(), backend.name(), 1 << 20, backend);
        let mut q = dev.open_queue(&QueueOptions { depth: 4, ..Default::default() }).unwrap();
        assert_eq!(q.depth(), 4);
        for tag in 0..4 {
            let op = Op::Read { offset: tag * 4096, buf: AlignedBuf::zeroed(4096) };
            q.submit(Request { tag, op }).unwrap();
        }
        let op = Op::Write { offset: 0, buf: common::pattern(4096, 5), durable: false };
        let (err, req) = q.submit(Request { tag: 99, op }).unwrap_err();
        assert!(matches!(err, Error::Busy), "{backend:?}: {err}");
        assert_eq!(req.tag, 99);
        assert_eq!(q.in_flight(), 4);
        let mut out = Vec::new();
        q.reap(1, &mut out).unwrap();
        q.submit(req).unwrap();
        while q.in_flight() > 0 {
            q.reap(1, &mut out).unwrap();
        }
        assert_eq!(out.len(), 5);
        assert!(out.iter().all(|c| c.result.is_ok()));
    }
}

#[test]
fn queue_depth_outside_bounds_is_refused() {
    let dir = common::scratch_dir();
    let dev = common::new_device(dir.path(), "f", 1 << 20, shale_io::Backend::Uring);
    for depth in [0, shale_io::QUEUE_DEPTH_MAX + 1] {
        let err = dev.open_queue(&QueueOptions { depth, ..Default::default() }).err().unwrap();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    }
}
