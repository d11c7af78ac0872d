//! Choosing compactions, several at once: level scores, inputs, and the book of running
//! compactions that keeps each new one clear of the others.
//!
//! The rules, in order (RocksDB's leveled picker, with LDS's odd chunk):
//! 1. Score the levels: L0 by its SST count over `level0_file_num_compaction_trigger`, the
//!    levels from the base level to the one above the last by their bytes not already being
//!    compacted over their target (`level_targets`). With dynamic level sizes, RocksDB's
//!    refinements: L0 also by its bytes, the bytes still to come down from above added to a
//!    level's target, and a due level's score scaled by 10 (`CompactionState::scores`).
//!    Levels scoring at least 1 are tried, highest first. One exception, not RocksDB's: a
//!    base level larger than both L0 and the level below it goes before L0 while L0 is short
//!    of its slowdown trigger (`CompactionState::drain_an_outgrown_base_level_first`).
//! 2. L0 compacts into the base level, all its SSTs at once, and only one such compaction runs
//!    at a time (L0's SSTs overlap each other, so two could not split them by key).
//! 3. Ln (n >= 1) gives one SST, with the level's odd chunk attached when it is that SST's
//!    neighbour (LDS: the odd chunk "is attached to its next adjacent chunk that will
//!    participate in the next compaction of Ln"), and takes every SST of Ln+1 that overlaps
//!    them. Which SST: by default the one whose overlap in Ln+1 is smallest for its size
//!    (RocksDB's `kMinOverlappingRatio`, its default: it rewrites the fewest bytes below per
//!    byte moved down); with [`CompactionPri::RoundRobin`], the first after the level's
//!    compact pointer, in key order. Either way the next candidate is tried when one cannot
//!    run beside the running compactions.
//! 4. A candidate is passed over when one of its SSTs is already being compacted, or when its
//!    key range (inputs and overlap together) meets the range of a running compaction into the
//!    same output level: the outputs of concurrent compactions into one level never overlap,
//!    so each commits without looking at the others.
//! 5. With nothing to merge with below, the inputs move down unchanged (a trivial move).
//!
//! A full compaction (`compact_range`) runs alone: L0 into the base level, then the shallowest
//! non-empty level into the next, until one level holds everything.
//!
//! The book also knows each level's odd chunk (LDS): the part-filled last output of a
//! compaction out of that level, kept there until a later compaction absorbs it. The book lives
//! in memory only: after a reopen the old odd chunks are ordinary SSTs, absorbed by the
//! ordinary compactions, so a level may hold one more part-filled SST per reopen.

use std::sync::Arc;

use crate::key;
use crate::level_targets::LevelTargets;
use crate::options::{CompactionPri, Options};
use crate::version::{LEVELS, SstHandle};
use crate::version_edit::SstMeta;

/// What the picker needs of an SST: its metadata. Versions hold open handles; unit tests plain
/// metadata.
pub(super) trait Sst {
    fn meta(&self) -> &SstMeta;
}

impl Sst for Arc<SstHandle> {
    fn meta(&self) -> &SstMeta {
        &self.meta
    }
}

/// A range of user keys, both ends included.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct KeyRange {
    pub smallest: Vec<u8>,
    pub largest: Vec<u8>,
}

impl KeyRange {
    /// The user keys an SST spans.
    pub fn of_sst(m: &SstMeta) -> KeyRange {
        KeyRange {
            smallest: key::user_key(&m.smallest).to_vec(),
            largest: key::user_key(&m.largest).to_vec(),
        }
    }

    /// The smallest range spanning every SST given (`None` for none).
    fn spanning<'a>(ssts: impl IntoIterator<Item = &'a SstMeta>) -> Option<KeyRange> {
        ssts.into_iter().map(KeyRange::of_sst).reduce(|a, b| KeyRange {
            smallest: a.smallest.min(b.smallest),
            largest: a.largest.max(b.largest),
        })
    }

    pub fn overlaps(&self, other: &KeyRange) -> bool {
        self.smallest <= other.largest && other.smallest <= self.largest
    }

    fn overlaps_sst(&self, m: &SstMeta) -> bool {
        key::user_key(&m.smallest) <= self.largest.as_slice()
            && self.smallest.as_slice() <= key::user_key(&m.largest)
    }
}

/// A compaction the picker chose, by positions in the levels it was picked from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Plan {
    pub level: usize,
    pub output_level: usize,
    /// Positions in `levels[level]`, ascending.
    pub inputs: Vec<usize>,
    /// Positions in `levels[output_level]` of the SSTs overlapping the inputs, ascending.
    pub next: Vec<usize>,
    /// Part of a full compaction (`compact_range`): no odd chunk stays behind.
    pub full: bool,
}

impl Plan {
    /// Whether the inputs can move down unchanged: nothing below to merge with, and inputs
    /// that do not overlap each other. SSTs of L0 may overlap; those that do not (a
    /// sequential load flushes disjoint ones) move down together, as in RocksDB, rather than
    /// being rewritten.
    pub fn is_trivial_move<T: Sst>(&self, levels: &[Vec<T>]) -> bool {
        if !self.next.is_empty() {
            return false;
        }
        if self.level > 0 || self.inputs.len() == 1 {
            return true;
        }
        let mut ranges: Vec<KeyRange> =
            self.inputs.iter().map(|&i| KeyRange::of_sst(levels[self.level][i].meta())).collect();
        ranges.sort_by(|a, b| a.smallest.cmp(&b.smallest));
        // Strictly below: an SST whose (possibly exclusive) end equals the next one's start
        // counts as overlapping, which is only ever too careful.
        ranges.windows(2).all(|w| w[0].largest < w[1].smallest)
    }
}

