//! Data and index blocks: sorted entries with key prefix compression and restart points.
//!
//! ```text
//! block   = entry* | restart offset (u32 LE) * restart count | restart count (u32 LE)
//! entry   = shared key bytes (varint) | unshared key bytes (varint) | value bytes (varint)
//!           | unshared key bytes | value bytes
//! varint  = LEB128, 7 bits a byte, low group first, at most 5 bytes for a u32
//! ```
//! Each entry stores only the suffix of its key that differs from the previous entry's key.
//! Every `restart_interval`-th entry is a *restart point*: it stores its whole key (shared = 0)
//! and its byte offset is listed in the restart array, so a seek binary-searches the restart
//! points and then scans at most one interval. Varints keep the per-entry overhead at three
//! bytes for the short keys and values most blocks hold. The restart array always has at least
//! one entry (offset 0), even for an empty block, so its count is never zero.
//!
//! Keys are internal keys ([`crate::key`]) in ascending [`key::compare`] order. A block carries
//! no checksum of its own: the SST trailer after it does (see `format`). [`Block::new`] checks
//! the restart array and every entry is bounds-checked when it is decoded, so arbitrary bytes
//! give [`Error::Corruption`], never a panic.

use std::cmp::Ordering;
use std::ops::Range;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key;

/// Entries between restart points unless the options say otherwise.
pub const RESTART_INTERVAL_DEFAULT: usize = 16;
/// Bytes of one restart offset and of the restart count.
const U32_BYTES: usize = 4;

/// Appends `v` as a LEB128 varint.
pub fn put_varint32(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Decodes a LEB128 varint at `*pos` within `data[..limit]`, advancing `*pos`; `None` if it runs
/// past `limit` or does not fit in a u32.
fn get_varint32(data: &[u8], pos: &mut usize, limit: usize) -> Option<u32> {
    let mut v: u32 = 0;
    for shift in (0..35).step_by(7) {
        if *pos >= limit {
            return None;
        }
        let b = data[*pos];
        *pos += 1;
        let bits = u32::from(b & 0x7f);
        // The fifth byte may only carry the top 4 bits of a u32.
        if shift == 28 && bits > 0x0f {
            return None;
        }
        v |= bits << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Builds one block from entries added in ascending order.
#[derive(Debug)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    since_restart: usize,
    last_key: Vec<u8>,
    entries: usize,
}

impl BlockBuilder {
    /// An empty builder with a restart point every `restart_interval` entries.
    ///
    /// # Panics
    /// If `restart_interval` is zero (options are validated before they reach here).
    pub fn new(restart_interval: usize) -> BlockBuilder {
        assert!(restart_interval > 0, "restart interval of zero");
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            restart_interval,
            since_restart: 0,
            last_key: Vec::new(),
            entries: 0,
        }
    }

    /// Appends an entry; `key` must sort after the previous key.
    ///
    /// # Panics
    /// If a key, value or the block passes 4 GiB (the format's u32 fields).
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        debug_assert!(
            self.entries == 0 || key::compare(&self.last_key, key) == Ordering::Less,
            "block keys out of order"
        );
        let shared = if self.since_restart == self.restart_interval {
            self.restarts.push(u32::try_from(self.buf.len()).expect("block over 4 GiB"));
            self.since_restart = 0;
            0
        } else {
            self.last_key.iter().zip(key).take_while(|(a, b)| a == b).count()
        };
        let unshared = key.len() - shared;
        put_varint32(&mut self.buf, u32::try_from(shared).expect("key over 4 GiB"));
        put_varint32(&mut self.buf, u32::try_from(unshared).expect("key over 4 GiB"));
        put_varint32(&mut self.buf, u32::try_from(value.len()).expect("value over 4 GiB"));
        self.buf.extend_from_slice(&key[shared..]);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(&key[shared..]);
        self.since_restart += 1;
        self.entries += 1;
    }

    /// Bytes the block would have if finished now.
    pub fn estimated_bytes(&self) -> usize {
        self.buf.len() + (self.restarts.len() + 1) * U32_BYTES
    }

    /// Whether no entry was added since the last finish.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Entries added since the last finish.
    pub fn entries(&self) -> usize {
        self.entries
    }

    /// The last key added (empty if none).
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Returns the finished block's bytes and resets the builder for the next block.
    pub fn finish(&mut self) -> Vec<u8> {
        // The next block starts with room for one like this one and a quarter more (blocks of
        // one size differ by about an entry), so it is allocated once instead of growing by
        // doubling from empty; this one gets exactly the room its restart array needs.
        let bytes = self.buf.len() + (self.restarts.len() + 1) * U32_BYTES;
        let mut out = std::mem::replace(&mut self.buf, Vec::with_capacity(bytes + bytes / 4));
        out.reserve_exact(bytes - out.len());
        for r in &self.restarts {
            out.extend_from_slice(&r.to_le_bytes());
        }
        let count = u32::try_from(self.restarts.len()).expect("restart count over u32");
        out.extend_from_slice(&count.to_le_bytes());
        self.restarts = vec![0];
        self.since_restart = 0;
        self.last_key.clear();
        self.entries = 0;
        out
    }
}

