//! A volume of another engine is refused by the lsm engine with [`Error::NotLsmStore`], and
//! nothing is written to it: a volume of format 3 or later by the engine kind in its header
//! (before recovery reads anything else), an older volume by its version log (the hash
//! engine's payloads, or no WAL area). And an older lsm volume, whose header names no
//! engine, still opens with its data.

use std::sync::Arc;

use shale_io::{AlignedBuf, Device, DeviceRef, MemoryDevice, QueueExt, QueueOptions};
use shale_lsm::{Db, Error, Options};
use shale_space::header::{Header, HeaderCopy};
use shale_space::{AREA_ALIGN, Edit, EngineKind, LayoutOptions, Volume, VolumeOptions};

/// Rewrites both header copies of `device` as the format 1 or 2 header a shale before engine
/// kinds wrote: the same volume, no engine named.
fn make_legacy(device: &MemoryDevice) {
    let mut q = device.open_queue(&QueueOptions::default()).unwrap();
    let area = q.read_at(0, 4096).unwrap();
    let HeaderCopy::Valid(mut h) = Header::decode(&area) else { panic!("no header") };
    h.format_version = if h.partner_id == [0; 16] { 1 } else { 2 };
    h.engine = None;
    for copy in 0..2 {
        let buf = AlignedBuf::padded_copy(&h.encode(), 4096);
        q.write_at(copy * AREA_ALIGN, buf, true).unwrap();
    }
}

/// A volume laid out as the hash engine lays out its volumes (no WAL area), of `engine`,
/// with or without a hash-engine payload in its version log, in today's format or the old.
fn hash_like_volume(engine: EngineKind, with_payload: bool, legacy: bool) -> Arc<MemoryDevice> {
    let device = Arc::new(MemoryDevice::new(64 << 20, 4096).unwrap());
    let opts = VolumeOptions {
        layout: LayoutOptions { slot_bytes: 4 << 20, version_log_bytes: 64 << 10, wal_bytes: 0 },
        engine: Some(engine),
        ..VolumeOptions::default()
    };
    let volume = Volume::open(device.clone() as DeviceRef, &opts).unwrap().volume;
    if with_payload {
        let e = volume.allocate(1).unwrap();
        let mut payload = b"SHHASH01".to_vec();
        payload.extend_from_slice(&[1; 21]);
        volume
            .commit(&Edit { added: vec![e], engine: payload, ..Edit::default() }, &mut Vec::new)
            .unwrap();
    }
    drop(volume);
    if legacy {
        make_legacy(&device);
    }
    device
}

fn refused(device: &Arc<MemoryDevice>) -> String {
    let before = device.snapshot();
    let why = match Db::open_device(device.clone() as DeviceRef, Options::small_for_tests()) {
        Err(Error::NotLsmStore(why)) => why,
        other => panic!("opened another engine's volume: {:?}", other.err()),
    };
    assert!(device.snapshot() == before, "something was written");
    why
}

#[test]
fn a_volume_whose_header_names_another_engine_is_refused_untouched() {
    for engine in [EngineKind::Hash, EngineKind::Table] {
        let why = refused(&hash_like_volume(engine, false, false));
        assert!(why.contains(engine.a_store()), "{why}");
    }
}

#[test]
fn an_older_hash_engine_volume_is_refused_untouched() {
    for with_payload in [true, false] {
        let why = refused(&hash_like_volume(EngineKind::Hash, with_payload, true));
        let says = if with_payload { "hash-engine store" } else { "no WAL area" };
        assert!(why.contains(says), "{why}");
    }
}

#[test]
fn an_older_lsm_volume_opens_with_its_data() {
    let device = Arc::new(MemoryDevice::new(64 << 20, 4096).unwrap());
    let db = Db::open_device(device.clone() as DeviceRef, Options::small_for_tests()).unwrap();
    db.put(b"k", b"v").unwrap();
    db.flush().unwrap();
    db.close().unwrap();
    make_legacy(&device);
    let db = Db::open_device(device as DeviceRef, Options::small_for_tests()).unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
}