/// A running compaction, as far as the others must keep clear of it.
#[derive(Debug)]
struct Running {
    id: u64,
    level: usize,
    output_level: usize,
    /// Every SST it reads (inputs and overlap).
    ssts: Vec<u64>,
    /// The user keys its outputs may span.
    range: KeyRange,
}

/// The book of compactions: which run, where each level's round robin stands, and each
/// level's odd chunk. Kept under the state lock with the version it describes.
#[derive(Debug)]
pub(super) struct CompactionState {
    running: Vec<Running>,
    next_id: u64,
    /// Per level, the largest user key of the last SST picked from it.
    pointer: Vec<Vec<u8>>,
    /// Per level, the id of its odd chunk.
    odd_chunk: Vec<Option<u64>>,
    /// Most compactions that ran at once since open.
    peak_running: usize,
    /// Odd chunks kept back in their level since open.
    odd_chunks_kept: u64,
}

impl Default for CompactionState {
    fn default() -> CompactionState {
        CompactionState {
            running: Vec::new(),
            next_id: 1,
            pointer: vec![Vec::new(); LEVELS],
            odd_chunk: vec![None; LEVELS],
            peak_running: 0,
            odd_chunks_kept: 0,
        }
    }
}

impl CompactionState {
    /// Compactions running now.
    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// Most compactions that ran at once since open.
    pub fn peak_running(&self) -> usize {
        self.peak_running
    }

    /// Odd chunks kept back in their level since open.
    pub fn odd_chunks_kept(&self) -> u64 {
        self.odd_chunks_kept
    }

    /// The odd chunk of `level`, if it has one.
    pub fn odd_chunk(&self, level: usize) -> Option<u64> {
        self.odd_chunk[level]
    }

    fn is_busy(&self, id: u64) -> bool {
        self.running.iter().any(|r| r.ssts.contains(&id))
    }

    /// The next compaction to run, if one is due and can run beside the running ones.
    pub fn pick<T: Sst>(
        &self,
        levels: &[Vec<T>],
        opts: &Options,
        targets: &LevelTargets,
        full: bool,
    ) -> Option<Plan> {
        if full {
            return self.pick_full(levels, targets);
        }
        let mut scored = self.scores(levels, opts, targets);
        // Highest score first; the sort is stable, so ties go to the shallower level.
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        // An L0 compaction that ranks first but cannot start waits only for the base level's
        // running compactions (it needs their SSTs): new ones out of the base level would keep
        // it waiting for as long as they overlapped, with L0 growing towards its stop trigger.
        let mut l0_waits = false;
        scored.into_iter().find_map(|(_, level)| {
            if level == 0 {
                let plan =
                    self.plan(levels, 0, targets.base_level, (0..levels[0].len()).collect(), false);
                l0_waits = plan.is_none();
                plan
            } else if l0_waits && level == targets.base_level {
                None
            } else {
                self.pick_from_level(levels, level, opts)
            }
        })
    }

    /// The levels due for compaction with their scores, in level order (rule 1).
    ///
    /// With dynamic level sizes the scores are RocksDB's (`ComputeCompactionScore`), which
    /// put L0 first while it is backlogged: a score past 1 is scaled by 10, L0's also counts
    /// its bytes against the base level's, and a level's bytes are divided by its target plus
    /// the bytes still to come down from above (all of L0 and every upper level's excess).
    /// So the base level may run over its target while L0 drains into it, instead of being
    /// pushed down one SST at a time between L0 compactions: with plain ratios (L0 at 1.0, a
    /// base level at twice a small target scoring 2.0) a random fill of 1 KB values rewrote the
    /// base level's overlap below after every L0 compaction, and wrote 1.9 times RocksDB's
    /// bytes, with writers stalled on full memtables for a third of the run.
    fn scores<T: Sst>(
        &self,
        levels: &[Vec<T>],
        opts: &Options,
        targets: &LevelTargets,
    ) -> Vec<(f64, usize)> {
        const SCALE: f64 = 10.0;
        let dynamic = opts.dynamic_level_bytes;
        let bytes = |files: &[T]| files.iter().map(|f| f.meta().bytes).sum::<u64>();
        let mut scored = Vec::new();
        let l0 = &levels[0];
        // Only one L0 compaction runs at a time: while one does, L0 is not scored.
        if !self.running.iter().any(|r| r.level == 0) && !l0.is_empty() {
            let mut score = l0.len() as f64 / opts.level0_file_num_compaction_trigger as f64;
            if dynamic {
                let (l0_bytes, base) = (bytes(l0), targets.base_level);
                if l0_bytes >= opts.max_bytes_for_level_base {
                    score = score.max(1.01);
                }
                if l0_bytes > targets.bytes[base] {
                    let against = bytes(&levels[base]).max(targets.bytes[base]);
                    score = score.max(l0_bytes as f64 / against as f64);
                }
                if score > 1.0 {
                    score *= SCALE;
                }
            }
            if score >= 1.0 {
                scored.push((score, 0));
            }
        }
        // Bytes still to come down into the level being scored.
        let mut coming = if dynamic { bytes(l0) } else { 0 };
        for (l, files) in levels.iter().enumerate().take(LEVELS - 1).skip(targets.base_level) {
            let target = targets.bytes[l];
            let idle: u64 =
                files.iter().map(Sst::meta).filter(|m| !self.is_busy(m.id)).map(|m| m.bytes).sum();
            if idle > target {
                let score = if dynamic {
                    idle as f64 / (target + coming) as f64 * SCALE
                } else {
                    idle as f64 / target as f64
                };
                if score >= 1.0 {
                    scored.push((score, l));
                }
            }
            coming += bytes(files).saturating_sub(target);
        }
        if dynamic {
            Self::drain_an_outgrown_base_level_first(&mut scored, levels, opts, targets);
        }
        scored
    }

