//! The knobs a tuner turns while the store runs: the write buffer (memtable and L0 SST) size
//! changes from the next memtable on, in both directions, with data intact; the compaction
//! output size changes for the compactions that start next; the number of background threads
//! grows and shrinks while writers keep the store busy; and `wait_for_compaction` returns only
//! once no flush or compaction is pending.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use shale_lsm::{Db, Options};

#[test]
fn write_buffer_size_changes_while_running() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
    let value = vec![7u8; 1000];
    let mut n = 0u32;
    let mut put = |db: &Db, count: u32| {
        for _ in 0..count {
            db.put(format!("k{n:08}").as_bytes(), &value).unwrap();
            n += 1;
        }
    };
    put(&db, 2000);
    let flushes_before = db.stats().flushes;
    db.set_write_buffer_bytes(64 << 10).unwrap();
    put(&db, 2000);
    db.flush().unwrap();
    let small = db.stats().flushes - flushes_before;
    db.set_write_buffer_bytes(1 << 20).unwrap();
    let flushes_before = db.stats().flushes;
    put(&db, 2000);
    db.flush().unwrap();
    let big = db.stats().flushes - flushes_before;
    assert!(
        small > 2 * big,
        "64 KiB memtables flushed {small} times, 1 MiB ones {big} times for the same data"
    );
    assert!(db.set_write_buffer_bytes(1000).is_err());
    db.wait_for_compaction().unwrap();
    let s = db.stats();
    assert!(s.files_per_level[0] < Options::small_for_tests().level0_file_num_compaction_trigger);
    assert_eq!(s.pending_compaction_bytes, 0);
    for i in (0..6000u32).step_by(97) {
        assert_eq!(db.get(format!("k{i:08}").as_bytes()).unwrap(), Some(value.clone()));
    }
    db.close().unwrap();
}

fn busy_options() -> Options {
    let mut o = Options::small_for_tests();
    o.write_buffer_bytes = 64 << 10;
    o.target_file_size_base = 64 << 10;
    o.max_bytes_for_level_base = 256 << 10;
    o.level0_file_num_compaction_trigger = 2;
    o
}

fn scattered(i: u32) -> Vec<u8> {
    format!("key{:010}", i.wrapping_mul(2_654_435_761)).into_bytes()
}

#[test]
fn background_jobs_change_while_writing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), busy_options()).unwrap());
    assert_eq!((db.stats().background_jobs, db.stats().compaction_threads), (2, 1));
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU32::new(0));
    let writer = {
        let (db, stop, written) = (db.clone(), stop.clone(), written.clone());
        std::thread::spawn(move || {
            let mut i = 0u32;
            while !stop.load(Ordering::Relaxed) || i < 3000 {
                db.put(&scattered(i), &[(i % 251) as u8; 300]).unwrap();
                i += 1;
                written.store(i, Ordering::Relaxed);
            }
        })
    };
    // Up and down, each time waiting until the threads themselves have started or retired
    // (a retiring thread counts itself out when it next looks for work).
    for jobs in [6, 3, 8, 2, 4] {
        db.set_background_jobs(jobs).unwrap();
        assert_eq!(db.stats().background_jobs, jobs);
        let deadline = Instant::now() + Duration::from_secs(20);
        while db.stats().compaction_threads != jobs - 1 {
            assert!(Instant::now() < deadline, "{jobs} jobs: {:?}", db.stats());
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(150));
    }
    assert!(db.set_background_jobs(1).is_err(), "a flush thread and a compaction thread at least");
    assert!(db.set_background_jobs(shale_lsm::options::BACKGROUND_JOBS_MAX + 1).is_err());
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let n = written.load(Ordering::Relaxed);
    db.wait_for_compaction().unwrap();
    let s = db.stats();
    assert!(s.compactions > 0 && s.running_compactions == 0, "{s:?}");
    for i in (0..n).step_by(7) {
        assert_eq!(db.get(&scattered(i)).unwrap(), Some(vec![(i % 251) as u8; 300]), "key {i}");
    }
    db.check().unwrap();
    Arc::into_inner(db).unwrap().close().unwrap();
}

#[test]
fn target_file_size_changes_while_running() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), busy_options()).unwrap();
    let slot = db.volume().layout().slot_bytes;
    // The average SST of the level holding everything after a full compaction.
    let average_sst = |db: &Db| {
        db.compact_range().unwrap();
        let s = db.stats();
        let l = s.files_per_level.iter().rposition(|&n| n > 0).unwrap();
        assert_eq!(s.files_per_level.iter().filter(|&&n| n > 0).count(), 1, "{s:?}");
        s.bytes_per_level[l] / s.files_per_level[l] as u64
    };
    for i in 0..3000 {
        db.put(&scattered(i), &[1; 500]).unwrap();
    }
    assert_eq!(average_sst(&db), slot, "one-slot SSTs");
    db.set_target_file_size(8 * slot).unwrap();
    assert_eq!(db.stats().target_file_bytes, 8 * slot);
    for i in 3000..6000 {
        db.put(&scattered(i), &[2; 500]).unwrap();
    }
    assert!(average_sst(&db) > 4 * slot, "larger SSTs once the target is larger");
    assert!(db.set_target_file_size(slot - 1).is_err());
    db.check().unwrap();
    db.close().unwrap();
}
