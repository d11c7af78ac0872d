//! Read-only opens of a volume: nothing is created or written, allocations and commits are
//! refused with `Error::ReadOnly`, the device is opened O_RDONLY, and a file too short to be a
//! volume is named with its real size (issue #9: a 32-byte file was "a device of 0 bytes").

use std::sync::Arc;

use shale_io::MemoryDevice;
use shale_space::{Edit, Error, Volume, VolumeOptions};

#[test]
fn a_read_only_volume_refuses_allocations_and_commits() {
    let dir = tempfile::tempdir().unwrap();
    let opts = VolumeOptions::small_for_tests();
    let v = Volume::open_path(dir.path(), &opts, &Default::default()).unwrap().volume;
    let e = v.allocate(2).unwrap();
    v.commit(&Edit { added: vec![e], engine: b"one".to_vec(), ..Edit::default() }, &mut Vec::new)
        .unwrap();
    drop(v);
    let file = dir.path().join(shale_space::VOLUME_FILE_NAME);
    let before = std::fs::read(&file).unwrap();
    let opened = Volume::open_path_read_only(dir.path(), &opts, &Default::default()).unwrap();
    let v = &opened.volume;
    assert!(v.is_read_only());
    assert_eq!(opened.versions.deltas[0].engine, b"one");
    assert_eq!(v.live_extents(), vec![e]);
    assert!(matches!(v.allocate(1), Err(Error::ReadOnly(_))));
    let edit = Edit { removed: vec![e], ..Edit::default() };
    assert!(matches!(v.commit(&edit, &mut Vec::new), Err(Error::ReadOnly(_))));
    // The device itself cannot grow either.
    assert!(v.device().grow(v.device().info().capacity + (1 << 20)).is_err());
    drop(opened);
    assert!(std::fs::read(&file).unwrap() == before, "a read-only open wrote to the volume");
}

#[test]
fn a_read_only_open_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let opts = VolumeOptions::small_for_tests();
    let err = Volume::open_path_read_only(dir.path(), &opts, &Default::default()).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(ref s) if s.contains("holds no volume")), "{err}");
    let missing = dir.path().join("missing");
    let err = Volume::open_path_read_only(&missing, &opts, &Default::default()).unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // A blank device stays blank.
    let dev = Arc::new(MemoryDevice::new(16 << 20, 4096).unwrap());
    let err = Volume::open_read_only(dev.clone(), &opts).unwrap_err();
    assert!(matches!(err, Error::Foreign { .. }), "{err}");
    assert!(dev.snapshot().iter().all(|&b| b == 0));
}

#[test]
fn a_32_byte_file_was_called_a_device_of_0_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("small");
    std::fs::write(&f, [b'x'; 32]).unwrap();
    let opts = VolumeOptions { create_if_blank: false, ..VolumeOptions::small_for_tests() };
    for err in [
        Volume::open_path(&f, &opts, &Default::default()).unwrap_err(),
        Volume::open_path_read_only(&f, &opts, &Default::default()).unwrap_err(),
    ] {
        let msg = err.to_string();
        assert!(msg.contains("is 32 bytes") && msg.contains("8192 bytes"), "{msg}");
    }
    assert_eq!(std::fs::read(&f).unwrap(), [b'x'; 32]);
    // On a device, the message says the size is in whole blocks and gives the minimum.
    let dev = Arc::new(MemoryDevice::new(4096, 4096).unwrap());
    let msg = Volume::open(dev, &opts).unwrap_err().to_string();
    assert!(msg.contains("4096 bytes (whole 4096-byte blocks)") && msg.contains("8192"), "{msg}");
}
