//! The server's settings: where it listens, who may talk to it, how durable its writes are,
//! and its bounds.
//!
//! Each setting is a flag of `shale serve` named as Redis names its configuration directive
//! (`--maxclients`, `--requirepass`, `--protected-mode`, ...); errors name the flag, so the
//! message reads the same to a user of the command and of this crate.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::resp;

/// The TCP port by default: Redis's, so `redis-cli` and `redis-benchmark` find the server
/// without flags. A Redis already on it makes the bind fail, naming the address, rather than a
/// client silently talking to the wrong server.
pub const PORT_DEFAULT: u16 = 6379;

/// Most clients connected at once by default (Redis's `maxclients`).
pub const MAX_CLIENTS_DEFAULT: usize = 10_000;

/// Most clients that may be allowed: each holds a task, its buffers and a file descriptor.
pub const MAX_CLIENTS_MAX: usize = 1_000_000;

/// Worker threads of the runtime by default: half the machine's cores, at least one. The
/// other half is for the engine's own threads (flush, compaction, async workers, WAL loggers)
/// and the kernel's network work; more workers than that only take turns on the cores. On 2
/// cores shared with redis-benchmark, one worker against two (medians of 3,
/// `bench/results/2026-11-28-serve-versions/longer-runs.txt`): SETs 83k/s against 75k
/// unpipelined and 588k against 469k pipelined, GETs 83k against 77k unpipelined, and
/// pipelined GETs a tie (699k against 707k).
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
}

/// Most worker threads.
pub const THREADS_MAX: usize = 256;

/// Default `--repl-backlog-size`: Redis's, 1 MiB.
pub const REPL_BACKLOG_SIZE_DEFAULT: usize = 1 << 20;
/// Least `--repl-backlog-size`, Redis's (16 KiB).
pub const REPL_BACKLOG_SIZE_MIN: usize = 16 << 10;

/// When writes are made durable (Redis's `appendfsync`, mapped onto the engine's sync writes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendFsync {
    /// Every write is a sync write (`WriteOptions { sync: true }`): acknowledged once durable
    /// (P1, it survives power loss).
    Always,
    /// Writes are not synced; once a second, if anything was written, one synced write makes
    /// every earlier write durable. A power loss loses at most about a second of writes; a
    /// crash of the process loses none (P2).
    Everysec,
    /// Writes are never synced by the server: they survive a crash of the process (P2), and
    /// become durable when the engine's WAL group or memtable flush syncs them.
    No,
}

impl AppendFsync {
    /// Redis's name of the setting's value.
    pub fn name(self) -> &'static str {
        match self {
            AppendFsync::Always => "always",
            AppendFsync::Everysec => "everysec",
            AppendFsync::No => "no",
        }
    }
}

impl std::str::FromStr for AppendFsync {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<AppendFsync, String> {
        match s.to_ascii_lowercase().as_str() {
            "always" => Ok(AppendFsync::Always),
            "everysec" => Ok(AppendFsync::Everysec),
            "no" => Ok(AppendFsync::No),
            _ => Err(format!("appendfsync {s:?} is not always, everysec or no")),
        }
    }
}