    /// Puts the base level before L0 while it holds more bytes than L0 and more than the
    /// level below it (an upside-down tree), and L0 is short of its slowdown trigger.
    ///
    /// Why: an L0 compaction rewrites every SST of the base level its keys overlap (with
    /// random keys, all of them), so each byte kept in the base level is rewritten once per
    /// L0 compaction, while moving it down rewrites the bytes it overlaps below: under one
    /// byte per byte when the level below is the smaller one. The scores above put a
    /// backlogged L0 first whatever the shape (right for a tree shaped as its targets, where
    /// the level below is ten times larger: plain ratios that drained the base level first
    /// wrote 1.9 times RocksDB's bytes), and with one compaction thread L0 was always first:
    /// on ADOC's SATA class (300 s of fillrandom, 1 KB values, the tuner off) the base level
    /// grew to 6.4 GB over 3.4 GB below it and a last level of 0.5 GB, and 53 GB were written
    /// into it for 18 GB of user data. From the slowdown trigger on L0 goes first again, so
    /// writers are neither slowed nor stopped by L0 for the drain's sake: an L0 compaction
    /// waits for the base level's running compactions (it needs their SSTs), and the room
    /// between the slowdown and stop triggers is left for them to end. (Draining on up to
    /// the midpoint of the two triggers let L0 reach the stop trigger on ADOC's NVMe class:
    /// 17 to 36 SSTs in 19 s, then writes stopped 6 s while L0's compaction waited.)
    fn drain_an_outgrown_base_level_first<T: Sst>(
        scored: &mut [(f64, usize)],
        levels: &[Vec<T>],
        opts: &Options,
        targets: &LevelTargets,
    ) {
        let base = targets.base_level;
        let bytes = |l: usize| levels[l].iter().map(|f| f.meta().bytes).sum::<u64>();
        if base == 0 || base + 1 >= LEVELS || levels[0].len() >= opts.level0_slowdown_writes_trigger
        {
            return;
        }
        if bytes(base) <= bytes(0) || bytes(base) <= bytes(base + 1) {
            return;
        }
        let Some(l0) = scored.iter().find(|s| s.1 == 0).map(|s| s.0) else { return };
        if let Some(b) = scored.iter_mut().find(|s| s.1 == base) {
            b.0 = b.0.max(l0 * 1.001);
        }
    }

    /// One SST of `level` (with the odd chunk when it is a neighbour) that can be compacted
    /// beside the running compactions, tried in the order of `opts.compaction_pri`.
    fn pick_from_level<T: Sst>(
        &self,
        levels: &[Vec<T>],
        level: usize,
        opts: &Options,
    ) -> Option<Plan> {
        let files = &levels[level];
        let order = match opts.compaction_pri {
            CompactionPri::MinOverlappingRatio => by_overlap_ratio(files, &levels[level + 1]),
            CompactionPri::RoundRobin => {
                let pointer = self.pointer[level].as_slice();
                let start = files
                    .iter()
                    .position(|f| key::user_key(&f.meta().smallest) > pointer)
                    .unwrap_or(0);
                (0..files.len()).map(|k| (start + k) % files.len()).collect()
            }
        };
        order.into_iter().find_map(|i| {
            if self.is_busy(files[i].meta().id) {
                return None;
            }
            let mut inputs = vec![i];
            if let Some(odd) = self.odd_chunk[level].filter(|_| opts.odd_chunk_rule) {
                let neighbours = [i.checked_sub(1), Some(i + 1)];
                for j in neighbours.into_iter().flatten().filter(|&j| j < files.len()) {
                    if files[j].meta().id == odd && !self.is_busy(odd) {
                        inputs.push(j);
                    }
                }
                inputs.sort_unstable();
            }
            self.plan(levels, level, level + 1, inputs, false)
        })
    }

    /// A step of a full compaction, once nothing else runs.
    fn pick_full<T: Sst>(&self, levels: &[Vec<T>], targets: &LevelTargets) -> Option<Plan> {
        if !self.running.is_empty() {
            return None;
        }
        if !levels[0].is_empty() {
            return self.plan(levels, 0, targets.base_level, (0..levels[0].len()).collect(), true);
        }
        let non_empty: Vec<usize> = (1..LEVELS).filter(|&l| !levels[l].is_empty()).collect();
        match non_empty.as_slice() {
            [level, _, ..] => {
                self.plan(levels, *level, level + 1, (0..levels[*level].len()).collect(), true)
            }
            _ => None,
        }
    }

