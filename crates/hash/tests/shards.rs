//! A set of shards, one store per volume: keys routed by hash to every shard, exist and
//! iterators across them, and a set opened with a volume missing, added, swapped, from
//! another set, or a standalone store holding data, refused before any key goes astray.

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;

use shale_hash::{Error, HashOptions, HashStore, IterKind, Shards, StoreMode};

fn dirs(n: usize) -> (Vec<tempfile::TempDir>, Vec<PathBuf>) {
    let d: Vec<_> = (0..n).map(|_| tempfile::tempdir().unwrap()).collect();
    let p = d.iter().map(|t| t.path().to_path_buf()).collect();
    (d, p)
}

/// Default options in the index mode of the running scenario.
fn opts() -> HashOptions {
    HashOptions { index: common::mode(), ..HashOptions::default() }
}

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:05}").into_bytes()
}

#[test]
fn keys_spread_over_the_shards_and_come_back_through_every_call() {
    common::each_mode(|| {
        let (_d, paths) = dirs(3);
        let shards = Shards::open(&paths, opts()).unwrap();
        for i in 0..600 {
            shards.store(&key(i), &key(i), StoreMode::Overwrite).unwrap();
        }
        let per: Vec<u64> = shards.stats().iter().map(|s| s.keys).collect();
        assert_eq!(per.iter().sum::<u64>(), 600);
        assert!(per.iter().all(|&n| n > 120), "uneven spread {per:?}");
        assert!(shards.delete(&key(5)).unwrap());
        let asked: Vec<Vec<u8>> = (0..20).map(key).chain([b"absent".to_vec()]).collect();
        let refs: Vec<&[u8]> = asked.iter().map(|k| k.as_slice()).collect();
        let bits = shards.exist(&refs).unwrap();
        for (i, _) in asked.iter().enumerate() {
            let want = i < 20 && i != 5;
            assert_eq!(bits[i / 8] >> (i % 8) & 1 == 1, want, "key {i}");
        }
        let mut it = shards.open_iterator(*b"key-", [0xFF; 4], IterKind::Keys).unwrap();
        let mut seen = BTreeSet::new();
        loop {
            let b = it.next_batch(50).unwrap();
            if b.is_empty() {
                break;
            }
            for (k, _) in b {
                assert!(seen.insert(k));
            }
        }
        assert_eq!(seen.len(), 599);
        drop(it);
        drop(shards);
        let shards = Shards::open(&paths, opts()).unwrap();
        assert_eq!(shards.retrieve(&key(7)).unwrap(), Some(key(7)));
        assert_eq!(shards.retrieve(&key(5)).unwrap(), None);
    });
}

#[test]
fn a_set_opened_otherwise_than_it_was_made_is_refused() {
    common::each_mode(|| {
        let (_d, paths) = dirs(3);
        drop(Shards::open(&paths, opts()).unwrap());
        let (_other, other_paths) = dirs(2);
        drop(Shards::open(&other_paths, opts()).unwrap());
        let (_extra, extra) = dirs(1);
        let refused = |ps: Vec<PathBuf>, says: &str| match Shards::open(&ps, opts()) {
            Err(Error::InvalidArgument(why)) => assert!(why.contains(says), "{why}"),
            other => panic!("{ps:?} opened: {:?}", other.map(|_| ())),
        };
        refused(vec![paths[1].clone(), paths[0].clone(), paths[2].clone()], "shard 1 of 3");
        refused(paths[..2].to_vec(), "of this set of 2");
        refused(
            vec![paths[0].clone(), paths[1].clone(), paths[2].clone(), extra[0].clone()],
            "of this set of 4",
        );
        refused(vec![paths[0].clone(), other_paths[1].clone(), paths[2].clone()], "another set");
        // A standalone store that holds data is never made a shard.
        let (_solo, solo) = dirs(2);
        HashStore::open(&solo[0], opts())
            .unwrap()
            .store(b"mine", b"v", StoreMode::Overwrite)
            .unwrap();
        refused(solo.clone(), "belongs to no set");
        // The right order still opens.
        Shards::open(&paths, opts()).unwrap();
    });
}
