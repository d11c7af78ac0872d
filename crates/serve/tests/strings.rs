//! The string commands through the redis crate: GET, SET and its options, GETDEL, DEL,
//! EXISTS, MGET, MSET, INCR, INCRBY, DECR, DECRBY, APPEND, STRLEN, with Redis's errors; and
//! every value still there after a shutdown and a reopen.

mod common;

use common::{TestServer, test_config};
use redis::{Value, cmd};

fn err_text<T: std::fmt::Debug>(r: redis::RedisResult<T>) -> String {
    r.unwrap_err().to_string()
}

#[test]
fn get_set_and_set_options() {
    let server = TestServer::start();
    let mut c = server.client();
    let missing: Option<String> = cmd("GET").arg("a").query(&mut c).unwrap();
    assert_eq!(missing, None);
    let ok: String = cmd("SET").arg("a").arg("1").query(&mut c).unwrap();
    assert_eq!(ok, "OK");
    let got: String = cmd("GET").arg("a").query(&mut c).unwrap();
    assert_eq!(got, "1");
    // Binary values and keys, the empty value included.
    let _: () = cmd("SET").arg(b"k\x00\xff").arg(b"\r\n\x00").query(&mut c).unwrap();
    let got: Vec<u8> = cmd("GET").arg(b"k\x00\xff").query(&mut c).unwrap();
    assert_eq!(got, b"\r\n\x00");
    let _: () = cmd("SET").arg("empty").arg("").query(&mut c).unwrap();
    let got: Option<String> = cmd("GET").arg("empty").query(&mut c).unwrap();
    assert_eq!(got.as_deref(), Some(""));

    // NX and XX.
    let r: Option<String> = cmd("SET").arg("a").arg("2").arg("NX").query(&mut c).unwrap();
    assert_eq!(r, None, "NX on an existing key sets nothing");
    let r: Option<String> = cmd("SET").arg("b").arg("2").arg("XX").query(&mut c).unwrap();
    assert_eq!(r, None, "XX on a missing key sets nothing");
    let r: Option<String> = cmd("SET").arg("b").arg("2").arg("NX").query(&mut c).unwrap();
    assert_eq!(r.as_deref(), Some("OK"));
    let r: Option<String> = cmd("SET").arg("b").arg("3").arg("XX").query(&mut c).unwrap();
    assert_eq!(r.as_deref(), Some("OK"));
    // GET: the old value.
    let r: Option<String> = cmd("SET").arg("b").arg("4").arg("GET").query(&mut c).unwrap();
    assert_eq!(r.as_deref(), Some("3"));
    let r: Option<String> = cmd("SET").arg("new").arg("x").arg("GET").query(&mut c).unwrap();
    assert_eq!(r, None);
    let r: Option<String> =
        cmd("SET").arg("b").arg("5").arg("NX").arg("GET").query(&mut c).unwrap();
    assert_eq!(r.as_deref(), Some("4"), "NX GET answers the old value and sets nothing");
    let got: String = cmd("GET").arg("b").query(&mut c).unwrap();
    assert_eq!(got, "4");

    // Errors.
    assert!(
        err_text(cmd("SET").arg("a").arg("1").arg("NX").arg("XX").query::<Value>(&mut c))
            .contains("syntax error")
    );
    assert!(
        err_text(cmd("SET").arg("a").arg("1").arg("EX").arg("0").query::<Value>(&mut c))
            .contains("invalid expire time in 'set' command")
    );
    assert!(
        err_text(cmd("SET").arg("a").arg("1").arg("EX").arg("x").query::<Value>(&mut c))
            .contains("not an integer")
    );
    assert!(
        err_text(cmd("SET").arg("a").query::<Value>(&mut c))
            .contains("wrong number of arguments for 'set' command")
    );
    assert!(
        err_text(cmd("GET").query::<Value>(&mut c))
            .contains("wrong number of arguments for 'get' command")
    );
}

