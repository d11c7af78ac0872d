//! The master's side of replication (issue #46): the replication stream, the replicas fed
//! from it, full and partial resyncs, and the acknowledged offsets `WAIT` counts.
//!
//! The stream. Every batch a client's commands write (`Keyspace::write`) is fed here once
//! the engine has applied it, as the Redis commands of its effects: `SET key value` (with
//! `PXAT ms`, the absolute expiry, when the key has one, so a replica's clock never moves an
//! expiry), `DEL key` (an expired key a read found, a deleted key), `FLUSHDB`; a batch of
//! several writes (MSET, a pipeline's run) is wrapped in `MULTI` ... `EXEC`, so a replica
//! applies it whole. `SELECT 0` comes first in the stream and again after each full resync,
//! as Redis sends it.
//!
//! Why the stream's order is the store's. A batch is fed after it is applied, while its
//! writer still holds the stripe locks of every key it wrote (and FLUSHDB holds every
//! stripe): two batches that touch one key are applied and fed in the same order. Batches
//! on different keys commute, so their order in the stream does not change what a replica
//! ends with. Feeding takes one mutex, held for an append to the backlog and a send to each
//! replica's queue; a write with no replica ever attached only loads a flag.
//!
//! Full resync. Under the same mutex the stream is turned on (the backlog made, on the
//! first replica), the engine's snapshot taken and the offset read: every batch fed before
//! that offset was applied before the snapshot (applied, then fed), so the snapshot holds
//! it. A batch applied before the snapshot but fed after the offset is in both; the stream
//! carries effects (absolute values, absolute expiry times), which applied again leave a key
//! as they found it, so the replica ends with the master's state. The snapshot is read on a
//! blocking thread and sent as RDB while writers go on; their batches wait in the replica's
//! queue, sent once the snapshot is (up to [`REPLICA_QUEUE_BYTES_MAX`], past which the
//! replica is dropped, as Redis's `client-output-buffer-limit replica` does).
//!
//! Partial resync. `PSYNC replid offset` with this master's id and an offset the backlog
//! still holds is answered `+CONTINUE` and the bytes from that offset, under the mutex, so
//! nothing fed meanwhile is lost or sent twice.
//!
//! A replica's stream (Redis's PSYNC2). While the server follows a master its stream is
//! that master's, byte for byte, with its id and offsets: after a full resync it starts empty
//! at the snapshot's offset ([`Replication::follow_master`]), and the link appends the bytes
//! of each run of commands it applied ([`Replication::mirror`]); its own writes feed nothing.
//! The link holds `apply_gate` from a run's first command until it is written and mirrored,
//! and a full resync served takes its snapshot under the gate: the snapshot and its offset
//! agree even for commands that are not idempotent. `REPLICAOF NO ONE`
//! ([`Replication::promote`]) keeps the stream and its offset under a new id, the old one
//! second up to the offset where it ended, so the old master's other replicas continue.
//!
//! Across a clean restart (as Redis 7 keeps `repl-id` and `repl-offset` in its RDB file).
//! A clean shutdown ([`Replication::save`], after the last client's write, before the store
//! closes) writes the replication id and offset under the server key
//! [`MASTER_POSITION_KEY`], synced; the next start ([`Replication::restore`]) reads them back
//! and deletes the key, synced, before it serves anyone, then goes on with that id, its
//! stream on and an empty backlog that starts at that offset. A replica that had every byte
//! before the shutdown asks for exactly that offset and gets `+CONTINUE`; one behind it is
//! refused (the backlog does not hold what it missed) and resyncs in full. The key is gone
//! once the server serves, so a crash later (SIGKILL, power loss), whose store may hold less
//! or more than the stream said, leaves no pair to reuse: the next start takes a new id and
//! every replica resyncs in full.
//!
//! ```text
//! key   0xff "repl-master"
//! value ASCII: the replication id (40 hex characters), one space, the offset in decimal
//! ```

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use shale_lsm::{Db, ReadOptions, Snapshot, WriteBatch, WriteOptions};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{Notify, mpsc, watch};

use crate::backlog::Backlog;
use crate::keyspace::{DB0, now_ms};
use crate::resp::RequestParser;
use crate::server::Shared;
use crate::value::Value;

/// Most bytes waiting to be sent to one replica (Redis's hard `client-output-buffer-limit`
/// for replicas): a replica that falls this far behind is dropped, and starts again with a
/// resync.
pub const REPLICA_QUEUE_BYTES_MAX: usize = 256 << 20;
/// How often the master pings its replicas through the stream (Redis's
/// `repl-ping-replica-period`): a Redis replica drops a master it has not heard from in 60 s.
pub const PING_PERIOD: Duration = Duration::from_secs(10);
/// A replica not heard from (no `REPLCONF ACK`) for this long is dropped (Redis's
/// `repl-timeout`).
pub const REPLICA_TIMEOUT_MS: u64 = 60_000;
/// Bytes of snapshot gathered before they are sent.
const SNAPSHOT_CHUNK_BYTES: usize = 256 << 10;
/// Bytes of stream gathered from a replica's queue into one socket write.
const STREAM_WRITE_BYTES_MAX: usize = 1 << 20;
/// The server key a master's replication id and offset wait under from a clean shutdown to
/// the next start (the module's documentation).
pub const MASTER_POSITION_KEY: &[u8] = b"\xffrepl-master";
/// How often the master's active expiry visits the next keys ([`expire_keys`]).
pub const EXPIRY_PERIOD: Duration = Duration::from_millis(100);
/// Keys of database 0 the active expiry visits each [`EXPIRY_PERIOD`]: a keyspace of a
/// million keys is walked in 100 s.
pub const EXPIRY_SCAN_KEYS: usize = 1000;
/// How long a replica's link, at shutdown, may take to send what its queue holds.
const SHUTDOWN_DRAIN: Duration = Duration::from_secs(5);

