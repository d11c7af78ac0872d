//! Expiry: SET EX/PX/EXAT/PXAT/KEEPTTL, TTL, PTTL, EXPIRE, PEXPIRE and their NX/XX/GT/LT,
//! PERSIST; an expired key reads as missing, is deleted by the read that finds it (INFO's
//! expired_keys) and keeps its expiry through INCR and APPEND.
//!
//! The server's clock is the system's: a test never needs a key to outlive some number of
//! round trips. A key meant to expire during a test gets its expiry once it was seen alive,
//! and the test then waits at least that long (waiting longer changes nothing); a TTL read
//! back is checked within ten seconds of what was set, as slack for a loaded machine.

mod common;

use std::time::Duration;

use common::TestServer;
use redis::{Value, cmd};

fn info_field(c: &mut redis::Connection, field: &str) -> String {
    let info: String = cmd("INFO").arg("stats").query(c).unwrap();
    let line = info.lines().find(|l| l.starts_with(&format!("{field}:"))).unwrap();
    line.split(':').nth(1).unwrap().to_string()
}

#[test]
fn ttl_pttl_expire_persist() {
    let server = TestServer::start();
    let mut c = server.client();
    let ttl: i64 = cmd("TTL").arg("missing").query(&mut c).unwrap();
    assert_eq!(ttl, -2);
    let _: () = cmd("SET").arg("k").arg("v").query(&mut c).unwrap();
    let ttl: i64 = cmd("TTL").arg("k").query(&mut c).unwrap();
    assert_eq!(ttl, -1);
    let set: i64 = cmd("EXPIRE").arg("k").arg(100).query(&mut c).unwrap();
    assert_eq!(set, 1);
    let ttl: i64 = cmd("TTL").arg("k").query(&mut c).unwrap();
    assert!((90..=100).contains(&ttl), "{ttl}");
    let pttl: i64 = cmd("PTTL").arg("k").query(&mut c).unwrap();
    assert!((90_000..=100_000).contains(&pttl), "{pttl}");
    // NX refuses a key with an expiry, GT a shorter one, LT a longer one, XX a key without.
    let r: i64 = cmd("EXPIRE").arg("k").arg(200).arg("NX").query(&mut c).unwrap();
    assert_eq!(r, 0);
    let r: i64 = cmd("EXPIRE").arg("k").arg(50).arg("GT").query(&mut c).unwrap();
    assert_eq!(r, 0);
    let r: i64 = cmd("EXPIRE").arg("k").arg(500).arg("LT").query(&mut c).unwrap();
    assert_eq!(r, 0);
    let r: i64 = cmd("PEXPIRE").arg("k").arg(300_000).arg("GT").query(&mut c).unwrap();
    assert_eq!(r, 1);
    let ttl: i64 = cmd("TTL").arg("k").query(&mut c).unwrap();
    assert!((290..=300).contains(&ttl), "{ttl}");
    let r: i64 = cmd("PERSIST").arg("k").query(&mut c).unwrap();
    assert_eq!(r, 1);
    let r: i64 = cmd("PERSIST").arg("k").query(&mut c).unwrap();
    assert_eq!(r, 0);
    let r: i64 = cmd("EXPIRE").arg("k").arg(10).arg("XX").query(&mut c).unwrap();
    assert_eq!(r, 0, "XX: the key has no expiry");
    let r: i64 = cmd("EXPIRE").arg("missing").arg(10).query(&mut c).unwrap();
    assert_eq!(r, 0);
    let e = cmd("EXPIRE").arg("k").arg(10).arg("NX").arg("XX").query::<Value>(&mut c);
    assert!(e.unwrap_err().to_string().contains("not compatible"));
    // A time not in the future deletes the key.
    let r: i64 = cmd("EXPIRE").arg("k").arg(-1).query(&mut c).unwrap();
    assert_eq!(r, 1);
    let v: Option<String> = cmd("GET").arg("k").query(&mut c).unwrap();
    assert_eq!(v, None);
}

