//! `shale serve` and its peers run as processes by the CLI's tests: a server started on a
//! store and awaited until it printed its start lines, stopped with SIGTERM (its clean exit
//! asserted) or killed when dropped, and a RESP client that reads whole replies.
#![allow(dead_code)] // each test binary uses its own part of it

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

#[allow(unused_imports)] // each test binary uses one or the other
pub use shale_testkit::ports::{free_port, free_ports};

/// A process a test started, killed and reaped when dropped, so that a failed test leaves
/// none behind.
pub struct Process {
    pub child: Child,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `shale serve` a test started.
pub struct Served {
    process: Option<Process>,
    /// Its stdout, kept open: it prints its last lines at shutdown.
    pub stdout: BufReader<ChildStdout>,
    /// The lines it printed at start, the last one naming `maxclients`.
    pub lines: Vec<String>,
}

impl Served {
    /// `shale serve --db DB ARGS...`, once it printed its start lines.
    pub fn start(db: &Path, args: &[&str]) -> Served {
        let mut child = Command::new(env!("CARGO_BIN_EXE_shale"))
            .args(["serve", "--db"])
            .arg(db)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut lines = Vec::new();
        while !lines.last().is_some_and(|l: &String| l.contains("maxclients")) {
            let mut line = String::new();
            assert!(stdout.read_line(&mut line).unwrap() > 0, "ended early: {lines:?}");
            lines.push(line);
        }
        Served { process: Some(Process { child }), stdout, lines }
    }

    /// `shale serve --db DB --port PORT EXTRA...`, once it printed its start lines.
    pub fn on_port(db: &Path, port: u16, extra: &[&str]) -> Served {
        let port = port.to_string();
        let args: Vec<&str> =
            ["--port", port.as_str()].into_iter().chain(extra.iter().copied()).collect();
        Served::start(db, &args)
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.process.as_ref().unwrap().child.id()
    }

    /// Kills it with SIGKILL and reaps it.
    pub fn kill(&mut self) {
        let p = self.process.as_mut().unwrap();
        p.child.kill().unwrap();
        p.child.wait().unwrap();
    }

    /// Stops it with SIGTERM and asserts that it exits cleanly within 60 s.
    pub fn stop(self) {
        // SAFETY: kill sends SIGTERM to a child this test started.
        assert_eq!(unsafe { libc::kill(self.pid() as libc::pid_t, libc::SIGTERM) }, 0);
        self.exits_cleanly();
    }

    /// Asserts that it exits cleanly within 60 s (after something asked it to stop), and
    /// returns what it printed after its start lines.
    pub fn exits_cleanly(mut self) -> String {
        let mut process = self.process.take().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = process.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "no exit within 60 s of the stop");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(status.success(), "{status}");
        let mut rest = String::new();
        self.stdout.read_to_string(&mut rest).unwrap();
        rest
    }
}

/// Sends a command and reads what one read returns (a short reply, whole).
pub fn request<S: Read + Write>(s: &mut S, args: &[&str]) -> String {
    s.write_all(&encode(args)).unwrap();
    let mut buf = vec![0u8; 64 << 10];
    let n = s.read(&mut buf).unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// A command as a RESP array of bulk strings.
pub fn encode(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len());
    for a in args {
        out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    out.into_bytes()
}

/// One RESP reply, read whole: simple strings, errors and integers as their line, bulk
/// strings as their bytes (`None` for nil), arrays as their elements.
#[derive(Debug, PartialEq)]
pub enum Resp {
    Line(String),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Resp>),
}

/// One reply, or `None` where the connection ended or failed before it was whole.
pub fn try_read_reply(r: &mut BufReader<TcpStream>) -> Option<Resp> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 || !line.ends_with("\r\n") {
        return None;
    }
    let line = line.trim_end_matches("\r\n");
    let (kind, rest) = line.split_at(1);
    Some(match kind {
        "$" => {
            let n: i64 = rest.parse().ok()?;
            if n < 0 {
                return Some(Resp::Bulk(None));
            }
            let mut buf = vec![0u8; n as usize + 2];
            r.read_exact(&mut buf).ok()?;
            buf.truncate(n as usize);
            Resp::Bulk(Some(buf))
        }
        "*" => {
            let n: i64 = rest.parse().ok()?;
            Resp::Array((0..n.max(0)).map(|_| try_read_reply(r)).collect::<Option<_>>()?)
        }
        _ => Resp::Line(line.to_string()),
    })
}

/// A client connection over TCP to 127.0.0.1.
pub struct Client {
    reader: BufReader<TcpStream>,
}

impl Client {
    pub fn connect(port: u16) -> Client {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Client { reader: BufReader::new(s) }
    }

    pub fn call(&mut self, args: &[&str]) -> Resp {
        self.try_call(args).expect("the connection closed before a whole reply")
    }

    /// A call that may find the connection gone: `None` then.
    pub fn try_call(&mut self, args: &[&str]) -> Option<Resp> {
        self.reader.get_mut().write_all(&encode(args)).ok()?;
        try_read_reply(&mut self.reader)
    }

    /// A bulk string reply's text; any other reply fails the test.
    pub fn text(&mut self, args: &[&str]) -> String {
        match self.call(args) {
            Resp::Bulk(Some(b)) => String::from_utf8(b).unwrap(),
            other => panic!("{args:?}: {other:?}"),
        }
    }
}

/// Polls `done` up to `tries` times, 100 ms apart; whether it came true.
pub fn poll(tries: usize, mut done: impl FnMut() -> bool) -> bool {
    for _ in 0..tries {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}
