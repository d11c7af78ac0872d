//! Scenario: a raw block device, through a loop device with direct I/O. Needs root (losetup);
//! skipped with a printed reason otherwise, a failure where `SHALE_REQUIRE_PREREQS=1`
//! (`shale_testkit::prerequisite`).

mod common;

use shale_io::{Backend, Error, FileOptions, QueueExt, QueueOptions, open_device};

#[test]
fn block_device_round_trip_and_geometry() {
    let dir = common::scratch_dir();
    let backing = dir.path().join("backing");
    std::fs::File::create(&backing).unwrap().set_len(16 << 20).unwrap();
    let attached = shale_testkit::LoopDevice::attach(&backing);
    let Some(lo) = shale_testkit::prerequisite::require("a loop device", attached) else { return };
    for backend in [Backend::Uring, Backend::Pread] {
        let dev =
            open_device(lo.path(), &FileOptions { backend, ..FileOptions::default() }).unwrap();
        let info = dev.info();
        assert_eq!(info.capacity, 16 << 20);
        assert!(matches!(info.block_size, 512 | 4096), "{info:?}");
        assert!(!info.growable);
        assert!(matches!(dev.grow(32 << 20), Err(Error::Unsupported(_))));
        let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
        let seed = backend as u64;
        q.write_at((16 << 20) - 65536, common::pattern(65536, seed), true).unwrap();
        q.flush().unwrap();
        assert_eq!(
            &q.read_at((16 << 20) - 65536, 65536).unwrap()[..],
            &common::pattern(65536, seed)[..]
        );
        assert!(matches!(q.read_at(16 << 20, 4096), Err(Error::InvalidArgument(_))));
    }
    drop(lo);
    // With direct I/O on the loop device the bytes are in the backing file already.
    let bytes = std::fs::read(&backing).unwrap();
    let seed = Backend::Pread as u64;
    assert_eq!(&bytes[(16 << 20) - 65536..], &common::pattern(65536, seed)[..]);
}
