//! The group commit of `appendfsync always` (commit.rs): runs let their stripes go before
//! their batches are written, so the next run on a key reads the queued value.
//!
//! - Concurrent pipelines of INCR, APPEND, GETSET and MSET on keys every client shares and on
//!   keys of its own give exact results: no update lost or applied twice, each client's own
//!   counter and log answering in order, a GETSET chain handing every value on exactly once,
//!   MSET's keys written together. Under `always` and, for comparison, `everysec`.
//! - A read of a value whose batch is queued but not written is not answered before that
//!   write: the test hook holds the write, and the reader gets nothing until it returns.

mod common;

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};

use common::{READ_TIMEOUT, TestServer, expect, held_writes, read_line, resp, test_config};
use redis::Commands;
use shale_serve::keyspace::WriteEvent;
use shale_serve::{AppendFsync, Config};

const CLIENTS: usize = 6;
const PIPELINES: usize = 20;
const DEPTH: usize = 16;

/// Reads one bulk reply: its data, or `None` for nil.
fn read_bulk(s: &mut std::net::TcpStream) -> Option<String> {
    let head = read_line(s);
    if head == "$-1\r\n" {
        return None;
    }
    let len: usize = head.trim_start_matches('$').trim_end().parse().expect(&head);
    let mut data = vec![0u8; len + 2];
    s.read_exact(&mut data).unwrap();
    data.truncate(len);
    Some(String::from_utf8(data).unwrap())
}

fn integer(line: &str) -> i64 {
    assert!(line.starts_with(':'), "{line:?}");
    line[1..].trim_end().parse().unwrap()
}

/// What one client saw: the old values its GETSETs were answered.
fn client(server: &TestServer, t: usize) -> Vec<Option<String>> {
    let mut s = server.raw();
    let own = format!("own{t}");
    let mut own_count = 0;
    let mut own_len = 0;
    let mut batons = Vec::new();
    for p in 0..PIPELINES {
        let mut input = Vec::new();
        for i in 0..DEPTH {
            let baton = format!("{t}:{p}:{i}");
            input.extend(resp(&[b"INCR", own.as_bytes()]));
            input.extend(resp(&[b"INCR", b"shared"]));
            input.extend(resp(&[b"APPEND", b"log", t.to_string().as_bytes()]));
            input.extend(resp(&[b"APPEND", b"ownlog", own.as_bytes()]));
            input.extend(resp(&[b"GETSET", b"baton", baton.as_bytes()]));
            input.extend(resp(&[b"MSET", b"pa", baton.as_bytes(), b"pb", baton.as_bytes()]));
            // The client's own log: a key of its own, so its length is exact here.
            input.extend(resp(&[b"APPEND", format!("log{t}").as_bytes(), b"ab"]));
        }
        s.write_all(&input).unwrap();
        for _ in 0..DEPTH {
            own_count += 1;
            assert_eq!(integer(&read_line(&mut s)), own_count, "client {t}'s own counter");
            assert!(integer(&read_line(&mut s)) >= 1);
            assert!(integer(&read_line(&mut s)) >= 1);
            assert!(integer(&read_line(&mut s)) >= own.len() as i64);
            batons.push(read_bulk(&mut s));
            assert_eq!(read_line(&mut s), "+OK\r\n");
            own_len += 2;
            assert_eq!(integer(&read_line(&mut s)), own_len, "client {t}'s own log");
        }
    }
    batons
}