/// A replica as INFO and WAIT see it.
#[derive(Debug)]
pub struct ReplicaInfo {
    /// Its id (the connection's).
    pub id: u64,
    /// Its address.
    pub ip: String,
    /// The port it said it listens on (`REPLCONF listening-port`).
    pub port: u16,
    /// The offset it acknowledged last (`REPLCONF ACK`).
    pub ack: AtomicU64,
    /// When it acknowledged last, Unix ms.
    pub ack_at_ms: AtomicU64,
    /// Whether its snapshot was sent and the stream flows to it.
    pub online: AtomicBool,
    /// Bytes in its queue, not yet written to its socket.
    queued: AtomicUsize,
}

struct Attached {
    info: Arc<ReplicaInfo>,
    queue: mpsc::UnboundedSender<Arc<[u8]>>,
}

#[derive(Default)]
struct State {
    /// The replication id.
    replid: String,
    /// The id this server's stream had before its last change of id (a promotion, or its
    /// master's), and the first offset it does not cover (one past the stream's end then):
    /// Redis's `master_replid2` and `second_repl_offset`. A replica of the old id, up to that
    /// offset, continues (Redis's PSYNC2).
    replid2: Option<(String, u64)>,
    /// The stream's last bytes; `None` until the first replica asked for a sync.
    backlog: Option<Backlog>,
    /// Whether the next bytes fed start with `SELECT 0`.
    select_needed: bool,
    replicas: Vec<Attached>,
}

/// The master's replication state.
pub struct Replication {
    backlog_size: usize,
    /// Set (under the mutex, before the first snapshot) once a replica asked for a sync:
    /// from then on every write is fed.
    active: AtomicBool,
    state: Mutex<State>,
    /// Woken at every acknowledgement, for WAIT.
    acked: Notify,
    /// Full resyncs served (INFO's `sync_full`).
    pub sync_full: AtomicU64,
    /// Partial resyncs served (`sync_partial_ok`).
    pub sync_partial_ok: AtomicU64,
    /// Partial resyncs asked for and refused, served as full ones (`sync_partial_err`).
    pub sync_partial_err: AtomicU64,
    /// Set while the active expiry ([`expire_keys`]) writes: a task dropped then at shutdown
    /// may have written a batch it did not feed, and [`Replication::save`] keeps nothing.
    expiring: AtomicBool,
    /// Set while this server follows a master and its stream is that master's, byte for
    /// byte, with its id and offsets ("A replica's stream" in the module's documentation):
    /// its own writes feed nothing then.
    mirroring: AtomicBool,
    /// Held by a replica's link from the first command of a run it applies until the run
    /// is written and its bytes mirrored, and by the start of a full resync it serves, so
    /// that the snapshot and the offset taken with it agree (a master's stream of commands
    /// that are not idempotent, a Redis master's INCR, must never be applied twice).
    pub(crate) apply_gate: tokio::sync::Mutex<()>,
}

/// A replica's request for a sync (PSYNC or SYNC) and what it told of itself before.
#[derive(Clone, Debug)]
pub struct SyncRequest {
    /// `PSYNC`'s replication id (`?` for none); `None` for the old `SYNC`.
    pub psync: Option<(String, i64)>,
    /// `REPLCONF listening-port`.
    pub port: u16,
    /// `REPLCONF capa eof`: it takes a snapshot of unknown length, ended by a mark.
    pub capa_eof: bool,
    /// `REPLCONF ip-address`, if given.
    pub ip: Option<String>,
}

/// Appends a command as a RESP array of bulk strings.
pub fn encode_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Appends the effect of writing `key`: `SET key value [PXAT ms]`, or `DEL key`.
pub fn encode_write(out: &mut Vec<u8>, key: &[u8], value: Option<&Value>) {
    match value {
        None => encode_command(out, &[b"DEL", key]),
        Some(v) => match v.expires_at_ms {
            None => encode_command(out, &[b"SET", key, &v.data]),
            Some(ms) => {
                encode_command(out, &[b"SET", key, &v.data, b"PXAT", ms.to_string().as_bytes()]);
            }
        },
    }
}

