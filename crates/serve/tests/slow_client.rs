//! A slow client, one that sends part of a request and stalls, or one that never reads its
//! replies, must not stall the others: each connection is its own task.

mod common;

use std::io::Write;
use std::time::{Duration, Instant};

use common::{TestServer, exchange, resp, test_config};
use redis::Commands;

#[test]
fn a_stalled_partial_request_does_not_stall_others() {
    // One worker thread: the others are served because no connection blocks a thread.
    let server = TestServer::start_with(shale_serve::Config { threads: 1, ..test_config() });
    let mut slow = server.raw();
    // Half a request: the header and part of a bulk string.
    slow.write_all(b"*3\r\n$3\r\nSET\r\n$4\r\nslow\r\n$10\r\nabc").unwrap();
    // A client that never reads: 200 GETs of a 64 KiB value fill the socket buffers.
    let mut setter = server.client();
    let _: () = setter.set("big", vec![b'x'; 64 << 10]).unwrap();
    let mut deaf = server.raw();
    let mut pipeline = Vec::new();
    for _ in 0..200 {
        pipeline.extend(resp(&[b"GET", b"big"]));
    }
    deaf.write_all(&pipeline).unwrap();

    let started = Instant::now();
    let mut c = server.client();
    for i in 0..200 {
        let _: () = c.set(format!("k{i}"), i).unwrap();
        let v: i64 = c.get(format!("k{i}")).unwrap();
        assert_eq!(v, i);
    }
    assert!(started.elapsed() < Duration::from_secs(10), "others were stalled");

    // The slow client finishes its request and is answered.
    slow.write_all(b"defghij\r\n").unwrap();
    exchange(&mut slow, &resp(&[b"GET", b"slow"]), b"+OK\r\n$10\r\nabcdefghij\r\n");
    drop(deaf);
}
