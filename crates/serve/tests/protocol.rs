//! The protocol on a raw socket: malformed RESP answered with an error and the connection
//! closed; inline commands; a bulk string header claiming 512 MiB refused at once, before
//! any of its bytes are sent; a request over max_request_bytes refused; 1000 commands
//! pipelined in one write answered in order; a client that shuts its write side after
//! sending is still answered.

mod common;

use std::io::{Read, Write};
use std::net::Shutdown;

use common::{TestServer, closed, exchange, expect, resp, test_config};
use shale_serve::Config;

#[test]
fn malformed_requests_are_answered_then_closed() {
    let server = TestServer::start();
    for (input, error) in [
        (&b"*1\r\n+PING\r\n"[..], "-ERR Protocol error: expected '$', got '+'\r\n"),
        (b"*x\r\n", "-ERR Protocol error: invalid multibulk length\r\n"),
        (b"*1\r\n$-1\r\n", "-ERR Protocol error: invalid bulk length\r\n"),
        (b"*1\r\n$4\r\nPINGxx", "-ERR Protocol error: expected CRLF, got 'x'\r\n"),
        (b"*1\r\n$99999999999999999999999999\r\n", "-ERR Protocol error: invalid bulk length\r\n"),
        (
            b"*3000000\r\n",
            "-ERR Protocol error: array of 3000000 elements is over the 1048576-element limit\r\n",
        ),
    ] {
        let mut s = server.raw();
        exchange(&mut s, input, error.as_bytes());
        assert!(closed(&mut s), "after {input:?}");
    }
    // Requests before the malformed one in the same write are answered first.
    let mut s = server.raw();
    let mut input = resp(&[b"PING"]);
    input.extend_from_slice(b"*1\r\n:1\r\n");
    exchange(&mut s, &input, b"+PONG\r\n-ERR Protocol error: expected '$', got ':'\r\n");
    assert!(closed(&mut s));
    // The server still serves everyone else.
    let mut s = server.raw();
    exchange(&mut s, &resp(&[b"PING"]), b"+PONG\r\n");
}

#[test]
fn inline_commands_work_as_from_telnet() {
    let server = TestServer::start();
    let mut s = server.raw();
    exchange(&mut s, b"SET greeting hello\r\n", b"+OK\r\n");
    exchange(&mut s, b"\r\n\nGET greeting\n", b"$5\r\nhello\r\n");
    exchange(&mut s, b"PING\r\n", b"+PONG\r\n");
}

