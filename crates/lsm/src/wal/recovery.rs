//! Reading the WAL back after a crash or a clean close.
//!
//! 1. Take the metadata copy with the highest generation that is valid (a torn metadata write
//!    leaves the other copy). Both pages all zero: a WAL no generation has used.
//! 2. Replay every group that is not free and whose LTN is at least the oldest unflushed LTN
//!    the engine names, in LTN order.
//! 3. In each group read pages 0, 1, ... while they carry the group's LTN and their own index
//!    ("colouring": a stale page of an older generation ends the log) and name the checksum of
//!    the page before them (a page whose rewrite was lost is a stale version: the log ends after
//!    it, since a later page follows its newer version).
//! 4. Decide whether an invalid page is a torn tail or damage: in a sealed group every page
//!    below the recorded end was durable, and in the active group every page below the largest
//!    `synced_through` of any valid page after it was durable; an invalid page there is
//!    Corruption (P4), anywhere else the end of the log.
//! 5. Reassemble records from fragments; a record cut off by the end of an active group's log
//!    was never acknowledged and is dropped.

use std::ops::ControlFlow;

use shale_io::{AlignedBuf, Queue, QueueExt};
use shale_space::page_log::{Pages, ScanError, scan};

use super::WalLayout;
use super::meta::{GroupState, WalMeta};
use super::page::PAGE_BYTES;
use crate::error::{Error, Result};

/// The records of one log group, in append order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveredGroup {
    /// Which group.
    pub group: u32,
    /// The generation (memtable) that wrote it.
    pub ltn: u64,
    /// Whether the group was sealed (its memtable was immutable, waiting for a flush).
    pub sealed: bool,
    /// Complete records.
    pub records: Vec<Vec<u8>>,
    /// Valid pages read.
    pub pages: u32,
}

/// Reads the metadata and the live groups.
///
/// # Errors
/// [`Error::Corruption`] for damaged metadata or damage inside the durable part of a group;
/// the device's errors.
pub fn recover(
    layout: &WalLayout,
    queue: &mut dyn Queue,
    oldest_unflushed_ltn: u64,
) -> Result<(WalMeta, Vec<RecoveredGroup>)> {
    let meta = read_meta(layout, queue)?;
    // Read with the geometry the metadata records: the options that size the WAL may have
    // changed since it was written (the engine re-lays the WAL out once the replay is flushed).
    let recorded = WalLayout {
        area_offset: layout.area_offset,
        area_bytes: layout.area_bytes,
        groups: meta.groups.len() as u32,
        pages_per_group: meta.pages_per_group,
    };
    let layout = &recorded;
    let mut live: Vec<(u32, u64, GroupState, u32)> = meta
        .groups
        .iter()
        .enumerate()
        .filter(|(_, g)| g.state != GroupState::Free && g.ltn >= oldest_unflushed_ltn)
        .map(|(i, g)| (i as u32, g.ltn, g.state, g.end))
        .collect();
    live.sort_by_key(|&(_, ltn, _, _)| ltn);
    let mut groups = Vec::with_capacity(live.len());
    for (group, ltn, state, end) in live {
        let sealed = state == GroupState::Sealed;
        let durable_end = if sealed { Some(end) } else { None };
        let mut pages = GroupPages::new(layout, group, queue);
        let read = read_group(layout, group, ltn, &mut pages, durable_end)?;
        groups.push(RecoveredGroup { group, ltn, sealed, records: read.0, pages: read.1 });
    }
    Ok((meta, groups))
}

/// The highest generation of the metadata copies the WAL area holds, whatever they describe
/// (0 where none decodes): a store that takes the area over, whose WAL that metadata is
/// not, writes its own from past it, so that its copy always wins over the old one.
///
/// # Errors
/// The device's errors.
pub fn meta_generation(layout: &WalLayout, queue: &mut dyn Queue) -> Result<u64> {
    let both = queue.read_at(layout.meta_offset(0), 2 * PAGE_BYTES)?;
    let copies = [&both[..PAGE_BYTES], &both[PAGE_BYTES..]];
    Ok(copies.iter().filter_map(|c| WalMeta::decode(c)).map(|m| m.generation).max().unwrap_or(0))
}

