//! A record of the hash engine's log: one store or delete, self-describing, carried as the
//! fragments of shared log pages (`shale_space::log_page`), whose checksums cover it.
//!
//! ```text
//! offset   size  field
//! 0        1     kind (u8): 1 store, 2 delete
//! 1        8     sequence number (u64 LE): the order of writes, across segments and GC copies
//! 9        1     key length K (u8), 4..=255
//! 10       4     value length V (u32 LE), at most 2 MiB; 0 for a delete
//! 14       K     key
//! 14+K     V     value
//! ```
//! The log is the data: there is no other write-ahead log, and a record is acknowledged once
//! the pages holding it are durable.

use crate::error::{Error, Result};

/// Shortest key (the SNIA KV API's and KV-SSD's lower bound: iterators bucket by 4 bytes).
pub const KEY_BYTES_MIN: usize = 4;
/// Longest key: its length is one byte on disk.
pub const KEY_BYTES_MAX: usize = 255;
/// Longest value (KV-SSD's 2 MiB).
pub const VALUE_BYTES_MAX: usize = 2 << 20;
/// Bytes before the key.
pub const HEADER_BYTES: usize = 14;
/// Longest encoded record.
pub const RECORD_BYTES_MAX: usize = HEADER_BYTES + KEY_BYTES_MAX + VALUE_BYTES_MAX;

/// What a record does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Stores the value under the key.
    Store = 1,
    /// Deletes the key (a tombstone).
    Delete = 2,
}

/// A decoded record, borrowing its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Store or delete.
    pub kind: Kind,
    /// Sequence number.
    pub seq: u64,
    /// The key.
    pub key: &'a [u8],
    /// The value (empty for a delete).
    pub value: &'a [u8],
}

/// Checks a key's length.
///
/// # Errors
/// [`Error::KeyLength`] naming the limits.
pub fn check_key(key: &[u8]) -> Result<()> {
    if (KEY_BYTES_MIN..=KEY_BYTES_MAX).contains(&key.len()) {
        Ok(())
    } else {
        Err(Error::KeyLength { len: key.len(), min: KEY_BYTES_MIN, max: KEY_BYTES_MAX })
    }
}

/// Checks a value's length against `max` (at most [`VALUE_BYTES_MAX`]).
///
/// # Errors
/// [`Error::ValueTooLarge`] naming the limit.
pub fn check_value(value: &[u8], max: usize) -> Result<()> {
    if value.len() <= max { Ok(()) } else { Err(Error::ValueTooLarge { len: value.len(), max }) }
}

impl Record<'_> {
    /// The encoded record.
    ///
    /// # Panics
    /// If the key or value is out of bounds (callers check them first).
    pub fn encode(&self) -> Vec<u8> {
        assert!(check_key(self.key).is_ok() && check_value(self.value, VALUE_BYTES_MAX).is_ok());
        let mut out = Vec::with_capacity(HEADER_BYTES + self.key.len() + self.value.len());
        out.push(self.kind as u8);
        out.extend_from_slice(&self.seq.to_le_bytes());
        out.push(self.key.len() as u8);
        out.extend_from_slice(&(self.value.len() as u32).to_le_bytes());
        out.extend_from_slice(self.key);
        out.extend_from_slice(self.value);
        out
    }

    /// Decodes a record; `None` if the bytes are not one (a bug or damage the page checksum
    /// did not catch: the caller reports Corruption).
    pub fn decode(bytes: &[u8]) -> Option<Record<'_>> {
        let head = Head::parse(bytes)?;
        if bytes.len() != HEADER_BYTES + head.key_len + head.value_len {
            return None;
        }
        let key = &bytes[HEADER_BYTES..HEADER_BYTES + head.key_len];
        let value = &bytes[HEADER_BYTES + head.key_len..];
        Some(Record { kind: head.kind, seq: head.seq, key, value })
    }
}

