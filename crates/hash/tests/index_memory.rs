//! The index held in memory costs at most 24 bytes a key (issue #11's target), as the store
//! reports it, at every size from a thousand keys to a hundred thousand.

mod common;

use common::*;
use shale_hash::{HashOptions, IndexMode, StoreMode};

#[test]
fn the_index_costs_at_most_24_bytes_a_key() {
    let d = sim(8, 71);
    let store = open(&d, &HashOptions { queue_depth: 256, ..small_options() });
    let mut worst: f64 = 0.0;
    let mut tickets = Vec::new();
    for i in 0..100_000u32 {
        let key = format!("k{i:08}").into_bytes();
        tickets.push(store.submit_store(&key, &i.to_le_bytes(), StoreMode::Overwrite).unwrap());
        if tickets.len() == 200 {
            for t in tickets.drain(..) {
                t.wait().unwrap();
            }
            let s = store.stats();
            if s.keys >= 1000 {
                worst = worst.max(s.index_memory_bytes as f64 / s.keys as f64);
            }
        }
    }
    for t in tickets {
        t.wait().unwrap();
    }
    assert_eq!(store.stats().keys, 100_000);
    assert!(worst <= 24.0, "{worst:.1} bytes a key at worst");
    println!("index: {worst:.1} bytes a key at worst");
}

/// Bounded mode: the index's resident memory is its page cache, fixed at the open, so it
/// stays within 10% (issue #11's target) while the keys grow twentyfold, 10,000 to 200,000
/// (100-byte values), the table doubling under it; the in-memory index grows with the keys.
#[test]
fn bounded_index_memory_stays_flat_as_keys_grow_twentyfold() {
    let mut grew = Vec::new();
    for index in [BOUNDED_256K, IndexMode::InMemory] {
        let d = sim(16, 72);
        let store = open(&d, &HashOptions { queue_depth: 256, index, ..small_options() });
        let mut at = Vec::new();
        let mut tickets = Vec::new();
        for i in 0..200_000u32 {
            let key = format!("k{i:08}").into_bytes();
            tickets.push(store.submit_store(&key, &[i as u8; 100], StoreMode::Overwrite).unwrap());
            if tickets.len() == 200 {
                tickets.drain(..).for_each(|t| t.wait().unwrap());
            }
            if i + 1 == 10_000 || (i + 1) % 50_000 == 0 {
                tickets.drain(..).for_each(|t| t.wait().unwrap());
                at.push(store.stats().index_memory_bytes);
            }
        }
        let s = store.stats();
        assert_eq!(s.keys, 200_000);
        let (lo, hi) = (*at.iter().min().unwrap(), *at.iter().max().unwrap());
        println!("{index:?}: index memory {at:?} bytes at 10k, 50k, ... 200k keys; {s:?}");
        if index != IndexMode::InMemory {
            assert!(hi as f64 <= lo as f64 * 1.10, "{at:?}");
            assert!(s.index_buckets >= 1024, "the table grew to {} buckets", s.index_buckets);
        }
        grew.push(hi as f64 / lo as f64);
    }
    assert!(grew[1] > 10.0, "the in-memory index grows with the keys: {grew:?}");
}

const BOUNDED_256K: IndexMode = IndexMode::Bounded { cache_bytes: 256 << 10 };
