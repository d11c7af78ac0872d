//! Point reads (`select`): a row whose blocks are all cached is read with the store's lock
//! taken shared (readers side by side), any other after its blocks are read ahead outside
//! it. Both paths must give whole committed rows, rows spanning blocks included, never an
//! older version of a row than one read before, while writers change them and the cache
//! (smaller than the table) evicts their blocks.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};

use common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shale_table::{Isolation, SimPmem, TableStore};

const ROWS: u64 = 120;

/// Text lengths: most rows in one block, every fourth over two or three blocks.
fn len_of(i: u64) -> usize {
    if i % 4 == 0 { 5000 + (i as usize % 3) * 1500 } else { 60 + (i as usize % 90) }
}

/// Checks that `r` is a whole row of key `i` at some version: its text is the one that
/// version wrote (a row put together from blocks of two versions fails here); its version.
fn check_row(i: u64, r: &[Vec<u8>]) -> u64 {
    let n = u64::from_le_bytes(r[2].clone().try_into().expect("8-byte column"));
    assert_eq!(r[0], key(i));
    assert_eq!(r[1], text(&key(i), n, len_of(i)), "row {i} at version {n} is torn");
    n
}

/// Four readers select random rows while a writer updates them (a new version of the
/// text and the number together, one transaction each); the cache holds 32 of the
/// table's blocks, so reads take both paths.
#[test]
fn point_reads_give_whole_rows_while_writers_change_them_and_the_cache_evicts() {
    let d = sim(64, 11);
    let p = SimPmem::new(PMEM_BYTES);
    let store = open(&d, &p, &small_options());
    let t = store.create_table("t", schema()).unwrap();
    for i in 0..ROWS {
        store.insert(t, &row(&key(i), &text(&key(i), 0, len_of(i)), 0)).unwrap();
    }
    let stop = AtomicBool::new(false);
    let update = |store: &TableStore, i: u64, n: u64| {
        let mut txn = store.begin(Isolation::ReadCommitted);
        txn.update(t, &key(i), "text", &text(&key(i), n, len_of(i))).unwrap();
        txn.update(t, &key(i), "n", &n.to_le_bytes()).unwrap();
        txn.commit().unwrap();
    };
    std::thread::scope(|s| {
        for seed in 0..4u64 {
            let (store, stop) = (&store, &stop);
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(seed);
                let mut reads = 0;
                // Each row's versions only grow (the writer numbers them in order).
                let mut seen = vec![0u64; ROWS as usize];
                while !stop.load(Ordering::Relaxed) || reads < 500 {
                    let i = rng.gen_range(0..ROWS);
                    let r = store.select(t, &key(i)).unwrap().expect("every row exists");
                    let n = check_row(i, &r);
                    assert!(
                        n >= seen[i as usize],
                        "row {i} went back from {} to {n}",
                        seen[i as usize]
                    );
                    seen[i as usize] = n;
                    reads += 1;
                }
            });
        }
        let mut rng = SmallRng::seed_from_u64(99);
        for n in 1..=300 {
            update(&store, rng.gen_range(0..ROWS), n);
        }
        stop.store(true, Ordering::Relaxed);
    });
    // A row read twice in a row: the second read finds every block cached and reads
    // nothing from the device.
    for i in [0, 4, 5] {
        check_row(i, &store.select(t, &key(i)).unwrap().unwrap());
        let before = d.stats().reads;
        check_row(i, &store.select(t, &key(i)).unwrap().unwrap());
        assert_eq!(d.stats().reads - before, 0, "row {i}'s blocks were cached");
    }
    assert!(store.select(t, &key(ROWS)).unwrap().is_none());
}
