//! Format fixtures (docs/testing.md, "Format fixtures"): small lsm stores written by an
//! earlier build and committed under `tests/fixtures/format-<volume format>/`, each opened by
//! today's code, read back key by key against the recipe that wrote it, checked end to end
//! (`Db::check`: every SST block's checksum, the LSM invariants, the volume's slots), written
//! to, closed and read back again. A change that can no longer read a store an earlier build
//! wrote fails here.
//!
//! Each fixture's contents come from a fixed recipe ([`recipe`]) of writes, flushes and
//! compactions: the generator applies it to a store, the tests apply it to a `BTreeMap`. A
//! recipe is part of the fixtures written with it and never changes; a new one gets a new
//! name.
//!
//! Regenerate (only for a new format: a committed fixture is never replaced; the generator
//! refuses to overwrite one):
//! `cargo test -p shale-lsm --test format_fixtures -- --ignored --nocapture`

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use shale_lsm::{Db, Options, ReadOptions, WalTail, WriteBatch, WriteOptions};
use shale_testkit::format_fixtures;

/// Volume format (the space layer's header version) the generator writes.
const FORMAT: u32 = shale_space::header::FORMAT_VERSION;

/// How a fixture's store was left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    /// Dropped without `close`: the recipe's last writes are only in the WAL (the drop synced
    /// its last page), as after a crash that followed a sync.
    Dropped,
    /// Closed: every write flushed into SSTs, the WAL holding nothing live.
    Closed,
}

/// The fixtures the tests read: (volume format, archive name, tiered, how it was left). Every
/// archive under `tests/fixtures` must be listed here (`every_fixture_is_read`).
const FIXTURES: &[(u32, &str, bool, Ending)] = &[
    (3, "lsm-sst2.tar.zst", false, Ending::Dropped),
    (3, "lsm-tiered-sst2.tar.zst", true, Ending::Closed),
];

/// Keys the recipe writes are `key(0)..key(KEYS)`; the tests' own writes use keys past it.
const KEYS: u32 = 1000;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// The value the recipe's write generation `generation` gives key `i`: a header naming both,
/// then 20 to 219 filler bytes drawn from them (splitmix64), so a value from another key or
/// write never matches.
fn value(i: u32, generation: u32) -> Vec<u8> {
    let mut h = (u64::from(generation) << 32 | u64::from(i)).wrapping_add(0x9e37_79b9_7f4a_7c15);
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    let mut v = format!("v{generation}.{i}:").into_bytes();
    let len = 20 + (h % 200) as usize;
    v.extend((0..len).map(|j| b'a' + ((h >> (j % 58)) as u8 % 26)));
    v
}

/// Most operations in one batch of a recipe's write (a batch takes at most half a memtable).
const BATCH_OPS: usize = 50;

/// One step of a recipe.
#[derive(Clone, Debug)]
enum Step {
    /// A batch of puts (`key(i)` to `value(i, generation)`), point deletes and range deletes
    /// (`key(a)..key(b)`), written with or without sync.
    Write {
        puts: Vec<u32>,
        generation: u32,
        deletes: Vec<u32>,
        ranges: Vec<(u32, u32)>,
        sync: bool,
    },
    /// `Db::flush`: the memtables become L0 SSTs.
    Flush,
    /// `Db::compact_range`: everything compacted down to one level.
    Compact,
}

fn puts(generation: u32, keys: impl Iterator<Item = u32>, sync: bool) -> Step {
    Step::Write { puts: keys.collect(), generation, deletes: vec![], ranges: vec![], sync }
}

/// The recipe of the lsm fixtures (both): SSTs in a base level and in L0 (overwrites, point
/// deletes and a range delete among them), then writes left only in the WAL, synced and not,
/// with another range delete. A store dropped without `close` keeps them in the WAL only
/// ([`Ending::Dropped`]).
fn recipe() -> Vec<Step> {
    let mut steps = Vec::new();
    // Generation 1: keys 0..800, a sixteenth of them at a time across the whole range, so
    // the L0 SSTs overlap and the compaction merges them (rather than moving them down).
    for chunk in 0..16 {
        steps.push(puts(1, (0..800).filter(|i| i % 16 == chunk), false));
    }
    steps.push(Step::Flush);
    steps.push(Step::Compact);
    // Generation 2: overwrites and deletes, and a range delete, flushed into an L0 SST.
    steps.push(Step::Write {
        puts: (0..800).filter(|i| i % 3 == 0).collect(),
        generation: 2,
        deletes: (0..800).filter(|i| i % 7 == 0 && i % 3 != 0).collect(),
        ranges: vec![(200, 260)],
        sync: false,
    });
    steps.push(Step::Flush);
    // Generation 3: new keys and more overwrites, in another L0 SST.
    steps.push(puts(3, (800..900).chain((0..800).filter(|i| i % 5 == 1)), false));
    steps.push(Step::Flush);
    // Generation 4, synced, and 5, not: only in the WAL.
    steps.push(Step::Write {
        puts: (0..900).filter(|i| i % 11 == 2).collect(),
        generation: 4,
        deletes: vec![],
        ranges: vec![(500, 530)],
        sync: true,
    });
    steps.push(Step::Write {
        puts: (900..950).collect(),
        generation: 5,
        deletes: (0..900).filter(|i| i % 13 == 4).collect(),
        ranges: vec![],
        sync: false,
    });
    steps
}

