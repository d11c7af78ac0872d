//! The undo record: the before-image of one change, kept in persistent memory until the
//! change is committed or rolled back.
//!
//! ```text
//! offset size  field
//!  0      4    magic b"SHUR"
//!  4      1    state: 0xA1 active, 0x5E expired (outside the checksum: expiring a record
//!              is a one-byte store, atomic on persistent memory)
//!  5      1    kind: 1 insert (the bytes were free: rolling back writes a void row record
//!              of `span` bytes there), 2 before-image (rolling back writes `image` back),
//!              3 commit mark (the transaction committed: none of its records is rolled
//!              back; table, block, offset and span are zero)
//!  6      2    reserved, zero (a record with either byte set is damaged)
//!  8      4    crc32c of bytes 5..8 then 12..len
//! 12      4    len: bytes of the record, this header included (records start 8-aligned)
//! 16      8    lsn: the log sequence number, one more than the record before it
//! 24      8    transaction id
//! 32      4    table id
//! 36      4    offset in the block's payload of the first byte changed
//! 40      8    block number in the table of the first byte changed
//! 48      4    span: bytes of the table's row stream the change covers
//! 52      4    reserved, zero (checked as bytes 6..8 are)
//! 56   span    before-image (kind 2 only)
//! ```
//! All integers little-endian. The two state values differ in all eight bits, so damage to
//! the state byte short of flipping all eight reads as neither and is Corruption.

use crate::block::Pos;

/// Bytes of a record's header.
pub const HEADER_BYTES: usize = 56;
/// Records start at multiples of this.
pub const ALIGN: usize = 8;
/// The state of a record whose change is neither committed nor rolled back.
pub const ACTIVE: u8 = 0xA1;
/// The state of a record that is no longer needed.
pub const EXPIRED: u8 = 0x5E;
const MAGIC: &[u8; 4] = b"SHUR";
const KIND_INSERT: u8 = 1;
const KIND_IMAGE: u8 = 2;
const KIND_COMMIT: u8 = 3;

/// What rolling a change back writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Before {
    /// The change appended a row record of this many bytes where nothing was: rolling it
    /// back leaves a void record of that size (later rows may follow it).
    Free {
        /// Bytes of the row record.
        span: u32,
    },
    /// The bytes as they were.
    Image(Vec<u8>),
    /// Not a change: the mark of the transaction's commit. A transaction of several
    /// changes needs one point at which all of them become committed; expiring several
    /// records is several stores, and a crash between them would roll back a part.
    Commit,
}

impl Before {
    /// Bytes of the row stream the change covers.
    pub fn span(&self) -> u32 {
        match self {
            Before::Free { span } => *span,
            Before::Image(b) => b.len() as u32,
            Before::Commit => 0,
        }
    }
}

/// One undo record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UndoRecord {
    /// Its log sequence number.
    pub lsn: u64,
    /// The transaction that made the change.
    pub txn: u64,
    /// The table changed.
    pub table: u32,
    /// Where in the table's row stream the change begins.
    pub pos: Pos,
    /// What to write back.
    pub before: Before,
}

/// Why bytes are not a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer bytes than the header, or than the length says.
    Short,
    /// No magic: not a record (a stale or never-written area).
    NoMagic,
    /// The magic, but the checksum or a field fails.
    Damaged(&'static str),
}

impl UndoRecord {
    /// Encoded length, padding to [`ALIGN`] included.
    pub fn encoded_len(&self) -> usize {
        let image = match &self.before {
            Before::Free { .. } | Before::Commit => 0,
            Before::Image(b) => b.len(),
        };
        (HEADER_BYTES + image).next_multiple_of(ALIGN)
    }

    /// Encodes the record, active, padded to [`ALIGN`].
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; HEADER_BYTES];
        b[..4].copy_from_slice(MAGIC);
        b[4] = ACTIVE;
        b[5] = match self.before {
            Before::Free { .. } => KIND_INSERT,
            Before::Image(_) => KIND_IMAGE,
            Before::Commit => KIND_COMMIT,
        };
        b[16..24].copy_from_slice(&self.lsn.to_le_bytes());
        b[24..32].copy_from_slice(&self.txn.to_le_bytes());
        b[32..36].copy_from_slice(&self.table.to_le_bytes());
        b[36..40].copy_from_slice(&self.pos.offset.to_le_bytes());
        b[40..48].copy_from_slice(&self.pos.block.to_le_bytes());
        b[48..52].copy_from_slice(&self.before.span().to_le_bytes());
        if let Before::Image(img) = &self.before {
            b.extend_from_slice(img);
        }
        let len = b.len() as u32;
        b[12..16].copy_from_slice(&len.to_le_bytes());
        let crc = checksum(&b, b.len());
        b[8..12].copy_from_slice(&crc.to_le_bytes());
        b.resize(b.len().next_multiple_of(ALIGN), 0);
        b
    }

    /// The record's length as its header says (padding excluded), from its first 16 bytes,
    /// or `None` without the magic. Lets a reader fetch the rest before decoding.
    pub fn peek_len(b: &[u8]) -> Option<usize> {
        if b.len() < 16 || &b[..4] != MAGIC {
            return None;
        }
        Some(u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize)
    }

    /// Decodes a record and its state byte.
    ///
    /// # Errors
    /// Why the bytes are not a valid record.
    pub fn decode(b: &[u8]) -> Result<(UndoRecord, u8), DecodeError> {
        if b.len() < HEADER_BYTES {
            return Err(DecodeError::Short);
        }
        if &b[..4] != MAGIC {
            return Err(DecodeError::NoMagic);
        }
        let len = u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize;
        if len < HEADER_BYTES {
            return Err(DecodeError::Damaged("length below the header's"));
        }
        if b.len() < len {
            return Err(DecodeError::Short);
        }
        let crc = u32::from_le_bytes(b[8..12].try_into().unwrap());
        if crc != checksum(b, len) {
            return Err(DecodeError::Damaged("checksum mismatch"));
        }
        if b[6..8] != [0; 2] || b[52..56] != [0; 4] {
            return Err(DecodeError::Damaged("reserved bytes"));
        }
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let span = u32_at(48);
        let before = match b[5] {
            KIND_INSERT if len == HEADER_BYTES => Before::Free { span },
            KIND_COMMIT if len == HEADER_BYTES && span == 0 => Before::Commit,
            KIND_IMAGE if len == HEADER_BYTES + span as usize => {
                Before::Image(b[HEADER_BYTES..len].to_vec())
            }
            _ => return Err(DecodeError::Damaged("kind or length")),
        };
        let state = b[4];
        if state != ACTIVE && state != EXPIRED {
            return Err(DecodeError::Damaged("state byte"));
        }
        let rec = UndoRecord {
            lsn: u64_at(16),
            txn: u64_at(24),
            table: u32_at(32),
            pos: Pos { block: u64_at(40), offset: u32_at(36) },
            before,
        };
        Ok((rec, state))
    }
}