/// A new replication id: 40 hex characters, random (from the kernel, with the clock and
/// the process id as a fallback).
pub(crate) fn new_replid() -> String {
    let mut bytes = [0u8; 20];
    let read = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes));
    if read.is_err() {
        let mut x = now_ms() ^ (u64::from(std::process::id()) << 32) ^ 0x9e37_79b9_7f4a_7c15;
        for b in &mut bytes {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Replication {
    /// A master with a new replication id and a backlog of `backlog_size` bytes once a
    /// replica attaches.
    pub fn new(backlog_size: usize) -> Replication {
        Replication {
            backlog_size,
            active: AtomicBool::new(false),
            state: Mutex::new(State { replid: new_replid(), ..State::default() }),
            acked: Notify::new(),
            sync_full: AtomicU64::new(0),
            sync_partial_ok: AtomicU64::new(0),
            sync_partial_err: AtomicU64::new(0),
            expiring: AtomicBool::new(false),
            mirroring: AtomicBool::new(false),
            apply_gate: tokio::sync::Mutex::new(()),
        }
    }

    /// The replication state a start goes on with: the id and offset a clean shutdown left
    /// in `db` ([`Replication::save`]), with the stream on and an empty backlog of
    /// `backlog_size` bytes at that offset, so that the replicas that had all of it continue;
    /// a new id when the store holds none. The stored pair is deleted (a synced write)
    /// before this returns: a crash from here on never reuses it.
    ///
    /// # Errors
    /// The engine's, reading or deleting the key.
    pub fn restore(db: &Db, backlog_size: usize) -> shale_lsm::Result<Replication> {
        let Some(stored) = db.get(MASTER_POSITION_KEY)? else {
            return Ok(Replication::new(backlog_size));
        };
        let mut b = WriteBatch::new();
        b.delete(MASTER_POSITION_KEY);
        db.write(&b, &WriteOptions { sync: true })?;
        let parsed = std::str::from_utf8(&stored).ok().and_then(|t| {
            let (id, offset) = t.split_once(' ')?;
            let valid = id.len() == 40 && id.bytes().all(|c| c.is_ascii_hexdigit());
            valid.then_some((id.to_string(), offset.parse::<u64>().ok()?))
        });
        let Some((replid, offset)) = parsed else {
            log::warn!(
                "the stored replication id and offset {:?} are not `replid offset`: a new id \
                 (every replica resyncs in full)",
                String::from_utf8_lossy(&stored)
            );
            return Ok(Replication::new(backlog_size));
        };
        log::info!("replication id {replid} at offset {offset}, as the clean shutdown left it");
        let r = Replication::new(backlog_size);
        {
            let mut st = r.lock();
            st.replid = replid;
            st.backlog = Some(Backlog::new(backlog_size, offset));
            // A replica that continues applies SELECT 0 again: harmless, and it cannot know
            // which database this server's stream left selected.
            st.select_needed = true;
        }
        r.active.store(true, Ordering::SeqCst);
        Ok(r)
    }

    /// Keeps the replication id and offset in `db` for the next start ([`Replication::restore`]),
    /// synced: call it at a clean shutdown, once no client writes any more. Nothing is kept
    /// for a master whose stream never started (no replica asked for a sync since start).
    ///
    /// # Errors
    /// The engine's write error.
    pub fn save(&self, db: &Db) -> shale_lsm::Result<()> {
        if self.expiring.load(Ordering::SeqCst) {
            log::warn!("the active expiry was stopped mid-write: no replication id kept");
            return Ok(());
        }
        let (replid, offset) = {
            let st = self.lock();
            let Some(offset) = st.backlog.as_ref().map(Backlog::end) else { return Ok(()) };
            (st.replid.clone(), offset)
        };
        let mut b = WriteBatch::new();
        b.put(MASTER_POSITION_KEY, format!("{replid} {offset}").as_bytes());
        db.write(&b, &WriteOptions { sync: true })?;
        log::info!("replication id {replid} and offset {offset} kept for the next start");
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The replication id.
    pub fn replid(&self) -> String {
        self.lock().replid.clone()
    }

    /// The previous replication id and the first offset it does not cover (Redis's
    /// `master_replid2` and `second_repl_offset`), if the id changed since start.
    pub fn replid2(&self) -> Option<(String, u64)> {
        self.lock().replid2.clone()
    }

    /// From now on this server's stream is the master's at `offset` under `replid`, mirrored
    /// byte for byte ([`Replication::mirror`]), after a full resync loaded that master's
    /// snapshot: the backlog starts empty there, and the replicas attached are dropped (their
    /// data is not what this server holds now; they resync).
    pub fn follow_master(&self, replid: &str, offset: u64) {
        let mut st = self.lock();
        st.replid = replid.to_string();
        st.replid2 = None;
        st.backlog = Some(Backlog::new(self.backlog_size, offset));
        st.select_needed = false;
        st.replicas.clear();
        self.mirroring.store(true, Ordering::SeqCst);
        self.active.store(true, Ordering::SeqCst);
        drop(st);
        self.acked.notify_waiters();
    }

    /// The master continued this server's link at `offset` (`+CONTINUE replid`): the same
    /// stream goes on; under a new id for the same bytes (the master was a replica promoted
    /// since), the old id becomes the second, as Redis's replica takes it; a stream that is
    /// not the one mirrored (this server's own, before it followed) starts again there.
    pub fn master_continued(&self, replid: &str, offset: u64) {
        let mut st = self.lock();
        let same_end = st.backlog.as_ref().map(Backlog::end) == Some(offset);
        if same_end && self.mirroring.load(Ordering::SeqCst) {
            if st.replid != replid {
                let old = std::mem::replace(&mut st.replid, replid.to_string());
                st.replid2 = Some((old, offset + 1));
            }
            return;
        }
        drop(st);
        self.follow_master(replid, offset);
    }

    /// Appends bytes of the master's stream that this replica applied (whole commands) to
    /// its own stream, under the master's offsets.
    pub fn mirror(&self, bytes: &[u8]) {
        if bytes.is_empty() || !self.mirroring.load(Ordering::SeqCst) {
            return;
        }
        let mut st = self.lock();
        self.append(&mut st, bytes.to_vec());
    }

    /// `REPLICAOF NO ONE`: the stream goes on, from the offset it reached, with a new id;
    /// the id it had (its master's) becomes the second, so that the master's other replicas,
    /// pointed here, continue (PSYNC2). The replicas attached are dropped, to ask again and
    /// learn the new id, as Redis drops them.
    pub fn promote(&self) {
        self.mirroring.store(false, Ordering::SeqCst);
        let mut st = self.lock();
        let Some(end) = st.backlog.as_ref().map(Backlog::end) else { return };
        let old = std::mem::replace(&mut st.replid, new_replid());
        st.replid2 = Some((old, end + 1));
        st.select_needed = true;
        st.replicas.clear();
        drop(st);
        self.acked.notify_waiters();
    }

    /// The backlog's size setting.
    pub fn backlog_size(&self) -> usize {
        self.backlog_size
    }

    /// Whether writes are fed (a replica asked for a sync since start).
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::SeqCst)
    }

    /// Feeds the bytes `encode` writes (whole commands) to the stream, if it is on. Called
    /// after the engine applied the batch they describe, with its keys' stripes still held.
    /// Returns the offset just past them (what a `WAIT` of the writer's client waits for),
    /// or 0 when nothing was fed.
    pub fn feed(&self, encode: impl FnOnce(&mut Vec<u8>)) -> u64 {
        // SeqCst: a writer that applied its batch and then reads `false` here is ordered
        // before the store of `true`, which comes before the first snapshot: the snapshot
        // holds its batch.
        if !self.active.load(Ordering::SeqCst) || self.mirroring.load(Ordering::SeqCst) {
            // A replica's stream is its master's, mirrored by its link: its own writes (what
            // it applied of that stream, its readers' deletions of expired keys) feed nothing.
            return 0;
        }
        let mut bytes = Vec::new();
        encode(&mut bytes);
        if bytes.is_empty() {
            return 0;
        }
        let mut st = self.lock();
        self.append(&mut st, bytes);
        st.backlog.as_ref().map_or(0, Backlog::end)
    }

    fn append(&self, st: &mut State, bytes: Vec<u8>) {
        let bytes = if st.select_needed {
            st.select_needed = false;
            let mut b = Vec::with_capacity(bytes.len() + 23);
            encode_command(&mut b, &[b"SELECT", b"0"]);
            b.extend_from_slice(&bytes);
            b
        } else {
            bytes
        };
        let Some(backlog) = st.backlog.as_mut() else { return };
        backlog.append(&bytes);
        if st.replicas.is_empty() {
            return;
        }
        let chunk: Arc<[u8]> = bytes.into();
        st.replicas.retain(|r| {
            let queued = r.info.queued.fetch_add(chunk.len(), Ordering::AcqRel) + chunk.len();
            if queued > REPLICA_QUEUE_BYTES_MAX {
                log::warn!(
                    "replica {}:{} is {queued} bytes behind (over {REPLICA_QUEUE_BYTES_MAX}): \
                     dropped; it will resync",
                    r.info.ip,
                    r.info.port
                );
                return false;
            }
            r.queue.send(chunk.clone()).is_ok()
        });
    }

    /// The master's replication offset: bytes of stream since the id began.
    pub fn offset(&self) -> u64 {
        self.lock().backlog.as_ref().map_or(0, Backlog::end)
    }

    /// The backlog's first byte (Redis's 1-based `repl_backlog_first_byte_offset`) and the
    /// bytes it holds, if there is one.
    pub fn backlog_span(&self) -> Option<(u64, u64)> {
        self.lock().backlog.as_ref().map(|b| (b.start() + 1, b.end() - b.start()))
    }

    /// The replicas attached now.
    pub fn replicas(&self) -> Vec<Arc<ReplicaInfo>> {
        self.lock().replicas.iter().map(|r| r.info.clone()).collect()
    }

    /// Asks every replica for its offset (`REPLCONF GETACK *` in the stream), for WAIT.
    pub fn request_acks(&self) {
        if !self.is_active() {
            return;
        }
        let mut b = Vec::new();
        encode_command(&mut b, &[b"REPLCONF", b"GETACK", b"*"]);
        let mut st = self.lock();
        if !st.replicas.is_empty() {
            self.append(&mut st, b);
        }
    }

    /// Pings the replicas through the stream (every [`PING_PERIOD`]), so that an idle
    /// master's replicas keep their link.
    pub fn ping(&self) {
        if !self.is_active() {
            return;
        }
        let mut b = Vec::new();
        encode_command(&mut b, &[b"PING"]);
        let mut st = self.lock();
        if !st.replicas.is_empty() {
            self.append(&mut st, b);
        }
    }

    /// Replicas online that acknowledged within `max_lag_s` seconds (Redis's "good"
    /// replicas, for `min-replicas-to-write`).
    pub fn count_good(&self, max_lag_s: u64) -> usize {
        let now = now_ms();
        self.lock()
            .replicas
            .iter()
            .filter(|r| {
                r.info.online.load(Ordering::Acquire)
                    && now.saturating_sub(r.info.ack_at_ms.load(Ordering::Acquire)) / 1000
                        <= max_lag_s
            })
            .count()
    }

    /// Replicas that acknowledged `offset` or more.
    pub fn count_acked(&self, offset: u64) -> usize {
        self.lock().replicas.iter().filter(|r| r.info.ack.load(Ordering::Acquire) >= offset).count()
    }

    /// Waits until `n` replicas acknowledged `offset` or `deadline` passes (never, for
    /// `None`); the count then.
    pub async fn wait_for_acks(
        &self,
        n: usize,
        offset: u64,
        deadline: Option<tokio::time::Instant>,
    ) -> usize {
        loop {
            let notified = self.acked.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let count = self.count_acked(offset);
            if count >= n {
                return count;
            }
            match deadline {
                Some(d) => {
                    if tokio::time::timeout_at(d, notified).await.is_err() {
                        return self.count_acked(offset);
                    }
                }
                None => notified.await,
            }
        }
    }

    fn attach(&self, st: &mut State, id: u64, ip: String, port: u16) -> Attachment {
        let (queue, rx) = mpsc::unbounded_channel();
        let info = Arc::new(ReplicaInfo {
            id,
            ip,
            port,
            ack: AtomicU64::new(0),
            ack_at_ms: AtomicU64::new(now_ms()),
            online: AtomicBool::new(false),
            queued: AtomicUsize::new(0),
        });
        st.replicas.retain(|r| r.info.id != id);
        st.replicas.push(Attached { info: info.clone(), queue });
        Attachment { info, rx }
    }

    /// A partial resync, if `replid` is this master's (or its second id, up to the offset
    /// where it ended) and the backlog holds `offset`: the bytes from it, the replica attached
    /// to the stream after them, and the id it goes on under.
    fn try_partial(
        &self,
        replid: &str,
        offset: i64,
        id: u64,
        ip: String,
        port: u16,
    ) -> Option<(Vec<u8>, Attachment, String)> {
        // Redis's PSYNC offset is 1-based: the replica processed `offset - 1` bytes and
        // wants the rest.
        if offset < 1 {
            return None;
        }
        let mut st = self.lock();
        let known = replid == st.replid
            || st
                .replid2
                .as_ref()
                .is_some_and(|(id2, limit)| replid == id2 && offset as u64 <= *limit);
        if !known {
            return None;
        }
        let missed = st.backlog.as_ref()?.since(offset as u64 - 1)?;
        let replid = st.replid.clone();
        Some((missed, self.attach(&mut st, id, ip, port), replid))
    }

    /// A full resync's start: the stream turned on, the engine's snapshot, the offset it
    /// stands at and the id taken together, and the replica attached to the stream after
    /// that offset. A replica's link must not be applying a run meanwhile (the caller holds
    /// `apply_gate`).
    fn start_full(
        &self,
        db: &Db,
        id: u64,
        ip: String,
        port: u16,
    ) -> (Snapshot, u64, String, Attachment) {
        let mut st = self.lock();
        if st.backlog.is_none() {
            st.backlog = Some(Backlog::new(self.backlog_size, 0));
        }
        self.active.store(true, Ordering::SeqCst);
        // The replica loads the snapshot with no database selected since: Redis sends
        // SELECT again after every full resync. Not into a mirrored stream, whose bytes
        // and offsets are the master's.
        if !self.mirroring.load(Ordering::SeqCst) {
            st.select_needed = true;
        }
        let snapshot = db.snapshot();
        let offset = st.backlog.as_ref().map_or(0, Backlog::end);
        let attachment = self.attach(&mut st, id, ip, port);
        (snapshot, offset, st.replid.clone(), attachment)
    }

    fn detach(&self, id: u64) {
        self.lock().replicas.retain(|r| r.info.id != id);
        self.acked.notify_waiters();
    }

    fn acknowledged(&self, info: &ReplicaInfo, offset: u64) {
        info.ack.fetch_max(offset, Ordering::AcqRel);
        info.ack_at_ms.store(now_ms(), Ordering::Release);
        self.acked.notify_waiters();
    }
}

/// A replica's end of the stream.
struct Attachment {
    info: Arc<ReplicaInfo>,
    rx: mpsc::UnboundedReceiver<Arc<[u8]>>,
}

/// The snapshot as RDB chunks, read on a blocking thread (the engine's iterator reads the
/// device): database 0's live keys with their expiries.
fn snapshot_chunks(
    shared: Arc<Shared>,
    snapshot: Snapshot,
) -> mpsc::Receiver<Result<Vec<u8>, String>> {
    let (tx, rx) = mpsc::channel(4);
    tokio::task::spawn_blocking(move || {
        let db = shared.keyspace.db();
        let opts = ReadOptions {
            snapshot: Some(&snapshot),
            prefix: Some(vec![DB0]),
            ..Default::default()
        };
        let mut it = db.iter(&opts);
        it.seek(&[DB0]);
        let mut w = crate::rdb::Writer::new();
        let now = now_ms();
        while it.valid() {
            let value = match Value::decode(it.value()) {
                Ok(v) => v,
                Err(e) => {
                    let _ = tx.blocking_send(Err(format!("reading the snapshot: {e}")));
                    return;
                }
            };
            if !value.is_expired(now) {
                w.key(&it.key()[1..], &value.data, value.expires_at_ms);
            }
            if w.pending() >= SNAPSHOT_CHUNK_BYTES && tx.blocking_send(Ok(w.take())).is_err() {
                return;
            }
            it.next();
        }
        if let Err(e) = it.status() {
            let _ = tx.blocking_send(Err(format!("reading the snapshot: {e}")));
            return;
        }
        let _ = tx.blocking_send(Ok(w.take()));
        let _ = tx.blocking_send(Ok(w.finish()));
    });
    rx
}

/// Serves a connection that asked for a sync, until it or the server ends: the resync, then
/// the stream, reading the replica's acknowledgements.
pub async fn serve_replica<S>(
    shared: Arc<Shared>,
    stream: S,
    input: Vec<u8>,
    request: SyncRequest,
    peer: Option<IpAddr>,
    id: u64,
    mut stop: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let repl = shared.keyspace.replication();
    let ip = request.ip.clone().unwrap_or_else(|| peer.map_or("?".into(), |p| p.to_string()));
    let (mut reader, mut writer) = tokio::io::split(stream);
    let mut wait_first_ack = false;
    let partial = match &request.psync {
        Some((replid, offset)) if replid != "?" => {
            let p = repl.try_partial(replid, *offset, id, ip.clone(), request.port);
            if p.is_none() {
                repl.sync_partial_err.fetch_add(1, Ordering::Relaxed);
            }
            p
        }
        _ => None,
    };
    let mut attachment = match partial {
        Some((missed, attachment, replid)) => {
            repl.sync_partial_ok.fetch_add(1, Ordering::Relaxed);
            log::info!(
                "replica {ip}:{}: partial resync, {} bytes from the backlog",
                request.port,
                missed.len()
            );
            let mut out = format!("+CONTINUE {replid}\r\n").into_bytes();
            out.extend_from_slice(&missed);
            if writer.write_all(&out).await.is_err() {
                repl.detach(id);
                return;
            }
            attachment.info.online.store(true, Ordering::Release);
            attachment
        }
        None => {
            repl.sync_full.fetch_add(1, Ordering::Relaxed);
            let (snapshot, offset, replid, attachment) = {
                // No run of a replica's link is half applied while the snapshot is taken.
                let _gate = repl.apply_gate.lock().await;
                repl.start_full(shared.keyspace.db(), id, ip.clone(), request.port)
            };
            log::info!("replica {ip}:{}: full resync at offset {offset}", request.port);
            let sent =
                send_snapshot(&mut writer, shared.clone(), snapshot, &request, &replid, offset)
                    .await;
            match sent {
                Ok(eof_mark) => wait_first_ack = eof_mark,
                Err(e) => {
                    log::warn!("replica {ip}:{}: full resync failed: {e}", request.port);
                    repl.detach(id);
                    return;
                }
            }
            // The timeout counts from the snapshot's end: a large one takes its time.
            attachment.info.ack_at_ms.store(now_ms(), Ordering::Release);
            if !wait_first_ack {
                attachment.info.online.store(true, Ordering::Release);
            }
            attachment
        }
    };
    let info = attachment.info.clone();
    let mut parser = RequestParser::new(shared.config.limits());
    let mut input = input;
    let mut out: Vec<u8> = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        // The replica's requests: REPLCONF ACK offset [FACK offset]; anything else is
        // dropped (a replica sends nothing else on this link).
        let mut taken = 0;
        loop {
            let mut took = 0;
            let parsed = parser.next(&input[taken..], &mut took);
            taken += took;
            match parsed {
                Ok(Some(req)) => {
                    let is_ack = req.len() >= 3
                        && req[0].eq_ignore_ascii_case(b"replconf")
                        && req[1].eq_ignore_ascii_case(b"ack");
                    if let Some(off) = is_ack
                        .then(|| std::str::from_utf8(&req[2]).ok()?.parse::<u64>().ok())
                        .flatten()
                    {
                        repl.acknowledged(&info, off);
                        if wait_first_ack {
                            // A snapshot ended by a mark: the replica knows where it ended
                            // only once nothing follows it, so the stream starts after its
                            // first acknowledgement, as Redis starts it.
                            wait_first_ack = false;
                            info.online.store(true, Ordering::Release);
                        }
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    log::warn!("replica {ip}:{}: protocol error: {e}", info.port);
                    repl.detach(id);
                    return;
                }
            }
        }
        input.drain(..taken);
        let online = info.online.load(Ordering::Acquire);
        tokio::select! {
            chunk = attachment.rx.recv(), if online => {
                let Some(chunk) = chunk else { break };
                out.clear();
                out.extend_from_slice(&chunk);
                // Let the connections that are ready run first, so that their batches go out
                // in this write too: one write per pass over the clients, as Redis writes to
                // its replicas once per event loop, not one per batch.
                tokio::task::yield_now().await;
                while out.len() < STREAM_WRITE_BYTES_MAX {
                    match attachment.rx.try_recv() {
                        Ok(c) => out.extend_from_slice(&c),
                        Err(_) => break,
                    }
                }
                info.queued.fetch_sub(out.len(), Ordering::AcqRel);
                if writer.write_all(&out).await.is_err() {
                    break;
                }
                shared.counters.net_output_bytes.fetch_add(out.len() as u64, Ordering::Relaxed);
            }
            read = reader.read_buf(&mut input) => match read {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    shared.counters.net_input_bytes.fetch_add(n as u64, Ordering::Relaxed);
                }
            },
            _ = tick.tick() => {
                let silent = now_ms().saturating_sub(info.ack_at_ms.load(Ordering::Acquire));
                if silent > REPLICA_TIMEOUT_MS {
                    log::warn!("replica {ip}:{}: no acknowledgement in {silent} ms: dropped", info.port);
                    break;
                }
            }
            _ = stop.changed() => {
                // A clean shutdown: what the queue holds goes out first, so that a replica
                // that had every byte continues after the restart ([`Replication::save`]).
                if info.online.load(Ordering::Acquire) {
                    out.clear();
                    while let Ok(c) = attachment.rx.try_recv() {
                        out.extend_from_slice(&c);
                    }
                    let _ = tokio::time::timeout(SHUTDOWN_DRAIN, writer.write_all(&out)).await;
                }
                break;
            }
        }
    }
    repl.detach(id);
    log::info!("replica {ip}:{}: link closed", info.port);
    let _ = writer.shutdown().await;
}

