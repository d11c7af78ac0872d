//! `MULTI`, `EXEC`, `DISCARD`, `WATCH`, `UNWATCH`: the commands between MULTI and EXEC are
//! queued (answered `+QUEUED`), then run in order at EXEC, whose reply is the array of their
//! replies.
//!
//! What is promised. EXEC first takes the stripe locks (keyspace.rs) of every key its
//! commands name and of every key the connection watches, from none, in index order (the
//! lock rule of run.rs), and holds them until the transaction's batch is written: no other
//! client's command that writes or locks one of those keys runs between its commands, and
//! its writes are one engine batch (one `MULTI`/`EXEC` in the replication stream), so
//! another transaction on those keys (which locks them too) sees all of them or none. With
//! them held it checks the watched keys: if one was
//! written since `WATCH` (by any connection, this one included; FLUSHDB and a replica's
//! load count as writing every key) or has expired since, EXEC runs nothing and answers a
//! null array, as Redis does (watch.rs). EXEC, DISCARD and UNWATCH forget the watched keys,
//! as does closing the connection.
//!
//! What is not: a command in the transaction that is not on keys (FLUSHDB, KEYS, SCAN,
//! DBSIZE, INFO, PUBLISH, CONFIG, ...) first writes what the transaction did before it and
//! lets the locks go (run.rs runs it alone), so the transaction is isolated only up to it;
//! a transaction whose writes pass the run's batch bound (1 MiB) is written in several
//! batches (its locks still held). A command unknown, of a wrong arity, or not allowed in a
//! transaction (below) is refused when queued, and EXEC then discards the transaction
//! (`-EXECABORT`), as Redis does; `WATCH` inside MULTI is answered an error and the
//! transaction goes on. Redis Sentinel sends its promotion (`REPLICAOF NO ONE`, `CONFIG
//! REWRITE`, `CLIENT KILL`) in one MULTI block.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::commands::{Session, command_keys, lookup, wrong_arity};
use crate::keyspace::now_ms;
use crate::resp::{Reply, Request};
use crate::run::Run;
use crate::server::Shared;
use crate::watch::{Flag, Watches};

/// What a transaction cannot hold: the commands that turn the connection into something
/// else (a replica's link, a subscriber) or wait on other connections.
const NOT_IN_MULTI: &[&str] = &["psync", "sync", "replconf", "subscribe", "unsubscribe", "wait"];

/// The queue of an open transaction.
#[derive(Debug, Default)]
pub struct Multi {
    queued: Vec<Request>,
    /// A command was refused while queueing: EXEC discards the transaction.
    failed: bool,
}

/// The keys a connection watches (`WATCH`), registered in the keyspace's `Watches` until
/// dropped (EXEC, DISCARD, UNWATCH, or the connection's end).
pub struct Watching {
    watches: Arc<Watches>,
    /// Set when a key watched is written.
    flag: Flag,
    /// Each key watched, and the expiry it had at WATCH if it was live with one: EXEC
    /// aborts once that time has passed, though no one deleted the key yet (Redis 7 does).
    keys: Vec<(Vec<u8>, Option<u64>)>,
}

impl Watching {
    /// Whether a key watched was written, or expired, since it was watched.
    fn changed(&self) -> bool {
        let now = now_ms();
        self.flag.load(Ordering::SeqCst)
            || self.keys.iter().any(|(_, expiry)| expiry.is_some_and(|at| at <= now))
    }
}

impl std::fmt::Debug for Watching {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watching").field("keys", &self.keys.len()).finish_non_exhaustive()
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        self.watches.unwatch(self.keys.iter().map(|(k, _)| k.as_slice()), &self.flag);
    }
}

