//! The iterator over internal keys that memtables, SSTs and merges all implement.

use crate::error::Result;

/// A cursor over entries sorted by internal key ([`crate::key::compare`]).
///
/// Positioning calls never fail; an SST iterator that hits an I/O error or damage becomes
/// invalid and reports the error from [`InternalIterator::status`]. Callers check `status`
/// whenever `valid` turns false.
pub trait InternalIterator {
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
}
