//! Leveled compaction: running the compaction the picker chose (`picker.rs`) and committing
//! it as one version edit.
//!
//! 0. Room: a compaction reserves room on the volume for its outputs (at most its inputs'
//!    bytes); one that would not fit beside the running ones' reservations and the
//!    memtables' flushes is not started until a running one ends (`room_for_compaction`).
//! 1. A trivial move (nothing below to merge with) commits the inputs at the output level,
//!    unchanged.
//! 2. Otherwise the inputs and their overlap below are merged, keeping every version a live
//!    snapshot needs and dropping tombstones only where no deeper level may hold the key.
//!    Outputs are cut between user keys, before the entry that would take the SST past the
//!    target size in whole slots (`SstBuilder::bytes_after_adding`).
//!    Range tombstones: a point entry older than a tombstone of the inputs over its key is
//!    dropped when no snapshot lies between them (the oldest snapshot sees the tombstone); a
//!    tombstone goes to every output whose key range it meets, clipped to that range, so the
//!    outputs' bounds stay disjoint; it is dropped when no snapshot predates it and no deeper
//!    level may hold a key it covers.
//! 3. The commit, under the state lock: LDS's odd-chunk rule may keep the last, part-filled
//!    output in the source level (`keeps_odd_chunk`); the edit is committed; the compaction
//!    leaves the picker's book. Inputs are freed only after the commit, once no reader holds
//!    them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{self, Kind, SEQ_MAX};
use crate::level_targets::LevelTargets;
use crate::merge::MergingIterator;
use crate::range_del::{self, Fragments, RangeTombstone};
use crate::version::{HandleIter, LevelIterator, SstHandle};
use crate::version_edit::{SstMeta, VersionEdit};

use super::output::MadeBy;
use super::picker::{KeyRange, Plan};
use super::{Inner, State};

/// Padding (unused bytes of its last slot) from which the last output of a merge counts as
/// part-filled, in eighths of a slot: only then is keeping it back as an odd chunk worth a
/// later rewrite.
const ODD_CHUNK_PADDING_EIGHTHS_MIN: u64 = 1;

/// Entries a compaction merges between two looks at `Inner::closing`: a few milliseconds of
/// merging, and an atomic load each.
const CLOSING_CHECK_ENTRIES: u64 = 1024;

/// Counters of the compactions' I/O class, for `Stats::compactions_idle_io` and
/// `Stats::compaction_io_raised`.
#[derive(Debug, Default)]
pub(super) struct CompactionIoCounts {
    pub(super) idle: AtomicU64,
    pub(super) raised: AtomicU64,
}

/// A running compaction's I/O class (`Options::idle_compaction_io`, docs/lsm.md "Compactions
/// in the idle I/O class"): the idle class if the store let compactions yield when it began,
/// until a look finds the store behind; from then on, to its end, the thread's own class
/// (the rest of the compaction is what catches the store up, so it does not go back to
/// idle). Dropped before the commit, whose version-log write a writer may be waiting for.
struct CompactionIo {
    idle: Option<shale_io::IdleIo>,
}

impl Inner {
    fn compaction_io(&self) -> CompactionIo {
        if self.compactions_yield.load(Ordering::Relaxed) {
            let guard = shale_io::IdleIo::enter();
            if guard.lowered() {
                self.compaction_io.idle.fetch_add(1, Ordering::Relaxed);
                return CompactionIo { idle: Some(guard) };
            }
        }
        CompactionIo { idle: None }
    }

