//! `Db::check`: verify every checksum of a store and the LSM invariants, naming what is wrong.

use std::collections::BTreeSet;

use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key;
use crate::version::{HandleIter, SstHandle, Version};

/// What a check read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
// Reports grow fields: users read them, only the engine makes them.
#[non_exhaustive]
pub struct CheckReport {
    /// SSTs read end to end.
    pub ssts: usize,
    /// Entries read.
    pub entries: u64,
    /// Range tombstones read (their blocks read again from the device and checked).
    pub range_tombstones: u64,
    /// Slots live in the volume.
    pub live_slots: u32,
}

/// Reads every SST of `version` block by block (every block checksum is verified on read; the
/// index, filter and range-deletion blocks are read again from the device, past the copies the
/// reader or the block cache keeps) and
/// checks the invariants: entries and range tombstones in order and inside their SST's
/// recorded range, levels below L0 sorted and disjoint, and the volume's live extents exactly
/// the SSTs' extents.
///
/// # Errors
/// [`Error::Corruption`] naming the first problem; the device's errors.
pub fn check_version(
    version: &Version,
    live_extents: &[shale_space::Extent],
) -> Result<CheckReport> {
    let mut report = CheckReport::default();
    let mut referenced = BTreeSet::new();
    for (level, files) in version.levels.iter().enumerate() {
        if level > 0 {
            for w in files.windows(2) {
                if !w[0].meta.is_before(&w[1].meta) {
                    return Err(Error::corruption(
                        format!("L{level}: SSTs {} and {} overlap", w[0].meta.id, w[1].meta.id),
                        0,
                    ));
                }
            }
        }
        for f in files {
            if !referenced.insert(f.meta.extent) {
                return Err(Error::corruption(
                    format!("extent {:?} referenced twice", f.meta.extent),
                    0,
                ));
            }
            let mut it = HandleIter::new(f.clone());
            it.seek_to_first();
            let mut prev: Option<Vec<u8>> = None;
            let mut entries = 0;
            while it.valid() {
                let k = it.key();
                if key::parse(k).is_none() {
                    return Err(Error::corruption(
                        format!("SST {}: entry with a bad internal key", f.meta.id),
                        0,
                    ));
                }
                if prev.as_deref().is_some_and(|p| key::compare(p, k).is_ge()) {
                    return Err(Error::corruption(
                        format!("SST {}: entries out of order", f.meta.id),
                        0,
                    ));
                }
                if key::compare(k, &f.meta.smallest).is_lt()
                    || key::compare(k, &f.meta.largest).is_gt()
                {
                    return Err(Error::corruption(
                        format!("SST {}: entry outside its recorded range", f.meta.id),
                        0,
                    ));
                }
                prev = Some(k.to_vec());
                entries += 1;
                it.next();
            }
            it.status()?;
            if entries != f.meta.entries {
                return Err(Error::corruption(
                    format!(
                        "SST {} (L{level}) holds {entries} entries, its version says {}",
                        f.meta.id, f.meta.entries
                    ),
                    0,
                ));
            }
            f.reader.verify_index_and_filter()?;
            report.range_tombstones += check_range_tombstones(f)?;
            report.ssts += 1;
            report.entries += entries;
        }
    }
    let live: BTreeSet<_> = live_extents.iter().copied().collect();
    if live != referenced {
        let orphans: Vec<_> = live.difference(&referenced).collect();
        let missing: Vec<_> = referenced.difference(&live).collect();
        return Err(Error::corruption(
            format!(
                "volume extents and SSTs differ: live but unreferenced {orphans:?}, referenced but not live {missing:?}"
            ),
            0,
        ));
    }
    report.live_slots = live_extents.iter().map(|e| e.count).sum();
    Ok(report)
}

/// Reads an SST's range-deletion block again and checks every tombstone lies inside the SST's
/// recorded bounds. Returns the number of tombstones.
fn check_range_tombstones(f: &SstHandle) -> Result<u64> {
    let count = f.reader.verify_range_del_block()?;
    for t in f.reader.range_tombstones() {
        let (start, end) = (key::range_bound(&t.start), key::range_bound(&t.end));
        if key::compare(&start, &f.meta.smallest).is_lt()
            || key::compare(&end, &f.meta.largest).is_gt()
        {
            return Err(Error::corruption(
                format!("SST {}: range tombstone outside its recorded range", f.meta.id),
                0,
            ));
        }
    }
    Ok(count)
}