#[test]
fn a_512_mib_bulk_string_is_refused_at_its_header() {
    let server = TestServer::start();
    let mut s = server.raw();
    // Only the header is sent: the server refuses the claim without waiting for (or
    // allocating) its bytes.
    let header = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n", 512u64 << 20);
    exchange(
        &mut s,
        header.as_bytes(),
        format!(
            "-ERR Protocol error: bulk string of {} bytes is over the {}-byte limit\r\n",
            512u64 << 20,
            (512u64 << 20) - 1
        )
        .as_bytes(),
    );
    assert!(closed(&mut s));
    // One byte less is within Redis's limit and so within the default: the server waits for
    // the bytes (it answers the PING sent on another connection meanwhile).
    let mut waiting = server.raw();
    waiting
        .write_all(format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n", (512u64 << 20) - 64).as_bytes())
        .unwrap();
    let mut other = server.raw();
    exchange(&mut other, &resp(&[b"PING"]), b"+PONG\r\n");
}

#[test]
fn requests_over_max_request_bytes_are_refused() {
    let config = Config { max_request_bytes: 4096, max_request_args: 8, ..test_config() };
    let server = TestServer::start_with(config);
    let mut s = server.raw();
    let big = vec![b'v'; 5000];
    s.write_all(&resp(&[b"SET", b"k", &big])).unwrap();
    expect(
        &mut s,
        b"-ERR Protocol error: bulk string of 5000 bytes is over the 4096-byte limit\r\n",
    );
    assert!(closed(&mut s));
    // Two bulk strings each under the limit, together over it.
    let mut s = server.raw();
    let half = vec![b'v'; 2500];
    s.write_all(&resp(&[b"MSET", b"a", &half, b"b", &half])).unwrap();
    expect(&mut s, b"-ERR Protocol error: request is over the 4096-byte limit\r\n");
    assert!(closed(&mut s));
    let mut s = server.raw();
    s.write_all(b"*9\r\n").unwrap();
    expect(&mut s, b"-ERR Protocol error: array of 9 elements is over the 8-element limit\r\n");
    // Within the limits all is well.
    let mut s = server.raw();
    exchange(&mut s, &resp(&[b"SET", b"k", &vec![b'v'; 3000]]), b"+OK\r\n");
}

#[test]
fn a_thousand_pipelined_commands_in_one_write_are_answered_in_order() {
    let server = TestServer::start();
    let mut s = server.raw();
    let mut input = Vec::new();
    let mut expected = Vec::new();
    for i in 0..1000 {
        match i % 3 {
            0 => {
                input.extend(resp(&[
                    b"SET",
                    format!("k{i}").as_bytes(),
                    format!("v{i}").as_bytes(),
                ]));
                expected.extend_from_slice(b"+OK\r\n");
            }
            1 => {
                input.extend(resp(&[b"GET", format!("k{}", i - 1).as_bytes()]));
                let v = format!("v{}", i - 1);
                expected.extend(format!("${}\r\n{v}\r\n", v.len()).into_bytes());
            }
            _ => {
                input.extend(resp(&[b"INCR", b"counter"]));
                expected.extend(format!(":{}\r\n", i / 3 + 1).into_bytes());
            }
        }
    }
    exchange(&mut s, &input, &expected);
}

#[test]
fn a_half_closed_client_is_answered_then_closed() {
    let server = TestServer::start();
    let mut s = server.raw();
    let mut input = resp(&[b"SET", b"k", b"v"]);
    input.extend(resp(&[b"GET", b"k"]));
    // A partial request after the whole ones: it can never complete.
    input.extend_from_slice(b"*2\r\n$3\r\nGET\r\n");
    s.write_all(&input).unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got).unwrap();
    assert_eq!(String::from_utf8_lossy(&got), "+OK\r\n$1\r\nv\r\n");
}

/// A pipeline's SETs, GETs and INCRs are written as one batch (the connection's run, run.rs);
/// the replies and the store must be those of one command at a time: later SETs of a key win,
/// and a read or INCR between SETs sees the SETs before it and not those after.
#[test]
fn coalesced_pipelined_sets_behave_as_one_at_a_time() {
    let server = TestServer::start();
    let mut s = server.raw();
    let mut input = Vec::new();
    for args in [
        &[&b"SET"[..], b"k", b"1"][..],
        &[b"set", b"k", b"2"],
        &[b"SET", b"other", b"x"],
        &[b"GET", b"k"],
        &[b"SET", b"k", b"3"],
        &[b"SET", b"n", b"10"],
        &[b"INCR", b"n"],
        &[b"SET", b"n", b"20"],
        &[b"SET", b"k", b"4", b"NX"],
        &[b"GET", b"n"],
        &[b"GET", b"k"],
    ] {
        input.extend(resp(args));
    }
    exchange(
        &mut s,
        &input,
        b"+OK\r\n+OK\r\n+OK\r\n$1\r\n2\r\n+OK\r\n+OK\r\n:11\r\n+OK\r\n$-1\r\n$2\r\n20\r\n$1\r\n3\r\n",
    );
}

/// Before AUTH, a pipelined plain SET is refused like any command: a run never skips the
/// password.
#[test]
fn pipelined_sets_before_auth_are_refused() {
    let mut config = test_config();
    config.password = Some("secret".into());
    let server = TestServer::start_with(config);
    let mut s = server.raw();
    let mut input = resp(&[b"SET", b"a", b"1"]);
    input.extend(resp(&[b"SET", b"b", b"2"]));
    input.extend(resp(&[b"AUTH", b"secret"]));
    input.extend(resp(&[b"SET", b"c", b"3"]));
    input.extend(resp(&[b"GET", b"a"]));
    exchange(
        &mut s,
        &input,
        b"-NOAUTH Authentication required.\r\n-NOAUTH Authentication required.\r\n+OK\r\n+OK\r\n$-1\r\n",
    );
}
