//! The keyspace: Redis's keys over the engine's keys, reached through the engine's async API,
//! with per-key locks for read-modify-write commands, the appendfsync mapping and SCAN's
//! cursors.
//!
//! Engine keys:
//! ```text
//! offset  size  field
//! 0       1     namespace: 0x00 database 0 (the only one: SELECT 0), 0xff the server's own
//! 1       n     the Redis key (database 0), or the name of a server key (0xff)
//! ```
//! So `FLUSHDB` is one range delete of `[0x00, 0x01)`, whatever the keys' bytes (a key of
//! 0xff bytes included), and the server's own keys never collide with a client's.
//! Server keys: `0xff "sync"`, only ever deleted: the synced write that `appendfsync everysec`
//! makes once a second; `0xff "serve-format"`, the marker (marker.rs); `0xff
//! "repl-position"`, a replica's replication id and offset (replica.rs); `0xff "repl-master"`,
//! a master's replication id and offset from a clean shutdown to the next start
//! (replication.rs).
//!
//! Engine values are [`crate::value`]'s format.
//!
//! Order of a write (every command that writes; `run.rs` drives it for a connection):
//! 1. Take the key's stripe lock (several keys: their stripes in index order, so two commands
//!    never wait on each other in a cycle; a pipeline's run that already holds stripes follows
//!    the rule in `run.rs`). Reads take no lock.
//! 2. Read what the command needs (`submit_get`, or the run's overlay of keys it wrote and
//!    has not yet written to the engine), decide.
//! 3. Write one batch (a command's, or a pipeline's run of commands'): with
//!    `appendfsync always`, submit it synced (`submit_write`) and await
//!    its ticket, so that concurrent commands share synced appends (the engine's workers
//!    combine queued writes) while this task waits; otherwise write it at once with
//!    `Db::write` on this thread. An unsynced write costs a copy into the WAL tail and a
//!    memtable insert, a few microseconds: the ticket's hand-off to a worker thread and back
//!    cost more than the write (redis-benchmark SET, 50 clients, pipelined 16: 45k requests a
//!    second through tickets). It blocks the thread only when the engine stalls writes (a
//!    full memtable waiting for a flush), as a Redis server stalls on a slow disk.
//!    Either way, when it returns the write is in the WAL and visible to every later read.
//! 4. Release the lock, answer (a run answers every command of its batch only now).
//!
//! A batch is atomic, so a multi-key command (MSET, DEL of several keys) is all or nothing.

use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use shale_lsm::{Db, ReadOptions, Ticket, WriteBatch, WriteOptions};
use tokio::sync::MutexGuard;

use crate::config::AppendFsync;
use crate::error::{Error, Result};
use crate::replication::Replication;
use crate::value::Value;

/// The namespace byte of database 0.
pub const DB0: u8 = 0x00;
/// The namespace byte of the server's own keys.
pub const SERVER: u8 = 0xff;
/// The key the once-a-second synced write deletes (`appendfsync everysec`).
const SYNC_KEY: &[u8] = b"\xffsync";
/// A replica's position in its master's stream, written in the batch of every command it
/// applies (replica.rs): ASCII `replid offset`.
pub const REPL_POSITION_KEY: &[u8] = b"\xffrepl-position";

/// Stripes of the lock table: two keys share a lock one time in this many, and a command on
/// one waits for a command on the other. A pipeline's run holds the stripes of every key it
/// wrote until its write is done (run.rs): 50 connections pipelining 16 MSETs of 10 keys hold
/// up to 8,000 stripes at once, so the table is wide. 16384 tokio mutexes take 640 KiB (40
/// bytes each).
pub const LOCK_STRIPES: usize = 16384;

/// Times a submission refused with `Busy` is retried before the command fails with `BUSY`.
pub const BUSY_RETRIES_MAX: u32 = 10_000;
/// Retries that only yield to other tasks before the backoff below starts.
const BUSY_YIELDS: u32 = 16;
/// Wait between later retries: 10,000 of them span about 10 s of a full queue.
const BUSY_BACKOFF: Duration = Duration::from_millis(1);

