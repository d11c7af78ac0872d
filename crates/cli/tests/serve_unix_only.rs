//! `shale serve --port 0 --unixsocket PATH`: TCP off, as `port 0` is in Redis; only the Unix
//! socket listens, and the server says so (no TCP line at start, `tcp_port:0` in INFO,
//! `CONFIG GET port` 0).

#[path = "common/served.rs"]
mod served;

use std::os::unix::net::UnixStream;
use std::time::Duration;

use served::{Served, request};

#[test]
fn port_zero_listens_on_the_unix_socket_only() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("s.sock");
    let server = Served::start(
        &dir.path().join("db"),
        &["--port", "0", "--unixsocket", socket.to_str().unwrap()],
    );
    let lines = &server.lines;
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with("shale serve: listening on unix socket "), "{lines:?}");
    assert!(!lines.iter().any(|l| l.contains("listening on 127.")), "{lines:?}");

    let mut s = UnixStream::connect(&socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    assert_eq!(request(&mut s, &["PING"]), "+PONG\r\n");
    assert_eq!(request(&mut s, &["CONFIG", "GET", "port"]), "*2\r\n$4\r\nport\r\n$1\r\n0\r\n");
    assert!(request(&mut s, &["INFO", "server"]).contains("tcp_port:0\r\n"));
    drop(s);

    server.stop();
    assert!(!socket.exists(), "the socket file is removed at shutdown");
}