#[test]
fn getdel_del_exists_mget_mset() {
    let server = TestServer::start();
    let mut c = server.client();
    let _: () =
        cmd("MSET").arg("a").arg("1").arg("b").arg("2").arg("c").arg("3").query(&mut c).unwrap();
    let got: Vec<Option<String>> = cmd("MGET").arg("a").arg("x").arg("c").query(&mut c).unwrap();
    assert_eq!(got, [Some("1".into()), None, Some("3".into())]);
    assert!(
        err_text(cmd("MSET").arg("a").arg("1").arg("b").query::<Value>(&mut c))
            .contains("wrong number of arguments for 'mset'")
    );

    let n: i64 = cmd("EXISTS").arg("a").arg("a").arg("x").arg("b").query(&mut c).unwrap();
    assert_eq!(n, 3, "a key named twice counts twice");
    let n: i64 = cmd("DEL").arg("a").arg("a").arg("x").query(&mut c).unwrap();
    assert_eq!(n, 1, "a key named twice is deleted once");
    let n: i64 = cmd("EXISTS").arg("a").query(&mut c).unwrap();
    assert_eq!(n, 0);

    let v: Option<String> = cmd("GETDEL").arg("b").query(&mut c).unwrap();
    assert_eq!(v.as_deref(), Some("2"));
    let v: Option<String> = cmd("GETDEL").arg("b").query(&mut c).unwrap();
    assert_eq!(v, None);
    let v: Option<String> = cmd("GET").arg("b").query(&mut c).unwrap();
    assert_eq!(v, None);
}

#[test]
fn counters_append_and_strlen() {
    let server = TestServer::start();
    let mut c = server.client();
    let n: i64 = cmd("INCR").arg("n").query(&mut c).unwrap();
    assert_eq!(n, 1);
    let n: i64 = cmd("INCRBY").arg("n").arg(41).query(&mut c).unwrap();
    assert_eq!(n, 42);
    let n: i64 = cmd("DECR").arg("n").query(&mut c).unwrap();
    assert_eq!(n, 41);
    let n: i64 = cmd("DECRBY").arg("n").arg(50).query(&mut c).unwrap();
    assert_eq!(n, -9);
    let s: String = cmd("GET").arg("n").query(&mut c).unwrap();
    assert_eq!(s, "-9");

    let _: () = cmd("SET").arg("text").arg("abc").query(&mut c).unwrap();
    assert!(
        err_text(cmd("INCR").arg("text").query::<i64>(&mut c))
            .contains("value is not an integer or out of range")
    );
    assert!(
        err_text(cmd("INCRBY").arg("n").arg("1.5").query::<i64>(&mut c)).contains("not an integer")
    );
    let _: () = cmd("SET").arg("max").arg(i64::MAX).query(&mut c).unwrap();
    assert!(
        err_text(cmd("INCR").arg("max").query::<i64>(&mut c))
            .contains("increment or decrement would overflow")
    );
    let _: () = cmd("SET").arg("min").arg(i64::MIN).query(&mut c).unwrap();
    assert!(err_text(cmd("DECR").arg("min").query::<i64>(&mut c)).contains("overflow"));
    assert!(
        err_text(cmd("DECRBY").arg("n").arg(i64::MIN).query::<i64>(&mut c))
            .contains("not an integer")
    );

    let n: i64 = cmd("APPEND").arg("text").arg("def").query(&mut c).unwrap();
    assert_eq!(n, 6);
    let n: i64 = cmd("APPEND").arg("fresh").arg("xy").query(&mut c).unwrap();
    assert_eq!(n, 2);
    let s: String = cmd("GET").arg("text").query(&mut c).unwrap();
    assert_eq!(s, "abcdef");
    let n: i64 = cmd("STRLEN").arg("text").query(&mut c).unwrap();
    assert_eq!(n, 6);
    let n: i64 = cmd("STRLEN").arg("nothing").query(&mut c).unwrap();
    assert_eq!(n, 0);
}

#[test]
fn values_survive_a_shutdown_and_reopen() {
    let server = TestServer::start();
    let mut c = server.client();
    for i in 0..500 {
        let _: () =
            cmd("SET").arg(format!("key{i}")).arg(format!("value{i}")).query(&mut c).unwrap();
    }
    let _: () = cmd("INCRBY").arg("counter").arg(7).query(&mut c).unwrap();
    drop(c);
    let dir = server.stop();
    let server = TestServer::start_in(dir, test_config());
    let mut c = server.client();
    for i in 0..500 {
        let v: String = cmd("GET").arg(format!("key{i}")).query(&mut c).unwrap();
        assert_eq!(v, format!("value{i}"));
    }
    let n: i64 = cmd("GET").arg("counter").query(&mut c).unwrap();
    assert_eq!(n, 7);
}

#[test]
fn a_value_over_the_engines_limit_is_an_error_and_the_connection_goes_on() {
    let server = TestServer::start();
    let mut c = server.client();
    // The test store's memtable is 256 KiB: a batch is at most half of it.
    let big = vec![b'x'; 1 << 20];
    let e = err_text(cmd("SET").arg("big").arg(&big[..]).query::<Value>(&mut c));
    assert!(e.contains("invalid argument"), "{e}");
    let pong: String = cmd("PING").query(&mut c).unwrap();
    assert_eq!(pong, "PONG");
}
