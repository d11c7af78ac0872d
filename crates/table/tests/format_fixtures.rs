//! Format fixtures (docs/testing.md, "Format fixtures"): small table stores written by an
//! earlier build and committed under `tests/fixtures/format-<volume format>/`, each with two
//! tables (a third made and dropped), rows inserted, updated in place and moved, erased,
//! committed and rolled back, and the undo log on the volume: one store left closed, one as a
//! crash leaves it with a transaction in flight (its before-images in the volume's undo ring,
//! for the open to roll back). Each is checked (`check_store`: the catalog, the undo ring,
//! every block's checksum, every row under its schema, the primary index), opened by today's
//! code, read back row by row and by scans against the recipe that wrote it, written to,
//! dropped, checked and read back again. A change that can no longer read a store an earlier
//! build wrote fails here.
//!
//! The contents come from a fixed recipe ([`recipe`]): the generator applies it to a store,
//! the tests to a `BTreeMap`. A recipe is part of the fixtures written with it and never
//! changes; a new one gets a new name.
//!
//! Regenerate (only for a new format: a committed fixture is never replaced; the generator
//! keeps one that exists):
//! `cargo test -p shale-table --test format_fixtures -- --ignored --nocapture`

use std::collections::BTreeMap;
use std::path::Path;

use shale_table::{
    Column, Error, Isolation, Schema, TableOptions, TableStore, Transaction, UndoLogPlace,
};
use shale_testkit::format_fixtures;

/// Volume format (the space layer's header version) the generator writes.
const FORMAT: u32 = shale_space::header::FORMAT_VERSION;

/// How a fixture's store was left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ending {
    /// Dropped (the table engine's close): no transaction open.
    Closed,
    /// The files copied while a transaction was open, as a crash leaves them.
    InFlight,
}

/// The fixtures the tests read: (volume format, archive name, how it was left). The names
/// carry the engine's own format: `table01` for its catalog payloads (`SHTABL01`) and block
/// format 1 (`SHTB`) with the undo log's spill area in the ring format of persistent memory
/// (`SHPM`; an open reads it, then rewrites it in the page log format); `table02` for the
/// same with the spill area in the page log format (`volume_undo.rs`, catalog kinds 10-12). Index pages (the space layer's one index-page format since it
/// replaced the engine's `SHIX` page) are in no fixture: an index area is never named by
/// the version log and every open rebuilds it from the rows, so no build reads index pages
/// another build wrote, and the move to the one format left these fixtures today's format.
/// Every archive under `tests/fixtures` must be listed here (`every_fixture_is_read`).
const FIXTURES: &[(u32, &str, Ending)] = &[
    (3, "table01-closed.tar.zst", Ending::Closed),
    (3, "table01-in-flight.tar.zst", Ending::InFlight),
    (3, "table02-closed.tar.zst", Ending::Closed),
    (3, "table02-in-flight.tar.zst", Ending::InFlight),
];

const USERS: &str = "users";
const ITEMS: &str = "items";
/// Made and dropped by the recipe: table ids are never used again.
const SCRATCH: &str = "scratch";

/// Rows `0..ROWS` of each table are the ones the recipe and the tests' writes touch.
const ROWS: u32 = 400;

/// `users`: a fixed key, a short variable column (updates that grow it move the row), a
/// fixed column (updated in place).
fn users_schema() -> Schema {
    Schema::new(vec![Column::fixed("id", 8), Column::var("name", 200), Column::fixed("n", 8)])
        .unwrap()
}

/// `items`: a variable key, a fixed column and a long variable one (rows span blocks).
fn items_schema() -> Schema {
    Schema::new(vec![Column::var("sku", 24), Column::fixed("price", 4), Column::var("descr", 6000)])
        .unwrap()
}

fn schema_of(table: &str) -> Schema {
    if table == USERS { users_schema() } else { items_schema() }
}

