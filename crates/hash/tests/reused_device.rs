//! A new store on a device that held another store, whose header alone was wiped (as a tool
//! or a careless `dd` leaves it; an SSD's TRIM may also read back old data): the old store's
//! pages still lie in the slots the new store takes. The new store must never read them as
//! its own: its acknowledged writes survive its reopen, and nothing is reported damaged.

mod common;

use common::*;
use shale_hash::{HashStore, StoreMode};
use shale_io::SimDevice;

/// Bytes of the volume's header area and version log mirrors (`small_options`), which the
/// wipe zeroes; the slots after them keep what the first store wrote.
fn wiped_header(image: &mut [u8]) {
    let end = 8192 + 2 * small_options().version_log_bytes as usize;
    image[..end].fill(0);
}

#[test]
fn a_store_created_over_an_older_stores_pages_never_reads_them_as_its_own() {
    let opts = small_options();
    let d = sim(8, 1);
    // The first store: a long active segment of 3 KiB values.
    let first = open(&d, &opts);
    for i in 0..200u64 {
        let key = format!("old-{i:04}").into_bytes();
        first.store(&key, &value(&key, i, 3_000), StoreMode::Overwrite).unwrap();
    }
    drop(first);
    let mut image = d.current_image();
    wiped_header(&mut image);
    // The second store, on the same device: fewer pages in the same slot.
    let reused = SimDevice::from_image(image, 4096, 2).unwrap();
    let second = open(&reused, &opts);
    let mut expect = Vec::new();
    for i in 0..20u64 {
        let key = format!("new-{i:04}").into_bytes();
        let v = value(&key, i, 3_000);
        second.store(&key, &v, StoreMode::Overwrite).unwrap();
        expect.push((key, v));
    }
    drop(second);
    let again = HashStore::open_device(device(&reused), opts.clone())
        .unwrap_or_else(|e| panic!("reopening the second store: {e}"));
    for (key, v) in &expect {
        assert_eq!(
            again.retrieve(key).unwrap().as_ref(),
            Some(v),
            "{}",
            String::from_utf8_lossy(key)
        );
    }
    assert_eq!(again.retrieve(b"old-0001").unwrap(), None, "the first store's keys are not read");
    assert_eq!(again.stats().keys, expect.len() as u64);
}
