//! The skiplist and its arena, as shale-lsm's memtable holds them, behind a small public API
//! for the model tests.

#[path = "../../../lsm/src/memtable/arena.rs"]
mod arena;
#[path = "../../../lsm/src/memtable/skiplist.rs"]
mod skiplist;
use crate::sync;

use crate::key::{self, Kind};
use skiplist::SkipList;

/// A skiplist of internal keys, read as `Memtable::get_entry` reads it.
pub struct List {
    list: SkipList,
}

impl List {
    /// A list with room for `capacity_bytes` of nodes, from arena chunks of `chunk_bytes`
    /// (small chunks make the arena's chunk switch part of the model).
    pub fn new(capacity_bytes: usize, chunk_bytes: usize) -> List {
        List { list: SkipList::new(capacity_bytes, chunk_bytes) }
    }

    /// Inserts `user_key` at `seq` (a put) with `value`; false when the arena is full.
    pub fn insert(&self, user_key: &[u8], seq: u64, value: &[u8]) -> bool {
        self.list.insert(user_key, key::trailer(seq, Kind::Put), value)
    }

    /// The newest entry of `user_key` at or below `snapshot`, as (sequence, value): the
    /// point-index walk of `Memtable::get_entry`.
    pub fn get(&self, user_key: &[u8], snapshot: u64) -> Option<(u64, Vec<u8>)> {
        let (ikey, value) = self.list.get_point(user_key, snapshot.min(key::SEQ_MAX))?;
        let found = key::parse(ikey).expect("keys are built by insert");
        assert_eq!(found.user_key, user_key, "the point index found another key");
        Some((found.seq, value.to_vec()))
    }

    /// As [`List::get`], by a seek of the levels instead (what `Memtable::get_entry` did
    /// before the point index): the two must agree.
    pub fn get_by_seek(&self, user_key: &[u8], snapshot: u64) -> Option<(u64, Vec<u8>)> {
        let target = key::encode(user_key, snapshot.min(key::SEQ_MAX), Kind::SEEK);
        let (ikey, value) = self.list.first_at_or_after(&target)?;
        let found = key::parse(ikey).expect("keys are built by insert");
        (found.user_key == user_key).then(|| (found.seq, value.to_vec()))
    }

    /// The internal key of the first entry at or after `(user_key, snapshot)`, if any: what a
    /// seek returned, for checking that it is never before its target.
    pub fn seek(&self, user_key: &[u8], snapshot: u64) -> Option<(Vec<u8>, u64)> {
        let target = key::encode(user_key, snapshot.min(key::SEQ_MAX), Kind::SEEK);
        let (ikey, _) = self.list.first_at_or_after(&target)?;
        let found = key::parse(ikey).expect("keys are built by insert");
        Some((found.user_key.to_vec(), found.seq))
    }

    /// The user keys of the levels' key nodes, in order: each once, however many versions
    /// it has.
    pub fn key_nodes(&self) -> Vec<Vec<u8>> {
        self.list.key_nodes().into_iter().map(<[u8]>::to_vec).collect()
    }

    /// Panics unless every node's flags say exactly whether its key has older and newer
    /// versions (once every insert has returned).
    pub fn check_version_flags(&self) {
        self.list.check_version_flags();
    }

    /// Every entry in list order, as (user key, sequence).
    pub fn entries(&self) -> Vec<(Vec<u8>, u64)> {
        let mut out = Vec::new();
        let mut target = Vec::new();
        // Seek from the smallest key, then past each entry found: only the public seek path.
        loop {
            let next = if target.is_empty() {
                self.list.first_at_or_after(&key::encode(b"", key::SEQ_MAX, Kind::SEEK))
            } else {
                self.list.first_at_or_after(&target)
            };
            let Some((ikey, _)) = next else { return out };
            let p = key::parse(ikey).expect("keys are built by insert");
            out.push((p.user_key.to_vec(), p.seq));
            if p.seq == 0 {
                let mut k = p.user_key.to_vec();
                k.push(0);
                target = key::encode(&k, key::SEQ_MAX, Kind::SEEK);
            } else {
                target = key::encode(p.user_key, p.seq - 1, Kind::SEEK);
            }
        }
    }
}
