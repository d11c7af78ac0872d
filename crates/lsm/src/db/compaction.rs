//! Leveled compaction: choosing the next compaction and running it.
//!
//! L0 goes into the base level (L1 with static level sizing; with dynamic sizing the first
//! level that needs to exist, see `level_targets`) once it holds
//! `level0_file_num_compaction_trigger` SSTs; otherwise the level most over its target gives
//! one SST, in round-robin key order, to merge with what overlaps it one level down. A single
//! SST with nothing below moves down without being rewritten. `compact_range` moves every
//! level down until one holds everything.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{self, Kind, SEQ_MAX};
use crate::level_targets::LevelTargets;
use crate::merge::MergingIterator;
use crate::version::{HandleIter, LEVELS, SstHandle, Version};
use crate::version_edit::VersionEdit;

use super::{Inner, OutputSst, State};

/// A planned compaction.
pub(super) struct Compaction {
    level: usize,
    output_level: usize,
    inputs: Vec<Arc<SstHandle>>,
    next: Vec<Arc<SstHandle>>,
}

impl Inner {
    pub(super) fn pick_compaction(&self, st: &mut State) -> Option<Compaction> {
        let v = st.version.clone();
        let sizes: Vec<u64> = (0..LEVELS).map(|l| v.level_bytes(l)).collect();
        let targets = LevelTargets::compute(&self.opts, &sizes);
        let l0 = &v.levels[0];
        if !l0.is_empty()
            && (l0.len() >= self.opts.level0_file_num_compaction_trigger || st.full_compaction)
        {
            return Some(self.with_next_level(&v, 0, targets.base_level, l0.clone()));
        }
        if st.full_compaction {
            // Move the shallowest non-empty level down until one level holds everything.
            let non_empty: Vec<usize> = (1..LEVELS).filter(|&l| !v.levels[l].is_empty()).collect();
            if non_empty.len() > 1 {
                let level = non_empty[0];
                return Some(self.with_next_level(&v, level, level + 1, v.levels[level].clone()));
            }
            return None;
        }
        let mut best: Option<(f64, usize)> = None;
        for level in (1..LEVELS).filter(|&l| targets.is_over(&sizes, l)) {
            let score = sizes[level] as f64 / targets.bytes[level] as f64;
            if best.is_none_or(|(s, _)| score > s) {
                best = Some((score, level));
            }
        }
        let (_, level) = best?;
        let files = &v.levels[level];
        let pointer = &st.compact_pointer[level];
        let pick = files
            .iter()
            .find(|f| key::user_key(&f.meta.smallest) > pointer.as_slice())
            .unwrap_or(&files[0])
            .clone();
        st.compact_pointer[level] = key::user_key(&pick.meta.largest).to_vec();
        Some(self.with_next_level(&v, level, level + 1, vec![pick]))
    }

    fn with_next_level(
        &self,
        v: &Version,
        level: usize,
        output_level: usize,
        inputs: Vec<Arc<SstHandle>>,
    ) -> Compaction {
        let smallest =
            inputs.iter().map(|f| key::user_key(&f.meta.smallest)).min().unwrap().to_vec();
        let largest = inputs.iter().map(|f| key::user_key(&f.meta.largest)).max().unwrap().to_vec();
        let next = v.overlapping(output_level, &smallest, &largest);
        Compaction { level, output_level, inputs, next }
    }

    pub(super) fn run_compaction(&self, c: Compaction) -> Result<()> {
        let out_level = c.output_level;
        let removed_ids: Vec<(u8, u64)> = c
            .inputs
            .iter()
            .map(|f| (c.level as u8, f.meta.id))
            .chain(c.next.iter().map(|f| (out_level as u8, f.meta.id)))
            .collect();
        // A single SST with nothing below it to merge with moves down without being rewritten.
        if c.inputs.len() == 1 && c.next.is_empty() {
            let meta = c.inputs[0].meta.clone();
            let edit = VersionEdit {
                removed: removed_ids,
                added: vec![(out_level as u8, meta)],
                ..Default::default()
            };
            let mut st = self.state.lock();
            self.commit_edit(&mut st, edit, Vec::new(), Vec::new())?;
            st.compactions += 1;
            self.cv.notify_all();
            return Ok(());
        }
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
        // Outputs fill whole slots: the target size rounded down to slots, at least one.
        let slot = self.volume.layout().slot_bytes;
        let cut_bytes = (self.opts.target_file_size_base / slot).max(1) * slot;
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
                // Cut outputs only between user keys, so levels stay disjoint by user key, and
                // before the entry that would take the SST past whole slots.
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
        let edit = VersionEdit {
            removed: removed_ids,
            added: outputs.into_iter().map(|m| (out_level as u8, m)).collect(),
            ..Default::default()
        };
        let mut st = self.state.lock();
        self.commit_edit(&mut st, edit, added_extents, removed_extents)?;
        st.compactions += 1;
        self.cv.notify_all();
        Ok(())
    }
}
