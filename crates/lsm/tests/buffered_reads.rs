//! Reads through the page cache (`Options::use_direct_reads = false`) keep P3 and P4.
//!
//! The buffered path reads SSTs with `pread` on a second descriptor of the volume file, while
//! SSTs are written with O_DIRECT into slots that compactions free and new SSTs reuse. What
//! can go wrong there, and the test of each:
//! - a page cached from an SST whose slots were reused is read in place of the new SST: it
//!   passes every checksum, so only an oracle notices the wrong data
//!   (`reused_slots_read_the_new_sst_not_cached_pages_of_the_old`);
//! - a damaged byte reaches a reader through the page cache unchecked
//!   (`a_flipped_sst_byte_read_through_the_page_cache_is_corruption`);
//! - random work with reopens disagrees with a model (`random_ops_on_a_file_match_a_model`);
//! - a reopen, read-write or read-only, by either path, reads other data
//!   (`reopened_stores_read_the_same_by_either_path`).
//!
//! Each test checks that its reads really took the buffered path (the per-path byte counters).

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::path::Path;

use common::small_options;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shale_lsm::{Db, Error, Options, ReadOptions, WriteBatch, WriteOptions};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Small sizes that make every round flush and compact, and a block cache too small to hold
/// anything, so every block read goes to the page cache. SSTs are written with O_DIRECT, the
/// pair whose coherence rests on dropping cached pages (`tests/buffered_writes.rs` has the
/// buffered writes).
fn buffered_options() -> Options {
    let mut o = small_options();
    o.use_direct_reads = false;
    o.use_direct_io_for_flush_and_compaction = true;
    o.block_cache_bytes = 0;
    o.prepopulate_block_cache = false;
    o
}

fn key(n: u32) -> Vec<u8> {
    format!("key{n:05}").into_bytes()
}

/// A value naming its key and the write that made it, so a stale one is told apart.
fn value(n: u32, write: u64) -> Vec<u8> {
    let mut v = format!("{n}@{write}#").into_bytes();
    v.resize(100 + (n as usize * 7 + write as usize) % 300, b'a' + (write % 26) as u8);
    v
}

/// Every key of `model` by get, and the whole store by a forward scan, against `model`.
fn check_against(db: &Db, model: &Model, ctx: &str) {
    for (k, v) in model {
        let got = db.get(k).unwrap_or_else(|e| panic!("{ctx}: get {k:?}: {e}"));
        assert!(got.as_ref() == Some(v), "{ctx}: key {:?} read wrong", String::from_utf8_lossy(k));
    }
    let mut it = db.iter(&ReadOptions::default());
    it.seek_to_first();
    let mut want = model.iter();
    while it.valid() {
        let (k, v) = want.next().unwrap_or_else(|| panic!("{ctx}: scan has extra keys"));
        assert!(it.key() == &k[..] && it.value() == &v[..], "{ctx}: scan differs at {k:?}");
        it.next();
    }
    it.status().unwrap_or_else(|e| panic!("{ctx}: scan: {e}"));
    assert!(want.next().is_none(), "{ctx}: scan misses keys");
}

fn assert_read_buffered(db: &Db, ctx: &str) {
    let s = db.stats();
    assert!(s.sst_bytes_read_buffered > 0, "{ctx}: nothing read through the page cache");
    assert_eq!(s.sst_bytes_read_direct, 0, "{ctx}: SSTs read with O_DIRECT");
}

#[test]
fn reused_slots_read_the_new_sst_not_cached_pages_of_the_old() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), buffered_options()).unwrap();
    let mut rng = SmallRng::seed_from_u64(14);
    let mut model = Model::new();
    let mut write = 0u64;
    for round in 0..40 {
        // Overwrite a third of a small key space each round: the old SSTs' blocks hold the
        // same keys at the same places, with other values, under valid checksums.
        for _ in 0..300 {
            let n = rng.gen_range(0..900);
            write += 1;
            if rng.gen_bool(0.1) {
                db.delete(&key(n)).unwrap();
                model.remove(&key(n));
            } else {
                db.put(&key(n), &value(n, write)).unwrap();
                model.insert(key(n), value(n, write));
            }
        }
        db.flush().unwrap();
        // Every page of the live SSTs is in the page cache before the compaction frees them.
        check_against(&db, &model, &format!("round {round}, before compaction"));
        db.compact_range().unwrap();
        check_against(&db, &model, &format!("round {round}, after compaction"));
    }
    assert_read_buffered(&db, "after the rounds");
    // The rounds wrote many times the slot area: slots were reused, many times over.
    let s = db.stats();
    let slot_area = u64::from(db.volume().slot_usage().total) * db.volume().layout().slot_bytes;
    assert!(
        s.sst_bytes_written > 2 * slot_area,
        "slots not reused enough: {} SST bytes written into a slot area of {slot_area}",
        s.sst_bytes_written
    );
    db.check().unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), buffered_options()).unwrap();
    check_against(&db, &model, "reopened");
}

