//! `shale serve`'s replication flags on the real binary: `--replicaof HOST PORT` makes a
//! replica of another `shale serve` (writes on the master arrive, its own are refused,
//! both stop cleanly on SIGTERM), and bad values of the replication flags are refused by name.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::shale;

fn request(s: &mut TcpStream, args: &[&str]) -> String {
    let mut out = format!("*{}\r\n", args.len());
    for a in args {
        out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s.write_all(out.as_bytes()).unwrap();
    let mut buf = vec![0u8; 64 << 10];
    let n = s.read(&mut buf).unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// A server this test started: its stdout kept open (it prints its last line at shutdown),
/// killed if the test fails before stopping it.
struct Served {
    child: Option<Child>,
    _stdout: BufReader<std::process::ChildStdout>,
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn stop(mut served: Served) {
    let mut child = served.child.take().unwrap();
    // SAFETY: kill sends SIGTERM to a child this test started.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) }, 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "no exit within 60 s of SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Starts a server on `port` and waits for its start lines.
fn start(db: &std::path::Path, port: u16, extra: &[&str]) -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_shale"))
        .args(["serve", "--db"])
        .arg(db)
        .args(["--port", &port.to_string()])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut lines = Vec::new();
    while !lines.last().is_some_and(|l: &String| l.contains("maxclients")) {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "ended early: {lines:?}");
        lines.push(line);
    }
    Served { child: Some(child), _stdout: out }
}

#[test]
fn replicaof_follows_a_master_and_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (pm, pr) = (free_port(), free_port());
    let master = start(&dir.path().join("m"), pm, &[]);
    let mut m = TcpStream::connect(("127.0.0.1", pm)).unwrap();
    m.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    assert_eq!(request(&mut m, &["SET", "before", "1"]), "+OK\r\n");
    let replica = start(&dir.path().join("r"), pr, &["--replicaof", "127.0.0.1", &pm.to_string()]);
    let mut r = TcpStream::connect(("127.0.0.1", pr)).unwrap();
    r.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut up = false;
    for _ in 0..400 {
        if request(&mut r, &["INFO", "replication"]).contains("master_link_status:up") {
            up = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(up, "the replica's link never came up");
    assert_eq!(request(&mut r, &["GET", "before"]), "$1\r\n1\r\n");
    assert_eq!(request(&mut m, &["SET", "after", "2"]), "+OK\r\n");
    assert_eq!(request(&mut m, &["WAIT", "1", "0"]), ":1\r\n");
    assert_eq!(request(&mut r, &["GET", "after"]), "$1\r\n2\r\n");
    assert!(request(&mut r, &["SET", "x", "1"]).starts_with("-READONLY"));
    drop((m, r));
    stop(replica);
    stop(master);
}

#[test]
fn bad_replication_flags_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store");
    let db = db.to_str().unwrap();
    let (ok, _, err) = shale(&["serve", "--db", db, "--replicaof", "127.0.0.1", "0"]);
    assert!(!ok);
    assert!(err.contains("--replicaof 127.0.0.1 0: the port is not in 1..=65535"), "{err}");
    let (ok, _, err) = shale(&["serve", "--db", db, "--repl-backlog-size", "100"]);
    assert!(!ok);
    assert!(err.contains("--repl-backlog-size 100 is not in 16384..="), "{err}");
    assert!(!std::path::Path::new(db).exists(), "nothing made for refused flags");
}
