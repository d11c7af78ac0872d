//! Redis's RDB snapshot format against the real thing (issue #46's replication speaks it): a
//! snapshot written by Redis 7 (`fixtures/redis7.rdb`, made by `fixtures/make_redis7_rdb.sh`)
//! reads back with every string key in every encoding Redis chose and every other key
//! reported by type; and a snapshot shale writes is loaded by a real `redis-server` (Debian's
//! 7.0, which test.sh installs), its keys and expiries read back with redis-cli. Without
//! `redis-server` the second test fails under test.sh (`SHALE_REQUIRE_PREREQS=1`), and run by
//! hand says it skipped.

use std::collections::BTreeMap;
use std::path::Path;

use common::redis_server::RedisServer;
use shale_serve::rdb::{self, Item};

mod common;

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

#[test]
fn redis_server_loads_a_snapshot_shale_wrote() {
    if !shale_testkit::prerequisite::program("redis-server", "apt-get install redis-server")
        || !shale_testkit::prerequisite::program("redis-cli", "apt-get install redis-tools")
    {
        return;
    }
    let long = b"0123456789".repeat(1000);
    let keys: Vec<(&[u8], &[u8], Option<u64>)> = vec![
        (b"alpha", b"1", None),
        (b"beta", &long, None),
        (b"gamma", b"expires", Some(4_102_444_800_000)),
        (b"bin\xff", b"\x00\x01", None),
    ];
    let port = 20_000 + (std::process::id() % 20_000) as u16;
    let redis = RedisServer::start(port, &["--dbfilename", "dump.rdb"], |dir| {
        std::fs::write(dir.join("dump.rdb"), rdb::encode(keys.iter().copied())).unwrap();
    });
    let cli = |args: &[&str]| redis.cli(args);
    assert_eq!(cli(&["dbsize"]), "4", "{}", redis.log());
    assert_eq!(cli(&["get", "alpha"]), "1");
    assert_eq!(cli(&["strlen", "beta"]), "10000");
    assert_eq!(cli(&["get", "gamma"]), "expires");
    assert_eq!(cli(&["pexpiretime", "gamma"]), "4102444800000");
    assert_eq!(cli(&["pttl", "alpha"]), "-1");
    // The binary key and value: counted above; their bytes through redis-cli's escapes.
    assert_eq!(cli(&["--no-raw", "keys", "bin*"]), "1) \"bin\\xff\"");
}