/// The server's settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// TCP address to listen on; `None` for none (a Unix socket only: what `shale serve
    /// --port 0` asks, as Redis's `port 0`). Here port 0 picks a free port, for tests and
    /// embedders: [`crate::Server::tcp_addr`] tells which.
    pub bind: Option<SocketAddr>,
    /// Unix socket path to listen on as well, if any. A stale socket file there is replaced;
    /// any other file there is refused.
    pub unix_socket: Option<PathBuf>,
    /// The password of `AUTH`; with one set, every command but `AUTH`, `HELLO ... AUTH` and
    /// `QUIT` is refused until it is given, and requests are held to Redis's bounds for
    /// unauthenticated clients until then ([`crate::resp::RequestParser::before_auth`]).
    pub password: Option<String>,
    /// Redis's protected mode: with no password set, a TCP client whose address is not a
    /// loopback one is answered `-DENIED ...` and closed. On by default, as in Redis.
    pub protected_mode: bool,
    /// When writes are made durable.
    pub appendfsync: AppendFsync,
    /// Most clients connected at once; one more is answered an error and closed.
    pub max_clients: usize,
    /// Most bytes of one request (and of one bulk string in it).
    pub max_request_bytes: usize,
    /// Most arguments of one request.
    pub max_request_args: usize,
    /// Worker threads of the runtime ([`default_threads`] by default).
    pub threads: usize,
    /// Bytes of the replication stream kept for replicas that reconnect
    /// (`--repl-backlog-size`, Redis's `repl-backlog-size`).
    pub repl_backlog_size: usize,
    /// Writes are refused (`-NOREPLICAS`) while fewer replicas than this are online and
    /// acknowledged within `min_replicas_max_lag` seconds (`--min-replicas-to-write`,
    /// Redis's; 0, the default, never refuses).
    pub min_replicas_to_write: usize,
    /// Seconds since a replica's last acknowledgement within which it counts for
    /// `min_replicas_to_write` (`--min-replicas-max-lag`, Redis's; 10 by default).
    pub min_replicas_max_lag: u64,
    /// The master to follow from the start, as `REPLICAOF host port` would
    /// (`--replicaof HOST PORT`).
    pub replicaof: Option<(String, u16)>,
    /// The password the replica's link gives its master (`AUTH`), for a master with one
    /// (`--masterauth`, `--masterauth_file`, `SHALE_MASTERAUTH`; Redis's `masterauth`).
    /// `CONFIG SET masterauth` replaces it at run time ([`crate::replica::Follower`]).
    pub masterauth: Option<String>,
    /// The user the link authenticates as (`AUTH user password`; `--masteruser`, Redis's
    /// `masteruser`); without it, `AUTH password`, Redis's `default` user.
    pub masteruser: Option<String>,
    /// What a replica tells Redis Sentinel of itself in INFO (`slave_priority`,
    /// `--replica-priority`, Redis's `replica-priority`): Sentinel promotes the replica with
    /// the lowest, and never one of 0. 100 by default, as Redis.
    pub replica_priority: u32,
    /// Test hook (feature `failpoints`): called around every engine write of the clients'
    /// commands ([`crate::keyspace::WriteHook`]).
    #[cfg(feature = "failpoints")]
    #[doc(hidden)]
    pub write_hook: Option<crate::keyspace::WriteHook>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            bind: Some(SocketAddr::from(([127, 0, 0, 1], PORT_DEFAULT))),
            unix_socket: None,
            password: None,
            protected_mode: true,
            appendfsync: AppendFsync::Everysec,
            max_clients: MAX_CLIENTS_DEFAULT,
            max_request_bytes: resp::REQUEST_BYTES_MAX_DEFAULT,
            max_request_args: resp::ARRAY_LEN_MAX_DEFAULT,
            threads: default_threads(),
            repl_backlog_size: REPL_BACKLOG_SIZE_DEFAULT,
            min_replicas_to_write: 0,
            min_replicas_max_lag: 10,
            replicaof: None,
            masterauth: None,
            masteruser: None,
            replica_priority: 100,
            #[cfg(feature = "failpoints")]
            write_hook: None,
        }
    }
}

impl Config {
    /// Refuses settings outside their limits, naming the setting.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the setting, its value and its limit.
    pub fn validate(&self) -> Result<()> {
        let bad = |s: String| Err(Error::InvalidArgument(s));
        if self.bind.is_none() && self.unix_socket.is_none() {
            // Redis: "Configured to not listen anywhere, exiting."
            return bad("nothing to listen on: --port 0 turns TCP off, and no --unixsocket \
                 was given"
                .into());
        }
        if !(1..=MAX_CLIENTS_MAX).contains(&self.max_clients) {
            return bad(format!(
                "--maxclients {} is not in 1..={MAX_CLIENTS_MAX}",
                self.max_clients
            ));
        }
        if !(1..=THREADS_MAX).contains(&self.threads) {
            return bad(format!("--threads {} is not in 1..={THREADS_MAX}", self.threads));
        }
        // A request must at least hold a small command; beyond 4 GiB is no request.
        if !(1024..=(4 << 30)).contains(&self.max_request_bytes) {
            return bad(format!(
                "--proto-max-bulk-len {} is not in 1024..={}",
                self.max_request_bytes,
                4u64 << 30
            ));
        }
        // No flag sets it (the library's users may): named as the setting.
        if !(3..=(1 << 24)).contains(&self.max_request_args) {
            return bad(format!(
                "the most arguments of a request, {}, is not in 3..={}",
                self.max_request_args,
                1 << 24
            ));
        }
        if !(REPL_BACKLOG_SIZE_MIN..=(1 << 40)).contains(&self.repl_backlog_size) {
            return bad(format!(
                "--repl-backlog-size {} is not in {REPL_BACKLOG_SIZE_MIN}..={}",
                self.repl_backlog_size,
                1u64 << 40
            ));
        }
        if self.password.as_deref() == Some("") {
            return bad("--requirepass: an empty password (leave it unset for none)".into());
        }
        if self.masterauth.as_deref() == Some("") {
            return bad("--masterauth: an empty password (leave it unset for none)".into());
        }
        if self.masteruser.is_some() && self.masterauth.is_none() {
            return bad("--masteruser without --masterauth: the user needs its password".into());
        }
        Ok(())
    }

    /// The parser's limits.
    pub fn limits(&self) -> resp::Limits {
        resp::Limits {
            array_len_max: self.max_request_args,
            bulk_bytes_max: self.max_request_bytes,
            request_bytes_max: self.max_request_bytes,
        }
    }
}
