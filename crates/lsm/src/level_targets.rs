//! Level targets: how many bytes each level below L0 should hold, and which level L0 compacts
//! into (the *base level*). A pure function of the options and the bytes per level, so the
//! picker, the write controller's compaction debt and the statistics all agree, and the shape
//! is tested exactly.
//!
//! Two ways to size levels, chosen by [`Options::dynamic_level_bytes`]:
//! - **Static** (LevelDB, RocksDB's old default): L1's target is `max_bytes_for_level_base`,
//!   each deeper level's `max_bytes_for_level_multiplier` times the one above, and L0 compacts
//!   into L1. A small store fills L1 first and the last level last, so the last level is not
//!   the largest one until the store is big, and more than 1/multiplier of the data sits in
//!   upper levels, rewritten at every step down.
//! - **Dynamic** (RocksDB's `level_compaction_dynamic_level_bytes`, its default since 8.4):
//!   the targets are derived from the last level (the largest, if the last is empty) upward, each
//!   level a multiplier's fraction of the next. Levels whose target would fall below
//!   `max_bytes_for_level_base / multiplier` are kept empty, and L0 compacts straight into the
//!   first level that is not (the base level). A new store therefore puts its first data in
//!   the last level, and about 90% of the data is always in the last level (with multiplier
//!   10), which bounds space amplification to about 1.11.
//!
//! Like RocksDB, no level's target is set below `max_bytes_for_level_base`, so that levels
//! below L0 never look more urgent than L0 itself. Unlike RocksDB, the base level's target is
//! not raised when L0 is backlogged (RocksDB then lowers the multiplier); shale's L0 score
//! already wins in that case.

use crate::options::Options;
use crate::version::LEVELS;

/// The targets of every level.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LevelTargets {
    /// The level L0 compacts into; every level between L0 and it is empty.
    pub base_level: usize,
    /// Target bytes per level. L0 (sized by SST count, not bytes) and the levels above the
    /// base level have 0: nothing is compacted out of them by size. The last level's target
    /// is shown for information; nothing is compacted out of the last level either.
    pub bytes: [u64; LEVELS],
}

impl LevelTargets {
    /// The targets for a tree whose levels hold `level_bytes` (one entry per level, L0 first).
    ///
    /// # Panics
    /// If `level_bytes` does not have one entry per level.
    pub fn compute(opts: &Options, level_bytes: &[u64]) -> LevelTargets {
        assert_eq!(level_bytes.len(), LEVELS, "one size per level");
        if opts.dynamic_level_bytes { dynamic(opts, level_bytes) } else { fixed(opts) }
    }

    /// Compaction debt: the bytes by which the levels from the base level down to the one
    /// above the last exceed their targets (the write controller's pending compaction bytes).
    pub fn excess_bytes(&self, level_bytes: &[u64]) -> u64 {
        (self.base_level..LEVELS - 1).map(|l| level_bytes[l].saturating_sub(self.bytes[l])).sum()
    }

    /// Whether level `l` is over its target and so wants compacting into the next one.
    pub fn is_over(&self, level_bytes: &[u64], l: usize) -> bool {
        (self.base_level..LEVELS - 1).contains(&l) && level_bytes[l] > self.bytes[l]
    }
}

/// Static targets: L1 = base, then times the multiplier per level.
fn fixed(opts: &Options) -> LevelTargets {
    let mut bytes = [0; LEVELS];
    let mut t = opts.max_bytes_for_level_base;
    for b in bytes.iter_mut().skip(1) {
        *b = t;
        t = t.saturating_mul(opts.max_bytes_for_level_multiplier);
    }
    LevelTargets { base_level: 1, bytes }
}

