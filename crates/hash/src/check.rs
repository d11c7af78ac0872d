//! A read-only check of a hash store, and what it finds of its layout (`shale check`,
//! `shale inspect`).
//!
//! The check's stages:
//! 1. Open the volume read-only (nothing is written) and decode the engine's state in the
//!    version log: the segments, their generations and sealed page counts, the checkpoint.
//! 2. Read every segment whole and scan its pages as recovery does (`log::scan_segment`):
//!    every page's checksum, generation, index and chain, every record reassembled and
//!    parsed; a page invalid below a sealed segment's end, or below a page that says it was
//!    durable, is damage. The newest record of each key (by sequence number) is its state.
//! 3. Decode the index checkpoint, if there is one (its checksums and fields).
//! 4. Rebuild the index the engine's way (`Shard::replay`: from the checkpoint, then the
//!    pages it does not cover; from the segments alone for a bounded store, whose index
//!    pages are not read here) and compare it with stage 2's: the same live keys, and each
//!    key's indexed record read back (its pages checked again), of that key, at its newest
//!    sequence number; no deleted key indexed.

use std::collections::HashMap;
use std::path::Path;

use shale_io::{FileOptions, QueueExt};
use shale_space::{StoreLock, Volume, VolumeOptions};

use crate::error::{Error, Result};
use crate::index::{Location, Probe};
use crate::log::{self, Segment};
use crate::options::HashOptions;
use crate::record::{Kind, Record};
use crate::shard::Shard;

/// One segment of the record log, as the check found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentReport {
    /// Its generation.
    pub generation: u64,
    /// Its first slot and slots.
    pub first_slot: u32,
    /// Slots it spans.
    pub slots: u32,
    /// Pages sealed by the next segment (`None`: the segment being appended to).
    pub sealed_pages: Option<u32>,
    /// Valid pages found.
    pub pages: u32,
    /// Records in it (stores and deletes).
    pub records: u64,
    /// Bytes of the records that are their key's newest store: what garbage collection
    /// would copy.
    pub live_bytes: u64,
}

/// What a check of a hash store found: it is all consistent when [`check_store`] returns
/// it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HashReport {
    /// The record log's segments, oldest generation first.
    pub segments: Vec<SegmentReport>,
    /// Records read (stores and deletes).
    pub records: u64,
    /// Store records among them.
    pub stores: u64,
    /// Live keys: those whose newest record is a store.
    pub keys: u64,
    /// The index checkpoint: its generation and the index entries it holds.
    pub checkpoint: Option<(u64, u64)>,
    /// Whether the index is bounded (its pages on the volume, not cross-checked here).
    pub bounded: bool,
    /// The shard membership: index and count, if the store is a shard of a set.
    pub shard: Option<(u32, u32)>,
}

/// Checks the hash store at `path` (a directory, a volume file or a device) without
/// writing anything; a store open for writing is refused as in use.
///
/// # Errors
/// [`Error::Corruption`] naming what is damaged or inconsistent and where;
/// [`Error::NotHashStore`] for another engine's volume; the space layer's error.
pub fn check_store(path: impl AsRef<Path>) -> Result<HashReport> {
    let path = path.as_ref();
    let _lock = StoreLock::acquire_shared(path)?;
    let opts = VolumeOptions { create_if_blank: false, ..VolumeOptions::default() };
    let opened = Volume::open_path_read_only(path, &opts, &FileOptions::default())?;
    let state = crate::meta::decode(&opened.versions)?;
    let volume = opened.volume;
    let segments: Vec<Segment> = state
        .segments
        .iter()
        .map(|m| Segment {
            generation: m.generation,
            extent: m.extent,
            start: volume.extent_range(m.extent).start,
            sealed_pages: m.sealed_pages,
        })
        .collect();

    // Stage 2: every record, and each key's newest.
    let mut queue = volume.queues().checkout(crate::shard::sync_queues(&HashOptions::default()))?;
    let mut newest: HashMap<Vec<u8>, (u64, Kind, usize, u64)> = HashMap::new();
    let mut reports = Vec::with_capacity(segments.len());
    let (mut records, mut stores) = (0u64, 0u64);
    for (slot, seg) in segments.iter().enumerate() {
        let bytes = volume.layout().slot_bytes * u64::from(seg.extent.count);
        let image = queue.read_at(seg.start, bytes as usize)?;
        let (found, pages) = log::scan_segment(&image, seg, slot as u32)?;
        for (loc, rec) in &found {
            let r = Record::decode(rec).ok_or_else(|| Error::Corruption {
                what: format!(
                    "record log segment {} page {}: a record that does not parse",
                    seg.generation, loc.page
                ),
                offset: seg.page_address(loc.page),
            })?;
            records += 1;
            stores += u64::from(r.kind == Kind::Store);
            let entry = (r.seq, r.kind, slot, rec.len() as u64);
            // As recovery applies them: a record replaces the key's only if newer.
            match newest.get(r.key) {
                Some(&(seq, ..)) if seq >= r.seq => {}
                _ => {
                    newest.insert(r.key.to_vec(), entry);
                }
            }
        }
        reports.push(SegmentReport {
            generation: seg.generation,
            first_slot: seg.extent.first,
            slots: seg.extent.count,
            sealed_pages: seg.sealed_pages,
            pages,
            records: found.len() as u64,
            live_bytes: 0,
        });
    }
    for &(_, kind, slot, len) in newest.values() {
        if kind == Kind::Store {
            reports[slot].live_bytes += len;
        }
    }
    let keys = newest.values().filter(|(_, k, ..)| *k == Kind::Store).count() as u64;

    // Stages 3 and 4: the engine's own index, from the checkpoint, against the log.
    let bounded = state.bounded.is_some();
    let shard = Shard::new(volume, HashOptions::default(), segments);
    let mut checkpoint = None;
    if let Some(meta) = state.checkpoint {
        let mut q = shard.open_queue()?;
        let ck = shard.read_checkpoint(&mut q, meta)?;
        let entries = match &ck.bounded {
            Some(b) => b.entries + ck.keyed.len() as u64,
            None => (ck.entries.len() + ck.keyed.len()) as u64,
        };
        checkpoint = Some((meta.generation, entries));
        if !bounded {
            *shard.checkpoint.lock() = Some(meta);
        }
    }
    shard.replay()?;
    compare_index(&shard, &newest, keys)?;
    Ok(HashReport {
        segments: reports,
        records,
        stores,
        keys,
        checkpoint,
        bounded,
        shard: state.membership.map(|m| (m.index, m.count)),
    })
}

