//! shale serve as a master of a real Redis 7 replica (Debian's redis-server, which test.sh
//! installs; these tests fail without it): a full resync whose snapshot holds the master's
//! keys and expiries, the stream of later writes, expired keys deleted on the replica by the
//! master's DEL, a dropped link resumed with a partial resync, WAIT counting the replica's
//! acknowledgements, and malformed replication requests refused without harm.

use std::io::{Read, Write};
use std::time::Duration;

use common::redis_server::RedisServer;
use common::{TestServer, info_field, read_line, until};
use redis::Commands;

mod common;

fn master_info(c: &mut redis::Connection) -> String {
    redis::cmd("INFO").query(c).unwrap()
}

#[test]
fn a_redis_replica_gets_the_snapshot_then_the_stream() {
    let master = TestServer::start();
    let mut c = master.client();
    let _: () = c.set("before", "snapshot").unwrap();
    let _: () = redis::cmd("SET")
        .arg("expiring")
        .arg("x")
        .arg("PXAT")
        .arg(4_102_444_800_000u64)
        .query(&mut c)
        .unwrap();
    for i in 0..500 {
        let _: () = c.set(format!("k{i}"), i).unwrap();
    }
    // No stream before a replica asks: the offset stays 0.
    assert_eq!(info_field(&master_info(&mut c), "master_repl_offset").as_deref(), Some("0"));
    let no_replica: i64 = redis::cmd("WAIT").arg(1).arg(100).query(&mut c).unwrap();
    assert_eq!(no_replica, 0);

    let replica = RedisServer::replica_of(master.addr.port());
    assert_eq!(replica.cli(&["get", "before"]), "snapshot", "{}", replica.log());
    assert_eq!(replica.cli(&["pexpiretime", "expiring"]), "4102444800000");
    assert_eq!(replica.cli(&["dbsize"]), "502");
    assert_eq!(replica.cli(&["get", "k499"]), "499");

    // Later writes arrive, in order, as their effects.
    let _: () = c.set("after", "one").unwrap();
    let _: i64 = c.incr("k1", 10).unwrap();
    let _: i64 = c.del("before").unwrap();
    let _: () = c.mset(&[("m1", "a"), ("m2", "b")]).unwrap();
    let _: bool = c.expire("m1", 1000).unwrap();
    let _: () = c.append("after", "+two").unwrap();
    until("the stream's writes reach the replica", || replica.cli(&["get", "after"]) == "one+two");
    assert_eq!(replica.cli(&["get", "k1"]), "11");
    assert_eq!(replica.cli(&["exists", "before"]), "0");
    assert_eq!(replica.cli(&["get", "m2"]), "b");
    let replica_expiry: u64 = replica.cli(&["pexpiretime", "m1"]).parse().unwrap();
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
            as u64;
    assert!(
        (now + 900_000..=now + 1_000_000).contains(&replica_expiry),
        "EXPIRE 1000 reached the replica as an absolute time: {replica_expiry} at {now}"
    );

    // The master's view: one replica online, a full resync served, WAIT counts it.
    let info = master_info(&mut c);
    assert_eq!(info_field(&info, "role").as_deref(), Some("master"));
    assert_eq!(info_field(&info, "connected_slaves").as_deref(), Some("1"));
    assert_eq!(info_field(&info, "sync_full").as_deref(), Some("1"));
    assert_eq!(info_field(&info, "repl_backlog_active").as_deref(), Some("1"));
    let slave0 = info_field(&info, "slave0").unwrap();
    assert!(slave0.contains(&format!("port={}", replica.port)), "{slave0}");
    assert!(slave0.contains("state=online"), "{slave0}");
    let _: () = c.set("waited", "1").unwrap();
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(0).query(&mut c).unwrap();
    assert_eq!(acked, 1, "WAIT counts the replica that acknowledged the write");
    assert_eq!(replica.cli(&["get", "waited"]), "1", "acknowledged means applied");
    // Asking for more replicas than there are times out with the count.
    let acked: i64 = redis::cmd("WAIT").arg(2).arg(200).query(&mut c).unwrap();
    assert_eq!(acked, 1);
    let role: redis::Value = redis::cmd("ROLE").query(&mut c).unwrap();
    let text = format!("{role:?}");
    assert!(text.contains("master") && text.contains(&replica.port.to_string()), "{text}");
    // The replica's offset reaches the master's.
    until("the replica's offset reaches the master's", || {
        let m = info_field(&master_info(&mut c), "master_repl_offset").unwrap();
        info_field(&replica.cli(&["info", "replication"]), "slave_repl_offset") == Some(m)
    });
}