/// The live SSTs' byte ranges in the volume file of a closed store at `dir`.
fn sst_ranges(dir: &Path) -> Vec<std::ops::Range<u64>> {
    let db = Db::open_read_only(dir, buffered_options()).unwrap();
    let v = db.volume();
    v.live_extents().into_iter().map(|e| v.extent_range(e)).collect()
}

#[test]
fn a_flipped_sst_byte_read_through_the_page_cache_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model::new();
    {
        let db = Db::open(dir.path(), buffered_options()).unwrap();
        for n in 0..600 {
            db.put(&key(n), &value(n, 1)).unwrap();
            model.insert(key(n), value(n, 1));
        }
        db.compact_range().unwrap();
        db.close().unwrap();
    }
    let ranges = sst_ranges(dir.path());
    assert!(!ranges.is_empty());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.path().join(shale_space::VOLUME_FILE_NAME))
        .unwrap();
    let mut rng = SmallRng::seed_from_u64(4);
    for flip in 0..40 {
        let r = &ranges[flip % ranges.len()];
        let mut bytes = vec![0u8; (r.end - r.start) as usize];
        file.read_exact_at(&mut bytes, r.start).unwrap();
        // A byte of the SST itself, not its zero padding (which no checksum covers and no
        // read uses): the first, the last (the footer's end), or one at random.
        let data: Vec<usize> = (0..bytes.len()).filter(|&i| bytes[i] != 0).collect();
        let at = match flip % 4 {
            0 => data[0],
            1 => *data.last().unwrap(),
            _ => data[rng.gen_range(0..data.len())],
        };
        let offset = r.start + at as u64;
        // Written through the page cache, where the buffered reader finds it at once.
        file.write_all_at(&[bytes[at] ^ (1 << rng.gen_range(0..8))], offset).unwrap();
        let ctx = format!("flip at {offset} (SST {r:?})");
        match read_all(dir.path(), &model, &ctx) {
            Ok(()) => panic!("{ctx}: the damage went unnoticed"),
            Err(e) => {
                assert!(matches!(e, Error::Corruption { .. }), "{ctx}: not Corruption: {e:?}")
            }
        }
        file.write_all_at(&bytes[at..=at], offset).unwrap();
    }
    read_all(dir.path(), &model, "restored").unwrap();
}

/// Opens the store with buffered reads and reads every key, a scan and the check. Wrong data
/// panics; the first error is returned.
fn read_all(dir: &Path, model: &Model, ctx: &str) -> shale_lsm::Result<()> {
    let db = Db::open_read_only(dir, buffered_options())?;
    let mut first: Option<Error> = None;
    // Every key through multi_get first, on a cold cache: its batches read the page cache
    // through io_uring.
    let keys: Vec<&[u8]> = model.keys().map(Vec::as_slice).collect();
    for chunk in keys.chunks(24) {
        match db.multi_get(chunk, &ReadOptions::default()) {
            Ok(got) => {
                for (k, v) in chunk.iter().zip(got) {
                    assert!(v.as_ref() == model.get(*k), "{ctx}: multi_get: wrong data for {k:?}");
                }
            }
            Err(e) => {
                first.get_or_insert(e);
            }
        }
    }
    for (k, v) in model {
        match db.get(k) {
            Ok(got) => assert!(got.as_ref() == Some(v), "{ctx}: wrong data for {k:?}"),
            Err(e) => {
                first.get_or_insert(e);
            }
        }
    }
    let mut it = db.iter(&ReadOptions::default());
    it.seek_to_first();
    let mut want = model.iter();
    while it.valid() {
        let (k, v) = want.next().unwrap_or_else(|| panic!("{ctx}: scan has extra keys"));
        assert!(it.key() == &k[..] && it.value() == &v[..], "{ctx}: scan wrong at {k:?}");
        it.next();
    }
    if let Err(e) = it.status() {
        first.get_or_insert(e);
    } else if first.is_none() {
        assert!(want.next().is_none(), "{ctx}: scan stopped early without an error");
    }
    if let Err(e) = db.check() {
        first.get_or_insert(e);
    }
    assert_read_buffered(&db, ctx);
    first.map_or(Ok(()), Err)
}

#[test]
fn random_ops_on_a_file_match_a_model() {
    for seed in 0..3u64 {
        run_model(seed);
    }
}

