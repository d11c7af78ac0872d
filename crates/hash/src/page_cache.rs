//! The bounded index's page cache: a fixed number of frames, each holding one bucket's
//! decoded entries, replaced by CLOCK (a reference bit per frame, a hand that clears bits
//! until it finds a frame not referenced since its last pass).
//!
//! Its memory is fixed when it is made: every frame reserves room for a full page's entries,
//! and the map from bucket to frame is sized for the frame count, so it does not grow with
//! the keys. A dirty frame chosen by the hand is handed back to the caller, who writes it
//! back before its bucket can be read again.

use rustc_hash::FxHashMap;

use crate::index_page::ENTRIES_MAX;

/// One cached bucket.
#[derive(Debug)]
pub struct Frame {
    /// The bucket it holds.
    pub bucket: u32,
    /// Its entries: (digest, packed location).
    pub entries: Vec<(u64, u64)>,
    /// Changed since it was read or written back.
    pub dirty: bool,
    referenced: bool,
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
    frames: Vec<Frame>,
    by_bucket: FxHashMap<u32, usize>,
    hand: usize,
    capacity: usize,
}

/// Fewest frames: a doubling reads one bucket while another is cached.
pub const FRAMES_MIN: usize = 4;

impl PageCache {
    /// A cache of `frames` frames (at least [`FRAMES_MIN`]).
    pub fn new(frames: usize) -> PageCache {
        let capacity = frames.max(FRAMES_MIN);
        let mut by_bucket = FxHashMap::default();
        by_bucket.reserve(capacity);
        PageCache { frames: Vec::with_capacity(capacity), by_bucket, hand: 0, capacity }
    }

    /// Bytes the cache holds in memory once full: its frames with their reserved entries,
    /// and its map. Fixed for a capacity.
    pub fn memory_bytes(&self) -> usize {
        let frame = std::mem::size_of::<Frame>() + ENTRIES_MAX * 16;
        let map = self.by_bucket.capacity() * (std::mem::size_of::<(u32, usize)>() + 1);
        self.capacity * frame + map
    }

    /// The frame of `bucket`, marked referenced.
    pub fn get(&mut self, bucket: u32) -> Option<&mut Frame> {
        let i = *self.by_bucket.get(&bucket)?;
        let f = &mut self.frames[i];
        f.referenced = true;
        Some(f)
    }

    /// Whether `bucket` is cached.
    pub fn contains(&self, bucket: u32) -> bool {
        self.by_bucket.contains_key(&bucket)
    }

    /// Caches `bucket` with `entries`; returns a dirty frame it displaced, to write back.
    ///
    /// # Panics
    /// If `bucket` is cached already (a bug).
    pub fn insert(&mut self, bucket: u32, entries: &[(u64, u64)], dirty: bool) -> Option<Evicted> {
        assert!(!self.by_bucket.contains_key(&bucket), "bucket {bucket} cached twice");
        if self.frames.len() < self.capacity {
            let mut own = Vec::with_capacity(ENTRIES_MAX);
            own.extend_from_slice(entries);
            self.frames.push(Frame { bucket, entries: own, dirty, referenced: true });
            self.by_bucket.insert(bucket, self.frames.len() - 1);
            return None;
        }
        let i = self.victim();
        let f = &mut self.frames[i];
        self.by_bucket.remove(&f.bucket);
        let evicted = f.dirty.then(|| Evicted { bucket: f.bucket, entries: f.entries.clone() });
        f.bucket = bucket;
        f.entries.clear();
        f.entries.extend_from_slice(entries);
        f.dirty = dirty;
        f.referenced = true;
        self.by_bucket.insert(bucket, i);
        evicted
    }

    /// The frame the CLOCK hand picks: the first not referenced since the hand last passed.
    fn victim(&mut self) -> usize {
        loop {
            let i = self.hand;
            self.hand = (self.hand + 1) % self.frames.len();
            let f = &mut self.frames[i];
            if !f.referenced {
                return i;
            }
            f.referenced = false;
        }
    }

    /// The dirty frames, each marked clean: the caller writes them back.
    pub fn take_dirty(&mut self) -> Vec<Evicted> {
        let mut out: Vec<Evicted> = self
            .frames
            .iter_mut()
            .filter(|f| f.dirty)
            .map(|f| {
                f.dirty = false;
                Evicted { bucket: f.bucket, entries: f.entries.clone() }
            })
            .collect();
        out.sort_by_key(|e| e.bucket);
        out
    }

    /// Up to `max` dirty frames the hand reaches next, each marked clean (they stay
    /// cached): written back together with an evicted one, they spare the evictions after it
    /// a write each.
    pub fn take_dirty_ahead(&mut self, max: usize) -> Vec<Evicted> {
        let mut out = Vec::new();
        let n = self.frames.len();
        for k in 0..n {
            if out.len() == max {
                break;
            }
            let f = &mut self.frames[(self.hand + k) % n];
            if f.dirty {
                f.dirty = false;
                out.push(Evicted { bucket: f.bucket, entries: f.entries.clone() });
            }
        }
        out
    }

    /// Forgets every frame (the table they belong to was replaced). Frames keep their room.
    pub fn clear(&mut self) {
        assert!(self.frames.iter().all(|f| !f.dirty), "a dirty frame would be lost");
        self.frames.clear();
        self.by_bucket.clear();
        self.hand = 0;
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
        c.get(2).unwrap().dirty = true;
        c.get(10).unwrap().dirty = true;
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