    /// Back to the thread's own class if the store fell behind since the compaction began.
    fn recheck_compaction_io(&self, io: &mut CompactionIo) {
        if io.idle.is_some() && !self.compactions_yield.load(Ordering::Relaxed) {
            io.idle = None;
            self.compaction_io.raised.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// How a compaction that did not fail ended.
enum Ended {
    Committed,
    /// Stopped part-way because the store closes: nothing committed, its outputs given back.
    Abandoned,
}

/// A compaction the picker chose, with its SSTs.
pub(super) struct Compaction {
    /// The picker's id for it.
    id: u64,
    level: usize,
    output_level: usize,
    inputs: Vec<Arc<SstHandle>>,
    next: Vec<Arc<SstHandle>>,
    /// Part of a full compaction: no odd chunk stays behind.
    full: bool,
    trivial_move: bool,
    /// The tier its outputs go to, where its room is reserved.
    tier: shale_space::Tier,
    /// Bytes of room still reserved for its outputs (`State::compaction_room_reserved`):
    /// spent as its outputs are written (`spend_room`), the rest given back when it ends,
    /// however it ends.
    reserved_left: std::cell::Cell<u64>,
    /// Compactions committed when it started (`State::compactions`): one committed since
    /// then freed room, so a run out of room is worth another try (`run_compaction`).
    committed_before: u64,
    /// Dropped SSTs given back when it started (`HeldRoom::releases`): room that came back
    /// during the run is worth another try too.
    releases_before: u64,
}

/// The rule of `Inner::flush_room`: room for the flushes of the active memtable and
/// `sealed` more, each reserving what a flush of a full write buffer does
/// (`flush_reserve_for`: a flush then finds what a compaction left it).
fn flush_room_for(sealed: usize, write_buffer_bytes: u64, slot_bytes: u64) -> u64 {
    let one = super::flush_reserve_for(write_buffer_bytes, slot_bytes);
    (sealed as u64 + 1).saturating_mul(one)
}

/// The rule of `Inner::room_for_compaction`: whether a compaction whose outputs may take
/// `reserve` bytes starts beside `running` compactions holding `reserved` bytes, with
/// `flush_bytes` kept for the memtables, on a tier with `room` free bytes (`None`: unknown,
/// unbounded).
fn fits_in_room(
    reserve: u64,
    reserved: u64,
    running: usize,
    flush_bytes: u64,
    room: Option<u64>,
) -> bool {
    if reserve == 0 || running == 0 {
        return true;
    }
    let Some(room) = room else { return true };
    reserve.saturating_add(reserved).saturating_add(flush_bytes) <= room
}

impl Inner {
    /// Picks the next compaction and enters it in the book, or `None` if nothing is due or
    /// nothing due can run beside the running ones.
    pub(super) fn pick_compaction(&self, st: &mut State) -> Option<Compaction> {
        // After a compaction ran out of room: none starts until a running one commits, or
        // none runs.
        if let Some(at) = st.out_of_room_at {
            if st.compactions == at && st.compaction.running() > 0 {
                return None;
            }
            st.out_of_room_at = None;
        }
        let v = st.version.clone();
        let sizes: Vec<u64> = (0..v.levels.len()).map(|l| v.level_bytes(l)).collect();
        let targets = LevelTargets::compute(&self.opts, &sizes);
        let plan = st
            .compaction
            .pick(&v.levels, &self.opts, &targets, st.full_compaction)
            .or_else(|| self.bottom_rewrite(st, &v.levels))?;
        let take = |level: usize, at: &[usize]| -> Vec<Arc<SstHandle>> {
            at.iter().map(|&i| v.levels[level][i].clone()).collect()
        };
        let target_tier = self.tier_for(plan.output_level, 0);
        let plan = self.cut_to_room(st, &v.levels, plan, target_tier);
        let inputs = take(plan.level, &plan.inputs);
        let next = take(plan.output_level, &plan.next);
        // An SST moves down without a rewrite only when it is on the tier its new level
        // writes to: otherwise the move is where it crosses the level pointer (RocksDB does
        // not move a file trivially between paths either).
        let same_tier = inputs.iter().all(|f| f.meta.extent.tier == target_tier);
        // A rewrite in place is the point of its compaction (the filter's pass).
        let trivial_move =
            same_tier && plan.level != plan.output_level && plan.is_trivial_move(&v.levels);
        // What its outputs may take (`output_room`); a move writes nothing.
        let reserve = if trivial_move {
            0
        } else {
            self.output_room(inputs.iter().chain(&next).map(|f| f.meta.bytes).sum())
        };
        if !plan.full && !self.room_for_compaction(st, reserve, target_tier) {
            st.compactions_deferred_for_room += 1;
            return None;
        }
        let id = st.compaction.start(&v.levels, &plan);
        st.compaction_room_reserved[target_tier.index()] += reserve;
        Some(Compaction {
            id,
            level: plan.level,
            output_level: plan.output_level,
            next,
            full: plan.full,
            trivial_move,
            inputs,
            tier: target_tier,
            reserved_left: std::cell::Cell::new(reserve),
            committed_before: st.compactions,
            releases_before: self.pool.held_room().releases(),
        })
    }

    /// An L0 compaction to start with none running, cut to its oldest SSTs where all of L0
    /// with its overlap below would not fit in the room left beside the memtables' flushes
    /// (`CompactionState::cut_l0_to_fit`): a part that fits drains L0 where the whole would
    /// fail for want of space and stop the store. Any other plan as it is.
    fn cut_to_room(
        &self,
        st: &State,
        levels: &[Vec<Arc<SstHandle>>],
        plan: Plan,
        tier: shale_space::Tier,
    ) -> Plan {
        if plan.level != 0 || plan.full || plan.inputs.len() < 2 || st.compaction.running() > 0 {
            return plan;
        }
        let Some(room) = self.volume.tier_room(tier) else { return plan };
        let flushes = self.flush_room(st);
        let inputs_max = st.l0_inputs_max.unwrap_or(usize::MAX);
        st.compaction.cut_l0_to_fit(levels, plan, |inputs, bytes| {
            inputs <= inputs_max && self.output_room(bytes).saturating_add(flushes) <= room
        })
    }

    /// Room kept for the flushes that may come while a compaction runs: the memtables, the
    /// active one and those sealed. Not the flushes that may follow them until L0 reaches
    /// its stop: room for those (36 memtables by default) would cut every L0 compaction of
    /// a volume of a few GiB to one SST. A flush that finds no room waits for a compaction
    /// to end instead (`flush_when_room`), and an L0 compaction that runs out of room alone
    /// runs again smaller (`run_compaction`).
    fn flush_room(&self, st: &State) -> u64 {
        let slot = self.volume.layout().slot_bytes;
        flush_room_for(st.imm.len(), self.write_buffer_bytes() as u64, slot)
    }

    /// Room on the volume that the outputs of a compaction of `input_bytes` may hold at
    /// once: the bytes of its inputs (a merge drops entries, never adds), each output's
    /// last slot partly used, and the slots reserved ahead for the output being built
    /// (`compact`: the cut size and two slots). Counting the inputs' bytes alone fell short
    /// by a third on small SSTs, and a compaction that seemed to fit ran out of space.
    fn output_room(&self, input_bytes: u64) -> u64 {
        let slot = self.volume.layout().slot_bytes;
        let cut = self.output_cut_bytes();
        let outputs = input_bytes.div_ceil(cut);
        input_bytes
            .saturating_add(outputs.saturating_mul(slot))
            .saturating_add(cut.min(input_bytes) + 2 * slot)
    }

    /// Whether a compaction whose outputs may take `reserve` bytes of `tier` starts now.
    /// Compactions reserve room for their outputs (RocksDB's `SstFileManager` does the
    /// same): one that would not fit beside the running ones' reservations and room for the
    /// memtables to flush (the active one and those sealed) waits for a running one to end,
    /// rather than fail for want of space, which stops the store. With none running it
    /// starts anyway: nothing would free room, and its reservation is an upper bound. A
    /// running compaction's reservation shrinks as its outputs are written (`spend_room`);
    /// the output being built is counted twice (its slots are taken ahead, and reserved):
    /// conservative, so room that is short defers more than it must. Full compactions (`compact_range`) never
    /// wait. A volume whose room is unbounded (a growable device that cannot say) never
    /// defers.
    fn room_for_compaction(&self, st: &State, reserve: u64, tier: shale_space::Tier) -> bool {
        // Asked only when it could matter: the room is a syscall for a volume file.
        if reserve == 0 || st.compaction.running() == 0 {
            return true;
        }
        let flushes = self.flush_room(st);
        fits_in_room(
            reserve,
            st.compaction_room_reserved[tier.index()],
            st.compaction.running(),
            flushes,
            self.volume.tier_room(tier),
        )
    }

    /// The last step of a full compaction with a compaction filter: the one level that holds
    /// everything rewritten in place, so that the filter sees the values no merge would pass
    /// through again (RocksDB's `kIfHaveCompactionFilter` for its bottommost level). Once per
    /// `compact_range`, when nothing else runs.
    fn bottom_rewrite(&self, st: &mut State, levels: &[Vec<Arc<SstHandle>>]) -> Option<Plan> {
        if !st.full_compaction || !st.rewrite_bottom || st.compaction.running() > 0 {
            return None;
        }
        let non_empty: Vec<usize> = (0..levels.len()).filter(|&l| !levels[l].is_empty()).collect();
        match non_empty.as_slice() {
            // Everything in one level: the full compaction's merges are done; this is its
            // last step, taken once.
            &[level] if level > 0 => {
                st.rewrite_bottom = false;
                Some(Plan {
                    level,
                    output_level: level,
                    inputs: (0..levels[level].len()).collect(),
                    next: Vec::new(),
                    full: true,
                })
            }
            // An empty store: nothing to rewrite.
            [] => {
                st.rewrite_bottom = false;
                None
            }
            // Merges still to come (the picker takes them): the rewrite waits for them.
            _ => None,
        }
    }

    /// Size compaction outputs are cut at: the target file size in whole slots, at least one.
    fn output_cut_bytes(&self) -> u64 {
        let slot = self.volume.layout().slot_bytes;
        let target = self.target_file_bytes.load(std::sync::atomic::Ordering::Relaxed);
        (target / slot).max(1) * slot
    }

    /// Runs a compaction and commits it; a failed one leaves the book too (the store stops),
    /// as does one abandoned because the store closes.
    /// Runs a compaction the picker chose. One that runs out of room on the volume while
    /// others run has given back its outputs (`compact`) and is not a failure: it is picked
    /// again once a running one ends and frees its inputs (`out_of_room_at`). Alone, an L0
    /// compaction runs again with fewer inputs, and any waits for room that readers of
    /// dropped SSTs hold (`wait_for_held_room`). Only with none left to free room, and none
    /// held, does the store stop for want of it.
    pub(super) fn run_compaction(&self, c: Compaction) -> Result<()> {
        let committed_before = c.committed_before;
        let (level, inputs) = (c.level, c.inputs.len());
        let result = self.compact(&c);
        if !matches!(result, Ok(Ended::Committed)) {
            let mut st = self.state.lock();
            let version = st.version.clone();
            st.compaction.finish(c.id, &version.levels);
            st.compaction_room_reserved[c.tier.index()] -= c.reserved_left.take();
            self.cv.notify_all();
            if let Err(Error::NoSpace(why)) = &result {
                if st.compaction.running() > 0 || st.compactions > committed_before {
                    log::info!(
                        "a compaction out of room ({why}) runs again when a running one ends"
                    );
                    st.retried_for_room += 1;
                    st.out_of_room_at = Some(st.compactions);
                    return Ok(());
                }
                // Alone, with nothing committed meanwhile: the flushes took the room it
                // counted on. An L0 compaction runs again with fewer inputs (`cut_to_room`);
                // each try has fewer, so the tries end.
                if level == 0 && inputs > 1 && st.l0_inputs_max.is_none_or(|max| inputs <= max) {
                    log::info!(
                        "an L0 compaction of {inputs} SSTs out of room ({why}) runs again with fewer"
                    );
                    st.retried_for_room += 1;
                    st.l0_inputs_max = Some(inputs - 1);
                    return Ok(());
                }
                // Room that readers of dropped SSTs hold comes back as they end: waited for,
                // where a full store would stop.
                if self.wait_for_held_room(&mut st, c.tier, c.releases_before, why) {
                    return Ok(());
                }
            }
        }
        result.map(|_| ())
    }

    /// Counts `bytes` of outputs written by `c` off its reservation: the room they take is
    /// taken now, not reserved (`wait_for_flush_room` sees the difference).
    fn spend_room(&self, c: &Compaction, bytes: u64) {
        let spent = bytes.min(c.reserved_left.get());
        if spent > 0 {
            c.reserved_left.set(c.reserved_left.get() - spent);
            self.state.lock().compaction_room_reserved[c.tier.index()] -= spent;
        }
    }

    fn compact(&self, c: &Compaction) -> Result<Ended> {
        let out_level = c.output_level;
        let removed_ids: Vec<(u8, u64)> = c
            .inputs
            .iter()
            .map(|f| (c.level as u8, f.meta.id))
            .chain(c.next.iter().map(|f| (out_level as u8, f.meta.id)))
            .collect();
        // SSTs with nothing below them to merge with move down without being rewritten.
        if c.trivial_move {
            log::debug!(
                "compaction L{} -> L{}: {} inputs moved down unchanged",
                c.level,
                out_level,
                c.inputs.len()
            );
            let edit = VersionEdit {
                removed: removed_ids,
                added: c.inputs.iter().map(|f| (out_level as u8, f.meta.clone())).collect(),
                ..Default::default()
            };
            let mut st = self.state.lock();
            self.commit_edit(&mut st, edit, Vec::new(), Vec::new(), Vec::new())?;
            st.level_io[out_level].moved_in += c.inputs.iter().map(|f| f.meta.bytes).sum::<u64>();
            self.finish_compaction(&mut st, c, None);
            return Ok(Ended::Committed);
        }
        // The inputs' reads (step 2: the outputs' write-back keeps the thread's own class,
        // `sst/writer.rs`), not the commit (3).
        let mut io = self.compaction_io();
        #[cfg(feature = "failpoints")]
        if let Some(hook) = &self.opts.compaction_hook {
            (hook.0)();
        }
        let cut_bytes = self.output_cut_bytes();
        let (smallest_snapshot, version) = {
            let st = self.state.lock();
            (st.snapshots.keys().next().copied().unwrap_or(st.last_seq), st.version.clone())
        };
        // An idle compaction's reads lock no page a reader may want (they would wait behind
        // every client read) and fill none.
        let around = io.idle.is_some();
        // L0's SSTs overlap: one iterator each. A deeper level's are disjoint and in key
        // order (the picker takes them by position): one iterator reads them one after the
        // other, so only the SST being read holds readahead runs.
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        for (level, files) in [(c.level, &c.inputs), (out_level, &c.next)] {
            if level == 0 {
                for f in files {
                    children.push(Box::new(HandleIter::for_compaction(f.clone(), around)));
                }
            } else if !files.is_empty() {
                children.push(Box::new(LevelIterator::for_compaction(files.clone(), around)));
            }
        }
        let mut merged = MergingIterator::new(children);
        merged.seek_to_first();
        let tombstones = range_del::normalize(
            c.inputs
                .iter()
                .chain(&c.next)
                .flat_map(|f| f.reader.range_tombstones())
                .cloned()
                .collect(),
        );
        let covering = Fragments::new(&tombstones);
        let kept_tombstones: Vec<RangeTombstone> = tombstones
            .into_iter()
            .filter(|t| {
                t.seq > smallest_snapshot
                    || version.below_overlaps_range(out_level, &t.start, &t.end)
            })
            .collect();
        // An output ends before the entry that would take it past the cut size, except that
        // the versions of one user key stay together: two slots more cover most of those. It
        // holds no more than its inputs either (a small store's target may pass its device).
        let input_bytes: u64 = c.inputs.iter().chain(&c.next).map(|f| f.meta.bytes).sum();
        let reserve = cut_bytes.min(input_bytes) + 2 * self.volume.layout().slot_bytes;
        let mut builder = self.new_output(out_level, reserve, MadeBy::Compaction);
        // What the merge wrote so far: given back, with the output being built, if it ends
        // without a commit (the store closing, or a failed write: the store may go on after
        // one for want of room, `run_compaction`).
        let mut outputs = Vec::new();
        let mut opened = Vec::new();
        // User keys from here on belong to the next output (`None`: from the first key on).
        let mut output_lower: Option<Vec<u8>> = None;
        let merged_all = (|| -> Result<bool> {
            let mut current_key: Option<Vec<u8>> = None;
            let mut last_seq_for_key = SEQ_MAX;
            let mut merged_entries = 0u64;
            while merged.valid() {
                merged_entries += 1;
                if merged_entries % CLOSING_CHECK_ENTRIES == 0 {
                    self.recheck_compaction_io(&mut io);
                }
                if merged_entries % CLOSING_CHECK_ENTRIES == 0
                    && self.closing.load(Ordering::Relaxed)
                {
                    log::debug!(
                        "compaction L{} -> L{} abandoned after {merged_entries} entries: the store closes",
                        c.level,
                        out_level
                    );
                    return Ok(false);
                }
                let ikey = merged.key();
                let p = key::parse(ikey)
                    .ok_or_else(|| Error::corruption("compaction input: bad internal key", 0))?;
                let new_key = current_key.as_deref() != Some(p.user_key);
                if new_key {
                    // Cut outputs only between user keys, so levels stay disjoint by user key.
                    let after =
                        builder.builder.bytes_after_adding(ikey.len(), merged.value().len());
                    if builder.builder.entries() > 0 && after as u64 > cut_bytes
                        || builder.is_full_after(after)
                    {
                        let mut full = std::mem::replace(
                            &mut builder,
                            self.new_output(out_level, reserve, MadeBy::Compaction),
                        );
                        let lower = output_lower.replace(p.user_key.to_vec());
                        full.add_clipped(&kept_tombstones, lower.as_deref(), Some(p.user_key));
                        for (meta, reader) in self.write_output(full)? {
                            self.spend_room(c, meta.bytes);
                            outputs.push(meta);
                            opened.push(reader);
                        }
                    }
                    current_key = Some(p.user_key.to_vec());
                    last_seq_for_key = SEQ_MAX;
                }
                let shadowed = last_seq_for_key <= smallest_snapshot;
                // The application's filter removes the newest version of a key once every
                // reader sees it (`CompactionFilter`): the put becomes a tombstone at its
                // sequence.
                let filtered = new_key
                    && p.kind == Kind::Put
                    && p.seq <= smallest_snapshot
                    && self
                        .opts
                        .compaction_filter
                        .as_ref()
                        .is_some_and(|f| f.remove(p.user_key, merged.value()));
                let dead_tombstone = (p.kind == Kind::Delete || filtered)
                    && p.seq <= smallest_snapshot
                    && !version.below_may_contain(out_level, p.user_key);
                // Older than a tombstone that every reader sees.
                let range_deleted =
                    p.seq < covering.max_covering_seq(p.user_key, smallest_snapshot);
                last_seq_for_key = p.seq;
                if filtered && !shadowed && !range_deleted {
                    self.filtered_removals.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                if !shadowed && !dead_tombstone && !range_deleted {
                    if filtered {
                        builder.add(&key::encode(p.user_key, p.seq, Kind::Delete), &[])?;
                    } else {
                        builder.add(ikey, merged.value())?;
                    }
                }
                merged.next();
            }
            merged.status()?;
            Ok(true)
        })();
        match merged_all {
            Ok(true) => {}
            Ok(false) => {
                self.abandon_outputs(builder, outputs, opened);
                return Ok(Ended::Abandoned);
            }
            Err(e) => {
                self.abandon_outputs(builder, outputs, opened);
                return Err(e);
            }
        }
        builder.add_clipped(&kept_tombstones, output_lower.as_deref(), None);
        let last_used_bytes = builder.builder.estimated_bytes() as u64;
        match self.write_output(builder) {
            Ok(last) => {
                for (meta, reader) in last {
                    outputs.push(meta);
                    opened.push(reader);
                }
            }
            Err(e) => {
                self.abandon_written(outputs, opened);
                return Err(e);
            }
        }
        log::debug!(
            "compaction L{} -> L{}: {} inputs of {} B, {} below of {} B, wrote {} outputs of {} B",
            c.level,
            out_level,
            c.inputs.len(),
            c.inputs.iter().map(|f| f.meta.bytes).sum::<u64>(),
            c.next.len(),
            c.next.iter().map(|f| f.meta.bytes).sum::<u64>(),
            outputs.len(),
            outputs.iter().map(|m| m.bytes).sum::<u64>(),
        );
        let added_extents = outputs.iter().map(|m| m.extent).collect();
        let removed_extents = c.inputs.iter().chain(&c.next).map(|f| f.meta.extent).collect();
        drop(io);
        let mut st = self.state.lock();
        let odd = self.keeps_odd_chunk(&st, c, &outputs, last_used_bytes);
        count_compaction_io(&mut st.level_io, c, &outputs, odd);
        let added = outputs
            .into_iter()
            .map(|m| {
                let level = if Some(m.id) == odd { c.level } else { out_level };
                (level as u8, m)
            })
            .collect();
        let edit = VersionEdit { removed: removed_ids, added, ..Default::default() };
        self.commit_edit(&mut st, edit, added_extents, removed_extents, opened)?;
        self.finish_compaction(&mut st, c, odd);
        Ok(Ended::Committed)
    }

    /// After a commit: out of the book, the new odd chunk recorded, counted, waiters woken.
    ///
    /// (Its bytes are counted by [`count_compaction_io`] before the outputs move into the
    /// edit.)
    fn finish_compaction(&self, st: &mut State, c: &Compaction, odd: Option<u64>) {
        let version = st.version.clone();
        st.compaction.finish(c.id, &version.levels);
        st.compaction_room_reserved[c.tier.index()] -= c.reserved_left.take();
        // The room changed: an L0 compaction may be as large as fits again.
        st.l0_inputs_max = None;
        if let Some(id) = odd {
            st.compaction.set_odd_chunk(c.level, id);
        }
        st.compactions += 1;
        self.cv.notify_all();
    }

    /// LDS's odd-chunk rule: the SST id of the last output if it is to stay in the source
    /// level Ln instead of going down to Ln+1. It stays when
    /// - the rule is on, this is no full compaction, and Ln is not L0 (L0's order comes from
    ///   SST ids, and a new id would place older data above newer flushes);
    /// - the merge wrote at least one other output (something went down) and this last one
    ///   is part-filled (its last slot at least an eighth empty);
    /// - it is no larger than the inputs taken from Ln, so a compaction out of Ln never makes
    ///   Ln larger and repeated compactions of Ln make progress;
    /// - Ln has no other odd chunk, and the chunk overlaps nothing left in Ln nor the range of
    ///   a running compaction into Ln (`CompactionState::may_keep_odd_chunk`). It overlaps
    ///   nothing in Ln+1 by construction: its keys lie inside this compaction's range there.
    ///
    /// Reads stay right: the chunk holds, for each of its keys, every version Ln and Ln+1 had,
    /// so nothing above it is older and nothing below it is newer.
    fn keeps_odd_chunk(
        &self,
        st: &State,
        c: &Compaction,
        outputs: &[SstMeta],
        last_used_bytes: u64,
    ) -> Option<u64> {
        let last = outputs.last()?;
        let slot = self.volume.layout().slot_bytes;
        let padding = last.bytes.saturating_sub(last_used_bytes);
        let input_bytes: u64 = c.inputs.iter().map(|f| f.meta.bytes).sum();
        let eligible = self.opts.odd_chunk_rule
            && !c.full
            && c.level >= 1
            && outputs.len() >= 2
            && padding * 8 >= slot * ODD_CHUNK_PADDING_EIGHTHS_MIN
            && last.bytes <= input_bytes;
        if !eligible {
            return None;
        }
        let removed: Vec<u64> = c.inputs.iter().chain(&c.next).map(|f| f.meta.id).collect();
        let chunk = KeyRange::of_sst(last);
        st.compaction
            .may_keep_odd_chunk(c.id, &st.version.levels, c.level, &removed, &chunk)
            .then_some(last.id)
    }
}

/// Counts a merging compaction's bytes by level (`Stats::level_io`): its inputs read from
/// their level, the SSTs below read from the output level, its outputs written there (the
/// odd chunk, kept back, in the source level).
fn count_compaction_io(
    io: &mut [crate::stats::LevelIo],
    c: &Compaction,
    outputs: &[SstMeta],
    odd: Option<u64>,
) {
    io[c.level].read_from_level += c.inputs.iter().map(|f| f.meta.bytes).sum::<u64>();
    io[c.output_level].read_from_below += c.next.iter().map(|f| f.meta.bytes).sum::<u64>();
    io[c.output_level].runs += 1;
    for m in outputs {
        let level = if Some(m.id) == odd { c.level } else { c.output_level };
        io[level].written += m.bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::{fits_in_room, flush_room_for};
    use crate::db::{flush_reserve_for, flush_waits_for_room};

    const MB: u64 = 1 << 20;

    #[test]
    fn a_compaction_leaves_each_flush_the_room_the_flush_asks_for() {
        // A compaction admitted with just the room it keeps for the memtables' flushes
        // (the active one and `sealed` more) leaves a full memtable's flush its reserve:
        // the flush does not wait for the compaction to end. (Keeping a write buffer's
        // bytes alone, as before, left a flush an eighth short.)
        let slot = 4 * MB;
        for write_buffer in [MB, 64 * MB, 512 * MB] {
            for sealed in 0..4 {
                let flush_room = flush_room_for(sealed, write_buffer, slot);
                let (reserve, others) = (3 * write_buffer, 2 * write_buffer);
                let room = reserve + others + flush_room;
                assert!(fits_in_room(reserve, others, 1, flush_room, Some(room)));
                let need = flush_reserve_for(write_buffer, slot);
                assert!(!flush_waits_for_room(Some(room), reserve + others, need));
                if sealed == 0 {
                    // Exactly that: a byte less and the active memtable's flush would wait.
                    assert!(flush_waits_for_room(Some(room - 1), reserve + others, need));
                }
            }
        }
        assert!(!flush_waits_for_room(None, u64::MAX, u64::MAX));
    }

    #[test]
    fn a_compaction_starts_only_where_its_outputs_fit_beside_the_running_ones() {
        // 3 MiB of outputs beside 4 MiB reserved and 1 MiB for flushes: 8 MiB needed.
        assert!(fits_in_room(3 * MB, 4 * MB, 1, MB, Some(8 * MB)));
        assert!(!fits_in_room(3 * MB, 4 * MB, 1, MB, Some(8 * MB - 1)));
        // With none running it starts whatever the room: nothing would free any.
        assert!(fits_in_room(3 * MB, 0, 0, MB, Some(0)));
        // A move writes nothing; a volume that cannot say its room never defers.
        assert!(fits_in_room(0, 4 * MB, 2, MB, Some(0)));
        assert!(fits_in_room(3 * MB, 4 * MB, 2, MB, None));
        // No overflow on huge figures.
        assert!(!fits_in_room(u64::MAX, u64::MAX, 3, u64::MAX, Some(u64::MAX - 1)));
    }
}
