//! Redis Sentinel (Debian's `redis-sentinel`, 7.0) fails a `shale serve` master over to its
//! `shale serve` replica (issue #46): a master and a replica run as processes, three
//! Sentinels monitor the master (quorum 2, down after 1000 ms) and find each other through
//! its pub/sub, writes acknowledged with `WAIT 1` go in under redis-benchmark's load, the
//! master is killed with SIGKILL, and once every Sentinel names the replica as the master,
//! every acknowledged write must be on it, and it must take writes. The test fails where
//! `redis-sentinel` is missing (test.sh installs it).

#[path = "common/served.rs"]
mod served;

use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use served::{Client, Process, Resp, Served, free_ports, poll};

/// A `redis-sentinel` this test started, monitoring the master at `master_port` as `shale`
/// (down after 1000 ms, quorum 2). It rewrites its configuration file, so each has its own
/// in the test's directory, with its log beside it.
struct Sentinel {
    _process: Process,
    log: std::path::PathBuf,
}

impl Sentinel {
    fn start(dir: &Path, port: u16, master_port: u16) -> Sentinel {
        let conf = dir.join(format!("sentinel-{port}.conf"));
        let log = dir.join(format!("sentinel-{port}.log"));
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndaemonize no\nlogfile {}\ndir {}\n\
                 sentinel monitor shale 127.0.0.1 {master_port} 2\n\
                 sentinel down-after-milliseconds shale 1000\n\
                 sentinel failover-timeout shale 10000\n\
                 sentinel parallel-syncs shale 1\n",
                log.display(),
                dir.display()
            ),
        )
        .unwrap();
        let child = Command::new("redis-sentinel")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "redis-sentinel could not be started ({e}): install Debian's \
                     redis-sentinel (test.sh does)"
                )
            });
        Sentinel { _process: Process { child }, log }
    }

    fn log(&self) -> String {
        format!(
            "{}:\n{}",
            self.log.display(),
            std::fs::read_to_string(&self.log).unwrap_or_default()
        )
    }
}

/// A reply of Sentinel's listings (`SENTINEL REPLICAS`, `SENTINELS`): one map of fields per
/// instance.
fn records(reply: Resp) -> Vec<std::collections::HashMap<String, String>> {
    let Resp::Array(items) = reply else { return Vec::new() };
    items
        .into_iter()
        .filter_map(|item| {
            let Resp::Array(fields) = item else { return None };
            let text: Vec<String> = fields
                .into_iter()
                .map(|f| match f {
                    Resp::Bulk(Some(b)) => String::from_utf8_lossy(&b).into_owned(),
                    _ => String::new(),
                })
                .collect();
            Some(
                text.chunks(2)
                    .filter(|p| p.len() == 2)
                    .map(|p| (p[0].clone(), p[1].clone()))
                    .collect(),
            )
        })
        .collect()
}

