//! A model test: random transactions of inserts, updates (in place, moving, spanning
//! blocks), erases and reads, committed or aborted, against a BTreeMap oracle; now and then
//! a clean reopen, or a power cut of the device and the persistent memory (mid-transaction
//! or between transactions) and a recovery, after which the store must equal the oracle of
//! committed transactions. The index keeps 4 bits of each key's hash, so most lookups meet
//! collisions the full-key check must resolve. The reclaiming pass runs every third
//! transaction or so, so inserts and moves reuse the slots of erased rows. Odd seeds keep
//! most index entries in index pages on the volume; every third seed sends the store's block
//! I/O through queue pairs (`TableOptions::queue_pairs`), in each affinity mode in turn.
//!
//! `SHALE_MODEL_SEEDS=N` runs N seeds instead of 3; a failure names its seed.

mod common;

use std::collections::BTreeMap;

use common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shale_io::{Affinity, Damage, QueuePairOptions, SimDevice};
use shale_table::{Error, Isolation, SimPmem, TableOptions, TableStore};

type Rows = BTreeMap<Vec<u8>, (Vec<u8>, u64)>;

fn text_len(rng: &mut SmallRng) -> usize {
    match rng.gen_range(0..10) {
        0 => rng.gen_range(4100..9000),
        1..=2 => rng.gen_range(500..4000),
        _ => rng.gen_range(0..200),
    }
}

fn check_all(store: &TableStore, t: shale_table::TableId, oracle: &Rows, seed: u64, step: usize) {
    let rows = all_rows(store, t);
    let want: Vec<Vec<Vec<u8>>> = oracle.iter().map(|(k, (x, n))| row(k, x, *n)).collect();
    let keys = |r: &[Vec<Vec<u8>>]| {
        r.iter().map(|r| String::from_utf8_lossy(&r[0]).into_owned()).collect::<Vec<_>>()
    };
    assert_eq!(keys(&rows), keys(&want), "seed {seed} step {step}: keys");
    assert!(rows == want, "seed {seed} step {step}: rows differ");
    check_ranges(store, t, &rows);
}

fn run(seed: u64) {
    // Odd seeds keep 8 index entries per table in memory and the rest in index pages.
    let opts = TableOptions {
        hash_bits: 4,
        index_memory_entries: (seed % 2 == 1).then_some(8),
        queue_pairs: (seed % 3 == 2).then(|| QueuePairOptions {
            pairs: 3,
            depth: 4,
            affinity: Affinity::ALL[(seed / 3 % 4) as usize],
            ..QueuePairOptions::default()
        }),
        ..small_options()
    };
    let mut d = sim(96, seed);
    let mut p = SimPmem::beside(PMEM_BYTES, &d);
    let mut store = open(&d, &p, &opts);
    let t = store.create_table("model", schema()).unwrap();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut committed = Rows::new();
    let mut version = 0u64;
    for step in 0..120 {
        let mut view = committed.clone();
        let isolation = match rng.gen_range(0..3) {
            0 => Isolation::ReadCommitted,
            1 => Isolation::RepeatableRead,
            _ => Isolation::Serializable,
        };
        let mut txn = store.begin(isolation);
        for _ in 0..rng.gen_range(1..6) {
            let k = key(rng.gen_range(0..40));
            version += 1;
            let op = rng.gen_range(0..10);
            trace(|| {
                format!("step {step} {isolation:?} op {op} key {}", String::from_utf8_lossy(&k))
            });
            match op {
                0..=2 => {
                    let x = text(&k, version, text_len(&mut rng));
                    let r = txn.insert(t, &row(&k, &x, version));
                    match view.entry(k) {
                        std::collections::btree_map::Entry::Occupied(_) => {
                            assert!(matches!(r, Err(Error::DuplicateKey)), "seed {seed}: {r:?}");
                        }
                        std::collections::btree_map::Entry::Vacant(v) => {
                            r.unwrap();
                            v.insert((x, version));
                        }
                    }
                }
                3..=4 => {
                    let x = text(&k, version, text_len(&mut rng));
                    let r = txn.update(t, &k, "text", &x);
                    match view.get_mut(&k) {
                        Some(v) => {
                            r.unwrap();
                            v.0 = x;
                        }
                        None => assert!(matches!(r, Err(Error::KeyNotFound)), "{r:?}"),
                    }
                }
                5 => {
                    let r = txn.update(t, &k, "n", &version.to_le_bytes());
                    match view.get_mut(&k) {
                        Some(v) => {
                            r.unwrap();
                            v.1 = version;
                        }
                        None => assert!(matches!(r, Err(Error::KeyNotFound)), "{r:?}"),
                    }
                }
                6..=7 => {
                    let r = txn.erase(t, &k);
                    match view.remove(&k) {
                        Some(_) => r.unwrap(),
                        None => assert!(matches!(r, Err(Error::KeyNotFound)), "{r:?}"),
                    }
                }
                8 => {
                    let got = txn.select(t, &k).unwrap();
                    assert_eq!(got, view.get(&k).map(|(x, n)| row(&k, x, *n)), "seed {seed}");
                }
                _ => {
                    let got = txn.select_cell(t, &k, "n").unwrap();
                    assert_eq!(got, view.get(&k).map(|(_, n)| n.to_le_bytes().to_vec()));
                }
            }
        }
        // The reclaiming pass with the transaction open: the rows it erased are not free
        // until it ends, and the slots the pass frees are taken by later inserts.
        if rng.gen_range(0..3) == 0 {
            store.reclaim_space().unwrap();
        }
        let end = rng.gen_range(0..20);
        trace(|| format!("step {step} end {end}"));
        match end {
            0 => {
                // A power cut in the middle of the transaction: nothing of it survives.
                let image = d.crash_image(d.writes(), Damage::Random { seed, torn_unit: 512 });
                let pimage = p.crash_image(p.events(), seed ^ step as u64);
                drop(txn);
                drop(store);
                d = SimDevice::from_image(image, 4096, seed).unwrap();
                p = SimPmem::from_image(pimage, Some(d.clone()));
                store = open(&d, &p, &opts);
            }
            1..=6 => txn.abort().unwrap(),
            _ => {
                txn.commit().unwrap();
                committed = view;
            }
        }
        let after = rng.gen_range(0..25);
        trace(|| format!("step {step} after {after}"));
        match after {
            0 => {
                drop(store);
                store = open(&d, &p, &opts);
            }
            1 => {
                // A power cut between transactions: every commit survives.
                let image = d.crash_image(d.writes(), Damage::Lose);
                let pimage = p.crash_image(p.events(), seed + step as u64);
                drop(store);
                d = SimDevice::from_image(image, 4096, seed).unwrap();
                p = SimPmem::from_image(pimage, Some(d.clone()));
                store = open(&d, &p, &opts);
            }
            _ => {}
        }
        if step % 10 == 9 {
            check_all(&store, t, &committed, seed, step);
        }
    }
    drop(store);
    let store = open(&d, &p, &opts);
    check_all(&store, t, &committed, seed, usize::MAX);
}

#[test]
fn random_transactions_match_the_model() {
    if let Some(seed) = std::env::var("SHALE_MODEL_SEED").ok().and_then(|s| s.parse().ok()) {
        return run(seed);
    }
    for seed in 0..seeds("SHALE_MODEL_SEEDS", 3) {
        run(seed);
    }
}

fn trace(f: impl FnOnce() -> String) {
    if std::env::var_os("SHALE_MODEL_TRACE").is_some() {
        eprintln!("{}", f());
    }
}
