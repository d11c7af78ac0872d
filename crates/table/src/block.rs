//! The block: a table's unit of storage and of I/O, 4 KiB, self-describing and checksummed.
//! A table's blocks, numbered from 0 across its segments, hold one *row stream*: row records
//! appended one after another, a record spanning into the next block where it does not fit
//! (see `row.rs`).
//!
//! ```text
//! offset size  field
//!  0      4    magic b"SHTB"
//!  4      4    crc32c of bytes 8..4096
//!  8      4    table id (u32 LE)
//! 12      1    format version (1)
//! 13      3    reserved, zero (checked: a block with one set is damaged)
//! 16      8    block number in the table (u64 LE)
//! 24      2    occupancy: payload bytes holding row data, continuations of a row begun in
//!              an earlier block included (u16 LE, 0..=4064); appends go at the end
//! 26      2    first row: payload offset of the first row record that begins here, or
//!              0xFFFF when none does (the block holds only a continuation)
//! 28      4    reserved, zero (checked)
//! 32   4064    payload: row stream bytes, zero past the occupancy
//! ```
//! A block that was never written reads as zeros (a new volume file, a released slot).

use crate::error::{Error, Result};

/// Bytes of a block.
pub const BLOCK_BYTES: usize = 4096;
/// Bytes of a block's header.
pub const HEADER_BYTES: usize = 32;
/// Bytes of a block's payload.
pub const PAYLOAD_BYTES: usize = BLOCK_BYTES - HEADER_BYTES;
/// `first_row` of a block in which no row record begins.
pub const NO_ROW: u16 = u16::MAX;
const MAGIC: &[u8; 4] = b"SHTB";
const FORMAT: u8 = 1;

/// A position in a table's row stream: a block and an offset in its payload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pos {
    /// Block number in the table.
    pub block: u64,
    /// Offset in the block's payload.
    pub offset: u32,
}

impl Pos {
    /// The position `n` stream bytes further.
    pub fn advance(self, n: usize) -> Pos {
        let at = self.offset as u64 + n as u64;
        Pos {
            block: self.block + at / PAYLOAD_BYTES as u64,
            offset: (at % PAYLOAD_BYTES as u64) as u32,
        }
    }

    /// Blocks the `n` bytes from here touch, first and last.
    pub fn blocks(self, n: usize) -> std::ops::RangeInclusive<u64> {
        let last = self.advance(n.max(1) - 1);
        self.block..=last.block
    }
}

/// A block's header fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockHeader {
    /// The table.
    pub table: u32,
    /// The block number.
    pub number: u64,
    /// Payload bytes in use.
    pub used: u16,
    /// Where the first row record beginning here begins, or [`NO_ROW`].
    pub first_row: u16,
}

/// What a block's bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockState {
    /// A valid block of this table and number.
    Valid(BlockHeader),
    /// All zeros: never written.
    Blank,
}

/// A new, empty block of `table` numbered `number`, sealed.
pub fn new_block(table: u32, number: u64) -> Vec<u8> {
    let mut b = vec![0u8; BLOCK_BYTES];
    set_identity(&mut b, table, number);
    seal(&mut b, 0, NO_ROW);
    b
}

/// Writes the fields that never change (a block being rebuilt at recovery).
pub fn set_identity(b: &mut [u8], table: u32, number: u64) {
    b[..4].copy_from_slice(MAGIC);
    b[8..12].copy_from_slice(&table.to_le_bytes());
    b[12] = FORMAT;
    b[13..16].fill(0);
    b[16..24].copy_from_slice(&number.to_le_bytes());
    b[28..32].fill(0);
}

