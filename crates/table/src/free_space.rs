//! The free space of a table: dead row records (erased rows, and the void records of
//! inserts rolled back) whose slots a new record may take instead of growing the row
//! stream. Memory only: the open's scan finds every dead record, and the reclaiming pass
//! (`Storage::reclaim_step`) finds those that die while the store is open, once no open
//! transaction has an undo record on them (an erase not yet committed may still be rolled
//! back, and its before-image names the row's bytes).
//!
//! A record keeps its slot when reused (nothing is split or merged, so the row stream's
//! record boundaries never change and no block's first-row field has to move back): a row
//! takes the smallest free slot that holds it, and only one at most twice its size, so a
//! small row does not waste a large slot.

use std::collections::{BTreeMap, BTreeSet};

use crate::block::Pos;

/// A table's free slots.
#[derive(Debug, Default)]
pub struct FreeSpace {
    /// Positions of free records by slot length.
    by_len: BTreeMap<u32, BTreeSet<Pos>>,
    /// Every free position, with its slot length.
    at: BTreeMap<Pos, u32>,
    /// Bytes of the free records, headers included.
    bytes: u64,
}

impl FreeSpace {
    /// Notes the dead record at `pos` with a slot of `slot_len` bytes (again: no-op).
    pub fn add(&mut self, pos: Pos, slot_len: u32) {
        if self.at.insert(pos, slot_len).is_none() {
            self.by_len.entry(slot_len).or_default().insert(pos);
            self.bytes += crate::row::HEADER_BYTES as u64 + u64::from(slot_len);
        }
    }

    /// Free records.
    pub fn records(&self) -> usize {
        self.at.len()
    }

    /// Bytes of the free records, headers included.
    pub fn total_bytes(&self) -> u64 {
        self.bytes
    }

    /// Takes the smallest free slot of at least `need` and at most `2 * need` bytes.
    pub fn take(&mut self, need: u32) -> Option<(Pos, u32)> {
        let most = need.saturating_mul(2);
        let (&len, positions) = self.by_len.range_mut(need..=most).next()?;
        let pos = positions.pop_first().expect("no empty position sets are kept");
        if positions.is_empty() {
            self.by_len.remove(&len);
        }
        self.at.remove(&pos);
        self.bytes -= crate::row::HEADER_BYTES as u64 + u64::from(len);
        Some((pos, len))
    }

    /// Bytes of the free records, headers included.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(block: u64, offset: u32) -> Pos {
        Pos { block, offset }
    }

    #[test]
    fn the_smallest_slot_that_fits_is_taken_and_never_twice() {
        let mut f = FreeSpace::default();
        f.add(p(0, 0), 100);
        f.add(p(1, 0), 500);
        f.add(p(2, 0), 120);
        f.add(p(2, 0), 120);
        assert_eq!(f.bytes(), 3 * 12 + 720);
        assert_eq!(f.take(110), Some((p(2, 0), 120)));
        assert_eq!(f.take(110), None, "100 is too small, 500 wastes too much");
        assert_eq!(f.take(300), Some((p(1, 0), 500)));
        assert_eq!(f.take(50), Some((p(0, 0), 100)));
        assert_eq!(f.take(1), None);
        assert_eq!(f.bytes(), 0);
    }
}