/// Most SCAN cursors remembered; the oldest is forgotten first.
pub const CURSORS_MAX: usize = 65_536;
/// Most bytes of keys the remembered cursors may hold (a key is up to 64 KiB).
pub const CURSOR_BYTES_MAX: usize = 64 << 20;

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The engine key of a database-0 key.
pub fn engine_key(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 1);
    k.push(DB0);
    k.extend_from_slice(key);
    k
}

/// SCAN cursors: a number handed to the client for the last engine key a scan visited.
/// Clients (redis-cli, the redis crate) parse cursors as unsigned integers, so the key itself
/// cannot be the cursor; the scan resumes after the key, so it survives concurrent writes:
/// every key present from the first call to the last is returned exactly once.
#[derive(Default)]
struct Cursors {
    next_id: u64,
    keys: HashMap<u64, Vec<u8>>,
    order: VecDeque<u64>,
    bytes: usize,
}

impl Cursors {
    fn save(&mut self, key: Vec<u8>) -> u64 {
        while self.keys.len() >= CURSORS_MAX || self.bytes + key.len() > CURSOR_BYTES_MAX {
            let Some(old) = self.order.pop_front() else { break };
            if let Some(k) = self.keys.remove(&old) {
                self.bytes -= k.len();
            }
        }
        // 0 means "start" and "done": never a saved cursor.
        self.next_id = self.next_id.wrapping_add(1).max(1);
        self.bytes += key.len();
        self.keys.insert(self.next_id, key);
        self.order.push_back(self.next_id);
        self.next_id
    }

    fn load(&self, id: u64) -> Option<Vec<u8>> {
        self.keys.get(&id).cloned()
    }
}

/// The store as the commands see it.
pub struct Keyspace {
    db: Db,
    write_options: WriteOptions,
    appendfsync: AppendFsync,
    /// Set by every write, cleared by the once-a-second sync of `appendfsync everysec`.
    dirty: AtomicBool,
    /// Expired keys deleted by the reads that found them (INFO's `expired_keys`).
    expired_deleted: AtomicU64,
    locks: Box<[tokio::sync::Mutex<()>]>,
    cursors: Mutex<Cursors>,
    /// The replication stream every written batch is fed to (replication.rs).
    replication: Replication,
    /// The group commit of runs under `appendfsync always` (commit.rs).
    commits: crate::commit::Commits,
    /// Who watches which keys (`WATCH`, watch.rs): every batch marks its keys' watchers.
    watches: std::sync::Arc<crate::watch::Watches>,
    #[cfg(feature = "failpoints")]
    write_hook: Option<WriteHook>,
}

/// Test hook (feature `failpoints`): called before and after every engine write of a
/// client's commands, on the task that writes, so a test can hold a write and watch what the
/// client is sent meanwhile. It may block (its worker thread waits).
#[cfg(feature = "failpoints")]
#[doc(hidden)]
#[derive(Clone)]
pub struct WriteHook(pub std::sync::Arc<dyn Fn(WriteEvent) + Send + Sync>);

#[cfg(feature = "failpoints")]
impl std::fmt::Debug for WriteHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WriteHook")
    }
}

/// What [`WriteHook`] is told.
#[cfg(feature = "failpoints")]
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteEvent {
    /// A batch of this many entries is about to be written.
    Before(usize),
    /// That batch's write returned (in the WAL, synced under `appendfsync always`), or failed.
    After(usize),
}

impl Keyspace {
    /// The keyspace over `db`, writing as `appendfsync` says.
    pub fn new(db: Db, appendfsync: AppendFsync) -> Keyspace {
        Keyspace::with_stripes(db, appendfsync, LOCK_STRIPES)
    }

