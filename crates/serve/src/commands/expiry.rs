//! Expiry commands: TTL, PTTL, EXPIRE, PEXPIRE, PERSIST. The expiry lives in the value
//! (value.rs); an expired key reads as missing and is deleted lazily by the read that finds
//! it (keyspace.rs). The engine has no compaction filter yet, so compaction does not drop
//! expired keys: one never read again stays on disk until overwritten, deleted or FLUSHDB.

use crate::commands::{not_an_integer, parse_i64};
use crate::error::Result;
use crate::keyspace::now_ms;
use crate::resp::{Reply, Request};
use crate::run::Run;
use crate::value::Value;

/// `TTL key` (seconds, rounded as Redis rounds) or `PTTL key` (ms): -2 missing, -1 no expiry.
pub async fn ttl(run: &mut Run<'_>, args: &Request, seconds: bool) -> Result<Reply> {
    let Some(v) = run.read(&args[1]).await? else { return Ok(Reply::Int(-2)) };
    let Some(at) = v.expires_at_ms else { return Ok(Reply::Int(-1)) };
    let left_ms = at.saturating_sub(now_ms()) as i64;
    Ok(Reply::Int(if seconds { (left_ms + 500) / 1000 } else { left_ms }))
}

/// `EXPIRE key seconds [NX|XX|GT|LT]` (`PEXPIRE` with `unit_ms` 1; `EXPIREAT` and
/// `PEXPIREAT`, a Unix time, with `absolute`, which a Redis master's stream carries for
/// EXPIRE): 1 if the expiry was set, 0 if the key is missing or the condition refused it. A
/// time not in the future deletes the key, as in Redis.
pub async fn expire(
    run: &mut Run<'_>,
    args: &Request,
    unit_ms: i64,
    absolute: bool,
) -> Result<Reply> {
    let Some(n) = parse_i64(&args[2]) else { return Ok(not_an_integer()) };
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in &args[3..] {
        match opt.to_ascii_uppercase().as_slice() {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"GT" => gt = true,
            b"LT" => lt = true,
            _ => {
                return Ok(Reply::err(format!(
                    "Unsupported option {}",
                    String::from_utf8_lossy(opt)
                )));
            }
        }
    }
    if nx && (xx || gt || lt) || gt && lt {
        return Ok(Reply::err("NX and XX, GT or LT options at the same time are not compatible"));
    }
    let name = match (unit_ms == 1, absolute) {
        (true, false) => "pexpire",
        (false, false) => "expire",
        (true, true) => "pexpireat",
        (false, true) => "expireat",
    };
    let now = now_ms();
    let base = if absolute { 0 } else { now as i64 };
    let Some(at) = n.checked_mul(unit_ms).and_then(|ms| ms.checked_add(base)) else {
        return Ok(Reply::err(format!("invalid expire time in '{name}' command")));
    };
    let key = &args[1];
    run.lock(&[key]).await;
    let Some(v) = run.get(key).await? else { return Ok(Reply::Int(0)) };
    // A key without expiry counts as expiring never: after any time for GT and LT.
    let allowed = match v.expires_at_ms {
        None => !xx && !gt,
        Some(current) => !nx && (!gt || at > current as i64) && (!lt || at < current as i64),
    };
    if !allowed {
        return Ok(Reply::Int(0));
    }
    if at <= now as i64 {
        run.delete(key);
    } else {
        run.put(key, Value { expires_at_ms: Some(at as u64), data: v.data });
    }
    Ok(Reply::Int(1))
}

/// `PERSIST key`: 1 if an expiry was removed.
pub async fn persist(run: &mut Run<'_>, args: &Request) -> Result<Reply> {
    let key = &args[1];
    run.lock(&[key]).await;
    match run.get(key).await? {
        Some(v) if v.expires_at_ms.is_some() => {
            run.put(key, Value::new(v.data));
            Ok(Reply::Int(1))
        }
        _ => Ok(Reply::Int(0)),
    }
}