/// Sends `+FULLRESYNC` (for PSYNC) and the snapshot: ended by a mark for a replica that
/// takes one (`capa eof`), streamed as it is read; otherwise gathered first and sent with
/// its length. True when it was ended by a mark.
async fn send_snapshot<W: AsyncWrite + Unpin>(
    writer: &mut W,
    shared: Arc<Shared>,
    snapshot: Snapshot,
    request: &SyncRequest,
    replid: &str,
    offset: u64,
) -> Result<bool, String> {
    let io = |e: std::io::Error| format!("writing to the replica: {e}");
    if request.psync.is_some() {
        writer
            .write_all(format!("+FULLRESYNC {replid} {offset}\r\n").as_bytes())
            .await
            .map_err(io)?;
    }
    let mut chunks = snapshot_chunks(shared, snapshot);
    let eof_mark = request.capa_eof && request.psync.is_some();
    if eof_mark {
        let mark = new_replid();
        writer.write_all(format!("$EOF:{mark}\r\n").as_bytes()).await.map_err(io)?;
        while let Some(chunk) = chunks.recv().await {
            writer.write_all(&chunk?).await.map_err(io)?;
        }
        writer.write_all(mark.as_bytes()).await.map_err(io)?;
    } else {
        let mut rdb = Vec::new();
        while let Some(chunk) = chunks.recv().await {
            rdb.extend_from_slice(&chunk?);
        }
        writer.write_all(format!("${}\r\n", rdb.len()).as_bytes()).await.map_err(io)?;
        writer.write_all(&rdb).await.map_err(io)?;
    }
    Ok(eof_mark)
}

