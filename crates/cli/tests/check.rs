//! `shale check` and `shale inspect` on a store made through the library: a healthy store
//! passes and shows its levels; a flipped byte in an SST fails the check, naming corruption.

mod common;

use common::shale;

use shale_lsm::{Db, Options};

#[test]
fn check_passes_on_a_healthy_store_and_fails_on_a_damaged_sst() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
    for i in 0..3000u32 {
        db.put(format!("key{i:06}").as_bytes(), &[b'v'; 100]).unwrap();
    }
    db.close().unwrap();
    // Close may have flushed and compacted: find a live SST in the state as closed.
    let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
    let extent = db.volume().live_extents()[0];
    let sst_start = db.volume().extent_range(extent).start;
    db.close().unwrap();

    let (ok, out, err) = shale(&["check", &path]);
    assert!(ok, "{err}");
    assert!(out.starts_with("ok: "), "{out}");
    let (ok, out, err) = shale(&["inspect", &path]);
    assert!(ok, "{err}");
    assert!(out.contains("lsm           last sequence 3000"), "{out}");
    let entries: u64 = out
        .lines()
        .filter(|l| l.trim_start().starts_with('L') && l.contains(" SSTs, "))
        .map(|l| l.split(", ").last().unwrap().trim_end_matches(" entries").parse::<u64>().unwrap())
        .sum();
    assert_eq!(entries, 3000, "{out}");

    // Flip a byte inside the first data block of the SST.
    let file = dir.path().join(shale_space::VOLUME_FILE_NAME);
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[sst_start as usize + 100] ^= 0x20;
    std::fs::write(&file, &bytes).unwrap();
    let (ok, _, err) = shale(&["check", &path]);
    assert!(!ok, "check passed on a damaged SST");
    assert!(err.contains("corruption"), "{err}");
}

#[test]
fn check_counts_range_tombstones_and_fails_on_a_damaged_range_deletion_block() {
    use shale_lsm::sst::SstProperties;
    use shale_lsm::sst::footer::{FOOTER_BYTES, Footer};
    use shale_lsm::sst::format::decode_block;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_string();
    let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
    for i in 0..500u32 {
        db.put(format!("key{i:06}").as_bytes(), &[b'v'; 100]).unwrap();
    }
    db.delete_range(b"key000100", b"key000200").unwrap();
    db.close().unwrap(); // one flush: one L0 SST with the points and the tombstone
    let (ok, out, err) = shale(&["check", &path]);
    assert!(ok, "{err}");
    assert!(out.starts_with("ok: 1 SSTs, 500 entries, 1 range tombstones, "), "{out}");

    // The range-deletion block of that SST, found through its footer and properties.
    let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
    let range = db.volume().extent_range(db.volume().live_extents()[0]);
    db.close().unwrap();
    let file = dir.path().join(shale_space::VOLUME_FILE_NAME);
    let mut bytes = std::fs::read(&file).unwrap();
    let sst = &bytes[range.start as usize..range.end as usize];
    let footer = Footer::decode(&sst[sst.len() - FOOTER_BYTES..], sst.len() as u64).unwrap();
    let h = footer.properties;
    let stored = &sst[h.offset as usize..(h.offset + h.stored_bytes()) as usize];
    let props = SstProperties::decode(&decode_block(stored, h, "properties").unwrap(), 0).unwrap();
    let block = props.range_del.expect("a range-deletion block");
    bytes[(range.start + block.offset + 6) as usize] ^= 0x01;
    std::fs::write(&file, &bytes).unwrap();
    let (ok, _, err) = shale(&["check", &path]);
    assert!(!ok, "check passed on a damaged range-deletion block");
    assert!(err.contains("corruption") && err.contains("range-deletion block"), "{err}");
}