fn exact_under(appendfsync: AppendFsync) {
    let server = TestServer::start_with(Config { appendfsync, threads: 2, ..test_config() });
    let olds: Vec<Vec<Option<String>>> = std::thread::scope(|scope| {
        let server = &server;
        let handles: Vec<_> =
            (0..CLIENTS).map(|t| scope.spawn(move || client(server, t))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut c = server.client();
    let get = |c: &mut redis::Connection, k: &str| -> Option<String> {
        redis::cmd("GET").arg(k).query(c).unwrap()
    };
    let per_client = PIPELINES * DEPTH;
    let total = CLIENTS * per_client;
    assert_eq!(get(&mut c, "shared"), Some(total.to_string()), "{appendfsync:?}");
    for t in 0..CLIENTS {
        assert_eq!(get(&mut c, &format!("own{t}")), Some(per_client.to_string()));
        assert_eq!(get(&mut c, &format!("log{t}")), Some("ab".repeat(per_client)));
    }
    // Every client's marker appended exactly once per command.
    let log = get(&mut c, "log").unwrap();
    assert_eq!(log.len(), total);
    for t in 0..CLIENTS {
        let mark = t.to_string().chars().next().unwrap();
        assert_eq!(log.chars().filter(|&ch| ch == mark).count(), per_client, "client {t}");
    }
    let ownlog = get(&mut c, "ownlog").unwrap();
    assert_eq!(ownlog.len(), (0..CLIENTS).map(|t| format!("own{t}").len() * per_client).sum());
    // The GETSET chain: every value set is handed on exactly once (as an old value, or as
    // the last value), and nil exactly once (the first GETSET).
    let mut seen: HashMap<Option<String>, usize> = HashMap::new();
    for old in olds.into_iter().flatten() {
        *seen.entry(old).or_default() += 1;
    }
    *seen.entry(get(&mut c, "baton")).or_default() += 1;
    assert_eq!(seen.remove(&None), Some(1), "one GETSET found no baton");
    assert_eq!(seen.len(), total, "every baton handed on");
    assert!(seen.values().all(|&n| n == 1), "no baton handed on twice");
    // MSET's two keys were written together by every MSET: the last one wrote both.
    assert_eq!(get(&mut c, "pa"), get(&mut c, "pb"));
    // Everything answered is durable (and under `always` synced): it survives a restart.
    let shared = get(&mut c, "shared");
    drop(c);
    let dir = server.stop();
    let server = TestServer::start_in(dir, Config { appendfsync, ..test_config() });
    let mut c = server.client();
    assert_eq!(get(&mut c, "shared"), shared);
    assert_eq!(get(&mut c, "log").map(|l| l.len()), Some(total));
}

#[test]
fn concurrent_read_modify_write_pipelines_are_exact_under_always() {
    exact_under(AppendFsync::Always);
}

#[test]
fn concurrent_read_modify_write_pipelines_are_exact_under_everysec() {
    exact_under(AppendFsync::Everysec);
}

/// `total_commands_processed` from INFO.
fn commands_processed(s: &mut std::net::TcpStream) -> u64 {
    s.write_all(&resp(&[b"INFO", b"stats"])).unwrap();
    let info = read_bulk(s).unwrap();
    let line = info.lines().find(|l| l.starts_with("total_commands_processed:")).unwrap();
    line["total_commands_processed:".len()..].parse().unwrap()
}

#[test]
fn a_read_of_a_queued_value_waits_for_its_write() {
    let (config, events, release) = held_writes();
    let server = TestServer::start_with(config);
    // Declared after the server, so dropped before it: a failing test lets the held write go
    // before the server shuts down.
    let release = release;
    let mut info = server.raw();
    let mut writer = server.raw();
    writer.write_all(&resp(&[b"SET", b"k", b"queued"])).unwrap();
    assert_eq!(events.recv_timeout(READ_TIMEOUT), Ok(WriteEvent::Before(1)), "SET's write");
    // The SET's batch is queued and held; its stripe is free. A reader gets the queued value,
    // but only once it is written.
    let before = commands_processed(&mut info);
    let mut reader = server.raw();
    reader.write_all(&resp(&[b"GET", b"k"])).unwrap();
    // Wait until the server has run the GET: each INFO counts the INFOs before it too.
    let mut infos = 1;
    while commands_processed(&mut info) <= before + infos {
        infos += 1;
    }
    reader.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 64];
    match reader.read(&mut buf) {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!(
            "a read was answered before the write of what it read: {other:?} {:?}",
            String::from_utf8_lossy(&buf)
        ),
    }
    reader.set_nonblocking(false).unwrap();
    release.send(()).unwrap();
    expect(&mut writer, b"+OK\r\n");
    expect(&mut reader, b"$6\r\nqueued\r\n");
    assert_eq!(events.recv_timeout(READ_TIMEOUT), Ok(WriteEvent::After(1)));
    assert!(events.try_recv().is_err(), "the GET wrote nothing");
}

fn info_field(c: &mut redis::Connection, name: &str) -> Option<String> {
    let info: String = redis::cmd("INFO").arg("replication").query(c).unwrap();
    info.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{name}:")).map(|v| v.trim().to_string()))
}

/// The group commit writes and feeds batches in queue order, which for two batches on one key
/// is the order their runs held its lock: a replica (itself under `always`, so its applying
/// run goes through its own group commit) ends with exactly the master's keys and values
/// after concurrent pipelines of read-modify-writes on shared keys.
#[test]
fn a_replica_follows_group_committed_pipelines_in_the_store_s_order() {
    let always = || Config { appendfsync: AppendFsync::Always, threads: 4, ..test_config() };
    let master = TestServer::start_with(always());
    let replica = TestServer::start_with(Config {
        replicaof: Some(("127.0.0.1".into(), master.addr.port())),
        ..always()
    });
    let mut r = replica.client();
    for _ in 0..2000 {
        if info_field(&mut r, "master_link_status").as_deref() == Some("up") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(info_field(&mut r, "master_link_status").as_deref(), Some("up"));
    std::thread::scope(|scope| {
        for w in 0..4u64 {
            let master = &master;
            scope.spawn(move || {
                let mut c = master.client();
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (w + 1);
                for _ in 0..40 {
                    let mut p = redis::pipe();
                    for _ in 0..16 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let k = format!("key{}", x % 24);
                        match x % 6 {
                            0 => p.cmd("DEL").arg(&k).ignore(),
                            1 => p.cmd("MSET").arg(&k).arg(x).arg(format!("key{}", x % 5)).arg(w),
                            2 => p.cmd("GETSET").arg(&k).arg(w),
                            3 => p.cmd("APPEND").arg(&k).arg(w),
                            _ => p.cmd("INCR").arg(format!("n{}", x % 3)),
                        };
                    }
                    // Errors (INCR of a key holding text) are replies too; the pipeline goes on.
                    let _: Vec<redis::Value> = p.query(&mut c).unwrap();
                }
                // This connection's writes are applied on the replica once WAIT counts it.
                let acked: i64 = redis::cmd("WAIT").arg(1).arg(0).query(&mut c).unwrap();
                assert_eq!(acked, 1);
            });
        }
    });
    let mut c = master.client();
    let mut keys: Vec<String> = c.keys("*").unwrap();
    keys.sort();
    let mut replica_keys: Vec<String> = r.keys("*").unwrap();
    replica_keys.sort();
    assert_eq!(keys, replica_keys);
    for k in &keys {
        let v: Option<String> = c.get(k).unwrap();
        let rv: Option<String> = r.get(k).unwrap();
        assert_eq!(v, rv, "key {k}");
    }
}
