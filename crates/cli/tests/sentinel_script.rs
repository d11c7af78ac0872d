//! `scripts/sentinel.sh`, the deployment script of issue #46 (deliverable 5), run as a user
//! runs it: `up` starts three `shale serve` (a master, two replicas) and three Debian
//! `redis-sentinel`s in one directory, refuses a second `up` over the running one, a write
//! confirmed with `WAIT 1` survives a SIGKILL of the master once Sentinel switched to a
//! replica (the other replica continuing from it with a partial resync), and `down` stops
//! every process. It fails where `redis-sentinel` is missing and cannot be installed (the
//! script installs it as root, as test.sh does).

#[path = "common/served.rs"]
mod served;

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use served::{Client, Resp, free_ports, poll};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/sentinel.sh")
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

#[test]
fn the_script_deploys_fails_over_with_sentinel_and_tears_down() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("deployment");
    let [s0, s1, s2, p0, p1, p2] = free_ports();
    let (shale_ports, sentinel_ports) = ([s0, s1, s2], [p0, p1, p2]);
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
    assert_eq!(m.call(&["SET", "acknowledged", "by-wait"]), Resp::Line("+OK".into()));
    let acked = m.call(&["WAIT", "1", "5000"]);
    assert!(matches!(&acked, Resp::Line(n) if n == ":1" || n == ":2"), "WAIT 1 answered {acked:?}");
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
            new_master = match addr {
                Resp::Array(a) => match a.get(1) {
                    Some(Resp::Bulk(Some(p))) => String::from_utf8_lossy(p).parse().unwrap_or(0),
                    _ => 0,
                },
                _ => 0,
            };
            shale_ports[1..].contains(&new_master)
        }),
        "Sentinel does not name a replica the master; logs:\n{}",
        logs()
    );
    let mut n = Client::connect(new_master);
    assert!(
        poll(300, || n.text(&["INFO", "replication"]).contains("role:master")),
        "the promoted replica {new_master} is not a master"
    );
    assert_eq!(n.text(&["GET", "acknowledged"]), "by-wait", "the WAIT-confirmed write is lost");
    assert_eq!(n.call(&["SET", "after", "failover"]), Resp::Line("+OK".into()));
    // Sentinel pointed the other replica at the new master: it continued from it (PSYNC2,
    // the new master never served a full resync) and takes its writes.
    let other = *shale_ports[1..].iter().find(|&&p| p != new_master).unwrap();
    let mut o = Client::connect(other);
    assert!(
        poll(300, || o.call(&["GET", "after"]) == Resp::Bulk(Some(b"failover".to_vec()))),
        "the other replica {other} does not follow the new master; logs:\n{}",
        logs()
    );
    let stats = n.text(&["INFO", "stats"]);
    assert!(
        stats.contains("sync_partial_ok:1\r\n") && stats.contains("sync_full:0\r\n"),
        "the other replica resynced in full:\n{stats}"
    );
    drop((n, o));

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
