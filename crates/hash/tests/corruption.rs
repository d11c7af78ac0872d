//! A flipped byte in an acknowledged record gives Corruption, never a wrong value and never a
//! silent loss (P4): read through the index at once, and at the next open, in the middle of
//! the active segment (a later page says it was durable) and at the end of a sealed one (the
//! version log says how many pages it holds).

mod common;

use common::*;
use shale_hash::{Error, HashOptions, HashStore, IndexMode, StoreMode};
use shale_io::SimDevice;

/// Address of the `n`-th page of the `s`-th segment slot on a store of `small_options`.
fn page_address(store: &HashStore, slot_index: u32, page: u64) -> u64 {
    let layout = store.volume().layout();
    layout.slot_offset + u64::from(slot_index) * layout.slot_bytes + page * 4096
}

fn reopened(d: &SimDevice) -> Result<HashStore, Error> {
    let image = SimDevice::from_image(d.current_image(), 4096, 0).unwrap();
    HashStore::open_device(device(&image), small_options())
}

#[test]
fn a_flipped_byte_in_the_active_segment_is_corruption() {
    each_mode(|| {
        for (page, byte) in [(0u64, 40u64), (1, 4000), (2, 12)] {
            let d = sim(4, 21);
            // No value cache: stores fill it, and a value answered from memory (right, but
            // read from nowhere) would not test the read of the damaged page.
            let store = open(&d, &HashOptions { value_cache_bytes: 0, ..small_options() });
            // One page per record: records 0, 1, 2 on pages 0, 1, 2 of the first slot.
            for i in 0..3u8 {
                store.store(&[b'k', b'e', b'y', i], &[i; 100], StoreMode::Overwrite).unwrap();
            }
            // The first segment's slot (a bounded index's table, not yet committed, is not live).
            let slot = store.volume().live_extents()[0].first;
            d.corrupt(page_address(&store, slot, page) + byte, 0x20);
            let key = [b'k', b'e', b'y', page as u8];
            let got = store.retrieve(&key);
            assert!(matches!(got, Err(Error::Corruption { .. })), "page {page}: {got:?}");
            for other in (0..3u8).filter(|&i| u64::from(i) != page) {
                assert_eq!(
                    store.retrieve(&[b'k', b'e', b'y', other]).unwrap(),
                    Some(vec![other; 100])
                );
            }
            // At the next open: a damaged page below the last is damage, not a torn tail. The
            // last page of the active segment, with nothing after it, reads as a torn tail (the
            // same limit as the WAL's last page: nothing says it was complete).
            let r = reopened(&d);
            if page < 2 {
                assert!(matches!(r, Err(Error::Corruption { .. })), "page {page}: {r:?}");
            } else {
                assert_eq!(r.unwrap().retrieve(&key).unwrap(), None);
            }
        }
    });
}

#[test]
fn a_flipped_byte_in_the_last_page_of_a_sealed_segment_is_corruption() {
    each_mode(|| {
        let d = sim(4, 22);
        let store = open(&d, &small_options());
        for i in 0..3u8 {
            store.store(&[b'k', b'e', b'y', i], &[i; 100], StoreMode::Overwrite).unwrap();
        }
        let slot = store.volume().live_extents()[0].first;
        drop(store);
        // The reopen's first write starts a new segment and seals the first at 3 pages.
        let store = open(&d, &small_options());
        store.store(b"next", b"segment", StoreMode::Overwrite).unwrap();
        d.corrupt(page_address(&store, slot, 2) + 100, 0x01);
        drop(store);
        let r = reopened(&d);
        if mode() == IndexMode::InMemory {
            assert!(matches!(r, Err(Error::Corruption { .. })), "{r:?}");
        } else {
            // A bounded store closed cleanly opens from its checkpoint without reading the
            // sealed segment: the damage is found when the record is read.
            let got = r.unwrap().retrieve(&[b'k', b'e', b'y', 2]);
            assert!(matches!(got, Err(Error::Corruption { .. })), "{got:?}");
        }
    });
}
