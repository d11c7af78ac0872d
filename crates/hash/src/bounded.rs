//! Opening a bounded store's index (`IndexMode::Bounded`): the mode check, and the working
//! table made from the newest checkpoint's snapshot.
//!
//! The rule: the version log names only *snapshots*, tables written whole and flushed before
//! a checkpoint names them and never written again. The store works on a table of its own
//! that nothing names (its pages written in place as the cache evicts them, so possibly torn
//! by a crash, which forgets its extent). An open copies the newest snapshot into a new
//! working table, keeping the entries whose segment is still live (renamed to this open's
//! table slots) and dropping those naming a segment collected since, whose still-needed
//! records were copied after the checkpoint; recovery then replays the log written after the
//! checkpoint into it, as an in-memory open replays after its checkpoint. The log after the
//! checkpoint is the durable index state between checkpoints, which is why garbage
//! collection's rule (free a segment only once the copies that replace its records are
//! durable in the log) holds for the bounded mode unchanged.

use std::sync::atomic::Ordering;

use crate::checkpoint::BoundedAt;
use crate::error::{Error, Result};
use crate::index::{Index, Location};
use crate::meta::{self, State};
use crate::options::IndexMode;
use crate::paged_table::{PagedTable, TableAt};
use crate::shard::Shard;

/// Refuses to open a store in the other index mode than the one it was made with.
///
/// # Errors
/// [`Error::InvalidArgument`] saying which mode the store needs.
pub fn check_mode(state: &State, mode: IndexMode) -> Result<()> {
    let holds_data = !state.segments.is_empty() || state.checkpoint.is_some();
    match (mode, state.bounded) {
        (IndexMode::InMemory, Some(_)) => Err(Error::InvalidArgument(
            "this store keeps its index in pages on the volume: open it with \
             IndexMode::Bounded"
                .into(),
        )),
        (IndexMode::Bounded { .. }, None) if holds_data => Err(Error::InvalidArgument(
            "this store keeps its index in memory: open it with IndexMode::InMemory".into(),
        )),
        _ => Ok(()),
    }
}

/// Sets up the bounded index of `shard` before recovery replays the log after the
/// checkpoint: a working table copied from the checkpoint's snapshot, or an empty one (a
/// store with no checkpoint yet, which commits that it is bounded first).
///
/// # Errors
/// Damage to the checkpoint or the snapshot ([`Error::Corruption`]), or the space layer's
/// error.
pub fn open_index(shard: &Shard, state: &State, generation: u64) -> Result<()> {
    let frames = shard.opts.index_cache_pages();
    let snapshot = state.bounded.and_then(|b| b.snapshot);
    let table = match (snapshot, state.checkpoint) {
        (Some(extent), Some(ck_meta)) => {
            let mut queue = shard.open_queue()?;
            let ck = shard.read_checkpoint(&mut queue, ck_meta)?;
            let BoundedAt { table_generation, buckets, entries } =
                ck.bounded.ok_or_else(|| Error::Corruption {
                    what: "a bounded store's checkpoint without its snapshot".into(),
                    offset: shard.volume().extent_range(ck_meta.extent).start,
                })?;
            // The checkpoint's table slots, by generation, to this open's.
            let now = shard.segments();
            let slot_now: Vec<Option<u32>> = {
                let len = ck.segments.iter().map(|s| s.slot as usize + 1).max().unwrap_or(0);
                let mut v = vec![None; len];
                for s in &ck.segments {
                    v[s.slot as usize] = now
                        .iter()
                        .find(|(_, seg)| seg.generation == s.generation)
                        .map(|(slot, _)| *slot);
                }
                v
            };
            let mut remap = |packed: u64| {
                let mut loc = Location::unpack(packed);
                loc.segment = (*slot_now.get(loc.segment as usize)?)?;
                Some(loc.pack())
            };
            let at = TableAt { generation: table_generation, extent, buckets, entries };
            let t = PagedTable::from_snapshot(shard.volume_arc(), frames, at, &mut remap)?;
            shard.counters.checkpoint_entries.fetch_add(t.len(), Ordering::Relaxed);
            t
        }
        (None, _) => {
            if state.bounded.is_none() {
                commit_made(shard)?;
            }
            PagedTable::create(shard.volume_arc(), frames, generation)?
        }
        (Some(extent), None) => {
            return Err(Error::Corruption {
                what: "a bounded index snapshot with no checkpoint".into(),
                offset: shard.volume().extent_range(extent).start,
            });
        }
    };
    *shard.bounded.lock() = Some(meta::BoundedMeta { snapshot });
    *shard.index.write() = Index::paged(table);
    Ok(())
}

/// Commits that the store is a bounded one, so an open in memory mode refuses it even
/// before its first checkpoint.
fn commit_made(shard: &Shard) -> Result<()> {
    let edit =
        shale_space::Edit { engine: meta::encode_bounded_made(), ..shale_space::Edit::default() };
    let bounded = Some(meta::BoundedMeta { snapshot: None });
    let mut full = || {
        meta::encode_base(
            &shard.segment_metas(),
            *shard.checkpoint.lock(),
            *shard.membership.lock(),
            bounded,
        )
    };
    shard.volume().commit(&edit, &mut full)?;
    Ok(())
}
