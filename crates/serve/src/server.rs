//! The server: a tokio runtime of a few worker threads, TCP and Unix socket listeners, one
//! task per connection, and a graceful shutdown that closes the store.
//!
//! Start ([`Listeners::bind`], then [`Server::start_on`]): the listeners are bound before
//! the store is opened (a server that cannot listen makes no store), then the store is
//! claimed (`marker.rs`), `max_clients` fitted to the open-file limit (`descriptors.rs`),
//! and the accept loops started.
//!
//! Stages of an accepted connection (`accept_loop`):
//! 1. Protected mode: with no password, a TCP peer that is not loopback is answered
//!    `-DENIED ...` and closed.
//! 2. `max_clients`: one more is answered `-ERR max number of clients reached` and closed.
//!    Both refusals are written in the accept loop, so a refused client holds its
//!    descriptor only until it is answered.
//! 3. Otherwise a task serves it. An accept that fails (out of descriptors) is handled by
//!    `AcceptErrors`: the waiting client is answered with a spare descriptor's room, and
//!    the error logged once an interval.
//!
//! Stages of a connection (`serve_connection`):
//! 1. Parse every whole request in the read buffer (pipelining: a client may send many
//!    before reading any reply).
//! 2. Run each in order in the connection's run (`run.rs`): the commands on keys execute
//!    against the run's overlay, their writes gather into one batch, and their replies wait
//!    for its write; replies therefore go out in request order, and none before the write of
//!    its command and of every command before it. The run is flushed (written, answered) and
//!    the output written early when the replies pass [`OUTPUT_FLUSH_BYTES`], so a long
//!    pipeline of large replies does not gather in memory.
//! 3. Flush the run, write the output, then read more. A protocol error is answered and the connection
//!    closed; so is `QUIT`. End of input (the client shut its write side) ends the
//!    connection after every whole request before it has been answered.
//!
//! Shutdown ([`Server::shutdown`]): stop accepting; each connection finishes the requests it
//! has read, writes their replies and closes (one idle in a read closes at once); after all
//! have closed (or [`SHUTDOWN_GRACE`] has passed) the runtime stops and the store is closed,
//! which flushes its memtables.

use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr};
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
use crate::resp::{Reply, RequestParser};
use crate::run::{RUN_COMMANDS_MAX, Run};

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
    /// The master this server follows, if it is a replica (replica.rs).
    pub follower: crate::replica::Follower,
    /// The connected clients and pub/sub channels (clients.rs).
    pub clients: Arc<crate::clients::Clients>,
    /// INFO's `run_id`: 40 random hex characters, new at every start (Redis Sentinel tells
    /// a restarted instance by it).
    pub run_id: String,
    /// Told by the `SHUTDOWN` command: [`Server::wait_for_signal`] returns as for SIGTERM.
    pub shutdown_asked: tokio::sync::Notify,
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
    /// The SIGTERM and SIGINT streams, once [`Server::catch_signals`] installed them.
    signals: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

/// The sockets a server listens on, bound before any store is opened: an address in use
/// or a Unix socket path held by something else fails here, so a server that cannot listen
/// never creates or touches a store. Dropping them unused removes the Unix socket file they
/// made.
pub struct Listeners {
    tcp: Option<std::net::TcpListener>,
    unix: Option<std::os::unix::net::UnixListener>,
    /// The socket file made, removed when these are dropped unused.
    unix_path: Option<PathBuf>,
}

