//! Write batches: puts, deletes and range deletes applied atomically, and their encoding,
//! which is also the WAL record format.
//!
//! ```text
//! offset size  field
//! 0      8     first sequence number (u64 LE); op i gets first + i
//! 8      4     op count (u32 LE)
//! 12     ..    ops, each: kind (u8: 0 delete, 1 put, 2 delete range) | key length (u32 LE)
//!                         | key | value length (u32 LE) | value  (puts and range deletes)
//! ```
//! A range delete's key is the first user key of the range and its value the end, exclusive
//! (as in RocksDB's batches). The WAL page checksum covers these bytes; a decode error after a
//! valid checksum (a truncated op, an unknown kind, an empty range) is reported as corruption.
//! A build from before range deletes refuses a record holding one as corruption rather than
//! replaying it wrongly.

use shale_space::codec::Reader;

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
/// batch.delete_range(b"plum", b"quince"); // every key from "plum" up to, not with, "quince"
/// assert_eq!(batch.len(), 3);
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

/// What one op of a batch does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum OpKind {
    /// Deletes one key.
    Delete = 0,
    /// Sets one key.
    Put = 1,
    /// Deletes every key in `[key, value)`.
    DeleteRange = 2,
}

impl OpKind {
    /// Decodes a kind byte.
    pub fn from_u8(v: u8) -> Option<OpKind> {
        match v {
            0 => Some(OpKind::Delete),
            1 => Some(OpKind::Put),
            2 => Some(OpKind::DeleteRange),
            _ => None,
        }
    }

    /// The kind of the point entry the op makes; `None` for a range delete, which makes a
    /// range tombstone instead.
    pub fn point_kind(self) -> Option<Kind> {
        match self {
            OpKind::Delete => Some(Kind::Delete),
            OpKind::Put => Some(Kind::Put),
            OpKind::DeleteRange => None,
        }
    }
}

/// One decoded operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchOp<'a> {
    /// Put, delete or range delete.
    pub kind: OpKind,
    /// The user key; a range delete's first key.
    pub key: &'a [u8],
    /// The value (empty for a delete); a range delete's end key (exclusive).
    pub value: &'a [u8],
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch { rep: vec![0; BATCH_HEADER_BYTES], count: 0 }
    }

    /// Adds a put.
    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        self.push(OpKind::Put, key, Some(value));
    }

    /// Adds a delete.
    pub fn delete(&mut self, key: &[u8]) {
        self.push(OpKind::Delete, key, None);
    }

    /// Adds a range delete: every key `k` with `start <= k < end` (bytewise) is deleted, in
    /// the order of the batch's ops (a put after it in the same batch survives it).
    ///
    /// The range must not be empty: [`crate::Db::write`] refuses a batch holding a range
    /// delete with `start >= end` (start equal to end included) as
    /// [`Error::InvalidArgument`], as it refuses oversized keys, and applies none of it.
    pub fn delete_range(&mut self, start: &[u8], end: &[u8]) {
        self.push(OpKind::DeleteRange, start, Some(end));
    }

    fn push(&mut self, kind: OpKind, key: &[u8], value: Option<&[u8]>) {
        self.rep.push(kind as u8);
        self.rep.extend_from_slice(&(key.len() as u32).to_le_bytes());
        self.rep.extend_from_slice(key);
        if let Some(value) = value {
            self.rep.extend_from_slice(&(value.len() as u32).to_le_bytes());
            self.rep.extend_from_slice(value);
        }
        self.count += 1;
    }

    /// Adds every op of `other` after this batch's own, in their order: the two become one
    /// atomic write. The async API's workers commit queued writes this way
    /// (`db/async_api.rs`).
    pub fn append(&mut self, other: &WriteBatch) {
        self.rep.extend_from_slice(&other.rep[BATCH_HEADER_BYTES..]);
        self.count += other.count;
    }

    /// Checks the range deletes: ends at most `key_bytes_max` long (starts are checked as
    /// every op's key is) and no empty range.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the first bad range.
    pub(crate) fn check_ranges(&self, key_bytes_max: usize) -> Result<()> {
        for op in self.ops().filter(|op| op.kind == OpKind::DeleteRange) {
            if op.value.len() > key_bytes_max {
                return Err(Error::InvalidArgument(format!(
                    "range end of {} bytes is over the {key_bytes_max}-byte key limit",
                    op.value.len()
                )));
            }
            if op.key >= op.value {
                return Err(Error::InvalidArgument(format!(
                    "delete_range needs start < end, got start {:?} and end {:?}",
                    String::from_utf8_lossy(op.key),
                    String::from_utf8_lossy(op.value)
                )));
            }
        }
        Ok(())
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

    crate::internal_fn! {
        /// The encoding with `first_seq` stamped in: the WAL record.
        fn encode(&self, first_seq: u64) -> Vec<u8> {
            let mut out = self.rep.clone();
            out[..8].copy_from_slice(&first_seq.to_le_bytes());
            out[8..12].copy_from_slice(&self.count.to_le_bytes());
            out
        }
    }

    /// The operations, in order.
    pub(crate) fn ops(&self) -> BatchOps<'_> {
        BatchOps { rest: Reader::new(&self.rep[BATCH_HEADER_BYTES..]), left: self.count }
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
    let mut iter = BatchOps { rest: Reader::new(&rec[BATCH_HEADER_BYTES..]), left: count };
    let mut ops = Vec::with_capacity(count.min(1 << 16) as usize);
    for _ in 0..count {
        let op = iter.next().ok_or_else(|| bad("op runs past the record"))?;
        if op.kind == OpKind::DeleteRange && op.key >= op.value {
            return Err(bad("empty range delete"));
        }
        ops.push(op);
    }
    if !iter.rest.is_empty() {
        return Err(bad("bytes after the last op"));
    }
    Ok(DecodedBatch { first_seq, ops })
}

