//! The commands: one module per family, a table of every command (name, arity, flags, keys)
//! that `COMMAND` reports and the dispatcher checks, and the dispatcher.
//!
//! Stages of one request ([`execute`]):
//! 0. Inside `MULTI`, anything but EXEC, DISCARD, MULTI, WATCH and QUIT is queued
//!    (transaction.rs).
//! 1. Look the name up (case-insensitive): an unknown name is an error naming it.
//! 2. Check the arity against the table.
//! 3. Refuse it with `NOAUTH` if a password is set, not yet given, and the command is not one
//!    that gives it (`AUTH`, `HELLO`) or ends the connection (`QUIT`); on a RESP2 subscriber,
//!    refuse all but (UN)SUBSCRIBE, PING and QUIT (pubsub.rs).
//! 4. Run it: a command on keys (and PING, ECHO) in the connection's run (run.rs), whose
//!    batch it joins and whose write its reply waits for; any other (SCAN, KEYS, DBSIZE,
//!    FLUSHDB, INFO, AUTH, HELLO, CLIENT, ...) after the run is flushed, on its own. An engine
//!    error becomes an `ERR` reply, the connection stays open.

mod connection;
mod expiry;
mod introspection;
mod keys;
pub mod pubsub;
mod replication;
mod strings;
pub mod transaction;

use std::sync::Arc;

use crate::resp::{Protocol, Reply, Request};
use crate::run::Run;
use crate::server::Shared;

/// What a connection remembers between requests.
#[derive(Debug)]
pub struct Session {
    /// The client's id (`CLIENT ID`, `HELLO`'s `id`).
    pub id: u64,
    /// The protocol replies are encoded in.
    pub protocol: Protocol,
    /// Whether `AUTH` succeeded (or no password is set).
    pub authenticated: bool,
    /// `CLIENT SETNAME`'s name.
    pub name: Option<Vec<u8>>,
    /// Set by `QUIT`: the connection closes once the reply is sent.
    pub quit: bool,
    /// What the client said of itself as a replica (`REPLCONF`).
    pub replica: ReplicaSays,
    /// Set by `PSYNC` or `SYNC`: the connection becomes the replica's link.
    pub sync: Option<crate::replication::SyncRequest>,
    /// The session a replica applies its master's stream in: writes are allowed to it alone.
    pub master_link: bool,
    /// Its pub/sub inbox and channels, once it subscribed (`SUBSCRIBE`).
    pub subscriber: Option<crate::clients::Subscriber>,
    /// The open transaction's queue (`MULTI`).
    pub multi: Option<transaction::Multi>,
    /// The keys `WATCH`ed, until EXEC, DISCARD or UNWATCH.
    pub watching: Option<transaction::Watching>,
}

/// What a replica tells a master with `REPLCONF` before `PSYNC`.
#[derive(Debug, Default, Clone)]
pub struct ReplicaSays {
    /// `listening-port`.
    pub port: u16,
    /// `ip-address`.
    pub ip: Option<String>,
    /// `capa eof`: it takes a snapshot ended by a mark.
    pub capa_eof: bool,
}

impl Session {
    /// A new connection's session.
    pub fn new(id: u64, password_set: bool) -> Session {
        Session {
            id,
            protocol: Protocol::Resp2,
            authenticated: !password_set,
            name: None,
            quit: false,
            replica: ReplicaSays::default(),
            sync: None,
            master_link: false,
            subscriber: None,
            multi: None,
            watching: None,
        }
    }
}

/// One command's entry in the table.
#[derive(Debug)]
pub struct Spec {
    /// Lower-case name.
    pub name: &'static str,
    /// Redis's arity: `n` exactly n arguments with the name, `-n` at least n.
    pub arity: i32,
    /// Redis's flags, for `COMMAND`.
    pub flags: &'static [&'static str],
    /// Position of the first key, the last (-1: the last argument) and the step between keys.
    pub keys: (i32, i32, i32),
}

const W: &[&str] = &["write"];
const R: &[&str] = &["readonly", "fast"];
const C: &[&str] = &["fast", "loading", "stale"];
const A: &[&str] = &["noscript", "loading", "stale", "fast", "no-auth"];
const ADMIN: &[&str] = &["admin", "noscript", "no-async-loading", "no-multi"];
const PUBSUB: &[&str] = &["pubsub", "loading", "stale", "fast"];
const TX: &[&str] = &["noscript", "loading", "stale", "fast", "allow-busy"];