impl Listeners {
    /// Binds what `config` asks for: its TCP address (port 0 picks a free one) and its Unix
    /// socket (a stale socket file there is replaced, anything else refused).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for bad settings or a Unix socket path holding another kind
    /// of file or a live server; [`Error::Io`] naming the address that could not be bound.
    pub fn bind(config: &Config) -> Result<Listeners> {
        config.validate()?;
        let mut listeners = Listeners { tcp: None, unix: None, unix_path: None };
        if let Some(addr) = config.bind {
            let l = std::net::TcpListener::bind(addr)
                .map_err(|e| Error::io(format!("binding {addr}"), e))?;
            l.set_nonblocking(true).map_err(|e| Error::io("setting up the listener", e))?;
            listeners.tcp = Some(l);
        }
        if let Some(path) = &config.unix_socket {
            let l = bind_unix(path)?;
            listeners.unix_path = Some(path.clone());
            l.set_nonblocking(true).map_err(|e| Error::io("setting up the listener", e))?;
            listeners.unix = Some(l);
        }
        Ok(listeners)
    }

    /// The TCP address bound, with its real port.
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        self.tcp.as_ref().and_then(|l| l.local_addr().ok())
    }
}

impl Drop for Listeners {
    fn drop(&mut self) {
        if let Some(path) = self.unix_path.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Server {
    /// Starts serving `db` as `config` says: binds the listeners (a port of 0 picks a free
    /// one) and returns once they accept. [`Listeners::bind`] then [`Server::start_on`], for
    /// a caller that has its store open already.
    ///
    /// # Errors
    /// As [`Listeners::bind`] and [`Server::start_on`].
    pub fn start(db: Db, config: Config) -> Result<Server> {
        let listeners = Listeners::bind(&config)?;
        Server::start_on(listeners, db, config)
    }

    /// Starts serving `db` on `listeners` (bound first, so that a server that cannot listen
    /// never made a store). Stages:
    /// 1. The store must be serve's own ([`crate::marker::claim`]): one made by serve, an
    ///    empty one (adopted), or one without the marker whose sampled keys and values are
    ///    all serve's (an older serve's, adopted); anything else is refused untouched.
    /// 2. The descriptor limit ([`crate::descriptors::fit`]): the soft `RLIMIT_NOFILE` is
    ///    raised toward what `max_clients` needs, and `max_clients` lowered (with a warning)
    ///    to what the limit allows.
    /// 3. The runtime starts and the listeners accept.
    ///
    /// # Errors
    /// [`Error::NotServeStore`] for a store of other data; [`Error::InvalidArgument`] for
    /// bad settings or a descriptor limit that leaves no room for a client; [`Error::Io`]
    /// for a runtime that could not start; the store's error reading or marking it.
    pub fn start_on(listeners: Listeners, db: Db, mut config: Config) -> Result<Server> {
        config.validate()?;
        match crate::marker::claim(&db)? {
            crate::marker::Claim::Marked => {}
            claim => log::info!("shale serve: {claim}"),
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.threads)
            .thread_name("shale-serve")
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| Error::io("starting the runtime", e))?;
        // Counted once the store, the listeners and the runtime hold theirs.
        let budget = crate::descriptors::fit(config.max_clients)?;
        if let Some(warning) = budget.warning(config.max_clients) {
            log::warn!("{warning}");
        }
        config.max_clients = budget.max_clients;
        if config.protected_mode
            && config.password.is_none()
            && config.bind.is_some_and(|a| !is_loopback(a.ip()))
        {
            log::warn!(
                "protected mode: no password is set, so clients from addresses other than \
                 loopback get -DENIED (set --requirepass, --requirepass_file or \
                 SHALE_REQUIREPASS, or give --protected-mode no)"
            );
        }
        let _entered = runtime.enter();
        let mut listeners = listeners;
        let tcp_addr = listeners.tcp_addr();
        let tcp = match listeners.tcp.take() {
            Some(l) => Some(
                tokio::net::TcpListener::from_std(l)
                    .map_err(|e| Error::io("setting up the listener", e))?,
            ),
            None => None,
        };
        let unix = match listeners.unix.take() {
            Some(l) => Some(
                tokio::net::UnixListener::from_std(l)
                    .map_err(|e| Error::io("setting up the listener", e))?,
            ),
            None => None,
        };
        // From here the server owns the socket file: shutdown removes it.
        let unix_socket = listeners.unix_path.take();
        let appendfsync = config.appendfsync;
        let mut keyspace = Keyspace::new(db, appendfsync);
        keyspace.restore_replication(config.repl_backlog_size)?;
        #[cfg(feature = "failpoints")]
        keyspace.set_write_hook(config.write_hook.clone());
        let shared = Arc::new(Shared {
            keyspace,
            config,
            counters: Counters::default(),
            started: Instant::now(),
            tcp_addr,
            follower: crate::replica::Follower::default(),
            clients: Arc::default(),
            run_id: crate::replication::new_replid(),
            shutdown_asked: tokio::sync::Notify::new(),
        });
        let (stop, stopped) = watch::channel(false);
        if let Some(l) = tcp {
            runtime.spawn(accept_loop(Listener::Tcp(l), shared.clone(), stopped.clone()));
        }
        if let Some(l) = unix {
            runtime.spawn(accept_loop(Listener::Unix(l), shared.clone(), stopped.clone()));
        }
        runtime.spawn(crate::replication::ping_replicas(shared.clone(), stopped.clone()));
        runtime.spawn(crate::replication::expire_keys(shared.clone(), stopped.clone()));
        if let Some((host, port)) = &shared.config.replicaof {
            shared.follower.follow(&shared, host, *port);
        }
        if appendfsync == AppendFsync::Everysec {
            runtime.spawn(sync_every_second(shared.clone(), stopped));
        }
        if appendfsync == AppendFsync::Always {
            // The group commit's committer (commit.rs): it runs until the runtime stops, so
            // that the writes of connections finishing at shutdown are written.
            runtime.spawn(crate::commit::serve(KeyspaceOf(shared.clone())));
        }
        drop(_entered);
        Ok(Server {
            runtime: Some(runtime),
            shared: Some(shared),
            stop,
            tcp_addr,
            unix_socket,
            signals: None,
        })
    }

    /// Most clients served at once: `max_clients` as configured, or lower where the
    /// descriptor limit did not allow it ([`crate::descriptors::fit`]).
    pub fn max_clients(&self) -> usize {
        self.shared.as_ref().map_or(0, |s| s.config.max_clients)
    }

    /// The TCP address listened on (with the real port when port 0 was asked).
    pub fn tcp_addr(&self) -> Option<SocketAddr> {
        self.tcp_addr
    }

    /// The Unix socket listened on.
    pub fn unix_socket(&self) -> Option<&Path> {
        self.unix_socket.as_deref()
    }

    /// Installs the SIGTERM and SIGINT handlers now, so that a signal that comes before
    /// [`Server::wait_for_signal`] (a client served and a supervisor's SIGTERM, all before the
    /// caller got there) is kept for it rather than ending the process at once. Call it
    /// before announcing that the server listens.
    ///
    /// # Errors
    /// [`Error::Io`] if the signal handlers cannot be installed.
    pub fn catch_signals(&mut self) -> Result<()> {
        use tokio::signal::unix::{SignalKind, signal};
        if self.signals.is_some() {
            return Ok(());
        }
        let Some(rt) = &self.runtime else { return Ok(()) };
        let _entered = rt.enter();
        let term = signal(SignalKind::terminate())
            .map_err(|e| Error::io("installing the SIGTERM handler", e))?;
        let int = signal(SignalKind::interrupt())
            .map_err(|e| Error::io("installing the SIGINT handler", e))?;
        self.signals = Some((term, int));
        Ok(())
    }

    /// Blocks until the process gets SIGTERM or SIGINT (installing the handlers first if
    /// [`Server::catch_signals`] did not), or a client sends `SHUTDOWN`.
    ///
    /// # Errors
    /// [`Error::Io`] if the signal handlers cannot be installed.
    pub fn wait_for_signal(&mut self) -> Result<()> {
        self.catch_signals()?;
        let (Some(rt), Some((term, int))) = (&self.runtime, &mut self.signals) else {
            return Ok(());
        };
        let shared = self.shared.clone();
        rt.block_on(async {
            let asked = async {
                match &shared {
                    Some(s) => s.shutdown_asked.notified().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = term.recv() => log::info!("SIGTERM: shutting down"),
                _ = int.recv() => log::info!("SIGINT: shutting down"),
                _ = asked => log::info!("SHUTDOWN: shutting down"),
            }
        });
        Ok(())
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
        let mut all_closed = true;
        if let Some(rt) = self.runtime.take() {
            let shared = shared.clone();
            all_closed = rt.block_on(async move {
                let deadline = Instant::now() + SHUTDOWN_GRACE;
                while shared.counters.connected.load(Ordering::Acquire) > 0
                    && Instant::now() < deadline
                {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                shared.counters.connected.load(Ordering::Acquire) == 0
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
        // Every connection ended on its own, so every batch written was fed to the stream:
        // the replicas may continue after a restart (replication.rs). A task dropped with
        // the runtime may have been between its write and its feed: nothing is kept then,
        // nor by a replica (its link's task, which writes, is no connection).
        if all_closed && !shared.follower.is_replica() {
            if let Err(e) = shared.keyspace.replication().save(shared.keyspace.db()) {
                log::warn!("keeping the replication id and offset: {e} (replicas will resync)");
            }
        }
        Ok(shared.keyspace.into_db().close()?)
    }
}

/// Binds a Unix socket, replacing a stale socket file left by a server that was killed, but
/// nothing else.
fn bind_unix(path: &Path) -> Result<std::os::unix::net::UnixListener> {
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
    std::os::unix::net::UnixListener::bind(path)
        .map_err(|e| Error::io(format!("binding unix socket {}", path.display()), e))
}

/// Redis's answer to a client over `maxclients`.
const MAX_CLIENTS_REACHED: &[u8] = b"-ERR max number of clients reached\r\n";

/// Redis's answer to a client refused by protected mode, naming shale's flags.
const DENIED: &[u8] = b"-DENIED shale serve is running in protected mode because protected \
    mode is enabled and no password is set. In this mode connections are only accepted from \
    the loopback interface. To accept clients from other computers, restart it with a \
    password (--requirepass_file PATH, the SHALE_REQUIREPASS environment variable or \
    --requirepass), or, if you are sure it cannot be reached from the internet, with \
    --protected-mode no.\r\n";

/// Whether an address is on the loopback interface (127.0.0.0/8, ::1, or 127.x mapped into
/// IPv6): the only TCP clients protected mode lets in.
pub fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => a.is_loopback(),
        IpAddr::V6(a) => a.is_loopback() || a.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
    }
}

/// Admits a new connection against `max_clients`: its id, or `None` when refused.
fn admit(shared: &Shared) -> Option<u64> {
    let before = shared.counters.connected.fetch_add(1, Ordering::AcqRel);
    if before >= shared.config.max_clients {
        shared.counters.connected.fetch_sub(1, Ordering::AcqRel);
        shared.counters.rejected_connections.fetch_add(1, Ordering::Relaxed);
        return None;
    }
    Some(shared.counters.next_client_id.fetch_add(1, Ordering::Relaxed) + 1)
}

/// Most bytes read and dropped from a refused client before closing it.
const REFUSED_DRAIN_BYTES_MAX: usize = 4096;

/// Answers a refused connection `error` and closes it, here in the accept loop so that its
/// descriptor is free again before the next accept (a refusal never holds one while the
/// server is short of them). A new socket's send buffer is empty, so the short error is
/// written whole without waiting; a client that already sent a request has it read and
/// dropped first, so that the close sends FIN after the error rather than a reset that
/// could overtake it.
fn refuse<S: std::io::Read + std::io::Write>(
    mut stream: S,
    error: &[u8],
    shutdown: impl FnOnce(&S) -> std::io::Result<()>,
) {
    let _ = stream.write(error);
    let mut drained = 0;
    let mut buf = [0u8; 512];
    while drained < REFUSED_DRAIN_BYTES_MAX {
        match stream.read(&mut buf) {
            Ok(n) if n > 0 => drained += n,
            _ => break,
        }
    }
    let _ = shutdown(&stream);
}

/// A listening socket of either kind.
enum Listener {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener),
}

/// An accepted connection of either kind (a TCP one with its peer's address).
enum Accepted {
    Tcp(tokio::net::TcpStream, SocketAddr),
    Unix(tokio::net::UnixStream),
}

impl Listener {
    async fn accept(&self) -> std::io::Result<Accepted> {
        match self {
            Listener::Tcp(l) => l.accept().await.map(|(s, peer)| Accepted::Tcp(s, peer)),
            Listener::Unix(l) => l.accept().await.map(|(s, _)| Accepted::Unix(s)),
        }
    }
}

impl Accepted {
    /// Refuses the connection with `error` (see [`refuse`]).
    fn refuse(self, error: &[u8]) {
        use std::net::Shutdown;
        match self {
            Accepted::Tcp(s, _) => {
                if let Ok(s) = s.into_std() {
                    refuse(s, error, |s| s.shutdown(Shutdown::Write));
                }
            }
            Accepted::Unix(s) => {
                if let Ok(s) = s.into_std() {
                    refuse(s, error, |s| s.shutdown(Shutdown::Write));
                }
            }
        }
    }
}

/// Accepts connections until shutdown: each is refused by protected mode, refused at
/// `max_clients`, or served by a task of its own.
async fn accept_loop(listener: Listener, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let mut errors = AcceptErrors::new();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.changed() => return,
        };
        match accepted {
            Ok(conn) => {
                shared.counters.connections_received.fetch_add(1, Ordering::Relaxed);
                take(&shared, conn, &stop);
            }
            Err(e) => errors.failed(e, &listener, &shared).await,
        }
    }
}

/// Serves or refuses one accepted connection.
fn take(shared: &Arc<Shared>, conn: Accepted, stop: &watch::Receiver<bool>) {
    if let Accepted::Tcp(_, peer) = &conn {
        if shared.config.protected_mode
            && shared.config.password.is_none()
            && !is_loopback(peer.ip())
        {
            shared.counters.rejected_connections.fetch_add(1, Ordering::Relaxed);
            conn.refuse(DENIED);
            return;
        }
    }
    let Some(id) = admit(shared) else {
        conn.refuse(MAX_CLIENTS_REACHED);
        return;
    };
    match conn {
        Accepted::Tcp(stream, peer) => {
            let _ = stream.set_nodelay(true);
            tokio::spawn(serve_connection(shared.clone(), stream, stop.clone(), id, Some(peer)));
        }
        Accepted::Unix(stream) => {
            tokio::spawn(serve_connection(shared.clone(), stream, stop.clone(), id, None));
        }
    }
}

/// How often at most an accept error is logged: the same error comes back at every accept
/// while it lasts (out of descriptors, thousands of times a second), and one line an
/// interval, with the count of the others, says as much.
pub const ACCEPT_ERROR_LOG_INTERVAL: Duration = Duration::from_secs(10);
/// Pause before accepting again after an error that refusing could not clear.
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(50);

/// What an accept loop keeps to handle its errors: a spare descriptor and the log's pace.
///
/// Out of descriptors (EMFILE, ENFILE), the kernel keeps the waiting clients in the listen
/// queue, unanswered, until a descriptor frees up. The spare is an open `/dev/null` held for
/// that moment: closed, it makes room to accept one client, answer it
/// `-ERR max number of clients reached` and close it; then it is opened again. So every
/// client is answered, none left hanging, and the loop does not spin on the error.
struct AcceptErrors {
    spare: Option<std::fs::File>,
    last_logged: Option<Instant>,
    unlogged: u64,
}

impl AcceptErrors {
    fn new() -> AcceptErrors {
        AcceptErrors { spare: open_spare(), last_logged: None, unlogged: 0 }
    }

