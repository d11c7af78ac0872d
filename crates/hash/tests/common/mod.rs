//! Shared set-up of the hash engine's scenario tests: stores on the simulated device.

#![allow(dead_code)]

use std::cell::Cell;
use std::sync::Arc;

use shale_hash::{HashOptions, HashStore, IndexMode};
use shale_io::{DeviceRef, SimDevice};

/// The bounded mode the scenario tests run in: a cache of four pages, the smallest, so
/// nearly every index change evicts a page and writes it back.
pub const BOUNDED: IndexMode = IndexMode::Bounded { cache_bytes: 4 * 4096 };

thread_local! {
    static MODE: Cell<IndexMode> = const { Cell::new(IndexMode::InMemory) };
}

/// The index mode of the scenario running on this thread ([`each_mode`]).
pub fn mode() -> IndexMode {
    MODE.with(Cell::get)
}

/// Runs `scenario` once with the index in memory and once bounded ([`BOUNDED`]): the
/// options helpers ([`small_options`], and each test's own through [`mode`]) take the mode
/// of the run.
pub fn each_mode(mut scenario: impl FnMut()) {
    for m in [IndexMode::InMemory, BOUNDED] {
        MODE.with(|c| c.set(m));
        eprintln!("index mode {m:?}");
        scenario();
    }
    MODE.with(|c| c.set(IndexMode::InMemory));
}

/// Options for small stores: the smallest segments and version log, in the [`mode`] of the
/// running scenario.
pub fn small_options() -> HashOptions {
    HashOptions {
        segment_bytes: shale_hash::SEGMENT_BYTES_FULL_VALUES,
        version_log_bytes: 64 << 10,
        index: mode(),
        ..HashOptions::default()
    }
}

/// Bytes of a simulated device with room for `segments` segments of `small_options`, and
/// three slots more for a bounded index's table and checkpoints.
pub fn device_bytes(segments: u64) -> u64 {
    // Header area and both version log mirrors, rounded up, then the slots.
    (2 << 20) + (segments + 3) * shale_hash::SEGMENT_BYTES_FULL_VALUES
}

pub fn sim(segments: u64, seed: u64) -> SimDevice {
    SimDevice::new(device_bytes(segments), 4096, seed).expect("simulated device")
}

pub fn device(d: &SimDevice) -> DeviceRef {
    Arc::new(d.clone())
}

pub fn open(d: &SimDevice, opts: &HashOptions) -> HashStore {
    HashStore::open_device(device(d), opts.clone()).expect("open")
}

/// A value of `len` bytes that names its key and version.
pub fn value(key: &[u8], version: u64, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    let mut x = version.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ key.iter().map(|&b| u64::from(b)).sum::<u64>();
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(x as u8);
    }
    v
}

/// A scripted run of 220 stores and deletes over 12 keys (values up to 2,500 bytes), one
/// synchronous call at a time, on `d` with `opts`; then a power cut after every device write
/// in two damage variants, each image opened and required to hold the state after some
/// acknowledged prefix of the calls. Returns the store's counters at the end of the run and
/// the images checked.
pub fn every_crash_point_of_a_scripted_run(
    d: &SimDevice,
    opts: &HashOptions,
    seed: u64,
) -> (shale_hash::HashStats, usize) {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use shale_hash::StoreMode;
    use shale_io::Damage;
    use std::collections::BTreeMap;

    let key = |i: u32| format!("key-{i:03}").into_bytes();
    let store = open(d, opts);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut state = BTreeMap::new();
    let mut states = vec![state.clone()];
    let (mut began, mut acked) = (Vec::new(), Vec::new());
    for step in 0..220u64 {
        began.push(d.writes());
        let k = key(rng.gen_range(0..12));
        if rng.gen_bool(0.15) {
            store.delete(&k).unwrap();
            state.remove(&k);
        } else {
            let v = value(&k, step, rng.gen_range(0..2500));
            store.store(&k, &v, StoreMode::Overwrite).unwrap();
            state.insert(k, v);
        }
        acked.push(d.writes());
        states.push(state.clone());
    }
    let stats = store.stats();
    drop(store);
    let mut images = 0;
    for k in 0..=d.writes() {
        let lo = acked.iter().filter(|&&w| w <= k).count();
        let hi = began.iter().filter(|&&w| w < k).count().max(lo);
        for damage in [Damage::Lose, Damage::Keep] {
            let crashed = SimDevice::from_image(d.crash_image(k, damage), 4096, 0).unwrap();
            let store = HashStore::open_device(device(&crashed), opts.clone())
                .unwrap_or_else(|e| panic!("write {k} {damage:?}: open: {e}"));
            let got: BTreeMap<Vec<u8>, Vec<u8>> = (0..12)
                .filter_map(|i| store.retrieve(&key(i)).unwrap().map(|v| (key(i), v)))
                .collect();
            assert!(
                (lo..=hi).any(|p| states[p] == got),
                "write {k} {damage:?}: not the state after any of ops {lo}..={hi}"
            );
            images += 1;
        }
    }
    (stats, images)
}
