//! The slot map: which slots are free, live (in the committed version) or pending (allocated
//! for an SST being written, not committed yet).
//!
//! Never persisted (LDS's online map): recovery rebuilds it from the live extents of the
//! committed version, so a crash can never leak a slot and pending allocations simply vanish.
//! Free slots are kept as merged runs (TopFS's `<start, end>` list) so a contiguous extent is
//! found without scanning slot by slot; a next-fit cursor that wraps spreads writes over the
//! device instead of hammering its first slots.

use std::collections::BTreeMap;

use crate::tier::Tier;
use crate::version_record::Extent;

/// Counts of the slot map, for statistics and `shale inspect`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotUsage {
    /// Slots the device holds.
    pub total: u32,
    /// Slots in the committed version.
    pub live: u32,
    /// Slots allocated but not committed yet.
    pub pending: u32,
    /// Free slots.
    pub free: u32,
    /// Number of free runs (fragmentation).
    pub free_runs: u32,
    /// Longest free run, in slots.
    pub largest_free_run: u32,
}

/// A set of disjoint slot runs keyed by first slot.
#[derive(Clone, Debug, Default)]
struct Runs(BTreeMap<u32, u32>);

impl Runs {
    fn slots(&self) -> u32 {
        self.0.values().sum()
    }

    /// Whether exactly this run is in the set.
    fn contains_exact(&self, e: Extent) -> bool {
        self.0.get(&e.first) == Some(&e.count)
    }

    /// Whether any slot of `e` is in the set.
    fn overlaps(&self, e: Extent) -> bool {
        let before = self.0.range(..=e.first).next_back();
        if before.is_some_and(|(&s, &c)| u64::from(s) + u64::from(c) > u64::from(e.first)) {
            return true;
        }
        self.0.range(e.first..).next().is_some_and(|(&s, _)| u64::from(s) < e.end())
    }

    /// Inserts a run, merging it with touching neighbours (free list only).
    fn insert_merged(&mut self, e: Extent) {
        let (mut first, mut end) = (e.first, e.end());
        if let Some((&s, &c)) = self.0.range(..first).next_back() {
            if u64::from(s) + u64::from(c) == u64::from(first) {
                self.0.remove(&s);
                first = s;
            }
        }
        if let Some(&c) = self.0.get(&(end as u32)).filter(|_| end <= u64::from(u32::MAX)) {
            self.0.remove(&(end as u32));
            end += u64::from(c);
        }
        self.0.insert(first, (end - u64::from(first)) as u32);
    }
}

/// The slot map of one volume.
#[derive(Clone, Debug)]
pub(crate) struct Allocator {
    /// The tier whose slots these are: every extent handed out names it.
    tier: Tier,
    total: u32,
    free: Runs,
    live: Runs,
    pending: Runs,
    cursor: u32,
}

impl Allocator {
    /// Rebuilds the map from the committed version's live extents.
    ///
    /// # Errors
    /// A description of the first extent that overlaps another or lies past the last slot.
    pub(crate) fn rebuild(tier: Tier, total: u32, live: &[Extent]) -> Result<Allocator, String> {
        let mut map = Allocator {
            tier,
            total,
            free: Runs::default(),
            live: Runs::default(),
            pending: Runs::default(),
            cursor: 0,
        };
        for &e in live {
            if e.tier != tier {
                return Err(format!("extent {e:?} is not on the {} tier", tier.name()));
            }
            if e.count == 0 || e.end() > u64::from(total) {
                return Err(format!("extent {e:?} lies past the volume's {total} slots"));
            }
            if map.live.overlaps(e) {
                return Err(format!("extent {e:?} overlaps another live extent"));
            }
            map.live.0.insert(e.first, e.count);
        }
        map.free_gaps(0, total);
        Ok(map)
    }

    /// Adds every slot of `[from, to)` not live or pending to the free list.
    fn free_gaps(&mut self, from: u32, to: u32) {
        let mut at = u64::from(from);
        let used: Vec<(u32, u32)> = self
            .live
            .0
            .iter()
            .chain(self.pending.0.iter())
            .map(|(&s, &c)| (s, c))
            .collect::<BTreeMap<_, _>>()
            .into_iter()
            .collect();
        for (s, c) in used {
            let end = u64::from(s) + u64::from(c);
            if end <= at {
                continue;
            }
            if u64::from(s) > at {
                let gap_end = u64::from(s).min(u64::from(to));
                if gap_end > at {
                    self.free.insert_merged(Extent::on(
                        self.tier,
                        at as u32,
                        (gap_end - at) as u32,
                    ));
                }
            }
            at = at.max(end);
        }
        if u64::from(to) > at {
            self.free.insert_merged(Extent::on(self.tier, at as u32, (u64::from(to) - at) as u32));
        }
    }

