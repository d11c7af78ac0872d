//! Shutdown and listeners: a shutdown while a client writes keeps every acknowledged write
//! (the store is closed and reopened); the Unix socket serves, a stale socket file is
//! replaced and any other file refused; appendfsync everysec makes one synced write a second
//! while there are writes, none when idle.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use common::{TestServer, resp, test_config};
use redis::Commands;
use shale_lsm::{Db, Options};
use shale_serve::{AppendFsync, Config, Server};

#[test]
fn a_shutdown_under_writes_keeps_every_acknowledged_write() {
    let server = TestServer::start();
    let mut s = server.raw();
    // The writer says when its first batch was acknowledged: the shutdown comes after that,
    // while it writes on, however slowly the machine runs.
    let (first_acked, writing) = std::sync::mpsc::channel();
    let writer = std::thread::spawn(move || {
        // Pipelined SETs in batches; count the replies that came back.
        let mut reader = BufReader::new(s.try_clone().unwrap());
        let mut acked = 0usize;
        'outer: for batch in 0..200 {
            let mut input = Vec::new();
            for i in 0..50 {
                let k = format!("k{:05}", batch * 50 + i);
                input.extend(resp(&[b"SET", k.as_bytes(), b"v"]));
            }
            if s.write_all(&input).is_err() {
                break;
            }
            for _ in 0..50 {
                let mut line = String::new();
                match reader.read_line(&mut line) {
                    Ok(n) if n > 0 && line == "+OK\r\n" => acked += 1,
                    _ => break 'outer,
                }
            }
            if batch == 0 {
                let _ = first_acked.send(());
            }
        }
        acked
    });
    writing.recv_timeout(Duration::from_secs(60)).expect("no batch acknowledged within a minute");
    let dir = server.stop();
    let acked = writer.join().unwrap();
    assert!(acked > 0, "some writes were acknowledged before the shutdown");
    let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
    let server = Server::start(db, test_config()).unwrap();
    let mut c = redis::Client::open(format!("redis://{}/", server.tcp_addr().unwrap()))
        .unwrap()
        .get_connection()
        .unwrap();
    for n in 0..acked {
        let v: Option<String> = c.get(format!("k{n:05}")).unwrap();
        assert_eq!(v.as_deref(), Some("v"), "acknowledged write {n} of {acked} lost");
    }
    drop(c);
    server.shutdown().unwrap();
}

#[test]
fn the_unix_socket_serves_and_replaces_only_a_stale_socket() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shale.sock");
    // A stale socket file, as a killed server leaves it.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    let config = Config { bind: None, unix_socket: Some(path.clone()), ..test_config() };
    let store = tempfile::tempdir().unwrap();
    let db = Db::open(store.path(), Options::small_for_tests()).unwrap();
    let server = Server::start(db, config.clone()).unwrap();
    assert_eq!(server.tcp_addr(), None);
    let mut s = UnixStream::connect(&path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&resp(&[b"SET", b"k", b"over unix"])).unwrap();
    s.write_all(&resp(&[b"GET", b"k"])).unwrap();
    let mut reader = BufReader::new(s);
    let mut lines = String::new();
    for _ in 0..3 {
        reader.read_line(&mut lines).unwrap();
    }
    assert_eq!(lines, "+OK\r\n$9\r\nover unix\r\n");
    // A second server on the same socket is refused: the first is listening.
    let other = tempfile::tempdir().unwrap();
    let db2 = Db::open(other.path(), Options::small_for_tests()).unwrap();
    let e = Server::start(db2, config.clone()).err().unwrap();
    assert!(e.to_string().contains("another server is listening"), "{e}");
    server.shutdown().unwrap();
    assert!(!path.exists(), "the socket file is removed at shutdown");

    std::fs::write(&path, b"not a socket").unwrap();
    let db = Db::open(store.path(), Options::small_for_tests()).unwrap();
    let e = Server::start(db, config).err().unwrap();
    assert!(e.to_string().contains("not a socket"), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), b"not a socket", "left untouched");
}

fn last_sequence(c: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("shale").query(c).unwrap();
    let line = info.lines().find(|l| l.starts_with("shale_last_sequence:")).unwrap();
    line["shale_last_sequence:".len()..].parse().unwrap()
}

#[test]
fn everysec_syncs_once_a_second_while_written() {
    let server =
        TestServer::start_with(Config { appendfsync: AppendFsync::Everysec, ..test_config() });
    let mut c = server.client();
    // The store's marker, written when the server started, took the first sequence number.
    let start = last_sequence(&mut c);
    assert_eq!(start, 1);
    let _: () = c.set("a", "1").unwrap();
    // start + 2 already if the first second's sync came between the SET and this INFO.
    assert!((start + 1..=start + 2).contains(&last_sequence(&mut c)));
    // Within about a second, one synced write (a delete of the server's own key) follows.
    let deadline = Instant::now() + Duration::from_secs(5);
    while last_sequence(&mut c) < start + 2 {
        assert!(Instant::now() < deadline, "no sync within 5 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Idle: no more syncs.
    std::thread::sleep(Duration::from_millis(2200));
    assert_eq!(last_sequence(&mut c), start + 2);
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut c).unwrap();
    assert_eq!(keys, ["a"], "the sync key is not a client's key");
}

#[test]
fn bad_settings_are_refused_by_name() {
    for (config, needle) in [
        (Config { max_clients: 0, ..test_config() }, "--maxclients 0 is not in"),
        (Config { threads: 0, ..test_config() }, "--threads 0"),
        (Config { max_request_bytes: 10, ..test_config() }, "--proto-max-bulk-len 10"),
        (Config { bind: None, ..test_config() }, "nothing to listen on"),
        (Config { password: Some(String::new()), ..test_config() }, "empty password"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
        let e = Server::start(db, config).err().unwrap();
        assert!(e.to_string().contains(needle), "{e}");
    }
}