    /// Handles an accept error: logs it (at most once an interval), refuses a client with the
    /// spare descriptor's room if descriptors ran out, or pauses.
    async fn failed(&mut self, e: std::io::Error, listener: &Listener, shared: &Shared) {
        if matches!(e.kind(), ErrorKind::ConnectionAborted | ErrorKind::Interrupted) {
            // A client that gave up before it was accepted, or a signal: nothing is wrong.
            return;
        }
        self.log(&e);
        let out_of_descriptors = matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE));
        if out_of_descriptors {
            if let Some(spare) = self.spare.take() {
                drop(spare);
                // A connection is waiting (that is why accept was tried): take it now that
                // a descriptor is free, answer it and close it.
                let again = tokio::time::timeout(ACCEPT_ERROR_BACKOFF, listener.accept()).await;
                if let Ok(Ok(conn)) = again {
                    shared.counters.connections_received.fetch_add(1, Ordering::Relaxed);
                    shared.counters.rejected_connections.fetch_add(1, Ordering::Relaxed);
                    conn.refuse(MAX_CLIENTS_REACHED);
                }
                self.spare = open_spare();
                return;
            }
        }
        tokio::time::sleep(ACCEPT_ERROR_BACKOFF).await;
        if self.spare.is_none() {
            self.spare = open_spare();
        }
    }

    fn log(&mut self, e: &std::io::Error) {
        let due = self.last_logged.is_none_or(|at| at.elapsed() >= ACCEPT_ERROR_LOG_INTERVAL);
        if !due {
            self.unlogged += 1;
            return;
        }
        let hint = if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
            "; clients are refused until descriptors free up (raise `ulimit -n`, or lower \
             --maxclients)"
        } else {
            ""
        };
        let since = match self.unlogged {
            0 => String::new(),
            n => format!(" ({n} more such errors since the last line)"),
        };
        log::warn!("accepting a connection: {e}{hint}{since}");
        self.last_logged = Some(Instant::now());
        self.unlogged = 0;
    }
}

