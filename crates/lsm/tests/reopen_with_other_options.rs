//! Reopening a store with options that change the WAL's geometry (the number of log groups
//! follows `max_write_buffer_number`), after a clean close and after a crash with unflushed
//! synced writes in the WAL: the WAL is recovered with the geometry it was written with, and
//! the store goes on with the new one.

use std::sync::Arc;

use shale_io::{Damage, SimDevice};
use shale_lsm::batch::WriteBatch;
use shale_lsm::{Db, Options, WriteOptions};

fn options(max_write_buffer_number: usize) -> Options {
    Options { max_write_buffer_number, ..Options::small_for_tests() }
}

fn put_synced(db: &Db, k: &str, v: &str) {
    let mut b = WriteBatch::new();
    b.put(k.as_bytes(), v.as_bytes());
    db.write(&b, &WriteOptions { sync: true }).unwrap();
}

#[test]
fn reopen_with_another_wal_geometry_after_close_and_after_crash() {
    let dev = SimDevice::new(32 << 20, 4096, 1).unwrap();
    let db = Db::open_device(Arc::new(dev.clone()), options(2)).unwrap();
    put_synced(&db, "a", "1");
    db.close().unwrap();
    let db = Db::open_device(Arc::new(dev.clone()), options(5)).unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
    put_synced(&db, "b", "2");
    // A power cut with "b" only in the WAL (5 groups), reopened with 3 groups.
    let image = dev.crash_image(dev.writes(), Damage::Lose);
    drop(db);
    let dev = SimDevice::from_image(image, 4096, 1).unwrap();
    let db = Db::open_device(Arc::new(dev.clone()), options(2)).unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get(b"b").unwrap(), Some(b"2".to_vec()), "a synced write in the old geometry");
    put_synced(&db, "c", "3");
    db.check().unwrap();
    db.close().unwrap();
    let db = Db::open_device(Arc::new(dev), options(3)).unwrap();
    for (k, v) in [("a", "1"), ("b", "2"), ("c", "3")] {
        assert_eq!(db.get(k.as_bytes()).unwrap(), Some(v.as_bytes().to_vec()));
    }
}