/// The master's active expiry, while its stream is on: every [`EXPIRY_PERIOD`] the next
/// [`EXPIRY_SCAN_KEYS`] keys of database 0 (a cursor walks the whole keyspace, then starts
/// again) are read, and each one whose expiry has passed is deleted by the path a client's
/// read takes (`Run::read`: under its stripe, only if still expired then, a stripe another
/// writer holds left for the next pass), so that its `DEL` is fed to the stream in the
/// store's order. Redis's replicas never expire keys themselves: without it, a key that no
/// client reads again after its expiry would stay on a Redis replica for ever (reads there
/// answer nil, but it holds memory and counts in DBSIZE). A replica does not run it: its
/// master's `DEL`s come in its stream. A key the engine's compaction dropped past its expiry
/// (expiry_filter.rs) before the cursor reached it is not seen, and sends no `DEL`.
pub async fn expire_keys(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(EXPIRY_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut cursor: Option<Vec<u8>> = None;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        let ks = &shared.keyspace;
        if !ks.replication().is_active() || shared.follower.is_replica() {
            cursor = None;
            continue;
        }
        let (expired, last) = match ks.scan_expired(cursor.as_deref(), EXPIRY_SCAN_KEYS).await {
            Ok(found) => found,
            Err(e) => {
                log::warn!("active expiry: reading the keys: {e}");
                continue;
            }
        };
        cursor = last;
        if expired.is_empty() {
            continue;
        }
        ks.replication().expiring.store(true, Ordering::SeqCst);
        let mut run = crate::run::Run::new(ks, crate::resp::Protocol::Resp2);
        for key in &expired {
            match run.read(key).await {
                Ok(_) => run.finish(crate::resp::Reply::OK).await,
                Err(e) => run.fail(crate::commands::failed(e)),
            }
        }
        run.flush().await;
        ks.replication().expiring.store(false, Ordering::SeqCst);
        if run.errors > 0 {
            log::warn!(
                "active expiry: {} deletes failed; the last: {}",
                run.errors,
                run.last_error.as_deref().unwrap_or("")
            );
        }
    }
}

