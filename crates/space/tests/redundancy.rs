//! Redundant copies (P7): a damaged format header copy or version log copy is reported by
//! every open and rewritten from its valid twin by a read-write open, so a store never
//! carries lost redundancy until the second copy is hit too. A read-only open writes
//! nothing and reports the same copies. And a volume of another engine is refused before
//! anything is written, repairs included.

mod common;

use std::sync::Arc;

use common::*;
use shale_io::{Device, MemoryDevice, QueueExt, QueueOptions};
use shale_space::{Edit, EngineKind, Error, Volume, VolumeOptions};

const SECTOR: u32 = 512;

/// A volume with a few commits, as an image.
fn volume_image() -> Vec<u8> {
    let dev = Arc::new(MemoryDevice::new(1 << 20, SECTOR).unwrap());
    let opened = open(dev.clone(), &tiny_layout());
    for _ in 0..3 {
        let e = opened.volume.allocate(1).unwrap();
        let edit = Edit { added: vec![e], engine: b"commit".to_vec(), ..Edit::default() };
        opened.volume.commit(&edit, &mut Vec::new).unwrap();
    }
    drop(opened);
    dev.snapshot()
}

fn device(image: Vec<u8>) -> Arc<MemoryDevice> {
    Arc::new(MemoryDevice::from_bytes(image, SECTOR).unwrap())
}

fn read_only(dev: &Arc<MemoryDevice>) -> Volume {
    let opts = VolumeOptions { create_if_blank: false, ..options(tiny_layout()) };
    Volume::open_read_only(dev.clone(), &opts).unwrap().volume
}

/// Flips one byte of the image at `offset`.
fn flip(image: &mut [u8], offset: usize) {
    image[offset] ^= 0x40;
}

/// The damaged copies an open reports, by name.
fn names(volume: &Volume) -> Vec<String> {
    volume.damaged_copies().iter().map(|d| d.what.clone()).collect()
}

#[test]
fn a_damaged_header_copy_is_reported_then_repaired() {
    for (offset, copy) in [(50usize, "format header copy A"), (4096 + 50, "format header copy B")] {
        let mut image = volume_image();
        flip(&mut image, offset);
        let dev = device(image);
        // A read-only open reports it and writes nothing.
        let before = dev.snapshot();
        let ro = read_only(&dev);
        assert_eq!(names(&ro), vec![copy.to_string()]);
        assert!(!ro.damaged_copies()[0].repaired);
        drop(ro);
        assert_eq!(dev.snapshot(), before, "a read-only open wrote");
        // A read-write open repairs it: the two copies are equal again.
        let rw = Volume::open(dev.clone(), &options(tiny_layout())).unwrap().volume;
        assert_eq!(names(&rw), vec![copy.to_string()]);
        assert!(rw.damaged_copies()[0].repaired);
        drop(rw);
        let after = dev.snapshot();
        assert_eq!(after[..512], after[4096..4096 + 512], "the copies still differ");
        assert_eq!(read_only(&dev).damaged_copies(), &[], "found damaged again after repair");
        // Now the other copy can be lost too and the volume still opens.
        let mut image = after.clone();
        flip(&mut image, if offset < 4096 { 4096 + 50 } else { 50 });
        Volume::open(device(image), &options(tiny_layout())).expect("the repaired copy serves");
    }
}

#[test]
fn a_damaged_version_log_anchor_or_object_is_reported_then_repaired() {
    let layout = shale_space::Layout::new(&tiny_layout(), SECTOR);
    let mirror_a = layout.mirror_offset(0) as usize;
    let mirror_b = layout.mirror_offset(1) as usize;
    let sector = SECTOR as usize;
    // The anchor is the mirror's first sector; the first base follows it.
    let cases = [
        (mirror_a + 20, "version log mirror A anchor"),
        (mirror_b + 20, "version log mirror B anchor"),
        (mirror_a + sector + 30, "version log mirror A object lsn 1"),
        (mirror_b + sector + 30, "version log mirror B object lsn 1"),
    ];
    for (offset, what) in cases {
        let mut image = volume_image();
        flip(&mut image, offset);
        let dev = device(image);
        let ro = read_only(&dev);
        assert_eq!(names(&ro), vec![what.to_string()], "flip at {offset}");
        let state = ro.log_state();
        drop(ro);
        let rw = Volume::open(dev.clone(), &options(tiny_layout())).unwrap().volume;
        assert_eq!(names(&rw), vec![what.to_string()]);
        assert!(rw.damaged_copies().iter().all(|d| d.repaired));
        assert_eq!(rw.log_state().base_sn, state.base_sn);
        drop(rw);
        let after = dev.snapshot();
        let ring = layout.version_log_bytes as usize;
        assert_eq!(
            after[mirror_a..mirror_a + ring],
            after[mirror_b..mirror_b + ring],
            "the mirrors still differ after repairing {what}"
        );
        assert_eq!(read_only(&dev).damaged_copies(), &[], "{what} found damaged again");
    }
}

#[test]
fn another_engines_volume_is_refused_untouched() {
    let mut image = volume_image();
    // A damaged copy too: the refusal must come before any repair.
    flip(&mut image, 4096 + 50);
    for engine in [EngineKind::Hash, EngineKind::Table] {
        let dev = device(image.clone());
        let opts = VolumeOptions { engine: Some(engine), ..options(tiny_layout()) };
        let err = Volume::open(dev.clone(), &opts).unwrap_err();
        assert!(
            matches!(err, Error::OtherEngine { found: EngineKind::Lsm, expected } if expected == engine),
            "{err}"
        );
        assert!(err.to_string().contains("this is an lsm store, not a"), "{err}");
        assert_eq!(dev.snapshot(), image, "a refused open wrote");
    }
    // A tool's open, naming no engine, opens any, and learns the kind from the header.
    let dev = device(image);
    let opts = VolumeOptions { engine: None, ..options(tiny_layout()) };
    let volume = Volume::open_read_only(dev.clone(), &opts).unwrap().volume;
    assert_eq!(volume.engine(), Some(EngineKind::Lsm));
    drop(volume);
    let peeked = Volume::peek_header(&(dev as shale_io::DeviceRef)).unwrap().unwrap();
    assert_eq!(peeked.engine, Some(EngineKind::Lsm));
}

#[test]
fn a_blank_device_is_not_created_on_without_an_engine() {
    let dev = Arc::new(MemoryDevice::new(1 << 20, SECTOR).unwrap());
    let opts = VolumeOptions { engine: None, ..options(tiny_layout()) };
    let err = Volume::open(dev.clone(), &opts).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
    assert!(q.read_at(0, 1 << 20).unwrap().iter().all(|&b| b == 0), "it wrote");
}
