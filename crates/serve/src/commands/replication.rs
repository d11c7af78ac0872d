//! The replication commands of a master: REPLCONF and PSYNC/SYNC (what a replica sends to
//! start its link; the link itself is `crate::replication`), ROLE, WAIT, and INFO's
//! replication section.

use std::fmt::Write;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::commands::{Session, not_an_integer, parse_i64, syntax_error};
use crate::keyspace::now_ms;
use crate::replication::SyncRequest;
use crate::resp::{Reply, Request};
use crate::server::Shared;

/// What REPLCONF asks of the connection: an answer, or none (`ACK` and `GETACK` are never
/// answered, as in Redis).
pub enum Replconf {
    /// Answer this.
    Reply(Reply),
    /// Answer nothing.
    Silent,
}

/// `REPLCONF option value ...`: what a replica tells of itself before PSYNC.
pub fn replconf(session: &mut Session, args: &Request) -> Replconf {
    if args.len() % 2 == 0 {
        return Replconf::Reply(syntax_error());
    }
    let mut port = session.replica.port;
    let mut ip = session.replica.ip.clone();
    let mut capa_eof = session.replica.capa_eof;
    for pair in args[1..].chunks(2) {
        let (option, value) = (pair[0].to_ascii_lowercase(), &pair[1]);
        match option.as_slice() {
            b"listening-port" => match parse_i64(value) {
                Some(p) if (0..=i64::from(u16::MAX)).contains(&p) => port = p as u16,
                Some(_) => return Replconf::Reply(Reply::err("Invalid port")),
                None => return Replconf::Reply(not_an_integer()),
            },
            b"ip-address" => {
                if value.is_empty() || value.len() > 46 {
                    return Replconf::Reply(Reply::err("Invalid ip-address"));
                }
                ip = Some(String::from_utf8_lossy(value).into_owned());
            }
            b"capa" => {
                if value.eq_ignore_ascii_case(b"eof") {
                    capa_eof = true;
                }
            }
            // An acknowledgement from a connection that is no replica's link, or a master's
            // request for one: nothing to do, and Redis answers neither.
            b"ack" | b"getack" => return Replconf::Silent,
            _ => {
                return Replconf::Reply(Reply::err(format!(
                    "Unrecognized REPLCONF option: {}",
                    String::from_utf8_lossy(&pair[0])
                )));
            }
        }
    }
    session.replica.port = port;
    session.replica.ip = ip;
    session.replica.capa_eof = capa_eof;
    Replconf::Reply(Reply::OK)
}

/// `PSYNC replid offset` and `SYNC`: checked here; the connection becomes the replica's link
/// once this request's reply (none) is out (`server.rs` hands it to `crate::replication`).
pub fn psync(session: &mut Session, args: &Request) -> Option<Reply> {
    let psync = if args[0].eq_ignore_ascii_case(b"psync") {
        if args.len() != 3 {
            return Some(crate::commands::wrong_arity("psync"));
        }
        let Some(offset) = parse_i64(&args[2]) else { return Some(not_an_integer()) };
        let mut replid = String::from_utf8_lossy(&args[1]).into_owned();
        if replid.len() != 40 || !replid.bytes().all(|b| b.is_ascii_hexdigit()) {
            // Not an id any master gives: a full resync, as Redis answers an id it does not
            // know.
            replid = "?".into();
        }
        Some((replid, offset))
    } else {
        None
    };
    session.sync = Some(SyncRequest {
        psync,
        port: session.replica.port,
        capa_eof: session.replica.capa_eof,
        ip: session.replica.ip.clone(),
    });
    None
}

/// `ROLE`: `master`, the offset, and each replica's address and acknowledged offset; or, on
/// a replica, `slave`, its master's address, the link's state and the offset applied.
pub fn role(shared: &Shared) -> Reply {
    if let Some(m) = shared.follower.master() {
        let up = m.status.up.load(Ordering::Acquire);
        return Reply::Array(vec![
            Reply::Bulk(b"slave".to_vec()),
            Reply::Bulk(m.host.into_bytes()),
            Reply::Int(i64::from(m.port)),
            Reply::Bulk(if up { b"connected".to_vec() } else { b"connecting".to_vec() }),
            Reply::Int(m.status.offset.load(Ordering::Acquire) as i64),
        ]);
    }
    let repl = shared.keyspace.replication();
    let replicas = repl
        .replicas()
        .iter()
        .filter(|r| r.online.load(Ordering::Acquire))
        .map(|r| {
            Reply::Array(vec![
                Reply::Bulk(r.ip.clone().into_bytes()),
                Reply::Bulk(r.port.to_string().into_bytes()),
                Reply::Bulk(r.ack.load(Ordering::Acquire).to_string().into_bytes()),
            ])
        })
        .collect();
    Reply::Array(vec![
        Reply::Bulk(b"master".to_vec()),
        Reply::Int(repl.offset() as i64),
        Reply::Array(replicas),
    ])
}

