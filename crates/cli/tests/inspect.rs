//! `shale inspect` on a volume made through the library, on an lsm store (levels and every
//! SST, or only the levels with `--summary`), and on things that are no volume.

mod common;

use common::shale;

use shale_lsm::{Db, Options};
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

#[test]
fn inspect_lists_every_sst_of_an_lsm_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
    for i in 0..3000u32 {
        db.put(format!("key{i:06}").as_bytes(), &[b'v'; 100]).unwrap();
    }
    // A binary key and one that would clear the terminal, the smallest and the largest key:
    // printed escaped as SST bounds.
    db.put(b"\x00\xffbin", b"1").unwrap();
    db.put(b"\xff\x1b[2J", b"2").unwrap();
    db.flush().unwrap();
    db.wait_for_compaction().unwrap();
    let stats = db.stats();
    db.close().unwrap();
    let ssts: usize = stats.files_per_level.iter().sum();

    let (ok, out, err) = shale(&["inspect", path]);
    assert!(ok, "{err}");
    let sst_lines: Vec<&str> = out.lines().filter(|l| l.trim_start().starts_with("SST ")).collect();
    // Closing may flush once more: at least the SSTs counted before close.
    assert!(sst_lines.len() >= ssts && ssts > 1, "{ssts} SSTs expected: {out}");
    let sst = regex::Regex::new(
        r"^\s+SST \d+\s+slots\s+\d+\+\d+\s+\d+ bytes\s+\d+ entries  seq \d+\.\.\d+  ",
    )
    .unwrap();
    assert!(sst_lines.iter().all(|l| sst.is_match(l)), "{out}");
    assert!(out.contains(r#""\x00\xffbin""#), "{out}");
    assert!(out.contains(r#""\xff\x1b[2J""#), "{out}");
    assert!(!out.contains('\x1b'), "a raw escape byte reached the output");
    let level = regex::Regex::new(r"L\d: \d+ SSTs, [\d.]+ MiB, \d+ slots, \d+ entries").unwrap();
    assert!(level.is_match(&out), "{out}");

    let (ok, short, err) = shale(&["inspect", path, "--summary"]);
    assert!(ok, "{err}");
    assert!(!short.lines().any(|l| l.trim_start().starts_with("SST ")), "{short}");
    assert!(level.is_match(&short), "{short}");
}