/// `WATCH key...`: EXEC will run nothing if one of them is written (or expires) before it.
/// Each key is registered holding its stripe, so a write holding it is wholly before (not a
/// change since WATCH) or marks the connection (watch.rs).
pub async fn watch(shared: &Shared, session: &mut Session, args: &Request) -> Reply {
    if session.multi.is_some() {
        return Reply::err("WATCH inside MULTI is not allowed");
    }
    let ks = &shared.keyspace;
    let watching = session.watching.get_or_insert_with(|| Watching {
        watches: ks.watches().clone(),
        flag: Flag::default(),
        keys: Vec::new(),
    });
    for key in &args[1..] {
        let _stripe = ks.lock_stripe(ks.stripe(key)).await;
        if !ks.watches().watch(key, &watching.flag) {
            continue;
        }
        // The value as a reader would find it: a batch queued for the group commit first.
        let stored = match ks.commits().pending(key) {
            Some((value, _)) => Ok(value),
            None => ks.get_stored(key).await,
        };
        let expiry = match stored {
            Ok(v) => v.filter(|v| !v.is_expired(now_ms())).and_then(|v| v.expires_at_ms),
            Err(e) => {
                ks.watches().unwatch([key.as_slice()], &watching.flag);
                return crate::commands::failed(e);
            }
        };
        watching.keys.push((key.clone(), expiry));
    }
    Reply::OK
}

/// `UNWATCH`.
pub fn unwatch(session: &mut Session) -> Reply {
    session.watching = None;
    Reply::OK
}

/// `MULTI`.
pub fn multi(session: &mut Session) -> Reply {
    if session.multi.is_some() {
        return Reply::err("MULTI calls can not be nested");
    }
    session.multi = Some(Multi::default());
    Reply::OK
}

/// `DISCARD`.
pub fn discard(session: &mut Session) -> Reply {
    session.watching = None;
    match session.multi.take() {
        Some(_) => Reply::OK,
        None => Reply::err("DISCARD without MULTI"),
    }
}

/// A request that arrived inside MULTI (anything but EXEC, DISCARD, QUIT): queued, or
/// refused with the transaction marked failed.
pub fn queue(session: &mut Session, args: Request) -> Reply {
    let Some(multi) = session.multi.as_mut() else { unreachable!("queue outside MULTI") };
    let refused = match lookup(&args[0]) {
        None => Some(Reply::err(format!(
            "unknown command '{}'",
            String::from_utf8_lossy(&args[0][..args[0].len().min(128)])
        ))),
        Some(spec) => {
            let n = args.len() as i32;
            if (spec.arity > 0 && n != spec.arity) || (spec.arity < 0 && n < -spec.arity) {
                Some(wrong_arity(spec.name))
            } else if NOT_IN_MULTI.contains(&spec.name) {
                Some(Reply::err(format!("Command not allowed inside a transaction: {}", spec.name)))
            } else {
                None
            }
        }
    };
    match refused {
        Some(reply) => {
            multi.failed = true;
            reply
        }
        None => {
            multi.queued.push(args);
            Reply::Simple("QUEUED")
        }
    }
}

/// `EXEC`: the queued commands run in order, their replies one array, holding the stripes
/// of every key they name and every key watched (the module comment); a null array if a
/// watched key changed. `run` has been flushed (it holds no stripe), so the array's header
/// goes out first, and each command's reply after it in order (each command answers exactly
/// one reply: the commands that answer several or none are refused when queued).
pub fn exec<'a, 'b: 'a>(
    shared: &'a Arc<Shared>,
    session: &'a mut Session,
    run: &'a mut Run<'b>,
) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
    Box::pin(async move {
        let Some(multi) = session.multi.take() else {
            run.answer(Reply::err("EXEC without MULTI"));
            return;
        };
        // Forgotten whatever EXEC answers; checked below first.
        let watching = session.watching.take();
        if multi.failed {
            run.answer(Reply::Error(
                "EXECABORT Transaction discarded because of previous errors.".into(),
            ));
            return;
        }
        let mut keys: Vec<&[u8]> = Vec::new();
        if let Some(w) = &watching {
            keys.extend(w.keys.iter().map(|(k, _)| k.as_slice()));
        }
        for request in &multi.queued {
            if let Some(spec) = lookup(&request[0]) {
                keys.extend(command_keys(spec, request));
            }
        }
        // From none, in index order; then every command's own lock finds its stripes held,
        // and the run is not flushed between them.
        run.lock(&keys).await;
        if watching.as_ref().is_some_and(Watching::changed) {
            run.flush().await;
            run.answer(Reply::NullArray);
            return;
        }
        drop(watching);
        run.output.extend_from_slice(format!("*{}\r\n", multi.queued.len()).as_bytes());
        for request in multi.queued {
            super::execute(shared, session, run, request).await;
        }
    })
}