/// Stage 4: the index `shard` rebuilt holds exactly the live keys of `newest`, each at its
/// newest record.
fn compare_index(
    shard: &Shard,
    newest: &HashMap<Vec<u8>, (u64, Kind, usize, u64)>,
    keys: u64,
) -> Result<()> {
    let inconsistent = |what: String, offset: u64| Error::Corruption {
        what: format!("index inconsistent with the record log: {what}"),
        offset,
    };
    let indexed = shard.index.read().len() as u64;
    if indexed != keys {
        return Err(inconsistent(
            format!("the index holds {indexed} keys where the log's newest records hold {keys}"),
            0,
        ));
    }
    for (key, &(seq, kind, ..)) in newest {
        let probe = shard.index.read().probe(shard.digest(key), key)?;
        let at: Option<Location> = match probe {
            Probe::Exact(loc) | Probe::Candidate(loc) => Some(loc),
            Probe::Absent => None,
        };
        let found = match at {
            Some(loc) => {
                let rec = shard.read_record(loc)?;
                let r = Record::decode(&rec)
                    .ok_or_else(|| shard.corruption(loc, "an indexed record does not parse"))?;
                (r.key == key.as_slice()).then_some((loc, r.seq, r.kind))
            }
            None => None,
        };
        match (kind, found) {
            (Kind::Store, Some((_, s, Kind::Store))) if s == seq => {}
            (Kind::Delete, None) => {}
            (_, Some((loc, s, k))) => {
                return Err(inconsistent(
                    format!(
                        "a key's index entry names its record of sequence {s} ({k:?}) where its \
                         newest is {seq} ({kind:?})"
                    ),
                    shard.segment(loc.segment).page_address(loc.page),
                ));
            }
            (Kind::Store, None) => {
                return Err(inconsistent(
                    format!("a live key (newest record sequence {seq}) is not indexed"),
                    0,
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{HashStore, StoreMode};

    /// A store whose index has a checkpoint, and where that checkpoint lies in the volume
    /// file.
    fn store_with_checkpoint(dir: &Path) -> std::ops::Range<u64> {
        let opts = HashOptions {
            segment_bytes: 256 << 10,
            checkpoint_bytes: 256 << 10,
            checkpoint_log_ratio: 0,
            ..HashOptions::default()
        };
        let store = HashStore::open(dir, opts).unwrap();
        for i in 0..200u32 {
            let key = format!("key{i:05}");
            store.store(key.as_bytes(), &[b'v'; 3000], StoreMode::Overwrite).unwrap();
        }
        store.close();
        let opts = VolumeOptions { create_if_blank: false, ..VolumeOptions::default() };
        let opened = Volume::open_path_read_only(dir, &opts, &FileOptions::default()).unwrap();
        let meta = crate::meta::decode(&opened.versions).unwrap().checkpoint.expect("one");
        opened.volume.extent_range(meta.extent)
    }

    #[test]
    fn a_damaged_index_checkpoint_fails_the_check() {
        let dir = tempfile::tempdir().unwrap();
        let at = store_with_checkpoint(dir.path());
        let report = check_store(dir.path()).unwrap();
        assert_eq!(report.keys, 200);
        assert!(report.checkpoint.is_some_and(|(_, n)| n > 0), "{report:?}");
        let file = dir.path().join(shale_space::VOLUME_FILE_NAME);
        let mut bytes = std::fs::read(&file).unwrap();
        bytes[at.start as usize + 40] ^= 0x01;
        std::fs::write(&file, &bytes).unwrap();
        let err = check_store(dir.path()).unwrap_err().to_string();
        assert!(err.contains("index checkpoint"), "{err}");
    }

    #[test]
    fn a_store_in_use_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = HashStore::open(dir.path(), HashOptions::default()).unwrap();
        let r = check_store(dir.path());
        assert!(matches!(r, Err(Error::Space(shale_space::Error::InUse(_)))), "{r:?}");
        drop(store);
        assert_eq!(check_store(dir.path()).unwrap().keys, 0);
    }
}