/// A decoded block, shared between the cache and iterators.
#[derive(Debug)]
pub struct Block {
    data: Vec<u8>,
    /// Where the restart array starts: entries lie in `data[..restarts_at]`.
    restarts_at: usize,
    restart_count: usize,
    /// Offset of the block in its SST, for error reports.
    sst_offset: u64,
}

impl Block {
    /// Checks the restart array of `data` (the uncompressed block bytes, found at `sst_offset`
    /// of their SST) and wraps it.
    ///
    /// # Errors
    /// [`Error::Corruption`] when the restart count or offsets cannot be right.
    pub fn new(data: Vec<u8>, sst_offset: u64) -> Result<Block> {
        let bad = |why: &str| Error::corruption(format!("SST block: {why}"), sst_offset);
        if data.len() < 2 * U32_BYTES {
            return Err(bad("shorter than an empty block"));
        }
        let count = read_u32(&data, data.len() - U32_BYTES) as usize;
        let array_bytes = count
            .checked_add(1)
            .and_then(|n| n.checked_mul(U32_BYTES))
            .filter(|&n| count > 0 && n <= data.len())
            .ok_or_else(|| bad("restart count does not fit the block"))?;
        let restarts_at = data.len() - array_bytes;
        let block = Block { data, restarts_at, restart_count: count, sst_offset };
        let mut prev = None;
        for i in 0..count {
            let r = block.restart(i);
            if (i == 0 && r != 0) || (i > 0 && r >= block.restarts_at) || prev >= Some(r) {
                return Err(bad("restart offsets out of order or out of range"));
            }
            prev = Some(r);
        }
        Ok(block)
    }

    /// A block without entries: what an iterator walks when the index of its SST could not
    /// be read.
    pub fn empty() -> Arc<Block> {
        let mut data = 0u32.to_le_bytes().to_vec(); // one restart, at 0
        data.extend_from_slice(&1u32.to_le_bytes());
        Arc::new(Block::new(data, 0).expect("one restart at offset 0 is a valid block"))
    }

    /// The block's bytes, restart array included.
    pub fn bytes(&self) -> usize {
        self.data.len()
    }

    /// Bytes of the block's buffer: its bytes and the room past them (a buffer the block cache
    /// reused may be a little larger than the block). What the cache charges the block.
    pub fn allocated_bytes(&self) -> usize {
        self.data.capacity()
    }

    /// The block's buffer, for the block cache to reuse once the block is evicted.
    pub fn into_data(self) -> Vec<u8> {
        self.data
    }

    fn restart(&self, i: usize) -> usize {
        read_u32(&self.data, self.restarts_at + i * U32_BYTES) as usize
    }

    /// An iterator over the block's entries, unpositioned.
    pub fn iter(self: &Arc<Block>) -> BlockIter {
        BlockIter {
            block: self.clone(),
            offset: self.restarts_at,
            next_offset: self.restarts_at,
            restart_index: 0,
            key: Vec::new(),
            value: 0..0,
            error: None,
        }
    }
}