/// Recomputes the checksum of the record at the start of `b` over the length its header
/// names, clamped to `b` (for the fuzz targets, so their inputs reach the field checks).
#[doc(hidden)]
pub fn reseal(b: &mut [u8]) {
    if b.len() < 16 {
        return;
    }
    let len = (u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize).clamp(12, b.len());
    let crc = checksum(b, len);
    b[8..12].copy_from_slice(&crc.to_le_bytes());
}

/// The checksum of a record of `len` bytes: its kind and reserved bytes, then everything
/// after the checksum.
fn checksum(b: &[u8], len: usize) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&b[5..8]), &b[12..len])
}

/// A record for tests of the logs: transaction `txn`'s before-image of `n` bytes (each
/// `txn`) at block `txn`, LSN 0 (the log numbers it).
#[cfg(test)]
pub(crate) fn test_record(txn: u64, n: usize) -> UndoRecord {
    UndoRecord {
        lsn: 0,
        txn,
        table: 1,
        pos: Pos { block: txn, offset: 0 },
        before: Before::Image(vec![txn as u8; n]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records() -> Vec<UndoRecord> {
        vec![
            UndoRecord {
                lsn: 7,
                txn: 3,
                table: 2,
                pos: Pos { block: 9, offset: 4000 },
                before: Before::Image(b"the row as it was".to_vec()),
            },
            UndoRecord {
                lsn: 8,
                txn: 3,
                table: 2,
                pos: Pos { block: 10, offset: 0 },
                before: Before::Free { span: 5000 },
            },
            UndoRecord { lsn: 9, txn: 3, table: 0, pos: Pos::default(), before: Before::Commit },
        ]
    }

    #[test]
    fn records_round_trip_and_expire() {
        for r in records() {
            let mut b = r.encode();
            assert_eq!(b.len(), r.encoded_len());
            assert_eq!(b.len() % ALIGN, 0);
            assert_eq!(UndoRecord::decode(&b), Ok((r.clone(), ACTIVE)));
            b[4] = EXPIRED;
            assert_eq!(UndoRecord::decode(&b), Ok((r, EXPIRED)));
        }
    }

    /// A stable-Rust stand-in for a fuzz target: mutated records (their checksum forged
    /// half the time, so the field checks are reached) and random bytes decode or fail,
    /// never panic; what decodes re-encodes to itself.
    #[test]
    fn mutated_records_never_panic() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for r in records() {
            let b = r.encode();
            for _ in 0..10_000 {
                let mut c = b.clone();
                for _ in 0..next() % 3 + 1 {
                    let i = (next() % c.len() as u64) as usize;
                    c[i] = next() as u8;
                }
                if next() % 2 == 0 && c.len() >= 16 {
                    let len = (u32::from_le_bytes(c[12..16].try_into().unwrap()) as usize)
                        .clamp(12, c.len());
                    let crc = checksum(&c, len);
                    c[8..12].copy_from_slice(&crc.to_le_bytes());
                }
                let cut = (next() % (c.len() as u64 + 1)) as usize;
                let _ = UndoRecord::decode(&c[..cut]);
                if let Ok((d, state)) = UndoRecord::decode(&c) {
                    let mut again = d.encode();
                    again[4] = state;
                    assert_eq!(UndoRecord::decode(&again), Ok((d, state)));
                }
            }
        }
    }

    #[test]
    fn every_flipped_byte_and_truncation_is_refused() {
        for r in records() {
            let b = r.encode();
            let len = UndoRecord::peek_len(&b).unwrap();
            for i in 0..len {
                for xor in [0x01, 0x80, 0x0F] {
                    let mut c = b.clone();
                    c[i] ^= xor;
                    assert!(UndoRecord::decode(&c).is_err(), "byte {i} ^ {xor:#x}");
                }
            }
            for cut in 0..len {
                assert!(UndoRecord::decode(&b[..cut]).is_err(), "cut at {cut}");
            }
        }
    }
}
