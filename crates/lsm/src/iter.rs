//! The iterator over internal keys that memtables, SSTs and merges all implement.

use crate::error::Result;

/// A cursor over entries sorted by internal key ([`crate::key::compare`]).
///
/// Positioning calls never fail; an SST iterator that hits an I/O error or damage becomes
/// invalid and reports the error from [`InternalIterator::status`]. Callers check `status`
/// whenever `valid` turns false.
pub trait InternalIterator: Send {
    /// Whether the cursor is on an entry.
    fn valid(&self) -> bool;
    /// Moves to the first entry.
    fn seek_to_first(&mut self);
    /// Moves to the last entry.
    fn seek_to_last(&mut self);
    /// Moves to the first entry at or after `target` (an internal key).
    fn seek(&mut self, target: &[u8]);
    /// Moves to the last entry at or before `target` (an internal key).
    fn seek_for_prev(&mut self, target: &[u8]);
    /// Moves to the next entry. Requires `valid()`.
    fn next(&mut self);
    /// Moves to the previous entry. Requires `valid()`.
    fn prev(&mut self);
    /// The current internal key. Requires `valid()`.
    fn key(&self) -> &[u8];
    /// The current value. Requires `valid()`.
    fn value(&self) -> &[u8];
    /// The first error met, if any.
    ///
    /// # Errors
    /// The I/O error or corruption that made the iterator invalid.
    fn status(&self) -> Result<()>;
    /// Adds to `out` the data blocks that [`InternalIterator::seek`] to `target` would read
    /// from the device (those the block cache lacks), so that a caller can read them all at
    /// once before seeking ([`crate::db_iter::DbIterator::seek`]). Sources in memory add none
    /// (the default).
    fn blocks_for_seek(&self, target: &[u8], out: &mut Vec<BlockRead>) {
        let _ = (target, out);
    }
}

/// A data block a seek will read: which SST, and where in it.
pub struct BlockRead {
    /// The SST (kept alive, so its extent is not reused while the read is pending).
    pub sst: std::sync::Arc<crate::version::SstHandle>,
    /// The block within the SST.
    pub block: crate::sst::format::BlockHandle,
}

/// An iterator over a sorted vector of (internal key, value) entries: for tests and for small
/// in-memory sources.
/// An iterator that was refused before it began: never valid, its status the refusal.
pub(crate) struct RefusedIterator {
    /// The [`Error::InvalidArgument`](crate::Error::InvalidArgument) message.
    why: String,
}

impl RefusedIterator {
    pub(crate) fn new(why: String) -> RefusedIterator {
        RefusedIterator { why }
    }
}

impl InternalIterator for RefusedIterator {
    fn valid(&self) -> bool {
        false
    }
    fn seek_to_first(&mut self) {}
    fn seek_to_last(&mut self) {}
    fn seek(&mut self, _: &[u8]) {}
    fn seek_for_prev(&mut self, _: &[u8]) {}
    fn next(&mut self) {
        unreachable!("next on an iterator that is never valid")
    }
    fn prev(&mut self) {
        unreachable!("prev on an iterator that is never valid")
    }
    fn key(&self) -> &[u8] {
        unreachable!("key of an iterator that is never valid")
    }
    fn value(&self) -> &[u8] {
        unreachable!("value of an iterator that is never valid")
    }
    fn status(&self) -> Result<()> {
        Err(crate::Error::InvalidArgument(self.why.clone()))
    }
}

pub struct VecIterator {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    pos: Option<usize>,
}

impl VecIterator {
    /// An iterator over `entries`, which it sorts by internal key.
    pub fn new(mut entries: Vec<(Vec<u8>, Vec<u8>)>) -> VecIterator {
        entries.sort_by(|a, b| crate::key::compare(&a.0, &b.0));
        VecIterator { entries, pos: None }
    }
}

impl InternalIterator for VecIterator {
    fn valid(&self) -> bool {
        self.pos.is_some()
    }
    fn seek_to_first(&mut self) {
        self.pos = (!self.entries.is_empty()).then_some(0);
    }
    fn seek_to_last(&mut self) {
        self.pos = self.entries.len().checked_sub(1);
    }
    fn seek(&mut self, target: &[u8]) {
        let i = self.entries.partition_point(|e| crate::key::compare(&e.0, target).is_lt());
        self.pos = (i < self.entries.len()).then_some(i);
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        let i = self.entries.partition_point(|e| crate::key::compare(&e.0, target).is_le());
        self.pos = i.checked_sub(1);
    }
    fn next(&mut self) {
        let i = self.pos.expect("next on an invalid iterator") + 1;
        self.pos = (i < self.entries.len()).then_some(i);
    }
    fn prev(&mut self) {
        self.pos = self.pos.expect("prev on an invalid iterator").checked_sub(1);
    }
    fn key(&self) -> &[u8] {
        &self.entries[self.pos.expect("key on an invalid iterator")].0
    }
    fn value(&self) -> &[u8] {
        &self.entries[self.pos.expect("value on an invalid iterator")].1
    }
    fn status(&self) -> Result<()> {
        Ok(())
    }
}