    /// The plan for `inputs` of `level` with what they overlap in `output_level`, unless it
    /// would touch an SST or a key range that a running compaction holds.
    fn plan<T: Sst>(
        &self,
        levels: &[Vec<T>],
        level: usize,
        output_level: usize,
        inputs: Vec<usize>,
        full: bool,
    ) -> Option<Plan> {
        let range = KeyRange::spanning(inputs.iter().map(|&i| levels[level][i].meta()))?;
        let next: Vec<usize> = (0..levels[output_level].len())
            .filter(|&i| range.overlaps_sst(levels[output_level][i].meta()))
            .collect();
        if next.iter().any(|&i| self.is_busy(levels[output_level][i].meta().id)) {
            return None;
        }
        let whole = KeyRange::spanning(
            inputs
                .iter()
                .map(|&i| levels[level][i].meta())
                .chain(next.iter().map(|&i| levels[output_level][i].meta())),
        )?;
        let clashes = self.running.iter().any(|r| {
            (r.output_level == output_level && r.range.overlaps(&whole))
                // Never the case while the invariants hold (an SST in a running compaction's
                // range of its output level is one of its inputs), but cheap to make sure.
                || (level > 0 && r.output_level == level && r.range.overlaps(&range))
        });
        (!clashes).then_some(Plan { level, output_level, inputs, next, full })
    }

    /// An L0 compaction cut to its oldest inputs so that `fits` holds for its number of
    /// inputs and the bytes it may write (its inputs' and their overlap's below), or as near
    /// as it gets with one input left. L0 SSTs overlap, so only the oldest may go down while the newer stay above
    /// them: each SST left out is newer (by sequence) than every one kept. For a volume
    /// nearly full, where the whole of L0 with its overlap would not fit even alone and the
    /// store would stop for want of space, though part of it fits.
    pub fn cut_l0_to_fit<T: Sst>(
        &self,
        levels: &[Vec<T>],
        plan: Plan,
        fits: impl Fn(usize, u64) -> bool,
    ) -> Plan {
        let bytes = |p: &Plan| -> u64 {
            let inputs = p.inputs.iter().map(|&i| levels[p.level][i].meta().bytes);
            inputs.chain(p.next.iter().map(|&i| levels[p.output_level][i].meta().bytes)).sum()
        };
        if plan.level != 0 || plan.full {
            return plan;
        }
        let mut best = plan;
        while !fits(best.inputs.len(), bytes(&best)) && best.inputs.len() > 1 {
            // Positions ascend newest first: the first input is the newest.
            let (newest, kept) = (best.inputs[0], &best.inputs[1..]);
            let newest_seq = levels[0][newest].meta().smallest_seq;
            if kept.iter().any(|&i| levels[0][i].meta().largest_seq >= newest_seq) {
                break;
            }
            match self.plan(levels, 0, best.output_level, kept.to_vec(), false) {
                Some(cut) => best = cut,
                None => break,
            }
        }
        best
    }

    /// Enters a picked plan in the book and advances the level's round robin; returns the id
    /// that [`CompactionState::finish`] takes.
    pub fn start<T: Sst>(&mut self, levels: &[Vec<T>], plan: &Plan) -> u64 {
        let inputs = plan.inputs.iter().map(|&i| levels[plan.level][i].meta());
        let next = plan.next.iter().map(|&i| levels[plan.output_level][i].meta());
        let range = KeyRange::spanning(inputs.clone().chain(next.clone())).expect("inputs");
        if plan.level > 0 {
            let largest = inputs.clone().map(|m| key::user_key(&m.largest)).max().expect("inputs");
            self.pointer[plan.level] = largest.to_vec();
        }
        let id = self.next_id;
        self.next_id += 1;
        self.running.push(Running {
            id,
            level: plan.level,
            output_level: plan.output_level,
            ssts: inputs.chain(next).map(|m| m.id).collect(),
            range,
        });
        self.peak_running = self.peak_running.max(self.running.len());
        id
    }

    /// Takes a finished (committed or failed) compaction out of the book, and forgets odd
    /// chunks that are no longer in their level (absorbed or moved down).
    pub fn finish<T: Sst>(&mut self, id: u64, levels: &[Vec<T>]) {
        self.running.retain(|r| r.id != id);
        for (l, odd) in self.odd_chunk.iter_mut().enumerate() {
            if odd.is_some_and(|o| !levels[l].iter().any(|f| f.meta().id == o)) {
                *odd = None;
            }
        }
    }

    /// Whether an odd chunk spanning `chunk` may stay in `level` when compaction `id`, which
    /// removes the SSTs `removed`, commits: the level has no other odd chunk, and the chunk
    /// overlaps nothing left in the level nor the range of any other compaction into it.
    pub fn may_keep_odd_chunk<T: Sst>(
        &self,
        id: u64,
        levels: &[Vec<T>],
        level: usize,
        removed: &[u64],
        chunk: &KeyRange,
    ) -> bool {
        let other_odd = self.odd_chunk[level].is_some_and(|o| !removed.contains(&o));
        let overlaps_level = levels[level]
            .iter()
            .map(Sst::meta)
            .any(|m| !removed.contains(&m.id) && chunk.overlaps_sst(m));
        let overlaps_running = self
            .running
            .iter()
            .any(|r| r.id != id && r.output_level == level && r.range.overlaps(chunk));
        !other_odd && !overlaps_level && !overlaps_running
    }

    /// Records SST `sst` as the odd chunk of `level`.
    pub fn set_odd_chunk(&mut self, level: usize, sst: u64) {
        self.odd_chunk[level] = Some(sst);
        self.odd_chunks_kept += 1;
    }
}