/// `WAIT numreplicas timeout`: waits until `numreplicas` replicas acknowledged every write of
/// this connection (`woff`, the replication offset past its last), or `timeout` ms pass (0:
/// no limit); answers how many did.
pub async fn wait(shared: &Shared, args: &Request, woff: u64) -> Reply {
    let (Some(n), Some(timeout)) = (parse_i64(&args[1]), parse_i64(&args[2])) else {
        return not_an_integer();
    };
    if timeout < 0 {
        return Reply::err("timeout is negative");
    }
    if shared.follower.is_replica() {
        return Reply::err(
            "WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.",
        );
    }
    let repl = shared.keyspace.replication();
    // The connection's run was flushed before WAIT: its writes are in the stream, before
    // `woff`.
    let offset = woff;
    let n = n.max(0) as usize;
    if repl.count_acked(offset) >= n {
        return Reply::Int(repl.count_acked(offset) as i64);
    }
    repl.request_acks();
    let deadline =
        (timeout > 0).then(|| tokio::time::Instant::now() + Duration::from_millis(timeout as u64));
    Reply::Int(repl.wait_for_acks(n, offset, deadline).await as i64)
}

/// INFO's `replication` section, with Redis's field names.
pub fn info_section(shared: &Shared, out: &mut String) {
    let repl = shared.keyspace.replication();
    let replicas = repl.replicas();
    match shared.follower.master() {
        None => out.push_str("role:master\r\n"),
        Some(m) => {
            let up = m.status.up.load(Ordering::Acquire);
            let offset = m.status.offset.load(Ordering::Acquire);
            let last_io =
                now_ms().saturating_sub(m.status.last_io_ms.load(Ordering::Acquire)) / 1000;
            let _ = write!(
                out,
                "role:slave\r\nmaster_host:{}\r\nmaster_port:{}\r\nmaster_link_status:{}\r\n\
                 master_last_io_seconds_ago:{last_io}\r\nmaster_sync_in_progress:{}\r\n\
                 slave_read_repl_offset:{offset}\r\nslave_repl_offset:{offset}\r\n\
                 slave_priority:{}\r\nslave_read_only:1\r\nreplica_announced:1\r\n\
                 shale_full_resyncs:{}\r\nshale_partial_resyncs:{}\r\n",
                m.host,
                m.port,
                if up { "up" } else { "down" },
                u8::from(!up),
                shared.config.replica_priority,
                m.status.full_resyncs.load(Ordering::Relaxed),
                m.status.partial_resyncs.load(Ordering::Relaxed),
            );
            if !up {
                // As Redis 7.0: -1 for a link that never came up.
                let since = match m.status.down_since_ms.load(Ordering::Acquire) {
                    0 => -1,
                    at => (now_ms().saturating_sub(at) / 1000) as i64,
                };
                let _ = write!(out, "master_link_down_since_seconds:{since}\r\n");
                // Why, where Redis tells only its log: a wrong `masterauth` shows here.
                if let Some(e) = m.status.error() {
                    let e: String =
                        e.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
                    let _ = write!(out, "shale_master_link_error:{e}\r\n");
                }
            }
        }
    }
    let _ = write!(out, "connected_slaves:{}\r\n", replicas.len());
    let now = now_ms();
    for (i, r) in replicas.iter().enumerate() {
        let state = if r.online.load(Ordering::Acquire) { "online" } else { "wait_bgsave" };
        let lag = now.saturating_sub(r.ack_at_ms.load(Ordering::Acquire)) / 1000;
        let _ = write!(
            out,
            "slave{i}:ip={},port={},state={state},offset={},lag={lag}\r\n",
            r.ip,
            r.port,
            r.ack.load(Ordering::Acquire)
        );
    }
    let (first, histlen) = repl.backlog_span().unwrap_or((0, 0));
    // The id this server's stream had before a promotion (`REPLICAOF NO ONE`), as Redis
    // reports it: a replica of the old id continues up to that offset (PSYNC2).
    let (replid2, second_offset) = match repl.replid2() {
        Some((id, offset)) => (id, offset.to_string()),
        None => ("0".repeat(40), "-1".to_string()),
    };
    let _ = write!(
        out,
        "master_failover_state:no-failover\r\nmaster_replid:{}\r\n\
         master_replid2:{replid2}\r\n\
         master_repl_offset:{}\r\nsecond_repl_offset:{second_offset}\r\nrepl_backlog_active:{}\r\n\
         repl_backlog_size:{}\r\nrepl_backlog_first_byte_offset:{first}\r\n\
         repl_backlog_histlen:{histlen}\r\n",
        repl.replid(),
        repl.offset(),
        u8::from(repl.is_active()),
        repl.backlog_size(),
    );
}
