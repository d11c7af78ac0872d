//! Regression: a batch whose first record does not fit in the pages left in the active
//! segment starts a new segment. The worker used to leave such a record waiting for a batch
//! that never came, spinning (found by `shale kvbench` with 4 KiB values and submissions in
//! flight): every submission here must complete within seconds.

mod common;

use std::sync::mpsc;
use std::time::Duration;

use common::*;
use shale_hash::{HashOptions, SEGMENT_BYTES_MIN, StoreMode};

#[test]
fn a_record_that_the_active_segment_cannot_hold_starts_a_new_one() {
    each_mode(|| {
        let (done, finished) = mpsc::channel();
        std::thread::spawn(move || {
            let d = sim(40, 81);
            let opts = HashOptions { segment_bytes: SEGMENT_BYTES_MIN, ..small_options() };
            let store = open(&d, &opts);
            // Batches of several 4 KiB values (two pages each) against 16-page segments: the
            // pages left are often fewer than a record needs.
            for round in 0..40u32 {
                let tickets: Vec<_> = (0..7u32)
                    .map(|i| {
                        let key = format!("k{round:03}-{i}").into_bytes();
                        store.submit_store(&key, &[i as u8; 4096], StoreMode::Overwrite).unwrap()
                    })
                    .collect();
                for t in tickets {
                    t.wait().unwrap();
                }
            }
            // A lone store that fills most of a segment, then one that needs more than is left.
            store.store(b"big-1", &vec![1; 50_000], StoreMode::Overwrite).unwrap();
            store.store(b"big-2", &vec![2; 30_000], StoreMode::Overwrite).unwrap();
            assert_eq!(store.retrieve(b"big-2").unwrap().map(|v| v.len()), Some(30_000));
            assert_eq!(store.retrieve(b"k039-6").unwrap(), Some(vec![6; 4096]));
            done.send(()).unwrap();
        });
        assert!(
            finished.recv_timeout(Duration::from_secs(60)).is_ok(),
            "the worker never finished the submissions"
        );
    });
}