fn read_meta(layout: &WalLayout, queue: &mut dyn Queue) -> Result<WalMeta> {
    let both = queue.read_at(layout.meta_offset(0), 2 * PAGE_BYTES)?;
    let copies = [&both[..PAGE_BYTES], &both[PAGE_BYTES..]];
    let best = copies.iter().filter_map(|c| WalMeta::decode(c)).max_by_key(|m| m.generation);
    let area_pages = layout.area_bytes / PAGE_BYTES as u64;
    match best {
        Some(m) if 2 + m.groups.len() as u64 * u64::from(m.pages_per_group) <= area_pages => Ok(m),
        Some(m) => Err(Error::corruption(
            format!(
                "WAL metadata describes {} groups of {} pages, more than the {area_pages}-page \
                 WAL area holds",
                m.groups.len(),
                m.pages_per_group
            ),
            layout.meta_offset(0),
        )),
        None if both.iter().all(|&b| b == 0) => {
            Ok(WalMeta::empty(layout.groups, layout.pages_per_group))
        }
        None => Err(Error::corruption("WAL metadata page, both copies", layout.meta_offset(0))),
    }
}

/// Pages of a group read from the device at a time: 1 MiB. Test builds (the `failpoints`
/// feature, which only the tests turn on) read 4, so that the crash enumeration's small
/// groups span several chunks and a torn tail is found across chunk boundaries.
const CHUNK_PAGES: u32 = if cfg!(feature = "failpoints") { 4 } else { 256 };

/// The pages of one group, read a chunk ([`CHUNK_PAGES`]) at a time as they are asked for.
/// Reading the whole group into one buffer held 1.5 times the write buffer (96 MiB by
/// default) for every open, even of an empty group: a store reopened only to read peaked at
/// 120 MiB of RSS against RocksDB's 14 (issue #14, memory of the reopened processes).
struct GroupPages<'a> {
    layout: &'a WalLayout,
    group: u32,
    queue: &'a mut dyn Queue,
    /// The chunk read last and its first page.
    first: u32,
    chunk: Option<AlignedBuf>,
}

impl<'a> GroupPages<'a> {
    fn new(layout: &'a WalLayout, group: u32, queue: &'a mut dyn Queue) -> GroupPages<'a> {
        GroupPages { layout, group, queue, first: 0, chunk: None }
    }

    /// Page `index` of the group (below `pages_per_group`).
    fn page(&mut self, index: u32) -> Result<&[u8]> {
        let held = self.chunk.as_ref().is_some_and(|c| {
            index >= self.first && ((index - self.first) as usize) < c.len() / PAGE_BYTES
        });
        if !held {
            let first = index - index % CHUNK_PAGES;
            let pages = CHUNK_PAGES.min(self.layout.pages_per_group - first);
            let offset = self.layout.page_offset(self.group, first);
            self.chunk = Some(self.queue.read_at(offset, pages as usize * PAGE_BYTES)?);
            self.first = first;
        }
        let chunk = self.chunk.as_ref().expect("read above");
        let at = (index - self.first) as usize * PAGE_BYTES;
        Ok(&chunk[at..at + PAGE_BYTES])
    }
}

impl Pages for GroupPages<'_> {
    type Error = Error;

    fn count(&self) -> u32 {
        self.layout.pages_per_group
    }

    fn page(&mut self, index: u32) -> Result<&[u8]> {
        GroupPages::page(self, index)
    }
}

/// Reads one group's records with the page log's recovery scan (rules 3-5 of the module
/// comment); returns them and the number of valid pages.
fn read_group(
    layout: &WalLayout,
    group: u32,
    ltn: u64,
    pages: &mut GroupPages<'_>,
    sealed_end: Option<u32>,
) -> Result<(Vec<Vec<u8>>, u32)> {
    let offset = |i: u32| layout.page_offset(group, i);
    let mut records = Vec::new();
    let end = scan::scan(pages, ltn, sealed_end, |r| {
        records.push(r.bytes);
        ControlFlow::Continue(())
    })
    .map_err(|e| match e {
        ScanError::Source(e) => e,
        ScanError::OutOfOrder { page, kind } => Error::corruption(
            format!("WAL page {page} of group {group}: fragment {kind:?} out of order"),
            offset(page),
        ),
        ScanError::DurableInvalid { page, why } => Error::corruption(
            format!(
                "WAL page {page} of group {group} (LTN {ltn}) was durable but is invalid ({why})"
            ),
            offset(page),
        ),
    })?;
    // A group sealed with no durable page (a deferred group, `wal/writer.rs`) may be cut
    // anywhere by a crash while it is written out: only an end that was durable is checked.
    if end.cut_record && sealed_end.is_some_and(|e| e > 0 && end.pages >= e) {
        return Err(Error::corruption(
            format!("WAL group {group} (sealed) ends inside a record"),
            offset(end.pages.saturating_sub(1)),
        ));
    }
    Ok((records, end.pages))
}
