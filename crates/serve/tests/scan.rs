//! SCAN (MATCH, COUNT, TYPE, cursors that survive concurrent writes, the redis crate's scan
//! iterator), KEYS, DBSIZE and FLUSHDB (binary keys of 0xff bytes included).

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::TestServer;
use redis::{Commands, Value, cmd};

fn scan_page(c: &mut redis::Connection, cursor: &str, args: &[&str]) -> (String, Vec<String>) {
    let mut q = cmd("SCAN");
    q.arg(cursor);
    for a in args {
        q.arg(*a);
    }
    q.query(c).unwrap()
}

#[test]
fn scan_visits_every_key_once_in_pages() {
    let server = TestServer::start();
    let mut c = server.client();
    for i in 0..250 {
        let _: () = c.set(format!("user:{i:03}"), i).unwrap();
        let _: () = c.set(format!("item:{i:03}"), i).unwrap();
    }
    let mut seen = Vec::new();
    let mut cursor = "0".to_string();
    let mut pages = 0;
    loop {
        let (next, keys) = scan_page(&mut c, &cursor, &["MATCH", "user:*", "COUNT", "30"]);
        assert!(keys.len() <= 30);
        seen.extend(keys);
        pages += 1;
        assert!(pages < 100, "the scan must end");
        if next == "0" {
            break;
        }
        cursor = next;
    }
    let want: Vec<String> = (0..250).map(|i| format!("user:{i:03}")).collect();
    assert_eq!(seen, want);

    // The redis crate's iterator parses cursors as integers.
    let all: BTreeSet<String> = c.scan_match::<_, String>("item:1*").unwrap().collect();
    assert_eq!(all.len(), 100);
    let (_, keys) = scan_page(&mut c, "0", &["COUNT", "5", "TYPE", "hash"]);
    assert!(keys.is_empty(), "every value is a string");
    let (_, keys) = scan_page(&mut c, "0", &["COUNT", "5", "TYPE", "string"]);
    assert_eq!(keys.len(), 5);
    for bad in [&["COUNT", "0"][..], &["COUNT"], &["BOGUS", "1"]] {
        let mut q = cmd("SCAN");
        q.arg("0").arg(bad);
        assert!(q.query::<Value>(&mut c).is_err(), "{bad:?}");
    }
    let e = cmd("SCAN").arg("abc").query::<Value>(&mut c).unwrap_err();
    assert!(e.to_string().contains("invalid cursor"), "{e}");
    let e = cmd("SCAN").arg("987654321").query::<Value>(&mut c).unwrap_err();
    assert!(e.to_string().contains("unknown"), "{e}");
}

#[test]
fn a_cursor_survives_concurrent_writes() {
    let server = TestServer::start();
    let mut c = server.client();
    let mut other = server.client();
    // Keys present throughout: every one must be returned exactly once. Keys written or
    // deleted during the scan may or may not be.
    for i in 0..300 {
        let _: () = c.set(format!("stable:{i:04}"), "v").unwrap();
        let _: () = c.set(format!("doomed:{i:04}"), "v").unwrap();
    }
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut cursor = "0".to_string();
    let mut round = 0;
    loop {
        let (next, keys) = scan_page(&mut c, &cursor, &["COUNT", "25"]);
        for k in keys {
            *seen.entry(k).or_default() += 1;
        }
        // Between pages: new keys before and after the cursor, deletes, overwrites.
        for j in 0..10 {
            let _: () = other.set(format!("new:{round:03}:{j}"), "v").unwrap();
            let _: () = other.set(format!("a-early:{round:03}:{j}"), "v").unwrap();
            let _: () = other.del(format!("doomed:{:04}", round * 10 + j)).unwrap();
            let _: () = other.set(format!("stable:{:04}", (round * 7 + j) % 300), "w").unwrap();
        }
        round += 1;
        assert!(round < 200, "the scan must end");
        if next == "0" {
            break;
        }
        cursor = next;
    }
    for i in 0..300 {
        assert_eq!(seen.get(&format!("stable:{i:04}")), Some(&1), "stable:{i:04}");
    }
    assert!(seen.values().all(|&n| n == 1), "no key returned twice");
}

#[test]
fn keys_dbsize_and_flushdb() {
    let server = TestServer::start();
    let mut c = server.client();
    let n: i64 = cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 0);
    for k in ["hello", "hallo", "hxllo", "world"] {
        let _: () = c.set(k, "v").unwrap();
    }
    // Keys at the edges of the key space: every byte 0xff, and the empty key.
    let _: () = c.set(&[0xffu8; 8][..], "edge").unwrap();
    let _: () = c.set("", "empty").unwrap();
    let mut keys: Vec<String> = cmd("KEYS").arg("h[ae]llo").query(&mut c).unwrap();
    keys.sort();
    assert_eq!(keys, ["hallo", "hello"]);
    let keys: Vec<Vec<u8>> = cmd("KEYS").arg("*").query(&mut c).unwrap();
    assert_eq!(keys.len(), 6);
    let n: i64 = cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 6);
    let ok: String = cmd("FLUSHDB").query(&mut c).unwrap();
    assert_eq!(ok, "OK");
    let n: i64 = cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 0);
    let v: Option<String> = c.get(&[0xffu8; 8][..]).unwrap();
    assert_eq!(v, None);
    let keys: Vec<String> = cmd("KEYS").arg("*").query(&mut c).unwrap();
    assert!(keys.is_empty());
    let _: () = c.set("after", "v").unwrap();
    let ok: String = cmd("FLUSHALL").arg("ASYNC").query(&mut c).unwrap();
    assert_eq!(ok, "OK");
    let n: i64 = cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(n, 0);
    assert!(cmd("FLUSHDB").arg("NOW").query::<Value>(&mut c).is_err());
}

#[test]
fn dbsize_past_its_count_is_an_estimate_and_says_so() {
    // Written through the library, in the server's key and value formats, to be quick.
    let dir = tempfile::tempdir().unwrap();
    let db = shale_lsm::Db::open(dir.path(), shale_lsm::Options::small_for_tests()).unwrap();
    let keys = 120_000u32;
    let mut batch = shale_lsm::WriteBatch::new();
    for i in 0..keys {
        let key = shale_serve::keyspace::engine_key(format!("key:{i:08}").as_bytes());
        batch.put(&key, &shale_serve::value::Value::new(b"some value".to_vec()).encode());
        if batch.len() == 200 {
            db.write(&batch, &shale_lsm::WriteOptions::default()).unwrap();
            batch = shale_lsm::WriteBatch::new();
        }
    }
    db.flush().unwrap();
    let server = shale_serve::Server::start(db, common::test_config()).unwrap();
    let mut c = redis::Client::open(format!("redis://{}/", server.tcp_addr().unwrap()))
        .unwrap()
        .get_connection()
        .unwrap();
    let n: u64 = cmd("DBSIZE").query(&mut c).unwrap();
    println!("DBSIZE {n} for {keys} keys");
    // An extrapolation from bytes: the right order of magnitude, never below what was counted.
    assert!((100_000..=1_200_000).contains(&n), "DBSIZE {n} for {keys} keys");
    let info: String = cmd("INFO").arg("keyspace").query(&mut c).unwrap();
    assert!(info.contains(",keys_estimated=1\r\n"), "{info}");
    drop(c);
    server.shutdown().unwrap();
}