#[test]
fn an_expired_key_is_deleted_on_the_replica_by_the_master() {
    // With synced writes, whose batches are fed once their tickets complete.
    let master = TestServer::start_with(shale_serve::Config {
        appendfsync: shale_serve::AppendFsync::Always,
        ..common::test_config()
    });
    let mut c = master.client();
    let replica = RedisServer::replica_of(master.addr.port());
    // Long enough that the master's active expiry leaves it until the checks below.
    let _: () = redis::cmd("SET").arg("short").arg("v").arg("PX").arg(1500).query(&mut c).unwrap();
    let _: () = c.set("marker", "1").unwrap();
    until("the writes reach the replica", || replica.cli(&["get", "marker"]) == "1");
    // The replica holds the key, with the master's absolute expiry, until the master says.
    assert_eq!(replica.cli(&["dbsize"]), "2");
    let at: i64 = replica.cli(&["pexpiretime", "short"]).parse().unwrap();
    assert!(at > 0);
    until("the key expires on the master", || {
        let v: Option<String> = c.get("short").unwrap();
        v.is_none()
    });
    // The master's read found it expired and deleted it: a DEL in the stream.
    until("the replica drops the expired key", || replica.cli(&["dbsize"]) == "1");
}

/// Keys that expire on the master and are never read again: its active expiry finds them
/// and sends a DEL for each, so that a Redis replica, which never expires keys itself (its
/// reads answer nil, but it keeps them), drops them.
#[test]
fn keys_expired_on_the_master_and_never_read_are_deleted_on_the_replica() {
    let master = TestServer::start();
    let mut c = master.client();
    let replica = RedisServer::replica_of(master.addr.port());
    for i in 0..50 {
        let _: () = redis::cmd("SET")
            .arg(format!("short{i}"))
            .arg("v")
            .arg("PX")
            .arg(200)
            .query(&mut c)
            .unwrap();
    }
    let _: () = c.set("kept", "1").unwrap();
    until("the writes reach the replica", || replica.cli(&["get", "kept"]) == "1");
    until("the replica drops every expired key", || replica.cli(&["dbsize"]) == "1");
    assert_eq!(replica.cli(&["get", "kept"]), "1");
    assert_eq!(info_field(&master_info(&mut c), "expired_keys").as_deref(), Some("50"));
}

/// A master restarted cleanly (the same port, the same store) keeps its replication id and
/// offset: its Redis replica, which had every byte, continues with a partial resync.
#[test]
fn a_redis_replica_continues_after_its_master_restarted_cleanly() {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], common::free_port()));
    let master =
        TestServer::start_with(shale_serve::Config { bind: Some(addr), ..common::test_config() });
    let mut c = master.client();
    let replica = RedisServer::replica_of(master.addr.port());
    let _: () = c.set("a", "1").unwrap();
    let _: i64 = c.incr("n", 1).unwrap();
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut c).unwrap();
    assert_eq!(acked, 1);
    drop(c);
    let master = TestServer::start_in(
        master.stop(),
        shale_serve::Config { bind: Some(addr), ..common::test_config() },
    );
    let mut c = master.client();
    until("the replica continues", || {
        info_field(&master_info(&mut c), "sync_partial_ok").as_deref() == Some("1")
    });
    let _: i64 = c.incr("n", 1).unwrap();
    until("the INCR reaches the replica", || replica.cli(&["get", "n"]) == "2");
    assert_eq!(info_field(&master_info(&mut c), "sync_full").as_deref(), Some("0"));
    assert!(replica.log().contains("Successful partial resynchronization"), "{}", replica.log());
}

