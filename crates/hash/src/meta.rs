//! The hash engine's state in the volume's version log: which extents are segments of the
//! record log, and each one's generation (the colour of its pages, and the order in which
//! recovery replays them).
//!
//! ```text
//! every payload: magic b"SHHASH01" (8 bytes) | kind (u8)
//! kind 0, base:  count (u32 LE) | count x (generation u64 LE, tier u8, first slot u32 LE,
//!                sealed pages u32 LE: u32::MAX while the segment may still grow)
//! kind 1, a segment added:   generation (u64 LE) | the segment sealed by it: generation
//!                (u64 LE, 0 for none) and pages (u32 LE); its extent is the delta's one
//!                added extent
//! kind 2, a segment removed (collected): generation (u64 LE); its extent is the delta's one
//!                removed extent
//! kind 3, an index checkpoint: generation (u64 LE); its extent is the delta's one added
//!                extent, the checkpoint it replaces (if any) the one removed extent
//! kind 4, shard membership: set id (16 bytes), index (u32 LE), count (u32 LE): this store
//!                is shard `index` of `count` of one set ([`crate::Shards`])
//! kind 5, a bounded index checkpoint (`IndexMode::Bounded`): generation (u64 LE), the
//!                extent of the index snapshot it names (tier u8, first slot u32 LE, slots
//!                u32 LE); the delta adds the checkpoint's extent, then the snapshot's, and
//!                removes the checkpoint and the snapshot they replace
//! kind 6, a bounded store made: nothing more. The first open of a store in bounded mode
//!                writes it, so the mode is known before the first checkpoint
//! kind 7, a base of a bounded store: snapshot present (u8 0 or 1), the snapshot's extent
//!                (tier u8, first slot u32 LE, slots u32 LE), then a base as kind 0 (from
//!                its kind byte on)
//! a base ends, after its segments, with the checkpoint if there is one: present (u8 0 or
//!                1), then generation (u64 LE), tier (u8), first slot (u32 LE), slots (u32 LE);
//!                then, if the store is a shard, its membership as in kind 4 (28 bytes)
//! ```
//! A sealed segment's page count tells recovery that every page below it was durable: an
//! invalid one is damage, never a torn tail to cut (P4).
//! The magic tells a hash store's volume from an lsm store's (whose payloads are version
//! edits): the engine refuses a volume whose payloads lack it, and writes nothing to it.

use shale_space::{Extent, Tier, Versions};

use crate::error::{Error, Result};

const MAGIC: &[u8; 8] = b"SHHASH01";
const BASE: u8 = 0;
const SEGMENT_ADDED: u8 = 1;
const SEGMENT_REMOVED: u8 = 2;
const CHECKPOINT: u8 = 3;
const MEMBERSHIP: u8 = 4;
const BOUNDED_CHECKPOINT: u8 = 5;
const BOUNDED_MADE: u8 = 6;
const BOUNDED_BASE: u8 = 7;
/// Bytes of a kind 7 base before its kind 0 part.
const BOUNDED_BASE_PREFIX: usize = 11;

/// What the version log says of a bounded store's index.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BoundedMeta {
    /// The index snapshot the newest checkpoint names.
    pub snapshot: Option<Extent>,
}

fn encode_extent(b: &mut Vec<u8>, e: Extent) {
    b.push(e.tier.index() as u8);
    b.extend_from_slice(&e.first.to_le_bytes());
    b.extend_from_slice(&e.count.to_le_bytes());
}

fn decode_extent(b: &[u8]) -> Option<Extent> {
    let tier = match b.first()? {
        0 => Tier::Fast,
        1 => Tier::Capacity,
        _ => return None,
    };
    Some(Extent {
        tier,
        first: u32::from_le_bytes(b.get(1..5)?.try_into().ok()?),
        count: u32::from_le_bytes(b.get(5..9)?.try_into().ok()?),
    })
}

/// The payload of a delta naming a bounded checkpoint of `generation` whose index snapshot
/// is `snapshot`.
pub fn encode_bounded_checkpoint(generation: u64, snapshot: Extent) -> Vec<u8> {
    let mut b = MAGIC.to_vec();
    b.push(BOUNDED_CHECKPOINT);
    b.extend_from_slice(&generation.to_le_bytes());
    encode_extent(&mut b, snapshot);
    b
}

/// The payload of a delta making the store a bounded one.
pub fn encode_bounded_made() -> Vec<u8> {
    let mut b = MAGIC.to_vec();
    b.push(BOUNDED_MADE);
    b
}