fn read_u32(data: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(data[at..at + U32_BYTES].try_into().expect("four bytes"))
}

/// A cursor over one block. Invalid with an error in [`InternalIterator::status`] once it meets
/// a damaged entry.
pub struct BlockIter {
    block: Arc<Block>,
    /// Offset of the current entry; `restarts_at` when invalid.
    offset: usize,
    /// Offset of the entry after the current one.
    next_offset: usize,
    /// The restart interval holding the current entry.
    restart_index: usize,
    key: Vec<u8>,
    value: std::ops::Range<usize>,
    error: Option<Error>,
}

impl BlockIter {
    fn invalidate(&mut self) {
        self.offset = self.block.restarts_at;
        self.next_offset = self.block.restarts_at;
    }

    fn corrupt(&mut self, why: &str) {
        if self.error.is_none() {
            let at = self.block.sst_offset;
            self.error = Some(Error::corruption(format!("SST block entry: {why}"), at));
        }
        self.invalidate();
        self.key.clear();
    }

    /// Positions before the first entry of restart interval `i` (the next parse reads it).
    fn seek_to_restart(&mut self, i: usize) {
        self.key.clear();
        self.restart_index = i;
        self.next_offset = self.block.restart(i);
    }

    /// Decodes the entry at `next_offset`; false at the end of the entries or on damage.
    fn parse_next(&mut self) -> bool {
        if self.error.is_some() {
            return false;
        }
        let limit = self.block.restarts_at;
        let at = self.next_offset;
        if at >= limit {
            self.invalidate();
            return false;
        }
        let data = &self.block.data;
        let mut pos = at;
        let (Some(shared), Some(unshared), Some(value_len)) = (
            get_varint32(data, &mut pos, limit),
            get_varint32(data, &mut pos, limit),
            get_varint32(data, &mut pos, limit),
        ) else {
            self.corrupt("truncated lengths");
            return false;
        };
        let (shared, unshared, value_len) =
            (shared as usize, unshared as usize, value_len as usize);
        let key_end = pos.checked_add(unshared).filter(|&e| e <= limit);
        let value_end = key_end.and_then(|k| k.checked_add(value_len)).filter(|&e| e <= limit);
        let (Some(key_end), Some(value_end)) = (key_end, value_end) else {
            self.corrupt("key or value runs past the entries");
            return false;
        };
        if shared > self.key.len() {
            self.corrupt("shares more bytes than the previous key has");
            return false;
        }
        self.key.truncate(shared);
        self.key.extend_from_slice(&data[pos..key_end]);
        if self.key.len() < key::TRAILER_BYTES {
            self.corrupt("key shorter than an internal key trailer");
            return false;
        }
        self.offset = at;
        self.value = key_end..value_end;
        self.next_offset = value_end;
        while self.restart_index + 1 < self.block.restart_count
            && self.block.restart(self.restart_index + 1) <= self.offset
        {
            self.restart_index += 1;
        }
        true
    }

    /// Where the whole key of restart point `i` lies in the block, decoded in place. A
    /// restart point shares nothing with a previous key, so the seek's binary search compares
    /// the stored bytes as they are: copying each probed key into a new `Vec` (an allocation,
    /// a copy and a free per probe, 14 probes in a 64 MiB SST's index) took about a fifth of
    /// a point lookup's CPU (perf, YCSB workload C). `Err` says what is damaged.
    fn restart_key_range(&self, i: usize) -> std::result::Result<Range<usize>, &'static str> {
        let (data, limit) = (&self.block.data, self.block.restarts_at);
        let mut pos = self.block.restart(i);
        if pos >= limit {
            return Err("restart point past the entries");
        }
        let (Some(shared), Some(unshared), Some(_)) = (
            get_varint32(data, &mut pos, limit),
            get_varint32(data, &mut pos, limit),
            get_varint32(data, &mut pos, limit),
        ) else {
            return Err("truncated lengths");
        };
        if shared != 0 {
            return Err("shares more bytes than the previous key has");
        }
        let end = pos
            .checked_add(unshared as usize)
            .filter(|&e| e <= limit)
            .ok_or("key or value runs past the entries")?;
        if end - pos < key::TRAILER_BYTES {
            return Err("key shorter than an internal key trailer");
        }
        Ok(pos..end)
    }
}

