//! Little-endian field readers and writers shared by the on-disk formats of every layer: the
//! space layer's own (header, version records, log objects) and the engines' payloads (the
//! lsm engine's version edits and range-deletion blocks, the hash engine's checkpoints, the
//! table engine's catalog), so each format is one place's bounds checks, not a copy each.
//!
//! Decoders never trust a length: every read is bounds-checked and a short input is reported
//! as `None`, which the format turns into a Corruption error with its own context.

/// Appends fixed-width little-endian integers to a byte vector.
pub trait PutLe {
    /// Appends a `u32`, little-endian.
    fn put_u32(&mut self, v: u32);
    /// Appends a `u64`, little-endian.
    fn put_u64(&mut self, v: u64);
}

impl PutLe for Vec<u8> {
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_le_bytes());
    }
}

/// A cursor over untrusted bytes: each read takes the next bytes, or `None` (and nothing)
/// when too few are left.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A cursor at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, pos: 0 }
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let out = self.bytes.get(self.pos..end)?;
        self.pos = end;
        Some(out)
    }

    /// The next byte.
    pub fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    /// The next `u32`, little-endian.
    pub fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|b| u32::from_le_bytes(b.try_into().unwrap()))
    }

    /// The next `u64`, little-endian.
    pub fn u64(&mut self) -> Option<u64> {
        self.take(8).map(|b| u64::from_le_bytes(b.try_into().unwrap()))
    }

    /// The next byte string after its `u32` length.
    pub fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.u32()?).ok()?;
        self.take(n)
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }
}

/// Reads a little-endian u32 at a fixed position of a buffer known to be long enough.
///
/// # Panics
/// When `b` is shorter than `at + 4`.
pub fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// Reads a little-endian u64 at a fixed position of a buffer known to be long enough.
///
/// # Panics
/// When `b` is shorter than `at + 8`.
pub fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// The little-endian u32 at a fixed position of untrusted bytes, or `None` past their end.
pub fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_round_trips_and_a_short_input_reads_nothing() {
        let mut b = vec![7u8];
        b.put_u32(0x0304_0506);
        b.put_u64(u64::MAX - 1);
        b.put_u32(3);
        b.extend_from_slice(b"abc");
        let mut r = Reader::new(&b);
        assert_eq!(r.u8(), Some(7));
        assert_eq!(r.u32(), Some(0x0304_0506));
        assert_eq!(r.u64(), Some(u64::MAX - 1));
        assert_eq!(r.bytes(), Some(&b"abc"[..]));
        assert!(r.is_empty());
        assert_eq!(r.u8(), None);
        // A length past the end: nothing taken, the cursor stays.
        let mut r = Reader::new(&[9, 0, 0, 0, b'x']);
        let mut probe = r.clone();
        assert_eq!(probe.bytes(), None);
        assert_eq!(r.take(2), Some(&[9u8, 0][..]));
        assert_eq!(r.take(9), None);
        assert_eq!(r.remaining(), 3);
        assert_eq!(u32_at(&b, 1), Some(0x0304_0506));
        assert_eq!(u32_at(&b, b.len() - 3), None);
        assert_eq!(u32_at(&b, usize::MAX - 1), None);
        assert_eq!((le_u32(&b, 1), le_u64(&b, 5)), (0x0304_0506, u64::MAX - 1));
    }
}
