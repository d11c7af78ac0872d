//! The index held in memory costs at most 24 bytes a key (issue #11's target), as the store
//! reports it, at every size from a thousand keys to a hundred thousand.

mod common;

use common::*;
use shale_hash::{HashOptions, StoreMode};

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