/// Every command served. Anything else is answered an error naming it.
pub const COMMANDS: &[Spec] = &[
    Spec { name: "append", arity: 3, flags: W, keys: (1, 1, 1) },
    Spec { name: "auth", arity: -2, flags: A, keys: (0, 0, 0) },
    Spec { name: "client", arity: -2, flags: C, keys: (0, 0, 0) },
    Spec { name: "command", arity: -1, flags: C, keys: (0, 0, 0) },
    Spec { name: "config", arity: -2, flags: C, keys: (0, 0, 0) },
    Spec { name: "dbsize", arity: 1, flags: &["readonly"], keys: (0, 0, 0) },
    Spec { name: "decr", arity: 2, flags: W, keys: (1, 1, 1) },
    Spec { name: "decrby", arity: 3, flags: W, keys: (1, 1, 1) },
    Spec { name: "del", arity: -2, flags: W, keys: (1, -1, 1) },
    Spec { name: "discard", arity: 1, flags: TX, keys: (0, 0, 0) },
    Spec { name: "echo", arity: 2, flags: C, keys: (0, 0, 0) },
    Spec { name: "exec", arity: 1, flags: TX, keys: (0, 0, 0) },
    Spec { name: "exists", arity: -2, flags: R, keys: (1, -1, 1) },
    Spec { name: "expire", arity: -3, flags: W, keys: (1, 1, 1) },
    Spec { name: "expireat", arity: -3, flags: W, keys: (1, 1, 1) },
    Spec { name: "flushall", arity: -1, flags: W, keys: (0, 0, 0) },
    Spec { name: "flushdb", arity: -1, flags: W, keys: (0, 0, 0) },
    Spec { name: "get", arity: 2, flags: R, keys: (1, 1, 1) },
    Spec { name: "getdel", arity: 2, flags: W, keys: (1, 1, 1) },
    Spec { name: "getset", arity: 3, flags: W, keys: (1, 1, 1) },
    Spec { name: "hello", arity: -1, flags: A, keys: (0, 0, 0) },
    Spec { name: "incr", arity: 2, flags: W, keys: (1, 1, 1) },
    Spec { name: "incrby", arity: 3, flags: W, keys: (1, 1, 1) },
    Spec { name: "info", arity: -1, flags: C, keys: (0, 0, 0) },
    Spec { name: "keys", arity: 2, flags: &["readonly"], keys: (0, 0, 0) },
    Spec { name: "mget", arity: -2, flags: R, keys: (1, -1, 1) },
    Spec { name: "mset", arity: -3, flags: W, keys: (1, -1, 2) },
    Spec { name: "msetnx", arity: -3, flags: W, keys: (1, -1, 2) },
    Spec { name: "multi", arity: 1, flags: TX, keys: (0, 0, 0) },
    Spec { name: "persist", arity: 2, flags: W, keys: (1, 1, 1) },
    Spec { name: "pexpire", arity: -3, flags: W, keys: (1, 1, 1) },
    Spec { name: "pexpireat", arity: -3, flags: W, keys: (1, 1, 1) },
    Spec { name: "ping", arity: -1, flags: C, keys: (0, 0, 0) },
    Spec { name: "psetex", arity: 4, flags: W, keys: (1, 1, 1) },
    Spec { name: "psync", arity: -3, flags: ADMIN, keys: (0, 0, 0) },
    Spec { name: "pttl", arity: 2, flags: R, keys: (1, 1, 1) },
    Spec { name: "publish", arity: 3, flags: PUBSUB, keys: (0, 0, 0) },
    Spec { name: "quit", arity: -1, flags: A, keys: (0, 0, 0) },
    Spec { name: "replconf", arity: -1, flags: ADMIN, keys: (0, 0, 0) },
    Spec { name: "replicaof", arity: 3, flags: ADMIN, keys: (0, 0, 0) },
    Spec { name: "role", arity: 1, flags: C, keys: (0, 0, 0) },
    Spec { name: "scan", arity: -2, flags: &["readonly"], keys: (0, 0, 0) },
    Spec { name: "select", arity: 2, flags: C, keys: (0, 0, 0) },
    Spec { name: "set", arity: -3, flags: W, keys: (1, 1, 1) },
    Spec { name: "setex", arity: 4, flags: W, keys: (1, 1, 1) },
    Spec { name: "setnx", arity: 3, flags: W, keys: (1, 1, 1) },
    Spec { name: "shutdown", arity: -1, flags: ADMIN, keys: (0, 0, 0) },
    Spec { name: "slaveof", arity: 3, flags: ADMIN, keys: (0, 0, 0) },
    Spec { name: "strlen", arity: 2, flags: R, keys: (1, 1, 1) },
    Spec { name: "subscribe", arity: -2, flags: PUBSUB, keys: (0, 0, 0) },
    Spec { name: "sync", arity: 1, flags: ADMIN, keys: (0, 0, 0) },
    Spec { name: "ttl", arity: 2, flags: R, keys: (1, 1, 1) },
    Spec { name: "type", arity: 2, flags: R, keys: (1, 1, 1) },
    Spec { name: "unsubscribe", arity: -1, flags: PUBSUB, keys: (0, 0, 0) },
    Spec { name: "unwatch", arity: 1, flags: TX, keys: (0, 0, 0) },
    Spec { name: "wait", arity: 3, flags: &["noscript"], keys: (0, 0, 0) },
    Spec { name: "watch", arity: -2, flags: TX, keys: (1, -1, 1) },
];