    /// Allocates `count` contiguous slots, next-fit from the cursor, wrapping once. The extent
    /// is pending until a commit adds it or [`Allocator::release`] gives it back.
    pub(crate) fn allocate(&mut self, count: u32) -> Option<Extent> {
        assert!(count > 0, "allocating zero slots");
        let pick = self
            .free
            .0
            .range(self.cursor..)
            .chain(self.free.0.range(..self.cursor))
            .find(|&(_, &c)| c >= count)
            .map(|(&s, &c)| (s, c))?;
        let (first, run) = pick;
        self.free.0.remove(&first);
        if run > count {
            self.free.0.insert(first + count, run - count);
        }
        let e = Extent::on(self.tier, first, count);
        self.pending.0.insert(first, count);
        self.cursor = if e.end() >= u64::from(self.total) { 0 } else { e.end() as u32 };
        Some(e)
    }

    /// Allocates `count` contiguous slots as [`Allocator::allocate`] does, or, without a free
    /// run that long, the whole of the longest one: an SST cut to fit a fragmented device
    /// rather than a store stopped with free slots left.
    pub(crate) fn allocate_up_to(&mut self, count: u32) -> Option<Extent> {
        if let Some(e) = self.allocate(count) {
            return Some(e);
        }
        let longest = self.free.0.values().copied().max()?;
        self.allocate(longest)
    }

    /// Gives back a pending extent that will not be committed (a failed flush, say).
    ///
    /// # Panics
    /// If `e` is not exactly a pending extent: releasing anything else is a bug.
    pub(crate) fn release(&mut self, e: Extent) {
        assert!(self.pending.contains_exact(e), "release of {e:?}, which is not pending");
        self.pending.0.remove(&e.first);
        self.free.insert_merged(e);
    }

    /// Gives back the tail of a pending extent, keeping its first `keep` slots pending: an SST
    /// written into an extent reserved for its largest size ends up using fewer slots.
    ///
    /// # Panics
    /// If `e` is not exactly a pending extent, or `keep` is not in `1..=e.count`.
    pub(crate) fn shrink(&mut self, e: Extent, keep: u32) -> Extent {
        assert!(self.pending.contains_exact(e), "shrink of {e:?}, which is not pending");
        assert!((1..=e.count).contains(&keep), "shrink of {e:?} to {keep} slots");
        if keep < e.count {
            self.pending.0.insert(e.first, keep);
            self.free.insert_merged(Extent::on(self.tier, e.first + keep, e.count - keep));
        }
        Extent::on(self.tier, e.first, keep)
    }

    /// Checks that an edit may be committed: every added extent is pending, every removed one
    /// live, none twice.
    pub(crate) fn validate_edit(&self, removed: &[Extent], added: &[Extent]) -> Result<(), String> {
        for &e in added {
            if !self.pending.contains_exact(e) {
                return Err(format!("added extent {e:?} was not allocated from this volume"));
            }
        }
        for &e in removed {
            if !self.live.contains_exact(e) {
                return Err(format!("removed extent {e:?} is not live"));
            }
        }
        let mut all: Vec<u32> = added.iter().chain(removed).map(|e| e.first).collect();
        all.sort_unstable();
        if all.windows(2).any(|w| w[0] == w[1]) {
            return Err("an extent appears twice in one edit".into());
        }
        Ok(())
    }

    /// Applies a committed edit: added extents become live, removed ones free. Must only be
    /// called after the version naming the edit is durable, so a freed slot is never reused
    /// while a crash could still bring back the version that uses it.
    pub(crate) fn apply_edit(&mut self, removed: &[Extent], added: &[Extent]) {
        for &e in added {
            self.pending.0.remove(&e.first);
            self.live.0.insert(e.first, e.count);
        }
        for &e in removed {
            self.live.0.remove(&e.first);
            self.free.insert_merged(e);
        }
    }

