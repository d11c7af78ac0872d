//! `MULTI`, `EXEC`, `DISCARD`: the commands between MULTI and EXEC are queued (answered
//! `+QUEUED`), then run in order at EXEC, whose reply is the array of their replies.
//!
//! What is promised, and what is not: EXEC runs its commands in the connection's run, one
//! after another, as a pipeline of them would run (run.rs): the writes of consecutive
//! commands on keys share one engine batch where the run allows it, but EXEC as a whole is
//! not isolated from other clients (no `WATCH` either). A command unknown, of a wrong
//! arity, or not allowed in a transaction (below) is refused when queued, and EXEC then
//! discards the transaction (`-EXECABORT`), as Redis does. Redis Sentinel sends its
//! promotion (`REPLICAOF NO ONE`, `CONFIG REWRITE`, `CLIENT KILL`) in one MULTI block.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::commands::{Session, lookup, wrong_arity};
use crate::resp::{Reply, Request};
use crate::run::Run;
use crate::server::Shared;

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

/// `EXEC`: the queued commands run in order, their replies one array. `run` has been
/// flushed, so the array's header goes out first, and each command's reply after it in
/// order (each command answers exactly one reply: the commands that answer several or
/// none are refused when queued).
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
        if multi.failed {
            run.answer(Reply::Error(
                "EXECABORT Transaction discarded because of previous errors.".into(),
            ));
            return;
        }
        run.output.extend_from_slice(format!("*{}\r\n", multi.queued.len()).as_bytes());
        for request in multi.queued {
            super::execute(shared, session, run, request).await;
        }
    })
}
