//! String commands: GET, SET, SETEX, PSETEX, SETNX, GETSET, GETDEL, DEL, EXISTS, MGET, MSET,
//! MSETNX, INCR, INCRBY, DECR, DECRBY, APPEND, STRLEN, and TYPE (every value is a string).
//! Each runs in its connection's run (run.rs): a write locks its keys through the run, reads
//! them through the run's overlay, and stages its writes, which the run writes as one batch
//! with the rest of the pipeline's before it answers; so read-modify-writes such as INCR
//! never lose an update, and a run of them costs one engine write.

use crate::commands::{not_an_integer, parse_i64, syntax_error, wrong_arity};
use crate::error::Result;
use crate::keyspace::now_ms;
use crate::resp::{Reply, Request};
use crate::run::Run;
use crate::value::Value;

/// `GET key`.
pub async fn get(run: &mut Run<'_>, args: &Request) -> Result<Reply> {
    Ok(run.read(&args[1]).await?.map_or(Reply::Null, |v| Reply::Bulk(v.data)))
}

/// When a SET's key expires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SetExpiry {
    /// No expiry (the default: SET clears an existing one).
    None,
    /// At this unix time in ms.
    At(u64),
    /// KEEPTTL: whatever the key had.
    Keep,
}

/// SET's options.
#[derive(Debug)]
struct SetOptions {
    nx: bool,
    xx: bool,
    get: bool,
    expiry: SetExpiry,
}

/// Parses `[NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]`; the reply to send if bad.
fn set_options(args: &[Vec<u8>], now: u64) -> std::result::Result<SetOptions, Reply> {
    let mut o = SetOptions { nx: false, xx: false, get: false, expiry: SetExpiry::None };
    let mut expiry_given = false;
    let mut i = 0;
    while i < args.len() {
        let opt = args[i].to_ascii_uppercase();
        match opt.as_slice() {
            b"NX" if !o.xx => o.nx = true,
            b"XX" if !o.nx => o.xx = true,
            b"GET" => o.get = true,
            b"KEEPTTL" if !expiry_given => {
                expiry_given = true;
                o.expiry = SetExpiry::Keep;
            }
            b"EX" | b"PX" | b"EXAT" | b"PXAT" if !expiry_given && i + 1 < args.len() => {
                expiry_given = true;
                i += 1;
                let n = parse_i64(&args[i]).ok_or_else(not_an_integer)?;
                let invalid = || Reply::err("invalid expire time in 'set' command");
                if n <= 0 {
                    return Err(invalid());
                }
                let n = n as u64;
                let at = match opt.as_slice() {
                    b"EX" => n.checked_mul(1000).and_then(|ms| ms.checked_add(now)),
                    b"PX" => n.checked_add(now),
                    b"EXAT" => n.checked_mul(1000),
                    _ => Some(n),
                };
                o.expiry = SetExpiry::At(at.ok_or_else(invalid)?);
            }
            _ => return Err(syntax_error()),
        }
        i += 1;
    }
    Ok(o)
}

/// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]`.
pub async fn set(run: &mut Run<'_>, args: &Request) -> Result<Reply> {
    let now = now_ms();
    let o = match set_options(&args[3..], now) {
        Ok(o) => o,
        Err(reply) => return Ok(reply),
    };
    let key = &args[1];
    run.lock(&[key]).await;
    let needs_old = o.nx || o.xx || o.get || o.expiry == SetExpiry::Keep;
    let old = if needs_old { run.get(key).await? } else { None };
    let refused = (o.nx && old.is_some()) || (o.xx && old.is_none());
    if !refused {
        let expires_at_ms = match o.expiry {
            SetExpiry::None => None,
            SetExpiry::At(at) => Some(at),
            SetExpiry::Keep => old.as_ref().and_then(|v| v.expires_at_ms),
        };
        let value = Value { expires_at_ms, data: args[2].clone() };
        if expires_at_ms.is_some_and(|at| at <= now) {
            // EXAT or PXAT in the past: Redis sets and expires at once, so the key is gone.
            run.delete(key);
        } else {
            run.put(key, value);
        }
    }
    Ok(match (o.get, refused) {
        (true, _) => old.map_or(Reply::Null, |v| Reply::Bulk(v.data)),
        (false, false) => Reply::OK,
        (false, true) => Reply::Null,
    })
}