    /// The keyspace with `stripes` locks (tests use few, to make collisions common).
    pub(crate) fn with_stripes(db: Db, appendfsync: AppendFsync, stripes: usize) -> Keyspace {
        let locks = (0..stripes).map(|_| tokio::sync::Mutex::new(())).collect();
        Keyspace {
            db,
            write_options: WriteOptions { sync: appendfsync == AppendFsync::Always },
            appendfsync,
            dirty: AtomicBool::new(false),
            expired_deleted: AtomicU64::new(0),
            locks,
            cursors: Mutex::new(Cursors::default()),
            replication: Replication::new(crate::config::REPL_BACKLOG_SIZE_DEFAULT),
            commits: crate::commit::Commits::new(),
            watches: std::sync::Arc::default(),
            #[cfg(feature = "failpoints")]
            write_hook: None,
        }
    }

    /// Sets the replication backlog's size (`--repl-backlog-size`), before serving.
    pub fn set_repl_backlog_size(&mut self, bytes: usize) {
        self.replication = Replication::new(bytes);
    }

    /// Before serving: the replication state with a backlog of `backlog_size` bytes, going on
    /// with the id and offset a clean shutdown kept in the store ([`Replication::restore`]).
    ///
    /// # Errors
    /// The engine's, reading or deleting them.
    pub fn restore_replication(&mut self, backlog_size: usize) -> Result<()> {
        self.replication = Replication::restore(&self.db, backlog_size)?;
        Ok(())
    }

    /// The master's replication state.
    pub fn replication(&self) -> &Replication {
        &self.replication
    }

    /// Who watches which keys (watch.rs).
    pub(crate) fn watches(&self) -> &std::sync::Arc<crate::watch::Watches> {
        &self.watches
    }

    /// The group commit of runs under `appendfsync always` (commit.rs).
    pub(crate) fn commits(&self) -> &crate::commit::Commits {
        &self.commits
    }

    /// Installs the test hook of every engine write.
    #[cfg(feature = "failpoints")]
    #[doc(hidden)]
    pub fn set_write_hook(&mut self, hook: Option<WriteHook>) {
        self.write_hook = hook;
    }

    /// The engine, for statistics.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The engine back, to close it.
    pub fn into_db(self) -> Db {
        self.db
    }

    /// Expired keys deleted by the reads that found them.
    pub fn expired_deleted(&self) -> u64 {
        self.expired_deleted.load(Ordering::Relaxed)
    }

    /// The appendfsync setting.
    pub fn appendfsync(&self) -> AppendFsync {
        self.appendfsync
    }

    /// The index of a key's stripe lock.
    pub(crate) fn stripe(&self, key: &[u8]) -> usize {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        key.hash(&mut h);
        (h.finish() % self.locks.len() as u64) as usize
    }

