//! A new store on a device that held another store, whose header and version logs alone were
//! wiped (as a tool or a careless `dd` leaves it; an SSD's TRIM may also read back old data):
//! the old store's WAL groups and WAL metadata still lie in the WAL area. The new store must
//! never replay them: none of the old keys appears in it, and its own writes survive a crash.

use std::sync::Arc;

use shale_io::{Damage, SimDevice};
use shale_lsm::{Db, Options, WriteBatch, WriteOptions};

fn options() -> Options {
    let mut o = Options::small_for_tests();
    o.volume.layout.wal_bytes = 8 << 20;
    o
}

fn synced_puts(db: &Db, prefix: &str, n: u32) {
    for i in 0..n {
        let mut b = WriteBatch::default();
        b.put(format!("{prefix}-{i:04}").as_bytes(), prefix.as_bytes());
        db.write(&b, &WriteOptions { sync: true }).unwrap();
    }
}

/// The device as a power cut leaves it now, with the header area and both version log mirrors
/// zeroed.
fn crashed(sim: &SimDevice, wipe: bool, seed: u64) -> SimDevice {
    let mut image = sim.crash_image(sim.writes(), Damage::Keep);
    if wipe {
        let end = 8192 + 2 * options().volume.layout.version_log_bytes as usize;
        image[..end].fill(0);
    }
    SimDevice::from_image(image, 4096, seed).unwrap()
}

#[test]
fn a_store_created_over_an_older_stores_wal_never_replays_it() {
    let sim = SimDevice::new(64 << 20, 4096, 1).unwrap();
    let old = Db::open_device(Arc::new(sim.clone()), options()).unwrap();
    synced_puts(&old, "old", 200);
    // Power cut: the old store's writes are in its WAL only.
    let reused = crashed(&sim, true, 2);
    std::mem::forget(old);

    let new = Db::open_device(Arc::new(reused.clone()), options()).unwrap();
    assert_eq!(new.get(b"old-0001").unwrap(), None, "the old store's WAL was replayed");
    synced_puts(&new, "new", 50);
    // Its own writes, in its own WAL, survive a power cut.
    let again = crashed(&reused, false, 3);
    std::mem::forget(new);
    let db = Db::open_device(Arc::new(again), options()).unwrap();
    for i in 0..50 {
        assert_eq!(db.get(format!("new-{i:04}").as_bytes()).unwrap(), Some(b"new".to_vec()));
    }
    for i in 0..200 {
        assert_eq!(db.get(format!("old-{i:04}").as_bytes()).unwrap(), None);
    }
}
