//! The write-ahead log, in SpanDB's format, in the volume's WAL area.
//!
//! ```text
//! WAL area: | meta copy A | meta copy B | group 0: pages 0..P | group 1 | ... | group G-1 |
//! ```
//! One log group per memtable: the active memtable's batches are appended to its group's
//! pages; when the memtable is sealed its group is sealed too (the metadata records how many
//! pages it holds) and it is recycled, without zeroing, once the memtable's flush has
//! committed. Every page carries the LTN of the memtable that wrote it, so recovery stops at
//! the first page of another (older) generation.
//!
//! Write path of one append, in order:
//! 1. Pack the records into fragments on pages, continuing the last partial page unless it
//!    holds synced data (a page with synced data is never rewritten: a torn rewrite would
//!    destroy acknowledged writes).
//! 2. Submit every page write at once (several in flight) and wait for all of them, so the
//!    pages of one append become visible together and an append is acknowledged only after
//!    its pages and all earlier pages completed: no holes.
//! 3. For a sync append, make everything durable: durable writes if every earlier page is
//!    already durable, else plain writes followed by a flush. On a file, pages never written
//!    get zeros first (4 MiB ahead, one plain write): a durable write into allocated but
//!    unwritten storage also changes file system metadata, and costs twice as much.
//!
//! Deferred groups. With a WAL tail ([`tail`]), a group starts deferred (unless the group
//! before it took a sync append: a store that syncs now and then writes its pages as they
//! fill, so that a sync never waits for a whole memtable's records): appends without sync
//! only copy their records into the tail, and none of the group's pages is packed or
//! written. Most groups stay so until their memtable's flush commits; then the records leave
//! the tail and never reach the device, as RocksDB's unsynced log files are deleted before
//! the kernel writes their pages back (issue #14: shale's storage writes were 1.8-2.2x
//! RocksDB's, a WAL page write for every record). A deferred group is written out, its pages
//! packed from the tail's records:
//! - by a sync append or [`WalWriter::sync`]: every deferred group, oldest first, sealed ones
//!   made durable and their end recorded, so the sync covers every earlier write (P1);
//! - by an append that does not fit the tail: the oldest deferred group only;
//! - by an append too big for the tail: every deferred group, so pages reach the device in log
//!   order.
//!
//! Once written out, the active group carries on as below. A deferred group is sealed with no
//! durable page (end 0). Every group older than a deferred one is deferred as well or wholly
//! written, so after a power cut (the tail gone) the device holds a prefix of the log (P3), and
//! after a crash of the process the tail holds what the device lacks (P2); recovery replays
//! the device's groups, then the tail's records that continue their sequence numbers.
//!
//! A sync append whose writer has nothing pending may instead be packed for the pipeline
//! (`WalWriter::stage_sync`, [`pipeline`]): its page writes are made on a logger queue,
//! outside the WAL lock, beside other groups' writes, and acknowledged in order ([`turns`]).
//!
//! Disk space. A new volume file leaves its WAL area a hole (`Volume::open_path`), so the
//! area takes disk space only for what the WAL holds, as RocksDB's live log files do:
//! - the metadata pages are allocated before their first write, and the active group 4 MiB
//!   at a time ahead of its page writes (`Device::allocate_range`), so O_DIRECT writes land
//!   in allocated storage and a full file system fails an allocation before a write;
//! - when a group is freed (its generation's flush committed, so recovery never reads it
//!   again) its storage is released (`Device::release_range`), except for one free group
//!   kept allocated for the next group to start in ([`FREE_GROUPS_KEPT_ALLOCATED`]), and of
//!   that one only the pages sync appends wrote, at most its first 16 MiB
//!   ([`KEPT_GROUP_PAGES_MAX`]): a store written without sync keeps no freed pages; the
//!   release is made on the writer's release thread (`wal/release.rs`), off the write path;
//! - at open, once the recovered groups are flushed and committed, every group is free and
//!   released whole, which also shrinks volumes whose whole WAL area was allocated.
//!
//! A released group reads as zeros (a hole) or, on a block device, as its old pages: zeros
//! are no valid page, and old pages carry an older LTN, so either way recovery reads no
//! record from it. A release is a metadata change a crash may undo; that brings back old
//! pages of a generation already flushed, which recovery skips as before.

pub mod meta;
/// The WAL's page format is the shared log page of the space layer.
pub use shale_space::log_page as page;
/// The parallel WAL's pipeline and its in-order acknowledgement are the page log's.
pub use shale_space::page_log::{pipeline, turns};
mod recovery;
mod release;
pub mod tail;
mod writer;

pub use pipeline::{LogPipeline, Logger, PipelineStats};
pub use recovery::{RecoveredGroup, meta_generation, recover};
pub use release::WalReleases;
pub use tail::{MemoryTail, TailLog, WalTail};
pub use writer::{AppendError, FREE_GROUPS_KEPT_ALLOCATED, KEPT_GROUP_PAGES_MAX, WalWriter};

use crate::error::{Error, Result};
use page::PAGE_BYTES;

/// Where the WAL's pages lie.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalLayout {
    /// Byte offset of the WAL area on the device.
    pub area_offset: u64,
    /// Size of the WAL area.
    pub area_bytes: u64,
    /// Number of log groups.
    pub groups: u32,
    /// Pages in each group.
    pub pages_per_group: u32,
}

/// Pages before the first group: the two metadata copies.
const META_PAGES: u64 = 2;

impl WalLayout {
    /// Splits a WAL area into `groups` equal groups.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the area cannot hold that many groups of at least 2 pages.
    pub fn new(area_offset: u64, area_bytes: u64, groups: u32) -> Result<WalLayout> {
        let pages = area_bytes / PAGE_BYTES as u64;
        let per_group = pages.saturating_sub(META_PAGES) / u64::from(groups.max(1));
        if groups == 0 || groups > meta::GROUPS_MAX || per_group < 2 {
            return Err(Error::InvalidArgument(format!(
                "a WAL area of {area_bytes} bytes cannot hold {groups} log groups of 2 or more \
                 4 KiB pages (at most {} groups)",
                meta::GROUPS_MAX
            )));
        }
        Ok(WalLayout {
            area_offset,
            area_bytes,
            groups,
            pages_per_group: per_group.min(u64::from(u32::MAX)) as u32,
        })
    }

    /// Byte offset of metadata copy `copy` (0 or 1).
    pub fn meta_offset(&self, copy: u64) -> u64 {
        self.area_offset + copy * PAGE_BYTES as u64
    }

    /// Byte offset of page `index` of group `group`.
    pub fn page_offset(&self, group: u32, index: u32) -> u64 {
        let page =
            META_PAGES + u64::from(group) * u64::from(self.pages_per_group) + u64::from(index);
        self.area_offset + page * PAGE_BYTES as u64
    }

    /// Bytes of one group.
    pub fn group_bytes(&self) -> u64 {
        u64::from(self.pages_per_group) * PAGE_BYTES as u64
    }
}
