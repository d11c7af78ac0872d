//! `Options::prepopulate_block_cache` through the engine: after flushes and a full compaction
//! every key reads from the block cache with it on (no miss), and with it off the same reads
//! go to the device (the cache starts cold for every SST the compaction wrote). Compactions'
//! own reads add nothing to the cache.

use std::sync::Arc;

use shale_io::SimDevice;
use shale_lsm::{Db, Options};

const KEYS: u32 = 3000;

/// Block-cache misses of reading every key once after a flushed and compacted load.
fn misses_of_reading_back(prepopulate: bool) -> u64 {
    let mut o = Options::small_for_tests();
    o.block_cache_bytes = 16 << 20; // far more than the data: nothing is evicted
    o.prepopulate_block_cache = prepopulate;
    let dev = SimDevice::new(64 << 20, 4096, 1).unwrap();
    let db = Db::open_device(Arc::new(dev), o).unwrap();
    for i in 0..KEYS {
        db.put(format!("key{i:06}").as_bytes(), &[(i % 251) as u8; 100]).unwrap();
    }
    db.compact_range().unwrap();
    assert!(db.stats().compactions > 0, "the load must have been compacted");
    let before = db.stats().block_cache_misses;
    for i in 0..KEYS {
        let v = db.get(format!("key{i:06}").as_bytes()).unwrap();
        assert_eq!(v.as_deref(), Some(&[(i % 251) as u8; 100][..]), "key {i}");
    }
    db.stats().block_cache_misses - before
}

#[test]
fn new_ssts_are_read_from_the_cache_only_when_prepopulated() {
    assert_eq!(misses_of_reading_back(true), 0);
    assert!(misses_of_reading_back(false) > 0);
}

/// A compaction reads its inputs without caching them (RocksDB's `fill_cache = false`): each
/// block is read once and retired at the commit, and caching it evicted what readers use.
/// Blocks the cache holds are still used.
#[test]
fn compactions_add_nothing_to_the_block_cache() {
    let mut o = Options::small_for_tests();
    o.block_cache_bytes = 16 << 20;
    o.prepopulate_block_cache = false;
    let dev = SimDevice::new(64 << 20, 4096, 1).unwrap();
    let db = Db::open_device(Arc::new(dev), o).unwrap();
    // Readers cache blocks of the flushed SSTs, which the compaction then reads.
    load_three_rounds_and_read_some(&db);
    let before = db.stats();
    assert!(before.block_cache_adds > 0, "reads that miss add their blocks: {before:?}");
    db.compact_range().unwrap();
    let after = db.stats();
    assert!(after.compactions > before.compactions, "{after:?}");
    assert!(after.block_cache_hits > before.block_cache_hits, "cached inputs were used");
    assert_eq!(after.block_cache_adds, before.block_cache_adds, "the compaction cached blocks");
    read_back_the_last_round(&db);
}

/// Three rounds of every key, each flushed (the last round's values win), then a read of every
/// third key.
fn load_three_rounds_and_read_some(db: &Db) {
    for round in 0..3u32 {
        for i in 0..KEYS {
            db.put(format!("key{i:06}").as_bytes(), &[(i + round) as u8; 100]).unwrap();
        }
        db.flush().unwrap();
    }
    for i in (0..KEYS).step_by(3) {
        db.get(format!("key{i:06}").as_bytes()).unwrap();
    }
}

/// Every key reads back with its last round's value.
fn read_back_the_last_round(db: &Db) {
    for i in 0..KEYS {
        let v = db.get(format!("key{i:06}").as_bytes()).unwrap();
        assert_eq!(v.as_deref(), Some(&[(i + 2) as u8; 100][..]), "key {i}");
    }
}

/// What a store in a file does with the block cache over three flushed rounds of every key, a
/// read of every third key, and a full compaction: the adds of the compaction and the misses
/// of reading every key after it (each checked).
fn compaction_adds_and_misses_after(direct_writes: bool, cache_bytes: usize) -> (u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let mut o = Options::small_for_tests();
    o.block_cache_bytes = cache_bytes;
    o.prepopulate_block_cache = true;
    o.use_direct_reads = false;
    o.use_direct_io_for_flush_and_compaction = direct_writes;
    let db = Db::open(dir.path().join("db"), o).unwrap();
    load_three_rounds_and_read_some(&db);
    let before = db.stats();
    db.compact_range().unwrap();
    let after = db.stats();
    assert!(after.compactions > before.compactions, "{after:?}");
    read_back_the_last_round(&db);
    let read = db.stats();
    (
        after.block_cache_adds - before.block_cache_adds,
        read.block_cache_misses - after.block_cache_misses,
    )
}

/// A compaction's outputs go into the block cache as they are written. Through the page cache
/// (the defaults) they only fill free room: a cache larger than the data holds the new SSTs
/// whole (no read misses after), while a full cache keeps the blocks it has instead of
/// taking the outputs (which the page cache holds). With O_DIRECT SST writes no page cache
/// holds them, and they push older blocks out.
#[test]
fn compaction_outputs_fill_free_room_but_evict_only_without_a_page_cache() {
    for direct_writes in [false, true] {
        let (adds, misses) = compaction_adds_and_misses_after(direct_writes, 16 << 20);
        assert!(adds > 0, "direct writes {direct_writes}: the outputs were not cached");
        assert_eq!(misses, 0, "direct writes {direct_writes}: reads after the compaction missed");
    }
    let (buffered, _) = compaction_adds_and_misses_after(false, 64 << 10);
    let (direct, _) = compaction_adds_and_misses_after(true, 64 << 10);
    assert!(buffered * 4 < direct, "through the page cache {buffered}, O_DIRECT {direct}");
}
