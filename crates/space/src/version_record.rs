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
//!
//! Only in a tiered store, and only when it has any (so the records of a store without a
//! capacity volume are byte for byte as before tiers):
//! ..      4     capacity extent count C     ..      4     capacity removed count (u32)
//! ..      8*C   capacity extents, sorted,   ..      8*n   capacity removed extents
//!               disjoint                    ..      4     capacity added count (u32)
//!                                           ..      8*n   capacity added extents
//! ```
//! The lists before the engine bytes are the fast tier's. All integers are little-endian; the
//! enclosing log object's CRC32C covers these bytes, so a decode error here means a bug or a
//! damaged-but-checksummed record, reported as Corruption.

use crate::codec::{PutLe, Reader};
use crate::tier::Tier;

/// A run of contiguous slots on one tier; its tier and first slot name it (LDS: chunk id =
/// slot id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Extent {
    /// The volume it is on (ordered first: a tier's extents sort together).
    pub tier: Tier,
    /// First slot.
    pub first: u32,
    /// Number of slots, at least 1.
    pub count: u32,
}

impl Extent {
    /// An extent on the fast tier (a store's only volume when it has no capacity volume).
    pub fn fast(first: u32, count: u32) -> Extent {
        Extent { tier: Tier::Fast, first, count }
    }

    /// An extent on `tier`.
    pub fn on(tier: Tier, first: u32, count: u32) -> Extent {
        Extent { tier, first, count }
    }

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

/// Puts the extents of `tier` among `extents`.
fn put_extents(b: &mut Vec<u8>, extents: &[Extent], tier: Tier) {
    let n = extents.iter().filter(|e| e.tier == tier).count();
    b.put_u32(u32::try_from(n).expect("extent count fits u32"));
    for e in extents.iter().filter(|e| e.tier == tier) {
        b.put_u32(e.first);
        b.put_u32(e.count);
    }
}

fn any_capacity(extents: &[Extent]) -> bool {
    extents.iter().any(|e| e.tier == Tier::Capacity)
}

fn put_bytes(b: &mut Vec<u8>, bytes: &[u8]) {
    b.put_u32(u32::try_from(bytes.len()).expect("engine payload under 4 GiB"));
    b.extend_from_slice(bytes);
}

fn get_extents(r: &mut Reader<'_>, tier: Tier) -> Option<Vec<Extent>> {
    let n = r.u32()? as usize;
    if n > r.remaining() / 8 {
        return None;
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let e = Extent { tier, first: r.u32()?, count: r.u32()? };
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
        let mut b = Vec::with_capacity(12 + 8 * self.extents.len() + self.engine.len());
        put_extents(&mut b, &self.extents, Tier::Fast);
        put_bytes(&mut b, &self.engine);
        if any_capacity(&self.extents) {
            put_extents(&mut b, &self.extents, Tier::Capacity);
        }
        b
    }

    /// Decodes a payload.
    ///
    /// # Errors
    /// What is wrong with it.
    pub fn decode(b: &[u8]) -> Result<BaseRecord, RecordError> {
        let mut r = Reader::new(b);
        let mut extents = get_extents(&mut r, Tier::Fast).ok_or(RecordError("base extent list"))?;
        let engine = get_bytes(&mut r).ok_or(RecordError("base engine bytes"))?;
        if r.remaining() != 0 {
            let capacity = get_extents(&mut r, Tier::Capacity)
                .ok_or(RecordError("base capacity extent list"))?;
            if capacity.is_empty() {
                return Err(RecordError("empty capacity extent list in a base record"));
            }
            extents.extend(capacity);
        }
        if extents.windows(2).any(|w| w[0].tier == w[1].tier && w[0].end() > u64::from(w[1].first))
        {
            return Err(RecordError("base extents unsorted or overlapping"));
        }
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
            20 + 8 * (self.removed.len() + self.added.len()) + self.engine.len(),
        );
        put_extents(&mut b, &self.removed, Tier::Fast);
        put_extents(&mut b, &self.added, Tier::Fast);
        put_bytes(&mut b, &self.engine);
        if any_capacity(&self.removed) || any_capacity(&self.added) {
            put_extents(&mut b, &self.removed, Tier::Capacity);
            put_extents(&mut b, &self.added, Tier::Capacity);
        }
        b
    }