#[test]
fn expired_keys_read_as_missing_and_are_deleted_lazily() {
    let server = TestServer::start();
    let mut c = server.client();
    // "short" lives an hour until it was seen alive, then 100 ms more.
    let _: () = cmd("SET").arg("short").arg("v").arg("PX").arg(3_600_000).query(&mut c).unwrap();
    let _: () = cmd("SET").arg("long").arg("v").arg("EX").arg(1000).query(&mut c).unwrap();
    let _: () = cmd("SET").arg("past").arg("v").arg("PXAT").arg(1).query(&mut c).unwrap();
    let v: Option<String> = cmd("GET").arg("past").query(&mut c).unwrap();
    assert_eq!(v, None, "PXAT in the past: gone at once");
    let v: Option<String> = cmd("GET").arg("short").query(&mut c).unwrap();
    assert_eq!(v.as_deref(), Some("v"));
    let r: i64 = cmd("PEXPIRE").arg("short").arg(100).query(&mut c).unwrap();
    assert_eq!(r, 1);
    // At least the 100 ms: the key has expired by then, whatever the machine's load.
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(info_field(&mut c, "expired_keys"), "0");
    let v: Option<String> = cmd("GET").arg("short").query(&mut c).unwrap();
    assert_eq!(v, None);
    assert_eq!(info_field(&mut c, "expired_keys"), "1", "the GET deleted it");
    let ttl: i64 = cmd("TTL").arg("short").query(&mut c).unwrap();
    assert_eq!(ttl, -2);
    let n: i64 = cmd("EXISTS").arg("short").arg("long").query(&mut c).unwrap();
    assert_eq!(n, 1);
    let keys: Vec<String> = cmd("KEYS").arg("*").query(&mut c).unwrap();
    assert_eq!(keys, ["long"]);
    // SET with NX treats an expired key as missing.
    let _: () = cmd("SET").arg("gone").arg("old").arg("PX").arg(1).query(&mut c).unwrap();
    std::thread::sleep(Duration::from_millis(5));
    let r: Option<String> = cmd("SET").arg("gone").arg("new").arg("NX").query(&mut c).unwrap();
    assert_eq!(r.as_deref(), Some("OK"));
    let ttl: i64 = cmd("TTL").arg("gone").query(&mut c).unwrap();
    assert_eq!(ttl, -1, "the new value has no expiry");
}

#[test]
fn expiry_is_kept_by_incr_append_keepttl_and_cleared_by_set() {
    let server = TestServer::start();
    let mut c = server.client();
    let _: () = cmd("SET").arg("n").arg("1").arg("EX").arg(100).query(&mut c).unwrap();
    let _: i64 = cmd("INCR").arg("n").query(&mut c).unwrap();
    let ttl: i64 = cmd("TTL").arg("n").query(&mut c).unwrap();
    assert!(ttl > 0, "INCR keeps the expiry");
    let _: i64 = cmd("APPEND").arg("n").arg("0").query(&mut c).unwrap();
    let ttl: i64 = cmd("TTL").arg("n").query(&mut c).unwrap();
    assert!(ttl > 0, "APPEND keeps the expiry");
    let _: () = cmd("SET").arg("n").arg("x").arg("KEEPTTL").query(&mut c).unwrap();
    let ttl: i64 = cmd("TTL").arg("n").query(&mut c).unwrap();
    assert!(ttl > 0, "KEEPTTL keeps the expiry");
    let _: () = cmd("SET").arg("n").arg("y").query(&mut c).unwrap();
    let ttl: i64 = cmd("TTL").arg("n").query(&mut c).unwrap();
    assert_eq!(ttl, -1, "a plain SET clears it");
    let _: () =
        cmd("SET").arg("e").arg("v").arg("EXAT").arg(4_000_000_000u64).query(&mut c).unwrap();
    let ttl: i64 = cmd("TTL").arg("e").query(&mut c).unwrap();
    assert!(ttl > 1_000_000, "{ttl}");
}
