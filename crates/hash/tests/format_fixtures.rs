//! Format fixtures (docs/testing.md, "Format fixtures"): small hash stores written by an
//! earlier build and committed under `tests/fixtures/format-<volume format>/`, one per index
//! mode and index-page format ([`FIXTURES`]), each with segments collected by garbage collection and an index checkpoint (in
//! memory mode with log past it; a bounded store checkpoints at close). Each is checked end to end (`check_store`: every page's checksum, every record,
//! the checkpoint, the index rebuilt and compared), opened by today's code, read back key by
//! key and by iterator against the recipe that wrote it, written to, closed, checked and read
//! back again. A change that can no longer read a store an earlier build wrote fails here.
//!
//! The contents come from a fixed recipe ([`recipe`]): the generator applies it to a store,
//! the tests to a `BTreeMap`. A recipe is part of the fixtures written with it and never
//! changes; a new one gets a new name.
//!
//! Regenerate (only for a new format: a committed fixture is never replaced; the generator
//! keeps one that exists):
//! `cargo test -p shale-hash --test format_fixtures -- --ignored --nocapture`

use std::collections::BTreeMap;

use shale_hash::{HashOptions, HashStore, IndexMode, IterKind, SEGMENT_BYTES_MIN, StoreMode};
use shale_testkit::format_fixtures;

/// Volume format (the space layer's header version) the generator writes.
const FORMAT: u32 = shale_space::header::FORMAT_VERSION;

/// The fixtures the tests read: (volume format, archive name, index mode, index pages). The
/// names carry the engine's own format: `hash01` for its version-log payloads (`SHHASH01`),
/// checkpoints (`SHCKPT01`) and, in bounded mode, its own index pages (`SHIXPG01`); `hash02`
/// for the same payloads and checkpoints with the space layer's one index-page format
/// (`SHIP` version 1, `shale_space::index_page`). A memory-mode store writes no index page,
/// so `hash01-memory` is today's format still. Every archive under `tests/fixtures` must be
/// listed here (`every_fixture_is_read`).
const FIXTURES: &[(u32, &str, IndexMode, Pages)] = &[
    (3, "hash01-memory.tar.zst", IndexMode::InMemory, Pages::None),
    (3, "hash01-bounded.tar.zst", BOUNDED, Pages::Legacy),
    (3, "hash02-bounded.tar.zst", BOUNDED, Pages::One),
];

/// The index pages a fixture's volume holds, as it was committed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pages {
    /// None (memory mode).
    None,
    /// The hash engine's own, before the one format (`SHIXPG01`), and no other.
    Legacy,
    /// The space layer's one format (`SHIP`), and no other.
    One,
}

/// Counts the 4 KiB pages of the files in `dir` that begin with the one format's magic and
/// with the legacy format's.
fn index_pages_in(dir: &std::path::Path) -> (usize, usize) {
    let (mut one, mut legacy) = (0, 0);
    for entry in std::fs::read_dir(dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        for page in bytes.chunks_exact(shale_space::index_page::PAGE_BYTES) {
            one += usize::from(&page[..4] == shale_space::index_page::MAGIC);
            legacy += usize::from(&page[..8] == b"SHIXPG01");
        }
    }
    (one, legacy)
}

/// The bounded mode of the fixtures: the smallest page cache.
const BOUNDED: IndexMode = IndexMode::Bounded { cache_bytes: shale_hash::INDEX_CACHE_BYTES_MIN };

/// Keys the recipe writes are `key(0)..key(KEYS)`; the tests' own writes use keys past it.
const KEYS: u32 = 700;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// The value the recipe's write generation `generation` gives key `i`: a header naming both,
/// then 20 to 319 filler bytes drawn from them (splitmix64).
fn value(i: u32, generation: u32) -> Vec<u8> {
    let mut h = (u64::from(generation) << 32 | u64::from(i)).wrapping_add(0x9e37_79b9_7f4a_7c15);
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    let mut v = format!("v{generation}.{i}:").into_bytes();
    let len = 20 + (h % 300) as usize;
    v.extend((0..len).map(|j| b'a' + ((h >> (j % 58)) as u8 % 26)));
    v
}

/// One step of a recipe.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// A store of `key(i)` with `value(i, generation)`.
    Store(u32, u32),
    /// A delete of `key(i)`.
    Delete(u32),
    /// The generator closes the store and opens it again with checkpoints off, so what the
    /// recipe writes after it is log past the last checkpoint for the open to replay.
    ReopenWithoutCheckpoints,
}

