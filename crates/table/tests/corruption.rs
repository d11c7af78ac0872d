//! Damage to persisted bytes is Corruption, never wrong data (P4): a flipped byte in a
//! block (found by a read after the cache let it go, and by the open's scan), in an undo
//! record followed by another, and in both headers of the undo log.

mod common;

use common::*;
use shale_io::{Damage, SimDevice};
use shale_table::{BLOCK_BYTES, Error, Isolation, SimPmem, TableOptions, TableStore};

/// Rows of about 930 bytes: 45 blocks, more than the 32 the cache holds.
const ROWS: u64 = 200;

fn filled(d: &SimDevice, p: &SimPmem, opts: &TableOptions) -> (TableStore, shale_table::TableId) {
    let store = open(d, p, opts);
    let t = store.create_table("t", schema()).unwrap();
    for i in 0..ROWS {
        store.insert(t, &row(&key(i), &text(&key(i), 1, 900), i)).unwrap();
    }
    (store, t)
}

#[test]
fn a_flipped_block_byte_is_corruption_on_read_and_at_open() {
    for offset in [0, 5, 30, 40, 2000, BLOCK_BYTES as u64 - 1] {
        let d = sim(32, 31);
        let p = SimPmem::new(PMEM_BYTES);
        let (store, t) = filled(&d, &p, &small_options());
        let address = store.block_address(t, 1).unwrap();
        d.corrupt(address + offset, 0x20);
        // The cache (32 blocks) no longer holds block 1 once the others are read.
        let mut hit = None;
        for i in 0..ROWS {
            match store.select(t, &key(i)) {
                Ok(Some(r)) => assert_eq!(r, row(&key(i), &text(&key(i), 1, 900), i)),
                Ok(None) => panic!("row {i} lost"),
                Err(e) => hit = Some(e),
            }
        }
        // Rows in block 1 are the ones that reach it; at least one read went there.
        assert!(matches!(hit, Some(Error::Corruption { .. })), "byte {offset}: {hit:?}");
        drop(store);
        let r = TableStore::open_device(device(&d), p.boxed(), small_options());
        assert!(matches!(r, Err(Error::Corruption { .. })), "byte {offset}: {r:?}");
    }
}

/// Offsets in the persistent memory of the active undo records, oldest first.
fn active_records(image: &[u8]) -> Vec<usize> {
    let mut at = Vec::new();
    let mut i = shale_table::RING_OFFSET;
    while i + 8 <= image.len() {
        if &image[i..i + 4] == b"SHUR" && image[i + 4] == shale_table::undo::ACTIVE {
            at.push(i);
        }
        i += shale_table::undo::ALIGN;
    }
    at
}

#[test]
fn a_flipped_undo_record_byte_is_corruption() {
    let d = sim(32, 32);
    let p = SimPmem::new(PMEM_BYTES);
    let (store, t) = filled(&d, &p, &small_options());
    let mut txn = store.begin(Isolation::ReadCommitted);
    txn.update(t, &key(3), "text", &text(&key(3), 2, 900)).unwrap();
    txn.update(t, &key(4), "text", &text(&key(4), 2, 900)).unwrap();
    // A power cut before the commit: both records are active.
    let image = d.crash_image(d.writes(), Damage::Keep);
    let pimage = p.current_image();
    drop(txn);
    drop(store);
    let records = active_records(&pimage);
    assert_eq!(records.len(), 2, "two active records");
    // Undamaged, the rollback restores both rows.
    let cd = SimDevice::from_image(image.clone(), 4096, 1).unwrap();
    let store = open(&cd, &SimPmem::from_image(pimage.clone(), None), &small_options());
    for i in [3, 4] {
        assert_eq!(store.select_cell(t, &key(i), "text").unwrap(), Some(text(&key(i), 1, 900)));
    }
    drop(store);
    for delta in [0, 1, 9, 20, 40, 60, 300] {
        let mut damaged = pimage.clone();
        damaged[records[0] + delta] ^= 0x08;
        let cd = SimDevice::from_image(image.clone(), 4096, 1).unwrap();
        let cp = SimPmem::from_image(damaged, None);
        let r = TableStore::open_device(device(&cd), cp.boxed(), small_options());
        assert!(matches!(r, Err(Error::Corruption { .. })), "byte {delta}: {r:?}");
    }
    // Both header copies damaged.
    let mut damaged = pimage.clone();
    damaged[10] ^= 1;
    damaged[64 + 10] ^= 1;
    let cd = SimDevice::from_image(image, 4096, 1).unwrap();
    let r = TableStore::open_device(
        device(&cd),
        SimPmem::from_image(damaged, None).boxed(),
        small_options(),
    );
    assert!(matches!(r, Err(Error::Corruption { .. })), "{r:?}");
}

#[test]
fn a_block_zeroed_whole_is_corruption_not_lost_rows() {
    let d = sim(32, 33);
    let p = SimPmem::new(PMEM_BYTES);
    let (store, t) = filled(&d, &p, &small_options());
    let address = store.block_address(t, 3).unwrap();
    drop(store);
    let mut image = d.current_image();
    image[address as usize..address as usize + BLOCK_BYTES].fill(0);
    let cd = SimDevice::from_image(image, 4096, 1).unwrap();
    let r = TableStore::open_device(device(&cd), p.boxed(), small_options());
    assert!(matches!(r, Err(Error::Corruption { .. })), "{r:?}");
}
