//! The memtable's pace (`memtable_pace.rs`): while the flush ahead of the active memtable
//! runs and the next switch would have to wait for it, writes are paced so that the memtable
//! fills no sooner than the flush ends, instead of all stopping for the rest of the flush.
//!
//! The flush is made slow by a failpoint that holds it at each step of its progress, while a
//! writer writes small records as fast as it can. Events, not times: the pace's own counters
//! say it delayed write groups, each within its bound; every write reads back, also after a
//! reopen.

use std::sync::Arc;
use std::time::Duration;

use shale_lsm::options::FailpointHook;
use shale_lsm::{Db, Options};

const KEYS: u32 = 40_000;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    format!("value of {i:08}, padded to a few dozen bytes").into_bytes()
}

#[test]
fn a_slow_flush_paces_the_writes_behind_it_instead_of_stopping_them() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        write_buffer_bytes: 1 << 20,
        max_write_buffer_number: 2,
        level0_file_num_compaction_trigger: 1000,
        level0_slowdown_writes_trigger: 1000,
        level0_stop_writes_trigger: 1000,
        // Each step of a flush's progress (4,096 entries) takes at least 400 ms: a flush of
        // a memtable of about 9,000 entries takes 800 ms and more, longer than a writer takes
        // to fill the next one, even in a debug build.
        flush_progress_hook: Some(FailpointHook(Arc::new(|| {
            std::thread::sleep(Duration::from_millis(400))
        }))),
        ..Options::small_for_tests()
    };
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    for i in 0..KEYS {
        db.put(&key(i), &value(i)).unwrap();
    }
    let s = db.stats();
    let pace = s.memtable_pace;
    println!(
        "flushes {}, memtable pace {pace:?}, memtable stalls {:?}",
        s.flushes, s.stalls.memtable
    );
    assert!(s.flushes >= 3, "the writes filled several memtables: {s:?}");
    assert!(pace.delayed_groups > 0, "no write was paced behind a slow flush: {pace:?}");
    assert!(pace.scheduled_us > 0);
    assert_eq!(pace.longest_past_bound_us, 0, "every wait within its bound: {pace:?}");
    assert!(
        s.stalls.memtable.duration_us >= pace.scheduled_us * 9 / 10,
        "the pace's waits count as memtable stall time: {s:?}"
    );
    for i in (0..KEYS).step_by(97) {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "key {i}");
    }
    db.close().unwrap();
    let db = Db::open(dir.path(), opts).unwrap();
    for i in 0..KEYS {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "key {i} after reopening");
    }
    db.check().unwrap();
}
