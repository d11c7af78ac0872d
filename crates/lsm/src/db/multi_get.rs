//! `Db::multi_get`: many point lookups that share their device reads.
//!
//! A loop of [`super::Db::get`] pays one device (or page-cache) read per key that misses the
//! block cache, one after another. A multi-get walks every key as far as it goes without
//! the device (memtables, filters, indexes, cached blocks), then reads the data blocks all
//! the remaining keys need in one batch ([`QueuePool::read_many`]: one io_uring submission,
//! so the device works on them together), searches them, and repeats for the keys whose
//! block did not hold them (they go on to the next, older SST). Most keys finish in the
//! first round: a key's filter passes in few SSTs besides the one holding it.
//!
//! Every answer is the one `get` would give at the same snapshot (the same walk, newest
//! source first, with the same range-tombstone rule), and a block read in a batch is checked
//! like any other: a damaged one fails the call with [`Error::Corruption`], never an answer.

use std::sync::Arc;

use super::{Inner, visible_sst_value};
use crate::error::Result;
use crate::key::{self, Kind};
use crate::options::ReadOptions;
use crate::sst::{Probe, bloom_hash};
use crate::version::SstHandle;

/// A key on its way down the SSTs.
struct Lookup<'k> {
    /// Where its answer goes.
    slot: usize,
    user_key: &'k [u8],
    ikey: Vec<u8>,
    hash: u64,
    candidates: Vec<Arc<SstHandle>>,
    /// The candidate it is at.
    next: usize,
    /// The newest range tombstone over the key seen so far.
    covering: u64,
}

/// Where a lookup stopped.
enum Step {
    Answered(Option<Vec<u8>>),
    /// Needs the data block at this handle of `candidates[next]`.
    Read(crate::sst::format::BlockHandle),
}

impl Inner {
    pub(super) fn multi_get(
        &self,
        keys: &[&[u8]],
        opts: &ReadOptions,
    ) -> Result<Vec<Option<Vec<u8>>>> {
        let view = self.read_view(opts)?;
        let snapshot = view.snapshot;
        let mut answers: Vec<Option<Vec<u8>>> = vec![None; keys.len()];
        let mut walking = Vec::new();
        for (slot, user_key) in keys.iter().enumerate() {
            let covering = match view.memtables(user_key) {
                Ok(answer) => {
                    answers[slot] = answer;
                    continue;
                }
                Err(covering) => covering,
            };
            walking.push(Lookup {
                slot,
                user_key,
                ikey: key::encode(user_key, snapshot, Kind::SEEK),
                hash: bloom_hash(user_key),
                candidates: view.view.version.candidates(user_key).cloned().collect(),
                next: 0,
                covering,
            });
        }
        while !walking.is_empty() {
            // Each key as far as it goes without the device.
            let mut reads = Vec::new();
            for mut l in walking.drain(..) {
                match walk(&mut l, snapshot)? {
                    Step::Answered(v) => answers[l.slot] = v,
                    Step::Read(h) => reads.push((l, h)),
                }
            }
            // The blocks they need, read together (a block two keys need is read once).
            let mut ranges: Vec<(u64, usize)> = reads
                .iter()
                .map(|(l, h)| {
                    (l.candidates[l.next].volume_offset(h.offset), h.stored_bytes() as usize)
                })
                .collect();
            let order = ranges.clone();
            ranges.sort_unstable();
            ranges.dedup();
            let mut blocks = self.pool.read_many(&ranges);
            for ((mut l, h), at) in reads.into_iter().zip(order) {
                let i = ranges.binary_search(&at).expect("every range was read");
                let stored = match &blocks[i] {
                    Ok(b) => b,
                    Err(_) => {
                        return Err(std::mem::replace(&mut blocks[i], Ok(Vec::new())).unwrap_err());
                    }
                };
                let f = &l.candidates[l.next];
                match f.reader.search_read_block(&l.ikey, h, stored)? {
                    Some((ikey, value)) => {
                        answers[l.slot] = visible_sst_value(&ikey, value, l.covering)?;
                    }
                    None if l.covering > 0 => {}
                    None => {
                        l.next += 1;
                        walking.push(l);
                    }
                }
            }
        }
        Ok(answers)
    }
}

/// Takes `l` down its candidates until an answer or a block the cache does not hold.
fn walk(l: &mut Lookup<'_>, snapshot: u64) -> Result<Step> {
    while let Some(f) = l.candidates.get(l.next) {
        l.covering = l.covering.max(f.reader.max_covering_tombstone_seq(l.user_key, snapshot));
        match f.reader.probe(&l.ikey, l.hash)? {
            Probe::Found(Some((ikey, value))) => {
                return Ok(Step::Answered(visible_sst_value(&ikey, value, l.covering)?));
            }
            Probe::NeedsBlock(h) => return Ok(Step::Read(h)),
            Probe::Found(None) | Probe::Absent => {}
        }
        if l.covering > 0 {
            return Ok(Step::Answered(None));
        }
        l.next += 1;
    }
    Ok(Step::Answered(None))
}
