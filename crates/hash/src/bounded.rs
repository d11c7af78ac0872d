//! Opening a bounded store's index (`IndexMode::Bounded`): whether its pages on the volume
//! can be trusted, and the session record that says they are about to change.
//!
//! The rule: the table's pages are trusted only when the version log's newest word on them
//! is a bounded checkpoint (kind 5 in `meta.rs`), written at close after every dirty page was
//! written back and the device flushed. Each open then commits a session record (kind 6)
//! before it changes a page, so after a crash the newest word is a session and the pages,
//! which were written in place and may be torn or half-updated, are not read: the open
//! builds a fresh table from the record log (every segment from its first page), as an
//! in-memory open with no checkpoint does. The log is the durable index state, which is why
//! garbage collection's rule (free a segment only once the copies that replace its records
//! are durable in the log) holds for the bounded mode unchanged.

use crate::checkpoint::BoundedAt;
use crate::error::{Error, Result};
use crate::index::Index;
use crate::meta::{self, BoundedMeta, State};
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

/// Sets up the bounded index of `shard`; returns whether recovery may start from the
/// checkpoint (the pages were clean) or must read the whole log.
///
/// # Errors
/// Damage to the checkpoint, or the space layer's error.
pub fn open_index(shard: &Shard, state: &State, generation: u64) -> Result<bool> {
    let frames = shard.opts.index_cache_pages();
    let clean = match (state.bounded, state.checkpoint) {
        (Some(BoundedMeta { clean: true, table: Some(extent) }), Some(ck)) => Some((extent, ck)),
        _ => None,
    };
    let trusted = match clean {
        Some((extent, ck_meta)) => {
            let mut queue = shard.open_queue()?;
            let ck = shard.read_checkpoint(&mut queue, ck_meta)?;
            let BoundedAt { table_generation, buckets, entries } =
                ck.bounded.ok_or_else(|| Error::Corruption {
                    what: "a bounded store's checkpoint without its table".into(),
                    offset: shard.volume().extent_range(ck_meta.extent).start,
                })?;
            // Pages name segments by table slot: keep the slots the checkpoint saw.
            shard.place_segments(&ck.segments);
            let at = TableAt { generation: table_generation, extent, buckets, entries };
            *shard.index.write() = Index::paged(PagedTable::load(shard.volume_arc(), frames, at)?);
            true
        }
        None => {
            let table = PagedTable::create(shard.volume_arc(), frames, generation)?;
            if let Some(old) = state.bounded.and_then(|b| b.table) {
                table.retire(old);
            }
            *shard.index.write() = Index::paged(table);
            false
        }
    };
    let table = state.bounded.and_then(|b| b.table);
    *shard.bounded.lock() = Some(BoundedMeta { clean: false, table });
    let edit = shale_space::Edit {
        engine: meta::encode_bounded_session(),
        ..shale_space::Edit::default()
    };
    let mut full = || {
        meta::encode_base(
            &shard.segment_metas(),
            *shard.checkpoint.lock(),
            *shard.membership.lock(),
            *shard.bounded.lock(),
        )
    };
    shard.volume().commit(&edit, &mut full)?;
    Ok(trusted)
}