/// `SETEX key seconds value` (`PSETEX key milliseconds value` with `unit_ms` 1, `name` the
/// command's): SET with an expiry, as Redis answers it: a time that is not a positive integer
/// of the unit is `invalid expire time in 'setex' command`, one that is no integer
/// `value is not an integer or out of range`.
pub async fn setex(run: &mut Run<'_>, args: &Request, unit_ms: u64, name: &str) -> Result<Reply> {
    let invalid = || Reply::err(format!("invalid expire time in '{name}' command"));
    let Some(n) = parse_i64(&args[2]) else { return Ok(not_an_integer()) };
    if n <= 0 {
        return Ok(invalid());
    }
    let Some(at) = (n as u64).checked_mul(unit_ms).and_then(|ms| ms.checked_add(now_ms())) else {
        return Ok(invalid());
    };
    // Redis's bound: an expiry past i64 milliseconds is refused too.
    if at > i64::MAX as u64 {
        return Ok(invalid());
    }
    let key = &args[1];
    run.lock(&[key]).await;
    run.put(key, Value { expires_at_ms: Some(at), data: args[3].clone() });
    Ok(Reply::OK)
}

/// `SETNX key value`: 1 if the key was missing and is now set (without expiry), 0 if it
/// existed (untouched).
pub async fn setnx(run: &mut Run<'_>, args: &Request) -> Result<Reply> {
    let key = &args[1];
    run.lock(&[key]).await;
    if run.get(key).await?.is_some() {
        return Ok(Reply::Int(0));
    }
    run.put(key, Value::new(args[2].clone()));
    Ok(Reply::Int(1))
}

/// `GETSET key value`: the old value (nil if missing), the new one set; like SET, it clears
/// the key's expiry.
pub async fn getset(run: &mut Run<'_>, args: &Request) -> Result<Reply> {
    let key = &args[1];
    run.lock(&[key]).await;
    let old = run.get(key).await?;
    run.put(key, Value::new(args[2].clone()));
    Ok(old.map_or(Reply::Null, |v| Reply::Bulk(v.data)))
}

/// `TYPE key`: `string` for a live key (the only type served), `none` for a missing or
/// expired one; a status reply, as Redis's.
pub async fn key_type(run: &mut Run<'_>, args: &Request) -> Result<Reply> {
    Ok(Reply::Simple(if run.read(&args[1]).await?.is_some() { "string" } else { "none" }))
}

/// `GETDEL key`.
pub async fn getdel(run: &mut Run<'_>, args: &Request) -> Result<Reply> {
    let key = &args[1];
    run.lock(&[key]).await;
    match run.get(key).await? {
        Some(v) => {
            run.delete(key);
            Ok(Reply::Bulk(v.data))
        }
        None => Ok(Reply::Null),
    }
}

/// `DEL key [key ...]`: how many of the keys existed. One atomic batch; a key named twice
/// counts once.
pub async fn del(run: &mut Run<'_>, args: &Request) -> Result<Reply> {
    let mut keys: Vec<&[u8]> = args[1..].iter().map(Vec::as_slice).collect();
    keys.sort_unstable();
    keys.dedup();
    run.lock(&keys).await;
    let mut existed = 0;
    for key in &keys {
        if run.get(key).await?.is_some() {
            existed += 1;
        }
    }
    // Expired and missing keys are deleted too: a tombstone now saves a lazy delete later.
    for key in &keys {
        run.delete(key);
    }
    Ok(Reply::Int(existed))
}

/// `EXISTS key [key ...]`: how many of the keys exist, a key named twice counted twice.
pub async fn exists(run: &mut Run<'_>, args: &Request) -> Result<Reply> {
    let mut n = 0;
    for key in &args[1..] {
        if run.read(key).await?.is_some() {
            n += 1;
        }
    }
    Ok(Reply::Int(n))
}

/// `MGET key [key ...]`.
pub async fn mget(run: &mut Run<'_>, args: &Request) -> Result<Reply> {
    let mut out = Vec::with_capacity(args.len() - 1);
    for key in &args[1..] {
        out.push(run.read(key).await?.map_or(Reply::Null, |v| Reply::Bulk(v.data)));
    }
    Ok(Reply::Array(out))
}

/// `MSET key value [key value ...]`: one atomic batch; every key loses its expiry, as in Redis.
pub async fn mset(run: &mut Run<'_>, args: &Request) -> Result<Reply> {
    if args.len() % 2 == 0 {
        return Ok(wrong_arity("mset"));
    }
    let keys: Vec<&[u8]> = args[1..].iter().step_by(2).map(Vec::as_slice).collect();
    run.lock(&keys).await;
    for pair in args[1..].chunks_exact(2) {
        run.put(&pair[0], Value::new(pair[1].clone()));
    }
    Ok(Reply::OK)
}