    /// Takes just-freed extents out of the free list again, as pending: the engine releases
    /// them when its readers are done with them.
    pub(crate) fn hold(&mut self, extents: &[Extent]) {
        for &e in extents {
            let (&first, &count) = self
                .free
                .0
                .range(..=e.first)
                .next_back()
                .expect("a just-freed extent lies in a free run");
            assert!(
                u64::from(first) + u64::from(count) >= e.end(),
                "held extent {e:?} is not free"
            );
            self.free.0.remove(&first);
            if first < e.first {
                self.free.0.insert(first, e.first - first);
            }
            let end = u64::from(first) + u64::from(count);
            if end > e.end() {
                self.free.0.insert(e.end() as u32, (end - e.end()) as u32);
            }
            self.pending.0.insert(e.first, e.count);
        }
    }

    /// Adds the slots of a grown device.
    pub(crate) fn grow(&mut self, total: u32) {
        assert!(total >= self.total, "shrinking the slot map");
        let old = self.total;
        self.total = total;
        self.free_gaps(old, total);
    }

    /// Live extents, sorted by first slot.
    /// The free runs, in slot order.
    pub(crate) fn free_extents(&self) -> Vec<Extent> {
        self.free.0.iter().map(|(&first, &count)| Extent::on(self.tier, first, count)).collect()
    }

    pub(crate) fn live_extents(&self) -> Vec<Extent> {
        self.live.0.iter().map(|(&first, &count)| Extent::on(self.tier, first, count)).collect()
    }

    /// Counts.
    pub(crate) fn usage(&self) -> SlotUsage {
        SlotUsage {
            total: self.total,
            live: self.live.slots(),
            pending: self.pending.slots(),
            free: self.free.slots(),
            free_runs: self.free.0.len() as u32,
            largest_free_run: self.free.0.values().copied().max().unwrap_or(0),
        }
    }

