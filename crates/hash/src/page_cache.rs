//! The bounded index's page cache: a fixed number of frames, each holding one bucket's
//! decoded entries, replaced by CLOCK: the space layer's CLOCK core (`shale_space::
//! clock_cache`, the one cache of every engine), in its write-back mode, each frame charged 1.
//!
//! Its memory is fixed when it is made: every frame reserves room for a full page's entries
//! (the entries of a frame evicted clean are kept for the next frame), and the map from
//! bucket to frame is sized for the frame count, so it does not grow with the keys. A dirty
//! frame chosen by the hand is handed back to the caller, who writes it back before its
//! bucket can be read again.

use shale_space::clock_cache::{Admit, Clock, DirtyPolicy};

use crate::index_page::ENTRIES_MAX;

/// One cached bucket.
#[derive(Debug)]
pub struct Frame {
    /// Its entries: (digest, packed location).
    pub entries: Vec<(u64, u64)>,
}

/// A frame's bucket and entries, taken out of the cache to be written back.
#[derive(Debug)]
pub struct Evicted {
    /// The bucket.
    pub bucket: u32,
    /// Its entries.
    pub entries: Vec<(u64, u64)>,
}

/// A fixed set of frames.
#[derive(Debug)]
pub struct PageCache {
    clock: Clock<u32, Frame>,
    /// Entry vectors of frames evicted clean, each with room for a page, for the next frames.
    spare: Vec<Vec<(u64, u64)>>,
    capacity: usize,
}

/// Fewest frames: a doubling reads one bucket while another is cached.
pub const FRAMES_MIN: usize = 4;

impl PageCache {
    /// A cache of `frames` frames (at least [`FRAMES_MIN`]).
    pub fn new(frames: usize) -> PageCache {
        let capacity = frames.max(FRAMES_MIN);
        PageCache {
            clock: Clock::with_room(capacity, DirtyPolicy::WriteBack, capacity),
            spare: Vec::new(),
            capacity,
        }
    }

    /// Bytes the cache holds in memory once full: its frames with their reserved entries,
    /// and its map and ring. Fixed for a capacity.
    pub fn memory_bytes(&self) -> usize {
        let frame = std::mem::size_of::<Frame>() + ENTRIES_MAX * 16;
        // A map slot holds the bucket, the frame and CLOCK's bookkeeping; the ring a bucket.
        let slot = std::mem::size_of::<(u32, Frame)>() + 32 + std::mem::size_of::<Option<u32>>();
        self.capacity * (frame + slot)
    }

    /// The frame of `bucket`, marked referenced. A caller that changes its entries marks it
    /// dirty ([`PageCache::mark_dirty`]).
    pub fn get(&mut self, bucket: u32) -> Option<&mut Frame> {
        self.clock.get(&bucket)
    }

    /// Marks the frame of `bucket` changed since it was read or written back.
    pub fn mark_dirty(&mut self, bucket: u32) {
        assert!(self.clock.mark_dirty(&bucket), "bucket {bucket} is cached");
    }

    /// Whether `bucket` is cached.
    pub fn contains(&self, bucket: u32) -> bool {
        self.clock.contains(&bucket)
    }

    /// Caches `bucket` with `entries`; returns a dirty frame it displaced, to write back.
    ///
    /// # Panics
    /// If `bucket` is cached already (a bug).
    pub fn insert(&mut self, bucket: u32, entries: &[(u64, u64)], dirty: bool) -> Option<Evicted> {
        assert!(!self.clock.contains(&bucket), "bucket {bucket} cached twice");
        let mut own = self.spare.pop().unwrap_or_else(|| Vec::with_capacity(ENTRIES_MAX));
        own.clear();
        own.extend_from_slice(entries);
        let gone = self.clock.insert(bucket, Frame { entries: own }, 1, 0, Admit::Used);
        if dirty {
            self.mark_dirty(bucket);
        }
        let mut evicted = None;
        for e in gone {
            if e.dirty {
                evicted = Some(Evicted { bucket: e.key, entries: e.value.entries });
            } else {
                self.spare.push(e.value.entries);
            }
        }
        evicted
    }

    /// The frames of `buckets`, each cloned out to be written.
    fn copies(&self, mut buckets: Vec<u32>) -> Vec<Evicted> {
        buckets.sort_unstable();
        buckets
            .into_iter()
            .map(|b| Evicted {
                bucket: b,
                entries: self.clock.peek(&b).expect("cached").entries.clone(),
            })
            .collect()
    }

    /// The dirty frames, each marked clean: the caller writes them back.
    pub fn take_dirty(&mut self) -> Vec<Evicted> {
        let dirty = self.clock.take_dirty();
        self.copies(dirty)
    }

    /// Up to `max` dirty frames the hand reaches next, each marked clean (they stay
    /// cached): written back together with an evicted one, they spare the evictions after it
    /// a write each.
    pub fn take_dirty_ahead(&mut self, max: usize) -> Vec<Evicted> {
        let ahead = self.clock.take_dirty_ahead(max);
        self.copies(ahead)
    }

    /// Forgets every frame (the table they belong to was replaced). Frames keep their room.
    pub fn clear(&mut self) {
        assert_eq!(self.clock.dirty_count(), 0, "a dirty frame would be lost");
        for e in self.clock.remove_where(|_| true) {
            self.spare.push(e.value.entries);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_keeps_referenced_frames_and_hands_back_dirty_ones() {
        let mut c = PageCache::new(4);
        for b in 0..4 {
            assert!(c.insert(b, &[(u64::from(b), 1)], b == 1).is_none());
        }
        let before = c.memory_bytes();
        // Every frame is referenced: the hand clears all bits, then takes frame 0.
        assert!(c.insert(10, &[], false).is_none(), "frame 0 was clean");
        assert!(!c.contains(0) && c.contains(10));
        c.get(2);
        // Frame 1 (dirty, not referenced since the hand passed) goes next.
        let e = c.insert(11, &[], false).expect("a dirty frame");
        assert_eq!((e.bucket, e.entries), (1, vec![(1, 1)]));
        assert!(c.contains(2), "a referenced frame stays");
        c.mark_dirty(2);
        c.mark_dirty(10);
        let ahead: Vec<u32> = c.take_dirty_ahead(8).iter().map(|e| e.bucket).collect();
        assert_eq!(ahead.len(), 2);
        assert!(ahead.contains(&2) && ahead.contains(&10));
        assert!(c.take_dirty_ahead(8).is_empty(), "taken frames are clean");
        for b in 20..1000 {
            c.insert(b, &[(1, 2)], true);
            c.take_dirty();
        }
        assert_eq!(c.memory_bytes(), before, "memory is fixed");
    }
}
