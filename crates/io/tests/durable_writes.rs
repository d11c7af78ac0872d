//! Scenario: durable writes and flushes complete on both backends, and what they wrote is
//! what a separate, buffered reader of the file sees.

mod common;

use shale_io::{Op, QueueExt, QueueOptions, Request};

#[test]
fn durable_writes_reach_the_file() {
    let dir = common::scratch_dir();
    for backend in common::BACKENDS {
        let path = dir.path().join(backend.name());
        let dev = common::new_device(dir.path(), backend.name(), 1 << 20, backend);
        let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
        let mut out = Vec::new();
        for i in 0..4u64 {
            let op = Op::Write { offset: i * 4096, buf: common::pattern(4096, i), durable: true };
            q.submit(Request { tag: i, op }).unwrap();
        }
        q.reap(4, &mut out).unwrap();
        assert!(out.iter().all(|c| c.result.is_ok()));
        q.write_at(65536, common::pattern(4096, 77), false).unwrap();
        q.flush().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        for i in 0..4usize {
            assert_eq!(&bytes[i * 4096..(i + 1) * 4096], &common::pattern(4096, i as u64)[..]);
        }
        assert_eq!(&bytes[65536..69632], &common::pattern(4096, 77)[..]);
    }
}
