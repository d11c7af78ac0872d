//! Redis's RDB snapshot format against the real thing (issue #46's replication speaks it): a
//! snapshot written by Redis 7 (`fixtures/redis7.rdb`, made by `fixtures/make_redis7_rdb.sh`)
//! reads back with every string key in every encoding Redis chose and every other key
//! reported by type; and a snapshot shale writes is loaded by a real `redis-server` (Debian's
//! 7.0, which test.sh installs), its keys and expiries read back with redis-cli. Without
//! `redis-server` the second test fails under test.sh (`SHALE_REQUIRE_PREREQS=1`), and run by
//! hand says it skipped.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use shale_serve::rdb::{self, Item};

#[test]
fn a_snapshot_redis_wrote_reads_back() {
    let bytes =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/redis7.rdb"))
            .unwrap();
    let mut strings = BTreeMap::new();
    let mut skipped = BTreeMap::new();
    let version = rdb::decode(&bytes, |item| match item {
        Item::String(s) => {
            strings.insert((s.db, s.key), (s.value, s.expires_at_ms));
        }
        Item::Skipped { db, key, kind } => {
            skipped.insert((db, key), kind);
        }
    })
    .unwrap();
    assert_eq!(version, 10, "Redis 7.0 writes version 10");
    let get = |db: u64, k: &str| strings.get(&(db, k.as_bytes().to_vec())).cloned();
    assert_eq!(get(0, "plain"), Some((b"hello".to_vec(), None)));
    assert_eq!(get(0, "number"), Some((b"12345".to_vec(), None)), "an int16-encoded string");
    assert_eq!(get(0, "negative"), Some((b"-7".to_vec(), None)), "an int8-encoded string");
    assert_eq!(get(0, "big"), Some((b"4000000000".to_vec(), None)), "past int32: plain text");
    assert_eq!(get(0, "long"), Some((b"abcdefgh".repeat(64), None)), "LZF-compressed");
    assert_eq!(get(0, "expiring"), Some((b"soon".to_vec(), Some(4_102_444_800_000))));
    assert_eq!(get(0, "empty"), Some((Vec::new(), None)));
    assert_eq!(get(0, "other-db"), Some((b"there".to_vec(), None)));
    assert_eq!(strings.len(), 8);
    let kinds: Vec<(&[u8], &str)> = skipped.iter().map(|((_, k), v)| (k.as_slice(), *v)).collect();
    assert_eq!(
        kinds,
        [
            (&b"hash"[..], "hash"),
            (b"intset", "set"),
            (b"list", "list"),
            (b"set", "set"),
            (b"stream", "stream"),
            (b"zset", "zset"),
        ]
    );
}

/// Runs `redis-cli -p port args...`, its output trimmed.
fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .arg("-p")
        .arg(port.to_string())
        .args(args)
        .output()
        .expect("redis-cli runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn redis_server_loads_a_snapshot_shale_wrote() {
    if !shale_testkit::prerequisite::program("redis-server", "apt-get install redis-server")
        || !shale_testkit::prerequisite::program("redis-cli", "apt-get install redis-tools")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let long = b"0123456789".repeat(1000);
    let keys: Vec<(&[u8], &[u8], Option<u64>)> = vec![
        (b"alpha", b"1", None),
        (b"beta", &long, None),
        (b"gamma", b"expires", Some(4_102_444_800_000)),
        (b"bin\xff", b"\x00\x01", None),
    ];
    std::fs::write(dir.path().join("dump.rdb"), rdb::encode(keys.iter().copied())).unwrap();
    let port = 20_000 + (std::process::id() % 20_000) as u16;
    let status = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .arg("--dir")
        .arg(dir.path())
        .args(["--dbfilename", "dump.rdb", "--daemonize", "yes", "--logfile"])
        .arg(dir.path().join("log"))
        .status()
        .expect("redis-server runs (test.sh installs Debian's redis-server)");
    assert!(status.success());
    struct Stop(u16);
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = Command::new("redis-cli")
                .args(["-p", &self.0.to_string(), "shutdown", "nosave"])
                .output();
        }
    }
    let _stop = Stop(port);
    let mut up = false;
    for _ in 0..100 {
        if cli(port, &["ping"]) == "PONG" {
            up = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let log = || std::fs::read_to_string(dir.path().join("log")).unwrap_or_default();
    assert!(up, "redis-server did not start:\n{}", log());
    assert_eq!(cli(port, &["dbsize"]), "4", "{}", log());
    assert_eq!(cli(port, &["get", "alpha"]), "1");
    assert_eq!(cli(port, &["strlen", "beta"]), "10000");
    assert_eq!(cli(port, &["get", "gamma"]), "expires");
    assert_eq!(cli(port, &["pexpiretime", "gamma"]), "4102444800000");
    assert_eq!(cli(port, &["pttl", "alpha"]), "-1");
    // The binary key and value: counted above; their bytes through redis-cli's escapes.
    assert_eq!(cli(port, &["--no-raw", "keys", "bin*"]), "1) \"bin\\xff\"");
}
