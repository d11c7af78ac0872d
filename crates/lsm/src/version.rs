//! The set of live SSTs per level, as immutable snapshots shared by readers.
//!
//! A version is replaced whole (copy-on-write) by each flush or compaction; readers and
//! iterators keep the `Arc<Version>` they started with, so the SSTs they use stay readable.
//! An SST dropped by a compaction is marked obsolete, and its extent goes back to the volume
//! only when the last handle on it is dropped (the commit held it, see `Edit::hold_removed`),
//! after its blocks left the block cache and its pages the page cache: on the pool's release
//! thread when the last handle was a caller's (`sst/release.rs`).

use std::cmp::Ordering;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};

use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::iter::{BlockRead, InternalIterator};
use crate::key;
use crate::sst::{QueuePool, SstIter, SstReader};
use crate::version_edit::{LEVELS_MAX, SstMeta, VersionEdit};

/// Number of levels.
pub const LEVELS: usize = 7;
const _: () = assert!(LEVELS <= LEVELS_MAX);

/// An open SST.
pub struct SstHandle {
    /// What the version records of it.
    pub meta: SstMeta,
    /// Its reader.
    pub reader: SstReader,
    obsolete: AtomicBool,
    /// How its extent is read; the extent goes back to the pool's volume on last drop.
    pool: Arc<QueuePool>,
    cache: Arc<BlockCache>,
}

impl SstHandle {
    /// Wraps an open reader of an SST in `pool`'s volume.
    pub fn new(
        meta: SstMeta,
        reader: SstReader,
        pool: Arc<QueuePool>,
        cache: Arc<BlockCache>,
    ) -> SstHandle {
        SstHandle { meta, reader, obsolete: AtomicBool::new(false), pool, cache }
    }

    /// The volume's byte offset of `sst_offset` in this SST (for batched reads of its
    /// blocks through the pool, [`QueuePool::read_many`]).
    pub fn volume_offset(&self, sst_offset: u64) -> u64 {
        self.pool.volume().extent_range(self.meta.extent).start + sst_offset
    }

    /// Marks the SST as dropped by a committed edit: its extent is released on last drop.
    pub fn mark_obsolete(&self) {
        // Counted held before the flag is up: the caller's handle keeps the drop (and the
        // release it counts back) after both.
        if !self.obsolete.load(AtomicOrdering::Acquire) {
            self.pool.hold_sst(self.meta.extent);
            self.obsolete.store(true, AtomicOrdering::Release);
        }
    }

    fn user_range_contains(&self, user_key: &[u8]) -> bool {
        self.meta.may_contain_user_key(user_key)
    }
}

impl Drop for SstHandle {
    fn drop(&mut self) {
        if self.obsolete.load(AtomicOrdering::Acquire) {
            // Its blocks and pages go, then its extent; not on a caller's thread, which
            // would pay for the page drop in its get or scan (`sst/release.rs`).
            self.pool.release_sst(self.meta.id, self.meta.extent, &self.cache);
        }
    }
}

/// Live SSTs per level: L0 newest first (by id), deeper levels sorted by key, disjoint.
#[derive(Clone, Default)]
pub struct Version {
    /// The levels.
    pub levels: Vec<Vec<Arc<SstHandle>>>,
}

impl Version {
    /// A version with no SST.
    pub fn empty() -> Version {
        Version { levels: vec![Vec::new(); LEVELS] }
    }

    /// Bytes of the index and filter blocks its SST readers hold outside the block cache
    /// (`Options::cache_index_and_filter_blocks` unset): memory that grows with the data.
    pub fn held_index_and_filter_bytes(&self) -> u64 {
        self.levels.iter().flatten().map(|h| h.reader.held_bytes() as u64).sum()
    }

    /// The version after `edit`; `open` opens the readers of added SSTs.
    ///
    /// # Errors
    /// [`Error::Corruption`] if the edit removes an SST that is not there or breaks the level
    /// order; the errors of `open`.
    pub fn apply(
        &self,
        edit: &VersionEdit,
        open: &mut dyn FnMut(&SstMeta) -> Result<Arc<SstHandle>>,
    ) -> Result<(Version, Vec<Arc<SstHandle>>)> {
        let mut levels = self.levels.clone();
        let mut removed = Vec::new();
        for &(level, id) in &edit.removed {
            let files = levels.get_mut(usize::from(level)).ok_or_else(|| bad_edit("level"))?;
            let at = files.iter().position(|f| f.meta.id == id).ok_or_else(|| {
                Error::corruption(
                    format!("version edit removes SST {id}, which L{level} does not hold"),
                    0,
                )
            })?;
            removed.push(files.remove(at));
        }
        for (level, meta) in &edit.added {
            let level = usize::from(*level);
            if level >= LEVELS {
                return Err(bad_edit("level"));
            }
            // A trivial move re-adds an SST this edit removed: keep its open handle.
            let handle = match removed.iter().position(|h| h.meta.id == meta.id) {
                Some(i) => removed.remove(i),
                None => open(meta)?,
            };
            levels[level].push(handle);
        }
        levels[0].sort_by_key(|f| std::cmp::Reverse(f.meta.id));
        for files in levels.iter_mut().skip(1) {
            files.sort_by(|a, b| key::compare(&a.meta.smallest, &b.meta.smallest));
            let overlapping = files.windows(2).any(|w| !w[0].meta.is_before(&w[1].meta));
            if overlapping {
                return Err(Error::corruption(
                    "version edit leaves overlapping SSTs in a level",
                    0,
                ));
            }
        }
        Ok((Version { levels }, removed))
    }

