//! The server: a tokio runtime of a few worker threads, TCP and Unix socket listeners, one
//! task per connection, and a graceful shutdown that closes the store.
//!
//! Stages of a connection ([`serve_connection`]):
//! 1. Parse every whole request in the read buffer (pipelining: a client may send many
//!    before reading any reply).
//! 2. Run each in order and encode its reply into the output buffer; replies therefore go out
//!    in request order. The output is written early when it passes [`OUTPUT_FLUSH_BYTES`], so
//!    a long pipeline of large replies does not gather in memory.
//! 3. Write the output, then read more. A protocol error is answered and the connection
//!    closed; so is `QUIT`. End of input (the client shut its write side) ends the
//!    connection after every whole request before it has been answered.
//!
//! Shutdown ([`Server::shutdown`]): stop accepting; each connection finishes the requests it
//! has read, writes their replies and closes (one idle in a read closes at once); after all
//! have closed (or [`SHUTDOWN_GRACE`] has passed) the runtime stops and the store is closed,
//! which flushes its memtables.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use shale_lsm::Db;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

use crate::commands::{self, Session};
use crate::config::{AppendFsync, Config};
use crate::error::{Error, Result};
use crate::keyspace::Keyspace;
use crate::resp::{Reply, Request, RequestParser};

/// Bytes a connection reads at a time (at least: a large request grows its buffer).
const READ_CHUNK_BYTES: usize = 16 << 10;
/// Read buffer capacity a connection keeps while idle; a larger one (left by a large request)
/// is freed.
const INPUT_KEPT_BYTES_MAX: usize = 1 << 20;
/// Output written before the next request of a pipeline runs, once this much has gathered.
pub const OUTPUT_FLUSH_BYTES: usize = 64 << 10;
/// How long shutdown waits for connections to finish what they read before dropping them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// How often `appendfsync everysec` syncs.
pub const EVERYSEC_PERIOD: Duration = Duration::from_secs(1);

/// Counters for INFO.
#[derive(Debug, Default)]
pub struct Counters {
    /// Clients connected now.
    pub connected: AtomicUsize,
    /// Connections accepted since start (refused ones included).
    pub connections_received: AtomicU64,
    /// Connections refused at `max_clients`.
    pub rejected_connections: AtomicU64,
    /// Requests run.
    pub commands_processed: AtomicU64,
    /// Bytes read from clients.
    pub net_input_bytes: AtomicU64,
    /// Bytes written to clients.
    pub net_output_bytes: AtomicU64,
    next_client_id: AtomicU64,
}

/// What every connection shares.
pub struct Shared {
    /// The store.
    pub keyspace: Keyspace,
    /// The settings.
    pub config: Config,
    /// INFO's counters.
    pub counters: Counters,
    /// When the server started.
    pub started: Instant,
    /// The TCP address listened on, its real port when 0 was asked.
    pub tcp_addr: Option<SocketAddr>,
}

/// Decrements the connected count when a connection's task ends, however it ends.
struct ConnectedGuard(Arc<Shared>);

