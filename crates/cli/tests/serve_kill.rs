//! `shale serve --appendfsync always` killed under load: clients pipeline SETs and record
//! each one acknowledged, while redis-benchmark (Debian's redis-tools, which `test.sh`
//! installs) pipelines SETs and INCRs over 100,000 keys of its own beside them; the server is
//! SIGKILLed; restarted on the same store, it has every acknowledged key with its value. A
//! last SIGTERM must shut it down cleanly (exit 0, the store closed). Verified with a client
//! of its own over a raw socket; without redis-benchmark the test runs without that load and
//! says so, or fails where `SHALE_REQUIRE_PREREQS=1` (`shale_testkit::prerequisite`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Rounds of write-then-kill; `SHALE_SERVE_KILL_ROUNDS` runs more.
fn rounds() -> usize {
    std::env::var("SHALE_SERVE_KILL_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3)
}
const WRITERS: usize = 3;
/// SETs each writer sends before reading their replies.
const PIPELINE: usize = 16;
/// How long the writers write before the kill.
const WRITE_FOR: Duration = Duration::from_millis(700);
const START_LIMIT: Duration = Duration::from_secs(30);

/// The server child, killed if the test fails midway.
struct ServerChild {
    child: Child,
    port: u16,
    stdout: mpsc::Receiver<String>,
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(db: &std::path::Path) -> ServerChild {
    // A port picked by the test (`--port 0` turns TCP off, as in Redis).
    let port = shale_testkit::ports::free_port().to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_shale"))
        .args(["serve", "--db"])
        .arg(db)
        .args(["--port", &port, "--appendfsync", "always", "--write_buffer_size", "1048576"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in out.lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut server = ServerChild { child, port: 0, stdout: rx };
    let line = server.stdout.recv_timeout(START_LIMIT).expect("no line from shale serve");
    let addr = line.strip_prefix("shale serve: listening on ").expect(&line);
    server.port = addr.rsplit(':').next().unwrap().parse().unwrap();
    server
}

fn resp(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// One writer: pipelined SETs of `w{writer}:{round}:{n}` = `value{n}` until `stop` or the
/// connection fails; the number of SETs acknowledged with `+OK`, all of them in order.
fn write_until_killed(port: u16, writer: usize, round: usize, stop: &AtomicBool) -> usize {
    let mut s = connect(port);
    let mut reader = BufReader::new(s.try_clone().unwrap());
    let mut acked = 0;
    while !stop.load(Ordering::Relaxed) {
        let mut input = Vec::new();
        for n in acked..acked + PIPELINE {
            let key = format!("w{writer}:{round}:{n}");
            input.extend(resp(&[b"SET", key.as_bytes(), format!("value{n}").as_bytes()]));
        }
        if s.write_all(&input).is_err() {
            return acked;
        }
        for _ in 0..PIPELINE {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(n) if n > 0 => {
                    assert_eq!(line, "+OK\r\n", "a SET was refused");
                    acked += 1;
                }
                _ => return acked,
            }
        }
    }
    acked
}

/// Reads one bulk-string reply (or a null) from the stream.
fn read_bulk(r: &mut BufReader<TcpStream>) -> Option<Vec<u8>> {
    let mut header = String::new();
    r.read_line(&mut header).unwrap();
    let len: i64 = header.trim_end().strip_prefix('$').expect(&header).parse().unwrap();
    if len < 0 {
        return None;
    }
    let mut body = vec![0u8; len as usize + 2];
    r.read_exact(&mut body).unwrap();
    body.truncate(len as usize);
    Some(body)
}

fn verify(port: u16, acked: &[Vec<usize>]) {
    let mut s = connect(port);
    let mut r = BufReader::new(s.try_clone().unwrap());
    for (round, per_writer) in acked.iter().enumerate() {
        for (writer, &count) in per_writer.iter().enumerate() {
            for n in 0..count {
                let key = format!("w{writer}:{round}:{n}");
                s.write_all(&resp(&[b"GET", key.as_bytes()])).unwrap();
                let got = read_bulk(&mut r);
                assert_eq!(
                    got.as_deref(),
                    Some(format!("value{n}").as_bytes()),
                    "{key}: acknowledged (writer {writer} had {count} acknowledged in round \
                     {round}) but not there after the kill"
                );
            }
        }
    }
}

/// redis-benchmark loading the server until killed, where it is installed (a prerequisite
/// where `SHALE_REQUIRE_PREREQS=1`: `shale_testkit::prerequisite`).
struct Load(Option<Child>);

impl Load {
    fn start(port: u16) -> Load {
        if !shale_testkit::prerequisite::program("redis-benchmark", "apt-get install redis-tools") {
            return Load(None);
        }
        let spawned = Command::new("redis-benchmark")
            .args(["-h", "127.0.0.1", "-p", &port.to_string()])
            .args(["-c", "20", "-P", "16", "-n", "100000000", "-r", "100000", "-t", "set,incr"])
            .args(["-q"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        Load(spawned.ok())
    }

    /// Whether the load ran until now (it was started and has not exited).
    fn running(&mut self) -> bool {
        self.0.as_mut().is_some_and(|c| c.try_wait().unwrap().is_none())
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn every_acknowledged_set_survives_a_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store");
    let mut acked: Vec<Vec<usize>> = Vec::new();
    for round in 0..rounds() {
        let mut server = start(&db);
        // What earlier rounds acknowledged is there before anything new is written.
        verify(server.port, &acked);
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let stop = stop.clone();
                let port = server.port;
                std::thread::spawn(move || write_until_killed(port, w, round, &stop))
            })
            .collect();
        let mut load = Load::start(server.port);
        std::thread::sleep(WRITE_FOR);
        let loaded = load.running();
        if load.0.is_none() {
            println!("round {round}: redis-benchmark not installed: no load beside the writers");
        } else {
            assert!(loaded, "round {round}: redis-benchmark stopped before the kill");
        }
        // SIGKILL while the writers (and redis-benchmark) still write.
        server.child.kill().unwrap();
        server.child.wait().unwrap();
        stop.store(true, Ordering::Relaxed);
        let counts: Vec<usize> = writers.into_iter().map(|w| w.join().unwrap()).collect();
        assert!(counts.iter().sum::<usize>() > 0, "round {round}: nothing was acknowledged");
        drop(load);
        println!(
            "round {round}: acknowledged {counts:?} before SIGKILL{}",
            if loaded { ", redis-benchmark loading it" } else { "" }
        );
        acked.push(counts);
    }
    let mut server = start(&db);
    verify(server.port, &acked);
    // SIGTERM: a clean shutdown that closes the store.
    // SAFETY: kill only sends a signal to the child's pid, which has not been waited for.
    unsafe {
        libc::kill(server.child.id() as i32, libc::SIGTERM);
    }
    let deadline = Instant::now() + START_LIMIT;
    let status = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "no exit within {START_LIMIT:?} of SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    let lines: Vec<String> = server.stdout.try_iter().collect();
    assert!(lines.iter().any(|l| l == "shale serve: store closed"), "{lines:?}");
}
