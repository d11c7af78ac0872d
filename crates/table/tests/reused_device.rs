//! A new store on a device that held another store, whose header and version logs alone were
//! wiped (as a tool or a careless `dd` leaves it; an SSD's TRIM may also read back old data):
//! the old store's blocks and its undo log on the volume (committed transactions' records,
//! and the before-images of one still open at the power cut) still lie where the new store
//! will put its own. The new store must never take them for its own: no table or row of
//! the old store appears in it, its recovery rolls back nothing of the old store's open
//! transaction over its own rows, and everything it acknowledged survives a power cut.
//!
//! The table engine is safe here by construction: a new store's undo area is zeroed
//! durably before the version log names it (`Storage::create_spill`), and every block is
//! checked against its table on the scan. Without the zeroing this test fails (checked by
//! hand: the new store's first commit finds the old store's undo segments in its area).

mod common;

use common::*;
use shale_io::{Damage, SimDevice};
use shale_table::{Isolation, SimPmem, TableOptions, TableStore, UndoLogPlace};

fn options() -> TableOptions {
    TableOptions { undo_log: UndoLogPlace::Volume, ..small_options() }
}

/// Bytes of the header and both version log mirrors of `options()`'s volume.
fn metadata_bytes() -> usize {
    (8 << 10) + 2 * options().version_log_bytes as usize
}

/// The device as a power cut leaves it now, its header and version logs zeroed if `wipe`.
fn crashed(sim: &SimDevice, wipe: bool, seed: u64) -> SimDevice {
    let mut image = sim.crash_image(sim.writes(), Damage::Keep);
    if wipe {
        image[..metadata_bytes()].fill(0);
    }
    SimDevice::from_image(image, 4096, seed).expect("device from image")
}

fn open_on(d: &SimDevice) -> TableStore {
    TableStore::open_device(device(d), SimPmem::new(PMEM_BYTES).boxed(), options()).expect("open")
}

/// The rows `prefix` writes: `rows` of them, row `i` with text of version `version`.
fn expected(rows: u64, version: u64) -> Vec<Vec<Vec<u8>>> {
    (0..rows).map(|i| row(&key(i), &text(&key(i), version, 3000), version)).collect()
}

#[test]
fn a_store_created_over_an_older_stores_blocks_and_undo_log_never_reads_them() {
    const OLD_ROWS: u64 = 40;
    const NEW_ROWS: u64 = 24;
    let sim = sim(64, 1);
    let old = open_on(&sim);
    let t = old.create_table("t", schema()).unwrap();
    for i in 0..OLD_ROWS {
        let mut tx = old.begin(Isolation::ReadCommitted);
        tx.insert(t, &row(&key(i), &text(&key(i), 1, 3000), 1)).unwrap();
        tx.commit().unwrap();
    }
    // A transaction still open at the power cut: its before-images are in the undo log,
    // and with the small cache some of its changed blocks are on the device.
    let mut open_tx = old.begin(Isolation::ReadCommitted);
    for i in 0..OLD_ROWS {
        open_tx.update(t, &key(i), "text", &text(&key(i), 2, 3000)).unwrap();
    }
    let reused = crashed(&sim, true, 2);
    std::mem::forget(open_tx);
    std::mem::forget(old);

    let new = open_on(&reused);
    assert_eq!(new.table_id("t"), None, "the old store's table was found");
    let t = new.create_table("t", schema()).unwrap();
    for i in 0..NEW_ROWS {
        let mut tx = new.begin(Isolation::ReadCommitted);
        tx.insert(t, &row(&key(i), &text(&key(i), 7, 3000), 7)).unwrap();
        tx.commit().unwrap();
    }
    assert_eq!(all_rows(&new, t), expected(NEW_ROWS, 7));

    // A power cut, and the new store's own recovery: its rows whole, nothing of the old.
    let again = crashed(&reused, false, 3);
    std::mem::forget(new);
    let store = open_on(&again);
    let t = store.table_id("t").expect("the new store's table");
    assert_eq!(all_rows(&store, t), expected(NEW_ROWS, 7));
    // And it goes on: a transaction after the recovery, kept across a clean reopen.
    let mut tx = store.begin(Isolation::ReadCommitted);
    tx.update(t, &key(0), "n", &8u64.to_le_bytes()).unwrap();
    tx.commit().unwrap();
    drop(store);
    let store = open_on(&again);
    let t = store.table_id("t").unwrap();
    let rows = all_rows(&store, t);
    assert_eq!(rows.len() as u64, NEW_ROWS);
    assert_eq!(rows[0][2], 8u64.to_le_bytes().to_vec());
}