/// Which shard of which set a store is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Membership {
    /// The set's id, the same in every shard of it.
    pub set: [u8; 16],
    /// This store's place in the set.
    pub index: u32,
    /// Shards in the set.
    pub count: u32,
}

impl Membership {
    fn encode(&self, b: &mut Vec<u8>) {
        b.extend_from_slice(&self.set);
        b.extend_from_slice(&self.index.to_le_bytes());
        b.extend_from_slice(&self.count.to_le_bytes());
    }

    fn decode(b: &[u8]) -> Option<Membership> {
        if b.len() != 24 {
            return None;
        }
        let m = Membership {
            set: b[..16].try_into().ok()?,
            index: u32::from_le_bytes(b[16..20].try_into().ok()?),
            count: u32::from_le_bytes(b[20..24].try_into().ok()?),
        };
        (m.index < m.count).then_some(m)
    }
}

/// The payload of a delta making the store a shard of a set.
pub fn encode_membership(m: &Membership) -> Vec<u8> {
    let mut b = MAGIC.to_vec();
    b.push(MEMBERSHIP);
    m.encode(&mut b);
    b
}

/// The newest index checkpoint, as the version log names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckpointMeta {
    /// Its generation: the colour of its pages.
    pub generation: u64,
    /// Where it lies.
    pub extent: Extent,
}

/// What the version log says of a hash store.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct State {
    /// The segments, oldest generation first.
    pub segments: Vec<SegmentMeta>,
    /// The newest checkpoint.
    pub checkpoint: Option<CheckpointMeta>,
    /// The set this store is a shard of, if any.
    pub membership: Option<Membership>,
    /// A bounded store's index; `None` for a store whose index is in memory.
    pub bounded: Option<BoundedMeta>,
}

/// A segment as the version log names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentMeta {
    /// Its generation: every page of it carries this number.
    pub generation: u64,
    /// Where it lies (one extent).
    pub extent: Extent,
    /// Pages it holds, once a later segment sealed it.
    pub sealed_pages: Option<u32>,
}

const OPEN: u32 = u32::MAX;

/// The payload of a full state.
pub fn encode_base(
    segments: &[SegmentMeta],
    checkpoint: Option<CheckpointMeta>,
    membership: Option<Membership>,
    bounded: Option<BoundedMeta>,
) -> Vec<u8> {
    let mut b = MAGIC.to_vec();
    if let Some(m) = bounded {
        b.push(BOUNDED_BASE);
        b.push(u8::from(m.snapshot.is_some()));
        let none = Extent { tier: Tier::Fast, first: 0, count: 0 };
        encode_extent(&mut b, m.snapshot.unwrap_or(none));
    }
    b.push(BASE);
    b.extend_from_slice(&(segments.len() as u32).to_le_bytes());
    for s in segments {
        b.extend_from_slice(&s.generation.to_le_bytes());
        b.push(s.extent.tier.index() as u8);
        b.extend_from_slice(&s.extent.first.to_le_bytes());
        b.extend_from_slice(&s.sealed_pages.unwrap_or(OPEN).to_le_bytes());
    }
    match checkpoint {
        None => b.push(0),
        Some(c) => {
            b.push(1);
            b.extend_from_slice(&c.generation.to_le_bytes());
            b.push(c.extent.tier.index() as u8);
            b.extend_from_slice(&c.extent.first.to_le_bytes());
            b.extend_from_slice(&c.extent.count.to_le_bytes());
        }
    }
    if let Some(m) = membership {
        m.encode(&mut b);
    }
    b
}

/// The payload of a delta naming a new checkpoint of generation `generation`.
pub fn encode_checkpoint(generation: u64) -> Vec<u8> {
    let mut b = MAGIC.to_vec();
    b.push(CHECKPOINT);
    b.extend_from_slice(&generation.to_le_bytes());
    b
}

/// The payload of a delta adding a segment of generation `generation`, sealing the segment
/// of generation `sealed.0` at `sealed.1` pages.
pub fn encode_added(generation: u64, sealed: Option<(u64, u32)>) -> Vec<u8> {
    let mut b = MAGIC.to_vec();
    b.push(SEGMENT_ADDED);
    b.extend_from_slice(&generation.to_le_bytes());
    let (g, pages) = sealed.unwrap_or((0, 0));
    b.extend_from_slice(&g.to_le_bytes());
    b.extend_from_slice(&pages.to_le_bytes());
    b
}

