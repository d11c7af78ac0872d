//! `Options::cache_index_and_filter_blocks` through the engine, with RocksDB's two meanings:
//! - `false` (the default): each SST's reader holds its index and filter outside the block
//!   cache, so after reading every key the cache holds data blocks only, and the readers' copies
//!   are what lookups use;
//! - `true`: index and filter blocks live in the block cache; with a cache too small for the
//!   data they are evicted, read again on the next lookup (counted as misses) and checked, so
//!   reads stay right and a byte damaged on the device after the open is Corruption once the
//!   cached copy is gone.

use std::sync::Arc;

use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use shale_io::SimDevice;
use shale_lsm::sst::footer::{FOOTER_BYTES, Footer};
use shale_lsm::{Db, Error, Options};

const KEYS: u32 = 3000;
const DEVICE_BYTES: u64 = 64 << 20;
/// A block cache (of one shard) that holds the index (about 2 KiB) and filter (about 2.5 KiB)
/// of every SST with a few data blocks beside them: the data (about 330 KB) is twenty times
/// larger. With 128 KiB, the index and filter blocks, touched by every lookup of their SST,
/// were never evicted.
const TINY_CACHE_BYTES: usize = 16 << 10;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    vec![(i % 251) as u8; 100]
}

fn options(cache_index_and_filter_blocks: bool, block_cache_bytes: usize) -> Options {
    Options { cache_index_and_filter_blocks, block_cache_bytes, ..Options::small_for_tests() }
}

/// A store on a simulated device holding `KEYS` keys in compacted SSTs (about 330 KB of
/// pairs in two or more SSTs of at most 256 KiB).
fn loaded(o: Options) -> (SimDevice, Db) {
    let dev = SimDevice::new(DEVICE_BYTES, 4096, 1).unwrap();
    let db = Db::open_device(Arc::new(dev.clone()), o).unwrap();
    for i in 0..KEYS {
        db.put(&key(i), &value(i)).unwrap();
    }
    db.compact_range().unwrap();
    assert!(db.stats().files_per_level.iter().sum::<usize>() >= 2, "{:?}", db.stats());
    (dev, db)
}

/// Reads every key in a shuffled order; every value must be right.
fn read_all(db: &Db, seed: u64) {
    let mut order: Vec<u32> = (0..KEYS).collect();
    order.shuffle(&mut SmallRng::seed_from_u64(seed));
    for i in order {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "key {i}");
    }
}

#[test]
fn with_false_the_cache_holds_data_blocks_only_and_with_true_index_and_filter_too() {
    // A cache far larger than the data: nothing is evicted, so what it holds is all it was given.
    let (_dev, db) = loaded(options(false, 16 << 20));
    read_all(&db, 1);
    let s = db.stats();
    assert!(s.block_cache_bytes > 0, "{s:?}");
    assert_eq!(s.block_cache_index_and_filter_bytes, 0, "{s:?}");
    assert!(s.sst_index_and_filter_held_bytes > 0, "the readers hold them: {s:?}");
    let lookups = s.block_cache_index_hits
        + s.block_cache_index_misses
        + s.block_cache_filter_hits
        + s.block_cache_filter_misses;
    assert_eq!(lookups, 0, "nothing looks for an index or filter in the cache: {s:?}");
    let held = s.sst_index_and_filter_held_bytes;
    db.close().unwrap();

    let (_dev, db) = loaded(options(true, 16 << 20));
    read_all(&db, 1);
    let s = db.stats();
    assert_eq!(s.sst_index_and_filter_held_bytes, 0, "{s:?}");
    assert_eq!(s.block_cache_index_and_filter_bytes as u64, held, "the same blocks: {s:?}");
    assert!(s.block_cache_bytes > s.block_cache_index_and_filter_bytes, "{s:?}");
    // Every get asks the cache for the index of each SST it reads (and the filter first).
    assert!(s.block_cache_index_hits >= u64::from(KEYS), "{s:?}");
    assert!(s.block_cache_filter_hits >= u64::from(KEYS), "{s:?}");
    db.close().unwrap();
}

