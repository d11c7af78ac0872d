//! The bounded index mode (`IndexMode::Bounded`): the mode is kept by the store; a cache of
//! four pages over a table that doubles several times agrees with a `HashMap` through clean
//! reopens and crashes; a damaged index page (of a snapshot, or of the working table) is
//! `Corruption`, never a wrong value; and a power cut at sampled writes of a run that
//! doubles the table and checkpoints recovers an acknowledged prefix.

mod common;

use std::collections::HashMap;

use common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shale_hash::{Error, HashOptions, HashStore, IndexMode, StoreMode};
use shale_io::{Damage, SimDevice};
use shale_space::index_page;

fn bounded() -> HashOptions {
    HashOptions { index: BOUNDED, queue_depth: 128, ..small_options() }
}

/// [`bounded`], with a checkpoint (a snapshot of the table) every 64 KiB of log, at that
/// fixed cadence (no scaling by the snapshot's size).
fn checkpointing() -> HashOptions {
    HashOptions { checkpoint_bytes: 64 << 10, checkpoint_log_ratio: 0, ..bounded() }
}

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:06}").into_bytes()
}

/// Stores `keys` through submissions, 128 at a time.
fn fill(store: &HashStore, keys: std::ops::Range<u32>, version: u64) {
    let mut tickets = Vec::new();
    for i in keys {
        let k = key(i);
        tickets
            .push(store.submit_store(&k, &value(&k, version, 20), StoreMode::Overwrite).unwrap());
        if tickets.len() == 128 {
            tickets.drain(..).for_each(|t| t.wait().unwrap());
        }
    }
    tickets.into_iter().for_each(|t| t.wait().unwrap());
}

#[test]
fn a_store_opened_in_the_other_index_mode_is_refused() {
    let d = sim(4, 61);
    let in_memory = HashOptions { index: IndexMode::InMemory, ..small_options() };
    let store = open(&d, &in_memory);
    store.store(b"key-1", b"v", StoreMode::Overwrite).unwrap();
    drop(store);
    let r = HashStore::open_device(device(&d), bounded());
    assert!(matches!(&r, Err(Error::InvalidArgument(why)) if why.contains("InMemory")), "{r:?}");
    assert_eq!(open(&d, &in_memory).retrieve(b"key-1").unwrap(), Some(b"v".to_vec()));

    let d = sim(4, 62);
    open(&d, &bounded()).store(b"key-1", b"v", StoreMode::Overwrite).unwrap();
    let r = HashStore::open_device(device(&d), in_memory);
    assert!(matches!(&r, Err(Error::InvalidArgument(why)) if why.contains("Bounded")), "{r:?}");
    assert_eq!(open(&d, &bounded()).retrieve(b"key-1").unwrap(), Some(b"v".to_vec()));

    // A cache smaller than four pages is refused before anything is opened.
    let r = HashStore::open_device(
        device(&sim(4, 63)),
        HashOptions { index: IndexMode::Bounded { cache_bytes: 3 * 4096 }, ..small_options() },
    );
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
}

#[test]
fn a_four_page_cache_over_a_doubling_table_matches_a_hash_map() {
    let mut d = sim(8, 64);
    let opts = checkpointing();
    let mut store = open(&d, &opts);
    let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
    let mut rng = SmallRng::seed_from_u64(64);
    for step in 0..12_000u64 {
        let k = key(rng.gen_range(0..4000));
        match rng.gen_range(0..10) {
            0..=1 => assert_eq!(store.delete(&k).unwrap(), model.remove(&k).is_some()),
            2..=3 => assert_eq!(store.retrieve(&k).unwrap(), model.get(&k).cloned(), "{step}"),
            _ => {
                let v = value(&k, step, rng.gen_range(0..40));
                store.store(&k, &v, StoreMode::Overwrite).unwrap();
                model.insert(k, v);
            }
        }
        if step % 4000 == 3999 {
            let s = store.stats();
            assert!(s.index_page_reads > 1000 && s.index_page_writes > 1000, "{s:?}");
            assert!(s.checkpoints > 2, "{s:?}");
            if step == 3999 {
                drop(store); // a clean close: the next open trusts the pages
            } else {
                // A power cut: the next open rebuilds the index from the log.
                let image = d.crash_image(d.writes(), Damage::Lose);
                drop(store);
                d = SimDevice::from_image(image, 4096, 0).unwrap();
            }
            store = open(&d, &opts);
            let s = store.stats();
            // The open copied the newest snapshot and replayed only the log after it.
            assert!(s.checkpoint_entries_loaded > 0 && s.recovered_records < 2000, "{s:?}");
        }
    }
    for i in 0..4000 {
        assert_eq!(store.retrieve(&key(i)).unwrap(), model.get(&key(i)).cloned(), "key {i}");
    }
    assert!(store.stats().index_buckets >= 8, "{:?}", store.stats());
    assert_eq!(store.stats().keys as usize, model.len());
}