#[test]
fn sentinel_promotes_the_replica_with_every_wait_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let [pm, pr] = free_ports();
    let mut master = Served::on_port(&dir.path().join("m"), pm, &[]);
    let _replica =
        Served::on_port(&dir.path().join("r"), pr, &["--replicaof", "127.0.0.1", &pm.to_string()]);
    let mut r = Client::connect(pr);
    assert!(
        poll(400, || r.text(&["INFO", "replication"]).contains("master_link_status:up")),
        "the replica's link never came up"
    );

    // Three Sentinels, quorum 2: they find each other through the hello messages they
    // publish on the master's `__sentinel__:hello` channel (shale's pub/sub), and a majority
    // of them must agree the master is down and elect the one that fails it over.
    let sentinel_ports: [u16; 3] = free_ports();
    let sentinels: Vec<Sentinel> =
        sentinel_ports.iter().map(|&port| Sentinel::start(dir.path(), port, pm)).collect();
    let logs = || sentinels.iter().map(Sentinel::log).collect::<Vec<_>>().join("\n");
    let mut clients: Vec<Client> = Vec::new();
    for &port in &sentinel_ports {
        let mut c = None;
        assert!(
            poll(400, || {
                c = TcpStream::connect(("127.0.0.1", port)).ok().map(|_| Client::connect(port));
                c.is_some()
            }),
            "redis-sentinel never listened on {port}"
        );
        clients.push(c.unwrap());
    }
    let port = pr.to_string();
    for s in &mut clients {
        // Each finds the replica in the master's INFO, then connects to it and reads its
        // INFO (only a replica it knows and heard from recently can be promoted), and hears
        // the two other Sentinels' hello messages.
        assert!(
            poll(400, || {
                let replica_ok =
                    records(s.call(&["SENTINEL", "REPLICAS", "shale"])).iter().any(|r| {
                        r.get("port") == Some(&port)
                            && r.get("flags").map(String::as_str) == Some("slave")
                            && r.get("master-link-status").map(String::as_str) == Some("ok")
                    });
                let peers = records(s.call(&["SENTINEL", "SENTINELS", "shale"]));
                replica_ok && peers.len() == 2
            }),
            "a Sentinel never saw the replica online and the two other Sentinels; logs:\n{}",
            logs()
        );
    }

    // Load: redis-benchmark's SETs from 20 clients, and two writers whose every SET is
    // followed by WAIT 1; a write counts as acknowledged only when WAIT answered 1.
    let benchmark = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &pm.to_string(), "-t", "set", "-r", "100000"])
        .args(["-n", "100000000", "-c", "20", "-q"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("redis-benchmark could not be started ({e}): install Debian's redis-tools")
        });
    let _benchmark = Process { child: benchmark };
    let acknowledged = Arc::new(Mutex::new(Vec::new()));
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let acknowledged = acknowledged.clone();
            std::thread::spawn(move || {
                let mut m = Client::connect(pm);
                for i in 0.. {
                    let (key, value) = (format!("w{w}:{i}"), format!("value:{w}:{i}"));
                    // The master's death ends the writer: its connection closes.
                    if m.try_call(&["SET", &key, &value]) != Some(Resp::Line("+OK".into())) {
                        return;
                    }
                    match m.try_call(&["WAIT", "1", "5000"]) {
                        Some(Resp::Line(n)) if n == ":1" => {
                            acknowledged.lock().unwrap().push((key, value));
                        }
                        Some(_) => {}
                        None => return,
                    }
                }
            })
        })
        .collect();
    assert!(
        poll(600, || acknowledged.lock().unwrap().len() >= 500),
        "only {} writes acknowledged by WAIT 1",
        acknowledged.lock().unwrap().len()
    );

    // The master dies without a word to anyone, under load.
    master.kill();
    for w in writers {
        w.join().unwrap();
    }
    let acknowledged = std::mem::take(&mut *acknowledged.lock().unwrap());

    // Sentinel marks it down, elects itself, sends the replica REPLICAOF NO ONE, sees it a
    // master in its INFO, and then names it.
    for s in &mut clients {
        let mut promoted = false;
        for _ in 0..600 {
            if let Resp::Array(addr) = s.call(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "shale"]) {
                if addr.get(1) == Some(&Resp::Bulk(Some(port.clone().into_bytes()))) {
                    promoted = true;
                    break;
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(promoted, "a Sentinel never named the replica the master; logs:\n{}", logs());
    }
    // The failover ends when its leader switches the configuration to the new master.
    assert!(
        poll(400, || logs().contains("+switch-master")),
        "the failover never ended; the Sentinels' logs:\n{}",
        logs()
    );

    let mut n = Client::connect(pr);
    assert!(
        poll(400, || n.text(&["INFO", "replication"]).contains("role:master")),
        "the promoted replica does not say role:master"
    );
    for (key, value) in &acknowledged {
        assert_eq!(
            n.call(&["GET", key]),
            Resp::Bulk(Some(value.clone().into_bytes())),
            "{key}, acknowledged by WAIT 1, is not on the new master"
        );
    }
    assert_eq!(n.call(&["SET", "after", "failover"]), Resp::Line("+OK".into()));
    let keys = n.call(&["DBSIZE"]);
    eprintln!(
        "{} writes acknowledged by WAIT 1, all on the new master, which holds {keys:?} keys \
         (redis-benchmark's among them)",
        acknowledged.len()
    );
}