/// `MSETNX key value [key value ...]`: 1 if none of the keys existed and all are now set
/// (without expiry), 0 if any existed (nothing set). One atomic batch.
pub async fn msetnx(run: &mut Run<'_>, args: &Request) -> Result<Reply> {
    if args.len() % 2 == 0 {
        return Ok(wrong_arity("msetnx"));
    }
    let keys: Vec<&[u8]> = args[1..].iter().step_by(2).map(Vec::as_slice).collect();
    run.lock(&keys).await;
    for key in &keys {
        if run.get(key).await?.is_some() {
            return Ok(Reply::Int(0));
        }
    }
    for pair in args[1..].chunks_exact(2) {
        run.put(&pair[0], Value::new(pair[1].clone()));
    }
    Ok(Reply::Int(1))
}

/// `INCRBY key n` (`DECRBY` with `negate`).
pub async fn incr_by_arg(run: &mut Run<'_>, args: &Request, negate: bool) -> Result<Reply> {
    let by = parse_i64(&args[2]).and_then(|n| if negate { n.checked_neg() } else { Some(n) });
    match by {
        Some(by) => incr_by(run, &args[1], Some(by)).await,
        None => Ok(not_an_integer()),
    }
}

/// Adds `by` to the integer at `key` (0 when missing), keeping its expiry.
pub async fn incr_by(run: &mut Run<'_>, key: &[u8], by: Option<i64>) -> Result<Reply> {
    let Some(by) = by else { return Ok(not_an_integer()) };
    run.lock(&[key]).await;
    let old = run.get(key).await?;
    let (current, expires_at_ms) = match &old {
        Some(v) => match parse_i64(&v.data) {
            Some(n) => (n, v.expires_at_ms),
            None => return Ok(not_an_integer()),
        },
        None => (0, None),
    };
    let Some(new) = current.checked_add(by) else {
        return Ok(Reply::err("increment or decrement would overflow"));
    };
    run.put(key, Value { expires_at_ms, data: new.to_string().into_bytes() });
    Ok(Reply::Int(new))
}

/// `APPEND key value`: the new length; the key's expiry is kept.
pub async fn append(run: &mut Run<'_>, args: &Request) -> Result<Reply> {
    let key = &args[1];
    run.lock(&[key]).await;
    let mut value = run.get(key).await?.unwrap_or_else(|| Value::new(Vec::new()));
    value.data.extend_from_slice(&args[2]);
    let len = value.data.len() as i64;
    run.put(key, value);
    Ok(Reply::Int(len))
}

/// `STRLEN key`: 0 for a missing key.
pub async fn strlen(run: &mut Run<'_>, args: &Request) -> Result<Reply> {
    Ok(Reply::Int(run.read(&args[1]).await?.map_or(0, |v| v.data.len() as i64)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(words: &[&str]) -> std::result::Result<SetOptions, Reply> {
        let args: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
        set_options(&args, 1_000)
    }

    #[test]
    fn set_options_parse_and_conflict_as_in_redis() {
        let o = opts(&["nx", "GET", "px", "50"]).unwrap();
        assert!(o.nx && o.get && !o.xx);
        assert_eq!(o.expiry, SetExpiry::At(1_050));
        assert_eq!(opts(&["EX", "2"]).unwrap().expiry, SetExpiry::At(3_000));
        assert_eq!(opts(&["EXAT", "7"]).unwrap().expiry, SetExpiry::At(7_000));
        assert_eq!(opts(&["KEEPTTL"]).unwrap().expiry, SetExpiry::Keep);
        for bad in [
            &["NX", "XX"][..],
            &["EX", "1", "PX", "1"],
            &["EX"],
            &["KEEPTTL", "EX", "1"],
            &["BOGUS"],
        ] {
            assert_eq!(opts(bad).unwrap_err(), syntax_error(), "{bad:?}");
        }
        assert_eq!(opts(&["EX", "x"]).unwrap_err(), not_an_integer());
        assert!(matches!(opts(&["EX", "0"]), Err(Reply::Error(e)) if e.contains("invalid expire")));
        assert!(
            matches!(opts(&["EX", &i64::MAX.to_string()]), Err(Reply::Error(e)) if e.contains("invalid expire"))
        );
    }
}