/// What the recipe leaves: key number to the generation of its value.
type Model = BTreeMap<u32, u32>;

/// Applies a write to the model in the order `apply_to_db` writes it: puts, then deletes,
/// then ranges. (No write of the recipe names a key twice.)
fn apply_to_model(model: &mut Model, step: &Step) {
    if let Step::Write { puts, generation, deletes, ranges, .. } = step {
        for &i in puts {
            model.insert(i, *generation);
        }
        for i in deletes {
            model.remove(i);
        }
        for &(a, b) in ranges {
            model.retain(|&k, _| !(a..b).contains(&k));
        }
    }
}

fn apply_to_db(db: &Db, step: &Step) {
    match step {
        Step::Write { puts, generation, deletes, ranges, sync } => {
            // In batches of at most `BATCH_OPS` operations, in the model's order: a batch is
            // bounded by half a memtable.
            let mut b = WriteBatch::new();
            let write = |b: &mut WriteBatch| {
                db.write(b, &WriteOptions { sync: *sync }).unwrap();
                *b = WriteBatch::new();
            };
            for &i in puts {
                b.put(&key(i), &value(i, *generation));
                if b.len() == BATCH_OPS {
                    write(&mut b);
                }
            }
            for &i in deletes {
                b.delete(&key(i));
            }
            for &(a, c) in ranges {
                b.delete_range(&key(a), &key(c));
            }
            if !b.is_empty() {
                write(&mut b);
            }
        }
        Step::Flush => db.flush().unwrap(),
        Step::Compact => db.compact_range().unwrap(),
    }
}

fn recipe_model() -> Model {
    let mut model = Model::new();
    for step in recipe() {
        apply_to_model(&mut model, &step);
    }
    model
}

/// The options of the fixtures: the smallest sizes the engine accepts (4 KiB slots, 64 KiB
/// version log mirrors and write buffer), no background compaction of L0 (so the levels the
/// recipe builds are the levels stored) and no WAL tail (a write without sync reaches the
/// volume's WAL before it returns, so nothing depends on `/dev/shm`). An existing volume keeps
/// the layout it was made with, so the tests open with the same options.
fn fixture_options(dir: &Path, tiered: bool) -> Options {
    let mut o = Options::small_for_tests();
    o.write_buffer_bytes = 64 << 10;
    o.target_file_size_base = 4 << 10;
    o.max_bytes_for_level_base = 1 << 30;
    o.level0_file_num_compaction_trigger = 1000;
    o.level0_slowdown_writes_trigger = 1000;
    o.level0_stop_writes_trigger = 1000;
    o.block_cache_bytes = 256 << 10;
    o.volume.layout.slot_bytes = 4 << 10;
    o.volume.layout.version_log_bytes = shale_space::VERSION_LOG_BYTES_MIN;
    o.volume.layout.wal_bytes = 0;
    o.volume.initial_slots = 4;
    o.volume.grow_slots_min = 16;
    o.wal_tail = WalTail::Off;
    if tiered {
        // L0 on the fast volume, every deeper level on the capacity volume; the pointer stays.
        o.tiers.capacity_path = Some(dir.join("capacity"));
        o.tiers.fast_levels = 1;
        o.tiers.adaptive = false;
    }
    o
}

/// The store's path in a fixture directory: `fast` of a tiered store, else the directory.
fn store_path(dir: &Path, tiered: bool) -> PathBuf {
    if tiered { dir.join("fast") } else { dir.to_path_buf() }
}

