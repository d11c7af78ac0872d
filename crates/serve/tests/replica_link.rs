//! A replica's link (`replica_link.rs`) against a real Redis 7 master (Debian's
//! redis-server, which test.sh installs): the handshake, a full resync whose snapshot holds
//! the master's keys, the command stream in order, and acknowledged offsets that the master's
//! `WAIT` counts. Both of Redis's snapshot transfers are run: from disk (a length) and
//! diskless (an end mark, the Redis 7 default).

use std::process::Command;
use std::time::Duration;

use common::redis_server::RedisServer;
use shale_serve::rdb::{self, Item};
use shale_serve::replica_link::Link;

mod common;

fn bulk(args: &[&str]) -> Vec<Vec<u8>> {
    args.iter().map(|a| a.as_bytes().to_vec()).collect()
}

fn resync_then_stream(diskless: bool, port: u16) {
    let master = RedisServer::start(
        port,
        &[
            "--repl-diskless-sync",
            if diskless { "yes" } else { "no" },
            "--repl-diskless-sync-delay",
            "0",
        ],
        |_| {},
    );
    master.cli(&["set", "before", "snapshot"]);
    master.cli(&["set", "expiring", "x", "pxat", "4102444800000"]);
    master.cli(&["rpush", "a-list", "1", "2"]);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let addr = format!("127.0.0.1:{}", master.port);
        let (mut link, full) =
            Link::full_resync(&addr, 7777, Duration::from_secs(10)).await.unwrap();
        assert_eq!(full.replid.len(), 40);
        assert_eq!(link.replid(), full.replid);
        let mut keys = Vec::new();
        rdb::decode(&full.rdb, |i| keys.push(i)).unwrap();
        let mut strings: Vec<_> = keys
            .iter()
            .filter_map(|i| match i {
                Item::String(s) => Some((s.key.clone(), s.value.clone(), s.expires_at_ms)),
                Item::Skipped { .. } => None,
            })
            .collect();
        strings.sort();
        assert_eq!(
            strings,
            [
                (b"before".to_vec(), b"snapshot".to_vec(), None),
                (b"expiring".to_vec(), b"x".to_vec(), Some(4_102_444_800_000)),
            ]
        );
        assert!(keys.iter().any(|i| matches!(i, Item::Skipped { kind: "list", .. })));
        // The master lists the replica, at the port it gave.
        let info = master.cli(&["info", "replication"]);
        assert!(info.contains("port=7777"), "{info}");

        master.cli(&["set", "after", "one"]);
        master.cli(&["del", "before"]);
        let mut seen = Vec::new();
        while seen.len() < 2 {
            let cmd = link.next_command().await.unwrap();
            let name = String::from_utf8_lossy(&cmd[0]).to_ascii_lowercase();
            if name == "select" || name == "ping" || name == "replconf" {
                continue;
            }
            seen.push(cmd);
        }
        assert_eq!(seen, [bulk(&["set", "after", "one"]), bulk(&["del", "before"])]);
        // Acknowledged, the stream's offset is what the master counts: WAIT sees one replica.
        link.ack().await.unwrap();
        // WAIT counts replicas that acknowledged its client's last write; one connection
        // (redis-cli reading commands from its input) writes and waits.
        let write_and_wait = |port: u16, key: &'static str| {
            tokio::task::spawn_blocking(move || {
                use std::io::Write;
                let mut child = Command::new("redis-cli")
                    .args(["-p", &port.to_string()])
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .spawn()
                    .unwrap();
                let script = format!("set {key} x\nwait 1 5000\n");
                child.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
                let out = child.wait_with_output().unwrap();
                String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or("").trim().to_string()
            })
        };
        // A write not yet acknowledged: WAIT asks with REPLCONF GETACK, which the link
        // answers while handing it out, and counts the replica once it has.
        let started = link.offset();
        let waited = write_and_wait(master.port, "more");
        let mut stream = Vec::new();
        let cmd = loop {
            let cmd = link.next_command().await.unwrap();
            if cmd[0].eq_ignore_ascii_case(b"replconf") {
                break cmd;
            }
            stream.push(cmd);
        };
        assert_eq!(cmd, bulk(&["REPLCONF", "GETACK", "*"]));
        assert!(stream.contains(&bulk(&["set", "more", "x"])), "{stream:?}");
        assert!(link.offset() > started);
        assert_eq!(waited.await.unwrap(), "1");
    });
}

#[test]
fn a_full_resync_from_disk_then_the_stream() {
    if !shale_testkit::prerequisite::program("redis-server", "apt-get install redis-server") {
        return;
    }
    resync_then_stream(false, 20_000 + (std::process::id() % 15_000) as u16);
}

#[test]
fn a_diskless_full_resync_then_the_stream() {
    if !shale_testkit::prerequisite::program("redis-server", "apt-get install redis-server") {
        return;
    }
    resync_then_stream(true, 35_001 + (std::process::id() % 15_000) as u16);
}