/// Indexes of `files` (one level, sorted by key, disjoint) ordered by the bytes of `below`
/// (the next level, also sorted and disjoint) that each overlaps, per byte of its own:
/// smallest first, ties in key order. One pass over both levels: both are sorted, and each SST
/// of `below` overlaps a run of consecutive SSTs of `files`.
fn by_overlap_ratio<T: Sst>(files: &[T], below: &[T]) -> Vec<usize> {
    let mut overlap = vec![0u64; files.len()];
    let mut first = 0;
    let user = key::user_key;
    for b in below.iter().map(Sst::meta) {
        // SSTs wholly before `b` overlap nothing from here on.
        while first < files.len() && user(&files[first].meta().largest) < user(&b.smallest) {
            first += 1;
        }
        let mut i = first;
        while i < files.len() && user(&files[i].meta().smallest) <= user(&b.largest) {
            overlap[i] += b.bytes;
            i += 1;
        }
    }
    let mut order: Vec<usize> = (0..files.len()).collect();
    // Compare overlap_a / size_a with overlap_b / size_b without division: cross-multiply in
    // u128 (sizes are at least one slot, so never zero).
    order.sort_by(|&a, &b| {
        let (sa, sb) = (files[a].meta().bytes.max(1), files[b].meta().bytes.max(1));
        (u128::from(overlap[a]) * u128::from(sb)).cmp(&(u128::from(overlap[b]) * u128::from(sa)))
    });
    order
}

#[cfg(test)]
mod tests {
    use shale_space::Extent;

    use super::*;
    use crate::key::Kind;

    impl Sst for SstMeta {
        fn meta(&self) -> &SstMeta {
            self
        }
    }

    /// An SST of `mib` MiB over the user keys `lo..=hi`.
    fn sst(id: u64, lo: &str, hi: &str, mib: u64) -> SstMeta {
        SstMeta {
            id,
            extent: Extent::fast(id as u32, 1),
            bytes: mib << 20,
            entries: 1,
            smallest_seq: 1,
            largest_seq: 1,
            smallest: key::encode(lo.as_bytes(), 1, Kind::Put),
            largest: key::encode(hi.as_bytes(), 1, Kind::Put),
        }
    }

    fn opts() -> Options {
        Options {
            max_bytes_for_level_base: 4 << 20,
            level0_file_num_compaction_trigger: 2,
            dynamic_level_bytes: false,
            ..Options::default()
        }
    }

    fn targets(levels: &[Vec<SstMeta>], o: &Options) -> LevelTargets {
        let sizes: Vec<u64> = levels.iter().map(|l| l.iter().map(|m| m.bytes).sum()).collect();
        LevelTargets::compute(o, &sizes)
    }

    fn ids(levels: &[Vec<SstMeta>], level: usize, at: &[usize]) -> Vec<u64> {
        at.iter().map(|&i| levels[level][i].id).collect()
    }

    /// L1 (6 MiB) and L2 (65 MiB) both over their targets (4 and 40 MiB), L3 below its.
    fn busy_tree() -> Vec<Vec<SstMeta>> {
        let mut levels = vec![Vec::new(); LEVELS];
        levels[1] = vec![sst(10, "a", "c", 2), sst(11, "d", "f", 2), sst(12, "g", "i", 2)];
        // a..az, c..cz, e..ez, ..., y..yz
        levels[2] = (0..13u64)
            .map(|i| {
                let lo = format!("{}", (b'a' + i as u8 * 2) as char);
                let hi = format!("{}z", (b'a' + i as u8 * 2) as char);
                sst(20 + i, &lo, &hi, 5)
            })
            .collect();
        levels[3] = vec![sst(40, "a", "f", 10), sst(41, "g", "m", 10), sst(42, "n", "z", 10)];
        levels
    }

    /// An L0 SST of `mib` MiB over `lo..=hi` holding the sequence numbers `seqs`.
    fn l0(id: u64, lo: &str, hi: &str, mib: u64, seqs: (u64, u64)) -> SstMeta {
        SstMeta { smallest_seq: seqs.0, largest_seq: seqs.1, ..sst(id, lo, hi, mib) }
    }

    #[test]
    fn an_l0_compaction_too_big_for_the_room_keeps_its_oldest_ssts_that_fit() {
        let mut levels = vec![Vec::new(); LEVELS];
        // Newest first: 3 (seqs 21..30), 2 (11..20), 1 (1..10), each over "a".."m".
        levels[0] = vec![
            l0(3, "a", "m", 2, (21, 30)),
            l0(2, "a", "m", 2, (11, 20)),
            l0(1, "a", "m", 2, (1, 10)),
        ];
        levels[1] = vec![sst(10, "a", "f", 1), sst(11, "g", "m", 1), sst(12, "n", "z", 1)];
        let book = CompactionState::default();
        let whole = book.plan(&levels, 0, 1, vec![0, 1, 2], false).unwrap();
        // All of it: 6 MiB of L0 and 2 of L1.
        assert_eq!(book.cut_l0_to_fit(&levels, whole.clone(), |_, b| b <= 8 << 20), whole);
        // Room for 6 MiB: the two oldest with their overlap below.
        let cut = book.cut_l0_to_fit(&levels, whole.clone(), |_, b| b <= 6 << 20);
        assert_eq!(
            (ids(&levels, 0, &cut.inputs), ids(&levels, 1, &cut.next)),
            (vec![2, 1], vec![10, 11])
        );
        // No room at all: as near as it gets, the oldest alone.
        let cut = book.cut_l0_to_fit(&levels, whole.clone(), |_, _| false);
        assert_eq!(ids(&levels, 0, &cut.inputs), vec![1]);
        // An SST left out must be newer than every one kept: where sequences interleave
        // (3 holds an entry older than one of 2's), 3 stays with 2.
        levels[0][0].smallest_seq = 15;
        let cut = book.cut_l0_to_fit(&levels, whole.clone(), |_, _| false);
        assert_eq!(cut, whole);
        // Other levels' compactions are never cut.
        let deeper = book.plan(&levels, 1, 2, vec![0], false).unwrap();
        assert_eq!(book.cut_l0_to_fit(&levels, deeper.clone(), |_, _| false), deeper);
    }

