//! Server commands: INFO, CONFIG GET, COMMAND.

use std::fmt::Write;
use std::sync::atomic::Ordering;

use crate::commands::{COMMANDS, Spec, keys, lookup};
use crate::error::Result;
use crate::glob;
use crate::resp::{Reply, Request};
use crate::server::Shared;

/// The Redis version whose commands and replies `shale serve` follows, for clients that read
/// `redis_version` to decide what they may send.
pub const REDIS_VERSION: &str = "7.2.0";

/// INFO's sections, in Redis's order; `default` and `all` answer every one.
const SECTIONS: &[&str] =
    &["server", "clients", "memory", "persistence", "stats", "replication", "keyspace", "shale"];

/// `INFO [section ...]`.
pub async fn info(shared: &Shared, args: &Request) -> Result<Reply> {
    let wanted: Vec<String> =
        args[1..].iter().map(|a| String::from_utf8_lossy(a).to_lowercase()).collect();
    let all = wanted.is_empty()
        || wanted.iter().any(|w| matches!(w.as_str(), "all" | "default" | "everything"));
    let mut out = String::new();
    for section in SECTIONS {
        if !all && !wanted.iter().any(|w| w == section) {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let mut title = section.to_string();
        title[..1].make_ascii_uppercase();
        let _ = write!(out, "# {title}\r\n");
        match *section {
            "server" => server_section(shared, &mut out),
            "clients" => clients_section(shared, &mut out),
            "memory" => memory_section(&mut out),
            // What `redis-cli --stat` reads to show a child at work: none ever is (the WAL
            // and SSTs are the persistence, with no fork).
            "persistence" => out.push_str(
                "loading:0\r\nasync_loading:0\r\nrdb_bgsave_in_progress:0\r\n\
                 aof_enabled:1\r\naof_rewrite_in_progress:0\r\n",
            ),
            "stats" => stats_section(shared, &mut out),
            "replication" => super::replication::info_section(shared, &mut out),
            "keyspace" => {
                let (keys, exact) = keys::dbsize(&shared.keyspace).await?;
                // `keys_estimated=1` when DBSIZE extrapolated; expiries are not counted (the
                // engine would have to read every value).
                let _ = write!(out, "db0:keys={keys},keys_estimated={}\r\n", u8::from(!exact));
            }
            _ => shale_section(shared, &mut out),
        }
    }
    Ok(Reply::Bulk(out.into_bytes()))
}

fn server_section(shared: &Shared, out: &mut String) {
    let uptime = shared.started.elapsed().as_secs();
    let port = shared.tcp_addr.map_or(0, |a| a.port());
    let _ = write!(
        out,
        "redis_version:{REDIS_VERSION}\r\nshale_version:{}\r\nredis_mode:standalone\r\n\
         os:{} {}\r\narch_bits:{}\r\nprocess_id:{}\r\nrun_id:{}\r\ntcp_port:{port}\r\n\
         uptime_in_seconds:{uptime}\r\nuptime_in_days:{}\r\nserver_threads:{}\r\n\
         appendfsync:{}\r\n",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        std::env::consts::ARCH,
        usize::BITS,
        std::process::id(),
        shared.run_id,
        uptime / 86_400,
        shared.config.threads,
        shared.config.appendfsync.name(),
    );
}

fn clients_section(shared: &Shared, out: &mut String) {
    let c = &shared.counters;
    let _ = write!(
        out,
        "connected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:0\r\n",
        c.connected.load(Ordering::Relaxed),
        shared.config.max_clients
    );
}

/// Redis's memory fields, measured. `used_memory` is the process's resident set, as is
/// `used_memory_rss`: Redis counts its allocator's bytes there, and the allocator is the
/// binary's choice (mimalloc in `shale`), which this crate cannot see. `used_memory_peak` is
/// the resident set's peak (`VmHWM`). The engine's own share, its memtables and block
/// cache, is in the `shale` section. There is no `maxmemory` (0, as in Redis: no limit) and
/// no eviction.
fn memory_section(out: &mut String) {
    let rss = crate::memory::resident_bytes().unwrap_or(0);
    let peak = crate::memory::peak_resident_bytes().unwrap_or(rss).max(rss);
    let total = crate::memory::total_system_bytes().unwrap_or(0);
    let h = crate::memory::human;
    let _ = write!(
        out,
        "used_memory:{rss}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\n\
         used_memory_rss_human:{}\r\nused_memory_peak:{peak}\r\nused_memory_peak_human:{}\r\n\
         total_system_memory:{total}\r\ntotal_system_memory_human:{}\r\nmaxmemory:0\r\n\
         maxmemory_human:0B\r\nmaxmemory_policy:noeviction\r\nmem_fragmentation_ratio:1.00\r\n",
        h(rss),
        h(rss),
        h(peak),
        h(total),
    );
}

fn stats_section(shared: &Shared, out: &mut String) {
    let c = &shared.counters;
    let _ = write!(
        out,
        "total_connections_received:{}\r\ntotal_commands_processed:{}\r\n\
         rejected_connections:{}\r\ntotal_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\n\
         expired_keys:{}\r\nsync_full:{}\r\nsync_partial_ok:{}\r\nsync_partial_err:{}\r\n",
        c.connections_received.load(Ordering::Relaxed),
        c.commands_processed.load(Ordering::Relaxed),
        c.rejected_connections.load(Ordering::Relaxed),
        c.net_input_bytes.load(Ordering::Relaxed),
        c.net_output_bytes.load(Ordering::Relaxed),
        shared.keyspace.expired_deleted(),
        shared.keyspace.replication().sync_full.load(Ordering::Relaxed),
        shared.keyspace.replication().sync_partial_ok.load(Ordering::Relaxed),
        shared.keyspace.replication().sync_partial_err.load(Ordering::Relaxed),
    );
}

/// The engine's own figures: levels, stalls, the block cache.
fn shale_section(shared: &Shared, out: &mut String) {
    let s = shared.keyspace.db().stats();
    let levels = s.files_per_level.iter().rposition(|&n| n > 0).map_or(0, |l| l + 1);
    let _ = write!(out, "shale_levels:{levels}\r\n");
    for (level, (files, bytes)) in s.files_per_level.iter().zip(&s.bytes_per_level).enumerate() {
        if *files > 0 {
            let _ = write!(out, "shale_level_{level}:files={files},bytes={bytes}\r\n");
        }
    }
    let stalls = [
        ("memtable", s.stalls.memtable),
        ("l0_slowdown", s.stalls.l0_slowdown),
        ("l0_stop", s.stalls.l0_stop),
        ("pending_slowdown", s.stalls.pending_slowdown),
        ("pending_stop", s.stalls.pending_stop),
    ];
    for (name, total) in stalls {
        let _ = write!(
            out,
            "shale_stall_{name}:count={},duration_us={}\r\n",
            total.count, total.duration_us
        );
    }
    let _ = write!(
        out,
        "shale_block_cache_hit_ratio:{:.4}\r\nshale_block_cache_hits:{}\r\n\
         shale_block_cache_misses:{}\r\nshale_block_cache_bytes:{}\r\n\
         shale_memtables:{}\r\nshale_memtable_bytes:{}\r\nshale_pending_compaction_bytes:{}\r\n\
         shale_flushes:{}\r\nshale_compactions:{}\r\nshale_last_sequence:{}\r\n\
         shale_write_amplification:{:.2}\r\nshale_async_busy:{}\r\nshale_stopped:{}\r\n",
        s.block_cache_hit_ratio(),
        s.block_cache_hits,
        s.block_cache_misses,
        s.block_cache_bytes,
        s.memtables,
        s.memtable_bytes,
        s.pending_compaction_bytes,
        s.flushes,
        s.compactions,
        s.last_seq,
        s.write_amplification(),
        s.async_busy,
        s.stopped.as_deref().unwrap_or("no"),
    );
}

/// `CONFIG GET parameter [parameter ...]` (glob patterns, as in Redis). Settings are fixed
/// when the server starts, but for the replica link's credentials: `CONFIG SET masterauth`
/// and `masteruser` (replica.rs); `CONFIG SET` of any other and the rest are refused.
pub fn config(shared: &Shared, args: &Request) -> Reply {
    if args[1].eq_ignore_ascii_case(b"REWRITE") && args.len() == 2 {
        // Redis saves its running configuration to its file here (Sentinel sends it after
        // REPLICAOF when it promotes a replica). shale serve's settings are its flags, and
        // no file holds them: nothing to save. Whoever restarts a promoted server drops
        // `--replicaof` from its command line (docs/serve.md, "Sentinel").
        return Reply::OK;
    }
    if args[1].eq_ignore_ascii_case(b"SET") {
        // The replica link's credentials only (replica.rs).
        return crate::replica::config_set(shared, args);
    }
    if !args[1].eq_ignore_ascii_case(b"GET") {
        return Reply::err(format!(
            "CONFIG {} is not supported: shale serve's settings are its command-line flags",
            String::from_utf8_lossy(&args[1]).to_uppercase()
        ));
    }
    if args.len() < 3 {
        return crate::commands::wrong_arity("config|get");
    }
    let c = &shared.config;
    let (masteruser, masterauth) = shared.follower.auth_setting(c);
    let params: Vec<(&str, String)> = vec![
        ("appendfsync", c.appendfsync.name().into()),
        // Every write goes to the engine's WAL: always on.
        ("appendonly", "yes".into()),
        ("bind", c.bind.map(|a| a.ip().to_string()).unwrap_or_default()),
        ("databases", "1".into()),
        ("masterauth", masterauth.unwrap_or_default()),
        ("masteruser", masteruser.unwrap_or_default()),
        ("maxclients", c.max_clients.to_string()),
        ("min-replicas-max-lag", c.min_replicas_max_lag.to_string()),
        ("min-replicas-to-write", c.min_replicas_to_write.to_string()),
        ("port", shared.tcp_addr.map_or(0, |a| a.port()).to_string()),
        ("protected-mode", if c.protected_mode { "yes" } else { "no" }.into()),
        ("proto-max-bulk-len", c.max_request_bytes.to_string()),
        ("repl-backlog-size", c.repl_backlog_size.to_string()),
        ("replica-priority", c.replica_priority.to_string()),
        ("requirepass", c.password.clone().unwrap_or_default()),
        // No snapshots: the WAL and SSTs are the persistence.
        ("save", String::new()),
        ("unixsocket", c.unix_socket.as_ref().map(|p| p.display().to_string()).unwrap_or_default()),
    ];
    let mut out = Vec::new();
    for (name, value) in &params {
        let wanted =
            args[2..].iter().any(|p| glob::matches(&p.to_ascii_lowercase(), name.as_bytes()));
        if wanted {
            out.push((Reply::text(*name), Reply::text(value.clone())));
        }
    }
    Reply::Map(out)
}

/// One command's `COMMAND INFO` entry (Redis 7's ten fields; the last four empty).
fn command_info(spec: &Spec) -> Reply {
    Reply::Array(vec![
        Reply::text(spec.name),
        Reply::Int(i64::from(spec.arity)),
        Reply::Array(spec.flags.iter().map(|f| Reply::Status((*f).to_string())).collect()),
        Reply::Int(i64::from(spec.keys.0)),
        Reply::Int(i64::from(spec.keys.1)),
        Reply::Int(i64::from(spec.keys.2)),
        Reply::Array(Vec::new()),
        Reply::Array(Vec::new()),
        Reply::Array(Vec::new()),
        Reply::Array(Vec::new()),
    ])
}

/// `COMMAND`, `COMMAND COUNT`, `COMMAND INFO name ...`, `COMMAND LIST`, `COMMAND DOCS`:
/// what redis-cli asks on connecting to give its hints. DOCS answers no documents, so
/// redis-cli falls back on the hints built into it.
pub fn command(args: &Request) -> Reply {
    let Some(sub) = args.get(1) else {
        return Reply::Array(COMMANDS.iter().map(command_info).collect());
    };
    match sub.to_ascii_uppercase().as_slice() {
        b"COUNT" => Reply::Int(COMMANDS.len() as i64),
        b"LIST" => Reply::Array(COMMANDS.iter().map(|s| Reply::text(s.name)).collect()),
        b"INFO" => {
            if args.len() == 2 {
                return Reply::Array(COMMANDS.iter().map(command_info).collect());
            }
            Reply::Array(
                args[2..]
                    .iter()
                    .map(|n| lookup(n).map_or(Reply::NullArray, command_info))
                    .collect(),
            )
        }
        b"DOCS" => Reply::Map(Vec::new()),
        _ => Reply::err(format!(
            "unknown subcommand '{}'. shale serves COMMAND, COMMAND COUNT, INFO, LIST and DOCS",
            String::from_utf8_lossy(sub)
        )),
    }
}
