//! Redis's older string commands, with its exact replies and errors over a raw socket: TYPE
//! (`string` or `none`), SETEX and PSETEX (an expiry with the value; a time that is not a
//! positive integer refused), SETNX (1 if set, 0 if the key existed), GETSET (the old value,
//! the expiry cleared), and their arity errors.

mod common;

use std::io::Write;

use common::{TestServer, exchange, read_line, resp};

#[test]
fn type_says_string_or_none() {
    let server = TestServer::start();
    let mut s = server.raw();
    exchange(&mut s, &resp(&[b"TYPE", b"k"]), b"+none\r\n");
    exchange(&mut s, &resp(&[b"SET", b"k", b"v"]), b"+OK\r\n");
    exchange(&mut s, &resp(&[b"TYPE", b"k"]), b"+string\r\n");
    // An expired key is none.
    exchange(&mut s, &resp(&[b"SET", b"gone", b"v", b"PXAT", b"1"]), b"+OK\r\n");
    exchange(&mut s, &resp(&[b"TYPE", b"gone"]), b"+none\r\n");
    exchange(&mut s, &resp(&[b"TYPE"]), b"-ERR wrong number of arguments for 'type' command\r\n");
}

#[test]
fn setex_and_psetex_set_a_value_with_its_expiry() {
    let server = TestServer::start();
    let mut s = server.raw();
    exchange(&mut s, &resp(&[b"SETEX", b"k", b"100", b"v"]), b"+OK\r\n");
    exchange(&mut s, &resp(&[b"GET", b"k"]), b"$1\r\nv\r\n");
    exchange(&mut s, &resp(&[b"TTL", b"k"]), b":100\r\n");
    exchange(&mut s, &resp(&[b"PSETEX", b"p", b"100000", b"w"]), b"+OK\r\n");
    s.write_all(&resp(&[b"PTTL", b"p"])).unwrap();
    let pttl = read_line(&mut s);
    let ms: i64 = pttl.trim_start_matches(':').trim().parse().unwrap();
    // Milliseconds, not seconds: within the 100 s given (some of which have passed).
    assert!((50_000..=100_000).contains(&ms), "{pttl}");

    for bad in [&b"0"[..], b"-5"] {
        exchange(
            &mut s,
            &resp(&[b"SETEX", b"k", bad, b"v"]),
            b"-ERR invalid expire time in 'setex' command\r\n",
        );
    }
    exchange(
        &mut s,
        &resp(&[b"PSETEX", b"k", b"0", b"v"]),
        b"-ERR invalid expire time in 'psetex' command\r\n",
    );
    // Seconds whose milliseconds overflow.
    exchange(
        &mut s,
        &resp(&[b"SETEX", b"k", b"9223372036854775807", b"v"]),
        b"-ERR invalid expire time in 'setex' command\r\n",
    );
    exchange(
        &mut s,
        &resp(&[b"SETEX", b"k", b"ten", b"v"]),
        b"-ERR value is not an integer or out of range\r\n",
    );
    exchange(
        &mut s,
        &resp(&[b"SETEX", b"k", b"10"]),
        b"-ERR wrong number of arguments for 'setex' command\r\n",
    );
    // The refusals left the first value and its expiry alone.
    exchange(&mut s, &resp(&[b"GET", b"k"]), b"$1\r\nv\r\n");
}

#[test]
fn setnx_sets_only_a_missing_key() {
    let server = TestServer::start();
    let mut s = server.raw();
    exchange(&mut s, &resp(&[b"SETNX", b"k", b"first"]), b":1\r\n");
    exchange(&mut s, &resp(&[b"SETNX", b"k", b"second"]), b":0\r\n");
    exchange(&mut s, &resp(&[b"GET", b"k"]), b"$5\r\nfirst\r\n");
    exchange(&mut s, &resp(&[b"TTL", b"k"]), b":-1\r\n");
    // An expired key counts as missing.
    exchange(&mut s, &resp(&[b"SET", b"old", b"v", b"PXAT", b"1"]), b"+OK\r\n");
    exchange(&mut s, &resp(&[b"SETNX", b"old", b"new"]), b":1\r\n");
    exchange(&mut s, &resp(&[b"GET", b"old"]), b"$3\r\nnew\r\n");
    exchange(
        &mut s,
        &resp(&[b"SETNX", b"k"]),
        b"-ERR wrong number of arguments for 'setnx' command\r\n",
    );
}

#[test]
fn getset_answers_the_old_value_and_clears_the_expiry() {
    let server = TestServer::start();
    let mut s = server.raw();
    exchange(&mut s, &resp(&[b"GETSET", b"k", b"one"]), b"$-1\r\n");
    exchange(&mut s, &resp(&[b"SETEX", b"k", b"100", b"two"]), b"+OK\r\n");
    exchange(&mut s, &resp(&[b"GETSET", b"k", b"three"]), b"$3\r\ntwo\r\n");
    exchange(&mut s, &resp(&[b"GET", b"k"]), b"$5\r\nthree\r\n");
    exchange(&mut s, &resp(&[b"TTL", b"k"]), b":-1\r\n");
    exchange(
        &mut s,
        &resp(&[b"GETSET", b"k", b"a", b"b"]),
        b"-ERR wrong number of arguments for 'getset' command\r\n",
    );
}
