//! `shale inspect` on a volume made through the library, and on things that are no volume.

mod common;

use common::shale;

use shale_space::{Edit, Volume, VolumeOptions};

#[test]
fn inspect_shows_layout_log_state_and_slots() {
    let dir = tempfile::tempdir().unwrap();
    let opts = VolumeOptions::small_for_tests();
    let volume = Volume::open_path(dir.path(), &opts, &Default::default()).unwrap().volume;
    for n in 0..5u8 {
        let e = volume.allocate(2).unwrap();
        let edit = Edit { added: vec![e], engine: vec![n], ..Edit::default() };
        volume.commit(&edit, &mut Vec::new).unwrap();
    }
    drop(volume);
    let path = dir.path().to_str().unwrap();
    let (ok, out, err) = shale(&["inspect", path, "--extents"]);
    assert!(ok, "{err}");
    assert!(out.contains("base SN 1 (lsn 1, ring offset 0), 5 deltas since, next lsn 7"), "{out}");
    assert!(out.contains("slots         16 total: 10 live, 6 free"), "{out}");
    assert!(out.contains("extents       5 live"), "{out}");
    assert_eq!(out.matches("slot ").count(), 5, "{out}");
    assert!(out.contains("lsm           not an lsm store"), "{out}");
}

#[test]
fn inspect_refuses_what_is_not_a_volume_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, _, err) = shale(&["inspect", dir.path().to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("holds no volume"), "{err}");
    assert!(!dir.path().join(shale_space::VOLUME_FILE_NAME).exists(), "inspect created a volume");
    let junk = dir.path().join("junk");
    std::fs::write(&junk, vec![0x5a; 64 << 10]).unwrap();
    let (ok, _, err) = shale(&["inspect", junk.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("not a shale volume"), "{err}");
    assert_eq!(std::fs::read(&junk).unwrap(), vec![0x5a; 64 << 10]);
}
