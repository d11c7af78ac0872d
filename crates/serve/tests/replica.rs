//! shale serve as a replica (`--replicaof`, `REPLICAOF`): of a shale master and of a real
//! Redis 7 master (Debian's redis-server, which test.sh installs; the second test fails
//! without it). The snapshot loads, the stream applies, clients' writes are refused
//! (`-READONLY`), WAIT on the master counts the replica, and `REPLICAOF NO ONE` promotes it.

use common::redis_server::RedisServer;
use common::{TestServer, info_of, test_config, until};
use redis::Commands;

mod common;

#[test]
fn a_shale_replica_of_a_shale_master_follows_refuses_writes_and_is_promoted() {
    let master = TestServer::start();
    let mut m = master.client();
    let _: () = m.set("before", "1").unwrap();
    let _: () = redis::cmd("SET")
        .arg("exp")
        .arg("x")
        .arg("PXAT")
        .arg(4_102_444_800_000u64)
        .query(&mut m)
        .unwrap();
    let replica = TestServer::start_with(shale_serve::Config {
        replicaof: Some(("127.0.0.1".into(), master.addr.port())),
        ..test_config()
    });
    let mut r = replica.client();
    until("the link is up", || {
        info_of(&mut r, "replication", "master_link_status").as_deref() == Some("up")
    });
    assert_eq!(info_of(&mut r, "replication", "role").as_deref(), Some("slave"));
    let v: String = r.get("before").unwrap();
    assert_eq!(v, "1");
    let ttl: i64 = r.pttl("exp").unwrap();
    assert!(ttl > 0, "the expiry came with the snapshot");

    // The stream applies; WAIT on the master counts the replica once it applied the write.
    let _: () = m.set("after", "2").unwrap();
    let _: i64 = m.incr("n", 5).unwrap();
    let _: () = m.mset(&[("a", "x"), ("b", "y")]).unwrap();
    let _: i64 = m.del("before").unwrap();
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(0).query(&mut m).unwrap();
    assert_eq!(acked, 1);
    let got: (Option<String>, String, String, String) = (
        r.get("before").unwrap(),
        r.get("after").unwrap(),
        r.get("n").unwrap(),
        r.get("b").unwrap(),
    );
    assert_eq!(got, (None, "2".into(), "5".into(), "y".into()));

    // Clients may read, not write.
    let refused = r.set::<_, _, ()>("mine", "1").unwrap_err();
    assert_eq!(refused.code(), Some("READONLY"), "{refused}");
    let role: redis::Value = redis::cmd("ROLE").query(&mut r).unwrap();
    assert!(format!("{role:?}").contains("slave"), "{role:?}");

    // Promoted, it takes writes and no longer follows.
    let _: () = redis::cmd("REPLICAOF").arg("NO").arg("ONE").query(&mut r).unwrap();
    let _: () = r.set("mine", "1").unwrap();
    assert_eq!(info_of(&mut r, "replication", "role").as_deref(), Some("master"));
    until("the master sees the link closed", || {
        info_of(&mut m, "replication", "connected_slaves").as_deref() == Some("0")
    });
    let _: () = m.set("after-promotion", "1").unwrap();
    let v: Option<String> = r.get("after-promotion").unwrap();
    assert_eq!(v, None);
    let v: String = r.get("after").unwrap();
    assert_eq!(v, "2", "the promoted replica keeps its data");
}

