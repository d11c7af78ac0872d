//! `scripts/sentinel.sh`, the deployment script of issue #46 (deliverable 5), run as a user
//! runs it: `up` starts three `shale serve` (a master, two replicas) and three Debian
//! `redis-sentinel`s in one directory, refuses a second `up` over the running one, a write
//! confirmed with `WAIT 1` survives a SIGKILL of the master once Sentinel switched to a
//! replica, and `down` stops every process. It fails where `redis-sentinel` is missing and
//! cannot be installed (the script installs it as root, as test.sh does).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/sentinel.sh")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Runs `scripts/sentinel.sh ACTION --dir DIR ARGS...`.
fn run(action: &str, dir: &Path, args: &[&str]) -> Output {
    Command::new("bash")
        .arg(script())
        .arg(action)
        .arg("--dir")
        .arg(dir)
        .args(args)
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Stops the deployment however the test ends, so that a failed test leaves no process.
struct Deployment {
    dir: PathBuf,
}

impl Drop for Deployment {
    fn drop(&mut self) {
        let _ = run("down", &self.dir, &[]);
    }
}

/// A client connection, reading one reply line (or a bulk string's bytes) per call.
struct Client {
    reader: BufReader<TcpStream>,
}

impl Client {
    fn connect(port: u16) -> Client {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Client { reader: BufReader::new(s) }
    }

    /// The reply's first line, or a bulk string's value (`$-1` for nil); an array's
    /// elements (bulk strings) joined by spaces.
    fn call(&mut self, args: &[&str]) -> String {
        let mut out = format!("*{}\r\n", args.len());
        for a in args {
            out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        self.reader.get_mut().write_all(out.as_bytes()).unwrap();
        self.reply()
    }

    fn reply(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        let line = line.trim_end().to_string();
        if let Some(n) = line.strip_prefix('$').and_then(|n| n.parse::<usize>().ok()) {
            let mut buf = vec![0u8; n + 2];
            self.reader.read_exact(&mut buf).unwrap();
            buf.truncate(n);
            return String::from_utf8(buf).unwrap();
        }
        if let Some(n) = line.strip_prefix('*').and_then(|n| n.parse::<usize>().ok()) {
            return (0..n).map(|_| self.reply()).collect::<Vec<_>>().join(" ");
        }
        line
    }
}

fn pid_in(file: &Path) -> libc::pid_t {
    std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
        .trim()
        .parse()
        .unwrap()
}

/// Whether a process runs: it exists and is no zombie (a process whose parent exited is
/// adopted, and reaped when its adopter gets to it).
fn alive(pid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only asks whether the process exists.
    let exists = unsafe { libc::kill(pid, 0) == 0 };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().next());
    exists && state != Some("Z")
}

/// Polls `done` up to `tries` times, 100 ms apart; whether it came true.
fn poll(tries: usize, mut done: impl FnMut() -> bool) -> bool {
    for _ in 0..tries {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

#[test]
fn the_script_deploys_fails_over_with_sentinel_and_tears_down() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("deployment");
    let shale_ports = [free_port(), free_port(), free_port()];
    let sentinel_ports = [free_port(), free_port(), free_port()];
    let join = |p: &[u16]| p.iter().map(u16::to_string).collect::<Vec<_>>().join(",");
    let (ports, sports) = (join(&shale_ports), join(&sentinel_ports));
    let args = [
        "--ports",
        &ports,
        "--sentinel-ports",
        &sports,
        "--down-after",
        "1000",
        "--failover-timeout",
        "10000",
        "--shale",
        env!("CARGO_BIN_EXE_shale"),
    ];
    let up = run("up", &dir, &args);
    let _deployment = Deployment { dir: dir.clone() };
    assert!(up.status.success(), "up failed (is redis-sentinel installed?):\n{}", text(&up));
    let said = String::from_utf8_lossy(&up.stdout);
    assert!(
        said.contains("SENTINEL get-master-addr-by-name shale")
            && said.contains(&format!("-p {}", shale_ports[0])),
        "up does not say how to connect:\n{said}"
    );
    let status = run("status", &dir, &[]);
    assert!(status.status.success(), "{}", text(&status));

    // A second deployment over the running one is refused, and leaves it running.
    let again = run("up", &dir, &args);
    assert!(!again.status.success(), "a second up was not refused:\n{}", text(&again));
    assert!(String::from_utf8_lossy(&again.stderr).contains("is running"), "{}", text(&again));
    assert!(run("status", &dir, &[]).status.success(), "the refused up stopped the deployment");

    // A write confirmed on a replica.
    let mut m = Client::connect(shale_ports[0]);
    assert_eq!(m.call(&["SET", "acknowledged", "by-wait"]), "+OK");
    let acked = m.call(&["WAIT", "1", "5000"]);
    assert!(matches!(acked.as_str(), ":1" | ":2"), "WAIT 1 answered {acked}");
    drop(m);

    // The master dies without a word.
    let master_pid = pid_in(&dir.join(format!("shale-{}/pid", shale_ports[0])));
    // SAFETY: kill sends SIGKILL to the master this test's script started.
    assert_eq!(unsafe { libc::kill(master_pid, libc::SIGKILL) }, 0);
    let logs = || {
        sentinel_ports
            .iter()
            .map(|p| {
                std::fs::read_to_string(dir.join(format!("sentinel-{p}/sentinel.log")))
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        poll(600, || logs().contains("+switch-master")),
        "no Sentinel switched the master; their logs:\n{}",
        logs()
    );
    let mut s = Client::connect(sentinel_ports[0]);
    let mut new_master = 0;
    assert!(
        poll(300, || {
            let addr = s.call(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "shale"]);
            new_master = addr.split(' ').nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
            shale_ports[1..].contains(&new_master)
        }),
        "Sentinel does not name a replica the master; logs:\n{}",
        logs()
    );
    let mut n = Client::connect(new_master);
    assert!(
        poll(300, || n.call(&["ROLE"]).starts_with("master")),
        "the promoted replica {new_master} is not a master"
    );
    assert_eq!(n.call(&["GET", "acknowledged"]), "by-wait", "the WAIT-confirmed write is lost");
    assert_eq!(n.call(&["SET", "after", "failover"]), "+OK");
    drop(n);

    // Down stops every process it started, and frees every port.
    let pids: Vec<libc::pid_t> = shale_ports[1..]
        .iter()
        .map(|p| dir.join(format!("shale-{p}/pid")))
        .chain(sentinel_ports.iter().map(|p| dir.join(format!("sentinel-{p}/pid"))))
        .map(|f| pid_in(&f))
        .collect();
    let down = run("down", &dir, &[]);
    assert!(down.status.success(), "{}", text(&down));
    for pid in pids {
        assert!(!alive(pid), "pid {pid} still runs after down");
    }
    for p in shale_ports.iter().chain(&sentinel_ports) {
        assert!(TcpStream::connect(("127.0.0.1", *p)).is_err(), "port {p} still answers");
    }
    let status = run("status", &dir, &[]);
    assert!(!status.status.success(), "status after down says running:\n{}", text(&status));
    // The data stays until --purge.
    assert!(dir.join(format!("shale-{}/store", shale_ports[1])).exists());
    let purge = run("down", &dir, &["--purge"]);
    assert!(purge.status.success() && !dir.exists(), "{}", text(&purge));
}