#[test]
fn with_true_and_a_tiny_cache_index_and_filter_are_evicted_and_read_again() {
    let (_dev, db) = loaded(options(true, TINY_CACHE_BYTES));
    let before = db.stats();
    for seed in 0..3 {
        read_all(&db, seed);
    }
    let s = db.stats();
    let reread = (s.block_cache_index_misses - before.block_cache_index_misses)
        + (s.block_cache_filter_misses - before.block_cache_filter_misses);
    assert!(reread > 100, "index and filter read again only {reread} times: {s:?}");
    assert!(s.block_cache_bytes <= TINY_CACHE_BYTES, "{s:?}");
    assert_eq!(s.sst_index_and_filter_held_bytes, 0, "{s:?}");
    // Scans too: each SST iterator fetches its index once and holds it.
    let mut n = 0;
    let mut it = db.iter(&Default::default());
    it.seek_to_first();
    while it.valid() {
        assert_eq!(it.value(), &value(n)[..], "key {n}");
        n += 1;
        it.next();
    }
    it.status().unwrap();
    assert_eq!(n, KEYS);
    db.close().unwrap();
}

/// Device offsets of one byte in the middle of the index block of every live SST.
fn index_bytes(dev: &SimDevice, db: &Db) -> Vec<u64> {
    let image = dev.current_image();
    let v = db.volume().clone();
    let mut out = Vec::new();
    for range in v.live_extents().into_iter().map(|e| v.extent_range(e)) {
        let sst = &image[range.start as usize..range.end as usize];
        let footer = Footer::decode(&sst[sst.len() - FOOTER_BYTES..], sst.len() as u64).unwrap();
        out.push(range.start + footer.index.offset + u64::from(footer.index.size) / 2);
    }
    out
}

/// Reads every key `rounds` times: each read must be right or Corruption. Returns how many
/// reads were Corruption.
fn corruptions_reading(db: &Db, rounds: u64) -> usize {
    let mut corrupt = 0;
    for seed in 0..rounds {
        let mut order: Vec<u32> = (0..KEYS).collect();
        order.shuffle(&mut SmallRng::seed_from_u64(seed));
        for i in order {
            match db.get(&key(i)) {
                Ok(v) => assert_eq!(v, Some(value(i)), "key {i}: wrong data"),
                Err(Error::Corruption { .. }) => corrupt += 1,
                Err(e) => panic!("key {i}: {e:?}, not Corruption"),
            }
        }
    }
    corrupt
}

#[test]
fn with_true_a_flipped_index_byte_read_after_eviction_is_corruption() {
    let (dev, db) = loaded(options(true, TINY_CACHE_BYTES));
    read_all(&db, 0); // the index and filter are cached, and read at least once
    let flips = index_bytes(&dev, &db);
    assert!(flips.len() >= 2, "{flips:?}");
    dev.corrupt(flips[0], 0x10);
    let corrupt = corruptions_reading(&db, 3);
    assert!(corrupt > 0, "the damaged index was never read again");
    assert!(corrupt < 3 * KEYS as usize, "only the damaged SST's keys fail: {corrupt}");
    // A scan meets the damaged index too, once its cached copy is gone.
    let mut it = db.iter(&Default::default());
    it.seek_to_first();
    while it.valid() {
        it.next();
    }
    assert!(matches!(it.status(), Err(Error::Corruption { .. })), "{:?}", it.status().err());
    drop(it);
    // Repaired on the device: the next miss reads the good block and every read is right.
    dev.corrupt(flips[0], 0x10);
    assert_eq!(corruptions_reading(&db, 2), 0);
}

#[test]
fn with_false_the_readers_copy_is_used_after_the_open() {
    // What RocksDB's default means: the index is read once, at open, and held. Damage on the
    // device afterwards is not read by lookups (`Db::check` reads the device again).
    let (dev, db) = loaded(options(false, TINY_CACHE_BYTES));
    for &at in &index_bytes(&dev, &db) {
        dev.corrupt(at, 0x10);
    }
    assert_eq!(corruptions_reading(&db, 2), 0);
    let checked = db.check();
    assert!(matches!(checked, Err(Error::Corruption { .. })), "{checked:?}");
}