/// PSYNC2 with Redis: a Redis replica of a shale master, whose shale replica is promoted
/// when the master stops, continues from the promoted one with a partial resync, so the
/// promoted one's stream has the master's bytes at the master's offsets, as Redis counts them.
#[test]
fn a_redis_replica_continues_from_a_promoted_shale_replica() {
    let master = TestServer::start();
    let mut c = master.client();
    let _: () = c.set("a", "1").unwrap();
    let promoted = TestServer::start_with(shale_serve::Config {
        replicaof: Some(("127.0.0.1".into(), master.addr.port())),
        ..common::test_config()
    });
    let mut p = promoted.client();
    until("the shale replica's link is up", || {
        info_field(&master_info(&mut p), "master_link_status").as_deref() == Some("up")
    });
    let replica = RedisServer::replica_of(master.addr.port());
    for i in 0..100 {
        let _: i64 = c.incr("n", 1).unwrap();
        let _: () = c.set(format!("k{i}"), i).unwrap();
    }
    let acked: i64 = redis::cmd("WAIT").arg(2).arg(5000).query(&mut c).unwrap();
    assert_eq!(acked, 2);
    drop(c);
    drop(master);

    let _: () = redis::cmd("REPLICAOF").arg("NO").arg("ONE").query(&mut p).unwrap();
    replica.cli(&["replicaof", "127.0.0.1", &promoted.addr.port().to_string()]);
    until("the Redis replica continues from the promoted one", || {
        info_field(&master_info(&mut p), "sync_partial_ok").as_deref() == Some("1")
    });
    let _: i64 = p.incr("n", 1).unwrap();
    until("the INCR reaches the Redis replica", || replica.cli(&["get", "n"]) == "101");
    assert_eq!(info_field(&master_info(&mut p), "sync_full").as_deref(), Some("0"));
    assert_eq!(replica.cli(&["get", "k99"]), "99");
    assert!(replica.log().contains("Successful partial resynchronization"), "{}", replica.log());
}

#[test]
fn a_dropped_link_resumes_with_a_partial_resync() {
    let master = TestServer::start();
    let mut c = master.client();
    let _: () = c.set("a", "1").unwrap();
    let replica = RedisServer::replica_of(master.addr.port());
    let _: () = c.set("b", "2").unwrap();
    until("b reaches the replica", || replica.cli(&["get", "b"]) == "2");
    // The replica drops its link to the master; it reconnects and asks to continue.
    replica.cli(&["client", "kill", "type", "master"]);
    let _: () = c.set("c", "3").unwrap();
    until("the replica resumes with a partial resync", || {
        info_field(&master_info(&mut c), "sync_partial_ok").as_deref() == Some("1")
    });
    until("c reaches the replica", || replica.cli(&["get", "c"]) == "3");
    let _: () = c.set("d", "4").unwrap();
    until("d reaches the replica", || replica.cli(&["get", "d"]) == "4");
    let info = master_info(&mut c);
    assert_eq!(info_field(&info, "sync_full").as_deref(), Some("1"), "no second full resync");
    assert_eq!(info_field(&info, "sync_partial_err").as_deref(), Some("0"));
    assert!(replica.log().contains("Successful partial resynchronization"), "{}", replica.log());
    // Shutdown with a replica attached: its link ends, the store closes.
    master.stop();
}

