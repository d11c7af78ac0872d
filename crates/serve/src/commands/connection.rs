//! Connection commands: PING, HELLO, AUTH, SELECT, CLIENT (ECHO and QUIT are one line each in
//! the dispatcher).

use crate::commands::{Session, not_an_integer, parse_i64, syntax_error, wrong_arity};
use crate::resp::{Protocol, Reply, Request};
use crate::server::Shared;

/// `PING [message]`.
pub fn ping(args: &Request) -> Reply {
    match args.len() {
        1 => Reply::Simple("PONG"),
        2 => Reply::Bulk(args[1].clone()),
        _ => wrong_arity("ping"),
    }
}

/// Compares without stopping at the first different byte, so the time taken does not tell
/// a guesser how much of a password was right.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for (i, &x) in a.iter().enumerate() {
        diff |= usize::from(x ^ b.get(i).copied().unwrap_or(0));
    }
    diff == 0
}

/// Checks a username (only Redis's `default` user exists) and password; the reply to send on
/// failure.
fn check_password(shared: &Shared, user: Option<&[u8]>, password: &[u8]) -> Result<(), Reply> {
    let Some(want) = shared.config.password.as_deref() else {
        return Err(Reply::err(
            "AUTH <password> called without any password configured for the default user. \
             Are you sure your configuration is correct?",
        ));
    };
    let user_ok = user.is_none_or(|u| u == b"default");
    if user_ok && same_secret(password, want.as_bytes()) {
        Ok(())
    } else {
        Err(Reply::Error("WRONGPASS invalid username-password pair or user is disabled.".into()))
    }
}

/// `AUTH [username] password`.
pub fn auth(shared: &Shared, session: &mut Session, args: &Request) -> Reply {
    let (user, password) = match args.len() {
        2 => (None, &args[1]),
        3 => (Some(args[1].as_slice()), &args[2]),
        _ => return syntax_error(),
    };
    match check_password(shared, user, password) {
        Ok(()) => {
            session.authenticated = true;
            Reply::OK
        }
        Err(reply) => reply,
    }
}

/// `HELLO [protover [AUTH username password] [SETNAME clientname]]`: switches the protocol,
/// and answers a map of what the server is.
pub fn hello(shared: &Shared, session: &mut Session, args: &Request) -> Reply {
    let mut protocol = session.protocol;
    if let Some(v) = args.get(1) {
        protocol = match parse_i64(v) {
            Some(2) => Protocol::Resp2,
            Some(3) => Protocol::Resp3,
            Some(_) => return Reply::Error("NOPROTO unsupported protocol version".into()),
            None => return Reply::err("Protocol version is not an integer or out of range"),
        };
    }
    let mut name = None;
    let mut i = 2;
    while i < args.len() {
        let opt = args[i].to_ascii_uppercase();
        if opt == b"AUTH" && i + 2 < args.len() {
            if let Err(reply) = check_password(shared, Some(&args[i + 1]), &args[i + 2]) {
                return reply;
            }
            session.authenticated = true;
            i += 3;
        } else if opt == b"SETNAME" && i + 1 < args.len() {
            name = Some(args[i + 1].clone());
            i += 2;
        } else {
            return Reply::err(format!(
                "Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(&args[i])
            ));
        }
    }
    if !session.authenticated {
        return Reply::Error(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the \
             HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and \
             select the RESP protocol version at the same time"
                .into(),
        );
    }
    if let Some(name) = name {
        if let Err(reply) = check_name(&name) {
            return reply;
        }
        session.name = Some(name);
    }
    session.protocol = protocol;
    let proto = if protocol == Protocol::Resp3 { 3 } else { 2 };
    Reply::Map(vec![
        (Reply::text("server"), Reply::text("shale")),
        (Reply::text("version"), Reply::text(env!("CARGO_PKG_VERSION"))),
        (Reply::text("proto"), Reply::Int(proto)),
        (Reply::text("id"), Reply::Int(session.id as i64)),
        (Reply::text("mode"), Reply::text("standalone")),
        (
            Reply::text("role"),
            Reply::text(if shared.follower.is_replica() { "replica" } else { "master" }),
        ),
        (Reply::text("modules"), Reply::Array(Vec::new())),
    ])
}

/// `SELECT index`: only database 0 exists.
pub fn select(args: &Request) -> Reply {
    match parse_i64(&args[1]) {
        Some(0) => Reply::OK,
        Some(_) => Reply::err("DB index is out of range"),
        None => not_an_integer(),
    }
}

/// Redis refuses names with spaces, newlines or other special characters: they would break
/// `CLIENT LIST`'s line format.
fn check_name(name: &[u8]) -> Result<(), Reply> {
    if name.iter().all(|&b| (b'!'..=b'~').contains(&b)) {
        Ok(())
    } else {
        Err(Reply::err("Client names cannot contain spaces, newlines or special characters."))
    }
}

