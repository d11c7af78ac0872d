//! Shared set-up of the table engine's scenario tests: stores on the simulated device and
//! simulated persistent memory.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use shale_io::{DeviceRef, SimDevice};
use shale_table::{Column, RING_OFFSET, Schema, SimPmem, TableOptions, TableStore};

/// Options for small stores: 64 KiB segments (16 blocks), the smallest version log, a
/// small cache (so blocks are read back from the device), short lock waits, an undo spill
/// area of two segments, no reclaiming thread (tests run the pass when they mean to).
pub fn small_options() -> TableOptions {
    TableOptions {
        space_reclaim_interval: None,
        segment_bytes: 64 << 10,
        undo_spill_bytes: 128 << 10,
        version_log_bytes: 64 << 10,
        cache_blocks: 32,
        lock_timeout: Duration::from_millis(200),
        reclaim_batch: 4,
        // Within the tests' 64 KiB ring, so that crashes meet a ring gone back to its start
        // early as well as at its end.
        undo_wrap_bytes: 8 << 10,
        ..TableOptions::default()
    }
}

/// Bytes of a simulated device with room for `segments` segments of `small_options`.
pub fn device_bytes(segments: u64) -> u64 {
    (8 << 10) + 2 * (64 << 10) + segments * (64 << 10)
}

pub fn sim(segments: u64, seed: u64) -> SimDevice {
    SimDevice::new(device_bytes(segments), 4096, seed).expect("simulated device")
}

/// Bytes of the simulated persistent memory: the headers and a 64 KiB ring.
pub const PMEM_BYTES: usize = RING_OFFSET + (64 << 10);

pub fn device(d: &SimDevice) -> DeviceRef {
    Arc::new(d.clone())
}

pub fn open(d: &SimDevice, p: &SimPmem, opts: &TableOptions) -> TableStore {
    TableStore::open_device(device(d), p.boxed(), opts.clone()).expect("open")
}

/// A schema with a fixed key, a variable column that may span blocks and a fixed column.
pub fn schema() -> Schema {
    Schema::new(vec![Column::fixed("id", 8), Column::var("text", 9000), Column::fixed("n", 8)])
        .unwrap()
}

pub fn key(i: u64) -> Vec<u8> {
    format!("k{i:07}").into_bytes()
}

/// A value of `len` bytes that names its key and version.
pub fn text(k: &[u8], version: u64, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    let mut x = version.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ k.iter().map(|&b| u64::from(b)).sum::<u64>()
        ^ 1;
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(x as u8);
    }
    v
}

pub fn row(k: &[u8], text: &[u8], n: u64) -> Vec<Vec<u8>> {
    vec![k.to_vec(), text.to_vec(), n.to_le_bytes().to_vec()]
}

/// Every row of the table, by scanning it whole.
pub fn all_rows(store: &TableStore, t: shale_table::TableId) -> Vec<Vec<Vec<u8>>> {
    let mut scan = store.scan(t, ..).expect("scan");
    let mut rows = Vec::new();
    while let Some(batch) = scan.next().expect("next") {
        assert!(batch.len() <= shale_table::SCAN_BATCH_ROWS);
        rows.extend(batch);
    }
    rows
}

/// A seed count from the environment, or the default.
pub fn seeds(var: &str, default: u64) -> u64 {
    std::env::var(var).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// The rows of `range`, by a scan in batches of `batch` rows (`next_up_to`).
pub fn range_rows(
    store: &TableStore,
    t: shale_table::TableId,
    range: (std::ops::Bound<Vec<u8>>, std::ops::Bound<Vec<u8>>),
    batch: usize,
) -> Vec<Vec<Vec<u8>>> {
    let mut scan = store.scan(t, range).expect("scan");
    let mut rows = Vec::new();
    while let Some(b) = scan.next_up_to(batch).expect("next") {
        assert!(!b.is_empty() && b.len() <= batch.clamp(1, shale_table::SCAN_BATCH_ROWS));
        rows.extend(b);
    }
    rows
}

/// Checks range scans against `all` (every row of the table, in key order, as a whole scan
/// gave them): from a middle key on, up to it, and between two keys, in small batches.
pub fn check_ranges(store: &TableStore, t: shale_table::TableId, all: &[Vec<Vec<u8>>]) {
    use std::ops::Bound::{Excluded, Included, Unbounded};
    if all.is_empty() {
        assert!(range_rows(store, t, (Unbounded, Unbounded), 7).is_empty());
        return;
    }
    let (a, b) = (all.len() / 3, all.len() * 2 / 3);
    let (ka, kb) = (all[a][0].clone(), all[b][0].clone());
    assert_eq!(range_rows(store, t, (Included(ka.clone()), Unbounded), 7), all[a..], "from");
    assert_eq!(range_rows(store, t, (Unbounded, Excluded(ka.clone())), 3), all[..a], "to");
    assert_eq!(range_rows(store, t, (Excluded(ka), Included(kb)), 1), all[a + 1..=b], "between");
}
