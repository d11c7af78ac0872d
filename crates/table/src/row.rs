//! The row record: how a row lies in a table's row stream (see `block.rs`).
//!
//! ```text
//! offset size  field
//!  0      1    state: 0 free (nothing past here in this block: the stream's end),
//!              1 live, 2 erased, 3 void (an insert rolled back)
//!  1      3    reserved, zero
//!  4      4    slot length: bytes after this header that belong to the record (u32 LE)
//!  8      4    row length: bytes of the encoded row at the slot's start (u32 LE, at most
//!              the slot length; the rest of the slot is zero)
//! 12   slot    the encoded row (`schema.rs`), then zeros
//! ```
//! A record's 12-byte header lies whole in one block: where fewer than 12 payload bytes
//! remain, the next record begins in the next block. Its slot may run on through as many
//! blocks as it needs. The block checksum covers it; the record has none of its own.
//!
//! A record never moves and its slot never grows: an update that fits the slot is written
//! in place, one that does not erases the record and appends a new one. The slot of an
//! erased or void record is taken by a new row once the reclaiming pass has found it free
//! (`free_space.rs`); the slot keeps its length, the rest of it past the row zeroed.

use crate::block::{PAYLOAD_BYTES, Pos};

/// Bytes of a row record's header.
pub const HEADER_BYTES: usize = 12;

/// A record's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowState {
    /// Nothing here: the row stream ends.
    Free,
    /// A row.
    Live,
    /// An erased row.
    Erased,
    /// Space of an insert that was rolled back.
    Void,
}

impl RowState {
    fn byte(self) -> u8 {
        match self {
            RowState::Free => 0,
            RowState::Live => 1,
            RowState::Erased => 2,
            RowState::Void => 3,
        }
    }

    fn from_byte(b: u8) -> Option<RowState> {
        Some(match b {
            0 => RowState::Free,
            1 => RowState::Live,
            2 => RowState::Erased,
            3 => RowState::Void,
            _ => return None,
        })
    }
}

/// A row record's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowHeader {
    /// Its state.
    pub state: RowState,
    /// Bytes of its slot.
    pub slot_len: u32,
    /// Bytes of the row in the slot.
    pub row_len: u32,
}

impl RowHeader {
    /// Encodes the header.
    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut b = [0u8; HEADER_BYTES];
        b[0] = self.state.byte();
        b[4..8].copy_from_slice(&self.slot_len.to_le_bytes());
        b[8..12].copy_from_slice(&self.row_len.to_le_bytes());
        b
    }

    /// Decodes a header, or `None` for one that cannot be (a free header must be all zero).
    pub fn decode(b: &[u8]) -> Option<RowHeader> {
        let b = b.get(..HEADER_BYTES)?;
        let state = RowState::from_byte(b[0])?;
        let h = RowHeader {
            state,
            slot_len: u32::from_le_bytes(b[4..8].try_into().unwrap()),
            row_len: u32::from_le_bytes(b[8..12].try_into().unwrap()),
        };
        let sane = b[1..4] == [0, 0, 0]
            && h.row_len <= h.slot_len
            && (state != RowState::Free || (h.slot_len == 0 && h.row_len == 0));
        sane.then_some(h)
    }

    /// Bytes of the whole record.
    pub fn record_len(&self) -> usize {
        HEADER_BYTES + self.slot_len as usize
    }
}

/// Where a record may begin at or after `pos`: there, or at the next block when fewer than
/// a header's bytes remain in this one.
pub fn record_start(pos: Pos) -> Pos {
    if PAYLOAD_BYTES - (pos.offset as usize) < HEADER_BYTES {
        Pos { block: pos.block + 1, offset: 0 }
    } else {
        pos
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip_and_nonsense_is_refused() {
        let h = RowHeader { state: RowState::Live, slot_len: 5000, row_len: 4990 };
        assert_eq!(RowHeader::decode(&h.encode()), Some(h));
        let mut b = h.encode();
        b[0] = 9;
        assert_eq!(RowHeader::decode(&b), None);
        let bad = RowHeader { state: RowState::Live, slot_len: 1, row_len: 2 };
        assert_eq!(RowHeader::decode(&bad.encode()), None);
        assert_eq!(RowHeader::decode(&[0; HEADER_BYTES]).map(|h| h.state), Some(RowState::Free));
        assert_eq!(RowHeader::decode(&[0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]), None);
    }

    #[test]
    fn a_header_never_straddles_blocks() {
        let end = PAYLOAD_BYTES as u32;
        assert_eq!(
            record_start(Pos { block: 1, offset: end - 12 }),
            Pos { block: 1, offset: end - 12 }
        );
        assert_eq!(record_start(Pos { block: 1, offset: end - 11 }), Pos { block: 2, offset: 0 });
    }
}
