//! The range-deletion block: every range tombstone of an SST (format version 2 on).
//!
//! ```text
//! offset     size  type    field
//! 0          4     u32 LE  tombstone count N
//! 4          ..    N tombstones, sorted by start ascending, then sequence descending; each:
//!   +0       8     u64 LE    sequence number (at most 2^56 - 1)
//!   +8       4     u32 LE    start length S
//!   +12      S     bytes     start user key (inclusive)
//!   +12+S    4     u32 LE    end length E
//!   +16+S    E     bytes     end user key (exclusive), bytewise greater than start
//! ```
//! The block is stored like every SST block (`format`): followed by the 5-byte trailer, a
//! compression byte (always 0: the block is never compressed) and the CRC32C of the block
//! bytes and that byte. The properties block names it (handle and count), and the reader loads
//! it whole when the SST opens. Decoding checks every length, the order and that no range is
//! empty, so any damage the checksum lets through is [`Error::Corruption`], never a panic.
//!
//! Tombstones are kept whole rather than prefix-compressed like data blocks: an SST holds few
//! of them next to its points, and a plain layout is easier to check.

use shale_space::codec::Reader;

use crate::error::{Error, Result};
use crate::key::SEQ_MAX;
use crate::range_del::RangeTombstone;

/// Bytes of a tombstone besides its two keys.
const TOMBSTONE_FIXED_BYTES: usize = 16;

/// The block bytes for `tombstones`, which must be in the stored order (see the layout).
///
/// # Panics
/// If the tombstones are out of order or a range is empty (the builder sorts and checks them).
pub fn encode(tombstones: &[RangeTombstone]) -> Vec<u8> {
    assert!(
        tombstones.windows(2).all(|w| w[0].sst_order(&w[1]).is_lt()),
        "range tombstones out of order"
    );
    let keys: usize = tombstones.iter().map(|t| t.start.len() + t.end.len()).sum();
    let mut out = Vec::with_capacity(4 + tombstones.len() * TOMBSTONE_FIXED_BYTES + keys);
    out.extend_from_slice(&len_u32(tombstones.len()).to_le_bytes());
    for t in tombstones {
        assert!(t.start < t.end, "empty range tombstone");
        out.extend_from_slice(&t.seq.to_le_bytes());
        for k in [&t.start, &t.end] {
            out.extend_from_slice(&len_u32(k.len()).to_le_bytes());
            out.extend_from_slice(k);
        }
    }
    out
}

fn len_u32(n: usize) -> u32 {
    u32::try_from(n).expect("range-deletion block over 4 GiB")
}

/// Decodes the block bytes (trailer already checked and removed) found at `offset` of the SST.
///
/// # Errors
/// [`Error::Corruption`] for a short or overlong block, a sequence number over 56 bits, an
/// empty range or tombstones out of order.
pub fn decode(b: &[u8], offset: u64) -> Result<Vec<RangeTombstone>> {
    let bad = |why: &str| Error::corruption(format!("SST range-deletion block: {why}"), offset);
    let mut r = Reader::new(b);
    let count = r.u32().ok_or_else(|| bad("short"))? as usize;
    if count > r.remaining() / TOMBSTONE_FIXED_BYTES {
        return Err(bad("count larger than the block"));
    }
    let mut out: Vec<RangeTombstone> = Vec::with_capacity(count);
    for _ in 0..count {
        // Sequence number, start and end of the next tombstone.
        let (seq, start, end) = (|| Some((r.u64()?, r.bytes()?, r.bytes()?)))()
            .ok_or_else(|| bad("tombstone runs past the block"))?;
        if seq > SEQ_MAX {
            return Err(bad("sequence number over 56 bits"));
        }
        if start >= end {
            return Err(bad("empty range"));
        }
        let t = RangeTombstone { start: start.to_vec(), end: end.to_vec(), seq };
        if out.last().is_some_and(|prev| !prev.sst_order(&t).is_lt()) {
            return Err(bad("tombstones out of order"));
        }
        out.push(t);
    }
    if !r.is_empty() {
        return Err(bad("trailing bytes"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<RangeTombstone> {
        vec![
            RangeTombstone::new(b"", b"a", 3),
            RangeTombstone::new(b"apple", b"pear", 90),
            RangeTombstone::new(b"apple", b"zz", 12),
            RangeTombstone::new(b"b", &[0xff; 40], SEQ_MAX),
        ]
    }

    #[test]
    fn round_trip() {
        let b = encode(&sample());
        assert_eq!(decode(&b, 0).unwrap(), sample());
        assert_eq!(decode(&encode(&[]), 0).unwrap(), vec![]);
    }

    #[test]
    fn every_truncation_and_extension_is_corruption() {
        let b = encode(&sample());
        for cut in 0..b.len() {
            assert!(matches!(decode(&b[..cut], 7), Err(Error::Corruption { offset: 7, .. })));
        }
        let mut longer = b.clone();
        longer.push(0);
        assert!(decode(&longer, 0).is_err());
    }

    #[test]
    fn damaged_fields_are_corruption_never_a_panic() {
        let b = encode(&sample());
        // Every flipped byte decodes to an error or to tombstones that are still well formed:
        // the block checksum, not this decoder, catches flips inside the keys.
        for i in 0..b.len() {
            for bit in [0x01, 0x80] {
                let mut d = b.clone();
                d[i] ^= bit;
                if let Ok(ts) = decode(&d, 0) {
                    assert!(ts.iter().all(|t| t.start < t.end && t.seq <= SEQ_MAX));
                    assert!(ts.windows(2).all(|w| w[0].sst_order(&w[1]).is_lt()));
                }
            }
        }
        // Out of order, an empty range, a sequence over 56 bits.
        let mut swapped = sample();
        swapped.swap(0, 1);
        let mut forged = 4u32.to_le_bytes().to_vec();
        for t in &swapped {
            forged.extend_from_slice(&t.seq.to_le_bytes());
            for k in [&t.start, &t.end] {
                forged.extend_from_slice(&(k.len() as u32).to_le_bytes());
                forged.extend_from_slice(k);
            }
        }
        assert!(decode(&forged, 0).is_err());
        let empty_range = [1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, b'a', 1, 0, 0, 0, b'a'];
        assert!(decode(&empty_range, 0).is_err());
        let mut big_seq = encode(&sample()[..1]);
        big_seq[4..12].copy_from_slice(&(SEQ_MAX + 1).to_le_bytes());
        assert!(decode(&big_seq, 0).is_err());
        assert!(decode(&u32::MAX.to_le_bytes(), 0).is_err());
    }
}
