//! Scenario: many requests in flight at once, tags chosen by the caller and not in order;
//! every completion carries its own tag and its own buffer.

mod common;

use std::collections::HashMap;

use shale_io::{AlignedBuf, Backend, Op, QueueOptions, Request};

#[test]
fn completions_match_their_requests_by_tag() {
    let dir = common::scratch_dir();
    let dev = common::new_device(dir.path(), "f", 4 << 20, Backend::Uring);
    let mut q = dev.open_queue(&QueueOptions { depth: 16, ..Default::default() }).unwrap();
    // Tags are deliberately sparse and descending; block i gets tag 1000 - 37 * i.
    let tag_of = |i: u64| 1000 - 37 * i;
    let mut out = Vec::new();
    for i in 0..16u64 {
        let op = Op::Write { offset: i * 65536, buf: common::pattern(65536, i), durable: false };
        q.submit(Request { tag: tag_of(i), op }).unwrap();
    }
    assert_eq!(q.in_flight(), 16);
    while q.in_flight() > 0 {
        q.reap(1, &mut out).unwrap();
    }
    assert_eq!(out.len(), 16);
    for c in out.drain(..) {
        c.result.unwrap();
        let i = (1000 - c.tag) / 37;
        assert_eq!(&c.buf.unwrap()[..], &common::pattern(65536, i)[..], "write {i} buffer");
    }
    // Reads of different sizes in flight together; each buffer must hold its own block.
    let mut want = HashMap::new();
    for i in (0..16u64).rev() {
        let len = if i % 2 == 0 { 65536 } else { 4096 };
        q.submit(Request {
            tag: tag_of(i),
            op: Op::Read { offset: i * 65536, buf: AlignedBuf::zeroed(len) },
        })
        .unwrap();
        want.insert(tag_of(i), (i, len));
    }
    q.reap(16, &mut out).unwrap();
    assert_eq!(out.len(), 16);
    for c in out {
        let (i, len) = want.remove(&c.tag).expect("each tag completes exactly once");
        assert_eq!(&c.buf.unwrap()[..], &common::pattern(65536, i)[..len], "read {i}");
    }
    assert!(want.is_empty());
}
