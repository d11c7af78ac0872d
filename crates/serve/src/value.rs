//! The stored value format: what `shale serve` writes as the engine's value for a key.
//!
//! ```text
//! offset  size  type    field
//! 0       1     u8      flags: bits 0-3 format version (1), bit 4 set when an expiry follows,
//!                       bits 5-7 zero (a later version may use them; version 1 refuses them)
//! 1       8     u64 LE  expiry: unix time in milliseconds at which the key stops existing
//!                       (present only when bit 4 is set)
//! 1 or 9  n     bytes   the user's value, to the end of the engine's value
//! ```
//! No checksum: the engine checksums every block and WAL page it stores. The version only goes
//! forward; a value of an unknown version or with unknown flags is refused as corrupt rather
//! than read as something else.

use crate::error::{Error, Result};

/// The format version written.
pub const FORMAT_VERSION: u8 = 1;
const VERSION_MASK: u8 = 0x0f;
const HAS_EXPIRY: u8 = 0x10;
const KNOWN_FLAGS: u8 = VERSION_MASK | HAS_EXPIRY;
/// Bytes the header takes before the user's value, at most.
pub const HEADER_BYTES_MAX: usize = 9;

/// A decoded value: the user's bytes and their expiry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Value {
    /// Unix time in milliseconds at which the key expires; `None` for never.
    pub expires_at_ms: Option<u64>,
    /// The user's bytes.
    pub data: Vec<u8>,
}

impl Value {
    /// A value without expiry.
    pub fn new(data: Vec<u8>) -> Value {
        Value { expires_at_ms: None, data }
    }

    /// Whether the value has expired at `now_ms` (an expiry at `now_ms` has: Redis's rule).
    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expires_at_ms.is_some_and(|at| at <= now_ms)
    }

    /// The bytes stored in the engine.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_BYTES_MAX + self.data.len());
        encode_parts(self.expires_at_ms, &self.data, &mut out);
        out
    }

    /// Decodes the engine's bytes.
    ///
    /// # Errors
    /// [`Error::Corruption`] for an empty value, an unknown version or flag, or a truncated
    /// expiry: a value `shale serve` did not write (a store filled by `shale bench`, say).
    pub fn decode(bytes: &[u8]) -> Result<Value> {
        let (expires_at_ms, data) = decode_parts(bytes)?;
        Ok(Value { expires_at_ms, data: data.to_vec() })
    }
}

/// Encodes a value from its parts into `out` (which it appends to).
pub fn encode_parts(expires_at_ms: Option<u64>, data: &[u8], out: &mut Vec<u8>) {
    match expires_at_ms {
        Some(at) => {
            out.push(FORMAT_VERSION | HAS_EXPIRY);
            out.extend_from_slice(&at.to_le_bytes());
        }
        None => out.push(FORMAT_VERSION),
    }
    out.extend_from_slice(data);
}

/// Decodes a value without copying its bytes.
///
/// # Errors
/// As [`Value::decode`].
pub fn decode_parts(bytes: &[u8]) -> Result<(Option<u64>, &[u8])> {
    let corrupt = |why: &str| Error::Corruption(format!("stored value: {why}"));
    let Some((&flags, rest)) = bytes.split_first() else {
        return Err(corrupt("empty (not written by shale serve)"));
    };
    if flags & !KNOWN_FLAGS != 0 || flags & VERSION_MASK != FORMAT_VERSION {
        return Err(corrupt(&format!(
            "flags byte {flags:#04x} is not format version {FORMAT_VERSION} (not written by \
             shale serve, or by a newer one)"
        )));
    }
    if flags & HAS_EXPIRY == 0 {
        return Ok((None, rest));
    }
    let Some((at, data)) = rest.split_first_chunk::<8>() else {
        return Err(corrupt("expiry truncated"));
    };
    Ok((Some(u64::from_le_bytes(*at)), data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip() {
        for v in [
            Value::new(Vec::new()),
            Value::new(b"hello".to_vec()),
            Value { expires_at_ms: Some(0x0102_0304_0506_0708), data: b"x".to_vec() },
            Value { expires_at_ms: Some(u64::MAX), data: Vec::new() },
        ] {
            assert_eq!(Value::decode(&v.encode()).unwrap(), v);
        }
    }

    #[test]
    fn layout_is_as_documented() {
        let v = Value { expires_at_ms: Some(0x0102_0304_0506_0708), data: b"ab".to_vec() };
        assert_eq!(v.encode(), [0x11, 8, 7, 6, 5, 4, 3, 2, 1, b'a', b'b']);
        assert_eq!(Value::new(b"ab".to_vec()).encode(), [0x01, b'a', b'b']);
    }

    #[test]
    fn foreign_or_truncated_values_are_corruption() {
        for bad in [&b""[..], &[0x02], &[0x21], &[0x11, 1, 2, 3], &[0x00, b'a']] {
            assert!(matches!(Value::decode(bad), Err(Error::Corruption(_))), "{bad:?}");
        }
    }

    #[test]
    fn expiry_at_now_has_expired() {
        let v = Value { expires_at_ms: Some(100), data: Vec::new() };
        assert!(!v.is_expired(99));
        assert!(v.is_expired(100));
        assert!(!Value::new(Vec::new()).is_expired(u64::MAX));
    }
}
