//! `shale serve --db PATH`: the RESP (Redis protocol) server of `shale-serve` over a store,
//! until SIGTERM or SIGINT, which finish the requests in flight and close the store.
//!
//! `--db` is checked as `bench` checks it ([`store::prepare`]): a missing path or an empty
//! directory gets a new store, a store (its directory, volume file or device) is opened as it
//! is, anything else is refused untouched.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use shale_lsm::Options;
use shale_serve::{AppendFsync, Config, Server, config};

use crate::store;

/// Arguments of `shale serve`.
#[derive(clap::Args)]
pub struct Args {
    /// The store: a directory (made if missing), a volume file or a block device.
    #[arg(long)]
    db: PathBuf,
    /// TCP port; 0 picks a free one (the line printed at start names it). Redis's by
    /// default, so redis-cli and redis-benchmark find the server without flags.
    #[arg(long, default_value_t = config::PORT_DEFAULT)]
    port: u16,
    /// Address to listen on. Loopback by default: anything wider exposes the store to the
    /// network (set --requirepass).
    #[arg(long, default_value = "127.0.0.1")]
    bind: IpAddr,
    /// Also listen on this Unix socket (a stale socket file there is replaced).
    #[arg(long)]
    unixsocket: Option<PathBuf>,
    /// Password clients must give with AUTH before any other command. Visible in the process
    /// list, as Redis's is.
    #[arg(long)]
    requirepass: Option<String>,
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
    /// Most bytes of one request and of one bulk string in it (Redis's proto-max-bulk-len,
    /// less one byte).
    #[arg(long = "max-request-bytes", default_value_t = shale_serve::resp::REQUEST_BYTES_MAX_DEFAULT)]
    max_request_bytes: usize,
    /// The store's memtable size in bytes (db_bench's name); a value is at most half of it.
    #[arg(long = "write_buffer_size")]
    write_buffer_size: Option<usize>,
    /// The store's block cache in bytes (db_bench's name).
    #[arg(long = "cache_size")]
    cache_size: Option<usize>,
}

/// Runs the command: opens the store, serves until a signal, closes the store.
///
/// # Errors
/// A refused `--db`, a store that cannot be opened, an address that cannot be bound, bad
/// flags (named), or the store's error at close.
pub fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let config = Config {
        bind: Some(SocketAddr::new(args.bind, args.port)),
        unix_socket: args.unixsocket.clone(),
        password: args.requirepass.clone(),
        appendfsync: args.appendfsync,
        max_clients: args.maxclients,
        max_request_bytes: args.max_request_bytes,
        threads: args.threads.unwrap_or_else(config::default_threads),
        ..Config::default()
    };
    // Refused before the store is touched.
    config.validate().map_err(|e| format!("shale serve: {e}"))?;
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
    store::validate_for_flags(&options)?;
    // A directory (or nothing yet) gets a store if it has none. A file or a device must hold
    // one already: serve never lays a store over a file or device it did not make, and never
    // empties one (bench does, on request).
    let store_only = std::fs::metadata(&args.db).is_ok_and(|m| !m.is_dir());
    let path = store::prepare(&args.db, store_only)?;
    let db = store::open(&path, options, store_only)?;
    let server = Server::start(db, config)?;
    if let Some(addr) = server.tcp_addr() {
        println!("shale serve: listening on {addr}");
    }
    if let Some(socket) = server.unix_socket() {
        println!("shale serve: listening on unix socket {}", socket.display());
    }
    println!("shale serve: store {}, appendfsync {}", path.display(), args.appendfsync.name());
    server.wait_for_signal()?;
    println!("shale serve: shutting down");
    server.shutdown()?;
    println!("shale serve: store closed");
    Ok(())
}