impl InternalIterator for BlockIter {
    fn valid(&self) -> bool {
        self.error.is_none() && self.offset < self.block.restarts_at
    }

    fn seek_to_first(&mut self) {
        self.seek_to_restart(0);
        self.parse_next();
    }

    fn seek_to_last(&mut self) {
        self.seek_to_restart(self.block.restart_count - 1);
        while self.parse_next() && self.next_offset < self.block.restarts_at {}
    }

    fn seek(&mut self, target: &[u8]) {
        if self.error.is_some() {
            return;
        }
        // Find the last restart point whose key sorts before the target; the target lies in
        // its interval or at the start of the next one.
        let (mut left, mut right) = (0, self.block.restart_count - 1);
        while left < right {
            let mid = (left + right).div_ceil(2);
            let k = match self.restart_key_range(mid) {
                Ok(k) => k,
                Err(why) => {
                    self.corrupt(why);
                    return;
                }
            };
            if key::compare(&self.block.data[k], target) == Ordering::Less {
                left = mid;
            } else {
                right = mid - 1;
            }
        }
        self.seek_to_restart(left);
        while self.parse_next() {
            if key::compare(&self.key, target) != Ordering::Less {
                return;
            }
        }
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        self.seek(target);
        if self.error.is_some() {
            return;
        }
        if !self.valid() {
            self.seek_to_last();
        } else if key::compare(&self.key, target) == Ordering::Greater {
            self.prev();
        }
    }

    fn next(&mut self) {
        assert!(self.valid(), "next() on an invalid block iterator");
        self.parse_next();
    }

    fn prev(&mut self) {
        assert!(self.valid(), "prev() on an invalid block iterator");
        let current = self.offset;
        // Back up to the restart interval that holds the entry before the current one.
        let mut i = self.restart_index;
        while self.block.restart(i) >= current {
            if i == 0 {
                self.invalidate();
                self.key.clear();
                return;
            }
            i -= 1;
        }
        self.seek_to_restart(i);
        while self.parse_next() && self.next_offset < current {}
        if self.valid() && self.next_offset != current {
            self.corrupt("entries do not chain to the current one");
        }
    }

    fn key(&self) -> &[u8] {
        debug_assert!(self.valid());
        &self.key
    }

    fn value(&self) -> &[u8] {
        debug_assert!(self.valid());
        &self.block.data[self.value.clone()]
    }

