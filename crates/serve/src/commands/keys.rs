//! Keyspace commands: SCAN, KEYS, DBSIZE, FLUSHDB (and FLUSHALL, the same with one database).

use crate::commands::{not_an_integer, parse_i64, syntax_error};
use crate::error::Result;
use crate::glob;
use crate::keyspace::Keyspace;
use crate::resp::{Reply, Request};

/// SCAN's COUNT when none is given (Redis's).
pub const SCAN_COUNT_DEFAULT: usize = 10;
/// Largest COUNT a SCAN uses: a larger one is taken as this (COUNT is a hint in Redis too).
pub const SCAN_COUNT_MAX: usize = 100_000;
/// Entries read per engine scan by KEYS and DBSIZE.
const WALK_BATCH: usize = 1024;
/// Most keys KEYS answers: past it the reply is an error telling to use SCAN, rather than a
/// reply of unbounded size.
pub const KEYS_MAX: usize = 1_000_000;
/// Keys DBSIZE counts one by one; past them it extrapolates.
pub const DBSIZE_COUNTED_MAX: usize = 100_000;
/// Bytes an entry takes in an SST beyond its key and value, for DBSIZE's extrapolation: the
/// namespace and value-header bytes, the 8-byte sequence trailer of the internal key, length
/// prefixes, and a share of restart points and index. A rough figure: small uncompressed
/// entries measured about 28 bytes over their key and value, compressed ones less.
const ENTRY_OVERHEAD_BYTES: usize = 16;

/// `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]`: visits up to COUNT keys after the
/// cursor and answers those matching, with the next cursor ("0" when done). Cursors name the
/// last key visited (keyspace.rs), so writes between calls never make a scan skip or repeat
/// a key present throughout.
pub async fn scan(ks: &Keyspace, args: &Request) -> Result<Reply> {
    let cursor = match std::str::from_utf8(&args[1]).ok().and_then(|s| s.parse::<u64>().ok()) {
        Some(c) => c,
        None => return Ok(Reply::err("invalid cursor")),
    };
    let mut pattern: Option<&[u8]> = None;
    let mut count = SCAN_COUNT_DEFAULT;
    let mut only_strings = true;
    let mut i = 2;
    while i < args.len() {
        if i + 1 >= args.len() {
            return Ok(syntax_error());
        }
        match args[i].to_ascii_uppercase().as_slice() {
            b"MATCH" => pattern = Some(&args[i + 1]),
            b"COUNT" => match parse_i64(&args[i + 1]) {
                Some(n) if n >= 1 => count = (n as usize).min(SCAN_COUNT_MAX),
                Some(_) => return Ok(syntax_error()),
                None => return Ok(not_an_integer()),
            },
            // Every value is a string: TYPE string finds all, any other type none.
            b"TYPE" => only_strings = args[i + 1].eq_ignore_ascii_case(b"string"),
            _ => return Ok(syntax_error()),
        }
        i += 2;
    }
    let after = match cursor {
        0 => None,
        id => match ks.load_cursor(id) {
            Some(key) => Some(key),
            None => {
                return Ok(Reply::err(format!(
                    "cursor {id} is unknown: the server remembers its last {} cursors, and none \
                     across a restart; start again from 0",
                    crate::keyspace::CURSORS_MAX
                )));
            }
        },
    };
    let prefix = pattern.map(glob::literal_prefix).unwrap_or_default();
    let (entries, last) = ks.scan(after.as_deref(), count, &prefix).await?;
    let keys = entries
        .into_iter()
        .filter(|(k, _)| only_strings && pattern.is_none_or(|p| glob::matches(p, k)))
        .map(|(k, _)| Reply::Bulk(k))
        .collect();
    let next = last.map_or(0, |key| ks.save_cursor(key));
    Ok(Reply::Array(vec![Reply::text(next.to_string()), Reply::Array(keys)]))
}

/// `KEYS pattern`: every live key matching, in key order (up to [`KEYS_MAX`]).
pub async fn keys(ks: &Keyspace, args: &Request) -> Result<Reply> {
    let pattern = &args[1];
    let prefix = glob::literal_prefix(pattern);
    let mut out = Vec::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let (entries, last) = ks.scan(after.as_deref(), WALK_BATCH, &prefix).await?;
        for (k, _) in entries {
            if glob::matches(pattern, &k) {
                if out.len() == KEYS_MAX {
                    return Ok(Reply::err(format!(
                        "KEYS would answer more than {KEYS_MAX} keys; use SCAN"
                    )));
                }
                out.push(Reply::Bulk(k));
            }
        }
        match last {
            Some(k) => after = Some(k),
            None => return Ok(Reply::Array(out)),
        }
    }
}

/// The number of keys, and whether it is exact. Up to [`DBSIZE_COUNTED_MAX`] live keys are
/// counted; past that the count is extrapolated from the bytes of the keys counted against
/// the bytes the engine holds (its levels and memtables), which overwritten, deleted and
/// expired entries not yet compacted away inflate, and compression deflates. The engine keeps
/// no count of its keys: an LSM tree cannot know one without reading them.
pub async fn dbsize(ks: &Keyspace) -> Result<(u64, bool)> {
    let mut counted = 0usize;
    let mut counted_bytes = 0u64;
    let mut after: Option<Vec<u8>> = None;
    while counted < DBSIZE_COUNTED_MAX {
        let (entries, last) = ks.scan(after.as_deref(), WALK_BATCH, b"").await?;
        counted += entries.len();
        counted_bytes += entries
            .iter()
            .map(|(k, v)| (k.len() + v.data.len() + ENTRY_OVERHEAD_BYTES) as u64)
            .sum::<u64>();
        match last {
            Some(k) => after = Some(k),
            None => return Ok((counted as u64, true)),
        }
    }
    let stats = ks.db().stats();
    let held: u64 = stats.bytes_per_level.iter().sum::<u64>() + stats.memtable_bytes as u64;
    let estimate = (counted as f64 * held as f64 / counted_bytes.max(1) as f64) as u64;
    Ok((estimate.max(counted as u64), false))
}

/// `FLUSHDB [ASYNC|SYNC]`: every key gone, in one range delete (the engine drops the data at
/// its next compactions, so ASYNC and SYNC are the same).
pub async fn flushdb(ks: &Keyspace, args: &Request) -> Result<Reply> {
    match args.get(1).map(|a| a.to_ascii_uppercase()) {
        None => {}
        Some(mode) if (mode == b"ASYNC" || mode == b"SYNC") && args.len() == 2 => {}
        Some(_) => return Ok(syntax_error()),
    }
    ks.flush_db().await?;
    Ok(Reply::OK)
}