/// Dynamic targets, following RocksDB's `VersionStorageInfo::CalculateBaseBytes`.
fn dynamic(opts: &Options, level_bytes: &[u64]) -> LevelTargets {
    let (base_max, m) = (opts.max_bytes_for_level_base, opts.max_bytes_for_level_multiplier);
    let mut bytes = [0; LEVELS];
    let Some(first_non_empty) = (1..LEVELS).find(|&l| level_bytes[l] > 0) else {
        // Nothing below L0 yet: L0 compacts straight into the last level.
        bytes[LEVELS - 1] = base_max;
        return LevelTargets { base_level: LEVELS - 1, bytes };
    };
    // The size that sets the tree's depth: the last level's, the data that has settled. Not the
    // largest level's (RocksDB's choice): when L0 compacts into the base level faster than the
    // base level drains into the last one, the base level outgrows the last for a while, and
    // sizing from it opens a level above it that every byte is then written through once more
    // (ADOC's SATA class, 120 s of fillrandom: L4 opened over an L5 of a few GB, and ended with
    // 5.3 GB over an L6 of 2.4). The overgrown level scores high against its target instead,
    // and drains down. Only a tree with nothing in the last level (one built with static
    // sizing) is sized from its largest level.
    let last = level_bytes[LEVELS - 1];
    let largest = if last > 0 { last } else { level_bytes[1..].iter().copied().max().unwrap_or(0) };
    // The size the first non-empty level would have if that were the last level's target and
    // every level above it a multiplier's fraction of the next.
    let mut size = largest;
    for _ in first_non_empty..LEVELS - 1 {
        size /= m;
    }
    let mut base_level = first_non_empty;
    let base_size = if size <= base_max / m {
        // More levels hold data than the data needs; keep them rather than move data up.
        base_max / m + 1
    } else {
        // Open levels above the first non-empty one while the level above would still be
        // larger than the base size.
        while base_level > 1 && size > base_max {
            base_level -= 1;
            size /= m;
        }
        if size > base_max { base_max } else { size.max(1) }
    };
    let mut t = base_size;
    for (l, b) in bytes.iter_mut().enumerate().skip(base_level) {
        if l > base_level {
            t = t.saturating_mul(m);
        }
        *b = t.max(base_max);
    }
    LevelTargets { base_level, bytes }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn opts(dynamic: bool) -> Options {
        Options {
            dynamic_level_bytes: dynamic,
            max_bytes_for_level_base: MIB,
            max_bytes_for_level_multiplier: 10,
            ..Options::default()
        }
    }

    fn sizes(deep: &[(usize, u64)]) -> Vec<u64> {
        let mut s = vec![0; LEVELS];
        for &(l, b) in deep {
            s[l] = b;
        }
        s
    }

    #[test]
    fn static_targets_grow_from_l1() {
        let t = LevelTargets::compute(&opts(false), &sizes(&[(6, 500 * MIB)]));
        assert_eq!(t.base_level, 1);
        assert_eq!(t.bytes, [0, MIB, 10 * MIB, 100 * MIB, 1000 * MIB, 10000 * MIB, 100000 * MIB]);
    }

    #[test]
    fn an_empty_tree_compacts_l0_into_the_last_level() {
        let t = LevelTargets::compute(&opts(true), &sizes(&[(0, 5 * MIB)]));
        assert_eq!(t.base_level, LEVELS - 1);
        assert_eq!(t.excess_bytes(&sizes(&[(0, 5 * MIB)])), 0);
    }

    #[test]
    fn the_base_level_rises_as_the_last_level_grows() {
        // Up to the base size, everything stays in the last level.
        let t = LevelTargets::compute(&opts(true), &sizes(&[(6, MIB)]));
        assert_eq!(t.base_level, 6);
        // Past it, L5 opens with a tenth of L6 (but never less than the base size).
        let t = LevelTargets::compute(&opts(true), &sizes(&[(6, 5 * MIB)]));
        assert_eq!(t.base_level, 5);
        assert_eq!((t.bytes[5], t.bytes[6]), (MIB, 5 * MIB));
        // A 250 MiB last level: L6 250, L5 25, L4 2.5, L3 0.25 MiB (raised to the base size);
        // L2 would be 0.025 MiB, below a tenth of the base size, so it stays empty and L3 is
        // the base level.
        let l = sizes(&[(5, 20 * MIB), (6, 250 * MIB)]);
        let t = LevelTargets::compute(&opts(true), &l);
        assert_eq!(t.base_level, 3);
        assert_eq!(&t.bytes[3..], &[MIB, MIB * 25 / 10, 25 * MIB, 250 * MIB]);
        assert_eq!(&t.bytes[..3], &[0, 0, 0]);
    }

    #[test]
    fn targets_follow_the_last_level() {
        for last in [5 * MIB, 42 * MIB, 700 * MIB, 9000 * MIB] {
            let l = sizes(&[(5, last / 10), (6, last)]);
            let t = LevelTargets::compute(&opts(true), &l);
            // Within the rounding of dividing down level by level and multiplying back.
            assert!(t.bytes[6].abs_diff(last) <= last / 1000, "{last}: {t:?}");
            for lv in t.base_level..LEVELS - 1 {
                // Each level a tenth of the next, rounded down, never below the base size.
                let expect = (t.bytes[lv + 1] / 10).max(MIB);
                assert!(t.bytes[lv].abs_diff(expect) <= 10, "L{lv} of {last}: {t:?}");
            }
        }
    }

    #[test]
    fn an_overgrown_base_level_does_not_open_a_level_above_it() {
        // L0 has poured 3 GiB into the base level L5 while L6 holds 2 GiB. Sized from the
        // largest level, L5's share would be 307 MiB, past the 256 MiB base, and L4 would
        // open; sized from the last level (205 MiB for L5), L5 stays the base level with the
        // base size as its target, far over it, so L5 drains into L6.
        let o = Options { max_bytes_for_level_base: 256 * MIB, ..opts(true) };
        let l = sizes(&[(0, 1024 * MIB), (5, 3072 * MIB), (6, 2048 * MIB)]);
        let t = LevelTargets::compute(&o, &l);
        assert_eq!(t.base_level, 5, "{t:?}");
        assert!(t.is_over(&l, 5), "{t:?}");
        // Once the last level itself passes ten times the base size, L4 opens.
        let l = sizes(&[(5, 300 * MIB), (6, 2600 * MIB)]);
        assert_eq!(LevelTargets::compute(&o, &l).base_level, 4);
    }

    #[test]
    fn more_levels_than_the_data_needs_are_kept() {
        // Data in L2 and L6 but too little for five levels: the base level is the first non-
        // empty one, not a deeper one (data never moves up).
        let l = sizes(&[(2, MIB / 2), (6, 2 * MIB)]);
        let t = LevelTargets::compute(&opts(true), &l);
        assert_eq!(t.base_level, 2);
        assert!(t.bytes[2..].iter().all(|&b| b >= MIB));
        assert_eq!(t.excess_bytes(&l), 0);
    }

    #[test]
    fn debt_counts_levels_over_target_but_not_the_last() {
        let l = sizes(&[(5, 3 * MIB), (6, 10 * MIB)]);
        let t = LevelTargets::compute(&opts(true), &l);
        assert_eq!(t.base_level, 5);
        assert_eq!(t.excess_bytes(&l), 2 * MIB);
        assert!(t.is_over(&l, 5) && !t.is_over(&l, 6) && !t.is_over(&l, 0));
    }
}
