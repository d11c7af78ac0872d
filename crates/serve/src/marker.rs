//! The marker: how `shale serve` knows a store is its own before it answers from it.
//!
//! Every value `shale serve` stores is in its own format ([`crate::value`]) under keys in its
//! own namespaces ([`crate::keyspace`]). A store filled by another program (`shale bench`,
//! the Python package, the C ABI) holds other bytes, which serve would answer every command
//! about with a corruption error. So serve marks the stores it makes with a server key, and
//! refuses at start a store with data but no marker, unless the data is serve's own.
//!
//! The marker's engine key is `0xff "serve-format"` (the server's namespace: no client key
//! can collide with it, FLUSHDB does not delete it). Its value:
//! ```text
//! offset  size  type   field
//! 0       4     bytes  magic "SHSV"
//! 4       1     u8     key layout version: 1 (keyspace.rs: 0x00 database 0, 0xff server)
//! 5       1     u8     value format version: 1 (value.rs)
//! ```
//! No checksum: the engine checksums every block and WAL page it stores. Versions only go
//! forward; a marker of a later version is refused (a newer serve made the store).
//!
//! At start ([`claim`]):
//! 1. A marker: its versions must be known. Nothing else is read.
//! 2. No marker and no key at all (a new store, or an empty one): adopted, the marker
//!    written with a synced write.
//! 3. No marker, but keys (a store of a serve built before the marker, or of another
//!    program): every live key outside database 0 is refused but for the marker, and the
//!    values of database-0 keys are sampled, the first [`SAMPLE_FIRST`] and
//!    [`SAMPLE_SEEKS`] runs of [`SAMPLE_RUN`] from random places; if every one decodes as
//!    serve's format, the store is an older serve's: adopted and marked. Otherwise it is
//!    refused untouched, naming the first key found that is not serve's.

use std::fmt;

use shale_lsm::{Db, ReadOptions, WriteBatch, WriteOptions};

use crate::error::{Error, Result};
use crate::keyspace::{DB0, SERVER};
use crate::value;

/// The marker's engine key.
pub const MARKER_KEY: &[u8] = b"\xffserve-format";
/// The first bytes of the marker's value.
pub const MAGIC: &[u8; 4] = b"SHSV";
/// The key layout written.
pub const KEY_LAYOUT_VERSION: u8 = 1;
/// Database-0 values read from the start of an unmarked store.
pub const SAMPLE_FIRST: usize = 1000;
/// Random places an unmarked store's database-0 values are also read from.
pub const SAMPLE_SEEKS: usize = 16;
/// Values read at each random place.
pub const SAMPLE_RUN: usize = 64;
/// Bytes of a foreign key quoted in a refusal.
const QUOTED_KEY_BYTES_MAX: usize = 40;

/// How [`claim`] found the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// It carried serve's marker.
    Marked,
    /// It held no key: marked now.
    AdoptedEmpty,
    /// It held no marker, but every key and sampled value was serve's (a store of a serve
    /// built before the marker): marked now.
    AdoptedUnmarked {
        /// Database-0 values read and decoded.
        sampled: usize,
    },
}

impl fmt::Display for Claim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Claim::Marked => f.write_str("a store of shale serve"),
            Claim::AdoptedEmpty => f.write_str("an empty store, now marked as shale serve's"),
            Claim::AdoptedUnmarked { sampled } => write!(
                f,
                "a store without shale serve's marker whose keys and {sampled} sampled values \
                 are all in serve's format (an older serve's): now marked"
            ),
        }
    }
}

/// The marker's value.
pub fn encode() -> Vec<u8> {
    let mut v = MAGIC.to_vec();
    v.push(KEY_LAYOUT_VERSION);
    v.push(value::FORMAT_VERSION);
    v
}

/// Claims `db` for serve (the stages of the module comment).
///
/// # Errors
/// [`Error::NotServeStore`] for a store of other data, a marker of a later version or a
/// damaged marker, naming what was found; the engine's errors reading or marking it.
pub fn claim(db: &Db) -> Result<Claim> {
    if let Some(marker) = db.get(MARKER_KEY)? {
        check(&marker)?;
        return Ok(Claim::Marked);
    }
    if let Some(key) = first_key(db, &[DB0 + 1], Some(&[SERVER]))? {
        return Err(foreign(format!(
            "key {} is outside the namespaces serve writes (0x00 and 0xff)",
            quote(&key)
        )));
    }
    if let Some(key) = first_key(db, &[SERVER], None)? {
        return Err(foreign(format!(
            "server key {} is not one serve writes, and the store has no marker",
            quote(&key)
        )));
    }
    let sampled = sample(db)?;
    mark(db)?;
    Ok(if sampled == 0 { Claim::AdoptedEmpty } else { Claim::AdoptedUnmarked { sampled } })
}