#[test]
fn a_replica_behind_the_backlog_gets_a_full_resync() {
    let mut config = common::test_config();
    config.repl_backlog_size = 16 << 10;
    let master = TestServer::start_with(config);
    let mut c = master.client();
    let replica = RedisServer::replica_of(master.addr.port());
    // A PSYNC from an offset the backlog no longer holds (a raw replica that asks for the
    // stream's first byte after more than the backlog was written) is served in full.
    let big = "x".repeat(1000);
    for i in 0..40 {
        let _: () = c.set(format!("big{i}"), &big).unwrap();
    }
    until("the writes reach the replica", || replica.cli(&["exists", "big39"]) == "1");
    let replid = info_field(&master_info(&mut c), "master_replid").unwrap();
    let mut raw = master.raw();
    raw.write_all(format!("PSYNC {replid} 1\r\n").as_bytes()).unwrap();
    let mut line = read_line(&mut raw);
    assert!(line.starts_with("+FULLRESYNC "), "{line}");
    assert!(line.contains(&replid));
    line.clear();
    let info = master_info(&mut c);
    assert_eq!(info_field(&info, "sync_partial_err").as_deref(), Some("1"));
    assert_eq!(info_field(&info, "sync_full").as_deref(), Some("2"));
}

#[test]
fn malformed_replication_requests_are_refused_without_harm() {
    let master = TestServer::start();
    let mut raw = master.raw();
    let cases: &[(&str, &str)] = &[
        ("REPLCONF listening-port abc\r\n", "-ERR value is not an integer or out of range"),
        ("REPLCONF listening-port 70000\r\n", "-ERR Invalid port"),
        ("REPLCONF listening-port\r\n", "-ERR syntax error"),
        ("REPLCONF nonsense 1\r\n", "-ERR Unrecognized REPLCONF option: nonsense"),
        ("PSYNC ? notanumber\r\n", "-ERR value is not an integer or out of range"),
        ("PSYNC ?\r\n", "-ERR wrong number of arguments for 'psync' command"),
        ("SYNC now\r\n", "-ERR wrong number of arguments for 'sync' command"),
        ("WAIT 1 -5\r\n", "-ERR timeout is negative"),
        ("WAIT x 5\r\n", "-ERR value is not an integer or out of range"),
        ("REPLCONF listening-port 7000 capa eof capa psync2\r\n", "+OK"),
        // Acknowledgements from a connection that is no replica: not answered, as in Redis.
        ("REPLCONF ACK 5\r\nPING\r\n", "+PONG"),
    ];
    for (request, want) in cases {
        raw.write_all(request.as_bytes()).unwrap();
        assert_eq!(read_line(&mut raw).trim_end(), *want, "{request:?}");
    }
    let mut c = master.client();
    let info = master_info(&mut c);
    assert_eq!(info_field(&info, "connected_slaves").as_deref(), Some("0"));
    assert_eq!(info_field(&info, "master_repl_offset").as_deref(), Some("0"));

    // A replica link that sends garbage after its sync is dropped; the server goes on.
    raw.write_all(b"PSYNC ? -1\r\n").unwrap();
    let line = read_line(&mut raw);
    assert!(line.starts_with("+FULLRESYNC "), "{line}");
    until("the replica is listed", || {
        info_field(&master_info(&mut c), "connected_slaves").as_deref() == Some("1")
    });
    raw.write_all(b"*x\r\n").unwrap();
    until("the bad link is dropped", || {
        info_field(&master_info(&mut c), "connected_slaves").as_deref() == Some("0")
    });
    let _: () = c.set("still", "serving").unwrap();
    let v: String = c.get("still").unwrap();
    assert_eq!(v, "serving");
}

