//! The engine's bytes inside the space layer's version records: which SSTs each level holds.
//!
//! A delta version carries one [`VersionEdit`] (a flush, a compaction, a trivial move); a base
//! version carries the complete state as one edit that adds every live SST. The space layer
//! records the SSTs' extents itself; these bytes add what the engine needs to read them.
//!
//! ```text
//! edit:
//! offset size  field
//! 0      1     format version: 1, or 2 when an added SST is on the capacity tier
//! 1      8     last sequence (u64 LE): every sequence up to it is in an SST or the WAL
//! 9      8     oldest unflushed LTN (u64 LE): WAL groups of older generations are flushed
//! 17     8     next LTN (u64 LE)
//! 25     4     removed count R (u32 LE)
//! 29     9*R   removed SSTs: level (u8) | SST id (u64 LE)
//! ..     4     added count A (u32 LE)
//! ..     ..    added SSTs, each:
//!                level (u8) | SST id (u64 LE) | [format 2: tier (u8): 0 fast, 1 capacity]
//!                | first slot (u32 LE) | slot count (u32 LE) | bytes (u64 LE) | entries (u64 LE) | smallest seq (u64 LE) | largest seq (u64 LE)
//!                | smallest key length (u32 LE) | smallest internal key
//!                | largest key length (u32 LE) | largest internal key
//! ```
//! All integers little-endian. The enclosing log object's CRC32C covers the bytes; a decode
//! failure is reported as corruption. An edit that places nothing on the capacity tier is
//! written in format 1, so a store without a capacity volume stays readable by a shale that
//! predates tiers.

use shale_space::codec::Reader;
use shale_space::{Extent, Tier};

use crate::error::{Error, Result};
use crate::key;

/// Format version of an edit without capacity-tier SSTs.
const EDIT_VERSION: u8 = 1;
/// Format version of an edit that names each added SST's tier.
const EDIT_VERSION_TIERED: u8 = 2;
/// Most levels an SST may be on.
pub const LEVELS_MAX: usize = 8;

/// What the engine knows of one SST.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SstMeta {
    /// Unique id; also orders L0 SSTs (newer = larger), never the slot number (LDS).
    pub id: u64,
    /// Where it is stored.
    pub extent: Extent,
    /// Size of the SST image in bytes (a whole number of slots).
    pub bytes: u64,
    /// Entries it holds.
    pub entries: u64,
    /// Smallest sequence number in it.
    pub smallest_seq: u64,
    /// Largest sequence number in it.
    pub largest_seq: u64,
    /// Smallest internal key the SST covers (point entries and range tombstones; a
    /// [`key::range_bound`] when a tombstone starts first).
    pub smallest: Vec<u8>,
    /// Largest internal key the SST covers; exclusive when it is a [`key::range_bound`] (a
    /// range tombstone's end comes last).
    pub largest: Vec<u8>,
}

impl SstMeta {
    /// Whether `user_key` is at or below the SST's largest key (at the user-key level).
    fn reaches(&self, user_key: &[u8]) -> bool {
        let largest = key::user_key(&self.largest);
        user_key < largest || (user_key == largest && !key::is_range_bound(&self.largest))
    }

    /// Whether the SST's bounds contain `user_key`: it may hold an entry of the key or a range
    /// tombstone over it.
    pub fn may_contain_user_key(&self, user_key: &[u8]) -> bool {
        key::user_key(&self.smallest) <= user_key && self.reaches(user_key)
    }

    /// Whether the SST's bounds meet the user keys `[smallest, largest]` (both inclusive).
    pub fn overlaps_user_keys(&self, smallest: &[u8], largest: &[u8]) -> bool {
        key::user_key(&self.smallest) <= largest && self.reaches(smallest)
    }

    /// Whether the SST's bounds meet the user keys `[start, end)`.
    pub fn overlaps_range(&self, start: &[u8], end: &[u8]) -> bool {
        key::user_key(&self.smallest) < end && self.reaches(start)
    }

    /// Whether every user key the SST covers sorts before every one `next` covers, as SSTs of
    /// one level below L0 must.
    pub fn is_before(&self, next: &SstMeta) -> bool {
        !self.reaches(key::user_key(&next.smallest))
    }
}