impl Drop for ConnectedGuard {
    fn drop(&mut self) {
        self.0.counters.connected.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A running server. Dropping it without [`Server::shutdown`] stops the runtime and drops
/// the store (which still completes queued writes, but skips close's flush).
pub struct Server {
    runtime: Option<tokio::runtime::Runtime>,
    shared: Option<Arc<Shared>>,
    stop: watch::Sender<bool>,
    tcp_addr: Option<SocketAddr>,
    unix_socket: Option<PathBuf>,
}

impl Server {
    /// Starts serving `db` as `config` says: binds the listeners (a port of 0 picks a free
    /// one) and returns once they accept.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for bad settings or a Unix socket path holding another kind
    /// of file; [`Error::Io`] naming the address that could not be bound or the runtime that
    /// could not start.
    pub fn start(db: Db, config: Config) -> Result<Server> {
        config.validate()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.threads)
            .thread_name("shale-serve")
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| Error::io("starting the runtime", e))?;
        let _entered = runtime.enter();
        let tcp = match config.bind {
            Some(addr) => {
                let l = std::net::TcpListener::bind(addr)
                    .map_err(|e| Error::io(format!("binding {addr}"), e))?;
                l.set_nonblocking(true).map_err(|e| Error::io("setting up the listener", e))?;
                Some(
                    tokio::net::TcpListener::from_std(l)
                        .map_err(|e| Error::io("setting up the listener", e))?,
                )
            }
            None => None,
        };
        let unix = match &config.unix_socket {
            Some(path) => Some(bind_unix(path)?),
            None => None,
        };
        let tcp_addr = match &tcp {
            Some(l) => Some(l.local_addr().map_err(|e| Error::io("reading the bound address", e))?),
            None => None,
        };
        let appendfsync = config.appendfsync;
        let unix_socket = config.unix_socket.clone();
        let shared = Arc::new(Shared {
            keyspace: Keyspace::new(db, appendfsync),
            config,
            counters: Counters::default(),
            started: Instant::now(),
            tcp_addr,
        });
        let (stop, stopped) = watch::channel(false);
        if let Some(l) = tcp {
            runtime.spawn(accept_tcp(l, shared.clone(), stopped.clone()));
        }
        if let Some(l) = unix {
            runtime.spawn(accept_unix(l, shared.clone(), stopped.clone()));
        }
        if appendfsync == AppendFsync::Everysec {
            runtime.spawn(sync_every_second(shared.clone(), stopped));
        }
        drop(_entered);
        Ok(Server { runtime: Some(runtime), shared: Some(shared), stop, tcp_addr, unix_socket })
    }

    /// The TCP address listened on (with the real port when port 0 was asked).
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        self.tcp_addr
    }

    /// The Unix socket listened on.
    pub fn unix_socket(&self) -> Option<&Path> {
        self.unix_socket.as_deref()
    }

    /// Blocks until the process gets SIGTERM or SIGINT.
    ///
    /// # Errors
    /// [`Error::Io`] if the signal handlers cannot be installed.
    pub fn wait_for_signal(&self) -> Result<()> {
        use tokio::signal::unix::{SignalKind, signal};
        let Some(rt) = &self.runtime else { return Ok(()) };
        rt.block_on(async {
            let mut term = signal(SignalKind::terminate())
                .map_err(|e| Error::io("installing the SIGTERM handler", e))?;
            let mut int = signal(SignalKind::interrupt())
                .map_err(|e| Error::io("installing the SIGINT handler", e))?;
            tokio::select! {
                _ = term.recv() => log::info!("SIGTERM: shutting down"),
                _ = int.recv() => log::info!("SIGINT: shutting down"),
            }
            Ok(())
        })
    }

    /// Stops accepting, lets every connection finish the requests it has read (for up to
    /// [`SHUTDOWN_GRACE`]), stops the runtime and closes the store (flushing its memtables).
    ///
    /// # Errors
    /// The store's close error.
    ///
    /// # Panics
    /// If a task still holds the store after the runtime stopped (a bug).
    pub fn shutdown(mut self) -> Result<()> {
        let _ = self.stop.send(true);
        let Some(shared) = self.shared.take() else { return Ok(()) };
        if let Some(rt) = self.runtime.take() {
            let shared = shared.clone();
            rt.block_on(async move {
                let deadline = Instant::now() + SHUTDOWN_GRACE;
                while shared.counters.connected.load(Ordering::Acquire) > 0
                    && Instant::now() < deadline
                {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            });
            // Drops every task still running (a client that never read its replies), and
            // with them their references to the store.
            rt.shutdown_timeout(Duration::from_secs(1));
        }
        if let Some(path) = &self.unix_socket {
            let _ = std::fs::remove_file(path);
        }
        // Every task that held the shared state was dropped with the runtime: one still
        // holding it is a bug.
        let Ok(shared) = Arc::try_unwrap(shared) else {
            panic!("a task still held the store after the runtime stopped");
        };
        Ok(shared.keyspace.into_db().close()?)
    }
}