/// The recipe of the hash fixtures: every key stored, then overwritten (so the first
/// segments are mostly garbage and collected), a share stored a third time, a share
/// deleted, new keys, and deletes and stores again at the end, past the last checkpoint.
/// Garbage collection runs and checkpoints are taken as the store's worker decides: how many
/// and where is the engine's choice, the contents are the recipe's.
fn recipe() -> Vec<Step> {
    let mut steps: Vec<Step> = (0..600).map(|i| Step::Store(i, 1)).collect();
    steps.extend((0..600).map(|i| Step::Store(i, 2)));
    steps.extend((0..600).filter(|i| i % 2 == 0).map(|i| Step::Store(i, 3)));
    steps.extend((0..600).filter(|i| i % 5 == 0).map(Step::Delete));
    steps.extend((600..650).map(|i| Step::Store(i, 4)));
    steps.push(Step::ReopenWithoutCheckpoints);
    steps.extend((0..650).filter(|i| i % 7 == 3).map(Step::Delete));
    steps.extend((0..650).filter(|i| i % 11 == 4).map(|i| Step::Store(i, 5)));
    steps
}

/// Key number to the generation of its value.
type Model = BTreeMap<u32, u32>;

fn apply_to_model(model: &mut Model, step: Step) {
    match step {
        Step::Store(i, g) => {
            model.insert(i, g);
        }
        Step::Delete(i) => {
            model.remove(&i);
        }
        Step::ReopenWithoutCheckpoints => {}
    }
}

/// Applies a store or a delete (the caller handles [`Step::ReopenWithoutCheckpoints`]).
fn apply_to_store(store: &HashStore, step: Step) {
    match step {
        Step::Store(i, g) => store.store(&key(i), &value(i, g), StoreMode::Overwrite).unwrap(),
        Step::Delete(i) => {
            store.delete(&key(i)).unwrap();
        }
        Step::ReopenWithoutCheckpoints => unreachable!("the generator reopens"),
    }
}

fn recipe_model() -> Model {
    let mut model = Model::new();
    for step in recipe() {
        apply_to_model(&mut model, step);
    }
    model
}

/// The smallest segments and version log; an index checkpoint every 64 KiB of log, with no
/// ratio to wait for, so the recipe writes several; garbage collection as by default.
fn fixture_options(index: IndexMode) -> HashOptions {
    HashOptions {
        segment_bytes: SEGMENT_BYTES_MIN,
        version_log_bytes: shale_space::VERSION_LOG_BYTES_MIN,
        checkpoint_bytes: 64 << 10,
        checkpoint_log_ratio: 0,
        value_cache_bytes: 0,
        index,
        ..HashOptions::default()
    }
}

/// Every key of `0..keys_end` reads as the model says, and an iterator over every key finds
/// exactly the model's keys and values.
fn verify(store: &HashStore, model: &Model, keys_end: u32, what: &str) {
    for i in 0..keys_end {
        let got = store.retrieve(&key(i)).unwrap();
        assert_eq!(got, model.get(&i).map(|&g| value(i, g)), "{what}: key {i}");
    }
    assert_eq!(store.stats().keys, model.len() as u64, "{what}: live keys");
    let mut it = store.open_iterator([0; 4], [0; 4], IterKind::KeysAndValues).unwrap();
    let mut found = Vec::new();
    loop {
        let batch = it.next_batch(256).unwrap();
        if batch.is_empty() {
            break;
        }
        found.extend(batch.into_iter().map(|(k, v)| (k, v.expect("a value"))));
    }
    drop(it);
    found.sort();
    let expected: Vec<_> = model.iter().map(|(&i, &g)| (key(i), value(i, g))).collect();
    assert_eq!(found.len(), expected.len(), "{what}: keys iterated");
    assert!(found == expected, "{what}: the iterator differs from the model");
}

/// The tests' own writes after the fixture's: new keys, overwrites and deletes.
fn more_steps() -> Vec<Step> {
    let mut steps: Vec<Step> = (650..KEYS).map(|i| Step::Store(i, 6)).collect();
    steps.extend((0..650).filter(|i| i % 13 == 6).map(|i| Step::Store(i, 6)));
    steps.extend((0..KEYS).filter(|i| i % 17 == 8).map(Step::Delete));
    steps
}