    /// Checks that every slot is in exactly one of free, live and pending, and free runs are
    /// merged.
    ///
    /// # Errors
    /// The first violation found.
    pub(crate) fn check(&self) -> Result<(), String> {
        let mut runs: Vec<(u32, u32, &str)> = Vec::new();
        for (set, name) in [(&self.free, "free"), (&self.live, "live"), (&self.pending, "pending")]
        {
            runs.extend(set.0.iter().map(|(&s, &c)| (s, c, name)));
        }
        runs.sort_unstable();
        let mut at = 0u64;
        for &(s, c, name) in &runs {
            if c == 0 {
                return Err(format!("empty {name} run at slot {s}"));
            }
            if u64::from(s) < at {
                return Err(format!("{name} run at slot {s} overlaps the run before it"));
            }
            if u64::from(s) > at {
                return Err(format!("slots {at}..{s} are neither free, live nor pending (leak)"));
            }
            at = u64::from(s) + u64::from(c);
        }
        if at != u64::from(self.total) {
            return Err(format!("slot runs end at {at}, the volume has {} slots", self.total));
        }
        let free: Vec<_> = self.free.0.iter().collect();
        if free.windows(2).any(|w| u64::from(*w[0].0) + u64::from(*w[0].1) == u64::from(*w[1].0)) {
            return Err("two free runs touch without being merged".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(first: u32, count: u32) -> Extent {
        Extent::fast(first, count)
    }

    #[test]
    fn rebuild_frees_the_gaps() {
        let a = Allocator::rebuild(Tier::Fast, 10, &[ext(2, 3), ext(7, 1)]).unwrap();
        a.check().unwrap();
        let u = a.usage();
        assert_eq!((u.live, u.free, u.free_runs, u.largest_free_run), (4, 6, 3, 2));
        assert!(Allocator::rebuild(Tier::Fast, 10, &[ext(2, 3), ext(4, 1)]).is_err());
        assert!(Allocator::rebuild(Tier::Fast, 10, &[ext(9, 2)]).is_err());
    }

    #[test]
    fn next_fit_wraps_and_reports_full() {
        let mut a = Allocator::rebuild(Tier::Fast, 8, &[]).unwrap();
        assert_eq!(a.allocate(3), Some(ext(0, 3)));
        assert_eq!(a.allocate(3), Some(ext(3, 3)));
        a.release(ext(0, 3));
        // The cursor is at 6: the 2 slots there are too few, so it wraps to slot 0.
        assert_eq!(a.allocate(3), Some(ext(0, 3)));
        assert_eq!(a.allocate(2), Some(ext(6, 2)));
        assert_eq!(a.allocate(1), None);
        a.check().unwrap();
    }

    #[test]
    fn up_to_takes_the_longest_run_when_none_is_long_enough() {
        // Live at 2 and 6: free runs 0..2, 3..6 and 7..10.
        let mut a = Allocator::rebuild(Tier::Fast, 10, &[ext(2, 1), ext(6, 1)]).unwrap();
        assert_eq!(a.allocate(4), None);
        assert_eq!(a.allocate_up_to(4), Some(ext(3, 3)), "the first of the longest runs");
        assert_eq!(a.allocate_up_to(2), Some(ext(7, 2)), "a run long enough is cut as usual");
        assert_eq!(a.allocate_up_to(5), Some(ext(0, 2)));
        assert_eq!(a.allocate_up_to(5), Some(ext(9, 1)));
        assert_eq!(a.allocate_up_to(1), None, "nothing free");
        a.check().unwrap();
    }

    #[test]
    fn freed_slots_merge_and_are_reused_only_after_commit() {
        let mut a = Allocator::rebuild(Tier::Fast, 6, &[]).unwrap();
        let x = a.allocate(2).unwrap();
        let y = a.allocate(2).unwrap();
        a.validate_edit(&[], &[x, y]).unwrap();
        a.apply_edit(&[], &[x, y]);
        let z = a.allocate(2).unwrap();
        assert_eq!(a.allocate(1), None, "live slots are not free before the commit drops them");
        a.validate_edit(&[x, y], &[z]).unwrap();
        a.apply_edit(&[x, y], &[z]);
        a.check().unwrap();
        assert_eq!(a.usage().largest_free_run, 4);
    }

    #[test]
    fn bad_edits_are_refused() {
        let mut a = Allocator::rebuild(Tier::Fast, 6, &[ext(0, 1)]).unwrap();
        let p = a.allocate(1).unwrap();
        assert!(a.validate_edit(&[], &[ext(4, 1)]).is_err(), "never allocated");
        assert!(a.validate_edit(&[ext(5, 1)], &[]).is_err(), "not live");
        assert!(a.validate_edit(&[], &[p, p]).is_err(), "twice");
        assert!(a.validate_edit(&[ext(0, 1)], &[p]).is_ok());
    }

    #[test]
    fn held_extents_are_neither_free_nor_live_until_released() {
        let mut a = Allocator::rebuild(Tier::Fast, 6, &[ext(0, 2), ext(2, 2)]).unwrap();
        a.apply_edit(&[ext(0, 2)], &[]);
        a.hold(&[ext(0, 2)]);
        a.check().unwrap();
        let u = a.usage();
        assert_eq!((u.live, u.pending, u.free), (2, 2, 2));
        assert_eq!(a.allocate(3), None, "held slots are not handed out");
        a.release(ext(0, 2));
        a.check().unwrap();
        assert_eq!(a.usage().free, 4);
    }

    #[test]
    fn shrink_frees_the_tail_and_keeps_the_head_pending() {
        let mut a = Allocator::rebuild(Tier::Fast, 10, &[ext(8, 2)]).unwrap();
        let e = a.allocate(6).unwrap();
        assert_eq!(a.shrink(e, 6), e, "keeping every slot changes nothing");
        let kept = a.shrink(e, 2);
        assert_eq!(kept, ext(0, 2));
        a.check().unwrap();
        let u = a.usage();
        assert_eq!((u.live, u.pending, u.free, u.free_runs), (2, 2, 6, 1));
        assert!(a.validate_edit(&[], &[e]).is_err(), "the reserved extent is gone");
        a.validate_edit(&[], &[kept]).unwrap();
        a.apply_edit(&[], &[kept]);
        a.check().unwrap();
        assert_eq!(a.allocate(6), Some(ext(2, 6)), "the tail is free again");
    }

    #[test]
    #[should_panic(expected = "not pending")]
    fn shrink_of_a_live_extent_is_a_bug() {
        let mut a = Allocator::rebuild(Tier::Fast, 4, &[ext(0, 4)]).unwrap();
        a.shrink(ext(0, 4), 1);
    }

    #[test]
    fn grow_adds_free_slots() {
        let mut a = Allocator::rebuild(Tier::Fast, 4, &[ext(0, 4)]).unwrap();
        assert_eq!(a.allocate(1), None);
        a.grow(10);
        a.check().unwrap();
        assert_eq!(a.allocate(6), Some(ext(4, 6)));
    }
}
