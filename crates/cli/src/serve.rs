//! `shale serve --db PATH`: the RESP (Redis protocol) server of `shale-serve` over a store,
//! until SIGTERM or SIGINT, which finish the requests in flight and close the store.
//!
//! Stages at start, each refusing with the flag named:
//! 1. The flags, and the password from `--requirepass`, `--requirepass_file` or the
//!    `SHALE_REQUIREPASS` environment variable (one of them at most); the same for the
//!    password a replica gives its master (`--masterauth`, `--masterauth_file`,
//!    `SHALE_MASTERAUTH`).
//! 2. The listeners are bound ([`Listeners::bind`]): an address in use fails here, before
//!    `--db` is touched, so a server that cannot listen never creates a store.
//! 3. `--db` is checked as `bench` checks it ([`store::prepare`]): a missing path or an empty
//!    directory gets a new store, a store (its directory, volume file or device) is opened as
//!    it is, anything else is refused untouched.
//! 4. The store must be serve's own (`shale_serve::marker`), and `--maxclients` must fit
//!    the open-file limit (`shale_serve::descriptors`): [`Server::start_on`].

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use shale_lsm::Options;
use shale_serve::{AppendFsync, Config, Listeners, Server, config};

use crate::store;

/// Arguments of `shale serve`.
#[derive(clap::Args)]
pub struct Args {
    /// The store: a directory (made if missing), a volume file or a block device.
    #[arg(long)]
    db: PathBuf,
    /// TCP port; 0 turns TCP off (as in Redis: give --unixsocket then). Redis's by default,
    /// so redis-cli and redis-benchmark find the server without flags.
    #[arg(long, default_value_t = config::PORT_DEFAULT)]
    port: u16,
    /// Address to listen on. Loopback by default: anything wider exposes the store to the
    /// network (set a password, or protected mode refuses clients from other addresses).
    #[arg(long, default_value = "127.0.0.1")]
    bind: IpAddr,
    /// Also listen on this Unix socket (a stale socket file there is replaced).
    #[arg(long)]
    unixsocket: Option<PathBuf>,
    /// Password clients must give with AUTH before any other command. Visible in the process
    /// list: prefer --requirepass_file or the SHALE_REQUIREPASS environment variable.
    #[arg(long)]
    requirepass: Option<String>,
    /// Read the password from this file (its first line; a trailing newline is not part of
    /// it), so that it is not in the process list.
    #[arg(long = "requirepass_file")]
    requirepass_file: Option<PathBuf>,
    /// Redis's protected mode: with no password, TCP clients from addresses other than
    /// loopback are answered -DENIED and closed. `no` serves them.
    #[arg(long = "protected-mode", default_value = "yes", value_parser = yes_no, action = clap::ArgAction::Set)]
    protected_mode: bool,
    /// When writes are durable: always (every write synced before its reply), everysec (one
    /// sync a second) or no (left to the engine; a crash of the process loses nothing, a
    /// power loss may).
    #[arg(long, default_value = "everysec")]
    appendfsync: AppendFsync,
    /// Most clients connected at once.
    #[arg(long, default_value_t = config::MAX_CLIENTS_DEFAULT)]
    maxclients: usize,
    /// Worker threads of the server's runtime (the engine has threads of its own) [default:
    /// half the cores, at least 1].
    #[arg(long)]
    threads: Option<usize>,
    /// Most bytes of one request and of one bulk string in it, for an authenticated client
    /// (Redis's proto-max-bulk-len, less one byte). Before AUTH, Redis's tighter bounds hold.
    #[arg(
        long = "proto-max-bulk-len",
        visible_alias = "max-request-bytes",
        default_value_t = shale_serve::resp::REQUEST_BYTES_MAX_DEFAULT
    )]
    max_request_bytes: usize,
    /// Bytes of the replication stream kept for a replica that reconnects to resume with a
    /// partial resync (Redis's repl-backlog-size).
    #[arg(long = "repl-backlog-size", default_value_t = config::REPL_BACKLOG_SIZE_DEFAULT)]
    repl_backlog_size: usize,
    /// Refuse writes (-NOREPLICAS) while fewer replicas than this are online and acknowledged
    /// within --min-replicas-max-lag seconds (0: never refuse).
    #[arg(long = "min-replicas-to-write", default_value_t = 0)]
    min_replicas_to_write: usize,
    /// Seconds since a replica's last acknowledgement within which it counts for
    /// --min-replicas-to-write.
    #[arg(long = "min-replicas-max-lag", default_value_t = 10)]
    min_replicas_max_lag: u64,
    /// Start as a replica of the master at HOST PORT (a shale serve or a Redis 7), as
    /// `REPLICAOF HOST PORT` would: read-only to clients until `REPLICAOF NO ONE`.
    #[arg(long, num_args = 2, value_names = ["HOST", "PORT"])]
    replicaof: Option<Vec<String>>,
    /// What this server, as a replica, tells Redis Sentinel in INFO (slave_priority):
    /// Sentinel promotes the replica with the lowest, never one of 0 (Redis's
    /// replica-priority).
    #[arg(long = "replica-priority", default_value_t = 100)]
    replica_priority: u32,
    /// Password this server, as a replica, gives a master that has one (AUTH on its link;
    /// Redis's masterauth). Visible in the process list: prefer --masterauth_file or the
    /// SHALE_MASTERAUTH environment variable. CONFIG SET masterauth replaces it.
    #[arg(long)]
    masterauth: Option<String>,
    /// Read the master's password from this file (its first line), so that it is not in the
    /// process list.
    #[arg(long = "masterauth_file")]
    masterauth_file: Option<PathBuf>,
    /// User the replica's link authenticates as (AUTH user password; Redis's masteruser);
    /// needs the master's password.
    #[arg(long)]
    masteruser: Option<String>,
    /// The store's memtable size in bytes (db_bench's name); a value is at most half of it.
    #[arg(long = "write_buffer_size")]
    write_buffer_size: Option<usize>,
    /// The store's block cache in bytes (db_bench's name).
    #[arg(long = "cache_size")]
    cache_size: Option<usize>,
    /// How the store's flush and compaction threads compete for the CPU with the serving
    /// thread: low (niceness 19, serve's default: a reply never waits out a compaction's
    /// time slice, and compactions still have every cycle the server leaves), normal (the
    /// engine's own default) or idle (`SCHED_IDLE`: they run only on cores the server and
    /// its clients leave free) (`Options::background_cpu_priority`, as `shale bench` and
    /// `shale ycsb` take it).
    #[arg(long = "background_cpu_priority", default_value = "low", value_parser = crate::bench::parse_cpu_priority)]
    background_cpu_priority: shale_lsm::CpuPriority,
}

