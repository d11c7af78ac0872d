//! Checkpoints of the lsm engine (`Db::checkpoint`): a copy taken while writers go on holds
//! one snapshot's state, a prefix of each writer's acknowledged writes with every batch
//! whole; a destination that holds anything is refused untouched; a tiered store's
//! checkpoint is a tiered store of its own.

use std::collections::BTreeMap;
use std::path::Path;

use rand::{Rng, SeedableRng, rngs::StdRng};
use shale_lsm::{CheckpointOptions, Db, Error, Options, ReadOptions, WriteBatch, WriteOptions};
use shale_testkit::prefix_writers::{self, Plan, Writers, check_copy};

/// Filler keys: enough data (several memtables, so SSTs and memtables both) that the copy
/// takes a while and its snapshot spans every level.
const FILLER_KEYS: u32 = 6_000;

/// Filler key `i`: a writer's key with a suffix, so that the filler sorts among the
/// writers' keys and a copy reads each writer's keys over the whole span of the copy, not
/// in one batch.
fn filler_key(i: u32) -> Vec<u8> {
    let mut key = prefix_writers::key((i % 4) as usize, ((i / 4) % 40) as usize);
    key.extend_from_slice(format!("/{i:06}").as_bytes());
    key
}

fn is_filler(key: &[u8]) -> bool {
    key.contains(&b'/')
}

/// Writes the filler, deletes a range of it (and of the writers' keys, which the writers
/// write again later), and returns what is left.
fn fill(db: &Db, seed: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = BTreeMap::new();
    for i in 0..FILLER_KEYS {
        let key = filler_key(i);
        let len = rng.gen_range(0..300);
        let value: Vec<u8> = (0..len).map(|_| rng.r#gen::<u8>()).collect();
        db.put(&key, &value).unwrap();
        model.insert(key, value);
    }
    let (from, to) = (prefix_writers::key(1, 10), prefix_writers::key(1, 20));
    db.delete_range(&from, &to).unwrap();
    model.retain(|k, _| !(k.as_slice() >= from.as_slice() && k.as_slice() < to.as_slice()));
    model
}

/// Every entry of `db`, in order.
fn entries(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut it = db.iter(&ReadOptions::default());
    it.seek_to_first();
    let mut out = BTreeMap::new();
    while it.valid() {
        out.insert(it.key().to_vec(), it.value().to_vec());
        it.next();
    }
    it.status().unwrap();
    out
}

#[test]
fn a_checkpoint_taken_while_writers_go_on_holds_a_prefix_of_every_writer() {
    let dir = tempfile::tempdir().unwrap();
    let db =
        std::sync::Arc::new(Db::open(dir.path().join("live"), Options::small_for_tests()).unwrap());
    let filler = fill(&db, 7);
    let plan = Plan { writers: 4, keys_per_writer: 40, group: 3 };
    let writer_db = db.clone();
    let writers = Writers::start(plan, move |_, group| {
        let mut batch = WriteBatch::new();
        for (k, v) in group {
            batch.put(k, v);
        }
        writer_db.write(&batch, &WriteOptions::default()).unwrap();
        true
    });
    writers.wait_for_acked(90);
    let before = writers.acked();
    let dst = dir.path().join("copy");
    let copied = db.checkpoint(&dst).unwrap();
    let after = writers.started();
    // Writes go on after the checkpoint, and none of them may reach it.
    writers.wait_for_acked(after.iter().copied().max().unwrap() + 30);
    writers.stop();

    let copy = Db::open(&dst, Options::small_for_tests()).unwrap();
    let prefixes = check_copy(plan, &before, &after, |k| copy.get(k).unwrap());
    let held = entries(&copy);
    assert_eq!(held.len() as u64, copied, "the count returned is the entries copied");
    let filler_held: BTreeMap<_, _> =
        held.iter().filter(|(k, _)| is_filler(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(filler_held, filler, "the filler, byte for byte, without the deleted range");
    let writer_keys = held.len() - filler_held.len();
    let expected_keys: usize =
        prefixes.iter().map(|&p| (p as usize).min(plan.keys_per_writer)).sum();
    assert_eq!(writer_keys, expected_keys, "no key of a writer beyond its prefix");
    assert!(
        !std::fs::read_dir(dir.path())
            .unwrap()
            .any(|e| { e.unwrap().file_name().to_string_lossy().contains(".checkpoint-") }),
        "no staging directory left"
    );
}

#[test]
fn a_destination_that_holds_anything_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("live"), Options::small_for_tests()).unwrap();
    db.put(b"k", b"v").unwrap();

    let full = dir.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("theirs"), b"keep me").unwrap();
    assert!(matches!(db.checkpoint(&full), Err(Error::InvalidArgument(_))));
    assert_eq!(std::fs::read(full.join("theirs")).unwrap(), b"keep me");
    assert_eq!(std::fs::read_dir(&full).unwrap().count(), 1);

    let file = dir.path().join("file");
    std::fs::write(&file, b"a file").unwrap();
    assert!(matches!(db.checkpoint(&file), Err(Error::InvalidArgument(_))));
    assert_eq!(std::fs::read(&file).unwrap(), b"a file");

    let store = dir.path().join("another-store");
    Db::open(&store, Options::small_for_tests()).unwrap().close().unwrap();
    let volume = std::fs::read(store.join("volume.shale")).unwrap();
    assert!(matches!(db.checkpoint(&store), Err(Error::InvalidArgument(_))));
    assert_eq!(std::fs::read(store.join("volume.shale")).unwrap(), volume);

    let names: Vec<_> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 4, "nothing new beside them: {names:?}");

    // An empty directory is taken.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert_eq!(db.checkpoint(&empty).unwrap(), 1);
    drop(db);
    let copy = Db::open(&empty, Options::small_for_tests()).unwrap();
    assert_eq!(copy.get(b"k").unwrap(), Some(b"v".to_vec()));
}