/// Random puts, deletes, batches, gets, scans, flushes, compactions and reopens against a
/// BTreeMap. A failure names the seed and the step.
fn run_model(seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut db = Db::open(dir.path(), buffered_options()).unwrap();
    let mut model = Model::new();
    for step in 0..4000u64 {
        let ctx = format!("seed {seed}, step {step}");
        let n = rng.gen_range(0..500);
        match rng.gen_range(0..1000) {
            0..=499 => {
                db.put(&key(n), &value(n, step)).unwrap();
                model.insert(key(n), value(n, step));
            }
            500..=599 => {
                db.delete(&key(n)).unwrap();
                model.remove(&key(n));
            }
            600..=649 => {
                let mut b = WriteBatch::new();
                for i in 0..rng.gen_range(1..20) {
                    let m = (n + i * 13) % 500;
                    b.put(&key(m), &value(m, step));
                    model.insert(key(m), value(m, step));
                }
                db.write(&b, &WriteOptions::default()).unwrap();
            }
            650..=899 => {
                let got = db.get(&key(n)).unwrap_or_else(|e| panic!("{ctx}: get: {e}"));
                assert!(got == model.get(&key(n)).cloned(), "{ctx}: get {n} wrong");
            }
            900..=949 => {
                // A bounded scan from a random key.
                let mut it = db.iter(&ReadOptions::default());
                it.seek(&key(n));
                let mut want = model.range(key(n)..);
                for _ in 0..50 {
                    let w = want.next();
                    assert_eq!(it.valid(), w.is_some(), "{ctx}: scan length");
                    let Some((k, v)) = w else { break };
                    assert!(it.key() == &k[..] && it.value() == &v[..], "{ctx}: scan at {k:?}");
                    it.next();
                }
                it.status().unwrap_or_else(|e| panic!("{ctx}: scan: {e}"));
            }
            950..=979 => db.flush().unwrap(),
            980..=994 => db.compact_range().unwrap(),
            _ => {
                db.close().unwrap();
                db = Db::open(dir.path(), buffered_options()).unwrap();
            }
        }
    }
    check_against(&db, &model, &format!("seed {seed}, end"));
    db.close().unwrap();
    let db = Db::open(dir.path(), buffered_options()).unwrap();
    check_against(&db, &model, &format!("seed {seed}, reopened"));
    assert_read_buffered(&db, &format!("seed {seed}"));
}

#[test]
fn reopened_stores_read_the_same_by_either_path() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model::new();
    {
        let db = Db::open(dir.path(), buffered_options()).unwrap();
        for n in 0..2000 {
            db.put(&key(n), &value(n, 1)).unwrap();
            model.insert(key(n), value(n, 1));
        }
        db.compact_range().unwrap();
        for n in (0..2000).step_by(3) {
            db.put(&key(n), &value(n, 2)).unwrap();
            model.insert(key(n), value(n, 2));
        }
        db.flush().unwrap();
        db.close().unwrap();
    }
    let db = Db::open(dir.path(), buffered_options()).unwrap();
    check_against(&db, &model, "reopened, buffered");
    assert_read_buffered(&db, "reopened, buffered");
    db.close().unwrap();

    let direct = Options { use_direct_reads: true, ..buffered_options() };
    let db = Db::open(dir.path(), direct.clone()).unwrap();
    check_against(&db, &model, "reopened, direct");
    let s = db.stats();
    assert!(s.sst_bytes_read_direct > 0 && s.sst_bytes_read_buffered == 0, "{s:?}");
    db.close().unwrap();

    // Read-only, by the volume file's path, both ways.
    let file = dir.path().join(shale_space::VOLUME_FILE_NAME);
    let db = Db::open_read_only(&file, buffered_options()).unwrap();
    check_against(&db, &model, "read-only, buffered");
    assert_read_buffered(&db, "read-only, buffered");
    drop(db);
    let db = Db::open_read_only(&file, direct).unwrap();
    check_against(&db, &model, "read-only, direct");
    assert_eq!(db.stats().sst_bytes_read_buffered, 0);
}

#[test]
fn a_store_on_a_device_reads_directly_whatever_the_option_says() {
    let dev = shale_io::SimDevice::new(common::DEVICE_BYTES, 4096, 1).unwrap();
    let db = Db::open_device(std::sync::Arc::new(dev), buffered_options()).unwrap();
    for n in 0..500 {
        db.put(&key(n), &value(n, 1)).unwrap();
    }
    db.compact_range().unwrap();
    assert_eq!(db.get(&key(7)).unwrap(), Some(value(7, 1)));
    let s = db.stats();
    assert!(s.sst_bytes_read_direct > 0 && s.sst_bytes_read_buffered == 0, "{s:?}");
}