/// `--replicaof HOST PORT`, its port checked.
fn replicaof(args: &Args) -> Result<Option<(String, u16)>, String> {
    let Some(v) = &args.replicaof else { return Ok(None) };
    let port = v[1].parse::<u16>().ok().filter(|&p| p != 0).ok_or_else(|| {
        format!("shale serve: --replicaof {} {}: the port is not in 1..=65535", v[0], v[1])
    })?;
    Ok(Some((v[0].clone(), port)))
}

/// The environment variable a password may come from.
pub const PASSWORD_ENV: &str = "SHALE_REQUIREPASS";

/// The environment variable the master's password (`--masterauth`) may come from.
pub const MASTERAUTH_ENV: &str = "SHALE_MASTERAUTH";

/// Where one secret may come from: a flag, a file's first line, or the environment.
struct SecretSources<'a> {
    what: &'static str,
    flag: &'static str,
    value: Option<&'a String>,
    file_flag: &'static str,
    file: Option<&'a PathBuf>,
    env: &'static str,
}

/// `yes` or `no`, as Redis's configuration writes a switch.
fn yes_no(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err(format!("{s:?} is not yes or no")),
    }
}

/// The password: from `--requirepass`, `--requirepass_file` or `SHALE_REQUIREPASS`, at most
/// one of them.
fn password(args: &Args) -> Result<Option<String>, String> {
    secret(&SecretSources {
        what: "the password",
        flag: "--requirepass",
        value: args.requirepass.as_ref(),
        file_flag: "--requirepass_file",
        file: args.requirepass_file.as_ref(),
        env: PASSWORD_ENV,
    })
}

/// The master's password: from `--masterauth`, `--masterauth_file` or `SHALE_MASTERAUTH`, at
/// most one of them.
fn masterauth(args: &Args) -> Result<Option<String>, String> {
    secret(&SecretSources {
        what: "the master's password",
        flag: "--masterauth",
        value: args.masterauth.as_ref(),
        file_flag: "--masterauth_file",
        file: args.masterauth_file.as_ref(),
        env: MASTERAUTH_ENV,
    })
}

/// A secret from one of its sources, at most one given.
fn secret(s: &SecretSources<'_>) -> Result<Option<String>, String> {
    let from_env = std::env::var_os(s.env);
    let given = [s.value.is_some(), s.file.is_some(), from_env.is_some()];
    if given.iter().filter(|&&g| g).count() > 1 {
        return Err(format!(
            "{} is given more than one way ({}, {}, {}); give one",
            s.what, s.flag, s.file_flag, s.env
        ));
    }
    if let Some(path) = s.file {
        return password_file(s.file_flag, path).map(Some);
    }
    if let Some(value) = from_env {
        return value
            .into_string()
            .map(Some)
            .map_err(|_| format!("{}: the password is not UTF-8", s.env));
    }
    Ok(s.value.cloned())
}