/// The table's entry for a name, any case.
pub fn lookup(name: &[u8]) -> Option<&'static Spec> {
    COMMANDS.iter().find(|s| s.name.as_bytes().eq_ignore_ascii_case(name))
}

/// Bytes of each argument quoted in an unknown command's error.
const QUOTED_ARG_BYTES_MAX: usize = 128;

/// Redis's error for a name it does not know, quoting the first arguments.
fn unknown_command(args: &Request) -> Reply {
    let quote =
        |b: &[u8]| String::from_utf8_lossy(&b[..b.len().min(QUOTED_ARG_BYTES_MAX)]).into_owned();
    let mut text = format!("unknown command '{}', with args beginning with: ", quote(&args[0]));
    for a in args.iter().skip(1).take(8) {
        text.push_str(&format!("'{}' ", quote(a)));
    }
    Reply::err(text)
}

/// Redis's error for a wrong number of arguments.
pub fn wrong_arity(name: &str) -> Reply {
    Reply::err(format!("wrong number of arguments for '{name}' command"))
}

/// `ERR syntax error`.
pub fn syntax_error() -> Reply {
    Reply::err("syntax error")
}

/// `ERR value is not an integer or out of range`.
pub fn not_an_integer() -> Reply {
    Reply::err("value is not an integer or out of range")
}

/// A signed 64-bit integer argument as Redis reads one: decimal, an optional `-`, no spaces.
pub fn parse_i64(arg: &[u8]) -> Option<i64> {
    if arg.first() == Some(&b'+') {
        return None;
    }
    std::str::from_utf8(arg).ok()?.parse().ok()
}

/// An engine or server error as a reply; the connection stays open.
pub fn failed(e: crate::Error) -> Reply {
    let e = shale_io::Chain(&e);
    log::warn!("command failed: {e}");
    Reply::err(e)
}

/// Whether a command runs in the connection's run (run.rs): the commands on keys, which the
/// run's overlay and locks serve, and PING and ECHO, which touch nothing. The others read or
/// write past the run's keys (SCAN, KEYS, DBSIZE, FLUSHDB, INFO) or change the session (AUTH,
/// HELLO, CLIENT, SELECT, QUIT): the run is flushed before them.
fn runs_in_run(spec: &Spec) -> bool {
    (spec.keys.0 != 0 && spec.name != "watch") || matches!(spec.name, "ping" | "echo")
}

/// The keys of a request, by its table entry's first, last (negative: from the end) and
/// step.
pub fn command_keys<'r>(spec: &Spec, args: &'r Request) -> Vec<&'r [u8]> {
    let (first, last, step) = spec.keys;
    if first <= 0 || step <= 0 {
        return Vec::new();
    }
    let last = if last < 0 { args.len() as i32 + last } else { last };
    (first..=last.min(args.len() as i32 - 1))
        .step_by(step as usize)
        .map(|i| args[i as usize].as_slice())
        .collect()
}

