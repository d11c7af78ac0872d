//! Several stores, one per volume, behind one handle that routes each key to its shard by
//! hash: KV-SSD's scale-in, each shard an independent engine with its own worker, queues and
//! log, sharing nothing.
//!
//! A set is fixed when it is made: each shard's version log records the set's id, its place
//! and the count (kind 4 in `meta.rs`), so opening the set with a volume missing, added,
//! swapped or from another set is refused ([`Error::InvalidArgument`]) before any key is
//! routed to the wrong shard. A key's shard is `xxh3_64(key, seed) % count`, with a seed of its
//! own so routing is independent of the index's digest.

use std::path::Path;

use crate::error::{Error, Result};
use crate::iterator::{IterEntry, IterKind, KvIterator};
use crate::meta::Membership;
use crate::options::{HashOptions, HashStats, StoreMode};
use crate::store::HashStore;

/// Seed of the routing hash.
const ROUTE_SEED: u64 = 0x5348_4152_4453_3031; // "SHARDS01"

/// A set of hash stores, one per volume.
#[derive(Debug)]
pub struct Shards {
    stores: Vec<HashStore>,
}

impl Shards {
    /// Opens the set on `paths` in order, making a new set where every volume is new and
    /// empty. Shard `i` is the store at `paths[i]`.
    ///
    /// ```
    /// use shale_hash::{HashOptions, Shards, StoreMode};
    ///
    /// let dirs = [tempfile::tempdir()?, tempfile::tempdir()?];
    /// let shards = Shards::open(&[dirs[0].path(), dirs[1].path()], HashOptions::default())?;
    /// shards.store(b"key-1", b"v", StoreMode::Overwrite)?;
    /// assert_eq!(shards.retrieve(b"key-1")?, Some(b"v".to_vec()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for no paths, or volumes that are not this set in this
    /// order (a store that belongs to no set but holds data, one of another set, a count or
    /// place that differs); otherwise as [`HashStore::open`].
    pub fn open<P: AsRef<Path>>(paths: &[P], opts: HashOptions) -> Result<Shards> {
        if paths.is_empty() || paths.len() > u32::MAX as usize {
            return Err(Error::InvalidArgument("a set of shards needs at least one path".into()));
        }
        let stores =
            paths.iter().map(|p| HashStore::open(p, opts.clone())).collect::<Result<Vec<_>>>()?;
        let count = stores.len() as u32;
        let members: Vec<Option<Membership>> = stores.iter().map(HashStore::membership).collect();
        if members.iter().all(Option::is_none) {
            if let Some(i) =
                stores.iter().position(|s| s.stats().keys > 0 || s.stats().segments > 0)
            {
                return Err(Error::InvalidArgument(format!(
                    "{} holds data but belongs to no set of shards: refusing to route keys away \
                     from it",
                    paths[i].as_ref().display()
                )));
            }
            let set = new_set_id(paths);
            for (index, s) in stores.iter().enumerate() {
                s.join_set(Membership { set, index: index as u32, count })?;
            }
            return Ok(Shards { stores });
        }
        let set = members.iter().flatten().next().expect("some member").set;
        for (i, m) in members.iter().enumerate() {
            let want = Membership { set, index: i as u32, count };
            let empty = stores[i].stats().keys == 0 && stores[i].stats().segments == 0;
            if m.is_none() && empty && members.iter().flatten().all(|o| o.count == count) {
                // A set whose making was cut off before this shard joined: finish it.
                stores[i].join_set(want)?;
                continue;
            }
            if *m != Some(want) {
                return Err(Error::InvalidArgument(format!(
                    "{} is not shard {i} of this set of {count}: it is {}",
                    paths[i].as_ref().display(),
                    match m {
                        None => "a store of no set".to_string(),
                        Some(m) if m.set != set => "a shard of another set".to_string(),
                        Some(m) => format!("shard {} of {}", m.index, m.count),
                    }
                )));
            }
        }
        Ok(Shards { stores })
    }

