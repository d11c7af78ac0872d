//! The compaction filter (`Options::compaction_filter`): a removed value becomes a tombstone
//! that hides older versions, never touches what a snapshot reads, and is counted.

use std::sync::Arc;

use shale_lsm::{CompactionFilter, Db, Options, ReadOptions};

/// Removes values that start with "dead".
struct DeadValues;

impl CompactionFilter for DeadValues {
    fn name(&self) -> &str {
        "dead-values"
    }
    fn remove(&self, _key: &[u8], value: &[u8]) -> bool {
        value.starts_with(b"dead")
    }
}

fn open(dir: &tempfile::TempDir) -> Db {
    let opts =
        Options { compaction_filter: Some(Arc::new(DeadValues)), ..Options::small_for_tests() };
    Db::open(dir.path(), opts).unwrap()
}

#[test]
fn a_removed_value_hides_the_older_versions_below_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    db.put(b"k", b"alive, older").unwrap();
    db.flush().unwrap();
    db.compact_range().unwrap();
    db.put(b"k", b"dead now").unwrap();
    db.put(b"other", b"alive").unwrap();
    db.flush().unwrap();
    db.compact_range().unwrap();
    assert_eq!(db.get(b"k").unwrap(), None, "the older version must not come back");
    assert_eq!(db.get(b"other").unwrap().as_deref(), Some(&b"alive"[..]));
    let keys: Vec<_> = db.iter(&ReadOptions::default()).into_iter().map(|e| e.unwrap().0).collect();
    assert_eq!(keys, [b"other".to_vec()]);
    assert_eq!(db.stats().compaction_filter_removals, 1);
    // And after a reopen (the tombstone, or nothing, is what is stored).
    drop(db);
    let db = open(&dir);
    assert_eq!(db.get(b"k").unwrap(), None);
}

#[test]
fn a_value_a_snapshot_reads_below_is_kept_until_the_snapshot_drops() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    db.put(b"k", b"alive").unwrap();
    let before = db.snapshot();
    db.put(b"k", b"dead now").unwrap();
    let after = db.snapshot();
    db.flush().unwrap();
    db.compact_range().unwrap();
    let at = |s| ReadOptions { snapshot: Some(s), ..Default::default() };
    assert_eq!(db.get_opt(b"k", &at(&before)).unwrap().as_deref(), Some(&b"alive"[..]));
    // The dead put is above the oldest snapshot: untouched, so every reader still sees it.
    assert_eq!(db.get_opt(b"k", &at(&after)).unwrap().as_deref(), Some(&b"dead now"[..]));
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"dead now"[..]));
    assert_eq!(db.stats().compaction_filter_removals, 0);
    drop(before);
    drop(after);
    db.compact_range().unwrap();
    assert_eq!(db.get(b"k").unwrap(), None);
    assert_eq!(db.stats().compaction_filter_removals, 1);
}

#[test]
fn without_a_filter_dead_values_stay() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
    db.put(b"k", b"dead now").unwrap();
    db.flush().unwrap();
    db.compact_range().unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"dead now"[..]));
    assert_eq!(db.stats().compaction_filter_removals, 0);
}