/// The payload of a delta removing the segment of generation `generation` (garbage
/// collection copied what it held that is still needed).
pub fn encode_removed(generation: u64) -> Vec<u8> {
    let mut b = MAGIC.to_vec();
    b.push(SEGMENT_REMOVED);
    b.extend_from_slice(&generation.to_le_bytes());
    b
}

/// The segments a recovered version names, oldest generation first.
///
/// # Errors
/// [`Error::NotHashStore`] when a payload lacks the magic (another engine's volume);
/// [`Error::Corruption`] when a payload of this engine does not parse or names extents the
/// version does not hold.
pub fn decode(versions: &Versions) -> Result<State> {
    let bad =
        |what: &str| Error::Corruption { what: format!("hash store metadata: {what}"), offset: 0 };
    let mut segments = Vec::new();
    let mut checkpoint = None;
    let mut membership = None;
    let mut bounded = None;
    let tier_of = |b: u8| match b {
        0 => Some(Tier::Fast),
        1 => Some(Tier::Capacity),
        _ => None,
    };
    let live = |first: u32, tier: Tier| {
        versions.base.extents.iter().find(|e| e.first == first && e.tier == tier).copied()
    };
    let base = &versions.base.engine;
    if !base.is_empty() {
        let mut body = strip_magic(base)?;
        if body.first() == Some(&BOUNDED_BASE) {
            if body.len() < BOUNDED_BASE_PREFIX || body[1] > 1 {
                return Err(bad("bounded base record"));
            }
            let snapshot =
                decode_extent(&body[2..11]).ok_or_else(|| bad("bounded index snapshot"))?;
            let snapshot = (body[1] == 1).then_some(snapshot);
            if snapshot.is_some_and(|t| live(t.first, t.tier) != Some(t)) {
                return Err(bad("a bounded index snapshot the base does not hold"));
            }
            bounded = Some(BoundedMeta { snapshot });
            body = &body[BOUNDED_BASE_PREFIX..];
        }
        if body.first() != Some(&BASE) || body.len() < 5 {
            return Err(bad("base record"));
        }
        let n = u32::from_le_bytes(body[1..5].try_into().unwrap()) as usize;
        let rest = &body[5..];
        if rest.len() < n * 17 + 1 {
            return Err(bad("base record length"));
        }
        let (entries, tail) = rest.split_at(n * 17);
        let (tail, shard) = match tail.len() {
            1 | 18 => (tail, None),
            25 | 42 => (&tail[..tail.len() - 24], Some(&tail[tail.len() - 24..])),
            _ => return Err(bad("base record's end")),
        };
        if let Some(b) = shard {
            membership = Some(Membership::decode(b).ok_or_else(|| bad("shard membership"))?);
        }
        match tail {
            [0] => {}
            [1, c @ ..] if c.len() == 17 => {
                let generation = u64::from_le_bytes(c[..8].try_into().unwrap());
                let tier = tier_of(c[8]).ok_or_else(|| bad("checkpoint tier"))?;
                let first = u32::from_le_bytes(c[9..13].try_into().unwrap());
                let count = u32::from_le_bytes(c[13..17].try_into().unwrap());
                let extent = Extent { tier, first, count };
                if live(first, tier) != Some(extent) {
                    return Err(bad("a checkpoint the base does not hold"));
                }
                checkpoint = Some(CheckpointMeta { generation, extent });
            }
            _ => return Err(bad("base record's checkpoint")),
        }
        for entry in entries.chunks_exact(17) {
            let generation = u64::from_le_bytes(entry[..8].try_into().unwrap());
            let tier = tier_of(entry[8]).ok_or_else(|| bad("tier"))?;
            let first = u32::from_le_bytes(entry[9..13].try_into().unwrap());
            let extent =
                live(first, tier).ok_or_else(|| bad("a segment the base does not hold"))?;
            let sealed = u32::from_le_bytes(entry[13..17].try_into().unwrap());
            let sealed_pages = (sealed != OPEN).then_some(sealed);
            segments.push(SegmentMeta { generation, extent, sealed_pages });
        }
    } else if !versions.base.extents.is_empty() {
        return Err(Error::NotHashStore("live extents with no hash-engine state".into()));
    }
    for delta in &versions.deltas {
        let body = strip_magic(&delta.engine)?;
        match (body.first(), body.len(), delta.added.as_slice()) {
            (Some(&SEGMENT_ADDED), 21, [extent]) => {
                let generation = u64::from_le_bytes(body[1..9].try_into().unwrap());
                let sealed = u64::from_le_bytes(body[9..17].try_into().unwrap());
                let pages = u32::from_le_bytes(body[17..21].try_into().unwrap());
                if let Some(s) = segments.iter_mut().find(|s| s.generation == sealed) {
                    s.sealed_pages = Some(pages);
                }
                segments.push(SegmentMeta { generation, extent: *extent, sealed_pages: None });
            }
            (Some(&SEGMENT_REMOVED), 9, []) if delta.removed.len() == 1 => {
                let generation = u64::from_le_bytes(body[1..9].try_into().unwrap());
                let before = segments.len();
                segments.retain(|s| !(s.generation == generation && s.extent == delta.removed[0]));
                if segments.len() + 1 != before {
                    return Err(bad("removal of a segment the version does not hold"));
                }
            }
            (Some(&MEMBERSHIP), 25, []) if delta.removed.is_empty() => {
                membership =
                    Some(Membership::decode(&body[1..]).ok_or_else(|| bad("shard membership"))?);
            }
            (Some(&CHECKPOINT), 9, [extent]) if delta.removed.len() <= 1 => {
                let generation = u64::from_le_bytes(body[1..9].try_into().unwrap());
                let replaced = checkpoint.map(|c: CheckpointMeta| c.extent);
                if delta.removed.first().copied() != replaced {
                    return Err(bad("a checkpoint that does not replace the current one"));
                }
                checkpoint = Some(CheckpointMeta { generation, extent: *extent });
            }
            (Some(&BOUNDED_CHECKPOINT), 18, [ck, snapshot]) => {
                let generation = u64::from_le_bytes(body[1..9].try_into().unwrap());
                let named = decode_extent(&body[9..18]).ok_or_else(|| bad("bounded snapshot"))?;
                if named != *snapshot {
                    return Err(bad("a bounded checkpoint adding another snapshot than it names"));
                }
                let old_snapshot = bounded.and_then(|b: BoundedMeta| b.snapshot);
                let replaced = checkpoint.map(|c: CheckpointMeta| c.extent);
                let mut want: Vec<Extent> = replaced.into_iter().chain(old_snapshot).collect();
                let mut removed = delta.removed.clone();
                want.sort_by_key(|e| (e.tier.index(), e.first));
                removed.sort_by_key(|e| (e.tier.index(), e.first));
                if removed != want {
                    return Err(bad("a checkpoint that does not replace the current one"));
                }
                checkpoint = Some(CheckpointMeta { generation, extent: *ck });
                bounded = Some(BoundedMeta { snapshot: Some(*snapshot) });
            }
            (Some(&BOUNDED_MADE), 1, []) if delta.removed.is_empty() && bounded.is_none() => {
                bounded = Some(BoundedMeta { snapshot: None });
            }
            _ => return Err(bad("delta record")),
        }
    }
    segments.sort_by_key(|s| s.generation);
    if segments.windows(2).any(|w| w[0].generation == w[1].generation) {
        return Err(bad("two segments of one generation"));
    }
    Ok(State { segments, checkpoint, membership, bounded })
}

