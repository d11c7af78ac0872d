//! PUBLISH reaches the replicas, as in Redis: a master feeds it to its replication stream,
//! and a replica delivers it to its own subscribers (and passes it on to its replicas). A
//! shale replica and a replica of it, a real Redis 7 replica of a shale master, and a shale
//! replica of a Redis 7 master (Debian's redis-server, which test.sh installs; those tests
//! fail without it).

use std::net::TcpStream;

use common::redis_server::RedisServer;
use common::{READ_TIMEOUT, TestServer, exchange, expect, free_port, info_of, resp};
use common::{test_config, until};
use redis::Commands;

mod common;

/// A raw connection to `port` subscribed to `channel`.
fn subscriber(port: u16, channel: &str) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    let confirm = format!("*3\r\n$9\r\nsubscribe\r\n${}\r\n{channel}\r\n:1\r\n", channel.len());
    exchange(&mut s, &resp(&[b"SUBSCRIBE", channel.as_bytes()]), confirm.as_bytes());
    s
}

/// The message `payload` on `channel`, as a RESP2 subscriber receives it.
fn message(channel: &str, payload: &str) -> Vec<u8> {
    format!(
        "*3\r\n$7\r\nmessage\r\n${}\r\n{channel}\r\n${}\r\n{payload}\r\n",
        channel.len(),
        payload.len()
    )
    .into_bytes()
}

fn replica_of(port: u16) -> TestServer {
    let replica = TestServer::start_with(shale_serve::Config {
        replicaof: Some(("127.0.0.1".into(), port)),
        ..test_config()
    });
    let mut r = replica.client();
    until("the link is up", || {
        info_of(&mut r, "replication", "master_link_status").as_deref() == Some("up")
    });
    replica
}

#[test]
fn a_shale_replica_and_its_replica_deliver_what_the_master_publishes() {
    let master = TestServer::start();
    let mut m = master.client();
    let replica = replica_of(master.addr.port());
    let sub_replica = replica_of(replica.addr.port());
    let mut on_replica = subscriber(replica.addr.port(), "news");
    let mut on_sub_replica = subscriber(sub_replica.addr.port(), "news");

    // Written, then published: a subscriber that reads the key on hearing the message finds
    // the value written before it.
    let _: () = m.set("k", "v1").unwrap();
    let got: i64 = m.publish("news", "k is v1").unwrap();
    assert_eq!(got, 0, "the count is of the master's own subscribers, as in Redis");
    expect(&mut on_replica, &message("news", "k is v1"));
    let mut r = replica.client();
    let v: String = r.get("k").unwrap();
    assert_eq!(v, "v1");
    expect(&mut on_sub_replica, &message("news", "k is v1"));
    let v: String = sub_replica.client().get("k").unwrap();
    assert_eq!(v, "v1");

    // WAIT after a PUBLISH waits for it as for a write.
    let _: i64 = m.publish("news", "second").unwrap();
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(0).query(&mut m).unwrap();
    assert_eq!(acked, 1);
    expect(&mut on_replica, &message("news", "second"));
    expect(&mut on_sub_replica, &message("news", "second"));

    // A PUBLISH on a replica stays there: its stream is its master's.
    let got: i64 = r.publish("news", "local").unwrap();
    assert_eq!(got, 1);
    expect(&mut on_replica, &message("news", "local"));
    let _: i64 = m.publish("news", "third").unwrap();
    expect(&mut on_sub_replica, &message("news", "third"));
    expect(&mut on_replica, &message("news", "third"));
}

#[test]
fn a_redis_replica_of_a_shale_master_delivers_what_it_publishes() {
    let master = TestServer::start();
    let mut m = master.client();
    let replica = RedisServer::replica_of(master.addr.port());
    let mut sub = subscriber(replica.port, "news");
    let _: () = m.set("k", "v1").unwrap();
    let _: i64 = m.publish("news", "k is v1").unwrap();
    expect(&mut sub, &message("news", "k is v1"));
    assert_eq!(replica.cli(&["get", "k"]), "v1", "{}", replica.log());
}

#[test]
fn a_shale_replica_of_a_redis_master_delivers_what_it_publishes() {
    let port = free_port();
    let master = RedisServer::start(port, &["--repl-diskless-sync-delay", "0"], |_| {});
    let replica = replica_of(port);
    let mut sub = subscriber(replica.addr.port(), "news");
    assert_eq!(master.cli(&["set", "k", "v1"]), "OK");
    assert_eq!(master.cli(&["publish", "news", "from redis"]), "0");
    expect(&mut sub, &message("news", "from redis"));
    let v: String = replica.client().get("k").unwrap();
    assert_eq!(v, "v1");
}
