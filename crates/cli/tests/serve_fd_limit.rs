//! `shale serve` under a low open-file limit (`ulimit -n 256`, set in the child before it
//! runs): `--maxclients` (10,000 by default) is lowered to what the limit allows, with a
//! warning naming the flag; 400 clients then connect and each is answered, `+PONG` or
//! `-ERR max number of clients reached`, none left waiting. Then the running server's limit
//! is lowered under what it holds (`prlimit`), so every accept fails with EMFILE: each new
//! client is still answered the error, and the log has a line or two, not one per failure.
//! Clients speak over the Unix socket (`--port 0`: TCP off), so no port is raced for.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The open-file limit the server runs under.
const NOFILE: u64 = 256;
/// Clients connecting: more than the limit allows.
const CLIENTS: usize = 400;
/// How long any one reply may take before the client counts as left waiting (generous:
/// a loaded machine is slow, a hung client waits for ever).
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);

const PONG: &str = "+PONG\r\n";
const REFUSED: &str = "-ERR max number of clients reached\r\n";

struct Server {
    child: Child,
    stderr: Arc<Mutex<Vec<String>>>,
    stderr_reader: Option<std::thread::JoinHandle<()>>,
    max_clients: usize,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn set_nofile(pid: libc::pid_t, soft: u64, hard: u64) {
    let l = libc::rlimit { rlim_cur: soft, rlim_max: hard };
    // SAFETY: prlimit reads the struct given, which lives for the call; no old value asked.
    let r = unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, &l, std::ptr::null_mut()) };
    assert_eq!(r, 0, "prlimit: {}", std::io::Error::last_os_error());
}

fn start(db: &std::path::Path, socket: &std::path::Path) -> Server {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_shale"));
    cmd.args(["serve", "--db"]).arg(db).args(["--port", "0", "--unixsocket"]).arg(socket);
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    // SAFETY: the closure only calls setrlimit, which is async-signal-safe, between fork
    // and exec.
    unsafe {
        cmd.pre_exec(|| {
            let l = libc::rlimit { rlim_cur: NOFILE, rlim_max: NOFILE };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &l) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let sink = stderr.clone();
    let err = BufReader::new(child.stderr.take().unwrap());
    let stderr_reader = std::thread::spawn(move || {
        for line in err.lines().map_while(Result::ok) {
            sink.lock().unwrap().push(line);
        }
    });
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut max_clients = None;
    let mut line = String::new();
    while max_clients.is_none() {
        line.clear();
        let n = out.read_line(&mut line).unwrap();
        assert!(n > 0, "shale serve ended before serving: {:?}", stderr.lock().unwrap());
        max_clients = line.trim().rsplit_once("maxclients ").map(|(_, n)| n.parse().unwrap());
    }
    // Keep reading stdout so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in out.lines() {});
    Server { child, stderr, stderr_reader: Some(stderr_reader), max_clients: max_clients.unwrap() }
}

/// Connects, sends PING and reads the one line answered: `+PONG` or the refusal. Panics if
/// no answer comes within [`REPLY_TIMEOUT`].
fn ping(socket: &std::path::Path) -> (UnixStream, String) {
    let mut s = UnixStream::connect(socket).unwrap();
    s.set_read_timeout(Some(REPLY_TIMEOUT)).unwrap();
    s.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap_or_else(|e| {
        // A refused client may be closed before its request is written: its answer is
        // still there to read.
        use std::io::ErrorKind::{BrokenPipe, ConnectionReset};
        assert!(matches!(e.kind(), BrokenPipe | ConnectionReset), "{e}");
    });
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        match s.read(&mut byte) {
            Ok(1) => line.push(byte[0]),
            Ok(_) => panic!("closed without an answer after {:?}", String::from_utf8_lossy(&line)),
            Err(e) => panic!("no answer ({e}) after {:?}", String::from_utf8_lossy(&line)),
        }
    }
    (s, String::from_utf8(line).unwrap())
}

#[test]
fn every_client_is_answered_under_a_low_open_file_limit() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("s.sock");
    let mut server = start(&dir.path().join("db"), &socket);
    let m = server.max_clients;
    assert!(m > 0 && (m as u64) < NOFILE, "maxclients {m} under a limit of {NOFILE}");
    // The warning goes to stderr before the listening line goes to stdout, but the two
    // pipes are read by two threads: wait for the line to arrive (bounded against a hang).
    let warned_of = |lines: &[String]| {
        lines.iter().any(|l| {
            l.contains("--maxclients 10000 needs") && l.contains(&format!("lowered to {m}"))
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !warned_of(&server.stderr.lock().unwrap()) {
        assert!(
            Instant::now() < deadline,
            "no warning naming --maxclients: {:?}",
            server.stderr.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(10));
    }

    // 400 clients, each kept open: the first m are served, the rest refused, all answered.
    let mut held = Vec::new();
    let (mut served, mut refused) = (0, 0);
    for _ in 0..CLIENTS {
        let (s, line) = ping(&socket);
        match line.as_str() {
            PONG => served += 1,
            REFUSED => refused += 1,
            other => panic!("unexpected answer {other:?}"),
        }
        held.push(s);
    }
    assert_eq!(served, m, "every place up to --maxclients served");
    assert_eq!(refused, CLIENTS - m);

    // Now the limit falls under what the server holds: every accept fails with EMFILE.
    let pid = server.child.id() as libc::pid_t;
    set_nofile(pid, 64, NOFILE);
    let mut out_of_descriptors = Vec::new();
    for _ in 0..50 {
        let (s, line) = ping(&socket);
        assert_eq!(line, REFUSED, "a client accepted with no descriptor to spare");
        out_of_descriptors.push(s);
    }
    set_nofile(pid, NOFILE, NOFILE);
    drop(out_of_descriptors);
    drop(held);

    // SIGTERM: a clean shutdown, the store closed.
    // SAFETY: kill sends a signal to the child this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "no exit within 120 s of SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    server.stderr_reader.take().unwrap().join().unwrap();
    let log = server.stderr.lock().unwrap();
    assert!(status.success(), "{status}: {log:?}");
    let accept_lines = log.iter().filter(|l| l.contains("accepting a connection")).count();
    assert!(accept_lines >= 1, "the EMFILE was not logged: {log:?}");
    assert!(accept_lines <= 5, "{accept_lines} lines for 50 failures, a flood: {log:?}");
}
