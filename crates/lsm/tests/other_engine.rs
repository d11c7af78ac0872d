//! A volume of another engine (the hash engine's, which names its segments in the version
//! log with its own payloads and has no WAL area) is refused by the lsm engine with an error
//! that says so, and nothing is written to it.

use std::sync::Arc;

use shale_io::{DeviceRef, MemoryDevice};
use shale_lsm::{Db, Error, Options};
use shale_space::{Edit, LayoutOptions, Volume, VolumeOptions};

fn hash_like_volume(with_payload: bool) -> Arc<MemoryDevice> {
    let device = Arc::new(MemoryDevice::new(64 << 20, 4096).unwrap());
    let opts = VolumeOptions {
        layout: LayoutOptions { slot_bytes: 4 << 20, version_log_bytes: 64 << 10, wal_bytes: 0 },
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
    device
}

#[test]
fn a_hash_engine_volume_is_refused_untouched() {
    for with_payload in [true, false] {
        let device = hash_like_volume(with_payload);
        let before = device.snapshot();
        match Db::open_device(device.clone() as DeviceRef, Options::small_for_tests()) {
            Err(Error::InvalidArgument(why)) => {
                let says = if with_payload { "hash-engine store" } else { "no WAL area" };
                assert!(why.contains(says), "{why}");
            }
            other => panic!("opened another engine's volume: {:?}", other.err()),
        }
        assert!(device.snapshot() == before, "nothing written");
    }
}
