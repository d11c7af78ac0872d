//! Self-describing version log objects (LDS): one device write per object.
//!
//! ```text
//! offset size field        notes
//! 0      4    magic        b"SHLG"
//! 4      4    crc32c       of bytes [8, total): header rest, payload and zero padding
//! 8      1    kind         1 base version, 2 delta version, 3 wrap-right (WOR), 4 wrap-left (WOL)
//! 9      1    version      object format version, 1
//! 10     2    reserved     zero
//! 12     4    payload len  u32, bytes
//! 16     8    lsn          u64, log sequence number: +1 for every object appended to the ring;
//!                          a WOL carries the lsn of the base it points to
//! 24     8    sn           u64, the base version number (LDS's SN) the object belongs to
//! 32     n    payload
//! 32+n   ..   zero padding up to a whole number of sectors (covered by the checksum)
//! ```
//! All integers are little-endian. The checksum covers every byte the object occupies, so a
//! flipped bit anywhere, or a write torn at any sector, makes the object invalid.

use crate::codec::{le_u32, le_u64};

/// First bytes of every log object.
pub const OBJECT_MAGIC: &[u8; 4] = b"SHLG";
/// Object format version written by this build.
pub const OBJECT_VERSION: u8 = 1;
/// Bytes before the payload.
pub const OBJECT_HEADER_BYTES: usize = 32;

/// What an object is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    /// A base version: the complete state; starts a new SN.
    Base = 1,
    /// A delta version: one atomic change on top of the base with the same SN.
    Delta = 2,
    /// Wrap-right (WOR): the ring continues at its start.
    WrapRight = 3,
    /// Wrap-left (WOL): the anchor, pointing at the newest base.
    WrapLeft = 4,
}

impl ObjectKind {
    fn from_u8(v: u8) -> Option<ObjectKind> {
        Some(match v {
            1 => ObjectKind::Base,
            2 => ObjectKind::Delta,
            3 => ObjectKind::WrapRight,
            4 => ObjectKind::WrapLeft,
            _ => return None,
        })
    }
}

/// A decoded object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogObject {
    /// What it is.
    pub kind: ObjectKind,
    /// Log sequence number.
    pub lsn: u64,
    /// Base version number.
    pub sn: u64,
    /// The payload.
    pub payload: Vec<u8>,
}

/// Why bytes are not a valid object. The scan treats every case as "no object here"; tools
/// and tests tell them apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ObjectError {
    /// No magic: never written, or something else.
    BadMagic,
    /// The header announces more bytes than there are.
    Truncated {
        /// Bytes the object needs.
        need: usize,
    },
    /// The checksum does not match.
    BadChecksum,
    /// Checksum fine, but a field is impossible (a bug or a newer format).
    BadField(&'static str),
}

impl LogObject {
    /// Bytes the object occupies on the device: header and payload rounded up to sectors.
    pub fn encoded_len(payload_len: usize, sector: usize) -> usize {
        (OBJECT_HEADER_BYTES + payload_len).div_ceil(sector) * sector
    }

    /// Encodes into a whole number of `sector`-sized units.
    pub fn encode(&self, sector: usize) -> Vec<u8> {
        let total = Self::encoded_len(self.payload.len(), sector);
        let mut b = vec![0u8; total];
        b[..4].copy_from_slice(OBJECT_MAGIC);
        b[8] = self.kind as u8;
        b[9] = OBJECT_VERSION;
        let len = u32::try_from(self.payload.len()).expect("payload over 4 GiB");
        b[12..16].copy_from_slice(&len.to_le_bytes());
        b[16..24].copy_from_slice(&self.lsn.to_le_bytes());
        b[24..32].copy_from_slice(&self.sn.to_le_bytes());
        b[32..32 + self.payload.len()].copy_from_slice(&self.payload);
        let crc = crc32c::crc32c(&b[8..]);
        b[4..8].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes the object at the start of `b`; returns it and the bytes it occupies.
    ///
    /// # Errors
    /// Why the bytes are not a valid object.
    pub fn decode(b: &[u8], sector: usize) -> Result<(LogObject, usize), ObjectError> {
        if b.len() < OBJECT_HEADER_BYTES || &b[..4] != OBJECT_MAGIC {
            return Err(ObjectError::BadMagic);
        }
        let payload_len = le_u32(b, 12) as usize;
        let total = Self::encoded_len(payload_len, sector);
        if total > b.len() {
            return Err(ObjectError::Truncated { need: total });
        }
        if le_u32(b, 4) != crc32c::crc32c(&b[8..total]) {
            return Err(ObjectError::BadChecksum);
        }
        let kind = ObjectKind::from_u8(b[8]).ok_or(ObjectError::BadField("kind"))?;
        if b[9] != OBJECT_VERSION {
            return Err(ObjectError::BadField("object format version"));
        }
        if b[10] != 0 || b[11] != 0 {
            return Err(ObjectError::BadField("reserved bytes"));
        }
        let payload = b[32..32 + payload_len].to_vec();
        if b[32 + payload_len..total].iter().any(|&x| x != 0) {
            return Err(ObjectError::BadField("padding"));
        }
        Ok((LogObject { kind, lsn: le_u64(b, 16), sn: le_u64(b, 24), payload }, total))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(len: usize) -> LogObject {
        LogObject {
            kind: ObjectKind::Delta,
            lsn: 77,
            sn: 5,
            payload: (0..len).map(|i| (i * 7) as u8).collect(),
        }
    }

    #[test]
    fn round_trip_at_every_size_class() {
        for sector in [512, 4096] {
            for len in [0, 1, sector - OBJECT_HEADER_BYTES, sector - 31, 3 * sector + 5] {
                let o = sample(len);
                let enc = o.encode(sector);
                assert_eq!(enc.len() % sector, 0);
                let (back, used) = LogObject::decode(&enc, sector).unwrap();
                assert_eq!((back, used), (o, enc.len()));
            }
        }
    }

    #[test]
    fn every_flipped_byte_is_caught() {
        let enc = sample(600).encode(512);
        for i in 0..enc.len() {
            let mut b = enc.clone();
            b[i] ^= 0x01;
            assert!(LogObject::decode(&b, 512).is_err(), "flip at byte {i} accepted");
        }
    }

    #[test]
    fn every_truncation_is_caught() {
        let enc = sample(1500).encode(512);
        for cut in 0..enc.len() {
            assert!(LogObject::decode(&enc[..cut], 512).is_err(), "cut at {cut} accepted");
        }
    }

    #[test]
    fn torn_sectors_are_caught() {
        // A write torn at a sector boundary leaves new sectors followed by old (zero) ones.
        let enc = sample(2000).encode(512);
        for keep in 1..enc.len() / 512 {
            let mut b = enc.clone();
            b[keep * 512..].fill(0);
            assert!(LogObject::decode(&b, 512).is_err(), "torn after {keep} sectors accepted");
        }
    }
}
