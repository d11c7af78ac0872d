//! A connection's run: the commands of a pipeline executed one after another against an
//! overlay of the keys they wrote, their writes gathered into one engine batch, written once
//! (synced under `appendfsync always`), and only then answered. Redis does the same: it runs
//! a pipeline's commands in memory and fsyncs once before the replies go out.
//!
//! Stages of a command in a run (`commands::execute` calls them):
//! 1. Lock: [`Run::lock`] takes the stripes of the command's keys that the run does not hold
//!    yet, by the rule below; the run keeps every stripe it took until it is flushed.
//! 2. Read: [`Run::get`] (a locked key) and [`Run::read`] (a read without a lock) answer from
//!    the overlay for a key an earlier command of the run wrote; else, under `always`, from
//!    a batch queued for the group commit but not yet written (commit.rs's pending table;
//!    the run's replies then wait for that batch's write); from the engine otherwise. So
//!    INCR after INCR of one key in one run sees the first's result, a GET after a SET of
//!    the run sees the SET, and an INCR after another run's queued INCR sees its result.
//! 3. Stage: [`Run::put`] and [`Run::delete`] gather the command's writes; [`Run::finish`]
//!    adds them to the run's overlay and keeps the reply until it is written. The overlay
//!    holds each key's latest value, so the batch has one entry a key however often the run
//!    wrote it (a thousand INCRs of one key write one value). A command that fails (an error
//!    reply such as "not an integer", or an engine error of a read) stages nothing, and the
//!    run goes on without it.
//! 4. Flush ([`Run::flush`]): the batch is written, then the staged replies are encoded
//!    into [`Run::output`] in request order, and the stripes released. Under `everysec`
//!    and `no` the run writes it (`Keyspace::write`), holding its stripes. Under `always` it
//!    queues it for the group commit (commit.rs) holding its stripes, lets them go, and
//!    waits while the batch is written, synced, with every other run's queued meanwhile: a
//!    run on the same keys goes on at once instead of waiting for this run's sync and then
//!    its own. A write that fails answers every staged command its error: none of their
//!    writes happened. The server flushes a run before it writes output to the socket, before a
//!    command that does not run in runs (SCAN, FLUSHDB, INFO, AUTH, ...), before reading
//!    more input, and when the run reaches [`RUN_COMMANDS_MAX`] commands; a batch about to
//!    pass [`RUN_BATCH_BYTES_MAX`] is written first (stripes kept). So no reply leaves before
//!    the write of every command before it (P2, and P1 under `always`), and a run never holds
//!    its stripes across a wait on the client.
//!
//! The lock rule. A run waits for a stripe only while it holds no stripe but those of the
//! command being locked, all of lower index (it takes them in index order); otherwise it
//! only tries. So no two tasks wait on each other in a cycle: if A waits for B's stripe s,
//! every stripe A holds is below s, and B, if it waits too, waits for a stripe above s;
//! following the waits, the indexes only grow, so they never come back to A. A run whose
//! try fails is flushed (written, answered, every stripe released; under `always`, queued and
//! released, then answered once written) and then waits for the command's stripes in index
//! order. It also never waits while holding the stripes of earlier
//! commands: whoever waits for those would wait for its wait too (convoys that left
//! pipelined MSETs of random keys waiting for chains of other connections' writes). Unrelated
//! keys of different connections wait for each other only when their stripes collide.

use std::collections::HashMap;

use shale_lsm::WriteBatch;
use tokio::sync::MutexGuard;

use crate::config::AppendFsync;
use crate::error::Result;
use crate::keyspace::{Keyspace, engine_key, now_ms};
use crate::replication::{encode_command, encode_write};
use crate::resp::{Protocol, Reply};
use crate::value::Value;

