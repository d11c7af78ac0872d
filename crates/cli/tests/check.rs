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

/// Issue #9: `shale check D/volume.shale` got past a writer holding `D`, wrote a recovery SST
/// and deleted the writer's WAL tail. Now the writer's lock is on the volume file, whatever name
/// is used, and check opens read-only: refused while the writer runs, and writing nothing after.
#[test]
fn check_through_the_volume_file_recovered_a_store_open_for_writing() {
    let dir = tempfile::tempdir().unwrap();
    let tails = tempfile::tempdir().unwrap();
    let mut opts = Options::small_for_tests();
    opts.wal_tail = shale_lsm::WalTail::Dir(tails.path().to_path_buf());
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    for i in 0..1000u32 {
        db.put(format!("key{i:06}").as_bytes(), &[b'v'; 100]).unwrap();
    }
    let volume = dir.path().join(shale_space::VOLUME_FILE_NAME);
    let tail_before: Vec<_> =
        std::fs::read_dir(tails.path()).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(tail_before.len(), 1);
    for name in [dir.path(), volume.as_path()] {
        let (ok, _, err) = shale(&["check", name.to_str().unwrap()]);
        assert!(!ok, "check opened a store open for writing");
        assert!(err.contains("store in use"), "{err}");
    }
    assert!(tail_before[0].exists(), "check deleted the writer's WAL tail");
    for i in 0..1000u32 {
        assert!(db.get(format!("key{i:06}").as_bytes()).unwrap().is_some());
    }
    drop(db); // not closed: the WAL holds writes a recovery would turn into an SST
    let before = std::fs::read(&volume).unwrap();
    let (ok, out, err) = shale(&["check", volume.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(out.starts_with("ok: "), "{out}");
    assert!(std::fs::read(&volume).unwrap() == before, "check wrote to the volume");
}

/// Issue #9, item 6: check and inspect on a read-only mount.
#[test]
fn check_and_inspect_failed_on_a_read_only_mount() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
    for i in 0..1000u32 {
        db.put(format!("key{i:06}").as_bytes(), &[b'v'; 100]).unwrap();
    }
    drop(db); // not closed: the WAL must be replayed, in memory
    let at = tempfile::tempdir().unwrap();
    let (src, m) = (dir.path().to_str().unwrap(), at.path().to_str().unwrap());
    let mounted = std::process::Command::new("mount").args(["--bind", src, m]).status();
    if !mounted.is_ok_and(|s| s.success()) {
        println!("skipped: cannot bind-mount (not root?)");
        return;
    }
    struct Unmount<'a>(&'a str);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").args(["-l", self.0]).status();
        }
    }
    let _unmount = Unmount(m);
    let remount = std::process::Command::new("mount").args(["-o", "remount,bind,ro", m]).status();
    assert!(remount.unwrap().success());
    let (ok, out, err) = shale(&["inspect", m]);
    assert!(ok, "inspect on a read-only mount: {err}");
    assert!(out.contains("volume "), "{out}");
    let (ok, out, err) = shale(&["check", m]);
    assert!(ok, "check on a read-only mount: {err}");
    assert!(out.starts_with("ok: "), "{out}");
}
