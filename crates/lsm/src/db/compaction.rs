//! Leveled compaction: running the compaction the picker chose (`picker.rs`) and committing
//! it as one version edit.
//!
//! 1. A trivial move (nothing below to merge with) commits the inputs at the output level,
//!    unchanged.
//! 2. Otherwise the inputs and their overlap below are merged, keeping every version a live
//!    snapshot needs and dropping tombstones only where no deeper level may hold the key.
//!    Outputs are cut between user keys, before the entry that would take the SST past the
//!    target size in whole slots (`SstBuilder::bytes_after_adding`).
//! 3. The commit, under the state lock: the edit is committed; the compaction leaves the
//!    picker's book. Inputs are freed only after the commit, once no reader holds them.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{self, Kind, SEQ_MAX};
use crate::level_targets::LevelTargets;
use crate::merge::MergingIterator;
use crate::version::{HandleIter, SstHandle};
use crate::version_edit::VersionEdit;

use super::{Inner, OutputSst, State};

/// A compaction the picker chose, with its SSTs.
pub(super) struct Compaction {
    /// The picker's id for it.
    id: u64,
    level: usize,
    output_level: usize,
    inputs: Vec<Arc<SstHandle>>,
    next: Vec<Arc<SstHandle>>,
    trivial_move: bool,
}

impl Inner {
    /// Picks the next compaction and enters it in the book, or `None` if nothing is due or
    /// nothing due can run beside the running ones.
    pub(super) fn pick_compaction(&self, st: &mut State) -> Option<Compaction> {
        let v = st.version.clone();
        let sizes: Vec<u64> = (0..v.levels.len()).map(|l| v.level_bytes(l)).collect();
        let targets = LevelTargets::compute(&self.opts, &sizes);
        let plan = st.compaction.pick(&v.levels, &self.opts, &targets, st.full_compaction)?;
        let id = st.compaction.start(&v.levels, &plan);
        let take = |level: usize, at: &[usize]| -> Vec<Arc<SstHandle>> {
            at.iter().map(|&i| v.levels[level][i].clone()).collect()
        };
        Some(Compaction {
            id,
            level: plan.level,
            output_level: plan.output_level,
            inputs: take(plan.level, &plan.inputs),
            next: take(plan.output_level, &plan.next),
            trivial_move: plan.is_trivial_move(),
        })
    }

    /// Size compaction outputs are cut at: the target file size in whole slots, at least one.
    fn output_cut_bytes(&self) -> u64 {
        let slot = self.volume.layout().slot_bytes;
        let target = self.target_file_bytes.load(std::sync::atomic::Ordering::Relaxed);
        (target / slot).max(1) * slot
    }

    /// Runs a compaction and commits it; a failed one leaves the book too (the store stops).
    pub(super) fn run_compaction(&self, c: Compaction) -> Result<()> {
        let id = c.id;
        let result = self.compact(c);
        if result.is_err() {
            let mut st = self.state.lock();
            st.compaction.finish(id);
            self.cv.notify_all();
        }
        result
    }

    fn compact(&self, c: Compaction) -> Result<()> {
        let out_level = c.output_level;
        let removed_ids: Vec<(u8, u64)> = c
            .inputs
            .iter()
            .map(|f| (c.level as u8, f.meta.id))
            .chain(c.next.iter().map(|f| (out_level as u8, f.meta.id)))
            .collect();
        // SSTs with nothing below them to merge with move down without being rewritten.
        if c.trivial_move {
            let edit = VersionEdit {
                removed: removed_ids,
                added: c.inputs.iter().map(|f| (out_level as u8, f.meta.clone())).collect(),
                ..Default::default()
            };
            let mut st = self.state.lock();
            self.commit_edit(&mut st, edit, Vec::new(), Vec::new())?;
            self.finish_compaction(&mut st, &c);
            return Ok(());
        }
        let cut_bytes = self.output_cut_bytes();
        let (smallest_snapshot, version) = {
            let st = self.state.lock();
            (st.snapshots.keys().next().copied().unwrap_or(st.last_seq), st.version.clone())
        };
        let children: Vec<Box<dyn InternalIterator>> = c
            .inputs
            .iter()
            .chain(&c.next)
            .map(|f| Box::new(HandleIter::new(f.clone())) as Box<dyn InternalIterator>)
            .collect();
        let mut merged = MergingIterator::new(children);
        merged.seek_to_first();
        let mut outputs = Vec::new();
        let mut builder = OutputSst::new(&self.opts);
        let mut current_key: Option<Vec<u8>> = None;
        let mut last_seq_for_key = SEQ_MAX;
        while merged.valid() {
            let ikey = merged.key();
            let p = key::parse(ikey)
                .ok_or_else(|| Error::corruption("compaction input: bad internal key", 0))?;
            let new_key = current_key.as_deref() != Some(p.user_key);
            if new_key {
                // Cut outputs only between user keys, so levels stay disjoint by user key.
                let after = builder.builder.bytes_after_adding(ikey.len(), merged.value().len());
                if builder.builder.entries() > 0 && after as u64 > cut_bytes {
                    let full = std::mem::replace(&mut builder, OutputSst::new(&self.opts));
                    outputs.extend(self.write_output(full)?);
                }
                current_key = Some(p.user_key.to_vec());
                last_seq_for_key = SEQ_MAX;
            }
            let shadowed = last_seq_for_key <= smallest_snapshot;
            let dead_tombstone = p.kind == Kind::Delete
                && p.seq <= smallest_snapshot
                && version.levels[out_level + 1..].iter().all(|files| {
                    !files.iter().any(|f| {
                        key::user_key(&f.meta.smallest) <= p.user_key
                            && p.user_key <= key::user_key(&f.meta.largest)
                    })
                });
            last_seq_for_key = p.seq;
            if !shadowed && !dead_tombstone {
                builder.add(ikey, merged.value());
            }
            merged.next();
        }
        merged.status()?;
        outputs.extend(self.write_output(builder)?);
        let added_extents = outputs.iter().map(|m| m.extent).collect();
        let removed_extents = c.inputs.iter().chain(&c.next).map(|f| f.meta.extent).collect();
        let mut st = self.state.lock();
        let added = outputs.into_iter().map(|m| (out_level as u8, m)).collect();
        let edit = VersionEdit { removed: removed_ids, added, ..Default::default() };
        self.commit_edit(&mut st, edit, added_extents, removed_extents)?;
        self.finish_compaction(&mut st, &c);
        Ok(())
    }

    /// After a commit: out of the book, counted, waiters woken.
    fn finish_compaction(&self, st: &mut State, c: &Compaction) {
        st.compaction.finish(c.id);
        st.compactions += 1;
        self.cv.notify_all();
    }
}