/// The pages of the newest table on `image` (highest generation) holding more than 20
/// entries: tables a doubling or a checkpoint replaced are still on the device. The fields
/// are the space layer's index page's (`shale_space::index_page`).
fn newest_table_pages(image: &[u8]) -> Vec<u64> {
    let generation =
        |p: usize| u64::from_le_bytes(image[p * 4096 + 16..p * 4096 + 24].try_into().unwrap());
    let entries =
        |p: usize| u16::from_le_bytes(image[p * 4096 + 12..p * 4096 + 14].try_into().unwrap());
    let is_page = |p: &usize| &image[p * 4096..p * 4096 + 4] == index_page::MAGIC;
    let newest = (0..image.len() / 4096).filter(is_page).map(generation).max().unwrap();
    (0..image.len() / 4096)
        .filter(|p| is_page(p) && generation(*p) == newest && entries(*p) > 20)
        .map(|p| p as u64 * 4096)
        .collect()
}

/// A byte inside the location of entry `n % 20` of the page at `page` (the page holds more).
fn entry_byte(page: u64, n: usize) -> u64 {
    page + index_page::HEADER_BYTES as u64 + 16 * (n as u64 % 20) + 9
}

#[test]
fn a_damaged_index_page_is_corruption_never_a_wrong_value() {
    let d = sim(4, 65);
    let store = open(&d, &bounded());
    fill(&store, 0..3000, 1);
    drop(store);
    // The close wrote a snapshot, the newest table: an open copies it whole, so a flipped
    // byte in any of its pages makes the open fail.
    let image = d.current_image();
    let pages = newest_table_pages(&image);
    assert!(pages.len() >= 16, "{} snapshot pages", pages.len());
    for (n, &page) in pages.iter().enumerate().step_by(5) {
        let damaged = SimDevice::from_image(image.clone(), 4096, 0).unwrap();
        damaged.corrupt(entry_byte(page, n), 0x04);
        let r = HashStore::open_device(device(&damaged), bounded());
        assert!(matches!(r, Err(Error::Corruption { .. })), "page at {page}: {r:?}");
    }
    // The working table an open made from it, damaged under the open store: each retrieve
    // gives the right value or Corruption, never a wrong value.
    let store = open(&d, &bounded());
    let pages = newest_table_pages(&d.current_image());
    for (n, &page) in pages.iter().enumerate() {
        d.corrupt(entry_byte(page, n), 0x04);
    }
    let mut corrupt = 0;
    for i in 0..3000 {
        match store.retrieve(&key(i)) {
            Ok(v) => assert_eq!(v, Some(value(&key(i), 1, 20)), "key {i}: a wrong value"),
            Err(Error::Corruption { .. }) => corrupt += 1,
            Err(e) => panic!("key {i}: {e}"),
        }
    }
    assert!(corrupt > 2000, "{corrupt} of 3,000 retrieves found the damage");
}

#[test]
fn sampled_crash_points_of_a_run_that_doubles_the_table_recover_an_acknowledged_prefix() {
    let d = sim(8, 66);
    let opts = checkpointing();
    let store = open(&d, &opts);
    // Rounds of 150 new keys each (with values naming the round) and 50 deletes of the
    // round before: the table of four buckets doubles at 508 keys, 1,016, 2,032.
    let mut acked_at = vec![d.writes()];
    let mut states: Vec<HashMap<Vec<u8>, Vec<u8>>> = vec![HashMap::new()];
    for round in 0..16u32 {
        let mut state = states.last().unwrap().clone();
        fill(&store, round * 150..(round + 1) * 150, u64::from(round));
        for i in round * 150..(round + 1) * 150 {
            state.insert(key(i), value(&key(i), u64::from(round), 20));
        }
        if round > 0 {
            for i in (round - 1) * 150..(round - 1) * 150 + 50 {
                store.delete(&key(i)).unwrap();
                state.remove(&key(i));
            }
        }
        acked_at.push(d.writes());
        states.push(state);
    }
    assert_eq!(store.stats().index_buckets, 16, "the table doubled from 4 buckets to 16");
    assert!(store.stats().checkpoints >= 2, "{:?}", store.stats());
    drop(store);
    let writes = d.writes();
    let mut images = 0;
    // Every 15th write or so, and every write of the close (its pages written back, the
    // checkpoint, the commit naming the new table and removing what it replaced).
    let sampled = (0..=writes).step_by(((writes / 150) as usize).max(1));
    for k in sampled.chain(writes.saturating_sub(60)..=writes) {
        let image = d.crash_image(k, Damage::TornLast { seed: k, torn_unit: 512 });
        let crashed = SimDevice::from_image(image, 4096, 0).unwrap();
        let store = HashStore::open_device(device(&crashed), opts.clone())
            .unwrap_or_else(|e| panic!("write {k}: open: {e}"));
        // Rounds complete by write k are in; a round in progress may be in part.
        let done = acked_at.iter().filter(|&&w| w <= k).count().saturating_sub(1);
        let got: HashMap<Vec<u8>, Vec<u8>> = (0..16 * 150)
            .filter_map(|i| store.retrieve(&key(i)).unwrap().map(|v| (key(i), v)))
            .collect();
        for (k2, v) in &states[done] {
            let now = got.get(k2);
            let later = states.get(done + 1).and_then(|s| s.get(k2));
            assert!(now == Some(v) || now == later, "write {k}: {k2:?} lost");
        }
        for (k2, v) in &got {
            let ok = states[done].get(k2) == Some(v)
                || states.get(done + 1).and_then(|s| s.get(k2)) == Some(v);
            assert!(ok, "write {k}: {k2:?} holds a value never acknowledged by then");
        }
        images += 1;
    }
    println!("{images} crash images of {writes} writes checked");
    assert!(images > 100);
}