/// Unpacks a fixture, checks it, opens it and reads it against its recipe, writes to it,
/// closes it, checks it again and reads it back.
fn read_fixture(name: &str) {
    let &(format, _, index, pages) =
        FIXTURES.iter().find(|f| f.1 == name).expect("a fixture listed in FIXTURES");
    let archive = format_fixtures::dir(env!("CARGO_MANIFEST_DIR"), format).join(name);
    let tmp = tempfile::tempdir().unwrap();
    format_fixtures::unpack(&archive, tmp.path());
    let dir = tmp.path();
    let mut model = recipe_model();

    // The fixture holds the index pages it stands for, so its test reads that format.
    let (one, legacy) = index_pages_in(dir);
    let expected = match pages {
        Pages::None => one == 0 && legacy == 0,
        Pages::Legacy => one == 0 && legacy > 0,
        Pages::One => one > 0 && legacy == 0,
    };
    assert!(expected, "{name}: {one} index pages of the one format, {legacy} legacy ones");

    let report = shale_hash::check_store(dir).unwrap();
    assert_eq!(report.keys, model.len() as u64, "{name}: {report:?}");
    assert!(report.checkpoint.is_some(), "{name}: no index checkpoint");
    assert_eq!(report.bounded, index != IndexMode::InMemory, "{name}");
    // Garbage collection freed the first segments: the oldest left is not generation 1.
    assert!(report.segments[0].generation > 1, "{name}: {:?}", report.segments);

    let store = HashStore::open(dir, fixture_options(index)).unwrap();
    // The open loaded the checkpoint and, in memory mode, replayed the log written after it
    // (a bounded store writes a checkpoint at close, so there it covers the whole log).
    let s = store.stats();
    assert!(s.checkpoint_entries_loaded > 0, "{name}: {s:?}");
    assert!(index != IndexMode::InMemory || s.recovered_records > 0, "{name}: {s:?}");
    verify(&store, &model, KEYS, name);
    for step in more_steps() {
        apply_to_store(&store, step);
        apply_to_model(&mut model, step);
    }
    verify(&store, &model, KEYS, name);
    store.close();
    // A bounded store's open copied its snapshot into pages of the one format, and its
    // close wrote a snapshot in it: whatever format the fixture had, this one is today's.
    assert!(pages == Pages::None || index_pages_in(dir).0 > 0, "{name}: no page of the one format");

    let report = shale_hash::check_store(dir).unwrap();
    assert_eq!(report.keys, model.len() as u64, "{name}: {report:?}");
    let store = HashStore::open(dir, fixture_options(index)).unwrap();
    verify(&store, &model, KEYS, name);
    store.close();
}

#[test]
fn hash_memory_index_volume_format_3_reads_back() {
    read_fixture("hash01-memory.tar.zst");
}

/// Its index snapshot holds pages of the hash engine's own format before the one format
/// (`SHIXPG01`): the open copies them into pages of the one format.
#[test]
fn hash_bounded_index_volume_format_3_reads_back() {
    read_fixture("hash01-bounded.tar.zst");
}

#[test]
fn hash_bounded_index_in_the_one_index_page_format_volume_format_3_reads_back() {
    read_fixture("hash02-bounded.tar.zst");
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
    let out = format_fixtures::dir(env!("CARGO_MANIFEST_DIR"), FORMAT);
    for (name, index) in [("hash01-memory", IndexMode::InMemory), ("hash02-bounded", BOUNDED)] {
        let archive = out.join(format!("{name}.tar.zst"));
        if archive.exists() {
            println!("{}: exists, kept (a fixture is never rewritten)", archive.display());
            continue;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("store");
        std::fs::create_dir(&dir).unwrap();
        let mut store = HashStore::open(&dir, fixture_options(index)).unwrap();
        for step in recipe() {
            if let Step::ReopenWithoutCheckpoints = step {
                store.close();
                let opts = HashOptions { checkpoint_bytes: 0, ..fixture_options(index) };
                store = HashStore::open(&dir, opts).unwrap();
            } else {
                apply_to_store(&store, step);
            }
        }
        verify(&store, &recipe_model(), KEYS, name);
        store.close();
        let report = shale_hash::check_store(&dir).unwrap();
        println!("{name}: {report:?}");
        assert!(report.checkpoint.is_some() && report.segments[0].generation > 1, "{name}");
        let bytes = format_fixtures::pack(&dir, &archive);
        println!("{}: {bytes} bytes", archive.display());
    }
}
