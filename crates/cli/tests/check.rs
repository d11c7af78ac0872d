//! `shale check` and `shale inspect` on stores of each engine made through the library: a
//! healthy store passes and shows its layout; a flipped byte in an SST, a hash record or a
//! table block fails the check, naming corruption; a store whose keys are all in its WAL is
//! counted.

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
    assert!(out.starts_with("ok: lsm store, "), "{out}");
    assert!(out.contains("3000 live keys in all"), "{out}");
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
    assert!(
        out.starts_with("ok: lsm store, 1 SSTs, 500 entries in SSTs, 1 range tombstones, "),
        "{out}"
    );

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
    assert!(out.starts_with("ok: lsm store, "), "{out}");
    assert!(out.contains("1000 live keys in all"), "{out}");
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
    if !mounted.as_ref().is_ok_and(|s| s.success()) {
        let why = format!("mount --bind: {mounted:?} (not root?)");
        return shale_testkit::prerequisite::missing("a bind mount", why);
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
    assert!(out.starts_with("ok: lsm store, "), "{out}");
    assert!(out.contains("1000 live keys in all"), "{out}");
}

/// Flips one bit of the first occurrence of `needle` in the volume file of the store at
/// `dir`, `at` bytes into it; returns the byte's offset.
fn flip_in_volume(dir: &std::path::Path, needle: &[u8], at: usize) -> usize {
    let file = dir.join(shale_space::VOLUME_FILE_NAME);
    let mut bytes = std::fs::read(&file).unwrap();
    let found = bytes.windows(needle.len()).position(|w| w == needle).expect("the bytes stored");
    bytes[found + at] ^= 0x10;
    std::fs::write(&file, &bytes).unwrap();
    found + at
}

#[test]
fn check_and_inspect_know_a_hash_store_and_check_finds_a_damaged_record() {
    use shale_hash::{HashOptions, HashStore, INDEX_CACHE_BYTES_MIN, IndexMode, StoreMode};
    // An index in memory with checkpoints, and a bounded one.
    let variants = [
        HashOptions { checkpoint_bytes: 512 << 10, checkpoint_log_ratio: 0, ..Default::default() },
        HashOptions {
            index: IndexMode::Bounded { cache_bytes: INDEX_CACHE_BYTES_MIN },
            ..Default::default()
        },
    ];
    for (n, opts) in variants.into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_str().unwrap();
        let opts = HashOptions { segment_bytes: 256 << 10, ..opts };
        let store = HashStore::open(dir.path(), opts).unwrap();
        for i in 0..300u32 {
            let value = format!("value-{i:05}-").repeat(100);
            let key = format!("key{i:05}");
            store.store(key.as_bytes(), value.as_bytes(), StoreMode::Overwrite).unwrap();
        }
        for i in 0..50u32 {
            store.delete(format!("key{i:05}").as_bytes()).unwrap();
        }
        store.close();
        let (ok, out, err) = shale(&["check", path]);
        assert!(ok, "{err}\n{out}");
        assert!(out.starts_with("ok: hash store, "), "{out}");
        assert!(out.contains("350 records (300 stores, 50 deletes), 250 live keys"), "{out}");
        if n == 0 {
            assert!(out.contains("index checkpoint generation"), "{out}");
        } else {
            assert!(out.contains("bounded index"), "{out}");
        }
        let (ok, out, err) = shale(&["inspect", path]);
        assert!(ok, "{err}");
        assert!(!out.contains("corruption"), "{out}");
        assert!(out.contains("hash          ") && out.contains("250 live keys"), "{out}");
        assert!(out.matches("segment generation").count() > 2, "{out}");

        // A byte of an early record's value: its page's checksum fails, and later pages of
        // the segment say it was durable.
        flip_in_volume(dir.path(), b"value-00007-", 3);
        let (ok, out, err) = shale(&["check", path]);
        assert!(!ok, "check passed on a damaged record:\n{out}");
        assert!(err.contains("corruption") && err.contains("record log segment"), "{err}");
    }
}

#[test]
fn check_and_inspect_know_a_table_store_and_check_finds_a_damaged_block() {
    use shale_table::{Column, Schema, TableOptions, TableStore};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    let store = TableStore::open(dir.path(), TableOptions::default()).unwrap();
    let schema = Schema::new(vec![Column::fixed("id", 8), Column::var("city", 64)]).unwrap();
    let t = store.create_table("people", schema.clone()).unwrap();
    let u = store.create_table("places", schema).unwrap();
    for i in 0..400u32 {
        let city = format!("city-{i:05}-of-somewhere");
        store.insert(t, &[format!("p{i:07}").as_bytes(), city.as_bytes()]).unwrap();
    }
    store.insert(u, &[&b"q0000001"[..], b"lyon"]).unwrap();
    store.erase(t, b"p0000003").unwrap();
    drop(store);
    let (ok, out, err) = shale(&["check", path]);
    assert!(ok, "{err}\n{out}");
    assert!(out.starts_with("ok: table store, 2 tables, 400 rows, "), "{out}");
    assert!(out.contains("table \"people\": 399 rows, 1 dead"), "{out}");
    let (ok, out, err) = shale(&["inspect", path]);
    assert!(ok, "{err}");
    assert!(!out.contains("corruption"), "{out}");
    assert!(out.contains("table         2 tables; undo log on the volume"), "{out}");
    assert!(out.contains(r#"table "people" (id 1): 399 rows, 1 dead"#), "{out}");
    assert!(
        out.contains(r#"columns: "id" (fixed 8, primary key), "city" (var up to 64)"#),
        "{out}"
    );

    // A byte of a row in a block: its checksum fails.
    flip_in_volume(dir.path(), b"city-00200-of", 2);
    let (ok, out, err) = shale(&["check", path]);
    assert!(!ok, "check passed on a damaged block:\n{out}");
    assert!(err.contains("corruption") && err.contains("table 1"), "{err}");
}

const WAL_CHILD: &str = "SHALE_CHECK_WAL_CHILD";

/// Writes, then exits without closing (no flush), as a killed process leaves a store.
#[test]
#[ignore = "child process entry point, run by \
            check_counts_the_keys_of_a_store_that_are_only_in_its_wal"]
fn wal_child_entry_point() {
    let parent = "check_counts_the_keys_of_a_store_that_are_only_in_its_wal";
    let dir = shale_testkit::child_env(WAL_CHILD, parent);
    let db = Db::open(&dir, Options::small_for_tests()).unwrap();
    let sync = shale_lsm::WriteOptions { sync: true };
    for i in 0..1000u32 {
        let mut b = shale_lsm::batch::WriteBatch::new();
        b.put(format!("key{i:06}").as_bytes(), b"v");
        db.write(&b, &sync).unwrap();
    }
    std::process::exit(0);
}

#[test]
fn check_counts_the_keys_of_a_store_that_are_only_in_its_wal() {
    let dir = tempfile::tempdir().unwrap();
    let status = shale_testkit::child_command("wal_child_entry_point")
        .env(WAL_CHILD, dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    let (ok, out, err) = shale(&["check", dir.path().to_str().unwrap()]);
    assert!(ok, "{err}");
    // Some were flushed by the child (its small write buffer), the rest are in the WAL.
    assert!(out.starts_with("ok: lsm store, "), "{out}");
    assert!(out.contains("memtables recovered from the WAL"), "{out}");
    assert!(out.contains("1000 live keys in all"), "{out}");
}
