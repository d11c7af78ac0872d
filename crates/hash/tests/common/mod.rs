//! Shared set-up of the hash engine's scenario tests: stores on the simulated device.

#![allow(dead_code)]

use std::sync::Arc;

use shale_hash::{HashOptions, HashStore};
use shale_io::{DeviceRef, SimDevice};

/// Options for small stores: the smallest segments and version log.
pub fn small_options() -> HashOptions {
    HashOptions {
        segment_bytes: shale_hash::SEGMENT_BYTES_FULL_VALUES,
        version_log_bytes: 64 << 10,
        ..HashOptions::default()
    }
}

/// Bytes of a simulated device with room for `segments` segments of `small_options`.
pub fn device_bytes(segments: u64) -> u64 {
    // Header area and both version log mirrors, rounded up, then the slots.
    (2 << 20) + segments * shale_hash::SEGMENT_BYTES_FULL_VALUES
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