    #[test]
    fn disjoint_compactions_run_side_by_side() {
        let (o, levels) = (opts(), busy_tree());
        let t = targets(&levels, &o);
        let mut book = CompactionState::default();
        let mut picked = Vec::new();
        while let Some(p) = book.pick(&levels, &o, &t, false) {
            book.start(&levels, &p);
            picked.push(p);
            assert!(picked.len() < 20, "the picker keeps picking: {picked:?}");
        }
        // L1's first SST into L2, then three SSTs of L2 into the three SSTs of L3.
        assert_eq!(picked.len(), 4, "{picked:?}");
        // No SST in two compactions, and no two output ranges into one level overlapping.
        let mut seen = std::collections::BTreeSet::new();
        for p in &picked {
            for id in ids(&levels, p.level, &p.inputs).into_iter().chain(ids(
                &levels,
                p.output_level,
                &p.next,
            )) {
                assert!(seen.insert(id), "SST {id} picked twice: {picked:?}");
            }
        }
        for (i, a) in book.running.iter().enumerate() {
            for b in &book.running[i + 1..] {
                assert!(
                    a.output_level != b.output_level || !a.range.overlaps(&b.range),
                    "{a:?} and {b:?} write overlapping ranges into one level"
                );
            }
        }
        assert_eq!(book.peak_running(), picked.len());
    }

    #[test]
    fn l0_compactions_are_exclusive_and_wait_for_their_base_ssts() {
        let o = opts();
        let mut levels = vec![Vec::new(); LEVELS];
        levels[0] = vec![sst(5, "b", "e", 1), sst(4, "a", "c", 1)];
        levels[1] = vec![sst(1, "a", "b", 1), sst(2, "x", "y", 1)];
        let t = targets(&levels, &o);
        let mut book = CompactionState::default();
        let p = book.pick(&levels, &o, &t, false).unwrap();
        assert_eq!(
            (p.level, p.output_level, p.inputs.clone(), p.next.clone()),
            (0, 1, vec![0, 1], vec![0])
        );
        book.start(&levels, &p);
        // A third L0 SST arrives while the first compaction runs: it waits its turn.
        levels[0].insert(0, sst(6, "m", "n", 1));
        levels[0].insert(0, sst(7, "m", "n", 1));
        assert_eq!(book.pick(&levels, &o, &t, false), None);
        // And an L0 compaction does not start while an SST of the base level it needs is busy.
        let mut book = CompactionState::default();
        book.start(
            &levels,
            &Plan { level: 1, output_level: 2, inputs: vec![0], next: vec![], full: false },
        );
        assert_eq!(book.pick(&levels, &o, &t, false), None);
    }

    #[test]
    fn the_sst_with_the_least_overlap_below_per_byte_goes_first() {
        let o = Options { max_bytes_for_level_base: 1 << 20, ..opts() };
        let mut levels = vec![Vec::new(); LEVELS];
        // a-c (2 MiB) overlaps 8 MiB below, d-f (1 MiB) 5 MiB, g-k (4 MiB) 3 MiB: ratios
        // 4, 5 and 0.75.
        levels[1] = vec![sst(1, "a", "c", 2), sst(2, "d", "f", 1), sst(3, "g", "k", 4)];
        levels[2] = vec![
            sst(11, "a", "b", 4),
            sst(12, "c", "d", 4),
            sst(13, "e", "g", 1),
            sst(14, "h", "z", 2),
        ];
        assert_eq!(by_overlap_ratio(&levels[1], &levels[2]), vec![2, 0, 1]);
        let t = targets(&levels, &o);
        let mut book = CompactionState::default();
        let p = book.pick(&levels, &o, &t, false).unwrap();
        assert_eq!((ids(&levels, 1, &p.inputs), ids(&levels, 2, &p.next)), (vec![3], vec![13, 14]));
        // While it runs (e..z of L2), the next best that stays clear of it: a-c.
        book.start(&levels, &p);
        let p = book.pick(&levels, &o, &t, false).unwrap();
        assert_eq!((ids(&levels, 1, &p.inputs), ids(&levels, 2, &p.next)), (vec![1], vec![11, 12]));
        // In key order instead, a-c first.
        let rr = Options { compaction_pri: CompactionPri::RoundRobin, ..o.clone() };
        let p = CompactionState::default().pick(&levels, &rr, &t, false).unwrap();
        assert_eq!(ids(&levels, 1, &p.inputs), vec![1]);
    }

