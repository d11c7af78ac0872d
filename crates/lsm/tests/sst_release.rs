//! Who gives back an SST a compaction dropped (`sst/release.rs`): a caller's thread that lets
//! go of the last handle (an iterator that began before the compaction) hands the work to the
//! store's release thread instead of paying for the page drop in its own call; a background
//! thread that lets go of it gives it back itself, at once. Either way the extent goes back
//! to the volume, and the store checks clean.

use shale_lsm::{Db, Options, ReadOptions, WalTail};

fn options() -> Options {
    Options { wal_tail: WalTail::Off, ..Options::small_for_tests() }
}

/// Three rounds of the same keys, each flushed: several L0 SSTs over one key range.
fn fill(db: &Db) {
    for round in 0..3u32 {
        for i in 0..2000u32 {
            let value = format!("value {i} of round {round}").repeat(8);
            db.put(format!("key{i:06}").as_bytes(), value.as_bytes()).unwrap();
        }
        db.flush().unwrap();
    }
}

/// Slots allocated but not in the committed version: with no flush or compaction running,
/// those of SSTs the store dropped and has not given back yet.
fn held_slots(db: &Db) -> u32 {
    db.volume().slot_usage().pending
}

fn version_ssts(db: &Db) -> usize {
    db.check().unwrap().ssts
}

#[test]
fn a_callers_last_handle_is_given_back_on_the_release_thread() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    fill(&db);
    db.wait_for_compaction().unwrap();
    let held_ssts = version_ssts(&db);
    let mut it = db.iter(&ReadOptions::default());
    it.seek_to_first();
    assert!(it.valid());
    // Overwritten and compacted: every SST of the version the iterator began on is merged
    // away, but the iterator still holds them, so the compaction could not give them back.
    fill(&db);
    db.compact_range().unwrap();
    assert!(held_slots(&db) > 0, "the SSTs the iterator holds were given back under it");
    assert_eq!(db.stats().sst_releases_deferred, 0, "nothing was let go by a caller yet");
    drop(it);
    // The test's thread let go of the last handles: each went to the release thread.
    assert_eq!(
        db.stats().sst_releases_deferred,
        held_ssts as u64,
        "SSTs given back on the release thread"
    );
    db.wait_for_compaction().unwrap();
    assert_eq!(held_slots(&db), 0, "the release thread gave the SSTs back");
    db.check().unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    db.check().unwrap();
    assert_eq!(db.get(b"key000007").unwrap().unwrap(), "value 7 of round 2".repeat(8).into_bytes());
}

#[test]
fn a_compactions_own_drop_is_given_back_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    fill(&db);
    db.compact_range().unwrap();
    // No caller held the version: the compaction's thread let go of its inputs and gave
    // them back itself.
    assert_eq!(db.stats().sst_releases_deferred, 0);
    assert_eq!(held_slots(&db), 0, "the compaction's inputs are back in the volume");
    db.close().unwrap();
}