/// Pings the replicas every [`PING_PERIOD`] until shutdown.
pub async fn ping_replicas(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(PING_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => shared.keyspace.replication().ping(),
            _ = stop.changed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replids_are_forty_hex_characters_and_differ() {
        let a = new_replid();
        assert_eq!(a.len(), 40);
        assert!(a.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(a, new_replid());
    }

    #[test]
    fn writes_are_encoded_as_their_effects() {
        let mut out = Vec::new();
        encode_write(&mut out, b"k", Some(&Value::new(b"v".to_vec())));
        encode_write(&mut out, b"k", None);
        let mut v = Value::new(b"x".to_vec());
        v.expires_at_ms = Some(1_700_000_000_123);
        encode_write(&mut out, b"e", Some(&v));
        assert_eq!(
            out,
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*2\r\n$3\r\nDEL\r\n$1\r\nk\r\n\
              *5\r\n$3\r\nSET\r\n$1\r\ne\r\n$1\r\nx\r\n$4\r\nPXAT\r\n$13\r\n1700000000123\r\n"
        );
    }

    #[test]
    fn nothing_is_fed_before_a_replica_asks_and_select_leads_after_a_full_resync() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), shale_lsm::Options::small_for_tests()).unwrap();
        let r = Replication::new(1 << 20);
        r.feed(|b| encode_command(b, &[b"SET", b"a", b"1"]));
        assert_eq!(r.offset(), 0, "no stream before a replica");
        let (_snap, offset, _, mut att) = r.start_full(&db, 1, "127.0.0.1".into(), 1);
        assert_eq!(offset, 0);
        r.feed(|b| encode_command(b, &[b"DEL", b"a"]));
        let got = att.rx.try_recv().unwrap();
        assert!(got.starts_with(b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n*2\r\n$3\r\nDEL"));
        assert_eq!(r.offset(), got.len() as u64);
        // A partial resync from the start (Redis's offsets are 1-based) gets those bytes.
        let (missed, _, _) = r.try_partial(&r.replid(), 1, 2, "x".into(), 2).unwrap();
        assert_eq!(missed, got.to_vec());
        assert!(r.try_partial("0".repeat(40).as_str(), 1, 3, "x".into(), 3).is_none());
        assert!(r.try_partial(&r.replid(), 0, 3, "x".into(), 3).is_none());
        assert!(r.try_partial(&r.replid(), 1_000, 3, "x".into(), 3).is_none());
    }

    #[test]
    fn a_promoted_replica_continues_its_masters_replicas_up_to_where_its_id_changed() {
        let r = Replication::new(1 << 20);
        let master = new_replid();
        r.follow_master(&master, 100);
        // Its own writes feed nothing: its stream is the master's bytes.
        assert_eq!(r.feed(|b| encode_command(b, &[b"SET", b"a", b"1"])), 0);
        let mut cmd = Vec::new();
        encode_command(&mut cmd, &[b"SET", b"a", b"1"]);
        r.mirror(&cmd);
        let end = 100 + cmd.len() as u64;
        assert_eq!((r.replid(), r.offset()), (master.clone(), end));
        // The same id continued at the same offset changes nothing.
        r.master_continued(&master, end);
        assert_eq!((r.replid(), r.replid2()), (master.clone(), None));

        r.promote();
        assert_ne!(r.replid(), master);
        assert_eq!(r.replid2(), Some((master.clone(), end + 1)));
        r.feed(|b| encode_command(b, &[b"DEL", b"a"]));
        // A replica of the old id at or before the id's end continues, under the new id.
        let (missed, _, id) = r.try_partial(&master, end as i64 + 1, 1, "x".into(), 1).unwrap();
        assert_eq!(id, r.replid());
        assert!(missed.starts_with(b"*2\r\n$6\r\nSELECT"), "the promoted one's writes");
        let (missed, _, _) = r.try_partial(&master, 101, 2, "x".into(), 2).unwrap();
        assert!(missed.starts_with(&cmd));
        // Past it (bytes of the old id the promoted one never had), a full resync.
        assert!(r.try_partial(&master, end as i64 + 2, 3, "x".into(), 3).is_none());

        // Following another master whose stream is not this one's starts again there.
        r.master_continued(&new_replid(), 5);
        assert_eq!((r.offset(), r.replid2()), (5, None));
    }

    #[test]
    fn a_clean_shutdowns_id_and_offset_are_restored_once() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), shale_lsm::Options::small_for_tests()).unwrap();
        let fresh = Replication::restore(&db, 1 << 20).unwrap();
        assert!(!fresh.is_active(), "a store with nothing kept starts a new stream");
        fresh.save(&db).unwrap();
        assert_eq!(db.get(MASTER_POSITION_KEY).unwrap(), None, "no stream, nothing kept");

        let r = Replication::new(1 << 20);
        let _ = r.start_full(&db, 1, "127.0.0.1".into(), 1);
        r.feed(|b| encode_command(b, &[b"SET", b"a", b"1"]));
        let end = r.offset();
        r.save(&db).unwrap();

        let back = Replication::restore(&db, 1 << 20).unwrap();
        assert_eq!((back.replid(), back.offset()), (r.replid(), end));
        assert!(back.is_active(), "writes after the restart are fed from the start");
        assert_eq!(db.get(MASTER_POSITION_KEY).unwrap(), None, "deleted once read");
        // A replica that had every byte continues (Redis's offsets are 1-based); one behind
        // it resyncs in full.
        let id = back.replid();
        assert!(back.try_partial(&id, end as i64, 2, "x".into(), 2).is_none());
        let (missed, _, _) = back.try_partial(&id, end as i64 + 1, 2, "x".into(), 2).unwrap();
        assert!(missed.is_empty());
        back.feed(|b| encode_command(b, &[b"DEL", b"a"]));
        let (missed, _, _) = back.try_partial(&id, end as i64 + 1, 3, "x".into(), 3).unwrap();
        assert!(missed.starts_with(b"*2\r\n$6\r\nSELECT"), "SELECT leads what follows");

        // A second start (after a crash) finds nothing: a new id.
        let again = Replication::restore(&db, 1 << 20).unwrap();
        assert_ne!(again.replid(), r.replid());
        db.put(MASTER_POSITION_KEY, b"not a position").unwrap();
        assert_ne!(Replication::restore(&db, 1 << 20).unwrap().replid(), r.replid());
        assert_eq!(db.get(MASTER_POSITION_KEY).unwrap(), None);
    }
}
