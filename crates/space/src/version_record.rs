//! Payloads of base and delta version objects: the extents they make live or dead, and the
//! engine's own bytes, which the space layer carries without reading.
//!
//! ```text
//! Base version payload                      Delta version payload
//! offset  size  field                       offset  size  field
//! 0       4     extent count E (u32)        0       4     removed count R (u32)
//! 4       8*E   extents, sorted, disjoint   4       8*R   removed extents
//! 4+8E    4     engine bytes length P       ..      4     added count A (u32)
//! 8+8E    P     engine bytes (opaque)       ..      8*A   added extents
//!                                           ..      4     engine bytes length P
//! extent: first slot (u32), slot count (u32) ..     P     engine bytes (opaque)
//! ```
//! All integers are little-endian; the enclosing log object's CRC32C covers these bytes, so a
//! decode error here means a bug or a damaged-but-checksummed record, reported as Corruption.

use crate::codec::{PutLe, Reader};

/// A run of contiguous slots; its first slot names it (LDS: chunk id = slot id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Extent {
    /// First slot.
    pub first: u32,
    /// Number of slots, at least 1.
    pub count: u32,
}

impl Extent {
    /// One past the last slot.
    pub fn end(&self) -> u64 {
        u64::from(self.first) + u64::from(self.count)
    }
}

/// A complete state: every live extent and the engine's full state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BaseRecord {
    /// Live extents, sorted by first slot, disjoint.
    pub extents: Vec<Extent>,
    /// The engine's state, opaque here.
    pub engine: Vec<u8>,
}

/// One atomic change: extents dropped, extents added, and the engine's description of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeltaRecord {
    /// Extents that stop being live (freed once this delta has committed).
    pub removed: Vec<Extent>,
    /// Extents that become live (written and durable before the commit).
    pub added: Vec<Extent>,
    /// The engine's change, opaque here.
    pub engine: Vec<u8>,
}

fn put_extents(b: &mut Vec<u8>, extents: &[Extent]) {
    b.put_u32(u32::try_from(extents.len()).expect("extent count fits u32"));
    for e in extents {
        b.put_u32(e.first);
        b.put_u32(e.count);
    }
}

fn put_bytes(b: &mut Vec<u8>, bytes: &[u8]) {
    b.put_u32(u32::try_from(bytes.len()).expect("engine payload under 4 GiB"));
    b.extend_from_slice(bytes);
}

fn get_extents(r: &mut Reader<'_>) -> Option<Vec<Extent>> {
    let n = r.u32()? as usize;
    if n > r.remaining() / 8 {
        return None;
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let e = Extent { first: r.u32()?, count: r.u32()? };
        if e.count == 0 || e.end() > u64::from(u32::MAX) + 1 {
            return None;
        }
        out.push(e);
    }
    Some(out)
}

fn get_bytes(r: &mut Reader<'_>) -> Option<Vec<u8>> {
    let n = r.u32()? as usize;
    Some(r.take(n)?.to_vec())
}

/// Why a record payload is invalid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordError(pub &'static str);

impl BaseRecord {
    /// Encodes the payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(8 + 8 * self.extents.len() + self.engine.len());
        put_extents(&mut b, &self.extents);
        put_bytes(&mut b, &self.engine);
        b
    }

    /// Decodes a payload.
    ///
    /// # Errors
    /// What is wrong with it.
    pub fn decode(b: &[u8]) -> Result<BaseRecord, RecordError> {
        let mut r = Reader::new(b);
        let extents = get_extents(&mut r).ok_or(RecordError("base extent list"))?;
        if extents.windows(2).any(|w| w[0].end() > u64::from(w[1].first)) {
            return Err(RecordError("base extents unsorted or overlapping"));
        }
        let engine = get_bytes(&mut r).ok_or(RecordError("base engine bytes"))?;
        if r.remaining() != 0 {
            return Err(RecordError("trailing bytes after base record"));
        }
        Ok(BaseRecord { extents, engine })
    }
}

impl DeltaRecord {
    /// Encodes the payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(
            12 + 8 * (self.removed.len() + self.added.len()) + self.engine.len(),
        );
        put_extents(&mut b, &self.removed);
        put_extents(&mut b, &self.added);
        put_bytes(&mut b, &self.engine);
        b
    }

    /// Decodes a payload.
    ///
    /// # Errors
    /// What is wrong with it.
    pub fn decode(b: &[u8]) -> Result<DeltaRecord, RecordError> {
        let mut r = Reader::new(b);
        let removed = get_extents(&mut r).ok_or(RecordError("delta removed list"))?;
        let added = get_extents(&mut r).ok_or(RecordError("delta added list"))?;
        let engine = get_bytes(&mut r).ok_or(RecordError("delta engine bytes"))?;
        if r.remaining() != 0 {
            return Err(RecordError("trailing bytes after delta record"));
        }
        Ok(DeltaRecord { removed, added, engine })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> BaseRecord {
        BaseRecord {
            extents: vec![Extent { first: 0, count: 2 }, Extent { first: 5, count: 1 }],
            engine: b"levels".to_vec(),
        }
    }

    fn delta() -> DeltaRecord {
        DeltaRecord {
            removed: vec![Extent { first: 0, count: 2 }],
            added: vec![Extent { first: 9, count: 3 }, Extent { first: 2, count: 1 }],
            engine: vec![1, 2, 3],
        }
    }

    #[test]
    fn round_trip() {
        assert_eq!(BaseRecord::decode(&base().encode()), Ok(base()));
        assert_eq!(DeltaRecord::decode(&delta().encode()), Ok(delta()));
        assert_eq!(BaseRecord::decode(&BaseRecord::default().encode()), Ok(BaseRecord::default()));
    }

    #[test]
    fn every_truncation_is_refused() {
        let b = base().encode();
        for cut in 0..b.len() {
            assert!(BaseRecord::decode(&b[..cut]).is_err(), "base cut at {cut}");
        }
        let d = delta().encode();
        for cut in 0..d.len() {
            assert!(DeltaRecord::decode(&d[..cut]).is_err(), "delta cut at {cut}");
        }
    }

    #[test]
    fn impossible_records_are_refused() {
        let overlapping = BaseRecord {
            extents: vec![Extent { first: 0, count: 3 }, Extent { first: 2, count: 1 }],
            engine: vec![],
        };
        assert!(BaseRecord::decode(&overlapping.encode()).is_err());
        let empty_extent = DeltaRecord { added: vec![Extent { first: 1, count: 0 }], ..delta() };
        assert!(DeltaRecord::decode(&empty_extent.encode()).is_err());
        let mut huge_count = base().encode();
        huge_count[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(BaseRecord::decode(&huge_count).is_err());
        let mut trailing = delta().encode();
        trailing.push(0);
        assert!(DeltaRecord::decode(&trailing).is_err());
    }
}
