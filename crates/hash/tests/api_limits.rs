//! Every boundary of the kvs API gives its typed error, and nothing already stored is lost:
//! key 3 and 256 bytes, a value of 2 MiB + 1, a buffer too small (carrying the size needed),
//! an offset past the value, the store modes, exist over many keys, bad options, and a
//! volume of another engine refused untouched.

mod common;

use common::*;
use shale_hash::{Error, HashOptions, HashStore, KEY_BYTES_MAX, StoreMode, VALUE_BYTES_MAX};

#[test]
fn keys_and_values_at_and_past_their_limits() {
    each_mode(|| {
        let d = sim(4, 1);
        let store = open(&d, &small_options());
        store.store(b"keep", b"kept", StoreMode::Overwrite).unwrap();
        let short = store.store(b"abc", b"v", StoreMode::Overwrite);
        assert!(matches!(short, Err(Error::KeyLength { len: 3, min: 4, max: 255 })), "{short:?}");
        let long = [7u8; KEY_BYTES_MAX + 1];
        assert!(matches!(
            store.store(&long, b"v", StoreMode::Overwrite),
            Err(Error::KeyLength { len: 256, .. })
        ));
        assert!(matches!(store.retrieve(b"abc"), Err(Error::KeyLength { .. })));
        assert!(matches!(store.delete(&long), Err(Error::KeyLength { .. })));
        let too_big = vec![1u8; VALUE_BYTES_MAX + 1];
        let e = store.store(b"big!", &too_big, StoreMode::Overwrite);
        assert!(
            matches!(e, Err(Error::ValueTooLarge { len, max }) if len == VALUE_BYTES_MAX + 1 && max == VALUE_BYTES_MAX)
        );
        // The largest key and value are accepted and read back, across a reopen.
        let key = [9u8; KEY_BYTES_MAX];
        let big = value(&key, 1, VALUE_BYTES_MAX);
        store.store(&key, &big, StoreMode::Overwrite).unwrap();
        store.store(b"empty", b"", StoreMode::Overwrite).unwrap();
        drop(store);
        let store = open(&d, &small_options());
        assert_eq!(store.retrieve(&key).unwrap().as_deref(), Some(&big[..]));
        assert_eq!(store.retrieve(b"empty").unwrap(), Some(Vec::new()));
        assert_eq!(store.retrieve(b"keep").unwrap(), Some(b"kept".to_vec()));
    });
}

#[test]
fn retrieve_into_a_buffer_says_what_it_needs() {
    each_mode(|| {
        let d = sim(4, 2);
        let store = open(&d, &small_options());
        store.store(b"key1", b"0123456789", StoreMode::Overwrite).unwrap();
        let mut small = [0u8; 4];
        assert!(matches!(
            store.retrieve_into(b"key1", 0, &mut small),
            Err(Error::BufferTooSmall { needed: 10 })
        ));
        assert!(matches!(
            store.retrieve_into(b"key1", 3, &mut small),
            Err(Error::BufferTooSmall { needed: 7 })
        ));
        assert_eq!(small, [0; 4], "nothing copied into a buffer too small");
        assert_eq!(store.retrieve_into(b"key1", 6, &mut small).unwrap(), Some(4));
        assert_eq!(&small, b"6789");
        assert_eq!(store.retrieve_into(b"key1", 10, &mut small).unwrap(), Some(0));
        assert!(matches!(
            store.retrieve_into(b"key1", 11, &mut small),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(store.retrieve_into(b"none", 0, &mut small).unwrap(), None);
    });
}

#[test]
fn store_modes_delete_and_exist() {
    each_mode(|| {
        let d = sim(4, 3);
        let store = open(&d, &small_options());
        assert!(matches!(
            store.store(b"key1", b"a", StoreMode::UpdateOnly),
            Err(Error::KeyNotFound)
        ));
        store.store(b"key1", b"a", StoreMode::NoOverwrite).unwrap();
        assert!(matches!(
            store.store(b"key1", b"b", StoreMode::NoOverwrite),
            Err(Error::KeyExists)
        ));
        store.store(b"key1", b"c", StoreMode::UpdateOnly).unwrap();
        assert_eq!(store.retrieve(b"key1").unwrap(), Some(b"c".to_vec()));
        assert!(store.delete(b"key1").unwrap());
        assert!(!store.delete(b"key1").unwrap(), "deleting an absent key says so");
        assert!(matches!(
            store.store(b"key1", b"d", StoreMode::UpdateOnly),
            Err(Error::KeyNotFound)
        ));
        let keys: Vec<Vec<u8>> = (0..20u32).map(|i| format!("k{i:03}").into_bytes()).collect();
        for k in keys.iter().step_by(3) {
            store.store(k, b"x", StoreMode::Overwrite).unwrap();
        }
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        let bits = store.exist(&refs).unwrap();
        assert_eq!(bits.len(), 3);
        for i in 0..20 {
            assert_eq!(bits[i / 8] >> (i % 8) & 1 == 1, i % 3 == 0, "key {i}");
        }
        assert_eq!(store.stats().keys, 7);
    });
}

#[test]
fn bad_options_are_refused() {
    let d = sim(4, 4);
    for opts in [
        HashOptions { segment_bytes: 32 << 10, ..small_options() },
        HashOptions { gc_live_ratio: 1.0, ..small_options() },
        HashOptions { segment_bytes: (4 << 20) + 1, ..small_options() },
        HashOptions { digest_bits: 0, ..small_options() },
        HashOptions { read_queues: 0, ..small_options() },
    ] {
        let e = HashStore::open_device(device(&d), opts.clone());
        assert!(matches!(e, Err(Error::InvalidArgument(_))), "{opts:?}: {e:?}");
    }
    assert_eq!(d.writes(), 0, "a refused open writes nothing");
}

#[test]
fn another_engines_volume_is_refused_untouched() {
    use shale_space::{Edit, LayoutOptions, Volume, VolumeOptions};
    let d = sim(4, 5);
    let vopts = VolumeOptions {
        layout: LayoutOptions {
            slot_bytes: shale_hash::SEGMENT_BYTES_FULL_VALUES,
            version_log_bytes: 64 << 10,
            wal_bytes: 0,
        },
        engine: Some(shale_space::EngineKind::Lsm),
        ..VolumeOptions::default()
    };
    let volume = Volume::open(device(&d), &vopts).unwrap().volume;
    let e = volume.allocate(1).unwrap();
    volume
        .commit(
            &Edit { added: vec![e], engine: b"an lsm version edit".to_vec(), ..Edit::default() },
            &mut Vec::new,
        )
        .unwrap();
    drop(volume);
    let before = d.current_image();
    let r = HashStore::open_device(device(&d), small_options());
    assert!(matches!(r, Err(Error::NotHashStore(_))), "{r:?}");
    assert!(d.current_image() == before, "nothing written to another engine's volume");
}