    #[test]
    fn a_backlogged_l0_goes_before_a_base_level_over_its_target() {
        // Base level L5 (target 4 MiB, the floor) holds 10 MiB; L0 has reached its trigger
        // with 8 MiB. Plain ratios score L5 at 2.5 and L0 at 1.0, and L5 went first; RocksDB's
        // dynamic scores put L0 first (1.01, as it holds more than the base size, scaled by
        // 10) and score L5 against its target plus the 8 MiB on their way down (10 / 12 x 10).
        let mut levels = vec![Vec::new(); LEVELS];
        levels[0] = vec![sst(10, "a", "m", 4), sst(11, "b", "z", 4)];
        levels[5] = vec![sst(5, "a", "f", 5), sst(6, "g", "p", 5)];
        levels[6] = vec![sst(1, "a", "z", 40)];
        for (dynamic, first) in [(true, 0), (false, 5)] {
            let o = Options { dynamic_level_bytes: dynamic, ..opts() };
            let t = if dynamic {
                targets(&levels, &o)
            } else {
                // Static sizing with the same shape: L0 into L5 is what the test is about.
                let mut t = targets(&levels, &Options { dynamic_level_bytes: true, ..o.clone() });
                t.bytes[5] = 4 << 20;
                t
            };
            assert_eq!((t.base_level, t.bytes[5]), (5, 4 << 20));
            let c = CompactionState::default();
            let scores = c.scores(&levels, &o, &t);
            let best = scores.iter().max_by(|a, b| a.0.total_cmp(&b.0)).unwrap();
            assert_eq!(best.1, first, "dynamic {dynamic}: {scores:?}");
            let p = c.pick(&levels, &o, &t, false).unwrap();
            assert_eq!(p.level, first);
            if dynamic {
                let l5 = scores.iter().find(|s| s.1 == 5).unwrap().0;
                assert!((l5 - 10.0 / 12.0 * 10.0).abs() < 1e-9, "{scores:?}");
            }
        }
        // With L0 compacting, L5 is still due and goes on beside it.
        let o = Options { dynamic_level_bytes: true, ..opts() };
        let t = targets(&levels, &o);
        let mut c = CompactionState::default();
        let first = c.pick(&levels, &o, &t, false).unwrap();
        assert_eq!(first.level, 0);
        c.start(&levels, &first);
        assert!(c.scores(&levels, &o, &t).iter().all(|s| s.1 != 0));
    }

    #[test]
    fn an_upside_down_base_level_drains_before_l0() {
        // L0's backlog has poured 12 MiB into the base level L5, over 3 MiB in L6 and 8 in
        // L0: each L0 compaction would rewrite all 12, while moving L5 down rewrites less
        // than a byte per byte. So L5 goes first, one SST at a time, L0 waiting its turn.
        let o = Options { dynamic_level_bytes: true, ..opts() };
        let mut levels = vec![Vec::new(); LEVELS];
        levels[0] = vec![sst(20, "a", "z", 4), sst(21, "b", "y", 4)];
        levels[5] = vec![sst(5, "a", "f", 4), sst(6, "g", "p", 4), sst(7, "q", "z", 4)];
        levels[6] = vec![sst(1, "a", "z", 3)];
        let t = targets(&levels, &o);
        assert_eq!(t.base_level, 5, "{t:?}");
        let mut book = CompactionState::default();
        let p = book.pick(&levels, &o, &t, false).unwrap();
        assert_eq!((p.level, p.output_level), (5, 6), "{:?}", book.scores(&levels, &o, &t));
        book.start(&levels, &p);
        // L0 cannot start beside it (it needs every SST of L5), nor can another SST of L5
        // (L6's one SST is busy).
        assert_eq!(book.pick(&levels, &o, &t, false), None);
        // Right side up again (L5 no larger than L0), L0 goes first.
        levels[5].truncate(2);
        let t = targets(&levels, &o);
        let p = CompactionState::default().pick(&levels, &o, &t, false).unwrap();
        assert_eq!(p.level, 0);
        // And from L0's slowdown trigger (20) on, L0 goes first however large the base
        // level.
        levels[5].push(sst(7, "q", "z", 40));
        levels[0] = (0..20).map(|i| sst(100 + i, "a", "z", 1)).collect();
        let t = targets(&levels, &o);
        let p = CompactionState::default().pick(&levels, &o, &t, false).unwrap();
        assert_eq!(p.level, 0);
        levels[0].truncate(19);
        let p = CompactionState::default().pick(&levels, &o, &t, false).unwrap();
        assert_eq!(p.level, 5);
    }

    #[test]
    fn a_waiting_l0_compaction_holds_back_new_ones_out_of_the_base_level() {
        // L0 ranks first (13.3 against L5's 5.0) but needs L5's a-c, which a compaction into
        // L6 holds. L5's g-k could go down beside it, but would keep L0 waiting longer.
        let o = Options { dynamic_level_bytes: true, ..opts() };
        let mut levels = vec![Vec::new(); LEVELS];
        levels[0] = vec![sst(20, "a", "z", 4), sst(21, "b", "y", 4)];
        levels[5] = vec![
            sst(5, "a", "c", 2),
            sst(6, "d", "f", 2),
            sst(7, "g", "k", 2),
            sst(8, "m", "p", 2),
        ];
        levels[6] = vec![sst(1, "a", "f", 10), sst(2, "g", "p", 10), sst(3, "q", "z", 20)];
        let t = targets(&levels, &o);
        let mut book = CompactionState::default();
        book.start(
            &levels,
            &Plan { level: 5, output_level: 6, inputs: vec![0], next: vec![0], full: false },
        );
        assert_eq!(book.pick(&levels, &o, &t, false), None, "{:?}", book.scores(&levels, &o, &t));
        // With L0 empty, L5's g-k goes (d-f needs L6's busy a-f).
        levels[0].clear();
        let p = book.pick(&levels, &o, &t, false).unwrap();
        assert_eq!((p.level, ids(&levels, 5, &p.inputs)), (5, vec![7]));
    }

