//! `shale serve --port 0 --unixsocket PATH`: TCP off, as `port 0` is in Redis; only the Unix
//! socket listens, and the server says so (no TCP line at start, `tcp_port:0` in INFO,
//! `CONFIG GET port` 0).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn request(s: &mut UnixStream, args: &[&str]) -> String {
    let mut out = format!("*{}\r\n", args.len());
    for a in args {
        out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s.write_all(out.as_bytes()).unwrap();
    let mut buf = vec![0u8; 64 << 10];
    let n = s.read(&mut buf).unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[test]
fn port_zero_listens_on_the_unix_socket_only() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("s.sock");
    let mut child = Command::new(env!("CARGO_BIN_EXE_shale"))
        .args(["serve", "--db"])
        .arg(dir.path().join("db"))
        .args(["--port", "0", "--unixsocket"])
        .arg(&socket)
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
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with("shale serve: listening on unix socket "), "{lines:?}");
    assert!(!lines.iter().any(|l| l.contains("listening on 127.")), "{lines:?}");

    let mut s = UnixStream::connect(&socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    assert_eq!(request(&mut s, &["PING"]), "+PONG\r\n");
    assert_eq!(request(&mut s, &["CONFIG", "GET", "port"]), "*2\r\n$4\r\nport\r\n$1\r\n0\r\n");
    assert!(request(&mut s, &["INFO", "server"]).contains("tcp_port:0\r\n"));
    drop(s);

    // SAFETY: kill sends SIGTERM to the child this test started.
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
    assert!(!socket.exists(), "the socket file is removed at shutdown");
}
