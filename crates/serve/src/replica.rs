//! The replica's side of replication (issue #46): `REPLICAOF host port` (and `--replicaof`)
//! makes the server follow a master (a `shale serve` or a Redis 7), `REPLICAOF NO ONE`
//! promotes it back. While it follows, clients may read but not write (`-READONLY`).
//!
//! Stages of the link (a task, started again a second after any failure, the failure in
//! INFO's `shale_master_link_error` and in the log when it first happens or changes):
//! 1. Handshake, with `AUTH` where a password is set (`--masterauth`, `CONFIG SET
//!    masterauth`, read anew at each attempt), and a full or partial resync
//!    ([`crate::replica_link::Link::resync`]).
//! 2. The snapshot (RDB) decoded, then loaded under every stripe lock: database 0 deleted,
//!    the string keys written in batches of at most 1 MiB. A key of another type, or in
//!    another database, is logged by name and skipped, never silently dropped.
//! 3. The stream: each command run as a client's would be, by the same code, in a session
//!    that the read-only rule lets write, its run flushed before the next command is read, so
//!    that the offset the link acknowledges (`REPLCONF ACK`) is always applied. `SELECT` of
//!    a database other than 0 skips what follows until `SELECT 0`; `MULTI`/`EXEC` are
//!    dropped and the commands between applied one by one; a command this server does not
//!    have (another type's) is logged and skipped.
//!
//! The replica's position (the master's replication id and the offset applied) is written
//! in the batch of every command it applies, and with the snapshot's last batch, under the
//! server key `0xff "repl-position"`: so it is durable exactly with the data it describes.
//! A lost link, and a restart, ask the master to continue from it (a partial resync when the
//! master's backlog still holds it). A command that writes nothing (PING, SELECT, one
//! skipped) leaves the stored position behind it: replayed after a restart, it writes
//! nothing again. `REPLICAOF NO ONE` deletes the position: the promoted data is its own.
//!
//! The bytes of every run applied are passed on to the server's own stream, which is the
//! master's while it follows (replication.rs, "A replica's stream"), under the stream's
//! `apply_gate`, held from the run's first command until they are.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use shale_lsm::WriteBatch;

use crate::commands::{self, Session};
use crate::keyspace::{REPL_POSITION_KEY, now_ms};
use crate::rdb::{self, Item};
use crate::replica_link::{Link, MasterAuth, Resync};
use crate::resp::{Protocol, Reply, Request};
use crate::run::Run;
use crate::server::Shared;
use crate::value::Value;

/// How long the link waits for its master at each step (Redis's `repl-timeout`).
pub const LINK_TIMEOUT: Duration = Duration::from_secs(60);
/// Pause before the link is tried again after a failure.
const RETRY_PAUSE: Duration = Duration::from_secs(1);
/// Most bytes of one batch of the snapshot's keys.
const LOAD_BATCH_BYTES: usize = 1 << 20;

/// How the link stands, for INFO and ROLE.
#[derive(Debug, Default)]
pub struct LinkStatus {
    /// Whether the snapshot is loaded and the stream flows.
    pub up: AtomicBool,
    /// The replication offset applied.
    pub offset: AtomicU64,
    /// When the master was last heard from, Unix ms.
    pub last_io_ms: AtomicU64,
    /// Full resyncs made on this link.
    pub full_resyncs: AtomicU64,
    /// Partial resyncs made (the master continued from the offset applied).
    pub partial_resyncs: AtomicU64,
    /// When the stream last stopped flowing, Unix ms; 0 while it never flowed. INFO's
    /// `master_link_down_since_seconds`, which Redis Sentinel reads to leave out of a
    /// failover a replica that lost its master long before the master went down.
    pub down_since_ms: AtomicU64,
    /// Why the link is down, while it is (INFO's `shale_master_link_error`): a refused
    /// password reads there as well as in the log, never a silent loop of retries.
    pub error: Mutex<Option<String>>,
}

impl LinkStatus {
    fn set_error(&self, e: Option<String>) {
        *self.error.lock().unwrap_or_else(|e| e.into_inner()) = e;
    }