    #[test]
    fn dynamic_sizing_sends_l0_to_the_base_level() {
        let o = Options { dynamic_level_bytes: true, ..opts() };
        let mut levels = vec![Vec::new(); LEVELS];
        levels[0] = vec![sst(3, "a", "c", 1), sst(2, "b", "d", 1)];
        let t = targets(&levels, &o);
        let p = CompactionState::default().pick(&levels, &o, &t, false).unwrap();
        assert_eq!((p.level, p.output_level), (0, LEVELS - 1));
        levels[6] = vec![sst(1, "a", "z", 30)];
        let t = targets(&levels, &o);
        assert_eq!(t.base_level, 5);
        let p = CompactionState::default().pick(&levels, &o, &t, false).unwrap();
        assert_eq!((p.level, p.output_level, p.next.clone()), (0, 5, vec![]));
    }

    #[test]
    fn the_odd_chunk_travels_with_its_neighbour() {
        // In key order, so the neighbour is picked first.
        let o = Options { compaction_pri: CompactionPri::RoundRobin, ..opts() };
        let mut levels = vec![Vec::new(); LEVELS];
        levels[1] = vec![sst(1, "a", "c", 2), sst(2, "d", "e", 1), sst(3, "f", "h", 2)];
        levels[2] = vec![sst(9, "a", "b", 2)];
        let t = targets(&levels, &o);
        let mut book = CompactionState::default();
        book.set_odd_chunk(1, 2);
        let p = book.pick(&levels, &o, &t, false).unwrap();
        assert_eq!(ids(&levels, 1, &p.inputs), vec![1, 2]);
        assert_eq!(ids(&levels, 2, &p.next), vec![9]);
        // Without the rule it is an SST like any other.
        let plain = Options { odd_chunk_rule: false, ..o.clone() };
        let p = book.pick(&levels, &plain, &t, false).unwrap();
        assert_eq!(ids(&levels, 1, &p.inputs), vec![1]);
        // It may stay behind only where it overlaps nothing left in the level, and only as the
        // level's one odd chunk.
        let chunk = |lo: &str, hi: &str| KeyRange { smallest: lo.into(), largest: hi.into() };
        let id = book.start(&levels, &p);
        assert!(book.may_keep_odd_chunk(id, &levels, 1, &[1, 2, 9], &chunk("b", "e")));
        assert!(!book.may_keep_odd_chunk(id, &levels, 1, &[1, 9], &chunk("b", "c")), "two odd");
        assert!(!book.may_keep_odd_chunk(id, &levels, 1, &[1, 2, 9], &chunk("b", "f")), "overlap");
        book.finish(id, &levels);
        assert_eq!(book.odd_chunk(1), Some(2), "still in L1");
        levels[1].remove(1);
        book.finish(0, &levels);
        assert_eq!(book.odd_chunk(1), None, "absorbed");
    }

    #[test]
    fn disjoint_l0_ssts_move_down_and_overlapping_ones_are_merged() {
        let mut levels: Vec<Vec<SstMeta>> = vec![Vec::new(); LEVELS];
        levels[0] = vec![sst(4, "m", "p", 1), sst(3, "a", "c", 1), sst(2, "d", "l", 1)];
        let plan = |inputs: Vec<usize>, next: Vec<usize>| Plan {
            level: 0,
            output_level: 6,
            inputs,
            next,
            full: false,
        };
        assert!(plan(vec![0, 1, 2], vec![]).is_trivial_move(&levels), "disjoint, in any order");
        levels[6] = vec![sst(1, "x", "z", 1)];
        assert!(!plan(vec![0, 1, 2], vec![0]).is_trivial_move(&levels), "something below");
        levels[0].push(sst(5, "c", "e", 1)); // overlaps "a".."c" and "d".."l"
        assert!(!plan(vec![0, 1, 2, 3], vec![]).is_trivial_move(&levels), "overlapping");
        levels[0][3] = sst(5, "l", "l", 1); // touches "d".."l" at "l": counted as overlapping
        assert!(!plan(vec![0, 1, 2, 3], vec![]).is_trivial_move(&levels), "touching");
        assert!(plan(vec![3], vec![]).is_trivial_move(&levels), "one SST");
    }

    #[test]
    fn a_full_compaction_runs_alone_and_ends_with_one_level() {
        let o = opts();
        let mut levels = vec![Vec::new(); LEVELS];
        levels[2] = vec![sst(1, "a", "c", 1)];
        levels[4] = vec![sst(2, "b", "z", 1)];
        let t = targets(&levels, &o);
        let mut book = CompactionState::default();
        let p = book.pick(&levels, &o, &t, true).unwrap();
        assert_eq!((p.level, p.output_level, p.full), (2, 3, true));
        assert!(p.is_trivial_move(&levels));
        book.start(&levels, &p);
        assert_eq!(book.pick(&levels, &o, &t, true), None, "one step at a time");
        levels[2].clear();
        assert_eq!(CompactionState::default().pick(&levels, &o, &t, true), None, "done");
    }
}