/// The spare descriptor of [`AcceptErrors`]; `None` when none could be opened (out of
/// descriptors already).
fn open_spare() -> Option<std::fs::File> {
    std::fs::File::open("/dev/null").ok()
}

/// The keyspace of the shared state, for a task that needs only it (the committer).
struct KeyspaceOf(Arc<Shared>);

impl std::ops::Deref for KeyspaceOf {
    type Target = Keyspace;
    fn deref(&self) -> &Keyspace {
        &self.0.keyspace
    }
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
            log::warn!(
                "appendfsync everysec: the once-a-second sync failed: {}",
                shale_io::Chain(&e)
            );
        }
    }
}

/// One connection (the stages of the module comment).
async fn serve_connection<S>(
    shared: Arc<Shared>,
    mut stream: S,
    mut stop: watch::Receiver<bool>,
    id: u64,
    peer: Option<SocketAddr>,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let _connected = ConnectedGuard(shared.clone());
    let registration = shared.clients.register(id);
    let mut session = Session::new(id, shared.config.password.is_some());
    // Redis's bounds on a stranger's requests hold until the client authenticates.
    let mut parser = if session.authenticated {
        RequestParser::new(shared.config.limits())
    } else {
        RequestParser::before_auth(shared.config.limits())
    };
    let mut input: Vec<u8> = Vec::with_capacity(READ_CHUNK_BYTES);
    let mut run = Run::new(&shared.keyspace, session.protocol);
    let mut sync = None;
    loop {
        // Stages 1 and 2.
        let mut taken = 0;
        let mut close = false;
        loop {
            let mut took = 0;
            let parsed = parser.next(&input[taken..], &mut took);
            taken += took;
            match parsed {
                Ok(Some(request)) => {
                    commands::execute(&shared, &mut session, &mut run, request).await;
                    shared.counters.commands_processed.fetch_add(1, Ordering::Relaxed);
                    if session.authenticated {
                        parser.authenticated();
                    }
                    if session.quit {
                        close = true;
                        break;
                    }
                    if let Some(request) = session.sync.take() {
                        // PSYNC or SYNC: the connection becomes a replica's link.
                        sync = Some(request);
                        break;
                    }
                    if run.len() >= RUN_COMMANDS_MAX {
                        run.flush().await;
                    }
                    if run.reply_bytes() >= OUTPUT_FLUSH_BYTES {
                        // Replies go out only after their write: the run first.
                        run.flush().await;
                        if !write_out(&shared, &mut stream, &mut run.output).await {
                            return;
                        }
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    log::debug!("client {id}: protocol error: {e}");
                    run.answer(Reply::err(format!("Protocol error: {e}")));
                    close = true;
                    break;
                }
            }
        }
        // Stage 3: nothing staged is held across the wait for the client.
        run.flush().await;
        input.drain(..taken);
        if input.is_empty() && input.capacity() > INPUT_KEPT_BYTES_MAX {
            // A large request is done: give its buffer back rather than hold it while idle.
            input = Vec::with_capacity(READ_CHUNK_BYTES);
        }
        if !run.take_waited_for_commit() && !run.output.is_empty() {
            // Every other connection with requests waiting runs first: the replies then go
            // out back to back, as Redis writes them after its event loop's pass, and a
            // client woken by one is still awake for the next; written as each run ends, on
            // a 2-core VM each send paid a cross-CPU wake of a client asleep since the last
            // (40% of the serving thread under pipelined INCRs: docs/serve.md, "Replies sent
            // after the ready connections ran"). Runs that waited for a group commit
            // (`always`) end together when it is written, and go out back to back anyway.
            tokio::task::yield_now().await;
        }
        if !write_out(&shared, &mut stream, &mut run.output).await || close || *stop.borrow() {
            break;
        }
        if let Some(request) = sync.take() {
            // A replica's link is no client CLIENT KILL TYPE normal names.
            drop(registration);
            drop(run);
            let ip = peer.map(|p| p.ip());
            crate::replication::serve_replica(shared.clone(), stream, input, request, ip, id, stop)
                .await;
            return;
        }
        if input.capacity() - input.len() < READ_CHUNK_BYTES / 4 {
            input.reserve(READ_CHUNK_BYTES);
        }
        let read = tokio::select! {
            r = stream.read_buf(&mut input) => r,
            message = next_message(&mut session.subscriber) => {
                // A pub/sub message (clients.rs): written out with any others waiting, at
                // the top of the loop (nothing else is in the output between requests).
                let mut message = message;
                while let Some(m) = message {
                    crate::commands::pubsub::message(&m).encode(session.protocol, &mut run.output);
                    message = session.subscriber.as_mut().and_then(|s| s.inbox.try_recv().ok());
                }
                continue;
            }
            _ = registration.kill.notified() => {
                log::debug!("client {id}: killed (CLIENT KILL)");
                break;
            }
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
    // Unregistered before the client sees the close: a client that saw it is gone from
    // CLIENT KILL's and PUBLISH's counts.
    drop(registration);
    let _ = stream.shutdown().await;
}

/// The next message in a subscriber's inbox; never, for a connection that subscribed to
/// nothing.
async fn next_message(
    subscriber: &mut Option<crate::clients::Subscriber>,
) -> Option<crate::clients::Message> {
    match subscriber {
        Some(s) => s.inbox.recv().await,
        None => std::future::pending().await,
    }
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
