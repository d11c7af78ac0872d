//! What a store takes on disk once its writes are flushed: its SSTs' pages, a chunk or two of
//! version log, the WAL's metadata pages, and nothing reserved for later (issue #14's bytes
//! on disk). Before: each version log mirror was allocated whole (16 MiB for two), a freed
//! WAL group kept its first 16 MiB, and every SST wrote the zero pages between its last block
//! and its footer (half a slot, 512 KiB, on average).

use shale_lsm::{Db, Options, WalTail};
use shale_testkit::allocated_bytes_in;

fn key(i: u32) -> Vec<u8> {
    format!("key{:012}", i.wrapping_mul(2_654_435_761) % 1_000_003).into_bytes()
}

#[test]
fn a_flushed_store_takes_disk_space_for_its_data_only() {
    let dir = tempfile::tempdir().unwrap();
    let o = Options { write_buffer_bytes: 4 << 20, wal_tail: WalTail::Off, ..Options::default() };
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let value = vec![b'v'; 100];
    for i in 0..60_000u32 {
        db.put(&key(i), &value).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compaction().unwrap();
    let path = dir.path().join(shale_space::VOLUME_FILE_NAME);
    let l = db.volume().layout();
    let disk = |r: std::ops::Range<u64>| allocated_bytes_in(&path, r).unwrap();

    // The version log: an anchor sector, the chunks its live chain touches and one ahead,
    // per mirror.
    let vlog = disk(l.version_log_offset..l.wal_offset);
    let chain = db.volume().log_state().used_bytes;
    assert!(vlog <= 2 * (4096 + chain + 3 * (64 << 10)), "version log: {vlog} bytes on disk");
    // The WAL: its two metadata pages; the flushed groups, written without sync, keep none.
    let wal = disk(l.wal_offset..l.slot_offset);
    assert!(wal <= 8192, "WAL area: {wal} bytes on disk");
    // The slots: each live SST's pages, less the zero pages before its footer.
    let extents = db.volume().live_extents();
    assert!(!extents.is_empty());
    let (mut reserved, mut used) = (0, 0);
    for e in &extents {
        let r = db.volume().extent_range(*e);
        reserved += r.end - r.start;
        used += disk(r);
    }
    assert!(
        used + (extents.len() as u64 - 1) * (64 << 10) < reserved,
        "{} SSTs use {used} bytes of {reserved}: their zero pages hold storage",
        extents.len()
    );
    let file_len = std::fs::metadata(&path).unwrap().len();
    let slots = disk(l.slot_offset..file_len);
    assert!(slots <= used, "free slots hold storage: {slots} bytes for {used} of SSTs");
    db.close().unwrap();

    let db = Db::open(dir.path(), o).unwrap();
    for i in (0..60_000u32).step_by(7) {
        assert_eq!(db.get(&key(i)).unwrap().as_deref(), Some(&value[..]), "key {i}");
    }
    db.check().unwrap();
    db.close().unwrap();
}
