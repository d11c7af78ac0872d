//! Scenario: requests that O_DIRECT would reject are refused at submission, with the request
//! handed back and nothing left in flight, identically on both backends.

mod common;

use shale_io::{AlignedBuf, Error, Op, QueueOptions, Request};

#[test]
fn misaligned_and_out_of_range_requests_are_refused_at_submit() {
    let dir = common::scratch_dir();
    for backend in common::BACKENDS {
        let dev = common::new_device(dir.path(), backend.name(), 1 << 20, backend);
        let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
        let bad = [
            Op::Read { offset: 512, buf: AlignedBuf::zeroed(4096) },
            Op::Read { offset: 0, buf: AlignedBuf::zeroed(512) },
            Op::Write { offset: 4097, buf: AlignedBuf::zeroed(4096), durable: false },
            Op::Write { offset: 1 << 20, buf: AlignedBuf::zeroed(4096), durable: true },
            Op::Read { offset: (1 << 20) - 4096, buf: AlignedBuf::zeroed(8192) },
            Op::Read { offset: u64::MAX - 4095, buf: AlignedBuf::zeroed(4096) },
        ];
        for (tag, op) in bad.into_iter().enumerate() {
            let (err, req) = q.submit(Request { tag: tag as u64, op }).unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{backend:?} #{tag}: {err}");
            assert_eq!(req.tag, tag as u64);
            assert_eq!(q.in_flight(), 0);
        }
    }
}