    /// Makes a checkpoint of the set at `dsts`, one destination per shard, in order: see
    /// [`Shards::checkpoint_with`].
    ///
    /// # Errors
    /// As [`Shards::checkpoint_with`].
    pub fn checkpoint<P: AsRef<Path>>(&self, dsts: &[P]) -> Result<u64> {
        self.checkpoint_with(dsts, &mut |_| {})
    }

    /// Makes a checkpoint of the set: a new set of as many stores, shard `i` at `dsts[i]`
    /// (each must not exist, or be an empty directory), opened with [`Shards::open`] on
    /// `dsts` in the same order. Returns the keys copied. The copy holds one instant of the
    /// whole set: every shard's index is read while every shard's index lock is held (each
    /// shard's instant as [`HashStore::checkpoint_with`] takes it), so every store and
    /// delete acknowledged before the call is in it, none submitted after it returns, and a
    /// write in it on one shard has every write acknowledged before it on any shard in it
    /// too. The shards' workers wait for that read only, not for the copy.
    /// The copies form a set of their own (a new set id): a shard of the copy never opens
    /// in a set with shards of the original. Every copy is built under a temporary name
    /// beside its destination, and the destinations are named only once every copy is
    /// durable; on an error nothing is left at any of them. `progress` gets the keys copied
    /// so far (every shard's), as each shard's checkpoint reports.
    ///
    /// ```
    /// use shale_hash::{HashOptions, Shards, StoreMode};
    ///
    /// let (live, copy) = ([tempfile::tempdir()?, tempfile::tempdir()?], tempfile::tempdir()?);
    /// let shards = Shards::open(&[live[0].path(), live[1].path()], HashOptions::default())?;
    /// shards.store(b"key-1", b"v", StoreMode::Overwrite)?;
    /// let dsts = [copy.path().join("0"), copy.path().join("1")];
    /// assert_eq!(shards.checkpoint_with(&dsts, &mut |_| {})?, 1);
    /// let copy = Shards::open(&dsts, HashOptions::default())?;
    /// assert_eq!(copy.retrieve(b"key-1")?, Some(b"v".to_vec()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `dsts` does not name one destination per shard, or
    /// names one twice; otherwise as [`HashStore::checkpoint_with`].
    pub fn checkpoint_with<P: AsRef<Path>>(
        &self,
        dsts: &[P],
        progress: &mut dyn FnMut(u64),
    ) -> Result<u64> {
        if dsts.len() != self.stores.len() {
            return Err(Error::InvalidArgument(format!(
                "a checkpoint of a set of {} shards needs {} destinations, not {}",
                self.stores.len(),
                self.stores.len(),
                dsts.len()
            )));
        }
        let absolute: Vec<_> =
            dsts.iter().map(|d| std::path::absolute(d.as_ref()).unwrap_or_default()).collect();
        if (1..absolute.len()).any(|i| absolute[..i].contains(&absolute[i])) {
            return Err(Error::InvalidArgument(
                "a checkpoint of a set names each shard's destination once".into(),
            ));
        }
        let staged = dsts
            .iter()
            .map(|d| shale_space::CheckpointDir::begin(d.as_ref()))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let set = new_set_id(dsts);
        let count = self.stores.len() as u32;
        let stores: Vec<&HashStore> = self.stores.iter().collect();
        let instant = HashStore::checkpoint_instant(&stores)?;
        let mut before = 0;
        for (i, ((store, stage), read)) in self.stores.iter().zip(&staged).zip(instant).enumerate()
        {
            let m = Membership { set, index: i as u32, count };
            let mut report = |keys: u64| progress(before + keys);
            before += store.checkpoint_into(read, stage.staging(), Some(m), &mut report)?;
        }
        for stage in staged {
            stage.commit()?;
        }
        Ok(before)
    }

    /// The shards, in order.
    pub fn shards(&self) -> &[HashStore] {
        &self.stores
    }

    /// The shard of `key`.
    pub fn shard_of(&self, key: &[u8]) -> &HashStore {
        let h = xxhash_rust::xxh3::xxh3_64_with_seed(key, ROUTE_SEED);
        &self.stores[(h % self.stores.len() as u64) as usize]
    }