/// Binds a Unix socket, replacing a stale socket file left by a server that was killed, but
/// nothing else.
fn bind_unix(path: &Path) -> Result<tokio::net::UnixListener> {
    use std::os::unix::fs::FileTypeExt;
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(Error::InvalidArgument(format!(
                "unix socket {}: a file that is not a socket is there; nothing was changed",
                path.display()
            )));
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(Error::InvalidArgument(format!(
                "unix socket {}: another server is listening on it",
                path.display()
            )));
        }
        std::fs::remove_file(path)
            .map_err(|e| Error::io(format!("removing the stale socket {}", path.display()), e))?;
    }
    tokio::net::UnixListener::bind(path)
        .map_err(|e| Error::io(format!("binding unix socket {}", path.display()), e))
}

/// Admits a new connection against `max_clients`: its id, or `None` when refused.
fn admit(shared: &Shared) -> Option<u64> {
    shared.counters.connections_received.fetch_add(1, Ordering::Relaxed);
    let before = shared.counters.connected.fetch_add(1, Ordering::AcqRel);
    if before >= shared.config.max_clients {
        shared.counters.connected.fetch_sub(1, Ordering::AcqRel);
        shared.counters.rejected_connections.fetch_add(1, Ordering::Relaxed);
        return None;
    }
    Some(shared.counters.next_client_id.fetch_add(1, Ordering::Relaxed) + 1)
}

/// Answers a refused connection Redis's error and closes it, without holding up the accept
/// loop on a client that does not read.
fn refuse<S: AsyncWrite + Unpin + Send + 'static>(mut stream: S) {
    tokio::spawn(async move {
        let write = stream.write_all(b"-ERR max number of clients reached\r\n");
        let _ = tokio::time::timeout(Duration::from_secs(1), write).await;
        let _ = stream.shutdown().await;
    });
}

async fn accept_tcp(
    l: tokio::net::TcpListener,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            a = l.accept() => a,
            _ = stop.changed() => return,
        };
        match accepted {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                match admit(&shared) {
                    Some(id) => {
                        tokio::spawn(serve_connection(shared.clone(), stream, stop.clone(), id));
                    }
                    None => refuse(stream),
                }
            }
            Err(e) => accept_failed(e).await,
        }
    }
}

async fn accept_unix(
    l: tokio::net::UnixListener,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            a = l.accept() => a,
            _ = stop.changed() => return,
        };
        match accepted {
            Ok((stream, _)) => match admit(&shared) {
                Some(id) => {
                    tokio::spawn(serve_connection(shared.clone(), stream, stop.clone(), id));
                }
                None => refuse(stream),
            },
            Err(e) => accept_failed(e).await,
        }
    }
}

/// An accept error (out of file descriptors, say) is logged, and accepting pauses briefly
/// rather than spinning on the same error.
async fn accept_failed(e: std::io::Error) {
    log::warn!("accepting a connection: {e}");
    tokio::time::sleep(Duration::from_millis(10)).await;
}

/// `appendfsync everysec`: once a second, a synced write if anything was written.
async fn sync_every_second(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(EVERYSEC_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        if let Err(e) = shared.keyspace.sync_if_dirty().await {
            log::warn!("appendfsync everysec: the once-a-second sync failed: {e}");
        }
    }
}