/// Most commands staged in one run before it is flushed: a long pipeline still gives other
/// connections the stripes it holds, and its first replies go out, every so many commands.
pub const RUN_COMMANDS_MAX: usize = 256;
/// Most bytes of a run's batch: a command whose writes would take it past this is preceded
/// by a write of the batch so far (the engine refuses batches over half a memtable, and one
/// large command must not fail a whole run).
pub const RUN_BATCH_BYTES_MAX: usize = 1 << 20;
/// Bytes counted for an entry beyond its key and value: the value header, the batch's tags
/// and lengths (a generous bound).
const ENTRY_OVERHEAD_BYTES: usize = 32;

/// A connection's run of commands waiting on one write (the module comment).
pub struct Run<'a> {
    ks: &'a Keyspace,
    /// The protocol replies are encoded in (the session's; HELLO flushes the run first).
    pub protocol: Protocol,
    /// Stripes held, in ascending index order.
    held: Vec<(usize, MutexGuard<'a, ()>)>,
    /// The value each key written by the staged commands has now (`None`: deleted): what the
    /// run's batch writes, one entry a key however often the run wrote it.
    overlay: HashMap<Vec<u8>, Option<Value>>,
    /// Bytes the staged commands' writes take, one entry each (a bound on the batch).
    batch_bytes: usize,
    /// Staged commands: their replies wait in `staged_output`.
    staged: usize,
    /// The staged commands' replies, encoded, in request order.
    staged_output: Vec<u8>,
    /// Expired keys the batch deletes (counted in INFO once written).
    expired_deleted: u64,
    /// Tickets of the queued batches (commit.rs) whose values the staged commands read:
    /// their replies wait for those batches' writes.
    depends: Vec<u64>,
    /// The writes of the command being run, and their bytes.
    command_writes: Vec<(Vec<u8>, Option<Value>)>,
    command_bytes: usize,
    command_expired_deleted: u64,
    /// Replies released, encoded, in request order: what may go to the socket.
    pub output: Vec<u8>,
    /// Whether a flush since [`Run::take_waited_for_commit`] waited for a group commit
    /// (`appendfsync always`: its batch was queued, or it read a value queued for one): its
    /// replies were released with the other runs of that group.
    waited_for_commit: bool,
    /// The replication offset past this connection's last write (Redis's `woff`): what its
    /// `WAIT` waits for.
    pub woff: u64,
    /// A server key and value written with the next batch, if it writes anything: a
    /// replica's position in its master's stream, kept atomically with what it applied.
    pub server_entry: Option<(&'static [u8], Vec<u8>)>,
    /// Error replies given so far, and the last one's text: how a replica applying its
    /// master's commands in runs tells which were not applied.
    pub errors: u64,
    pub last_error: Option<String>,
}

impl<'a> Run<'a> {
    /// An empty run over `ks`.
    pub fn new(ks: &'a Keyspace, protocol: Protocol) -> Run<'a> {
        Run {
            ks,
            protocol,
            held: Vec::new(),
            overlay: HashMap::new(),
            batch_bytes: 0,
            staged: 0,
            staged_output: Vec::new(),
            expired_deleted: 0,
            depends: Vec::new(),
            command_writes: Vec::new(),
            command_bytes: 0,
            command_expired_deleted: 0,
            output: Vec::new(),
            waited_for_commit: false,
            woff: 0,
            server_entry: None,
            errors: 0,
            last_error: None,
        }
    }

    /// Whether nothing is staged (every reply so far is in [`Run::output`]).
    pub fn is_empty(&self) -> bool {
        self.staged == 0 && self.overlay.is_empty() && self.depends.is_empty()
    }

    /// Commands staged.
    pub fn len(&self) -> usize {
        self.staged
    }

    /// Whether a flush since the last call waited for a group commit (`appendfsync
    /// always`), and so ended with every other run of its group: the server sends such a
    /// run's replies at once (docs/serve.md, "Replies sent after the ready connections ran").
    pub fn take_waited_for_commit(&mut self) -> bool {
        std::mem::take(&mut self.waited_for_commit)
    }

    /// Bytes of replies waiting: staged, and released but not yet sent.
    pub fn reply_bytes(&self) -> usize {
        self.staged_output.len() + self.output.len()
    }

    fn holds(&self, stripe: usize) -> bool {
        self.held.binary_search_by_key(&stripe, |(s, _)| *s).is_ok()
    }

    fn keep(&mut self, stripe: usize, guard: MutexGuard<'a, ()>) {
        let at = self.held.partition_point(|(s, _)| *s < stripe);
        self.held.insert(at, (stripe, guard));
    }

    /// Takes the stripes of `keys` that the run does not hold (stage 1), by the lock rule of
    /// the module comment: tries each; when one is taken, flushes the run and waits for the
    /// command's stripes in index order, holding nothing else.
    pub async fn lock(&mut self, keys: &[&[u8]]) {
        let mut stripes: Vec<usize> = keys.iter().map(|k| self.ks.stripe(k)).collect();
        stripes.sort_unstable();
        stripes.dedup();
        for &s in &stripes {
            if self.holds(s) {
                continue;
            }
            if let Some(guard) = self.ks.try_lock_stripe(s) {
                self.keep(s, guard);
                continue;
            }
            // Waiting now, holding stripes, could close a cycle of waits, and would make
            // everyone waiting for ours wait for this wait too: write what is staged, let
            // everything go, and take the command's stripes in order from nothing.
            self.flush().await;
            for &s in &stripes {
                let guard = self.ks.lock_stripe(s).await;
                self.keep(s, guard);
            }
            return;
        }
    }

    /// The live value of a key the command locked (stage 2): the overlay's, or the engine's.
    /// An expired key the engine holds is deleted with the command's writes.
    ///
    /// # Errors
    /// The engine's read error.
    pub async fn get(&mut self, key: &[u8]) -> Result<Option<Value>> {
        if let Some(v) = self.overlay.get(key) {
            return Ok(v.clone().filter(|v| !v.is_expired(now_ms())));
        }
        let Some(v) = self.stored(key).await? else { return Ok(None) };
        if v.is_expired(now_ms()) {
            self.command_expired_deleted += 1;
            self.delete(key);
            return Ok(None);
        }
        Ok(Some(v))
    }

    /// The live value of a key read without a lock (GET, EXISTS, TTL, ...): the overlay's, or
    /// the engine's. An expired key found in the engine is deleted with the run's batch when
    /// its stripe is held already or free; otherwise (another connection writes it) it is
    /// left to a later read or to compaction.
    ///
    /// # Errors
    /// The engine's read error.
    pub async fn read(&mut self, key: &[u8]) -> Result<Option<Value>> {
        if let Some(v) = self.overlay.get(key) {
            return Ok(v.clone().filter(|v| !v.is_expired(now_ms())));
        }
        let Some(v) = self.stored(key).await? else { return Ok(None) };
        if !v.is_expired(now_ms()) {
            return Ok(Some(v));
        }
        let s = self.ks.stripe(key);
        if !self.holds(s) {
            match self.ks.try_lock_stripe(s) {
                Some(guard) => self.keep(s, guard),
                None => return Ok(None),
            }
        }
        // Another client may have set the key before the lock: delete only what is still
        // expired.
        self.get(key).await
    }

    /// A key's value past the overlay: the one a batch queued for the group commit holds
    /// (commit.rs; the run then depends on that batch), or the engine's.
    async fn stored(&mut self, key: &[u8]) -> Result<Option<Value>> {
        if let Some((value, ticket)) = self.ks.commits().pending(key) {
            if !self.depends.contains(&ticket) {
                self.depends.push(ticket);
            }
            return Ok(value);
        }
        self.ks.get_stored(key).await
    }

    /// Stages a put of `key`'s value (stage 3).
    pub fn put(&mut self, key: &[u8], value: Value) {
        self.command_bytes += ENTRY_OVERHEAD_BYTES + key.len() + value.data.len();
        self.command_writes.push((key.to_vec(), Some(value)));
    }

    /// Stages a delete of `key` (stage 3).
    pub fn delete(&mut self, key: &[u8]) {
        self.command_bytes += ENTRY_OVERHEAD_BYTES + key.len();
        self.command_writes.push((key.to_vec(), None));
    }

    /// Ends a command: its writes join the run's batch and its reply waits for them; a
    /// command that wrote nothing is answered at once when nothing is staged before it.
    pub async fn finish(&mut self, reply: Reply) {
        if self.command_writes.is_empty() {
            self.answer(reply);
            return;
        }
        if !self.overlay.is_empty() && self.batch_bytes + self.command_bytes > RUN_BATCH_BYTES_MAX {
            // The stripes stay held, so the overlay stays true of what the command read.
            self.write(false).await;
        }
        self.batch_bytes += std::mem::take(&mut self.command_bytes);
        for (key, value) in self.command_writes.drain(..) {
            self.overlay.insert(key, value);
        }
        self.expired_deleted += std::mem::take(&mut self.command_expired_deleted);
        self.stage(reply);
    }

    /// Ends a command that failed: its staged writes are dropped, its error is its reply.
    pub fn fail(&mut self, reply: Reply) {
        self.command_writes.clear();
        self.command_bytes = 0;
        self.command_expired_deleted = 0;
        self.answer(reply);
    }

    /// A reply in request order: released now when nothing is staged and nothing read
    /// waits for its write, else after the batch.
    pub fn answer(&mut self, reply: Reply) {
        if let Reply::Error(text) = &reply {
            self.errors += 1;
            self.last_error = Some(text.clone());
        }
        if self.staged == 0 && self.depends.is_empty() {
            reply.encode(self.protocol, &mut self.output);
        } else {
            self.stage(reply);
        }
    }

    fn stage(&mut self, reply: Reply) {
        // Encoded now: the protocol cannot change within a run (HELLO flushes it first).
        reply.encode(self.protocol, &mut self.staged_output);
        self.staged += 1;
    }

    /// Writes the batch and releases the staged replies; the stripes are let go first when
    /// `release` (a flush), else kept.
    ///
    /// Under `appendfsync always` the batch goes to the group commit (commit.rs): queued
    /// holding the stripes, and written, synced, with the batches of other runs, after they
    /// are let go; a run that wrote nothing but read a queued batch's value waits for that
    /// batch. Otherwise the batch is written here, holding the stripes.
    async fn write(&mut self, release: bool) {
        let entries: Vec<(Vec<u8>, Option<Value>)> = self.overlay.drain().collect();
        // Its keys' stripes are still held: a WATCH of one is before this or sees it.
        self.ks.watches().touch(entries.iter().map(|(k, _)| k));
        let server_entry = self.server_entry.take();
        let depends = std::mem::take(&mut self.depends);
        let bytes = std::mem::take(&mut self.batch_bytes);
        let expired = std::mem::take(&mut self.expired_deleted);
        let written = if self.ks.appendfsync() == AppendFsync::Always {
            let commits = self.ks.commits();
            self.waited_for_commit |= !entries.is_empty() || !depends.is_empty();
            if entries.is_empty() {
                if release {
                    self.held.clear();
                }
                commits.wait_committed(&depends).await.map_err(Reply::err)
            } else {
                let ticket = commits.enqueue(entries, server_entry, depends, bytes);
                if release {
                    self.held.clear();
                }
                match commits.wait(ticket).await {
                    Ok(fed) => {
                        self.woff = self.woff.max(fed);
                        Ok(())
                    }
                    Err(text) => Err(Reply::err(text)),
                }
            }
        } else {
            let written = self.write_here(&entries, server_entry).await;
            if release {
                self.held.clear();
            }
            written
        };
        let staged = std::mem::take(&mut self.staged);
        match written {
            Ok(()) => {
                self.ks.count_expired_deleted(expired);
                self.output.append(&mut self.staged_output);
            }
            Err(reply) => {
                self.staged_output.clear();
                if let Reply::Error(text) = &reply {
                    self.errors += staged as u64;
                    self.last_error = Some(text.clone());
                }
                for _ in 0..staged {
                    reply.encode(self.protocol, &mut self.output);
                }
            }
        }
    }

    /// The batch written by this run, holding its stripes (`appendfsync everysec` and `no`);
    /// the error reply if the write failed.
    async fn write_here(
        &mut self,
        entries: &[(Vec<u8>, Option<Value>)],
        server_entry: Option<(&'static [u8], Vec<u8>)>,
    ) -> std::result::Result<(), Reply> {
        let mut batch = WriteBatch::new();
        for (key, value) in entries {
            match value {
                Some(v) => batch.put(&engine_key(key), &v.encode()),
                None => batch.delete(&engine_key(key)),
            }
        }
        if batch.is_empty() {
            return Ok(());
        }
        if let Some((key, value)) = server_entry {
            batch.put(key, &value);
        }
        // The batch's effects, for the replication stream: one command a key, several in
        // MULTI/EXEC so that a replica applies the batch whole, as the engine did.
        let effects = |out: &mut Vec<u8>| {
            let several = entries.len() > 1;
            if several {
                encode_command(out, &[b"MULTI"]);
            }
            for (key, value) in entries {
                encode_write(out, key, value.as_ref());
            }
            if several {
                encode_command(out, &[b"EXEC"]);
            }
        };
        match self.ks.write(&batch, effects).await {
            Ok(fed) => {
                self.woff = self.woff.max(fed);
                Ok(())
            }
            Err(e) => Err(crate::commands::failed(e)),
        }
    }

    /// Stage 4: writes the batch, releases the staged replies into [`Run::output`] and lets
    /// go of every stripe.
    pub async fn flush(&mut self) {
        self.write(true).await;
        self.held.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;
    use std::time::Duration;

    use shale_lsm::{Db, Options};

    use super::*;
    use crate::config::AppendFsync;

    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    /// Tasks run commands of one to three keys, named in random order, over three stripes,
    /// so runs holding stripes keep needing lower ones: the lock rule's try-lock, flush and
    /// wait. A cycle of waits would hang the tasks (the timeout turns that into a failure);
    /// a lost update would show in the totals.
    #[test]
    fn runs_over_few_stripes_never_deadlock_and_lose_no_update() {
        runs_over_few_stripes(AppendFsync::No);
    }

    /// The same under `appendfsync always`, where runs let their stripes go before their
    /// batches are written (commit.rs): a run that takes a stripe next must read the queued
    /// value, and the group commit must apply the batches in queue order.
    #[test]
    fn group_committed_runs_never_deadlock_and_lose_no_update() {
        runs_over_few_stripes(AppendFsync::Always);
    }

    /// Which flushed runs waited for a group commit, and so send their replies at once
    /// (server.rs): under `always` a run that wrote, or read a value queued for a commit; not
    /// a run of reads alone, nor any run under `everysec`.
    #[test]
    fn runs_that_waited_for_a_group_commit_are_told_apart() {
        for appendfsync in [AppendFsync::Always, AppendFsync::Everysec] {
            let dir = tempfile::tempdir().unwrap();
            let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
            let ks = Arc::new(Keyspace::new(db, appendfsync));
            let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
            if appendfsync == AppendFsync::Always {
                rt.spawn(crate::commit::serve(ks.clone()));
            }
            let always = appendfsync == AppendFsync::Always;
            rt.block_on(async {
                let mut run = Run::new(&ks, Protocol::Resp2);
                run.lock(&[b"k"]).await;
                run.put(b"k", Value::new(b"1".to_vec()));
                run.finish(Reply::Simple("OK")).await;
                run.flush().await;
                assert_eq!(run.take_waited_for_commit(), always, "a write, {appendfsync:?}");
                assert!(!run.take_waited_for_commit(), "taken: false until the next wait");

                let got = run.read(b"k").await.unwrap().map(|v| v.data);
                assert_eq!(got, Some(b"1".to_vec()));
                run.finish(Reply::Simple("OK")).await;
                run.flush().await;
                assert!(!run.take_waited_for_commit(), "reads alone, {appendfsync:?}");
            });
        }

        // A run of reads alone that read a value queued for a commit waits for that commit.
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
        let ks = Arc::new(Keyspace::new(db, AppendFsync::Always));
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        rt.block_on(async {
            let writer = {
                let ks = ks.clone();
                tokio::spawn(async move {
                    let mut run = Run::new(&ks, Protocol::Resp2);
                    run.lock(&[b"q"]).await;
                    run.put(b"q", Value::new(b"2".to_vec()));
                    run.finish(Reply::Simple("OK")).await;
                    run.flush().await;
                })
            };
            // No committer yet: the writer's batch stays queued.
            while ks.commits().pending(b"q").is_none() {
                tokio::task::yield_now().await;
            }
            let mut reader = Run::new(&ks, Protocol::Resp2);
            let got = reader.read(b"q").await.unwrap().map(|v| v.data);
            assert_eq!(got, Some(b"2".to_vec()), "the queued value");
            reader.finish(Reply::Simple("OK")).await;
            tokio::spawn(crate::commit::serve(ks.clone()));
            reader.flush().await;
            assert!(reader.take_waited_for_commit(), "a read of a queued value");
            writer.await.unwrap();
        });
    }

    fn runs_over_few_stripes(appendfsync: AppendFsync) {
        const TASKS: u64 = 8;
        const COMMANDS: usize = 300;
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
        let ks = Arc::new(Keyspace::with_stripes(db, appendfsync, 3));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_time()
            .build()
            .unwrap();
        if appendfsync == AppendFsync::Always {
            // As the server does.
            rt.spawn(crate::commit::serve(ks.clone()));
        }
        let added: Vec<HashMap<Vec<u8>, i64>> = rt.block_on(async {
            let tasks: Vec<_> = (0..TASKS)
                .map(|t| {
                    let ks = ks.clone();
                    tokio::spawn(async move {
                        let mut run = Run::new(&ks, Protocol::Resp2);
                        let mut rng = 0x9e37_79b9_7f4a_7c15 ^ (t + 1);
                        let mut added: HashMap<Vec<u8>, i64> = HashMap::new();
                        for _ in 0..COMMANDS {
                            let n = 1 + next(&mut rng) % 3;
                            let mut keys: Vec<Vec<u8>> = (0..n)
                                .map(|_| format!("k{}", next(&mut rng) % 8).into_bytes())
                                .collect();
                            let names: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
                            run.lock(&names).await;
                            keys.sort();
                            keys.dedup();
                            for k in &keys {
                                let old = run.get(k).await.unwrap();
                                let v = old.map_or(0, |v| {
                                    std::str::from_utf8(&v.data).unwrap().parse::<i64>().unwrap()
                                });
                                run.put(k, Value::new((v + 1).to_string().into_bytes()));
                                *added.entry(k.clone()).or_default() += 1;
                            }
                            run.finish(Reply::OK).await;
                            if next(&mut rng) % 8 == 0 {
                                run.flush().await;
                            }
                            // Other tasks run while this one holds its stripes.
                            tokio::task::yield_now().await;
                        }
                        run.flush().await;
                        assert_eq!(run.output, b"+OK\r\n".repeat(COMMANDS));
                        added
                    })
                })
                .collect();
            let all = async {
                let mut out = Vec::new();
                for t in tasks {
                    out.push(t.await.unwrap());
                }
                out
            };
            tokio::time::timeout(Duration::from_secs(120), all).await.expect("the runs deadlocked")
        });
        let mut expected: HashMap<Vec<u8>, i64> = HashMap::new();
        for a in added {
            for (k, n) in a {
                *expected.entry(k).or_default() += n;
            }
        }
        rt.block_on(async {
            let mut run = Run::new(&ks, Protocol::Resp2);
            for (k, n) in expected {
                let v = run.read(&k).await.unwrap().unwrap();
                assert_eq!(v.data, n.to_string().into_bytes(), "{}", String::from_utf8_lossy(&k));
            }
        });
    }
}