/// Runs one request (the stages of the module comment); its reply goes into `run`, in request
/// order.
pub async fn execute(
    shared: &Arc<Shared>,
    session: &mut Session,
    run: &mut Run<'_>,
    args: Request,
) {
    run.protocol = session.protocol;
    if session.multi.is_some() && session.authenticated {
        let name = args[0].to_ascii_lowercase();
        // WATCH is answered an error there, as in Redis, and the transaction goes on.
        if !matches!(name.as_slice(), b"exec" | b"discard" | b"multi" | b"quit" | b"watch") {
            let reply = transaction::queue(session, args);
            run.answer(reply);
            return;
        }
    }
    let Some(spec) = lookup(&args[0]) else {
        run.answer(unknown_command(&args));
        return;
    };
    let n = args.len() as i32;
    if (spec.arity > 0 && n != spec.arity) || (spec.arity < 0 && n < -spec.arity) {
        run.answer(wrong_arity(spec.name));
        return;
    }
    if !session.authenticated && !matches!(spec.name, "auth" | "hello" | "quit") {
        run.answer(Reply::Error("NOAUTH Authentication required.".into()));
        return;
    }
    if pubsub::subscriptions(session) > 0 && session.protocol == crate::resp::Protocol::Resp2 {
        // RESP2 has no way to tell a message from a reply but the subscriber's context:
        // Redis allows only these there, and answers PING as a message-shaped array.
        match spec.name {
            "subscribe" | "unsubscribe" | "quit" => {}
            "ping" => {
                let msg = args.get(1).cloned().unwrap_or_default();
                run.answer(Reply::Push(vec![Reply::Bulk(b"pong".to_vec()), Reply::Bulk(msg)]));
                return;
            }
            name => {
                run.answer(Reply::err(format!(
                    "Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / \
                     QUIT / RESET are allowed in this context"
                )));
                return;
            }
        }
    }
    let writes = spec.flags.contains(&"write");
    if writes && !session.master_link && shared.follower.is_replica() {
        run.answer(Reply::Error("READONLY You can't write against a read only replica.".into()));
        return;
    }
    let min_replicas = shared.config.min_replicas_to_write;
    if min_replicas > 0
        && writes
        && !session.master_link
        && shared.keyspace.replication().count_good(shared.config.min_replicas_max_lag)
            < min_replicas
    {
        run.answer(Reply::Error("NOREPLICAS Not enough good replicas to write.".into()));
        return;
    }
    if runs_in_run(spec) {
        match execute_in_run(run, spec, &args).await {
            Ok(reply) => run.finish(reply).await,
            Err(e) => run.fail(failed(e)),
        }
        return;
    }
    run.flush().await;
    if spec.name == "replconf" {
        match replication::replconf(session, &args) {
            replication::Replconf::Reply(reply) => run.answer(reply),
            replication::Replconf::Silent => {}
        }
        return;
    }
    if matches!(spec.name, "psync" | "sync") {
        if let Some(reply) = replication::psync(session, &args) {
            run.answer(reply);
        }
        return;
    }
    match spec.name {
        "subscribe" | "unsubscribe" => {
            let replies = if spec.name == "subscribe" {
                pubsub::subscribe(shared, session, &args)
            } else {
                pubsub::unsubscribe(shared, session, &args)
            };
            for reply in replies {
                run.answer(reply);
            }
            return;
        }
        "exec" => {
            transaction::exec(shared, session, run).await;
            return;
        }
        _ => {}
    }
    if spec.name == "publish" {
        // Fed to the replicas too: the connection's WAIT waits for it, as for a write.
        let (reply, woff) = pubsub::publish(shared, &args);
        run.woff = run.woff.max(woff);
        run.answer(reply);
        return;
    }
    if spec.name == "wait" {
        let reply = replication::wait(shared, &args, run.woff).await;
        run.answer(reply);
        return;
    }
    let reply = execute_alone(shared, session, spec, &args).await.unwrap_or_else(failed);
    if matches!(spec.name, "flushdb" | "flushall") && !reply.is_error() {
        // Its effect is in the stream before this offset: the connection's WAIT waits for it.
        run.woff = run.woff.max(shared.keyspace.replication().offset());
    }
    // HELLO may have changed the protocol; its own reply is in the new one.
    run.protocol = session.protocol;
    run.answer(reply);
}

