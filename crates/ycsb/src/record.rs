//! Records: YCSB's `fieldcount` fields named `field0`, `field1`, ... of `fieldlength` random
//! printable bytes each, serialised into the one value a key-value engine stores.
//!
//! The encoding is the one YCSB's RocksDB binding writes (`RocksDBClient.serializeValues`), so
//! records have the same size as there: for each field, in order,
//!
//! ```text
//! offset  size           type         what
//! 0       4              u32 BE       name length N
//! 4       N              bytes        name ("field0", ...)
//! 4+N     4              u32 BE       value length V
//! 8+N     V              bytes        value
//! ```
//!
//! With YCSB's defaults (10 fields of 100 bytes) a record is 10 × (4 + 6 + 4 + 100) = 1140
//! bytes. There is no checksum: the engine under test owns integrity.

use std::fmt;

use rand::Rng;

/// Bytes of each length prefix.
const LEN_BYTES: usize = 4;

/// A record that does not decode: the engine returned bytes that no insert or update wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MalformedRecord {
    /// Byte offset where decoding failed.
    pub offset: usize,
    /// The record's length.
    pub len: usize,
}

impl fmt::Display for MalformedRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "malformed record: a field runs past its end at byte {} of {}",
            self.offset, self.len
        )
    }
}

impl std::error::Error for MalformedRecord {}

/// The shape of records: how many fields, how long each (YCSB's `fieldcount`, `fieldlength`;
/// field lengths are constant, YCSB's default `fieldlengthdistribution`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordLayout {
    /// Fields per record (YCSB's default 10).
    pub field_count: usize,
    /// Bytes per field value (YCSB's default 100).
    pub field_length: usize,
}

impl Default for RecordLayout {
    fn default() -> RecordLayout {
        RecordLayout { field_count: 10, field_length: 100 }
    }
}

impl RecordLayout {
    /// The name of field `i`: `field{i}`, as YCSB's default `fieldnameprefix`.
    pub fn field_name(i: usize) -> String {
        format!("field{i}")
    }

    /// Bytes of an encoded record with every field.
    ///
    /// ```
    /// assert_eq!(ycsb::record::RecordLayout::default().record_bytes(), 1140);
    /// ```
    pub fn record_bytes(&self) -> usize {
        (0..self.field_count)
            .map(|i| 2 * LEN_BYTES + Self::field_name(i).len() + self.field_length)
            .sum()
    }

    /// A record with every field set to fresh random bytes, encoded into `out` (cleared first).
    pub fn build_record<R: Rng + ?Sized>(&self, rng: &mut R, out: &mut Vec<u8>) {
        out.clear();
        out.reserve(self.record_bytes());
        let mut value = vec![0; self.field_length];
        for i in 0..self.field_count {
            fill_random(rng, &mut value);
            encode_field(Self::field_name(i).as_bytes(), &value, out);
        }
    }
}

/// Fills `buf` with random printable ASCII (`' '..='~'`), as YCSB's `RandomByteIterator` fills
/// fields with printable characters.
pub fn fill_random<R: Rng + ?Sized>(rng: &mut R, buf: &mut [u8]) {
    for chunk in buf.chunks_mut(8) {
        let bits = rng.next_u64().to_le_bytes();
        for (b, r) in chunk.iter_mut().zip(bits) {
            // 95 printable characters; the lean toward the first 66 (256 % 95) is immaterial.
            *b = b' ' + r % 95;
        }
    }
}

/// Appends one field to an encoded record.
pub fn encode_field(name: &[u8], value: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&len_prefix(name.len()));
    out.extend_from_slice(name);
    out.extend_from_slice(&len_prefix(value.len()));
    out.extend_from_slice(value);
}

fn len_prefix(len: usize) -> [u8; LEN_BYTES] {
    u32::try_from(len).expect("a field name or value fits in 4 GiB").to_be_bytes()
}

/// One decoded field: its name and value, borrowed from the record.
pub type Field<'a> = (&'a [u8], &'a [u8]);

