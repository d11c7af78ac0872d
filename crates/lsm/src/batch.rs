//! Write batches: several puts and deletes applied atomically, and their encoding, which is
//! also the WAL record format.
//!
//! ```text
//! offset size  field
//! 0      8     first sequence number (u64 LE); op i gets first + i
//! 8      4     op count (u32 LE)
//! 12     ..    ops, each: kind (u8: 0 delete, 1 put) | key length (u32 LE) | key
//!                         | value length (u32 LE) | value      (puts only)
//! ```
//! The WAL page checksum covers these bytes; a decode error after a valid checksum is reported
//! as corruption.

use crate::error::{Error, Result};
use crate::key::Kind;

/// Bytes before the first op.
pub const BATCH_HEADER_BYTES: usize = 12;

/// An atomic group of writes.
///
/// ```
/// use shale_lsm::batch::WriteBatch;
/// let mut batch = WriteBatch::new();
/// batch.put(b"apple", b"red");
/// batch.delete(b"pear");
/// assert_eq!(batch.len(), 2);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteBatch {
    rep: Vec<u8>,
    count: u32,
}

impl Default for WriteBatch {
    fn default() -> WriteBatch {
        WriteBatch::new()
    }
}

/// One decoded operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchOp<'a> {
    /// Put or delete.
    pub kind: Kind,
    /// The user key.
    pub key: &'a [u8],
    /// The value (empty for a delete).
    pub value: &'a [u8],
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch { rep: vec![0; BATCH_HEADER_BYTES], count: 0 }
    }

    /// Adds a put.
    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        self.rep.push(Kind::Put as u8);
        self.rep.extend_from_slice(&(key.len() as u32).to_le_bytes());
        self.rep.extend_from_slice(key);
        self.rep.extend_from_slice(&(value.len() as u32).to_le_bytes());
        self.rep.extend_from_slice(value);
        self.count += 1;
    }

    /// Adds a delete.
    pub fn delete(&mut self, key: &[u8]) {
        self.rep.push(Kind::Delete as u8);
        self.rep.extend_from_slice(&(key.len() as u32).to_le_bytes());
        self.rep.extend_from_slice(key);
        self.count += 1;
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether the batch holds no operation.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.rep.len()
    }

    /// The encoding with `first_seq` stamped in: the WAL record.
    pub fn encode(&self, first_seq: u64) -> Vec<u8> {
        let mut out = self.rep.clone();
        out[..8].copy_from_slice(&first_seq.to_le_bytes());
        out[8..12].copy_from_slice(&self.count.to_le_bytes());
        out
    }

    /// The operations, in order.
    pub fn ops(&self) -> BatchOps<'_> {
        BatchOps { rest: &self.rep[BATCH_HEADER_BYTES..], left: self.count }
    }
}

/// A decoded WAL record: first sequence number and operations.
#[derive(Debug)]
pub struct DecodedBatch<'a> {
    /// Sequence number of the first op.
    pub first_seq: u64,
    /// The ops, validated.
    pub ops: Vec<BatchOp<'a>>,
}

/// Decodes a record written by [`WriteBatch::encode`].
///
/// # Errors
/// [`Error::Corruption`] (at `offset`) if the bytes are not a complete batch.
pub fn decode(rec: &[u8], offset: u64) -> Result<DecodedBatch<'_>> {
    let bad = |what: &str| Error::corruption(format!("WAL record: {what}"), offset);
    if rec.len() < BATCH_HEADER_BYTES {
        return Err(bad("shorter than its header"));
    }
    let first_seq = u64::from_le_bytes(rec[..8].try_into().unwrap());
    let count = u32::from_le_bytes(rec[8..12].try_into().unwrap());
    let mut iter = BatchOps { rest: &rec[BATCH_HEADER_BYTES..], left: count };
    let mut ops = Vec::with_capacity(count.min(1 << 16) as usize);
    for _ in 0..count {
        ops.push(iter.next().ok_or_else(|| bad("op runs past the record"))?);
    }
    if !iter.rest.is_empty() {
        return Err(bad("bytes after the last op"));
    }
    Ok(DecodedBatch { first_seq, ops })
}

/// Iterator over a batch's operations.
pub struct BatchOps<'a> {
    rest: &'a [u8],
    left: u32,
}

impl<'a> BatchOps<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.rest.len() < n {
            return None;
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Some(head)
    }

    fn take_len_prefixed(&mut self) -> Option<&'a [u8]> {
        let n = u32::from_le_bytes(self.take(4)?.try_into().unwrap()) as usize;
        self.take(n)
    }
}

impl<'a> Iterator for BatchOps<'a> {
    type Item = BatchOp<'a>;

    fn next(&mut self) -> Option<BatchOp<'a>> {
        if self.left == 0 {
            return None;
        }
        let kind = Kind::from_u8(self.take(1)?[0])?;
        let key = self.take_len_prefixed()?;
        let value = if kind == Kind::Put { self.take_len_prefixed()? } else { &[] };
        self.left -= 1;
        Some(BatchOp { kind, key, value })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut b = WriteBatch::new();
        b.put(b"a", b"1");
        b.delete(b"b");
        b.put(b"", b"");
        let enc = b.encode(42);
        let d = decode(&enc, 0).unwrap();
        assert_eq!(d.first_seq, 42);
        assert_eq!(d.ops, b.ops().collect::<Vec<_>>());
        assert_eq!(d.ops[1], BatchOp { kind: Kind::Delete, key: b"b", value: b"" });
    }

    #[test]
    fn every_truncation_and_extension_is_corruption() {
        let mut b = WriteBatch::new();
        b.put(b"key", b"value");
        b.delete(b"gone");
        let enc = b.encode(7);
        for cut in 0..enc.len() {
            assert!(decode(&enc[..cut], 0).is_err(), "cut at {cut}");
        }
        let mut longer = enc.clone();
        longer.push(0);
        assert!(decode(&longer, 0).is_err());
        let mut bad_kind = enc;
        bad_kind[BATCH_HEADER_BYTES] = 9;
        assert!(decode(&bad_kind, 0).is_err());
    }
}