/// splitmix64 of a cell's coordinates.
fn mix(table: &str, column: usize, i: u32, generation: u32) -> u64 {
    let t = if table == USERS { 1u64 } else { 2 };
    let mut h = (t << 60 | (column as u64) << 48 | u64::from(generation) << 32 | u64::from(i))
        .wrapping_add(0x9e37_79b9_7f4a_7c15);
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

fn filler(h: u64, len: usize) -> Vec<u8> {
    (0..len).map(|j| b'a' + ((h >> (j % 58)) as u8 % 26)).collect()
}

/// The value of column `column` of row `i` of `table` written by generation `generation` (the
/// key, column 0, does not depend on it).
fn cell(table: &str, column: usize, i: u32, generation: u32) -> Vec<u8> {
    let h = mix(table, column, i, generation);
    match (table, column) {
        (USERS, 0) => format!("u{i:07}").into_bytes(),
        (USERS, 1) => filler(h, 5 + (h % 150) as usize),
        (USERS, _) => h.to_le_bytes().to_vec(),
        (_, 0) => format!("sku-{i}").into_bytes(),
        (_, 1) => (h as u32).to_le_bytes().to_vec(),
        (_, _) => filler(h, 50 + (h % 5000) as usize),
    }
}

fn row(table: &str, i: u32, generation: u32) -> Vec<Vec<u8>> {
    (0..3).map(|c| cell(table, c, i, generation)).collect()
}

fn key(table: &str, i: u32) -> Vec<u8> {
    cell(table, 0, i, 0)
}

/// One step of a recipe. Steps between `Begin` and `Commit`/`Abort` are one transaction;
/// others commit each on their own.
#[derive(Clone, Copy, Debug)]
enum Step {
    Create(&'static str),
    Drop(&'static str),
    Insert(&'static str, u32, u32),
    /// Sets column `.2` of row `.1` to its value of generation `.3`.
    Update(&'static str, u32, usize, u32),
    Erase(&'static str, u32),
    Begin,
    Commit,
    Abort,
}

/// The recipe of the table fixtures. A fixture left [`Ending::InFlight`] has
/// [`in_flight_steps`] after it.
fn recipe() -> Vec<Step> {
    use Step::*;
    let mut s = vec![Create(USERS), Create(SCRATCH)];
    s.extend((0..20).map(|i| Insert(SCRATCH, i, 1)));
    s.push(Create(ITEMS));
    s.push(Drop(SCRATCH));
    s.extend((0..300).map(|i| Insert(USERS, i, 1)));
    s.extend((0..80).map(|i| Insert(ITEMS, i, 1)));
    // In place (a fixed column) and moved (a variable one that may grow).
    s.extend((0..300).filter(|i| i % 4 == 1).map(|i| Update(USERS, i, 2, 2)));
    s.extend((0..300).filter(|i| i % 3 == 0).map(|i| Update(USERS, i, 1, 2)));
    s.extend((0..80).filter(|i| i % 3 == 2).map(|i| Update(ITEMS, i, 2, 2)));
    s.extend((0..80).filter(|i| i % 5 == 0).map(|i| Update(ITEMS, i, 1, 2)));
    s.extend((0..300).filter(|i| i % 7 == 0).map(|i| Erase(USERS, i)));
    s.extend((0..80).filter(|i| i % 9 == 4).map(|i| Erase(ITEMS, i)));
    // A transaction committed, one rolled back, then new rows (some taking erased slots).
    s.push(Begin);
    s.extend([Erase(USERS, 1), Insert(USERS, 300, 3), Update(ITEMS, 1, 2, 3), Erase(ITEMS, 2)]);
    s.push(Commit);
    s.push(Begin);
    s.extend([
        Erase(USERS, 5),
        Insert(USERS, 301, 4),
        Update(ITEMS, 3, 2, 4),
        Update(USERS, 9, 1, 4),
    ]);
    s.push(Abort);
    s.extend((302..330).map(|i| Insert(USERS, i, 5)));
    s.extend((80..90).map(|i| Insert(ITEMS, i, 5)));
    s
}

/// What a fixture left [`Ending::InFlight`] did last: a transaction begun and never ended,
/// then [`IN_FLIGHT_ALONE`] committed on its own beside it.
fn in_flight_steps() -> Vec<Step> {
    use Step::*;
    let mut s = vec![Begin];
    s.extend((0..300).filter(|i| i % 10 == 2 && i % 7 != 0).map(|i| Update(USERS, i, 1, 6)));
    s.extend([Erase(USERS, 4), Insert(USERS, 331, 6), Update(ITEMS, 5, 2, 6), Erase(ITEMS, 6)]);
    s
}

/// The row (number, generation) of `users` a fixture left [`Ending::InFlight`] inserted and
/// committed while its transaction was open: its commit writes the blocks it shares with the
/// open transaction's changes, so the crash image holds some of them for the open to roll
/// back.
const IN_FLIGHT_ALONE: (u32, u32) = (332, 6);

/// The committed rows: (table, key) to row.
type Model = BTreeMap<(&'static str, Vec<u8>), Vec<Vec<u8>>>;

/// The model of a recipe.
fn model_of(steps: &[Step]) -> Model {
    let mut model = Model::new();
    apply_to_model(&mut model, steps);
    model
}

/// Applies steps to a model; a transaction not ended is rolled back, as recovery does.
fn apply_to_model(model: &mut Model, steps: &[Step]) {
    let mut before: Option<Model> = None;
    for &step in steps {
        match step {
            Step::Create(_) => {}
            Step::Drop(t) => model.retain(|(table, _), _| *table != t),
            Step::Insert(t, i, g) => {
                model.insert((t, key(t, i)), row(t, i, g));
            }
            Step::Update(t, i, c, g) => {
                model.get_mut(&(t, key(t, i))).expect("an update of a live row")[c] =
                    cell(t, c, i, g);
            }
            Step::Erase(t, i) => {
                model.remove(&(t, key(t, i))).expect("an erase of a live row");
            }
            Step::Begin => before = Some(model.clone()),
            Step::Commit => before = None,
            Step::Abort => *model = before.take().expect("a transaction"),
        }
    }
    if let Some(before) = before {
        *model = before;
    }
}

/// Applies a recipe to a store; returns the transaction it leaves open, if any.
fn apply_to_store(store: &TableStore, steps: &[Step]) -> Option<Transaction> {
    let mut txn: Option<Transaction> = None;
    for &step in steps {
        let id = |t: &str| store.table_id(t).expect("a table");
        match (step, txn.as_mut()) {
            (Step::Create(t), _) => drop(store.create_table(t, schema_of(t)).unwrap()),
            (Step::Drop(t), _) => store.drop_table(t).unwrap(),
            (Step::Insert(t, i, g), None) => store.insert(id(t), &row(t, i, g)).unwrap(),
            (Step::Insert(t, i, g), Some(x)) => x.insert(id(t), &row(t, i, g)).unwrap(),
            (Step::Update(t, i, c, g), tx) => {
                let column = schema_of(t).columns()[c].name.clone();
                let value = cell(t, c, i, g);
                match tx {
                    None => store.update(id(t), &key(t, i), &column, &value).unwrap(),
                    Some(x) => x.update(id(t), &key(t, i), &column, &value).unwrap(),
                }
            }
            (Step::Erase(t, i), None) => store.erase(id(t), &key(t, i)).unwrap(),
            (Step::Erase(t, i), Some(x)) => x.erase(id(t), &key(t, i)).unwrap(),
            (Step::Begin, _) => txn = Some(store.begin(Isolation::ReadCommitted)),
            (Step::Commit, _) => txn.take().expect("a transaction").commit().unwrap(),
            (Step::Abort, _) => txn.take().expect("a transaction").abort().unwrap(),
        }
    }
    txn
}

/// The smallest segments (16 blocks) and version log, the smallest block cache (so blocks
/// are written and read back), the undo log on the volume in the smallest ring, no background
/// reclaiming (the tests' steps alone decide what is written).
fn fixture_options() -> TableOptions {
    TableOptions {
        segment_bytes: 64 << 10,
        version_log_bytes: shale_space::VERSION_LOG_BYTES_MIN,
        undo_log: UndoLogPlace::Volume,
        undo_spill_bytes: 64 << 10,
        cache_blocks: 16,
        space_reclaim_interval: None,
        ..TableOptions::default()
    }
}

/// Every row of `0..ROWS` of both tables reads as the model says, by key and by full scans,
/// and the dropped table is gone.
fn verify(store: &TableStore, model: &Model, what: &str) {
    assert_eq!(store.table_id(SCRATCH), None, "{what}: the dropped table");
    let mut names: Vec<String> = store.tables().into_iter().map(|(n, _)| n).collect();
    names.sort();
    assert_eq!(names, [ITEMS, USERS], "{what}");
    for t in [USERS, ITEMS] {
        let id = store.table_id(t).unwrap();
        assert_eq!(store.schema(id).unwrap(), schema_of(t), "{what}: {t}'s schema");
        for i in 0..ROWS {
            let got = store.select(id, &key(t, i)).unwrap();
            assert_eq!(got.as_ref(), model.get(&(t, key(t, i))), "{what}: {t} row {i}");
        }
        let mut scan = store.scan(id, ..).unwrap();
        let mut scanned = Vec::new();
        while let Some(batch) = scan.next().unwrap() {
            scanned.extend(batch);
        }
        let expected: Vec<_> =
            model.iter().filter(|((table, _), _)| *table == t).map(|(_, r)| r.clone()).collect();
        assert_eq!(scanned.len(), expected.len(), "{what}: {t}'s rows scanned");
        assert!(scanned == expected, "{what}: the scan of {t} differs from the model");
    }
}

/// `check_store` finds each table's rows as the model says.
fn check(dir: &Path, model: &Model, what: &str) {
    let report = shale_table::check_store(dir).unwrap();
    assert!(report.spill_bytes.is_some() && report.undo_file.is_none(), "{what}: {report:?}");
    for t in [USERS, ITEMS] {
        let rows = model.keys().filter(|(table, _)| *table == t).count() as u64;
        let table = report.tables.iter().find(|r| r.name == t).expect("the table");
        assert_eq!(table.rows, rows, "{what}: {t}: {report:?}");
    }
}

/// The tests' own writes after the fixture's: inserts, updates, erases, a transaction.
fn more_steps() -> Vec<Step> {
    use Step::*;
    let mut s: Vec<Step> = (333..ROWS).map(|i| Insert(USERS, i, 7)).collect();
    s.extend((90..100).map(|i| Insert(ITEMS, i, 7)));
    s.push(Begin);
    s.extend([
        Update(USERS, 3, 1, 7),
        Update(USERS, 3, 2, 7),
        Erase(ITEMS, 7),
        Insert(ITEMS, 100, 7),
    ]);
    s.push(Commit);
    s.extend((0..300).filter(|i| i % 11 == 8 && i % 7 != 0).map(|i| Erase(USERS, i)));
    s
}

/// Unpacks a fixture, checks it (after an open that rolls back a transaction in flight),
/// reads it against its recipe, writes to it, drops it, checks it and reads it back.
fn read_fixture(name: &str) {
    let &(format, _, ending) =
        FIXTURES.iter().find(|f| f.1 == name).expect("a fixture listed in FIXTURES");
    let archive = format_fixtures::dir(env!("CARGO_MANIFEST_DIR"), format).join(name);
    let tmp = tempfile::tempdir().unwrap();
    format_fixtures::unpack(&archive, tmp.path());
    let dir = tmp.path();
    let mut steps = recipe();
    let mut model = model_of(&steps);
    if ending == Ending::InFlight {
        steps.extend(in_flight_steps());
        model = model_of(&steps);
        let (i, g) = IN_FLIGHT_ALONE;
        model.insert((USERS, key(USERS, i)), row(USERS, i, g));
        // The check reads the undo ring and finds the transaction, and sends it to an open.
        match shale_table::check_store(dir) {
            Err(Error::InvalidArgument(why)) if why.contains("in flight") => {}
            r => panic!("{name}: {r:?}"),
        }
        drop(TableStore::open(dir, fixture_options()).unwrap());
    }
    check(dir, &model, name);

    let store = TableStore::open(dir, fixture_options()).unwrap();
    verify(&store, &model, name);
    // The spill area is in the page log format once opened (a `table01` fixture's ring of
    // the older format is rewritten by the open): no `SHPM` header at its start.
    let spill = store.spill_address().expect("the fixtures' undo log is on the volume");
    let volume = std::fs::read(shale_space::volume_file(dir)).unwrap();
    assert_ne!(&volume[spill.start as usize..][..4], b"SHPM", "{name}");
    apply_to_model(&mut model, &more_steps());
    assert!(apply_to_store(&store, &more_steps()).is_none());
    verify(&store, &model, name);
    drop(store);

    check(dir, &model, name);
    let store = TableStore::open(dir, fixture_options()).unwrap();
    verify(&store, &model, name);
}

#[test]
fn table_closed_volume_format_3_reads_back() {
    read_fixture("table01-closed.tar.zst");
}

#[test]
fn table_with_a_transaction_in_flight_volume_format_3_rolls_back_and_reads_back() {
    read_fixture("table01-in-flight.tar.zst");
}

#[test]
fn table_with_a_paged_spill_area_closed_volume_format_3_reads_back() {
    read_fixture("table02-closed.tar.zst");
}

#[test]
fn table_with_a_paged_spill_area_and_a_transaction_in_flight_rolls_back_and_reads_back() {
    read_fixture("table02-in-flight.tar.zst");
}

/// A power cut at each device write of the open that rolls back the transaction a
/// `table01` fixture left in flight and rewrites its spill area (the `SHPM` ring zeroed, then
/// named in the page log format): the next open, over the volume as the cut left it, finds
/// the rows of the recipe, and takes a write.
#[test]
fn a_crash_while_an_open_rewrites_an_older_spill_area_recovers() {
    use shale_io::{Damage, SimDevice};
    let archive =
        format_fixtures::dir(env!("CARGO_MANIFEST_DIR"), 3).join("table01-in-flight.tar.zst");
    let tmp = tempfile::tempdir().unwrap();
    format_fixtures::unpack(&archive, tmp.path());
    let image = std::fs::read(shale_space::volume_file(tmp.path())).unwrap();
    let d = SimDevice::from_image(image, 4096, 1).unwrap();
    let pmem = || shale_table::SimPmem::new(shale_table::RING_OFFSET + (64 << 10)).boxed();
    let opts = fixture_options();
    drop(TableStore::open_device(std::sync::Arc::new(d.clone()), pmem(), opts.clone()).unwrap());
    let mut steps = recipe();
    steps.extend(in_flight_steps());
    let mut model = model_of(&steps);
    let (i, g) = IN_FLIGHT_ALONE;
    model.insert((USERS, key(USERS, i)), row(USERS, i, g));
    assert!(d.writes() > 5, "{} writes", d.writes());
    eprintln!("{} device writes of the open, each cut twice", d.writes());
    for k in 0..=d.writes() {
        for damage in [Damage::Lose, Damage::Keep] {
            let cd = SimDevice::from_image(d.crash_image(k, damage), 4096, k).unwrap();
            let store = TableStore::open_device(std::sync::Arc::new(cd), pmem(), opts.clone())
                .unwrap_or_else(|e| panic!("cut after write {k}, {damage:?}: {e}"));
            verify(&store, &model, &format!("cut after write {k}, {damage:?}"));
            store.insert(store.table_id(USERS).unwrap(), &row(USERS, 399, 9)).unwrap();
        }
    }
}

/// An archive nobody reads protects nothing: every one must be in [`FIXTURES`], and every
/// entry there must have its archive.
#[test]
fn every_fixture_is_read() {
    let found = format_fixtures::all_archives(env!("CARGO_MANIFEST_DIR"));
    let mut listed: Vec<_> = FIXTURES.iter().map(|&(f, n, _)| (f, n.to_string())).collect();
    listed.sort();
    assert_eq!(found, listed);
}

/// Writes the fixtures of today's formats that are missing into `tests/fixtures/format-<N>/`
/// (one that exists is kept) and prints their sizes.
#[test]
#[ignore = "regenerates the committed fixtures: run by hand after a deliberate format change"]
fn regenerate_fixtures() {
    let out = format_fixtures::dir(env!("CARGO_MANIFEST_DIR"), FORMAT);
    for (name, ending) in
        [("table02-closed", Ending::Closed), ("table02-in-flight", Ending::InFlight)]
    {
        let archive = out.join(format!("{name}.tar.zst"));
        if archive.exists() {
            println!("{}: exists, kept (a fixture is never rewritten)", archive.display());
            continue;
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("store");
        let store = TableStore::open(&dir, fixture_options()).unwrap();
        let steps = recipe();
        assert!(apply_to_store(&store, &steps).is_none());
        verify(&store, &model_of(&steps), name);
        match ending {
            Ending::Closed => {
                drop(store);
                check(&dir, &model_of(&steps), name);
                let bytes = format_fixtures::pack(&dir, &archive);
                println!("{}: {bytes} bytes", archive.display());
            }
            Ending::InFlight => {
                let txn = apply_to_store(&store, &in_flight_steps()).expect("a transaction");
                let (i, g) = IN_FLIGHT_ALONE;
                store.insert(store.table_id(USERS).unwrap(), &row(USERS, i, g)).unwrap();
                // The files as a crash leaves them: every write above has returned, and no
                // thread of the store writes on its own (no reclaiming thread).
                let bytes = format_fixtures::pack(&dir, &archive);
                println!("{}: {bytes} bytes", archive.display());
                drop(txn);
                drop(store);
            }
        }
    }
}
