//! Helpers shared by the scenario tests.
#![allow(dead_code)]

use std::path::Path;

use shale_io::{AlignedBuf, Backend, DeviceRef, FileOptions, open_device};

/// Both file backends, for scenarios that must behave the same on each.
pub const BACKENDS: [Backend; 2] = [Backend::Uring, Backend::Pread];

/// A scratch directory on the disk under test (ext4 here), not on tmpfs.
pub fn scratch_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/tmp").expect("scratch dir")
}

/// A new device of `size` bytes at `dir/name`, opened with O_DIRECT.
pub fn new_device(dir: &Path, name: &str, size: u64, backend: Backend) -> DeviceRef {
    let opts = FileOptions { backend, direct: true, create_size: Some(size), create_sparse: None };
    open_device(&dir.join(name), &opts).expect("open device")
}

/// A buffer of `len` bytes whose every byte depends on `seed` and its position.
pub fn pattern(len: usize, seed: u64) -> AlignedBuf {
    let mut buf = AlignedBuf::zeroed(len);
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (seed.wrapping_mul(31).wrapping_add(i as u64 / 7) % 251) as u8;
    }
    buf
}