fn tiered_options(capacity: &Path) -> Options {
    let mut opts = Options::small_for_tests();
    opts.tiers.capacity_path = Some(capacity.to_path_buf());
    opts.tiers.fast_levels = 1;
    opts.tiers.adaptive = false;
    opts
}

#[test]
fn a_tiered_store_checkpoints_into_a_fast_and_a_capacity_volume() {
    let dir = tempfile::tempdir().unwrap();
    let (fast, capacity) = (dir.path().join("fast"), dir.path().join("capacity"));
    let db = Db::open(&fast, tiered_options(&capacity)).unwrap();
    let filler = fill(&db, 11);
    db.compact_range().unwrap();
    assert!(db.stats().tiers[1].live_bytes > 0, "SSTs on the capacity volume");
    db.put(b"g-in-the-memtable", b"too").unwrap();

    let (dst, dst_capacity) = (dir.path().join("copy"), dir.path().join("copy-capacity"));
    assert!(
        matches!(db.checkpoint(&dst), Err(Error::InvalidArgument(m)) if m.contains("capacity")),
        "a tiered store's checkpoint needs a capacity path"
    );
    assert!(!dst.exists());
    let opts = CheckpointOptions { capacity_path: Some(dst_capacity.clone()) };
    let mut reported = Vec::new();
    let copied = db.checkpoint_with(&dst, &opts, &mut |n| reported.push(n)).unwrap();
    assert_eq!(copied, filler.len() as u64 + 1);
    assert_eq!(reported.last(), Some(&copied), "progress ends with the total");
    let source = entries(&db);
    db.close().unwrap();

    let copy = Db::open(&dst, tiered_options(&dst_capacity)).unwrap();
    assert_eq!(entries(&copy), source);
    drop(copy);
    assert!(
        Db::open(&dst, Options::small_for_tests()).is_err(),
        "the checkpoint is tiered: it opens only with its capacity volume"
    );

    // An untiered store's checkpoint takes no capacity path.
    let plain = Db::open(dir.path().join("plain"), Options::small_for_tests()).unwrap();
    let opts = CheckpointOptions { capacity_path: Some(dir.path().join("unused")) };
    assert!(matches!(
        plain.checkpoint_with(&dir.path().join("plain-copy"), &opts, &mut |_| {}),
        Err(Error::InvalidArgument(_))
    ));
}
