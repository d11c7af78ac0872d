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

/// A checkpoint of a set, taken while writers go on over every shard: a new set at the
/// destinations, opened in the same order, holding a prefix of each writer's stores (every
/// store acknowledged before the call, none submitted after it returned) and the keys
/// written before; a set of its own, so a shard of the copy never joins the original's
/// shards; destinations that are too few, repeated or occupied are refused with nothing left
/// at any of them.
#[test]
fn a_checkpoint_of_a_set_is_a_new_set_holding_a_prefix_of_every_writer() {
    use shale_testkit::prefix_writers::{Plan, Writers, check_copy};
    use std::sync::Arc;
    common::each_mode(|| {
        let (_d, paths) = dirs(3);
        let shards = Arc::new(Shards::open(&paths, opts()).unwrap());
        for i in 0..300 {
            shards.store(&key(i), &key(i), StoreMode::Overwrite).unwrap();
        }
        let plan = Plan { writers: 3, keys_per_writer: 20, group: 1 };
        let writer_set = shards.clone();
        let writers = Writers::start(plan, move |_, group| {
            let (k, v) = &group[0];
            writer_set.store(k, v, StoreMode::Overwrite).unwrap();
            true
        });
        writers.wait_for_acked(30);
        let before = writers.acked();
        let root = tempfile::tempdir().unwrap();
        let dsts: Vec<PathBuf> = (0..3).map(|i| root.path().join(format!("copy-{i}"))).collect();
        // Refused before anything is written.
        let r = shards.checkpoint(&dsts[..2]);
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
        let r = shards.checkpoint(&[&dsts[0], &dsts[1], &dsts[0]]);
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
        std::fs::create_dir(&dsts[2]).unwrap();
        std::fs::write(dsts[2].join("theirs"), b"keep").unwrap();
        assert!(shards.checkpoint(&dsts).is_err());
        assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 1, "only the occupied one");
        assert_eq!(std::fs::read(dsts[2].join("theirs")).unwrap(), b"keep");
        std::fs::remove_dir_all(&dsts[2]).unwrap();

        let mut reports = Vec::new();
        let copied = shards.checkpoint_with(&dsts, &mut |k| reports.push(k)).unwrap();
        let after = writers.started();
        writers.wait_for_acked(after.iter().copied().max().unwrap() + 10);
        writers.stop();
        assert_eq!(reports.last(), Some(&copied), "the last report counts every shard's keys");

        let copy = Shards::open(&dsts, opts()).unwrap();
        let prefixes = check_copy(plan, &before, &after, |k| copy.retrieve(k).unwrap());
        for i in 0..300 {
            assert_eq!(copy.retrieve(&key(i)).unwrap(), Some(key(i)), "key {i}");
        }
        let writer_keys: u64 = prefixes.iter().map(|&p| p.min(plan.keys_per_writer as u64)).sum();
        assert_eq!(copied, 300 + writer_keys);
        let total: u64 = copy.shards().iter().map(|s| s.stats().keys).sum();
        assert_eq!(total, copied, "and nothing else");
        drop(copy);
        // A shard of the copy in the original's set is refused.
        drop(shards);
        let mixed = [paths[0].clone(), dsts[1].clone(), paths[2].clone()];
        let r = Shards::open(&mixed, opts());
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    });
}