fn strip_magic(payload: &[u8]) -> Result<&[u8]> {
    match payload.strip_prefix(MAGIC.as_slice()) {
        Some(body) => Ok(body),
        None => Err(Error::NotHashStore(
            "the version log holds another engine's records (an lsm store?)".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shale_space::{BaseRecord, DeltaRecord};

    #[test]
    fn a_base_and_deltas_give_the_segments_in_generation_order() {
        let a = Extent::fast(3, 1);
        let b = Extent::fast(9, 1);
        let c = Extent::fast(5, 1);
        let versions = Versions {
            base: BaseRecord {
                extents: vec![a, b],
                engine: encode_base(
                    &[
                        SegmentMeta { generation: 4, extent: b, sealed_pages: None },
                        SegmentMeta { generation: 2, extent: a, sealed_pages: Some(12) },
                    ],
                    None,
                    None,
                    None,
                ),
            },
            deltas: vec![
                DeltaRecord {
                    removed: vec![],
                    added: vec![c],
                    engine: encode_added(7, Some((4, 30))),
                },
                DeltaRecord { removed: vec![a], added: vec![], engine: encode_removed(2) },
                DeltaRecord { removed: vec![], added: vec![a], engine: encode_added(8, None) },
            ],
        };
        let state = decode(&versions).unwrap();
        assert_eq!(state.checkpoint, None);
        let got = state.segments;
        assert_eq!(got.iter().map(|s| s.generation).collect::<Vec<_>>(), vec![4, 7, 8]);
        assert_eq!(got[2].extent, a, "a collected segment's slots are used again");
        assert_eq!(
            got.iter().map(|s| s.sealed_pages).collect::<Vec<_>>(),
            vec![Some(30), None, None]
        );
        assert_eq!(got[1].extent, c);
    }

    #[test]
    fn checkpoints_replace_each_other_and_survive_a_base() {
        let seg = Extent::fast(1, 1);
        let c1 = Extent::fast(2, 3);
        let c2 = Extent::fast(5, 2);
        let s = SegmentMeta { generation: 1, extent: seg, sealed_pages: None };
        let versions = Versions {
            base: BaseRecord {
                extents: vec![seg, c1],
                engine: encode_base(
                    &[s],
                    Some(CheckpointMeta { generation: 2, extent: c1 }),
                    Some(Membership { set: [7; 16], index: 1, count: 3 }),
                    None,
                ),
            },
            deltas: vec![DeltaRecord {
                removed: vec![c1],
                added: vec![c2],
                engine: encode_checkpoint(3),
            }],
        };
        let state = decode(&versions).unwrap();
        assert_eq!(state.checkpoint, Some(CheckpointMeta { generation: 3, extent: c2 }));
        assert_eq!(state.membership, Some(Membership { set: [7; 16], index: 1, count: 3 }));
        assert_eq!(state.segments, vec![s]);
        // A checkpoint delta that does not remove the one it replaces is damage.
        let bad = Versions {
            base: versions.base.clone(),
            deltas: vec![DeltaRecord {
                removed: vec![],
                added: vec![c2],
                engine: encode_checkpoint(3),
            }],
        };
        assert!(matches!(decode(&bad), Err(Error::Corruption { .. })));
    }

    #[test]
    fn a_bounded_stores_checkpoints_replace_their_snapshots() {
        let seg = Extent::fast(1, 1);
        let (t1, c1, t2, c2) =
            (Extent::fast(2, 1), Extent::fast(3, 1), Extent::fast(4, 2), Extent::fast(6, 1));
        let s = SegmentMeta { generation: 1, extent: seg, sealed_pages: None };
        let made = DeltaRecord { removed: vec![], added: vec![], engine: encode_bounded_made() };
        let first = DeltaRecord {
            removed: vec![],
            added: vec![c1, t1],
            engine: encode_bounded_checkpoint(2, t1),
        };
        let second = DeltaRecord {
            removed: vec![t1, c1],
            added: vec![c2, t2],
            engine: encode_bounded_checkpoint(5, t2),
        };
        let empty = BaseRecord { extents: vec![seg], engine: encode_base(&[s], None, None, None) };
        let at = |base: &BaseRecord, deltas: Vec<DeltaRecord>| {
            decode(&Versions { base: base.clone(), deltas }).map(|st| (st.bounded, st.checkpoint))
        };
        assert_eq!(at(&empty, vec![]).unwrap().0, None, "an in-memory store");
        assert_eq!(at(&empty, vec![made.clone()]).unwrap().0, Some(BoundedMeta { snapshot: None }));
        let (b, ck) = at(&empty, vec![made.clone(), first.clone(), second.clone()]).unwrap();
        assert_eq!(b, Some(BoundedMeta { snapshot: Some(t2) }));
        assert_eq!(ck, Some(CheckpointMeta { generation: 5, extent: c2 }));
        // The same state from a base.
        let base = BaseRecord {
            extents: vec![seg, t2, c2],
            engine: encode_base(
                &[s],
                Some(CheckpointMeta { generation: 5, extent: c2 }),
                None,
                Some(BoundedMeta { snapshot: Some(t2) }),
            ),
        };
        assert_eq!(at(&base, vec![]).unwrap(), (b, ck));
        // A checkpoint that leaves the old snapshot or checkpoint live, or adds another
        // snapshot than it names, is damage.
        for bad in [
            DeltaRecord {
                removed: vec![c1],
                added: vec![c2, t2],
                engine: encode_bounded_checkpoint(5, t2),
            },
            DeltaRecord {
                removed: vec![t1, c1],
                added: vec![c2, t1],
                engine: encode_bounded_checkpoint(5, t2),
            },
        ] {
            let r = at(&empty, vec![made.clone(), first.clone(), bad]);
            assert!(matches!(r, Err(Error::Corruption { .. })), "{r:?}");
        }
    }

    #[test]
    fn another_engines_payload_is_refused() {
        let versions = Versions {
            base: BaseRecord::default(),
            deltas: vec![DeltaRecord {
                removed: vec![],
                added: vec![],
                engine: b"lsm edit".to_vec(),
            }],
        };
        assert!(matches!(decode(&versions), Err(Error::NotHashStore(_))));
    }
}
