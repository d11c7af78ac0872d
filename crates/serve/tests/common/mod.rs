//! A server started in-process on 127.0.0.1 port 0 over a temporary store, and helpers to
//! talk to it with the redis crate or a raw socket.
#![allow(dead_code)] // each test binary uses its own part of it

pub mod redis_server;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use shale_lsm::{Db, Options};
use shale_serve::{AppendFsync, Config, Server};

/// How long a raw read waits before the test fails instead of hanging.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How many times [`until`] polls its condition (50 ms apart) before the test fails.
pub const TRIES: usize = 400;

/// Polls `cond` until it holds, failing with `what` after [`TRIES`] tries.
pub fn until(what: &str, mut cond: impl FnMut() -> bool) {
    for _ in 0..TRIES {
        if cond() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("never happened: {what}");
}

pub use shale_testkit::ports::free_port;

/// The field `name` of an INFO text.
pub fn info_field(info: &str, name: &str) -> Option<String> {
    info.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{name}:")).map(|v| v.trim().to_string()))
}

/// The field `name` of `INFO section`, asked of a server.
pub fn info_of(c: &mut redis::Connection, section: &str, name: &str) -> Option<String> {
    let text: String = redis::cmd("INFO").arg(section).query(c).unwrap();
    info_field(&text, name)
}

/// A running server, shut down (closing its store) when dropped.
pub struct TestServer {
    server: Option<Server>,
    pub addr: SocketAddr,
    pub dir: tempfile::TempDir,
}

/// The settings tests start from: loopback, any free port, no sync (the tests that need
/// durability ask for it).
pub fn test_config() -> Config {
    Config {
        bind: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        appendfsync: AppendFsync::No,
        ..Config::default()
    }
}

impl TestServer {
    /// A server with the test settings.
    pub fn start() -> TestServer {
        TestServer::start_with(test_config())
    }

    /// A server with `config`, over a new store.
    pub fn start_with(config: Config) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        TestServer::start_in(dir, config)
    }

    /// A server with `config` over the store in `dir` (made if blank).
    pub fn start_in(dir: tempfile::TempDir, config: Config) -> TestServer {
        let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
        let server = Server::start(db, config).unwrap();
        let addr = server.tcp_addr().unwrap();
        TestServer { server: Some(server), addr, dir }
    }

    /// A client of the redis crate.
    pub fn client(&self) -> redis::Connection {
        self.client_url("").get_connection().unwrap()
    }

    /// The redis crate's client, with `query` after the address (`?protocol=resp3`).
    pub fn client_url(&self, query: &str) -> redis::Client {
        redis::Client::open(format!("redis://{}/{query}", self.addr)).unwrap()
    }

    /// A raw TCP connection with read and write timeouts.
    pub fn raw(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        s.set_write_timeout(Some(READ_TIMEOUT)).unwrap();
        s
    }

    /// Shuts the server down, closing its store; the store's directory is kept for a reopen.
    pub fn stop(mut self) -> tempfile::TempDir {
        self.server.take().unwrap().shutdown().unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::mem::replace(&mut self.dir, dir)
    }

    /// Ends the server as a crash would, as far as the server goes: dropped without
    /// [`Server::shutdown`], so nothing a clean shutdown keeps is kept (the store's writes
    /// are in its log, as after a SIGKILL); the store's directory is kept for a reopen.
    pub fn crash(mut self) -> tempfile::TempDir {
        drop(self.server.take());
        let dir = tempfile::tempdir().unwrap();
        std::mem::replace(&mut self.dir, dir)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            let closed = s.shutdown();
            if !std::thread::panicking() {
                closed.unwrap();
            }
        }
    }
}

/// Sends `request` and reads exactly `expected.len()` bytes back, failing on a mismatch.
pub fn exchange(s: &mut TcpStream, request: &[u8], expected: &[u8]) {
    s.write_all(request).unwrap();
    expect(s, expected);
}

/// Reads exactly `expected.len()` bytes, failing the test on a mismatch or a timeout.
pub fn expect(s: &mut TcpStream, expected: &[u8]) {
    let mut got = vec![0u8; expected.len()];
    let mut at = 0;
    let deadline = Instant::now() + READ_TIMEOUT;
    while at < got.len() {
        assert!(
            Instant::now() < deadline,
            "timed out; got {:?}",
            String::from_utf8_lossy(&got[..at])
        );
        match s.read(&mut got[at..]) {
            Ok(0) => panic!(
                "closed after {:?}, expected {:?}",
                String::from_utf8_lossy(&got[..at]),
                String::from_utf8_lossy(expected)
            ),
            Ok(n) => at += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => panic!("read failed after {:?}: {e}", String::from_utf8_lossy(&got[..at])),
        }
    }
    assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(expected));
}

/// Reads one line (up to CRLF) of a reply.
pub fn read_line(s: &mut TcpStream) -> String {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        match s.read(&mut byte) {
            Ok(1) => line.push(byte[0]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            other => panic!("reading a line after {:?}: {other:?}", String::from_utf8_lossy(&line)),
        }
        assert!(line.len() < 1 << 20, "line too long");
    }
    String::from_utf8_lossy(&line).into_owned()
}

/// Whether the server closed the connection: a read sees end of input (or a reset) before
/// the timeout.
pub fn closed(s: &mut TcpStream) -> bool {
    let mut rest = Vec::new();
    match s.read_to_end(&mut rest) {
        Ok(_) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

/// A request as RESP: an array of bulk strings.
pub fn resp(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// A server config under `appendfsync always` whose write hook reports every event and holds
/// each write until the test lets it go (or has gone): the events, and the sender that
/// releases one write per message.
pub fn held_writes() -> (
    Config,
    std::sync::mpsc::Receiver<shale_serve::keyspace::WriteEvent>,
    std::sync::mpsc::Sender<()>,
) {
    use shale_serve::keyspace::{WriteEvent, WriteHook};
    use std::sync::{Arc, Mutex, mpsc};
    let (events_tx, events) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    let events_tx = Mutex::new(events_tx);
    let release_rx = Mutex::new(release_rx);
    let hook = WriteHook(Arc::new(move |e| {
        events_tx.lock().unwrap().send(e).unwrap();
        if let WriteEvent::Before(_) = e {
            // The hook runs on a runtime worker: blocking it in place hands the worker's
            // queue, and its turn at polling the sockets, to another thread meanwhile.
            // Blocked plainly, the worker that held the I/O driver before it ran the write
            // left no worker polling it (the other parked on its condition variable), and a
            // test's INFO on another connection went unanswered until the read timed out.
            tokio::task::block_in_place(|| {
                let _ = release_rx.lock().unwrap().recv();
            });
        }
    }));
    let config = Config {
        appendfsync: AppendFsync::Always,
        threads: 2,
        write_hook: Some(hook),
        ..test_config()
    };
    (config, events, release)
}
