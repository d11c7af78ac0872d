//! A point read begins with the store's lock shared (issue #45 part 2): a read of a row
//! whose blocks are all cached is counted at the profile's "shared read" site alone; a read
//! that must load a block registers it there, reads it outside the lock, puts the row
//! together in a second shared hold and caches the block with the lock exclusive (the
//! profile's "read" site) when it is free; a key no row has goes the exclusive way. The
//! profile's counters are process-wide: this file holds one test.

mod common;

use common::*;
use shale_space::contention;
use shale_table::SimPmem;

fn acquisitions(name: &str) -> u64 {
    contention::snapshot().iter().filter(|s| s.name == name).map(|s| s.acquisitions).sum()
}

const SHARED: &str = "table: store mutex: shared read";
const EXCLUSIVE: &str = "table: store mutex: read";

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
    // A read that loads its block: a second shared hold puts the row together, and (the
    // lock free, one thread here) an exclusive one caches the block at once.
    let missed = acquisitions(EXCLUSIVE);
    assert!(missed > 0 && missed <= loaded, "{missed} exclusive holds for {loaded} blocks loaded");
    assert_eq!(acquisitions(SHARED), 3000 + missed, "{:?}", contention::snapshot());
    // Cached at once: reading every row again loads nothing the first pass loaded last.
    let device_reads = d.stats().reads;
    for i in (2900..3000).rev() {
        store.select(u, &key(i)).unwrap().expect("inserted");
    }
    assert_eq!(d.stats().reads, device_reads, "the last rows read are cached");
    contention::enable(false);
}
