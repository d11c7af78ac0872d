//! Before AUTH, Redis's bounds on a stranger's requests: with a password set, a client that
//! has not authenticated is refused an array of more than 10 elements or a bulk string of
//! more than 16 KiB at its header, answered Redis's error and closed, before it sends (and
//! the server buffers) any of the bytes it claims. Once authenticated, the configured bounds
//! apply again, from the request after a pipelined AUTH on.

mod common;

use std::io::Write;

use common::{TestServer, closed, exchange, expect, resp, test_config};
use shale_serve::Config;

fn with_password() -> TestServer {
    TestServer::start_with(Config { password: Some("s3cret".into()), ..test_config() })
}

#[test]
fn a_huge_bulk_header_before_auth_is_refused_unbuffered() {
    let server = with_password();
    let mut s = server.raw();
    // Only the header of a 300 MB value: the answer comes without a byte of it sent.
    s.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$300000000\r\n").unwrap();
    expect(&mut s, b"-ERR Protocol error: unauthenticated bulk length\r\n");
    assert!(closed(&mut s), "the connection is closed after the refusal");

    // The first bulk string over 16 KiB is refused, even as the password of AUTH.
    let mut s = server.raw();
    s.write_all(format!("*2\r\n$4\r\nAUTH\r\n${}\r\n", (16 << 10) + 1).as_bytes()).unwrap();
    expect(&mut s, b"-ERR Protocol error: unauthenticated bulk length\r\n");
    assert!(closed(&mut s));
}

#[test]
fn more_than_ten_arguments_before_auth_are_refused() {
    let server = with_password();
    let mut s = server.raw();
    s.write_all(b"*11\r\n").unwrap();
    expect(&mut s, b"-ERR Protocol error: unauthenticated multibulk length\r\n");
    assert!(closed(&mut s));
    // Inline commands too.
    let mut s = server.raw();
    s.write_all(b"MSET a 1 b 2 c 3 d 4 e 5\r\n").unwrap();
    expect(&mut s, b"-ERR Protocol error: unauthenticated multibulk length\r\n");
    assert!(closed(&mut s));
    // Ten are within the bound (and answered NOAUTH).
    let mut s = server.raw();
    let ten: Vec<&[u8]> = vec![b"MSET", b"a", b"1", b"b", b"2", b"c", b"3", b"d", b"4", b"e"];
    exchange(&mut s, &resp(&ten), b"-NOAUTH Authentication required.\r\n");
}

#[test]
fn after_auth_the_configured_bounds_apply() {
    let server = with_password();
    let mut s = server.raw();
    // AUTH and a 100 KiB SET in one write: the SET is parsed after AUTH ran.
    let value = vec![b'v'; 100 << 10];
    let mut both = resp(&[b"AUTH", b"s3cret"]);
    both.extend_from_slice(&resp(&[b"SET", b"big", &value]));
    let many: Vec<&[u8]> = std::iter::once(&b"MGET"[..]).chain([&b"k"[..]; 20]).collect();
    both.extend_from_slice(&resp(&many));
    s.write_all(&both).unwrap();
    let mut nulls = b"+OK\r\n+OK\r\n*20\r\n".to_vec();
    for _ in 0..20 {
        nulls.extend_from_slice(b"$-1\r\n");
    }
    expect(&mut s, &nulls);
    exchange(&mut s, &resp(&[b"STRLEN", b"big"]), format!(":{}\r\n", 100 << 10).as_bytes());
    // The configured bound (proto-max-bulk-len) still holds for an authenticated client.
    s.write_all(format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n", 512u64 << 20).as_bytes()).unwrap();
    expect(
        &mut s,
        format!(
            "-ERR Protocol error: bulk string of {} bytes is over the {}-byte limit\r\n",
            512u64 << 20,
            (512u64 << 20) - 1
        )
        .as_bytes(),
    );
}

#[test]
fn without_a_password_there_are_no_unauthenticated_bounds() {
    let server = TestServer::start();
    let mut s = server.raw();
    let value = vec![b'v'; 100 << 10];
    exchange(&mut s, &resp(&[b"SET", b"big", &value]), b"+OK\r\n");
}
