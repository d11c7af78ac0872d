//! Internal keys: a user key with the sequence number and kind of the write that made it.
//!
//! ```text
//! internal key = user key bytes | trailer (u64, little-endian) = sequence << 8 | kind
//! ```
//! Order: user keys ascending (bytewise), then trailers *descending*, so the newest version of
//! a user key comes first and a lookup at snapshot `s` seeks to `(key, s, Kind::SEEK)`, the
//! first entry at or below the snapshot.

use std::cmp::Ordering;

/// Bytes of the trailer after the user key.
pub const TRAILER_BYTES: usize = 8;
/// The largest sequence number (56 bits; the low 8 bits of the trailer hold the kind).
pub const SEQ_MAX: u64 = (1 << 56) - 1;
/// The trailer of a *range bound* ([`range_bound`]): the largest trailer, whose kind byte
/// (0xFF) no entry ever has.
pub const RANGE_BOUND_TRAILER: u64 = u64::MAX;

/// What a write did to its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Kind {
    /// The key was deleted (a tombstone).
    Delete = 0,
    /// The key was set to the value.
    Put = 1,
}

impl Kind {
    /// The kind used in seek targets: the largest, so a target sorts before every entry with
    /// the same user key and sequence.
    pub const SEEK: Kind = Kind::Put;

    /// Decodes a kind byte.
    pub fn from_u8(v: u8) -> Option<Kind> {
        match v {
            0 => Some(Kind::Delete),
            1 => Some(Kind::Put),
            _ => None,
        }
    }
}

/// Packs a sequence number and kind into a trailer.
pub fn trailer(seq: u64, kind: Kind) -> u64 {
    debug_assert!(seq <= SEQ_MAX, "sequence {seq} over 56 bits");
    (seq << 8) | kind as u64
}

/// Appends the internal key for `(user_key, seq, kind)` to `out`.
pub fn encode_into(out: &mut Vec<u8>, user_key: &[u8], seq: u64, kind: Kind) {
    out.extend_from_slice(user_key);
    out.extend_from_slice(&trailer(seq, kind).to_le_bytes());
}

/// The internal key for `(user_key, seq, kind)`.
pub fn encode(user_key: &[u8], seq: u64, kind: Kind) -> Vec<u8> {
    let mut out = Vec::with_capacity(user_key.len() + TRAILER_BYTES);
    encode_into(&mut out, user_key, seq, kind);
    out
}

/// A decoded internal key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parsed<'a> {
    /// The user key.
    pub user_key: &'a [u8],
    /// Sequence number of the write.
    pub seq: u64,
    /// What the write did.
    pub kind: Kind,
}

/// Splits an internal key; `None` if it is too short or its kind byte is unknown (damage).
pub fn parse(ikey: &[u8]) -> Option<Parsed<'_>> {
    let split = ikey.len().checked_sub(TRAILER_BYTES)?;
    let t = u64::from_le_bytes(ikey[split..].try_into().ok()?);
    Some(Parsed { user_key: &ikey[..split], seq: t >> 8, kind: Kind::from_u8(t as u8)? })
}

/// The user-key part of an internal key.
///
/// # Panics
/// If `ikey` is shorter than a trailer (internal keys are built by this module).
pub fn user_key(ikey: &[u8]) -> &[u8] {
    &ikey[..ikey.len() - TRAILER_BYTES]
}

/// The trailer of an internal key.
///
/// # Panics
/// As [`user_key`].
pub fn trailer_of(ikey: &[u8]) -> u64 {
    u64::from_le_bytes(ikey[ikey.len() - TRAILER_BYTES..].try_into().unwrap())
}

/// A *range bound*: the internal key that sorts just before every entry of `user_key`.
///
/// SST bounds that come from range tombstones use it: a tombstone `[start, end)` spans from
/// `range_bound(start)` up to, but excluding, every entry of `end`, so an SST whose largest key
/// is `range_bound(end)` holds nothing of `end` and may sit right beside an SST that starts at
/// `end` in a level that must stay disjoint. Its kind byte (0xFF) is no [`Kind`], so
/// [`parse`] refuses it and it can never pass for an entry.
pub fn range_bound(user_key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(user_key.len() + TRAILER_BYTES);
    out.extend_from_slice(user_key);
    out.extend_from_slice(&RANGE_BOUND_TRAILER.to_le_bytes());
    out
}

/// Whether `ikey` is a [`range_bound`]. As an SST's largest key it is exclusive: the SST
/// covers user keys below its user key, not the user key itself.
pub fn is_range_bound(ikey: &[u8]) -> bool {
    ikey.len() >= TRAILER_BYTES && trailer_of(ikey) == RANGE_BOUND_TRAILER
}

/// Compares internal keys: user key ascending, then trailer descending.
pub fn compare(a: &[u8], b: &[u8]) -> Ordering {
    user_key(a).cmp(user_key(b)).then_with(|| trailer_of(b).cmp(&trailer_of(a)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_version_sorts_first() {
        let old = encode(b"k", 5, Kind::Put);
        let new = encode(b"k", 9, Kind::Delete);
        let other = encode(b"ka", 1, Kind::Put);
        assert_eq!(compare(&new, &old), Ordering::Less);
        assert_eq!(compare(&old, &other), Ordering::Less);
        let seek = encode(b"k", 7, Kind::SEEK);
        assert_eq!(compare(&new, &seek), Ordering::Less);
        assert_eq!(compare(&seek, &old), Ordering::Less);
    }

    #[test]
    fn a_range_bound_sorts_before_every_entry_of_its_user_key() {
        let bound = range_bound(b"k");
        assert!(is_range_bound(&bound));
        assert!(parse(&bound).is_none(), "a bound is never an entry");
        for e in [encode(b"k", SEQ_MAX, Kind::SEEK), encode(b"k", 0, Kind::Delete)] {
            assert!(!is_range_bound(&e));
            assert_eq!(compare(&bound, &e), Ordering::Less);
        }
        assert_eq!(compare(&encode(b"j", 0, Kind::Delete), &bound), Ordering::Less);
    }

    #[test]
    fn parse_round_trips_and_refuses_damage() {
        let k = encode(b"user", SEQ_MAX, Kind::Delete);
        let p = parse(&k).unwrap();
        assert_eq!((p.user_key, p.seq, p.kind), (&b"user"[..], SEQ_MAX, Kind::Delete));
        assert!(parse(b"short").is_none());
        let mut bad = k.clone();
        let n = bad.len();
        bad[n - 8] = 7;
        assert!(parse(&bad).is_none());
    }
}
