//! Opening a device that holds no volume, someone else's data, a newer volume or a damaged
//! one: a clear typed error, and not one byte of the device changes (P6).

mod common;

use common::*;
use shale_io::{AlignedBuf, Device, MemoryDevice, QueueExt, QueueOptions};
use shale_space::{Error, Volume, VolumeOptions};

fn write(dev: &MemoryDevice, offset: u64, bytes: &[u8]) {
    let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
    q.write_at(offset, AlignedBuf::padded_copy(bytes, 512), true).unwrap();
}

fn refused_untouched(dev: MemoryDevice) -> Error {
    let before = dev.snapshot();
    let dev = std::sync::Arc::new(dev);
    let err = Volume::open(dev.clone(), &options(tiny_layout())).unwrap_err();
    assert_eq!(dev.snapshot(), before, "a refused open wrote to the device");
    err
}

#[test]
fn foreign_data_is_refused() {
    let dev = MemoryDevice::new(1 << 20, 512).unwrap();
    // An ext4 superblock lives at byte 1024 and leaves the first sector zero.
    write(&dev, 1024, &[0x53, 0xEF, 1, 2, 3]);
    let err = refused_untouched(dev);
    assert!(matches!(err, Error::Foreign { .. }), "{err}");
}

#[test]
fn newer_format_is_refused() {
    let dev = MemoryDevice::new(1 << 20, 512).unwrap();
    let opened = open(arc(MemoryDevice::from_bytes(dev.snapshot(), 512).unwrap()), &tiny_layout());
    let mut image = {
        let d = opened.volume.device().clone();
        let mut q = d.open_queue(&QueueOptions::default()).unwrap();
        q.read_at(0, 1 << 20).unwrap().to_vec()
    };
    for copy in [0usize, 4096] {
        image[copy + 12..copy + 16].copy_from_slice(&9u32.to_le_bytes());
    }
    let err = refused_untouched(MemoryDevice::from_bytes(image, 512).unwrap());
    assert!(matches!(err, Error::NewerFormat { found: 9, supported: 3 }), "{err}");
}

#[test]
fn one_damaged_header_copy_is_survived_two_are_corruption() {
    let dev = arc(MemoryDevice::new(1 << 20, 512).unwrap());
    drop(open(dev.clone(), &tiny_layout()));
    let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
    let mut image = q.read_at(0, 1 << 20).unwrap().to_vec();
    image[50] ^= 0x04;
    let one = arc(MemoryDevice::from_bytes(image.clone(), 512).unwrap());
    Volume::open(one, &options(tiny_layout())).expect("copy B serves");
    image[4096 + 50] ^= 0x04;
    let err = refused_untouched(MemoryDevice::from_bytes(image, 512).unwrap());
    assert!(matches!(err, Error::Corruption { .. }), "{err}");
}

#[test]
fn blank_device_is_not_created_on_when_not_allowed() {
    let opts = VolumeOptions { create_if_blank: false, ..options(tiny_layout()) };
    let dev = arc(MemoryDevice::new(1 << 20, 512).unwrap());
    let err = Volume::open(dev, &opts).unwrap_err();
    assert!(matches!(err, Error::Foreign { .. }), "{err}");
}

#[test]
fn too_small_device_and_bad_layout_are_invalid_arguments() {
    let dev = arc(MemoryDevice::new(64 << 10, 512).unwrap());
    let err = Volume::open(dev, &options(tiny_layout())).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    let mut bad = tiny_layout();
    bad.slot_bytes = 1000;
    let dev = arc(MemoryDevice::new(1 << 20, 512).unwrap());
    let err = Volume::open(dev, &options(bad)).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}

#[test]
fn damaged_version_log_anchor_is_corruption() {
    let dev = arc(MemoryDevice::new(1 << 20, 512).unwrap());
    let opened = open(dev.clone(), &tiny_layout());
    let log = opened.volume.layout();
    drop(opened);
    let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
    let mut image = q.read_at(0, 1 << 20).unwrap().to_vec();
    for m in 0..2 {
        image[(log.mirror_offset(m) + 40) as usize] ^= 0x80;
    }
    let err = refused_untouched(MemoryDevice::from_bytes(image, 512).unwrap());
    assert!(matches!(err, Error::Corruption { .. }), "{err}");
}

#[test]
fn zero_slot_allocation_and_foreign_extents_are_refused() {
    let dev = arc(MemoryDevice::new(1 << 20, 512).unwrap());
    let volume = open(dev, &tiny_layout()).volume;
    assert!(matches!(volume.allocate(0), Err(Error::InvalidArgument(_))));
    let bogus =
        shale_space::Edit { added: vec![shale_space::Extent::fast(3, 1)], ..Default::default() };
    let err = volume.commit(&bogus, &mut Vec::new).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(volume.stopped().is_none(), "a refused edit does not stop the volume");
}
