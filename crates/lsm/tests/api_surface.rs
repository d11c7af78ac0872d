//! The public API's guarantees of issue #13 part 5: snapshots are borrowed and checked to be
//! the store's own, and iterators are Rust iterators from both ends.

use std::collections::BTreeMap;

use proptest::prelude::*;
use shale_lsm::{Db, Error, Options, ReadOptions};

fn open(dir: &tempfile::TempDir) -> Db {
    Db::open(dir.path(), Options::small_for_tests()).unwrap()
}

#[test]
fn a_snapshot_of_another_store_is_refused_by_every_read() {
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (open(&a_dir), open(&b_dir));
    a.put(b"k", b"a").unwrap();
    b.put(b"k", b"b").unwrap();
    let of_b = b.snapshot();
    let opts = ReadOptions { snapshot: Some(&of_b), ..Default::default() };
    let refused =
        |e: Error| matches!(e, Error::InvalidArgument(ref m) if m.contains("another store"));
    assert!(refused(a.get_opt(b"k", &opts).unwrap_err()));
    assert!(refused(a.multi_get(&[b"k"], &opts).unwrap_err()));
    assert!(refused(a.submit_get(b"k", &opts).unwrap_err()));
    assert!(refused(a.submit_scan(b"", 10, &opts).unwrap().wait().unwrap_err()));
    let mut it = a.iter(&opts);
    it.seek_to_first();
    assert!(!it.valid());
    assert!(refused(it.status().unwrap_err()));
    let entries: Vec<_> = a.iter(&opts).into_iter().collect();
    assert_eq!(entries.len(), 1, "the refusal, once");
    assert!(refused(entries.into_iter().next().unwrap().unwrap_err()));
    // The store's own snapshot reads.
    assert_eq!(b.get_opt(b"k", &opts).unwrap().as_deref(), Some(&b"b"[..]));
}

/// A clone of a snapshot holds its versions on its own: what a queued async read keeps, so
/// that the caller may drop its snapshot once the read is submitted.
#[test]
fn a_snapshot_clone_keeps_its_versions_after_the_original_drops() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    db.put(b"k", b"old").unwrap();
    let snapshot = db.snapshot();
    let clone = snapshot.clone();
    drop(snapshot);
    db.put(b"k", b"new").unwrap();
    db.flush().unwrap();
    db.compact_range().unwrap();
    let at = ReadOptions { snapshot: Some(&clone), ..Default::default() };
    assert_eq!(db.get_opt(b"k", &at).unwrap().as_deref(), Some(&b"old"[..]));
    let scanned = db.submit_scan(b"", 10, &at).unwrap();
    drop(clone);
    assert_eq!(scanned.wait().unwrap(), vec![(b"k".to_vec(), b"old".to_vec())]);
}

/// One step of a walk over the entries: from the front or from the back.
#[derive(Clone, Copy, Debug)]
enum End {
    Front,
    Back,
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Any mix of `next` and `next_back` yields each entry of the store once, in order from
    /// each end, within the bounds, and with deleted keys left out, as a BTreeMap's
    /// double-ended iterator does.
    #[test]
    fn entries_from_both_ends_match_a_btreemap(
        writes in proptest::collection::vec((0u8..40, proptest::option::of(0u8..255)), 0..120),
        walk in proptest::collection::vec(prop_oneof![Just(End::Front), Just(End::Back)], 0..60),
        bounds in (0u8..45, 0u8..45),
        flush_at in 0usize..120,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let db = open(&dir);
        let mut model = BTreeMap::new();
        for (i, (k, v)) in writes.iter().enumerate() {
            let key = format!("key{k:02}").into_bytes();
            match v {
                Some(v) => {
                    db.put(&key, &[*v]).unwrap();
                    model.insert(key, vec![*v]);
                }
                None => {
                    db.delete(&key).unwrap();
                    model.remove(&key);
                }
            }
            if i == flush_at {
                db.flush().unwrap();
            }
        }
        let (lo, hi) = (bounds.0.min(bounds.1), bounds.0.max(bounds.1));
        let lower = format!("key{lo:02}").into_bytes();
        let upper = format!("key{hi:02}").into_bytes();
        let opts = ReadOptions {
            lower_bound: Some(lower.clone()),
            upper_bound: Some(upper.clone()),
            ..Default::default()
        };
        let mut expected = model.range(lower..upper).map(|(k, v)| (k.clone(), v.clone()));
        let mut got = db.iter(&opts).into_iter();
        for end in walk.iter().chain(std::iter::repeat_n(&End::Front, 60)) {
            let (want, have) = match end {
                End::Front => (expected.next(), got.next()),
                End::Back => (expected.next_back(), got.next_back()),
            };
            prop_assert_eq!(have.transpose().unwrap(), want, "{:?}", end);
        }
        prop_assert!(got.next().is_none() && got.next_back().is_none(), "fused");
    }
}