/// One atomic change of the engine's state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VersionEdit {
    /// Highest sequence number made durable (in an SST or a WAL group still live).
    pub last_seq: u64,
    /// WAL groups of generations below this are flushed and may be recycled.
    pub oldest_unflushed_ltn: u64,
    /// The next memtable generation number.
    pub next_ltn: u64,
    /// (level, SST id) removed.
    pub removed: Vec<(u8, u64)>,
    /// (level, SST) added.
    pub added: Vec<(u8, SstMeta)>,
}

impl VersionEdit {
    /// Encodes the edit.
    pub fn encode(&self) -> Vec<u8> {
        let tiered = self.added.iter().any(|(_, m)| m.extent.tier != Tier::Fast);
        let mut b = vec![if tiered { EDIT_VERSION_TIERED } else { EDIT_VERSION }];
        for v in [self.last_seq, self.oldest_unflushed_ltn, self.next_ltn] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&(self.removed.len() as u32).to_le_bytes());
        for (level, id) in &self.removed {
            b.push(*level);
            b.extend_from_slice(&id.to_le_bytes());
        }
        b.extend_from_slice(&(self.added.len() as u32).to_le_bytes());
        for (level, m) in &self.added {
            b.push(*level);
            b.extend_from_slice(&m.id.to_le_bytes());
            if tiered {
                b.push(m.extent.tier as u8);
            }
            b.extend_from_slice(&m.extent.first.to_le_bytes());
            b.extend_from_slice(&m.extent.count.to_le_bytes());
            for v in [m.bytes, m.entries, m.smallest_seq, m.largest_seq] {
                b.extend_from_slice(&v.to_le_bytes());
            }
            for k in [&m.smallest, &m.largest] {
                b.extend_from_slice(&(k.len() as u32).to_le_bytes());
                b.extend_from_slice(k);
            }
        }
        b
    }

    /// Decodes an edit.
    ///
    /// # Errors
    /// [`Error::Corruption`] if the bytes are not a valid edit.
    pub fn decode(bytes: &[u8]) -> Result<VersionEdit> {
        Self::decode_inner(bytes)
            .ok_or_else(|| Error::corruption("version edit (engine bytes of a version record)", 0))
    }

    fn decode_inner(bytes: &[u8]) -> Option<VersionEdit> {
        let mut r = Reader::new(bytes);
        let tiered = match r.u8()? {
            EDIT_VERSION => false,
            EDIT_VERSION_TIERED => true,
            _ => return None,
        };
        let mut e = VersionEdit {
            last_seq: r.u64()?,
            oldest_unflushed_ltn: r.u64()?,
            next_ltn: r.u64()?,
            ..Default::default()
        };
        let removed = r.u32()? as usize;
        if removed > r.remaining() / 9 {
            return None;
        }
        for _ in 0..removed {
            let level = r.u8()?;
            (usize::from(level) < LEVELS_MAX).then_some(())?;
            e.removed.push((level, r.u64()?));
        }
        let added = r.u32()? as usize;
        if added > r.remaining() / 57 {
            return None;
        }
        for _ in 0..added {
            let level = r.u8()?;
            (usize::from(level) < LEVELS_MAX).then_some(())?;
            let id = r.u64()?;
            let tier = match if tiered { r.u8()? } else { 0 } {
                0 => Tier::Fast,
                1 => Tier::Capacity,
                _ => return None,
            };
            let extent = Extent::on(tier, r.u32()?, r.u32()?);
            let m = SstMeta {
                id,
                extent,
                bytes: r.u64()?,
                entries: r.u64()?,
                smallest_seq: r.u64()?,
                largest_seq: r.u64()?,
                smallest: r.bytes()?.to_vec(),
                largest: r.bytes()?.to_vec(),
            };
            if extent.count == 0 || m.smallest.len() < 8 || m.largest.len() < 8 {
                return None;
            }
            e.added.push((level, m));
        }
        r.is_empty().then_some(e)
    }
}

/// The committed state recovered from a volume's version records: the live SSTs and the
/// counters of the newest edit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Folded {
    /// Highest sequence number recorded by any edit.
    pub last_seq: u64,
    /// Oldest WAL generation not flushed yet.
    pub oldest_unflushed_ltn: u64,
    /// Next WAL generation number.
    pub next_ltn: u64,
    /// Largest SST id ever added.
    pub max_sst_id: u64,
    /// Live SSTs by id, with their level.
    pub live: std::collections::BTreeMap<u64, (u8, SstMeta)>,
}