#[test]
fn a_shale_replica_of_a_redis_master_loads_its_strings_and_applies_its_stream() {
    let port = common::free_port();
    let master = RedisServer::start(port, &["--repl-diskless-sync-delay", "0"], |_| {});
    master.cli(&["set", "s", "v"]);
    master.cli(&["set", "int", "12345"]);
    master.cli(&["set", "e", "x", "pxat", "4102444800000"]);
    master.cli(&["rpush", "a-list", "1", "2"]);
    let replica = TestServer::start();
    let mut r = replica.client();
    let _: () = redis::cmd("REPLICAOF").arg("127.0.0.1").arg(port).query(&mut r).unwrap();
    until("the link is up", || {
        info_of(&mut r, "replication", "master_link_status").as_deref() == Some("up")
    });
    let got: (String, String) = (r.get("s").unwrap(), r.get("int").unwrap());
    assert_eq!(got, ("v".into(), "12345".into()));
    let ttl: i64 = r.pttl("e").unwrap();
    assert!(ttl > 0);
    let t: String = redis::cmd("TYPE").arg("a-list").query(&mut r).unwrap();
    assert_eq!(t, "none", "a list is skipped (and logged), strings only");

    // Redis's stream: SET, EXPIRE (sent as PEXPIREAT), INCR, DEL, SET EX (sent as PXAT).
    master.cli(&["set", "later", "1"]);
    master.cli(&["expire", "later", "1000"]);
    master.cli(&["incr", "int"]);
    master.cli(&["del", "s"]);
    master.cli(&["set", "ex", "y", "ex", "500"]);
    master.cli(&["lpush", "a-list", "3"]);
    master.cli(&["set", "last", "done"]);
    until("the stream arrives", || r.get::<_, Option<String>>("last").unwrap().is_some());
    let later_ttl: i64 = r.ttl("later").unwrap();
    assert!((990..=1000).contains(&later_ttl), "{later_ttl}");
    let got: (String, Option<String>, String) =
        (r.get("int").unwrap(), r.get("s").unwrap(), r.get("ex").unwrap());
    assert_eq!(got, ("12346".into(), None, "y".into()));
    let ex_ttl: i64 = r.ttl("ex").unwrap();
    assert!((490..=500).contains(&ex_ttl), "{ex_ttl}");
    // The master counts the replica's acknowledgement.
    let out = std::process::Command::new("redis-cli")
        .args(["-p", &port.to_string(), "wait", "1", "5000"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1");

    // The master drops the link: the replica comes back asking to continue from its offset,
    // and the master's backlog serves it.
    master.cli(&["client", "kill", "type", "replica"]);
    until("the replica resumes with a partial resync", || {
        info_of(&mut r, "replication", "shale_partial_resyncs").as_deref() == Some("1")
            && info_of(&mut r, "replication", "master_link_status").as_deref() == Some("up")
    });
    master.cli(&["set", "resumed", "yes"]);
    until("writes after the resync arrive", || {
        r.get::<_, Option<String>>("resumed").unwrap().as_deref() == Some("yes")
    });
    let info = master.cli(&["info", "stats"]);
    assert!(info.contains("sync_partial_ok:1"), "{info}");
    assert!(info.contains("sync_full:1"), "{info}");
    assert_eq!(info_of(&mut r, "replication", "shale_full_resyncs").as_deref(), Some("1"));
    let got: String = r.get("int").unwrap();
    assert_eq!(got, "12346", "nothing applied twice");
}

/// The replica's position is durable with its data: restarted on its store, it asks the
/// master to continue, gets a partial resync, and applies nothing twice.
#[test]
fn a_restarted_replica_resumes_with_a_partial_resync() {
    let port = common::free_port();
    let master = RedisServer::start(port, &["--repl-diskless-sync-delay", "0"], |_| {});
    master.cli(&["set", "n", "1"]);
    let config =
        shale_serve::Config { replicaof: Some(("127.0.0.1".into(), port)), ..test_config() };
    let replica = TestServer::start_with(config.clone());
    let mut r = replica.client();
    until("the link is up", || {
        info_of(&mut r, "replication", "master_link_status").as_deref() == Some("up")
    });
    master.cli(&["incr", "n"]);
    master.cli(&["ping"]);
    until("the INCR arrives", || r.get::<_, String>("n").unwrap() == "2");
    drop(r);
    let dir = replica.stop();
    master.cli(&["incr", "n"]);
    let replica = TestServer::start_in(dir, config);
    let mut r = replica.client();
    until("the link is up again", || {
        info_of(&mut r, "replication", "master_link_status").as_deref() == Some("up")
    });
    until("the INCR made while it was down arrives", || r.get::<_, String>("n").unwrap() == "3");
    assert_eq!(info_of(&mut r, "replication", "shale_partial_resyncs").as_deref(), Some("1"));
    assert_eq!(info_of(&mut r, "replication", "shale_full_resyncs").as_deref(), Some("0"));
    let info = master.cli(&["info", "stats"]);
    assert!(info.contains("sync_partial_ok:1"), "{info}");
    master.cli(&["incr", "n"]);
    until("the stream goes on", || r.get::<_, String>("n").unwrap() == "4");
}

/// Every key of `keys` reads the same on both servers.
fn same_keys(m: &mut redis::Connection, r: &mut redis::Connection, keys: &[String]) {
    for k in keys {
        let (a, b): (Option<String>, Option<String>) = (m.get(k).unwrap(), r.get(k).unwrap());
        assert_eq!(a, b, "key {k}: master and replica differ");
    }
}

/// A master restarted cleanly goes on with its replication id and offset (kept in its store
/// by the clean shutdown, as Redis 7 keeps them in its RDB file): its caught-up replica
/// continues with a partial resync. A master restarted after a crash takes a new id (the
/// kept pair was deleted when it started), and the replica resyncs in full, never
/// continuing from an offset the store may not match.
#[test]
fn a_master_restarted_cleanly_keeps_its_replicas_and_after_a_crash_resyncs_them_in_full() {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], common::free_port()));
    let master_config = shale_serve::Config { bind: Some(addr), ..test_config() };
    let master = TestServer::start_with(master_config.clone());
    let mut m = master.client();
    let replica = TestServer::start_with(shale_serve::Config {
        replicaof: Some(("127.0.0.1".into(), addr.port())),
        ..test_config()
    });
    let mut r = replica.client();
    until("the link is up", || {
        info_of(&mut r, "replication", "master_link_status").as_deref() == Some("up")
    });
    let mut keys = Vec::new();
    for i in 0..200 {
        let k = format!("k{i}");
        let _: () = m.set(&k, format!("before-{i}")).unwrap();
        keys.push(k);
    }
    let _: i64 = m.incr("n", 1).unwrap();
    keys.push("n".into());
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut m).unwrap();
    assert_eq!(acked, 1);
    let replid = info_of(&mut m, "replication", "master_replid").unwrap();
    let offset: u64 =
        info_of(&mut m, "replication", "master_repl_offset").unwrap().parse().unwrap();
    assert!(offset > 0);
    assert_eq!(info_of(&mut m, "stats", "sync_full").as_deref(), Some("1"));
    drop(m);

    // A clean restart: the same id and offset, and the replica continues.
    let master = TestServer::start_in(master.stop(), master_config.clone());
    let mut m = master.client();
    assert_eq!(info_of(&mut m, "replication", "master_replid"), Some(replid.clone()), "a new id");
    // At least the offset before the stop: a PING (every 10 s) may have been fed since.
    let restored: u64 =
        info_of(&mut m, "replication", "master_repl_offset").unwrap().parse().unwrap();
    assert!(restored >= offset, "the offset went back from {offset} to {restored}");
    until("the replica continues", || {
        info_of(&mut r, "replication", "master_link_status").as_deref() == Some("up")
            && info_of(&mut r, "replication", "shale_partial_resyncs").as_deref() == Some("1")
    });
    assert_eq!(
        info_of(&mut r, "replication", "shale_full_resyncs").as_deref(),
        Some("1"),
        "a full resync"
    );
    assert_eq!(info_of(&mut m, "stats", "sync_partial_ok").as_deref(), Some("1"));
    assert_eq!(info_of(&mut m, "stats", "sync_full").as_deref(), Some("0"));
    for (i, k) in keys.iter().take(100).enumerate() {
        let _: () = m.set(k, format!("after-restart-{i}")).unwrap();
    }
    let _: i64 = m.incr("n", 1).unwrap();
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut m).unwrap();
    assert_eq!(acked, 1);
    same_keys(&mut m, &mut r, &keys);
    let n: String = r.get("n").unwrap();
    assert_eq!(n, "2", "nothing applied twice");
    drop(m);

    // A crash: the restarted master has a new id, and the replica resyncs in full.
    let master = TestServer::start_in(master.crash(), master_config);
    let mut m = master.client();
    assert_ne!(
        info_of(&mut m, "replication", "master_replid"),
        Some(replid),
        "the id survived a crash"
    );
    until("the replica resyncs in full", || {
        info_of(&mut r, "replication", "master_link_status").as_deref() == Some("up")
            && info_of(&mut r, "replication", "shale_full_resyncs").as_deref() == Some("2")
    });
    assert_eq!(info_of(&mut r, "replication", "shale_partial_resyncs").as_deref(), Some("1"));
    assert_eq!(info_of(&mut m, "stats", "sync_partial_ok").as_deref(), Some("0"));
    assert_eq!(info_of(&mut m, "stats", "sync_full").as_deref(), Some("1"));
    let _: () = m.set("k0", "after-crash").unwrap();
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(&mut m).unwrap();
    assert_eq!(acked, 1);
    same_keys(&mut m, &mut r, &keys);
}