    /// Waits for a stripe's lock.
    pub(crate) async fn lock_stripe(&self, stripe: usize) -> MutexGuard<'_, ()> {
        self.locks[stripe].lock().await
    }

    /// A stripe's lock if no one holds it.
    pub(crate) fn try_lock_stripe(&self, stripe: usize) -> Option<MutexGuard<'_, ()>> {
        self.locks[stripe].try_lock().ok()
    }

    /// Counts expired keys that a written batch deleted (INFO's `expired_keys`).
    pub(crate) fn count_expired_deleted(&self, n: u64) {
        self.expired_deleted.fetch_add(n, Ordering::Relaxed);
    }

    /// Submits through the async API, resubmitting while the queue answers `Busy`.
    async fn submit<T>(
        &self,
        mut submit: impl FnMut(&Db) -> shale_lsm::Result<Ticket<T>>,
    ) -> Result<T> {
        for attempt in 0..BUSY_RETRIES_MAX {
            match submit(&self.db) {
                Ok(ticket) => return Ok(ticket.await?),
                Err(shale_lsm::Error::Busy) if attempt < BUSY_YIELDS => {
                    tokio::task::yield_now().await;
                }
                Err(shale_lsm::Error::Busy) => tokio::time::sleep(BUSY_BACKOFF).await,
                Err(e) => return Err(e.into()),
            }
        }
        Err(Error::Busy)
    }

    /// The stored value of a Redis key, expired or not.
    pub(crate) async fn get_stored(&self, key: &[u8]) -> Result<Option<Value>> {
        let engine_key = engine_key(key);
        let got = self.submit(|db| db.submit_get(&engine_key, &ReadOptions::default())).await?;
        got.map(|bytes| Value::decode(&bytes)).transpose()
    }

    /// Applies a batch (stage 3 of a write), then feeds the replication stream what
    /// `effects` writes of it (Redis commands: replication.rs). The caller holds the stripes
    /// of every key the batch writes, so batches on one key are applied and fed in one
    /// order.
    ///
    /// Returns the replication offset just past the batch's effects (0 when the stream is
    /// off): what a `WAIT` of the writer's client waits for.
    pub async fn write(
        &self,
        batch: &WriteBatch,
        effects: impl FnOnce(&mut Vec<u8>),
    ) -> Result<u64> {
        #[cfg(feature = "failpoints")]
        if let Some(hook) = &self.write_hook {
            (hook.0)(WriteEvent::Before(batch.len()));
        }
        let written = match self.write_batch(batch).await {
            Ok(()) => Ok(self.replication.feed(effects)),
            Err(e) => Err(e),
        };
        #[cfg(feature = "failpoints")]
        if let Some(hook) = &self.write_hook {
            (hook.0)(WriteEvent::After(batch.len()));
        }
        written
    }

    async fn write_batch(&self, batch: &WriteBatch) -> Result<()> {
        self.dirty.store(true, Ordering::Relaxed);
        let opts = self.write_options;
        if !opts.sync {
            return Ok(self.db.write(batch, &opts)?);
        }
        self.submit(|db| db.submit_write(batch, &opts)).await
    }

    /// Every stripe, taken in index order (call it holding none), and every batch queued
    /// for the group commit written (commit.rs: a run lets its stripes go before its batch
    /// is written): what FLUSHDB and a replica's load of a snapshot hold, so that no batch
    /// of another is between its write and its feed to the replication stream meanwhile.
    pub(crate) async fn lock_all_stripes(&self) -> Vec<MutexGuard<'_, ()>> {
        let mut held = Vec::with_capacity(self.locks.len());
        for lock in self.locks.iter() {
            held.push(lock.lock().await);
        }
        self.commits.drained().await;
        held
    }

    /// A replica's stored position in its master's stream: the replication id and the offset
    /// applied, if it has one.
    ///
    /// # Errors
    /// The engine's read error.
    pub async fn repl_position(&self) -> Result<Option<(String, u64)>> {
        let got =
            self.submit(|db| db.submit_get(REPL_POSITION_KEY, &ReadOptions::default())).await?;
        Ok(got.and_then(|v| {
            let text = String::from_utf8(v).ok()?;
            let (id, offset) = text.split_once(' ')?;
            Some((id.to_string(), offset.parse().ok()?))
        }))
    }

    /// Forgets a replica's stored position (a promoted replica's data is its own).
    ///
    /// # Errors
    /// The engine's write error.
    pub async fn forget_repl_position(&self) -> Result<()> {
        let mut b = WriteBatch::new();
        b.delete(REPL_POSITION_KEY);
        self.write_batch(&b).await
    }

    /// Deletes every key of database 0: one range delete, holding every stripe (taken in
    /// index order, from none, as the lock rule of run.rs asks), so that no other batch is
    /// between its write and its feed to the replication stream meanwhile, and FLUSHDB takes
    /// one place in the stream's order.
    pub async fn flush_db(&self) -> Result<()> {
        let _held = self.lock_all_stripes().await;
        self.watches.touch_all();
        let mut b = WriteBatch::new();
        b.delete_range(&[DB0], &[DB0 + 1]);
        self.write(&b, |out| crate::replication::encode_command(out, &[b"FLUSHDB"])).await?;
        Ok(())
    }

    /// Up to `count` live entries of database 0 after the engine key `after` (from the start
    /// when `None`), among those starting with the Redis-key prefix `prefix`; with the last
    /// engine key visited (live or not), or `None` when the keyspace is exhausted.
    pub async fn scan(
        &self,
        after: Option<&[u8]>,
        count: usize,
        prefix: &[u8],
    ) -> Result<(Vec<(Vec<u8>, Value)>, Option<Vec<u8>>)> {
        let prefix = engine_key(prefix);
        let start = match after {
            // The smallest key after `after`.
            Some(k) => {
                let mut s = k.to_vec();
                s.push(0);
                s
            }
            None => prefix.clone(),
        };
        let opts = ReadOptions { prefix: Some(prefix), ..Default::default() };
        let entries = self.submit(|db| db.submit_scan(&start, count, &opts)).await?;
        let last = if entries.len() < count { None } else { entries.last().map(|e| e.0.clone()) };
        let now = now_ms();
        let mut live = Vec::with_capacity(entries.len());
        for (k, v) in entries {
            let v = Value::decode(&v)?;
            if !v.is_expired(now) {
                live.push((k[1..].to_vec(), v));
            }
        }
        Ok((live, last))
    }

    /// The Redis keys whose expiry has passed among up to `count` entries of database 0
    /// after the engine key `after` (from the start when `None`), with the last engine key
    /// visited, or `None` when the keyspace is exhausted: what the master's active expiry
    /// deletes (replication.rs).
    ///
    /// # Errors
    /// The engine's read error.
    pub(crate) async fn scan_expired(
        &self,
        after: Option<&[u8]>,
        count: usize,
    ) -> Result<(Vec<Vec<u8>>, Option<Vec<u8>>)> {
        let start = match after {
            Some(k) => {
                let mut s = k.to_vec();
                s.push(0);
                s
            }
            None => vec![DB0],
        };
        let opts = ReadOptions { prefix: Some(vec![DB0]), ..Default::default() };
        let entries = self.submit(|db| db.submit_scan(&start, count, &opts)).await?;
        let last = if entries.len() < count { None } else { entries.last().map(|e| e.0.clone()) };
        let now = now_ms();
        let expired = entries
            .into_iter()
            .filter(
                |(_, v)| matches!(crate::value::decode_parts(v), Ok((Some(at), _)) if at <= now),
            )
            .map(|(k, _)| k[1..].to_vec())
            .collect();
        Ok((expired, last))
    }

    /// A cursor number for the engine key a scan stopped at.
    pub fn save_cursor(&self, engine_key: Vec<u8>) -> u64 {
        self.cursors.lock().unwrap_or_else(|e| e.into_inner()).save(engine_key)
    }

    /// The engine key of a cursor number, if it is remembered.
    pub fn load_cursor(&self, id: u64) -> Option<Vec<u8>> {
        self.cursors.lock().unwrap_or_else(|e| e.into_inner()).load(id)
    }

    /// `appendfsync everysec`'s sync: if anything was written since the last, one synced
    /// write, which the engine acknowledges once it and every earlier write are durable. The
    /// engine offers no "sync the WAL" call; a synced delete of a server key is the smallest
    /// synced write there is (an empty batch is not written at all).
    pub async fn sync_if_dirty(&self) -> Result<()> {
        if !self.dirty.swap(false, Ordering::Relaxed) {
            return Ok(());
        }
        let mut b = WriteBatch::new();
        b.delete(SYNC_KEY);
        let synced = self.submit(|db| db.submit_write(&b, &WriteOptions { sync: true })).await;
        if synced.is_err() {
            self.dirty.store(true, Ordering::Relaxed);
        }
        synced
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_are_bounded_and_never_zero() {
        let mut c = Cursors::default();
        let first = c.save(b"a".to_vec());
        assert_ne!(first, 0);
        for i in 0..CURSORS_MAX {
            c.save(i.to_string().into_bytes());
        }
        assert_eq!(c.keys.len(), CURSORS_MAX);
        assert_eq!(c.load(first), None, "the oldest cursor is forgotten first");
        let big = vec![7u8; 64 << 10];
        for _ in 0..2000 {
            c.save(big.clone());
        }
        assert!(c.bytes <= CURSOR_BYTES_MAX);
    }

    #[test]
    fn stripes_are_in_range_and_stable() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), shale_lsm::Options::small_for_tests()).unwrap();
        let ks = Keyspace::new(db, AppendFsync::No);
        assert_eq!(ks.stripe(b"k"), ks.stripe(b"k"));
        assert!(ks.stripe(b"other") < LOCK_STRIPES);
    }
}