/// The fields of an encoded record, as `(name, value)` pairs in stored order.
///
/// # Errors
/// [`MalformedRecord`] when a length prefix runs past the end.
///
/// ```
/// use ycsb::record::{decode_fields, encode_field};
///
/// let mut rec = Vec::new();
/// encode_field(b"field0", b"abc", &mut rec);
/// encode_field(b"field1", b"", &mut rec);
/// let fields = decode_fields(&rec)?;
/// assert_eq!(fields, [(&b"field0"[..], &b"abc"[..]), (&b"field1"[..], &b""[..])]);
/// # Ok::<(), ycsb::record::MalformedRecord>(())
/// ```
pub fn decode_fields(record: &[u8]) -> Result<Vec<Field<'_>>, MalformedRecord> {
    let mut fields = Vec::new();
    let mut at = 0;
    while at < record.len() {
        let (name, next) = take_prefixed(record, at)?;
        let (value, next) = take_prefixed(record, next)?;
        fields.push((name, value));
        at = next;
    }
    Ok(fields)
}

/// The length-prefixed bytes at `at`, and the offset after them.
fn take_prefixed(record: &[u8], at: usize) -> Result<(&[u8], usize), MalformedRecord> {
    let bad = MalformedRecord { offset: at, len: record.len() };
    let prefix = record.get(at..at + LEN_BYTES).ok_or_else(|| bad.clone())?;
    let len = u32::from_be_bytes(prefix.try_into().expect("4 bytes")) as usize;
    let start = at + LEN_BYTES;
    let bytes = record.get(start..start + len).ok_or(bad)?;
    Ok((bytes, start + len))
}

/// `record` with field `name` set to `value` (appended if absent), re-encoded into `out`
/// (cleared first): the merge YCSB's RocksDB binding does for an update of some fields.
///
/// # Errors
/// [`MalformedRecord`] when `record` does not decode.
pub fn replace_field(
    record: &[u8],
    name: &[u8],
    value: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), MalformedRecord> {
    let fields = decode_fields(record)?;
    out.clear();
    out.reserve(record.len() + value.len());
    let mut replaced = false;
    for (n, v) in fields {
        if n == name {
            encode_field(n, value, out);
            replaced = true;
        } else {
            encode_field(n, v, out);
        }
    }
    if !replaced {
        encode_field(name, value, out);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    #[test]
    fn records_round_trip_with_the_layouts_size() {
        let mut rng = SmallRng::seed_from_u64(1);
        let layout = RecordLayout { field_count: 12, field_length: 7 };
        let mut rec = Vec::new();
        layout.build_record(&mut rng, &mut rec);
        assert_eq!(rec.len(), layout.record_bytes());
        let fields = decode_fields(&rec).unwrap();
        assert_eq!(fields.len(), 12);
        for (i, (name, value)) in fields.iter().enumerate() {
            assert_eq!(*name, RecordLayout::field_name(i).as_bytes());
            assert_eq!(value.len(), 7);
            assert!(value.iter().all(|b| (b' '..=b'~').contains(b)));
        }
        assert_eq!(&rec[..4], &[0, 0, 0, 6], "big-endian name length of \"field0\"");
    }

    #[test]
    fn replace_field_keeps_the_others() {
        let mut rec = Vec::new();
        encode_field(b"field0", b"aa", &mut rec);
        encode_field(b"field1", b"bb", &mut rec);
        let mut out = Vec::new();
        replace_field(&rec, b"field1", b"XYZ", &mut out).unwrap();
        assert_eq!(
            decode_fields(&out).unwrap(),
            [(&b"field0"[..], &b"aa"[..]), (&b"field1"[..], &b"XYZ"[..])]
        );
        replace_field(&rec, b"field9", b"n", &mut out).unwrap();
        assert_eq!(decode_fields(&out).unwrap().len(), 3);
    }

    #[test]
    fn truncated_and_garbage_records_are_malformed() {
        let mut rng = SmallRng::seed_from_u64(2);
        let mut rec = Vec::new();
        RecordLayout::default().build_record(&mut rng, &mut rec);
        for cut in [1, 3, 4, 9, 10, 13, 100, rec.len() - 1] {
            let err = decode_fields(&rec[..cut]).unwrap_err();
            assert_eq!(err.len, cut);
        }
        assert!(decode_fields(b"hello world").is_err());
        assert_eq!(decode_fields(b"").unwrap(), []);
        let mut out = Vec::new();
        assert!(replace_field(b"\xff\xff\xff\xff", b"f", b"v", &mut out).is_err());
    }
}