/// A record's header, its fields checked against the limits.
struct Head {
    kind: Kind,
    seq: u64,
    key_len: usize,
    value_len: usize,
}

impl Head {
    /// The header at the start of `bytes`; `None` if short or out of bounds.
    fn parse(bytes: &[u8]) -> Option<Head> {
        if bytes.len() < HEADER_BYTES {
            return None;
        }
        let kind = match bytes[0] {
            1 => Kind::Store,
            2 => Kind::Delete,
            _ => return None,
        };
        let seq = u64::from_le_bytes(bytes[1..9].try_into().ok()?);
        let key_len = bytes[9] as usize;
        let value_len = u32::from_le_bytes(bytes[10..14].try_into().ok()?) as usize;
        if !(KEY_BYTES_MIN..=KEY_BYTES_MAX).contains(&key_len)
            || value_len > VALUE_BYTES_MAX
            || (kind == Kind::Delete && value_len != 0)
        {
            return None;
        }
        Some(Head { kind, seq, key_len, value_len })
    }
}

/// The kind and key of a record from its first bytes: at least [`HEADER_BYTES`] and the key,
/// the value's bytes optional. `None` if they are not a record's start (damage, as for
/// [`Record::decode`]). Whose record a location holds, read from its first page alone.
pub fn decode_head(bytes: &[u8]) -> Option<(Kind, &[u8])> {
    let head = Head::parse(bytes)?;
    let key_end = HEADER_BYTES + head.key_len;
    if bytes.len() < key_end || bytes.len() > key_end + head.value_len {
        return None;
    }
    Some((head.kind, &bytes[HEADER_BYTES..key_end]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_every_truncation_or_bad_field_is_refused() {
        let r = Record { kind: Kind::Store, seq: 7, key: b"key-1", value: b"value" };
        let bytes = r.encode();
        assert_eq!(Record::decode(&bytes), Some(r));
        for n in 0..bytes.len() {
            assert_eq!(Record::decode(&bytes[..n]), None, "truncated to {n}");
        }
        let mut bad = bytes.clone();
        bad[0] = 3;
        assert_eq!(Record::decode(&bad), None);
        let mut bad = bytes.clone();
        bad[9] = 3; // key length below the minimum
        assert_eq!(Record::decode(&bad), None);
        let d = Record { kind: Kind::Delete, seq: 8, key: b"key-1", value: b"" };
        assert_eq!(Record::decode(&d.encode()), Some(d));
    }

    #[test]
    fn limits_are_typed_errors() {
        assert!(matches!(check_key(b"abc"), Err(Error::KeyLength { len: 3, min: 4, max: 255 })));
        assert!(matches!(check_key(&[0; 256]), Err(Error::KeyLength { len: 256, .. })));
        assert!(check_key(&[0; 255]).is_ok() && check_key(b"abcd").is_ok());
        let big = vec![0; VALUE_BYTES_MAX + 1];
        assert!(
            matches!(check_value(&big, VALUE_BYTES_MAX), Err(Error::ValueTooLarge { len, max }) if len == max + 1)
        );
        assert!(check_value(&big[1..], VALUE_BYTES_MAX).is_ok());
    }

    #[test]
    fn a_head_gives_the_kind_and_key_from_any_long_enough_prefix() {
        let r = Record { kind: Kind::Store, seq: 9, key: b"key-22", value: &[5; 100] };
        let bytes = r.encode();
        for cut in HEADER_BYTES + 6..=bytes.len() {
            assert_eq!(decode_head(&bytes[..cut]), Some((Kind::Store, &b"key-22"[..])));
        }
        for cut in 0..HEADER_BYTES + 6 {
            assert_eq!(decode_head(&bytes[..cut]), None, "{cut} bytes hold no whole key");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(decode_head(&long), None, "longer than the record says");
        let mut bad = bytes;
        bad[0] = 3;
        assert_eq!(decode_head(&bad), None);
    }
}