    /// The complete state as one edit that adds every SST (the engine bytes of a base version).
    pub fn as_base_edit(
        &self,
        last_seq: u64,
        oldest_unflushed_ltn: u64,
        next_ltn: u64,
    ) -> VersionEdit {
        let added = self
            .levels
            .iter()
            .enumerate()
            .flat_map(|(level, files)| files.iter().map(move |f| (level as u8, f.meta.clone())))
            .collect();
        VersionEdit { last_seq, oldest_unflushed_ltn, next_ltn, removed: Vec::new(), added }
    }

    /// Total bytes of a level.
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.levels[level].iter().map(|f| f.meta.bytes).sum()
    }

    /// SSTs that may hold `user_key` (an entry of it or a range tombstone over it), in the
    /// order a read must consult them.
    /// Lazy, and borrowed from the version: a point read stops at the first SST that
    /// answers, and clones no handle (a clone is an atomic write to a count that every reader
    /// thread shares).
    pub fn candidates<'a>(
        &'a self,
        user_key: &'a [u8],
    ) -> impl Iterator<Item = &'a Arc<SstHandle>> + 'a {
        let l0 = self.levels[0].iter().filter(move |f| f.user_range_contains(user_key));
        // The first SST of a level whose bounds reach the key; the levels are disjoint.
        let bound = key::range_bound(user_key);
        let deeper = self.levels[1..].iter().filter_map(move |files| {
            let i = files.partition_point(|f| key::compare(&f.meta.largest, &bound).is_le());
            files.get(i).filter(|f| f.user_range_contains(user_key))
        });
        l0.chain(deeper)
    }

    /// SSTs of `level` whose user-key range overlaps `[smallest, largest]` (user keys).
    pub fn overlapping(
        &self,
        level: usize,
        smallest: &[u8],
        largest: &[u8],
    ) -> Vec<Arc<SstHandle>> {
        self.levels[level]
            .iter()
            .filter(|f| f.meta.overlaps_user_keys(smallest, largest))
            .cloned()
            .collect()
    }

    /// Whether an SST of a level below `level` may hold an entry of a user key in
    /// `[start, end)` or a tombstone over one: whether a tombstone over that range still
    /// hides something there.
    pub fn below_overlaps_range(&self, level: usize, start: &[u8], end: &[u8]) -> bool {
        self.levels[level + 1..].iter().flatten().any(|f| f.meta.overlaps_range(start, end))
    }

    /// Whether an SST of a level below `level` may hold an entry of `user_key` or a tombstone
    /// over it.
    pub fn below_may_contain(&self, level: usize, user_key: &[u8]) -> bool {
        self.levels[level + 1..].iter().flatten().any(|f| f.meta.may_contain_user_key(user_key))
    }

    /// Iterators over every SST: one per L0 SST, one concatenation per deeper level.
    pub fn iterators(&self) -> Vec<Box<dyn InternalIterator>> {
        let mut out: Vec<Box<dyn InternalIterator>> = Vec::new();
        for f in &self.levels[0] {
            out.push(Box::new(HandleIter::new(f.clone())));
        }
        for files in &self.levels[1..] {
            if !files.is_empty() {
                out.push(Box::new(LevelIterator::new(files.clone())));
            }
        }
        out
    }
}

fn bad_edit(what: &str) -> Error {
    Error::corruption(format!("version edit names an impossible {what}"), 0)
}

/// An SST iterator that keeps its SST's handle alive.
pub struct HandleIter {
    handle: Arc<SstHandle>,
    iter: SstIter,
}

impl HandleIter {
    /// Iterates one SST.
    pub fn new(handle: Arc<SstHandle>) -> HandleIter {
        let iter = handle.reader.iter();
        HandleIter { handle, iter }
    }

    /// Iterates one SST for a compaction, leaving the block cache as it finds it, and the
    /// page cache too with `around_page_cache`
    /// ([`SstReader::iter_for_compaction`](crate::sst::SstReader::iter_for_compaction)).
    pub fn for_compaction(handle: Arc<SstHandle>, around_page_cache: bool) -> HandleIter {
        let iter = handle.reader.iter_for_compaction(around_page_cache);
        HandleIter { handle, iter }
    }
}