/// One connection (the stages of the module comment).
async fn serve_connection<S>(
    shared: Arc<Shared>,
    mut stream: S,
    mut stop: watch::Receiver<bool>,
    id: u64,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let _connected = ConnectedGuard(shared.clone());
    let mut parser = RequestParser::new(shared.config.limits());
    let mut session = Session::new(id, shared.config.password.is_some());
    let mut input: Vec<u8> = Vec::with_capacity(READ_CHUNK_BYTES);
    let mut output: Vec<u8> = Vec::new();
    let mut sets: Vec<Request> = Vec::new();
    loop {
        // Stages 1 and 2.
        let mut taken = 0;
        let mut close = false;
        loop {
            let mut took = 0;
            let parsed = parser.next(&input[taken..], &mut took);
            taken += took;
            match parsed {
                Ok(Some(request)) if session.authenticated && is_plain_set(&request) => {
                    // A run of plain SETs in a pipeline becomes one write (below).
                    sets.push(request);
                    if sets.len() >= SET_RUN_MAX {
                        flush_sets(&shared, &session, &mut sets, &mut output).await;
                    }
                }
                Ok(Some(request)) => {
                    flush_sets(&shared, &session, &mut sets, &mut output).await;
                    let reply = commands::execute(&shared, &mut session, request).await;
                    shared.counters.commands_processed.fetch_add(1, Ordering::Relaxed);
                    reply.encode(session.protocol, &mut output);
                    if session.quit {
                        close = true;
                        break;
                    }
                    if output.len() >= OUTPUT_FLUSH_BYTES
                        && !write_out(&shared, &mut stream, &mut output).await
                    {
                        return;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    flush_sets(&shared, &session, &mut sets, &mut output).await;
                    log::debug!("client {id}: protocol error: {e}");
                    Reply::err(format!("Protocol error: {e}"))
                        .encode(session.protocol, &mut output);
                    close = true;
                    break;
                }
            }
        }
        flush_sets(&shared, &session, &mut sets, &mut output).await;
        input.drain(..taken);
        if input.is_empty() && input.capacity() > INPUT_KEPT_BYTES_MAX {
            // A large request is done: give its buffer back rather than hold it while idle.
            input = Vec::with_capacity(READ_CHUNK_BYTES);
        }
        // Stage 3.
        if !write_out(&shared, &mut stream, &mut output).await || close || *stop.borrow() {
            break;
        }
        if input.capacity() - input.len() < READ_CHUNK_BYTES / 4 {
            input.reserve(READ_CHUNK_BYTES);
        }
        let read = tokio::select! {
            r = stream.read_buf(&mut input) => r,
            _ = stop.changed() => break,
        };
        match read {
            Ok(0) => {
                // End of input: every whole request was answered above; a partial one
                // can never complete.
                break;
            }
            Ok(n) => {
                shared.counters.net_input_bytes.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) => {
                log::debug!("client {id}: read: {e}");
                break;
            }
        }
    }
    let _ = stream.shutdown().await;
}

/// Writes and clears the output; false when the client is gone.
async fn write_out<S: AsyncWrite + Unpin>(
    shared: &Shared,
    stream: &mut S,
    output: &mut Vec<u8>,
) -> bool {
    if output.is_empty() {
        return true;
    }
    let written = stream.write_all(output).await;
    shared.counters.net_output_bytes.fetch_add(output.len() as u64, Ordering::Relaxed);
    output.clear();
    written.is_ok()
}

/// Most plain SETs of a pipeline written as one batch.
const SET_RUN_MAX: usize = 256;

/// Whether a request is `SET key value` with no option: a blind write, which a run of can be
/// written as one batch (what `MSET` does) with the same result as one at a time.
fn is_plain_set(request: &Request) -> bool {
    request.len() == 3 && request[0].eq_ignore_ascii_case(b"set")
}

/// Writes a run of plain SETs, oldest first, as one batch under their keys' locks, and
/// answers each: a pipeline of SETs then costs one engine write (one synced append with
/// `appendfsync always`) instead of one each, which is what Redis gets from fsyncing once
/// per pass over its clients. Later SETs of a key win, as one at a time.
async fn flush_sets(
    shared: &Shared,
    session: &Session,
    sets: &mut Vec<Request>,
    output: &mut Vec<u8>,
) {
    if sets.is_empty() {
        return;
    }
    let mut mset: Request = Vec::with_capacity(1 + 2 * sets.len());
    mset.push(b"MSET".to_vec());
    let n = sets.len();
    for mut set in sets.drain(..) {
        let value = set.pop().expect("three arguments");
        let key = set.pop().expect("three arguments");
        mset.push(key);
        mset.push(value);
    }
    let reply = commands::set_run(shared, &mset).await;
    shared.counters.commands_processed.fetch_add(n as u64, Ordering::Relaxed);
    for _ in 0..n {
        reply.encode(session.protocol, output);
    }
}