    /// Why the link is down, if it failed.
    pub fn error(&self) -> Option<String> {
        self.error.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

struct Following {
    host: String,
    port: u16,
    task: tokio::task::AbortHandle,
    status: Arc<LinkStatus>,
}

/// Whether the server follows a master, and the link's task.
#[derive(Default)]
pub struct Follower {
    replica: AtomicBool,
    following: Mutex<Option<Following>>,
    /// `CONFIG SET masterauth` / `masteruser`, once given: they replace the flags'.
    auth_set: Mutex<Option<AuthSetting>>,
}

/// The link's credentials as `CONFIG SET` left them (an empty password: none).
#[derive(Clone, Default)]
struct AuthSetting {
    user: Option<String>,
    password: Option<String>,
}

/// A master the server follows, as INFO and ROLE report it.
pub struct MasterView {
    /// Its host, as given.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// The link.
    pub status: Arc<LinkStatus>,
}

impl Follower {
    /// Whether the server is a replica now (writes refused).
    pub fn is_replica(&self) -> bool {
        self.replica.load(Ordering::Acquire)
    }

    /// The master followed, if any.
    pub fn master(&self) -> Option<MasterView> {
        let f = self.following.lock().unwrap_or_else(|e| e.into_inner());
        f.as_ref().map(|f| MasterView {
            host: f.host.clone(),
            port: f.port,
            status: f.status.clone(),
        })
    }

    /// Follows `host:port` from now on (a link to another master is dropped first); false
    /// when it already follows that one.
    pub fn follow(&self, shared: &Arc<Shared>, host: &str, port: u16) -> bool {
        let mut f = self.following.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = f.as_ref() {
            if old.host == host && old.port == port {
                return false;
            }
            old.task.abort();
        }
        self.replica.store(true, Ordering::Release);
        let status = Arc::new(LinkStatus::default());
        let task = tokio::spawn(follow(shared.clone(), host.to_string(), port, status.clone()));
        *f = Some(Following { host: host.to_string(), port, task: task.abort_handle(), status });
        log::info!("following the master {host}:{port}");
        true
    }

    /// What the link gives a master with a password: `CONFIG SET masterauth` and
    /// `masteruser` once set, else the flags' (`--masterauth`, `--masteruser`). Read at each
    /// attempt, so a new password takes effect at the next retry (within a second), as in
    /// Redis.
    pub fn auth(&self, config: &crate::Config) -> Option<MasterAuth> {
        let (user, password) = self.auth_setting(config);
        password.map(|password| MasterAuth { user, password })
    }

    /// The user and password in force, for `CONFIG GET`.
    pub fn auth_setting(&self, config: &crate::Config) -> (Option<String>, Option<String>) {
        let set = self.auth_set.lock().unwrap_or_else(|e| e.into_inner());
        match set.as_ref() {
            Some(a) => (a.user.clone(), a.password.clone()),
            None => (config.masteruser.clone(), config.masterauth.clone()),
        }
    }

    /// `CONFIG SET masterauth` (`user` false) or `masteruser` (`user` true); an empty
    /// value clears it, as in Redis.
    fn set_auth(&self, config: &crate::Config, user: bool, value: Option<String>) {
        let mut set = self.auth_set.lock().unwrap_or_else(|e| e.into_inner());
        let current = set.get_or_insert_with(|| AuthSetting {
            user: config.masteruser.clone(),
            password: config.masterauth.clone(),
        });
        if user {
            current.user = value;
        } else {
            current.password = value;
        }
    }

    /// Stops following (`REPLICAOF NO ONE`): the server is a master again, with the data it
    /// has.
    pub fn promote(&self) {
        let mut f = self.following.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = f.take() {
            old.task.abort();
            log::info!("promoted: no longer following {}:{}", old.host, old.port);
        }
        self.replica.store(false, Ordering::Release);
    }
}

/// `REPLICAOF host port | NO ONE` (and `SLAVEOF`).
pub async fn replicaof(shared: &Arc<Shared>, args: &Request) -> Reply {
    if args[1].eq_ignore_ascii_case(b"no") && args[2].eq_ignore_ascii_case(b"one") {
        let repl = shared.keyspace.replication();
        // The link is stopped between two runs, never with one written and not mirrored.
        let gate = repl.apply_gate.lock().await;
        shared.follower.promote();
        // The stream goes on under a new id, the master's kept second: its other replicas,
        // pointed here, continue (replication.rs).
        repl.promote();
        drop(gate);
        // Its data is its own from now on: a later REPLICAOF must not continue from it.
        if let Err(e) = shared.keyspace.forget_repl_position().await {
            return crate::commands::failed(e);
        }
        return Reply::OK;
    }
    let port = match commands::parse_i64(&args[2]) {
        Some(p) if (1..=i64::from(u16::MAX)).contains(&p) => p as u16,
        _ => return Reply::err("Invalid master port"),
    };
    let host = String::from_utf8_lossy(&args[1]).into_owned();
    if shared.follower.follow(shared, &host, port) {
        Reply::OK
    } else {
        Reply::Status("OK Already connected to specified master".into())
    }
}

/// `CONFIG SET parameter value [parameter value ...]`: `masterauth` and `masteruser`, the
/// link's credentials (an empty value clears one), which the next attempt of the link uses.
/// Every other setting is a command-line flag, and is refused by name, as is the whole
/// request then (nothing is set, as Redis sets nothing of a request it refuses).
pub fn config_set(shared: &Shared, args: &Request) -> Reply {
    if args.len() < 4 || args.len() % 2 != 0 {
        return crate::commands::wrong_arity("config|set");
    }
    let mut changes = Vec::new();
    for pair in args[2..].chunks(2) {
        let name = pair[0].to_ascii_lowercase();
        let user = match name.as_slice() {
            b"masterauth" => false,
            b"masteruser" => true,
            _ => {
                return Reply::err(format!(
                    "CONFIG SET {} is not supported: shale serve sets only masterauth and \
                     masteruser at run time; its other settings are its command-line flags",
                    String::from_utf8_lossy(&pair[0])
                ));
            }
        };
        let Ok(value) = String::from_utf8(pair[1].clone()) else {
            return Reply::err(format!(
                "CONFIG SET {}: the value is not UTF-8",
                String::from_utf8_lossy(&pair[0])
            ));
        };
        changes.push((user, (!value.is_empty()).then_some(value)));
    }
    for (user, value) in changes {
        shared.follower.set_auth(&shared.config, user, value);
    }
    Reply::OK
}

/// The link's task: resync, load, apply the stream; again after a pause on any failure,
/// asking the master to continue from the offset applied (a partial resync, when its
/// backlog still holds it).
async fn follow(shared: Arc<Shared>, host: String, port: u16, status: Arc<LinkStatus>) {
    let addr = format!("{host}:{port}");
    let listening = shared.tcp_addr.map_or(0, |a| a.port());
    // Where the store's data stands in the master's stream, if a replica wrote it: a restart
    // asks to continue from there.
    let mut resume: Option<(String, u64)> = shared.keyspace.repl_position().await.ok().flatten();
    let mut failures = Failures::default();
    loop {
        status.up.store(false, Ordering::Release);
        let from = resume.as_ref().map(|(id, off)| (id.as_str(), *off));
        let auth = shared.follower.auth(&shared.config);
        match Link::resync(&addr, listening, LINK_TIMEOUT, from, auth.as_ref()).await {
            Ok((mut link, resync)) => {
                status.last_io_ms.store(now_ms(), Ordering::Release);
                let loaded = match resync {
                    Resync::Continued => {
                        status.partial_resyncs.fetch_add(1, Ordering::Relaxed);
                        // Under the gate, which `REPLICAOF NO ONE` holds to promote: a link
                        // it stopped never turns the promoted stream back into a mirror.
                        let repl = shared.keyspace.replication();
                        let gate = repl.apply_gate.lock().await;
                        if shared.follower.is_replica() {
                            repl.master_continued(link.replid(), link.offset());
                        }
                        drop(gate);
                        log::info!(
                            "replica of {addr}: partial resync from offset {}",
                            link.offset()
                        );
                        Ok(())
                    }
                    Resync::Full(full) => {
                        status.full_resyncs.fetch_add(1, Ordering::Relaxed);
                        // Whatever was applied before is replaced.
                        resume = None;
                        load(&shared, full.rdb, &full.replid, full.offset).await.map(|n| {
                            log::info!(
                                "replica of {addr}: loaded {n} keys at offset {} of {}",
                                full.offset,
                                full.replid
                            );
                        })
                    }
                };
                // The snapshot's offset acknowledged once it is loaded (a diskless master
                // starts the stream on it; WAIT counts the replica only from then).
                let loaded = match loaded {
                    Ok(()) => link.ack().await.map_err(|e| e.to_string()),
                    Err(e) => Err(e),
                };
                match loaded {
                    Ok(()) => {
                        status.offset.store(link.offset(), Ordering::Release);
                        status.set_error(None);
                        failures = Failures::default();
                        status.up.store(true, Ordering::Release);
                        let e = apply_stream(&shared, &mut link, &status).await;
                        log::warn!("replica of {addr}: the link ended: {e}");
                        status.set_error(Some(e.to_string()));
                        // Every command handed out was applied: continue after the last.
                        resume = Some((link.replid().to_string(), link.offset()));
                        status.down_since_ms.store(now_ms(), Ordering::Release);
                    }
                    Err(e) => failures.report(&addr, &status, format!("taking the snapshot: {e}")),
                }
            }
            Err(e) => failures.report(&addr, &status, e.to_string()),
        }
        status.up.store(false, Ordering::Release);
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}

/// The failures of the link's attempts in a row: each is in INFO at once, and in the log
/// when it differs from the one before and then every [`REPEAT_LOG_EVERY`] attempts, so that
/// a wrong password retried every second says so without filling the log with a line a
/// second.
#[derive(Default)]
struct Failures {
    last: Option<String>,
    repeats: u64,
}

/// A failure repeated is logged again after this many attempts (about a minute).
const REPEAT_LOG_EVERY: u64 = 60;

impl Failures {
    fn report(&mut self, addr: &str, status: &LinkStatus, e: String) {
        if self.last.as_deref() == Some(e.as_str()) {
            self.repeats += 1;
            if self.repeats % REPEAT_LOG_EVERY == 0 {
                log::warn!(
                    "replica of {addr}: {e} (again: {} attempts in a row, retried every \
                     second)",
                    self.repeats + 1
                );
            }
        } else {
            log::warn!("replica of {addr}: {e} (retried every second)");
            self.repeats = 0;
        }
        status.set_error(Some(e.clone()));
        self.last = Some(e);
    }
}

/// Stage 2: the snapshot replaces database 0. The number of keys loaded.
async fn load(
    shared: &Shared,
    rdb_bytes: Vec<u8>,
    replid: &str,
    offset: u64,
) -> Result<usize, String> {
    let decoded = tokio::task::spawn_blocking(move || {
        let mut items = Vec::new();
        rdb::decode(&rdb_bytes, |i| items.push(i)).map(|_| items)
    })
    .await
    .map_err(|e| format!("the decoding task: {e}"))?
    .map_err(|e| format!("the master's snapshot: {e}"))?;
    let mut keys = Vec::with_capacity(decoded.len());
    for item in decoded {
        match item {
            Item::String(k) if k.db == 0 => {
                keys.push((k.key, Value { expires_at_ms: k.expires_at_ms, data: k.value }));
            }
            Item::String(k) => log::warn!(
                "replica: key {:?} of database {} skipped: shale serves database 0 only",
                String::from_utf8_lossy(&k.key),
                k.db
            ),
            Item::Skipped { db, key, kind } => log::warn!(
                "replica: key {:?} (database {db}) of type {kind} skipped: shale serves strings \
                 only",
                String::from_utf8_lossy(&key)
            ),
        }
    }
    let n = keys.len();
    let ks = &shared.keyspace;
    // No replica of this one takes a snapshot while the load replaces the data.
    let _gate = ks.replication().apply_gate.lock().await;
    let _stripes = ks.lock_all_stripes().await;
    // Every key may change: every WATCH is broken, as by FLUSHDB.
    ks.watches().touch_all();
    let mut flush = WriteBatch::new();
    flush.delete_range(&[crate::keyspace::DB0], &[crate::keyspace::DB0 + 1]);
    // Until the last batch is in, the store holds no position: a restart mid-load resyncs
    // in full.
    flush.delete(REPL_POSITION_KEY);
    ks.write(&flush, |out| crate::replication::encode_command(out, &[b"FLUSHDB"]))
        .await
        .map_err(|e| e.to_string())?;
    let mut rest = keys.as_slice();
    while !rest.is_empty() {
        let mut bytes = 0;
        let mut take = 0;
        while take < rest.len() && (take == 0 || bytes < LOAD_BATCH_BYTES) {
            bytes += rest[take].0.len() + rest[take].1.data.len() + 32;
            take += 1;
        }
        let (part, tail) = rest.split_at(take);
        rest = tail;
        let mut batch = WriteBatch::new();
        for (k, v) in part {
            batch.put(&crate::keyspace::engine_key(k), &v.encode());
        }
        if rest.is_empty() {
            batch.put(REPL_POSITION_KEY, format!("{replid} {offset}").as_bytes());
        }
        ks.write(&batch, |out| {
            for (k, v) in part {
                crate::replication::encode_write(out, k, Some(v));
            }
        })
        .await
        .map_err(|e| e.to_string())?;
    }
    if n == 0 {
        let mut b = WriteBatch::new();
        b.put(REPL_POSITION_KEY, format!("{replid} {offset}").as_bytes());
        ks.write(&b, |_| {}).await.map_err(|e| e.to_string())?;
    }
    // From here this server's own stream is its master's, from the snapshot's offset.
    ks.replication().follow_master(replid, offset);
    Ok(n)
}

/// Stage 3: the master's commands, applied one at a time, until the link fails.
async fn apply_stream(
    shared: &Arc<Shared>,
    link: &mut Link,
    status: &LinkStatus,
) -> crate::replica_link::LinkError {
    let mut session = Session::new(0, false);
    session.master_link = true;
    let mut run = Run::new(&shared.keyspace, Protocol::Resp2);
    let mut in_db0 = true;
    let repl = shared.keyspace.replication();
    // Held from a run's first command until it is written and its bytes mirrored
    // (`apply_run`), never across a wait for the master.
    let mut gate = None;
    loop {
        // The commands already read run as one run, written as one batch with the position
        // after the last (a run of a client's pipeline, the same code): one engine write per
        // read of the socket, not one per command. Before the link may wait or acknowledge
        // (`next_command`), and before a GETACK is answered, the run is written: the offset
        // acknowledged is always applied.
        let before = link.offset();
        let buffered = match link.next_buffered() {
            Ok(cmd) => cmd,
            Err(e) => return e,
        };
        let cmd = match buffered {
            Some(cmd) => cmd,
            None => {
                apply_run(&mut run, link, status, repl, &mut gate).await;
                match link.next_command().await {
                    Ok(cmd) => cmd,
                    Err(e) => return e,
                }
            }
        };
        if gate.is_none() {
            gate = Some(repl.apply_gate.lock().await);
        }
        status.last_io_ms.store(now_ms(), Ordering::Release);
        let name = cmd[0].to_ascii_lowercase();
        match name.as_slice() {
            b"select" => {
                in_db0 = cmd.get(1).is_some_and(|d| d.as_slice() == b"0");
                if !in_db0 {
                    log::warn!(
                        "replica: the master selected database {}: its writes are skipped \
                         (shale serves database 0 only)",
                        String::from_utf8_lossy(cmd.get(1).map_or(&b""[..], |d| d))
                    );
                }
            }
            b"replconf" => {
                // A GETACK handed out from the buffer: answered once what came before it is
                // written.
                apply_run(&mut run, link, status, repl, &mut gate).await;
                if let Err(e) = link.ack_getack().await {
                    return e;
                }
            }
            b"multi" | b"exec" | b"ping" => {}
            _ if in_db0 => {
                // Any write the command makes of the run before its own (a command that does
                // not run in runs writes the run first) goes with the position before it.
                run.server_entry = Some(position(link, before));
                commands::execute(shared, &mut session, &mut run, cmd).await;
                run.server_entry = Some(position(link, link.offset()));
                if run.len() >= crate::run::RUN_COMMANDS_MAX {
                    apply_run(&mut run, link, status, repl, &mut gate).await;
                }
                continue;
            }
            _ => {}
        }
        if run.is_empty() {
            status.offset.store(link.offset(), Ordering::Release);
        }
    }
}

/// The stored position `replid offset` (`REPL_POSITION_KEY`'s value).
fn position(link: &Link, offset: u64) -> (&'static [u8], Vec<u8>) {
    (REPL_POSITION_KEY, format!("{} {}", link.replid(), offset).into_bytes())
}

/// Writes the run of the master's commands applied so far (with the position after them, set
/// by the caller), passes their bytes on to this server's own stream (its replicas'), logs
/// the commands not applied here, publishes the offset reached, and lets go of the gate.
async fn apply_run(
    run: &mut Run<'_>,
    link: &mut Link,
    status: &LinkStatus,
    repl: &crate::replication::Replication,
    gate: &mut Option<tokio::sync::MutexGuard<'_, ()>>,
) {
    let errors = run.errors;
    run.flush().await;
    repl.mirror(&link.take_raw());
    *gate = None;
    if run.errors > errors {
        log::warn!(
            "replica: {} of the master's commands were not applied here; the last: {}",
            run.errors - errors,
            run.last_error.as_deref().unwrap_or("")
        );
    }
    run.output.clear();
    run.server_entry = None;
    status.offset.store(link.offset(), Ordering::Release);
}
