//! No reply leaves before its write (P2; P1 under `appendfsync always`): the engine write of
//! a pipeline's run is held by the test hook, and while it is held the client must have
//! received nothing, not even the replies of reads and PINGs queued behind the writes; once
//! the write returns, every reply arrives, in order, and the hook saw the write end first.

mod common;

use std::io::{ErrorKind, Read, Write};

use common::{READ_TIMEOUT, TestServer, expect, held_writes, resp};
use shale_serve::keyspace::WriteEvent;

#[test]
fn replies_wait_for_the_write_of_their_run() {
    let (config, events, release) = held_writes();
    let server = TestServer::start_with(config);
    // Declared after the server, so dropped before it: a failing test lets the held write go
    // before the server shuts down.
    let release = release;
    let mut s = server.raw();
    let mut input = Vec::new();
    for req in [
        &[&b"INCR"[..], b"n"][..],
        &[b"INCR", b"n"],
        &[b"APPEND", b"s", b"x"],
        &[b"GET", b"n"],
        &[b"MSET", b"a", b"1", b"b", b"2"],
        &[b"PING"],
    ] {
        input.extend(resp(req));
    }
    s.write_all(&input).unwrap();
    let first = events.recv_timeout(READ_TIMEOUT).expect("the run's write starts");
    assert_eq!(first, WriteEvent::Before(4), "one batch: n, s, a, b");
    // The write is held. On loopback, bytes the server had written would be in this socket's
    // receive queue already: there must be none.
    s.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 64];
    match s.read(&mut buf) {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => {
            panic!("a reply left before its write: {other:?} {:?}", String::from_utf8_lossy(&buf))
        }
    }
    s.set_nonblocking(false).unwrap();
    release.send(()).unwrap();
    expect(&mut s, b":1\r\n:2\r\n:1\r\n$1\r\n2\r\n+OK\r\n+PONG\r\n");
    // The reply came after the write returned.
    assert_eq!(events.try_recv(), Ok(WriteEvent::After(4)));
    assert!(events.try_recv().is_err(), "one write for the whole pipeline");
}