/// Checks a marker's value.
fn check(marker: &[u8]) -> Result<()> {
    let [m0, m1, m2, m3, layout, format] = marker else {
        return Err(foreign(format!("its marker is {} bytes, not 6", marker.len())));
    };
    if [*m0, *m1, *m2, *m3] != *MAGIC {
        return Err(foreign("its marker does not start with \"SHSV\"".into()));
    }
    if *layout != KEY_LAYOUT_VERSION || *format != value::FORMAT_VERSION {
        return Err(foreign(format!(
            "its marker says key layout {layout} and value format {format}; this serve \
             knows {KEY_LAYOUT_VERSION} and {} (a newer shale serve made it)",
            value::FORMAT_VERSION
        )));
    }
    Ok(())
}

/// The first live key at or after `from` (before `to`, if given).
fn first_key(db: &Db, from: &[u8], to: Option<&[u8]>) -> Result<Option<Vec<u8>>> {
    let opts = ReadOptions {
        lower_bound: Some(from.to_vec()),
        upper_bound: to.map(<[u8]>::to_vec),
        ..ReadOptions::default()
    };
    let mut it = db.iter(&opts);
    it.seek_to_first();
    let key = it.valid().then(|| it.key().to_vec());
    it.status()?;
    Ok(key)
}

/// Reads database-0 values of an unmarked store (stage 3): how many, all decoding; the first
/// that does not is an error.
fn sample(db: &Db) -> Result<usize> {
    let mut sampled = sample_run(db, &[DB0], SAMPLE_FIRST)?;
    if sampled == 0 {
        return Ok(0);
    }
    for seed in 0..SAMPLE_SEEKS {
        let mut start = vec![DB0];
        start.extend_from_slice(&random_u64(seed).to_be_bytes());
        sampled += sample_run(db, &start, SAMPLE_RUN)?;
    }
    Ok(sampled)
}

/// Decodes up to `count` database-0 values from `start`; how many were read.
fn sample_run(db: &Db, start: &[u8], count: usize) -> Result<usize> {
    let opts = ReadOptions {
        lower_bound: Some(vec![DB0]),
        upper_bound: Some(vec![DB0 + 1]),
        ..ReadOptions::default()
    };
    let mut it = db.iter(&opts);
    it.seek(start);
    let mut read = 0;
    while it.valid() && read < count {
        if let Err(e) = value::decode_parts(it.value()) {
            return Err(foreign(format!(
                "the value of key {} is not serve's: {e}",
                quote(it.key())
            )));
        }
        read += 1;
        it.next();
    }
    it.status()?;
    Ok(read)
}

/// A random number for a sample's place (no generator is needed for 16 places: the
/// standard library's hasher keys are random per process).
fn random_u64(seed: usize) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_usize(seed);
    h.finish()
}

/// Writes the marker, synced, so a store adopted stays adopted across a crash.
fn mark(db: &Db) -> Result<()> {
    let mut b = WriteBatch::new();
    b.put(MARKER_KEY, &encode());
    Ok(db.write(&b, &WriteOptions { sync: true })?)
}

fn foreign(why: String) -> Error {
    Error::NotServeStore(why)
}

/// A key for a message: printable ASCII as is, other bytes escaped, long keys cut.
fn quote(key: &[u8]) -> String {
    let shown = &key[..key.len().min(QUOTED_KEY_BYTES_MAX)];
    let mut s: String = shown.escape_ascii().to_string();
    if key.len() > shown.len() {
        s.push_str("...");
    }
    format!("\"{s}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_is_as_documented() {
        assert_eq!(encode(), b"SHSV\x01\x01");
        check(&encode()).unwrap();
        for bad in [&b"SHSV\x01"[..], b"SHSX\x01\x01", b"SHSV\x02\x01", b"SHSV\x01\x02"] {
            assert!(matches!(check(bad), Err(Error::NotServeStore(_))), "{bad:?}");
        }
        assert_eq!(MARKER_KEY[0], SERVER);
    }

    #[test]
    fn keys_are_quoted_short_and_escaped() {
        assert_eq!(quote(b"0000000000000001"), "\"0000000000000001\"");
        assert_eq!(quote(b"\x00k"), "\"\\x00k\"");
        assert!(quote(&[b'a'; 100]).ends_with("...\""));
    }
}