/// Writers on several connections pipeline INCRs, MSETs and DELs over a few shared keys
/// while a replica attaches (its snapshot taken mid-load) and after: once they stop and WAIT
/// says the replica has everything, it holds exactly the master's keys and values. A stream
/// out of the store's order, or a snapshot that missed a write before its offset, leaves a
/// key different.
#[test]
fn concurrent_pipelines_replicate_in_the_store_s_order() {
    // Several worker threads: the connections' writes really run at once.
    let master =
        TestServer::start_with(shale_serve::Config { threads: 4, ..common::test_config() });
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..4u64)
        .map(|w| {
            let mut c = master.client();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (w + 1);
                let mut rounds = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) || rounds < 20 {
                    let mut p = redis::pipe();
                    // A key written once: a write the replica missed is never overwritten.
                    p.cmd("SET").arg(format!("once{w}:{rounds}")).arg(rounds).ignore();
                    for _ in 0..16 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let k = format!("key{}", x % 40);
                        match x % 5 {
                            0 => p.cmd("DEL").arg(&k).ignore(),
                            1 => p
                                .cmd("MSET")
                                .arg(&k)
                                .arg(x)
                                .arg(format!("key{}", x % 7))
                                .arg(w)
                                .ignore(),
                            2 => p.cmd("SET").arg(&k).arg(x).arg("PX").arg(3_600_000).ignore(),
                            _ => p.cmd("APPEND").arg(&k).arg(w).ignore(),
                        };
                    }
                    let _: () = p.query(&mut c).unwrap();
                    rounds += 1;
                }
                rounds
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let replica = RedisServer::replica_of(master.addr.port());
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in writers {
        assert!(w.join().unwrap() >= 20);
    }
    let mut c = master.client();
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(0).query(&mut c).unwrap();
    assert_eq!(acked, 1);
    let mut keys: Vec<String> = c.keys("*").unwrap();
    keys.sort();
    let mut replica_keys: Vec<String> =
        replica.cli(&["keys", "*"]).lines().map(str::to_string).filter(|k| !k.is_empty()).collect();
    replica_keys.sort();
    let missing: Vec<&String> = keys.iter().filter(|k| !replica_keys.contains(k)).collect();
    let extra: Vec<&String> = replica_keys.iter().filter(|k| !keys.contains(k)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "of {} keys the replica misses {missing:?} and has {extra:?} more",
        keys.len()
    );
    for k in &keys {
        let v: String = c.get(k).unwrap();
        assert_eq!(replica.cli(&["get", k]), v, "key {k}");
    }
}

#[test]
fn min_replicas_to_write_refuses_writes_without_a_good_replica() {
    let master = TestServer::start_with(shale_serve::Config {
        min_replicas_to_write: 1,
        ..common::test_config()
    });
    let mut c = master.client();
    let refused = c.set::<_, _, ()>("k", "v").unwrap_err();
    assert_eq!(refused.code(), Some("NOREPLICAS"), "{refused}");
    let got: Option<String> = c.get("k").unwrap();
    assert_eq!(got, None, "reads go on, the refused write did not happen");
    let replica = RedisServer::replica_of(master.addr.port());
    until("a write is accepted with a replica online", || c.set::<_, _, ()>("k", "v").is_ok());
    until("the write reaches the replica", || replica.cli(&["get", "k"]) == "v");
    drop(replica);
    until("writes are refused once the replica is gone", || {
        c.set::<_, _, ()>("k", "w").is_err_and(|e| e.code() == Some("NOREPLICAS"))
    });
}

/// A replica that drops its link in the middle of the snapshot leaves the master as it was:
/// the link is gone from INFO, clients are served, and the next replica gets everything.
#[test]
fn a_link_dropped_mid_snapshot_does_no_harm() {
    let master = TestServer::start();
    let mut c = master.client();
    let value = "v".repeat(1024);
    for chunk in 0..8 {
        let mut p = redis::pipe();
        for i in 0..500 {
            p.cmd("SET").arg(format!("k{chunk}:{i}")).arg(&value).ignore();
        }
        let _: () = p.query(&mut c).unwrap();
    }
    let mut raw = master.raw();
    raw.write_all(b"REPLCONF capa eof\r\nPSYNC ? -1\r\n").unwrap();
    assert_eq!(read_line(&mut raw), "+OK\r\n");
    assert!(read_line(&mut raw).starts_with("+FULLRESYNC "));
    let mut some = [0u8; 4096];
    raw.read_exact(&mut some).unwrap();
    drop(raw);
    until("the dropped link is gone", || {
        info_field(&master_info(&mut c), "connected_slaves").as_deref() == Some("0")
    });
    let _: () = c.set("after", "drop").unwrap();
    let replica = RedisServer::replica_of(master.addr.port());
    assert_eq!(replica.cli(&["dbsize"]), "4001");
    assert_eq!(replica.cli(&["get", "after"]), "drop");
    assert_eq!(replica.cli(&["strlen", "k7:499"]), "1024");
}