/// Every key of `0..keys_end` reads as the model says, point by point and by a full scan.
fn verify(db: &Db, model: &Model, keys_end: u32, what: &str) {
    for i in 0..keys_end {
        let got = db.get(&key(i)).unwrap();
        assert_eq!(got, model.get(&i).map(|&g| value(i, g)), "{what}: key {i}");
    }
    let mut it = db.iter(&ReadOptions::default());
    it.seek_to_first();
    let mut scanned = Vec::new();
    while it.valid() {
        scanned.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().unwrap();
    let expected: Vec<_> = model.iter().map(|(&i, &g)| (key(i), value(i, g))).collect();
    assert_eq!(scanned.len(), expected.len(), "{what}: keys scanned");
    assert!(scanned == expected, "{what}: the scan differs from the model");
}

/// The tests' own writes after the fixture's: new keys, overwrites, deletes and a range
/// delete, synced and not.
fn more_steps() -> Vec<Step> {
    vec![
        puts(6, (950..KEYS).chain((0..950).filter(|i| i % 17 == 3)), true),
        Step::Write {
            puts: vec![],
            generation: 7,
            deletes: (0..KEYS).filter(|i| i % 19 == 5).collect(),
            ranges: vec![(600, 620)],
            sync: false,
        },
    ]
}

/// Unpacks a fixture, reads it read-only and read-write against its recipe, checks it,
/// writes to it, closes it and reads it back.
fn read_fixture(name: &str) {
    let &(format, _, tiered, ending) =
        FIXTURES.iter().find(|f| f.1 == name).expect("a fixture listed in FIXTURES");
    let archive = format_fixtures::dir(env!("CARGO_MANIFEST_DIR"), format).join(name);
    let tmp = tempfile::tempdir().unwrap();
    format_fixtures::unpack(&archive, tmp.path());
    let dir = tmp.path();
    let mut opts = fixture_options(dir, tiered);
    // A tail of this test's own: never one left in /dev/shm by another run of the fixture.
    let tail = dir.join("tail");
    std::fs::create_dir(&tail).unwrap();
    opts.wal_tail = WalTail::Dir(tail);
    let path = store_path(dir, tiered);
    let mut model = recipe_model();

    // Read-only first: the state as the fixture holds it, WAL replayed in memory only.
    let db = Db::open_read_only(&path, opts.clone()).unwrap();
    let stats = db.stats();
    let levels = stats.files_per_level.iter().filter(|&&n| n > 0).count();
    assert!(stats.files_per_level[0] >= 2 && levels >= 2, "{name}: {:?}", stats.files_per_level);
    assert_eq!(
        stats.memtable_bytes > 0,
        ending == Ending::Dropped,
        "{name}: memtable after replaying the WAL"
    );
    if tiered {
        assert!(stats.tiers.iter().all(|t| t.ssts > 0), "{name}: {:?}", stats.tiers);
    }
    verify(&db, &model, KEYS, name);
    let report = db.check().unwrap();
    assert!(report.ssts >= 4 && report.range_tombstones >= 1, "{name}: {report:?}");
    db.close().unwrap();

    // Read-write: recovery commits the WAL's records; then more writes.
    let db = Db::open(&path, opts.clone()).unwrap();
    verify(&db, &model, KEYS, name);
    db.check().unwrap();
    for step in more_steps() {
        apply_to_db(&db, &step);
        apply_to_model(&mut model, &step);
    }
    verify(&db, &model, KEYS, name);
    db.close().unwrap();

    let db = Db::open(&path, opts).unwrap();
    verify(&db, &model, KEYS, name);
    db.check().unwrap();
    db.close().unwrap();
}

#[test]
fn lsm_volume_format_3_sst_format_2_reads_back() {
    read_fixture("lsm-sst2.tar.zst");
}

#[test]
fn lsm_tiered_volume_format_3_sst_format_2_reads_back() {
    read_fixture("lsm-tiered-sst2.tar.zst");
}

/// An archive nobody reads protects nothing: every one must be in [`FIXTURES`], and every
/// entry there must have its archive.
#[test]
fn every_fixture_is_read() {
    let found = format_fixtures::all_archives(env!("CARGO_MANIFEST_DIR"));
    let mut listed: Vec<_> = FIXTURES.iter().map(|&(f, n, ..)| (f, n.to_string())).collect();
    listed.sort();
    assert_eq!(found, listed);
}

/// Writes the fixtures of today's formats that are missing into `tests/fixtures/format-<N>/`
/// (one that exists is kept) and prints their sizes.
#[test]
#[ignore = "regenerates the committed fixtures: run by hand after a deliberate format change"]
fn regenerate_fixtures() {
    let sst = shale_lsm::sst::format::SST_FORMAT_VERSION;
    let out = format_fixtures::dir(env!("CARGO_MANIFEST_DIR"), FORMAT);
    for (name, tiered, ending) in [
        (format!("lsm-sst{sst}"), false, Ending::Dropped),
        (format!("lsm-tiered-sst{sst}"), true, Ending::Closed),
    ] {
        let archive = out.join(format!("{name}.tar.zst"));
        if archive.exists() {
            println!("{}: exists, kept (a fixture is never rewritten)", archive.display());
            continue;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("store");
        std::fs::create_dir(&dir).unwrap();
        let opts = fixture_options(&dir, tiered);
        let db = Db::open(store_path(&dir, tiered), opts).unwrap();
        for step in recipe() {
            apply_to_db(&db, &step);
        }
        verify(&db, &recipe_model(), KEYS, &name);
        let s = db.stats();
        println!("{name}: files per level {:?}, tiers {:?}", s.files_per_level, s.tiers);
        match ending {
            // The WAL keeps generations 4 and 5 (the drop syncs its last page).
            Ending::Dropped => drop(db),
            Ending::Closed => db.close().unwrap(),
        }
        let bytes = format_fixtures::pack(&dir, &archive);
        println!("{}: {bytes} bytes", archive.display());
    }
}