    /// Decodes a payload.
    ///
    /// # Errors
    /// What is wrong with it.
    pub fn decode(b: &[u8]) -> Result<DeltaRecord, RecordError> {
        let mut r = Reader::new(b);
        let mut removed =
            get_extents(&mut r, Tier::Fast).ok_or(RecordError("delta removed list"))?;
        let mut added = get_extents(&mut r, Tier::Fast).ok_or(RecordError("delta added list"))?;
        let engine = get_bytes(&mut r).ok_or(RecordError("delta engine bytes"))?;
        if r.remaining() != 0 {
            let cap_removed = get_extents(&mut r, Tier::Capacity)
                .ok_or(RecordError("delta capacity removed list"))?;
            let cap_added = get_extents(&mut r, Tier::Capacity)
                .ok_or(RecordError("delta capacity added list"))?;
            if cap_removed.is_empty() && cap_added.is_empty() {
                return Err(RecordError("empty capacity lists in a delta record"));
            }
            removed.extend(cap_removed);
            added.extend(cap_added);
        }
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
            extents: vec![Extent::fast(0, 2), Extent::fast(5, 1)],
            engine: b"levels".to_vec(),
        }
    }

    fn delta() -> DeltaRecord {
        DeltaRecord {
            removed: vec![Extent::fast(0, 2)],
            added: vec![Extent::fast(9, 3), Extent::fast(2, 1)],
            engine: vec![1, 2, 3],
        }
    }

    fn tiered_base() -> BaseRecord {
        let mut b = base();
        // The same slot numbers on the other tier: a different extent.
        b.extents.extend([Extent::on(Tier::Capacity, 0, 4), Extent::on(Tier::Capacity, 5, 1)]);
        b
    }

    fn tiered_delta() -> DeltaRecord {
        DeltaRecord {
            removed: vec![Extent::fast(0, 2), Extent::on(Tier::Capacity, 3, 1)],
            added: vec![Extent::on(Tier::Capacity, 9, 3)],
            engine: vec![4],
        }
    }

    #[test]
    fn round_trip() {
        assert_eq!(BaseRecord::decode(&base().encode()), Ok(base()));
        assert_eq!(DeltaRecord::decode(&delta().encode()), Ok(delta()));
        assert_eq!(BaseRecord::decode(&BaseRecord::default().encode()), Ok(BaseRecord::default()));
        assert_eq!(BaseRecord::decode(&tiered_base().encode()), Ok(tiered_base()));
        assert_eq!(DeltaRecord::decode(&tiered_delta().encode()), Ok(tiered_delta()));
    }

    /// Records without capacity extents are written as before tiers existed.
    #[test]
    fn records_of_one_volume_have_no_capacity_lists() {
        assert_eq!(base().encode().len(), 4 + 16 + 4 + 6);
        assert_eq!(delta().encode().len(), 4 + 8 + 4 + 16 + 4 + 3);
    }

    #[test]
    fn every_truncation_is_refused() {
        for b in [base().encode(), tiered_base().encode()] {
            for cut in 0..b.len() {
                // Cutting a tiered base exactly before its capacity list leaves a valid
                // one-tier base; any other cut is refused.
                if cut == base().encode().len() && b.len() > cut {
                    assert_eq!(BaseRecord::decode(&b[..cut]), Ok(base()));
                    continue;
                }
                assert!(BaseRecord::decode(&b[..cut]).is_err(), "base cut at {cut}");
            }
        }
        for d in [delta().encode(), tiered_delta().encode()] {
            for cut in 0..d.len() {
                if DeltaRecord::decode(&d[..cut]).is_ok() {
                    // Only the cut just before the capacity lists decodes.
                    assert_eq!(cut, 4 + 8 + 4 + 4 + 1, "delta cut at {cut}");
                    continue;
                }
            }
        }
    }

    #[test]
    fn impossible_records_are_refused() {
        let overlapping =
            BaseRecord { extents: vec![Extent::fast(0, 3), Extent::fast(2, 1)], engine: vec![] };
        assert!(BaseRecord::decode(&overlapping.encode()).is_err());
        let overlapping_capacity = BaseRecord {
            extents: vec![Extent::on(Tier::Capacity, 0, 3), Extent::on(Tier::Capacity, 2, 1)],
            engine: vec![],
        };
        assert!(BaseRecord::decode(&overlapping_capacity.encode()).is_err());
        let empty_extent = DeltaRecord { added: vec![Extent::fast(1, 0)], ..delta() };
        assert!(DeltaRecord::decode(&empty_extent.encode()).is_err());
        let mut huge_count = base().encode();
        huge_count[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(BaseRecord::decode(&huge_count).is_err());
        let mut trailing = delta().encode();
        trailing.push(0);
        assert!(DeltaRecord::decode(&trailing).is_err());
    }
}
