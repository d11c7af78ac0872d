//! Iterators over the keys matching a 4-byte prefix under a bitmask (KV-SSD's and the SNIA
//! KV API's iterate): open, fetch batches of keys or of keys and values, close.
//!
//! Open takes its candidates from the index alone: a digest's top 16 bits are the key's first
//! two bytes (its bucket, `index.rs`), so the entries whose bucket matches the prefix under
//! the mask's first two bytes are found without a device read, and the store is not scanned.
//! Each batch then reads its candidates' records and keeps those whose full key matches all
//! four bytes under the mask and that are still live. The iterator returns each key live at
//! its open, and still live when it is reached, exactly once (with its value as it is then);
//! keys stored after the open are not returned. No order is promised.
//!
//! While an iterator is open, garbage collection copies records but frees no segment, so a
//! candidate's location never names a reused slot. At most `max_iterators` are open at once.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::error::{Error, Result};
use crate::index::{Location, Probe};
use crate::record::{Kind, Record};
use crate::shard::Shard;

/// Keys only, or keys and values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IterKind {
    /// Keys only.
    #[default]
    Keys,
    /// Keys with their values.
    KeysAndValues,
}

/// One entry of a batch: a key, and its value for [`IterKind::KeysAndValues`].
pub type IterEntry = (Vec<u8>, Option<Vec<u8>>);

/// An open iterator; closes when dropped.
pub struct KvIterator {
    shard: Arc<Shard>,
    prefix: [u8; 4],
    mask: [u8; 4],
    kind: IterKind,
    candidates: Vec<Location>,
    next: usize,
}

impl std::fmt::Debug for KvIterator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KvIterator")
            .field("prefix", &self.prefix)
            .field("mask", &self.mask)
            .field("left", &(self.candidates.len() - self.next))
            .finish()
    }
}

impl KvIterator {
    pub(crate) fn open(
        shard: Arc<Shard>,
        prefix: [u8; 4],
        mask: [u8; 4],
        kind: IterKind,
    ) -> Result<KvIterator> {
        let max = shard.opts.max_iterators;
        let open = &shard.open_iterators;
        let mut n = open.load(Ordering::Relaxed);
        loop {
            if n >= max {
                return Err(Error::TooManyIterators { max });
            }
            match open.compare_exchange(n, n + 1, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => break,
                Err(now) => n = now,
            }
        }
        let want = u16::from_be_bytes([prefix[0], prefix[1]]);
        let bucket_mask = u16::from_be_bytes([mask[0], mask[1]]);
        let candidates = match shard.index.read().in_buckets(want, bucket_mask) {
            Ok(c) => c,
            Err(e) => {
                open.fetch_sub(1, Ordering::AcqRel);
                return Err(e);
            }
        };
        Ok(KvIterator { shard, prefix, mask, kind, candidates, next: 0 })
    }

    /// The next batch of at most `max` entries; empty once every key was returned.
    ///
    /// # Errors
    /// [`Error::Corruption`] when a record fails its checks; the device's error.
    pub fn next_batch(&mut self, max: usize) -> Result<Vec<IterEntry>> {
        let mut out = Vec::new();
        while out.len() < max && self.next < self.candidates.len() {
            let loc = self.candidates[self.next];
            self.next += 1;
            let rec = self.shard.read_record(loc)?;
            let r = Record::decode(&rec)
                .ok_or_else(|| self.shard.corruption(loc, "record does not parse"))?;
            if r.kind != Kind::Store || !self.matches(r.key) {
                continue;
            }
            let d = self.shard.digest(r.key);
            let live_here = self.shard.index.read().points_at(d, r.key, loc)?;
            let value = if live_here {
                Some(r.value.to_vec())
            } else {
                // Overwritten or deleted since the open: return it as it is now, if live.
                match self.current(d, r.key)? {
                    Some(v) => Some(v),
                    None => continue,
                }
            };
            let value = (self.kind == IterKind::KeysAndValues).then_some(value).flatten();
            out.push((r.key.to_vec(), value));
        }
        Ok(out)
    }

    fn matches(&self, key: &[u8]) -> bool {
        (0..4).all(|i| key[i] & self.mask[i] == self.prefix[i] & self.mask[i])
    }

    /// The key's value now, if live (the record read to check the full key).
    fn current(&self, d: u64, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let probe = self.shard.index.read().probe(d, key)?;
        let loc = match probe {
            Probe::Absent => return Ok(None),
            Probe::Exact(l) | Probe::Candidate(l) => l,
        };
        let rec = self.shard.read_record(loc)?;
        let r = Record::decode(&rec)
            .ok_or_else(|| self.shard.corruption(loc, "record does not parse"))?;
        Ok((r.key == key && r.kind == Kind::Store).then(|| r.value.to_vec()))
    }
}

impl Drop for KvIterator {
    fn drop(&mut self) {
        self.shard.open_iterators.fetch_sub(1, Ordering::AcqRel);
    }
}
