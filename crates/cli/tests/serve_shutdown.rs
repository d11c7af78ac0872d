//! `SHUTDOWN` on the real binary: a client's clean shutdown of `shale serve`, the one SIGTERM
//! makes (every connection finishes, the store is closed and flushed, exit 0), with every
//! acknowledged write there after a restart; its options are taken, anything else refused.

#[path = "common/served.rs"]
mod served;

use std::io::Read;
use std::net::TcpStream;
use std::time::Duration;

use served::{Served, free_port, request};

#[test]
fn shutdown_stops_the_server_cleanly_and_keeps_every_write() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s");
    let port = free_port();
    let server = Served::on_port(&db, port, &[]);
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    assert_eq!(request(&mut c, &["SET", "k", "v"]), "+OK\r\n");
    assert_eq!(request(&mut c, &["SHUTDOWN", "LATER"]), "-ERR syntax error\r\n");
    assert_eq!(request(&mut c, &["SHUTDOWN", "ABORT"]), "-ERR No shutdown in progress.\r\n");
    assert_eq!(request(&mut c, &["PING"]), "+PONG\r\n", "a refused SHUTDOWN stops nothing");
    assert_eq!(request(&mut c, &["SHUTDOWN", "NOSAVE"]), "+OK\r\n");
    // The server closes the connection that asked.
    let mut rest = Vec::new();
    c.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "{rest:?}");
    let printed = server.exits_cleanly();
    assert!(printed.contains("store closed"), "{printed}");

    let again = Served::on_port(&db, port, &[]);
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    assert_eq!(request(&mut c, &["GET", "k"]), "$1\r\nv\r\n");
    drop(c);
    again.stop();
}
