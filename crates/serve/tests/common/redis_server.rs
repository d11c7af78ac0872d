//! A real redis-server (Debian's, which test.sh installs) on a port of its own and in a
//! directory of its own, for the tests that check shale against Redis itself.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// A running redis-server, shut down (without saving) when dropped.
pub struct RedisServer {
    pub port: u16,
    pub dir: tempfile::TempDir,
}

impl RedisServer {
    /// A Redis replica of the master on `master_port` (a shale one in these tests), once
    /// its link is up.
    pub fn replica_of(master_port: u16) -> RedisServer {
        let replica = RedisServer::start(
            super::free_port(),
            &["--replicaof", "127.0.0.1", &master_port.to_string()],
            |_| {},
        );
        super::until("the replica's link is up", || {
            super::info_field(&replica.cli(&["info", "replication"]), "master_link_status")
                .as_deref()
                == Some("up")
        });
        replica
    }

    /// Starts one on `port` with no persistence of its own and `extra` settings, after
    /// `prepare` has put what it needs in its directory (a `dump.rdb` to load, say).
    pub fn start(port: u16, extra: &[&str], prepare: impl FnOnce(&Path)) -> RedisServer {
        let dir = tempfile::tempdir().unwrap();
        prepare(dir.path());
        let status = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""])
            .args(["--appendonly", "no", "--daemonize", "yes"])
            .arg("--dir")
            .arg(dir.path())
            .arg("--logfile")
            .arg(dir.path().join("log"))
            .args(extra)
            .status()
            .expect("redis-server runs (test.sh installs Debian's redis-server)");
        assert!(status.success());
        let server = RedisServer { port, dir };
        for _ in 0..100 {
            if server.cli(&["ping"]) == "PONG" {
                return server;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("redis-server did not start on {port}:\n{}", server.log());
    }

    /// `redis-cli -p PORT args...`, its output trimmed.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .arg("-p")
            .arg(self.port.to_string())
            .args(args)
            .output()
            .expect("redis-cli runs");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Its log, for a failure's message.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.cli(&["shutdown", "nosave"]);
    }
}