/// Redis's PSYNC2: a replica's stream is its master's byte for byte (the same id and
/// offset, passed on to a replica of its own), and `REPLICAOF NO ONE` keeps the master's id
/// as its second, so the old master's other replica, pointed at the promoted one (a Sentinel
/// failover, by hand), continues with a partial resync, and so does the promoted one's own
/// replica; the new master's writes reach both, once each.
#[test]
fn a_promoted_replica_lets_its_old_masters_other_replica_continue() {
    let master = TestServer::start();
    let mut m = master.client();
    let mut keys: Vec<String> = (0..100).map(|i| format!("k{i}")).collect();
    for k in &keys {
        let _: () = m.set(k, k).unwrap();
    }
    let follow = |port: u16| shale_serve::Config {
        replicaof: Some(("127.0.0.1".into(), port)),
        ..test_config()
    };
    let r1 = TestServer::start_with(follow(master.addr.port()));
    let r2 = TestServer::start_with(follow(master.addr.port()));
    let up = |c: &mut redis::Connection| {
        until("the link is up", || {
            info_of(c, "replication", "master_link_status").as_deref() == Some("up")
        });
    };
    let (mut c1, mut c2) = (r1.client(), r2.client());
    up(&mut c1);
    up(&mut c2);
    // r3 follows r1 (once r1's stream is its master's): the master's stream reaches it
    // through r1.
    let r3 = TestServer::start_with(follow(r1.addr.port()));
    let mut c3 = r3.client();
    up(&mut c3);
    let _: i64 = m.incr("n", 1).unwrap();
    let _: () = m.mset(&[("a", "1"), ("b", "2")]).unwrap();
    keys.extend(["n".to_string(), "a".to_string(), "b".to_string()]);
    let acked: i64 = redis::cmd("WAIT").arg(2).arg(5000).query(&mut m).unwrap();
    assert_eq!(acked, 2);
    let id = info_of(&mut m, "replication", "master_replid").unwrap();
    let offset = info_of(&mut m, "replication", "master_repl_offset").unwrap();
    until("the replica's stream stands at its master's offset", || {
        info_of(&mut c1, "replication", "master_repl_offset").as_ref() == Some(&offset)
    });
    assert_eq!(info_of(&mut c1, "replication", "master_replid"), Some(id.clone()));
    until("r3 has the master's offset too", || {
        info_of(&mut c3, "replication", "master_repl_offset").as_ref() == Some(&offset)
    });
    same_keys(&mut c1, &mut c3, &keys);
    drop(m);
    drop(master);

    // The failover: r1 promoted, r2 pointed at it.
    let _: () = redis::cmd("REPLICAOF").arg("NO").arg("ONE").query(&mut c1).unwrap();
    assert_ne!(info_of(&mut c1, "replication", "master_replid"), Some(id.clone()), "a new id");
    // INFO shows the old id as the second, up to one past the offset it reached, as Redis.
    assert_eq!(info_of(&mut c1, "replication", "master_replid2"), Some(id));
    let second: u64 = offset.parse::<u64>().unwrap() + 1;
    assert_eq!(info_of(&mut c1, "replication", "second_repl_offset"), Some(second.to_string()));
    let _: () =
        redis::cmd("REPLICAOF").arg("127.0.0.1").arg(r1.addr.port()).query(&mut c2).unwrap();
    until("r2 continues from r1", || {
        info_of(&mut c2, "replication", "master_link_status").as_deref() == Some("up")
            && info_of(&mut c2, "replication", "shale_partial_resyncs").as_deref() == Some("1")
    });
    // The counters are the new link's.
    assert_eq!(info_of(&mut c2, "replication", "shale_full_resyncs").as_deref(), Some("0"));
    until("r3 continues from r1 after r1's promotion dropped it", || {
        info_of(&mut c3, "replication", "master_link_status").as_deref() == Some("up")
            && info_of(&mut c3, "replication", "shale_partial_resyncs").as_deref() == Some("1")
    });
    assert_eq!(info_of(&mut c3, "replication", "shale_full_resyncs").as_deref(), Some("1"));
    assert_eq!(info_of(&mut c1, "stats", "sync_partial_ok").as_deref(), Some("2"));
    assert_eq!(info_of(&mut c1, "stats", "sync_full").as_deref(), Some("1"), "r3's first");

    // The new master's writes reach it, once each.
    let _: () = c1.set("after", "failover").unwrap();
    let _: i64 = c1.incr("n", 1).unwrap();
    keys.push("after".into());
    let acked: i64 = redis::cmd("WAIT").arg(2).arg(5000).query(&mut c1).unwrap();
    assert_eq!(acked, 2);
    for c in [&mut c2, &mut c3] {
        same_keys(&mut c1, c, &keys);
        let n: String = c.get("n").unwrap();
        assert_eq!(n, "2", "nothing applied twice");
    }
}