/// The operations of a record this process encoded (and so need not check): the leader of a
/// write group inserts its writers' batches from their records.
pub(crate) fn record_ops(rec: &[u8]) -> BatchOps<'_> {
    let count = u32::from_le_bytes(rec[8..12].try_into().expect("a record has its header"));
    BatchOps { rest: Reader::new(&rec[BATCH_HEADER_BYTES..]), left: count }
}

/// Iterator over a batch's operations.
#[derive(Clone)]
pub struct BatchOps<'a> {
    rest: Reader<'a>,
    left: u32,
}

impl<'a> Iterator for BatchOps<'a> {
    type Item = BatchOp<'a>;

    fn next(&mut self) -> Option<BatchOp<'a>> {
        if self.left == 0 {
            return None;
        }
        let kind = OpKind::from_u8(self.rest.u8()?)?;
        let key = self.rest.bytes()?;
        let value = if kind == OpKind::Delete { &[] } else { self.rest.bytes()? };
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
        b.delete_range(b"c", b"d");
        let enc = b.encode(42);
        let d = decode(&enc, 0).unwrap();
        assert_eq!(d.first_seq, 42);
        assert_eq!(d.ops, b.ops().collect::<Vec<_>>());
        assert_eq!(d.ops[1], BatchOp { kind: OpKind::Delete, key: b"b", value: b"" });
        assert_eq!(d.ops[3], BatchOp { kind: OpKind::DeleteRange, key: b"c", value: b"d" });
        assert_eq!(d.ops[3].kind.point_kind(), None);
        b.check_ranges(16).unwrap();
    }

    #[test]
    fn an_appended_batch_keeps_both_batches_ops_in_order() {
        let mut a = WriteBatch::new();
        a.put(b"a", b"1");
        a.delete(b"b");
        let mut b = WriteBatch::new();
        b.delete_range(b"c", b"d");
        b.put(b"a", b"2");
        let mut both = a.clone();
        both.append(&b);
        both.append(&WriteBatch::new());
        assert_eq!(both.len(), 4);
        let want: Vec<_> = a.ops().chain(b.ops()).collect();
        assert_eq!(both.ops().collect::<Vec<_>>(), want);
        assert_eq!(decode(&both.encode(9), 0).unwrap().ops, want);
    }

    #[test]
    fn empty_or_oversized_ranges_are_refused() {
        for (start, end) in [(&b"b"[..], &b"a"[..]), (b"a", b"a"), (b"", b"")] {
            let mut b = WriteBatch::new();
            b.put(b"k", b"v");
            b.delete_range(start, end);
            assert!(matches!(b.check_ranges(16), Err(Error::InvalidArgument(_))));
            // A record holding one was never written by this code: corruption.
            assert!(matches!(decode(&b.encode(1), 0), Err(Error::Corruption { .. })));
        }
        let mut b = WriteBatch::new();
        b.delete_range(b"a", &[b'z'; 17]);
        assert!(matches!(b.check_ranges(16), Err(Error::InvalidArgument(_))));
        b.check_ranges(17).unwrap();
    }

    #[test]
    fn every_truncation_and_extension_is_corruption() {
        let mut b = WriteBatch::new();
        b.put(b"key", b"value");
        b.delete(b"gone");
        b.delete_range(b"from", b"to");
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
