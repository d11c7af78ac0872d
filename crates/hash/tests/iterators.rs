//! Iterators over a 4-byte prefix under a bitmask: every live key matching the prefix under
//! the mask exactly once, keys or keys and values, in batches; keys deleted before they are
//! reached skipped, overwritten ones returned as they are now; a bounded number open, with a
//! typed error past it; garbage collection frees no segment under an open iterator.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use shale_hash::{Error, HashOptions, HashStore, IterKind, SEGMENT_BYTES_MIN, StoreMode};

fn drain(it: &mut shale_hash::KvIterator, batch: usize) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let mut all = Vec::new();
    loop {
        let b = it.next_batch(batch).unwrap();
        assert!(b.len() <= batch);
        if b.is_empty() {
            return all;
        }
        all.extend(b);
    }
}

fn fill(store: &HashStore) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    for ns in [&b"usr:"[..], b"usr;", b"itm:", b"\x00\x01ab", b"\xff\xfe\x00\x07"] {
        for i in 0..40u32 {
            let mut k = ns.to_vec();
            k.extend_from_slice(format!("{i:04}").as_bytes());
            let v = value(&k, u64::from(i), 50 + (i as usize * 31) % 700);
            store.store(&k, &v, StoreMode::Overwrite).unwrap();
            model.insert(k, v);
        }
    }
    model
}

#[test]
fn each_matching_key_once_under_full_and_partial_masks() {
    each_mode(|| {
        let d = sim(4, 61);
        let store = open(&d, &small_options());
        let model = fill(&store);
        let cases: [([u8; 4], [u8; 4]); 5] = [
            (*b"usr:", [0xFF; 4]),              // one namespace
            (*b"usr\0", [0xFF, 0xFF, 0xFF, 0]), // "usr" then anything
            (*b"\0\0\0:", [0, 0, 0, 0xFF]),     // any key whose fourth byte is ':' (no bucket)
            ([0, 0, 0, 0], [0; 4]),             // everything
            ([0xFF, 0xFE, 0, 0x07], [0xFF, 0xFF, 0, 0xFF]),
        ];
        for (prefix, mask) in cases {
            let want: BTreeSet<Vec<u8>> = model
                .keys()
                .filter(|k| (0..4).all(|i| k[i] & mask[i] == prefix[i] & mask[i]))
                .cloned()
                .collect();
            let mut it = store.open_iterator(prefix, mask, IterKind::Keys).unwrap();
            let got = drain(&mut it, 7);
            let keys: BTreeSet<Vec<u8>> = got.iter().map(|(k, _)| k.clone()).collect();
            assert_eq!(keys.len(), got.len(), "{prefix:?}/{mask:?}: a key returned twice");
            assert_eq!(keys, want, "{prefix:?}/{mask:?}");
            assert!(got.iter().all(|(_, v)| v.is_none()), "keys only");
        }
        let mut it = store.open_iterator(*b"itm:", [0xFF; 4], IterKind::KeysAndValues).unwrap();
        for (k, v) in drain(&mut it, 1000) {
            assert_eq!(v.as_ref(), model.get(&k), "{k:?}");
        }
    });
}

#[test]
fn changes_during_an_iteration_are_seen_as_they_are_when_reached() {
    each_mode(|| {
        let d = sim(4, 62);
        let store = open(&d, &small_options());
        let mut model = fill(&store);
        let mut it = store.open_iterator(*b"usr:", [0xFF; 4], IterKind::KeysAndValues).unwrap();
        let first = it.next_batch(5).unwrap();
        // Delete, overwrite and add keys of the namespace while the iterator is open.
        let ns: Vec<Vec<u8>> = model.keys().filter(|k| k.starts_with(b"usr:")).cloned().collect();
        for (i, k) in ns.iter().enumerate() {
            if first.iter().any(|(f, _)| f == k) {
                continue;
            }
            if i % 3 == 0 {
                store.delete(k).unwrap();
                model.remove(k);
            } else if i % 3 == 1 {
                store.store(k, b"new", StoreMode::Overwrite).unwrap();
                model.insert(k.clone(), b"new".to_vec());
            }
        }
        store.store(b"usr:added", b"late", StoreMode::Overwrite).unwrap();
        let rest = drain(&mut it, 4);
        let mut seen = BTreeSet::new();
        for (k, v) in first.into_iter().chain(rest) {
            assert!(seen.insert(k.clone()), "{k:?} twice");
            if k != b"usr:added" {
                assert_eq!(v.as_ref(), model.get(&k), "{k:?}");
            }
        }
        let live: BTreeSet<Vec<u8>> = model
            .keys()
            .filter(|k| k.starts_with(b"usr:") && k.as_slice() != b"usr:added")
            .cloned()
            .collect();
        let seen_old: BTreeSet<Vec<u8>> =
            seen.iter().filter(|k| k.as_slice() != b"usr:added").cloned().collect();
        assert_eq!(seen_old, live, "every key live at the open and still live is returned");
    });
}

#[test]
fn iterators_are_bounded_and_collection_waits_for_them() {
    each_mode(|| {
        let d = sim(40, 63);
        let opts =
            HashOptions { segment_bytes: SEGMENT_BYTES_MIN, max_iterators: 2, ..small_options() };
        let store = open(&d, &opts);
        for i in 0..30u32 {
            store
                .store(format!("keep{i:03}").as_bytes(), &[7; 2000], StoreMode::Overwrite)
                .unwrap();
        }
        let a = store.open_iterator(*b"keep", [0xFF; 4], IterKind::Keys).unwrap();
        let mut b = store.open_iterator(*b"keep", [0xFF; 4], IterKind::KeysAndValues).unwrap();
        assert!(matches!(
            store.open_iterator(*b"keep", [0xFF; 4], IterKind::Keys),
            Err(Error::TooManyIterators { max: 2 })
        ));
        drop(a);
        let c = store.open_iterator(*b"none", [0xFF; 4], IterKind::Keys).unwrap();
        // Churn: the segments holding "keep" records become victims and are copied, but none is
        // freed while `b` is open.
        for round in 0..300u32 {
            store.store(b"churn", &[round as u8; 3000], StoreMode::Overwrite).unwrap();
        }
        assert_eq!(store.stats().segments_freed, 0);
        let got = drain(&mut b, 8);
        assert_eq!(got.len(), 30);
        assert!(got.iter().all(|(_, v)| v.as_deref() == Some(&[7u8; 2000][..])));
        drop(b);
        drop(c);
        store.store(b"churn", b"x", StoreMode::Overwrite).unwrap();
        store.store(b"churn", b"y", StoreMode::Overwrite).unwrap();
        assert!(store.stats().segments_freed > 0, "{:?}", store.stats());
    });
}