    fn status(&self) -> Result<()> {
        match &self.error {
            None => Ok(()),
            Some(e) => Err(super::duplicate_error(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{Kind, encode};
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    fn sorted_entries(rng: &mut SmallRng, n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut users: Vec<Vec<u8>> = (0..n)
            .map(|_| {
                let len = rng.gen_range(0..12);
                (0..len).map(|_| rng.gen_range(b'a'..b'e')).collect()
            })
            .collect();
        users.sort();
        users.dedup();
        let mut out = Vec::new();
        for u in users {
            // Several versions of some keys, newest first as internal key order wants.
            let versions = rng.gen_range(1..3u64);
            for v in (0..versions).rev() {
                let value: Vec<u8> = (0..rng.gen_range(0..20)).map(|_| rng.r#gen()).collect();
                out.push((encode(&u, 10 + v, Kind::Put), value));
            }
        }
        out
    }

    fn build(entries: &[(Vec<u8>, Vec<u8>)], interval: usize) -> Arc<Block> {
        let mut b = BlockBuilder::new(interval);
        for (k, v) in entries {
            b.add(k, v);
        }
        let est = b.estimated_bytes();
        let bytes = b.finish();
        assert_eq!(bytes.len(), est);
        Arc::new(Block::new(bytes, 0).unwrap())
    }

    #[test]
    fn varints_round_trip_and_refuse_overflow() {
        for v in [0, 1, 127, 128, 300, 1 << 21, u32::MAX] {
            let mut out = Vec::new();
            put_varint32(&mut out, v);
            let mut pos = 0;
            assert_eq!(get_varint32(&out, &mut pos, out.len()), Some(v));
            assert_eq!(pos, out.len());
            let mut pos = 0;
            assert_eq!(get_varint32(&out, &mut pos, out.len() - 1), None);
        }
        let mut pos = 0;
        assert_eq!(get_varint32(&[0xff, 0xff, 0xff, 0xff, 0x1f], &mut pos, 5), None);
    }

    #[test]
    fn iterates_both_ways_and_seeks_everywhere() {
        let mut rng = SmallRng::seed_from_u64(7);
        for (n, interval) in [(0, 16), (1, 16), (5, 1), (40, 3), (300, 16)] {
            let entries = sorted_entries(&mut rng, n);
            let block = build(&entries, interval);
            let mut it = block.iter();
            it.seek_to_first();
            for (k, v) in &entries {
                assert!(it.valid());
                assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
                it.next();
            }
            assert!(!it.valid());
            it.status().unwrap();
            it.seek_to_last();
            for (k, _) in entries.iter().rev() {
                assert_eq!(it.key(), &k[..]);
                it.prev();
            }
            assert!(!it.valid());
            for (i, (k, _)) in entries.iter().enumerate() {
                it.seek(k);
                assert_eq!(it.key(), &k[..]);
                it.seek_for_prev(k);
                assert_eq!(it.key(), &k[..]);
                // Between this key and the next: an older sequence of the same user key.
                let between = encode(key::user_key(k), 0, Kind::Delete);
                it.seek(&between);
                match entries[i..].iter().find(|(e, _)| key::compare(e, &between).is_ge()) {
                    Some((e, _)) => assert_eq!(it.key(), &e[..]),
                    None => assert!(!it.valid()),
                }
                it.seek_for_prev(&between);
                let want = entries.iter().rev().find(|(e, _)| key::compare(e, &between).is_le());
                assert_eq!(it.key(), &want.unwrap().0[..]);
            }
            let past = encode(b"zzzz", 0, Kind::Put);
            it.seek(&past);
            assert!(!it.valid());
            it.seek_for_prev(&past);
            assert_eq!(it.valid(), n > 0);
            let before = encode(b"", key::SEQ_MAX, Kind::Put);
            it.seek_for_prev(&before);
            assert!(!it.valid() || it.key() == &before[..]);
            it.status().unwrap();
        }
    }

    #[test]
    fn damaged_blocks_are_corruption_never_panics() {
        let mut rng = SmallRng::seed_from_u64(11);
        let entries = sorted_entries(&mut rng, 60);
        let mut b = BlockBuilder::new(4);
        for (k, v) in &entries {
            b.add(k, v);
        }
        let good = b.finish();
        let mut corruptions = 0;
        for i in 0..good.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bad = good.clone();
                bad[i] ^= flip;
                let Ok(block) = Block::new(bad, 0) else {
                    corruptions += 1;
                    continue;
                };
                let block = Arc::new(block);
                let mut it = block.iter();
                it.seek_to_first();
                let mut steps = 0;
                while it.valid() && steps < 10_000 {
                    it.next();
                    steps += 1;
                }
                it.seek_to_last();
                while it.valid() && steps < 20_000 {
                    it.prev();
                    steps += 1;
                }
                for (k, _) in entries.iter().step_by(7) {
                    it.seek(k);
                    it.seek_for_prev(k);
                }
                if it.status().is_err() {
                    corruptions += 1;
                }
            }
        }
        // Most flips land in lengths or restart offsets and are caught; flips inside key or
        // value bytes are the SST trailer's checksum's job.
        assert!(corruptions > good.len() / 4, "{corruptions} corruptions found");
        for cut in 0..8 {
            assert!(matches!(Block::new(good[..cut].to_vec(), 0), Err(Error::Corruption { .. })));
        }
    }
}