    /// As [`HashStore::store`], on the key's shard.
    ///
    /// # Errors
    /// As [`HashStore::store`].
    pub fn store(&self, key: &[u8], value: &[u8], mode: StoreMode) -> Result<()> {
        self.shard_of(key).store(key, value, mode)
    }

    /// As [`HashStore::retrieve`], on the key's shard.
    ///
    /// # Errors
    /// As [`HashStore::retrieve`].
    pub fn retrieve(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.shard_of(key).retrieve(key)
    }

    /// As [`HashStore::delete`], on the key's shard.
    ///
    /// # Errors
    /// As [`HashStore::delete`].
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        self.shard_of(key).delete(key)
    }

    /// As [`HashStore::exist`]: each shard is asked for its keys at once, in parallel.
    ///
    /// # Errors
    /// As [`HashStore::exist`].
    pub fn exist(&self, keys: &[&[u8]]) -> Result<Vec<u8>> {
        let mut per: Vec<Vec<usize>> = vec![Vec::new(); self.stores.len()];
        for (i, k) in keys.iter().enumerate() {
            let h = xxhash_rust::xxh3::xxh3_64_with_seed(k, ROUTE_SEED);
            per[(h % self.stores.len() as u64) as usize].push(i);
        }
        let mut tickets = Vec::new();
        for (shard, idx) in per.iter().enumerate().filter(|(_, v)| !v.is_empty()) {
            let ks: Vec<&[u8]> = idx.iter().map(|&i| keys[i]).collect();
            let ticket = loop {
                match self.stores[shard].submit_exist(&ks) {
                    Err(Error::Busy) => std::thread::yield_now(),
                    other => break other?,
                }
            };
            tickets.push((idx, ticket));
        }
        let mut bits = vec![0u8; keys.len().div_ceil(8)];
        for (idx, t) in tickets {
            let got = t.wait()?;
            for (j, &i) in idx.iter().enumerate() {
                if got[j / 8] >> (j % 8) & 1 == 1 {
                    bits[i / 8] |= 1 << (i % 8);
                }
            }
        }
        Ok(bits)
    }

    /// An iterator over every shard in turn (see [`HashStore::open_iterator`]); it holds one
    /// iterator handle of each shard while open.
    ///
    /// # Errors
    /// As [`HashStore::open_iterator`].
    pub fn open_iterator(
        &self,
        prefix: [u8; 4],
        mask: [u8; 4],
        kind: IterKind,
    ) -> Result<ShardsIterator> {
        let its = self
            .stores
            .iter()
            .map(|s| s.open_iterator(prefix, mask, kind))
            .collect::<Result<Vec<_>>>()?;
        Ok(ShardsIterator { its, at: 0 })
    }

    /// Each shard's counters.
    pub fn stats(&self) -> Vec<HashStats> {
        self.stores.iter().map(HashStore::stats).collect()
    }
}

/// An iterator over every shard of a set.
#[derive(Debug)]
pub struct ShardsIterator {
    its: Vec<KvIterator>,
    at: usize,
}

impl ShardsIterator {
    /// The next batch of at most `max` entries; empty at the end.
    ///
    /// # Errors
    /// As [`KvIterator::next_batch`].
    pub fn next_batch(&mut self, max: usize) -> Result<Vec<IterEntry>> {
        while self.at < self.its.len() {
            let b = self.its[self.at].next_batch(max)?;
            if !b.is_empty() {
                return Ok(b);
            }
            self.at += 1;
        }
        Ok(Vec::new())
    }
}

/// A new set's id: a hash of the paths, the time and the process, 128 bits.
fn new_set_id<P: AsRef<Path>>(paths: &[P]) -> [u8; 16] {
    let mut seed = Vec::new();
    for p in paths {
        seed.extend_from_slice(p.as_ref().as_os_str().as_encoded_bytes());
        seed.push(0);
    }
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    seed.extend_from_slice(&now.as_nanos().to_le_bytes());
    seed.extend_from_slice(&std::process::id().to_le_bytes());
    xxhash_rust::xxh3::xxh3_128(&seed).to_le_bytes()
}