impl InternalIterator for HandleIter {
    fn valid(&self) -> bool {
        self.iter.valid()
    }
    fn seek_to_first(&mut self) {
        self.iter.seek_to_first()
    }
    fn seek_to_last(&mut self) {
        self.iter.seek_to_last()
    }
    fn seek(&mut self, target: &[u8]) {
        self.iter.seek(target)
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        self.iter.seek_for_prev(target)
    }
    fn next(&mut self) {
        self.iter.next()
    }
    fn prev(&mut self) {
        self.iter.prev()
    }
    fn key(&self) -> &[u8] {
        self.iter.key()
    }
    fn value(&self) -> &[u8] {
        self.iter.value()
    }
    fn status(&self) -> Result<()> {
        self.iter.status()
    }
    fn blocks_for_seek(&self, target: &[u8], out: &mut Vec<BlockRead>) {
        push_seek_block(&self.handle, target, out);
    }
}

/// Adds the data block of `sst` that a seek to `target` would read, if the cache lacks it.
fn push_seek_block(sst: &Arc<SstHandle>, target: &[u8], out: &mut Vec<BlockRead>) {
    if let Some(block) = sst.reader.seek_block_to_read(target) {
        out.push(BlockRead { sst: sst.clone(), block });
    }
}

/// Iterates the disjoint, sorted SSTs of one level as one sequence, opening one SST at a time.
pub struct LevelIterator {
    files: Vec<Arc<SstHandle>>,
    index: usize,
    current: Option<HandleIter>,
    /// A compaction's: each SST is read as [`HandleIter::for_compaction`] reads it, around
    /// the page cache with `Some(true)`.
    compaction: Option<bool>,
}

impl LevelIterator {
    /// Iterates `files` (sorted, disjoint).
    pub fn new(files: Vec<Arc<SstHandle>>) -> LevelIterator {
        LevelIterator { files, index: 0, current: None, compaction: None }
    }

    /// Iterates `files` (sorted, disjoint) for a compaction ([`HandleIter::for_compaction`]).
    /// Why one iterator per level and not one per SST: each SST iterator of a compaction
    /// holds its readahead runs (up to two of 512 KiB) from its first block on, so an L0
    /// compaction over ten SSTs of L1 held ten SSTs' runs while it read one; in a 128 MiB
    /// memory cgroup that was 15 MB of the process (heaptrack, `shale ycsb`).
    pub fn for_compaction(files: Vec<Arc<SstHandle>>, around_page_cache: bool) -> LevelIterator {
        LevelIterator { compaction: Some(around_page_cache), ..LevelIterator::new(files) }
    }

    /// The first file whose largest key is at or after `target`: where a seek lands.
    fn seek_file(&self, target: &[u8]) -> usize {
        self.files.partition_point(|f| key::compare(&f.meta.largest, target) == Ordering::Less)
    }

    fn open(&mut self, index: usize) -> bool {
        if index >= self.files.len() {
            self.current = None;
            return false;
        }
        self.index = index;
        let file = self.files[index].clone();
        self.current = Some(match self.compaction {
            Some(around) => HandleIter::for_compaction(file, around),
            None => HandleIter::new(file),
        });
        true
    }

    fn skip_forward(&mut self) {
        while self.current.as_ref().is_some_and(|c| !c.valid() && c.status().is_ok()) {
            if !self.open(self.index + 1) {
                return;
            }
            self.current.as_mut().unwrap().seek_to_first();
        }
    }

    fn skip_backward(&mut self) {
        while self.current.as_ref().is_some_and(|c| !c.valid() && c.status().is_ok()) {
            if self.index == 0 {
                self.current = None;
                return;
            }
            self.open(self.index - 1);
            self.current.as_mut().unwrap().seek_to_last();
        }
    }
}

impl InternalIterator for LevelIterator {
    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.valid())
    }
    fn seek_to_first(&mut self) {
        if self.open(0) {
            self.current.as_mut().unwrap().seek_to_first();
            self.skip_forward();
        }
    }
    fn seek_to_last(&mut self) {
        if self.open(self.files.len().saturating_sub(1)) {
            self.current.as_mut().unwrap().seek_to_last();
            self.skip_backward();
        }
    }
    fn seek(&mut self, target: &[u8]) {
        let i = self.seek_file(target);
        if self.open(i) {
            self.current.as_mut().unwrap().seek(target);
            self.skip_forward();
        }
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        let i = self
            .files
            .partition_point(|f| key::compare(&f.meta.smallest, target) != Ordering::Greater);
        if i == 0 {
            self.current = None;
            return;
        }
        self.open(i - 1);
        self.current.as_mut().unwrap().seek_for_prev(target);
        self.skip_backward();
    }
    fn next(&mut self) {
        self.current.as_mut().expect("next on an invalid iterator").next();
        self.skip_forward();
    }
    fn prev(&mut self) {
        self.current.as_mut().expect("prev on an invalid iterator").prev();
        self.skip_backward();
    }
    fn key(&self) -> &[u8] {
        self.current.as_ref().expect("key on an invalid iterator").key()
    }
    fn value(&self) -> &[u8] {
        self.current.as_ref().expect("value on an invalid iterator").value()
    }
    fn status(&self) -> Result<()> {
        self.current.as_ref().map_or(Ok(()), |c| c.status())
    }
    fn blocks_for_seek(&self, target: &[u8], out: &mut Vec<BlockRead>) {
        if let Some(sst) = self.files.get(self.seek_file(target)) {
            push_seek_block(sst, target, out);
        }
    }
}