/// A password file's first line. A file others may read is used, with a warning.
fn password_file(flag: &str, path: &Path) -> Result<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let named = |e: &dyn std::fmt::Display| format!("{flag} {}: {e}", path.display());
    let bytes = std::fs::read(path).map_err(|e| named(&e))?;
    let text = String::from_utf8(bytes).map_err(|_| named(&"the password is not UTF-8"))?;
    let line = text.lines().next().unwrap_or("");
    if line.is_empty() {
        return Err(named(&"the file's first line is empty"));
    }
    if let Ok(meta) = std::fs::metadata(path) {
        let mode = meta.permissions().mode();
        if mode & 0o077 != 0 {
            eprintln!(
                "shale serve: warning: {flag} {} may be read by other users (mode {:o}); chmod \
                 600 it",
                path.display(),
                mode & 0o777
            );
        }
    }
    Ok(line.to_string())
}

/// Runs the command (the stages of the module comment), serves until a signal, closes the
/// store.
///
/// # Errors
/// A refused `--db`, a store that cannot be opened or is not serve's, an address that cannot
/// be bound, bad flags (named), or the store's error at close.
pub fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let password = password(args).map_err(|e| format!("shale serve: {e}"))?;
    let masterauth = masterauth(args).map_err(|e| format!("shale serve: {e}"))?;
    let config = Config {
        // Port 0 is TCP off, as in Redis (the library's port 0, a free port, is for tests).
        bind: (args.port != 0).then(|| SocketAddr::new(args.bind, args.port)),
        unix_socket: args.unixsocket.clone(),
        password,
        protected_mode: args.protected_mode,
        appendfsync: args.appendfsync,
        max_clients: args.maxclients,
        max_request_bytes: args.max_request_bytes,
        threads: args.threads.unwrap_or_else(config::default_threads),
        repl_backlog_size: args.repl_backlog_size,
        min_replicas_to_write: args.min_replicas_to_write,
        min_replicas_max_lag: args.min_replicas_max_lag,
        replicaof: replicaof(args)?,
        replica_priority: args.replica_priority,
        masterauth,
        masteruser: args.masteruser.clone(),
        ..Config::default()
    };
    // Refused before the store is touched.
    config.validate().map_err(|e| format!("shale serve: {}", shale_io::Chain(&e)))?;
    // Keys past their expiry go when compaction meets them, not only when read.
    let mut options = Options {
        compaction_filter: Some(std::sync::Arc::new(shale_serve::ExpiredKeys)),
        ..Options::default()
    };
    if let Some(bytes) = args.write_buffer_size {
        options.write_buffer_bytes = bytes;
    }
    if let Some(bytes) = args.cache_size {
        options.block_cache_bytes = bytes;
    }
    options.background_cpu_priority = args.background_cpu_priority;
    store::validate_for_flags(&options)?;
    // Bound before the store is opened or made: a server that cannot listen leaves no store.
    let listeners =
        Listeners::bind(&config).map_err(|e| format!("shale serve: {}", shale_io::Chain(&e)))?;
    // A directory (or nothing yet) gets a store if it has none. A file or a device must hold
    // one already: serve never lays a store over a file or device it did not make, and never
    // empties one (bench does, on request).
    let store_only = std::fs::metadata(&args.db).is_ok_and(|m| !m.is_dir());
    let path = store::prepare(&args.db, store_only)?;
    let db = store::open(&path, options, store_only)?;
    let mut server = Server::start_on(listeners, db, config).map_err(|e| match e {
        shale_serve::Error::NotServeStore(_) => {
            format!("shale serve: --db {}: {}", path.display(), shale_io::Chain(&e))
        }
        e => format!("shale serve: {}", shale_io::Chain(&e)),
    })?;
    // Before the lines that tell a supervisor (or a test) the server is up, so that its
    // SIGTERM right after them is a clean shutdown, not the default death.
    server.catch_signals()?;
    if let Some(addr) = server.tcp_addr() {
        println!("shale serve: listening on {addr}");
    }
    if let Some(socket) = server.unix_socket() {
        println!("shale serve: listening on unix socket {}", socket.display());
    }
    println!(
        "shale serve: store {}, appendfsync {}, maxclients {}",
        path.display(),
        args.appendfsync.name(),
        server.max_clients()
    );
    server.wait_for_signal()?;
    println!("shale serve: shutting down");
    server.shutdown()?;
    println!("shale serve: store closed");
    Ok(())
}