/// `CLIENT KILL TYPE normal|pubsub [SKIPME yes|no]`, `CLIENT KILL ID id`: closes those
/// clients (the caller too with `SKIPME no`), answering how many. Redis Sentinel sends the
/// two TYPEs to a replica it promotes, so that its clients reconnect and ask Sentinel where
/// the master is now. Replicas' links and the other types are not served.
fn client_kill(shared: &Shared, session: &mut Session, args: &Request) -> Reply {
    use crate::clients::Kind;
    if args.len() < 4 || args.len() % 2 != 0 {
        return Reply::err(
            "syntax error: shale serves CLIENT KILL TYPE normal|pubsub [SKIPME yes|no] and \
             CLIENT KILL ID id",
        );
    }
    let mut kind = None;
    let mut id = None;
    let mut skip_me = true;
    for pair in args[2..].chunks(2) {
        let (opt, value) = (pair[0].to_ascii_lowercase(), pair[1].to_ascii_lowercase());
        match (opt.as_slice(), value.as_slice()) {
            (b"type", b"normal") => kind = Some(Kind::Normal),
            (b"type", b"pubsub") => kind = Some(Kind::PubSub),
            (b"type", _) => {
                return Reply::err(format!(
                    "Unknown client type '{}': shale serves TYPE normal and pubsub",
                    String::from_utf8_lossy(&pair[1])
                ));
            }
            (b"id", _) => match parse_i64(&pair[1]) {
                Some(n) if n > 0 => id = Some(n as u64),
                _ => return Reply::err("client-id should be greater than 0"),
            },
            (b"skipme", b"yes") => skip_me = true,
            (b"skipme", b"no") => skip_me = false,
            _ => return syntax_error(),
        }
    }
    // The caller itself, with SKIPME no, closes once this reply is written: its task
    // writes its output before it waits again (server.rs).
    let except = if skip_me { session.id } else { 0 };
    let mut killed = 0;
    if let Some(kind) = kind {
        killed += shared.clients.kill_kind(kind, except);
    }
    if let Some(id) = id {
        if id != except && shared.clients.kill_id(id) {
            killed += 1;
        }
    }
    if killed == 0 && kind.is_none() {
        return Reply::err("No such client");
    }
    Reply::Int(killed as i64)
}

/// `CLIENT SETNAME name | GETNAME | ID | SETINFO ... | KILL ...`.
pub fn client(shared: &Shared, session: &mut Session, args: &Request) -> Reply {
    let sub = args[1].to_ascii_uppercase();
    if sub == b"KILL" {
        return client_kill(shared, session, args);
    }
    match (sub.as_slice(), args.len()) {
        (b"SETNAME", 3) => match check_name(&args[2]) {
            Ok(()) => {
                // An empty name clears it, as in Redis.
                session.name = if args[2].is_empty() { None } else { Some(args[2].clone()) };
                Reply::OK
            }
            Err(reply) => reply,
        },
        (b"GETNAME", 2) => session.name.clone().map_or(Reply::Null, Reply::Bulk),
        (b"ID", 2) => Reply::Int(session.id as i64),
        // Client libraries announce themselves with SETINFO (the redis crate does on
        // connecting); nothing reports it yet, so it is accepted and dropped.
        (b"SETINFO", 4) => Reply::OK,
        (b"SETNAME" | b"GETNAME" | b"ID" | b"SETINFO", _) => Reply::err(format!(
            "wrong number of arguments for 'client|{}' command",
            String::from_utf8_lossy(&args[1]).to_lowercase()
        )),
        _ => Reply::err(format!(
            "unknown subcommand '{}'. shale serves CLIENT SETNAME, GETNAME, ID, SETINFO and KILL",
            String::from_utf8_lossy(&args[1])
        )),
    }
}

/// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE]`: the clean shutdown SIGTERM makes
/// ([`crate::Server::wait_for_signal`] returns; [`crate::Server::shutdown`] lets every
/// connection finish, keeps a master's replication id and offset, and closes the store,
/// flushing its memtables). The options are Redis's and change nothing here: every
/// acknowledged write is in the store's WAL whatever `SAVE` says, and there is no RDB file
/// to write. `ABORT` finds no shutdown to cancel: a requested one starts at once. The
/// connection that asked is closed after `+OK` (Redis sends no reply; clients take either).
pub fn shutdown(shared: &Shared, session: &mut Session, args: &Request) -> Reply {
    for arg in &args[1..] {
        match arg.to_ascii_lowercase().as_slice() {
            b"nosave" | b"save" | b"now" | b"force" => {}
            b"abort" => return Reply::Error("ERR No shutdown in progress.".into()),
            _ => return syntax_error(),
        }
    }
    log::info!("SHUTDOWN asked by client {}", session.id);
    shared.shutdown_asked.notify_one();
    session.quit = true;
    Reply::OK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"pass", b"pass"));
        assert!(!same_secret(b"pass", b"pasS"));
        assert!(!same_secret(b"pass", b"passw"));
        assert!(!same_secret(b"", b"p"));
    }
}