/// Sets the occupancy fields and the checksum.
pub fn seal(b: &mut [u8], used: u16, first_row: u16) {
    assert!(used as usize <= PAYLOAD_BYTES, "occupancy {used}");
    b[24..26].copy_from_slice(&used.to_le_bytes());
    b[26..28].copy_from_slice(&first_row.to_le_bytes());
    let crc = crc32c::crc32c(&b[8..]);
    b[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// The header of a sealed block in memory (trusted: it was sealed by this process).
pub fn header(b: &[u8]) -> BlockHeader {
    BlockHeader {
        table: u32::from_le_bytes(b[8..12].try_into().unwrap()),
        number: u64::from_le_bytes(b[16..24].try_into().unwrap()),
        used: u16::from_le_bytes(b[24..26].try_into().unwrap()),
        first_row: u16::from_le_bytes(b[26..28].try_into().unwrap()),
    }
}

/// Checks a block read from the device at `address` against the table and number it must
/// hold.
///
/// # Errors
/// [`Error::Corruption`] for a block that is neither blank nor a valid block of that table
/// and number.
pub fn check(b: &[u8], table: u32, number: u64, address: u64) -> Result<BlockState> {
    let bad = |what: &str| Error::Corruption {
        what: format!("block {number} of table {table}: {what}"),
        offset: address,
    };
    if b.len() != BLOCK_BYTES {
        return Err(bad("short block"));
    }
    if b.iter().all(|&x| x == 0) {
        return Ok(BlockState::Blank);
    }
    if &b[..4] != MAGIC {
        return Err(bad("no block magic"));
    }
    let crc = u32::from_le_bytes(b[4..8].try_into().unwrap());
    if crc != crc32c::crc32c(&b[8..]) {
        return Err(bad("checksum mismatch"));
    }
    let h = header(b);
    if b[12] != FORMAT || h.table != table || h.number != number {
        return Err(bad("a block of another table, number or format"));
    }
    if b[13..16] != [0; 3] || b[28..32] != [0; 4] {
        return Err(bad("reserved bytes"));
    }
    if h.used as usize > PAYLOAD_BYTES
        || (h.first_row != NO_ROW && h.first_row >= h.used.max(1))
        || b[HEADER_BYTES + h.used as usize..].iter().any(|&x| x != 0)
    {
        return Err(bad("occupancy fields"));
    }
    Ok(BlockState::Valid(h))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_round_trip_and_every_flipped_byte_is_corruption() {
        let mut b = new_block(3, 17);
        b[HEADER_BYTES..HEADER_BYTES + 40].fill(7);
        seal(&mut b, 40, 0);
        let h = BlockHeader { table: 3, number: 17, used: 40, first_row: 0 };
        assert_eq!(check(&b, 3, 17, 0).unwrap(), BlockState::Valid(h));
        assert!(check(&b, 3, 18, 0).is_err());
        assert!(check(&b, 4, 17, 0).is_err());
        assert_eq!(check(&[0; BLOCK_BYTES], 3, 17, 0).unwrap(), BlockState::Blank);
        for i in 0..BLOCK_BYTES {
            let mut c = b.clone();
            c[i] ^= 0x10;
            assert!(
                matches!(check(&c, 3, 17, 0), Err(Error::Corruption { .. })),
                "flipped byte {i}"
            );
        }
        assert!(check(&b[..100], 3, 17, 0).is_err());
    }

    /// A stable-Rust stand-in for a fuzz target: mutated valid blocks and random bytes give
    /// a state or an error, never a panic.
    #[test]
    fn mutated_blocks_never_panic() {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut b = new_block(1, 2);
        b[HEADER_BYTES..HEADER_BYTES + 100].fill(3);
        seal(&mut b, 100, 0);
        for _ in 0..20_000 {
            let mut c = b.clone();
            for _ in 0..next() % 4 + 1 {
                let i = (next() % BLOCK_BYTES as u64) as usize;
                c[i] = next() as u8;
            }
            if next() % 2 == 0 {
                // Forge the checksum so the field checks behind it are reached.
                let crc = crc32c::crc32c(&c[8..]);
                c[4..8].copy_from_slice(&crc.to_le_bytes());
            }
            let cut =
                if next() % 8 == 0 { (next() % BLOCK_BYTES as u64) as usize } else { c.len() };
            let _ = check(&c[..cut], 1, 2, 0);
            if let Ok(BlockState::Valid(h)) = check(&c, 1, 2, 0) {
                assert!(h.used as usize <= PAYLOAD_BYTES);
            }
        }
    }

    #[test]
    fn positions_advance_across_blocks() {
        let p = Pos { block: 2, offset: 4000 };
        assert_eq!(p.advance(64), Pos { block: 3, offset: 0 });
        assert_eq!(p.advance(100), Pos { block: 3, offset: 36 });
        assert_eq!(p.blocks(64), 2..=2);
        assert_eq!(p.blocks(65), 2..=3);
        assert_eq!(p.blocks(64 + 2 * PAYLOAD_BYTES + 1), 2..=5);
    }
}
