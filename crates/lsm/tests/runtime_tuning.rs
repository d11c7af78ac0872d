//! The knobs a tuner turns while the store runs: the write buffer (memtable and L0 SST) size
//! changes from the next memtable on, in both directions, with data intact; and
//! `wait_for_compaction` returns only once no flush or compaction is pending.

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
