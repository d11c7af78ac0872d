//! A point read begins with the store's lock shared (issue #45 part 2): a read of a row
//! whose blocks are all cached is counted at the profile's "shared read" site alone; a read
//! that must load blocks registers them there, reads them outside the lock and puts the
//! row together in further shared holds (one more for each block the record runs on into
//! that is not cached), then caches the blocks with the lock exclusive, if it is free at
//! once (the profile's "caching reads" site); a key no row has goes the exclusive way (the
//! "read" site). The profile's counters are process-wide: this file holds one test.

mod common;

use common::*;
use shale_space::contention;
use shale_table::SimPmem;

fn acquisitions(name: &str) -> u64 {
    contention::snapshot().iter().filter(|s| s.name == name).map(|s| s.acquisitions).sum()
}

const SHARED: &str = "table: store mutex: shared read";
const EXCLUSIVE: &str = "table: store mutex: read";
const CACHING: &str = "table: store mutex: caching reads";

#[test]
fn a_cached_point_read_takes_the_store_lock_shared() {
    let d = sim(64, 5);
    let p = SimPmem::new(PMEM_BYTES);
    let store = open(&d, &p, &small_options());
    let t = store.create_table("t", schema()).unwrap();
    for i in 0..50 {
        store.insert(t, &row(&key(i), &text(&key(i), 0, 100), i)).unwrap();
    }
    contention::enable(true);
    contention::reset();
    for i in 0..50 {
        let r = store.select(t, &key(i)).unwrap().expect("inserted");
        assert_eq!(r[1], text(&key(i), 0, 100));
    }
    assert_eq!(acquisitions(SHARED), 50, "{:?}", contention::snapshot());
    assert_eq!(acquisitions(EXCLUSIVE), 0, "{:?}", contention::snapshot());
    // A key no row has: the shared path does not know it, the exclusive one says so.
    contention::reset();
    assert!(store.select(t, &key(1000)).unwrap().is_none());
    assert_eq!(acquisitions(SHARED), 1);
    assert_eq!(acquisitions(EXCLUSIVE), 1);
    // A table of about 110 blocks in a cache of 32: most reads load a block.
    let u = store.create_table("u", schema()).unwrap();
    for i in 0..3000 {
        store.insert(u, &row(&key(i), &text(&key(i), 1, 100), i)).unwrap();
    }
    contention::reset();
    let device_reads = d.stats().reads;
    for i in 0..3000 {
        let r = store.select(u, &key(i)).unwrap().expect("inserted");
        assert_eq!(r[1], text(&key(i), 1, 100));
    }
    let loaded = d.stats().reads - device_reads;
    assert!(loaded > 0, "the table outgrows the cache");
    // A read that loads blocks: shared holds put the row together, none exclusive, and
    // (the lock free, one thread here) an exclusive hold caches the blocks at once.
    let caching = acquisitions(CACHING);
    assert_eq!(acquisitions(EXCLUSIVE), 0, "{:?}", contention::snapshot());
    assert!(caching > 0 && caching <= loaded, "{caching} caching holds for {loaded} blocks loaded");
    assert!(acquisitions(SHARED) >= 3000 + caching, "{:?}", contention::snapshot());
    // Cached at once: reading every row again loads nothing the first pass loaded last.
    let device_reads = d.stats().reads;
    for i in (2900..3000).rev() {
        store.select(u, &key(i)).unwrap().expect("inserted");
    }
    assert_eq!(d.stats().reads, device_reads, "the last rows read are cached");
    // Rows of 6,000 bytes run over two or three blocks: a read of one not cached loads its
    // first block, learns from its header which blocks it runs on into, and loads those in
    // a further shared step; none goes the exclusive way. Read 7 rows apart (every row
    // once), so that a row's blocks are seldom cached by its neighbour's read.
    let w = store.create_table("w", schema()).unwrap();
    for i in 0..60 {
        store.insert(w, &row(&key(i), &text(&key(i), 2, 6000), i)).unwrap();
    }
    contention::reset();
    let device_reads = d.stats().reads;
    for i in (0..60).map(|j| j * 7 % 60) {
        let r = store.select(w, &key(i)).unwrap().expect("inserted");
        assert_eq!(r[1], text(&key(i), 2, 6000), "row {i}");
    }
    let loaded = d.stats().reads - device_reads;
    let caching = acquisitions(CACHING);
    assert!(loaded > 60, "rows over several blocks not cached: {loaded} blocks loaded");
    assert_eq!(acquisitions(EXCLUSIVE), 0, "{:?}", contention::snapshot());
    // A read that loads blocks holds the lock shared once to begin and once per step, and
    // caches once: more shared holds than that count is reads of more than one step.
    let steps = acquisitions(SHARED) - 60;
    assert!(steps >= caching + 20, "{steps} steps of {caching} reads loading blocks");
    contention::enable(false);
}