/// A command of the run (stages 1 to 3 of run.rs).
async fn execute_in_run(run: &mut Run<'_>, spec: &Spec, args: &Request) -> crate::Result<Reply> {
    match spec.name {
        "echo" => Ok(Reply::Bulk(args[1].clone())),
        "ping" => Ok(connection::ping(args)),
        "append" => strings::append(run, args).await,
        "decr" => strings::incr_by(run, &args[1], Some(-1)).await,
        "decrby" => strings::incr_by_arg(run, args, true).await,
        "del" => strings::del(run, args).await,
        "exists" => strings::exists(run, args).await,
        "get" => strings::get(run, args).await,
        "getdel" => strings::getdel(run, args).await,
        "getset" => strings::getset(run, args).await,
        "incr" => strings::incr_by(run, &args[1], Some(1)).await,
        "incrby" => strings::incr_by_arg(run, args, false).await,
        "mget" => strings::mget(run, args).await,
        "mset" => strings::mset(run, args).await,
        "msetnx" => strings::msetnx(run, args).await,
        "set" => strings::set(run, args).await,
        "setex" => strings::setex(run, args, 1000, "setex").await,
        "psetex" => strings::setex(run, args, 1, "psetex").await,
        "setnx" => strings::setnx(run, args).await,
        "strlen" => strings::strlen(run, args).await,
        "type" => strings::key_type(run, args).await,
        "expire" => expiry::expire(run, args, 1000, false).await,
        "pexpire" => expiry::expire(run, args, 1, false).await,
        "expireat" => expiry::expire(run, args, 1000, true).await,
        "pexpireat" => expiry::expire(run, args, 1, true).await,
        "persist" => expiry::persist(run, args).await,
        "pttl" => expiry::ttl(run, args, false).await,
        "ttl" => expiry::ttl(run, args, true).await,
        other => unreachable!("{other} runs in runs but is not dispatched there"),
    }
}

/// A command run on its own, after the run was flushed.
async fn execute_alone(
    shared: &Arc<Shared>,
    session: &mut Session,
    spec: &Spec,
    args: &Request,
) -> crate::Result<Reply> {
    let ks = &shared.keyspace;
    match spec.name {
        "auth" => Ok(connection::auth(shared, session, args)),
        "client" => Ok(connection::client(shared, session, args)),
        "discard" => Ok(transaction::discard(session)),
        "multi" => Ok(transaction::multi(session)),
        "unwatch" => Ok(transaction::unwatch(session)),
        "watch" => Ok(transaction::watch(shared, session, args).await),
        "hello" => Ok(connection::hello(shared, session, args)),
        "quit" => {
            session.quit = true;
            Ok(Reply::OK)
        }
        "shutdown" => Ok(connection::shutdown(shared, session, args)),
        "select" => Ok(connection::select(args)),
        "dbsize" => keys::dbsize(ks).await.map(|(n, _)| Reply::Int(n as i64)),
        "flushall" | "flushdb" => keys::flushdb(ks, args).await,
        "keys" => keys::keys(ks, args).await,
        "scan" => keys::scan(ks, args).await,
        "command" => Ok(introspection::command(args)),
        "config" => Ok(introspection::config(shared, args)),
        "info" => introspection::info(shared, args).await,
        "replicaof" | "slaveof" => Ok(crate::replica::replicaof(shared, args).await),
        "role" => Ok(replication::role(shared)),
        other => unreachable!("{other} is in the command table but not dispatched"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_and_lower_case() {
        for w in COMMANDS.windows(2) {
            assert!(w[0].name < w[1].name, "{} before {}", w[0].name, w[1].name);
        }
        for s in COMMANDS {
            assert_eq!(s.name, s.name.to_ascii_lowercase());
            assert_ne!(s.arity, 0);
        }
        assert!(lookup(b"GeT").is_some());
        assert!(lookup(b"nope").is_none());
    }

    #[test]
    fn integers_parse_as_redis_reads_them() {
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        for bad in [&b"+1"[..], b" 1", b"1.0", b"", b"9223372036854775808", b"x"] {
            assert_eq!(parse_i64(bad), None, "{bad:?}");
        }
    }
}