/// Folds a base version and its deltas into the live set of SSTs, without opening any: an SST
/// added and later removed in the same chain may have had its slots reused since.
///
/// # Errors
/// [`Error::Corruption`] for undecodable engine bytes or an edit that removes an SST the state
/// does not hold.
pub fn fold(versions: &shale_space::Versions) -> Result<Folded> {
    let mut f = Folded { oldest_unflushed_ltn: 1, next_ltn: 1, ..Folded::default() };
    let engine_edits = std::iter::once(&versions.base.engine)
        .chain(versions.deltas.iter().map(|d| &d.engine))
        .filter(|bytes| !bytes.is_empty());
    for bytes in engine_edits {
        let edit = VersionEdit::decode(bytes)?;
        for (level, id) in &edit.removed {
            match f.live.remove(id) {
                Some((l, _)) if l == *level => {}
                _ => {
                    return Err(Error::corruption(
                        format!(
                            "version edit removes SST {id} from L{level}, which does not hold it"
                        ),
                        0,
                    ));
                }
            }
        }
        for (level, meta) in edit.added {
            f.max_sst_id = f.max_sst_id.max(meta.id);
            f.live.insert(meta.id, (level, meta));
        }
        f.last_seq = f.last_seq.max(edit.last_seq);
        f.oldest_unflushed_ltn = edit.oldest_unflushed_ltn;
        f.next_ltn = f.next_ltn.max(edit.next_ltn);
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{Kind, encode};

    fn sample() -> VersionEdit {
        VersionEdit {
            last_seq: 900,
            oldest_unflushed_ltn: 4,
            next_ltn: 6,
            removed: vec![(0, 3), (1, 7)],
            added: vec![(
                1,
                SstMeta {
                    id: 11,
                    extent: Extent::fast(40, 2),
                    bytes: 2 << 20,
                    entries: 1000,
                    smallest_seq: 5,
                    largest_seq: 899,
                    smallest: encode(b"a", 5, Kind::Put),
                    largest: encode(b"zz", 899, Kind::Delete),
                },
            )],
        }
    }

    #[test]
    fn round_trip() {
        assert_eq!(VersionEdit::decode(&sample().encode()).unwrap(), sample());
        let empty = VersionEdit::default();
        assert_eq!(VersionEdit::decode(&empty.encode()).unwrap(), empty);
    }

    /// An edit names the tier of each added SST only when one is on the capacity tier: a
    /// single-volume store's edits keep format 1.
    #[test]
    fn capacity_sst_edits_carry_tiers() {
        assert_eq!(sample().encode()[0], 1);
        let mut tiered = sample();
        let mut on_cap = tiered.added[0].1.clone();
        on_cap.id = 12;
        on_cap.extent = Extent::on(Tier::Capacity, 40, 2);
        tiered.added.push((2, on_cap));
        let enc = tiered.encode();
        assert_eq!(enc[0], 2);
        assert_eq!(VersionEdit::decode(&enc).unwrap(), tiered);
        for cut in 0..enc.len() {
            assert!(VersionEdit::decode(&enc[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn an_exclusive_range_bound_lets_neighbours_meet_at_a_key() {
        let meta = |smallest: Vec<u8>, largest: Vec<u8>| SstMeta {
            smallest,
            largest,
            ..sample().added[0].1.clone()
        };
        let (b, m) = (key::range_bound(b"b"), key::range_bound(b"m"));
        let left = meta(b.clone(), m.clone()); // a tombstone [b, m)
        let right = meta(encode(b"m", 3, Kind::Put), encode(b"q", 1, Kind::Put));
        assert!(left.is_before(&right) && !right.is_before(&left));
        assert!(left.may_contain_user_key(b"l\xff") && !left.may_contain_user_key(b"m"));
        assert!(left.may_contain_user_key(b"b") && !left.may_contain_user_key(b"a"));
        assert!(right.may_contain_user_key(b"q"));
        assert!(!left.overlaps_range(b"m", b"z") && left.overlaps_range(b"a", b"b\0"));
        assert!(!left.overlaps_range(b"a", b"b"));
        assert!(left.overlaps_user_keys(b"a", b"b") && !left.overlaps_user_keys(b"m", b"n"));
        let inclusive = meta(b, encode(b"m", 9, Kind::Delete));
        assert!(!inclusive.is_before(&right));
    }

    #[test]
    fn truncations_and_trailing_bytes_are_corruption() {
        let enc = sample().encode();
        for cut in 0..enc.len() {
            assert!(VersionEdit::decode(&enc[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = enc;
        longer.push(1);
        assert!(VersionEdit::decode(&longer).is_err());
    }
}
