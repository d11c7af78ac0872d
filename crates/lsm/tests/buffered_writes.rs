//! Flush and compaction outputs written through the page cache
//! (`Options::use_direct_io_for_flush_and_compaction = false`, the default) keep P1-P4.
//!
//! SSTs are then `pwrite`n on a buffered read-write descriptor of the volume file and
//! `fdatasync`ed before their version edit is committed, into slots that compactions free and
//! new SSTs reuse. What can go wrong there, and the test of each:
//! - random work with flushes, compactions and reopens disagrees with a model, by either read
//!   path (`random_ops_with_buffered_writes_match_a_model_by_either_read_path`);
//! - reused slots serve bytes of the SST they held before, which pass every checksum
//!   (`reused_slots_written_buffered_never_read_stale_bytes`), also when a store switches
//!   between buffered and O_DIRECT writes across reopens
//!   (`switching_write_paths_across_reopens_reads_the_same`);
//! - a damaged byte of an SST written buffered is read unchecked
//!   (`a_flipped_byte_of_an_sst_written_buffered_is_corruption`);
//! - a SIGKILL while compactions write buffered loses an acknowledged write or leaves a
//!   committed SST unsynced (`sigkill_mid_compaction_with_buffered_writes_loses_no_acked_write`);
//! - the option does something on a store without a file
//!   (`a_store_on_a_device_writes_directly_whatever_the_option_says`);
//! - a store on a block device writes buffered (the kernel writes a block device's pages
//!   back 4 KiB a request, so it must write with O_DIRECT and prefetch), or its prefetched
//!   pages serve stale bytes of reused slots
//!   (`a_store_on_a_loop_device_writes_directly_and_reads_back_by_either_path`, skipped
//!   where no loop device can be set up, a failure where `SHALE_REQUIRE_PREREQS=1`);
//! - the rule that picks the path answers otherwise than the store does
//!   (`the_write_path_rule_answers_for_directories_files_and_block_devices`).
//!
//! Each test checks that its SSTs really took the path it means (the per-path byte counters).

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::small_options;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shale_lsm::{Db, Error, Options, ReadOptions, WriteBatch, WriteOptions};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Small sizes that make work flush and compact often, SSTs written buffered, reads by
/// `direct_reads`, and no block cache, so every block read reaches the page cache or device.
fn options(direct_reads: bool) -> Options {
    let mut o = small_options();
    o.use_direct_io_for_flush_and_compaction = false;
    o.use_direct_reads = direct_reads;
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

/// SSTs were written, all of them through the page cache.
fn assert_written_buffered(db: &Db, ctx: &str) {
    let s = db.stats();
    assert!(s.sst_bytes_written_buffered > 0, "{ctx}: no SST written through the page cache");
    assert_eq!(s.sst_bytes_written_direct, 0, "{ctx}: SSTs written with O_DIRECT");
    assert!(s.sst_bytes_written >= s.sst_bytes_written_buffered, "{ctx}: {s:?}");
}

/// SST reads took the path `direct_reads` names.
fn assert_read_by(db: &Db, direct_reads: bool, ctx: &str) {
    let s = db.stats();
    if direct_reads {
        assert!(s.sst_bytes_read_direct > 0 && s.sst_bytes_read_buffered == 0, "{ctx}: {s:?}");
    } else {
        assert!(s.sst_bytes_read_buffered > 0 && s.sst_bytes_read_direct == 0, "{ctx}: {s:?}");
    }
}

#[test]
fn random_ops_with_buffered_writes_match_a_model_by_either_read_path() {
    for direct_reads in [false, true] {
        for seed in 0..2u64 {
            run_model(seed, direct_reads);
        }
    }
}

/// Random puts, deletes, batches, gets, scans, flushes, compactions and reopens against a
/// BTreeMap. A failure names the seed, the read path and the step.
fn run_model(seed: u64, direct_reads: bool) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SmallRng::seed_from_u64(seed);
    let opts = options(direct_reads);
    let mut db = Db::open(dir.path(), opts.clone()).unwrap();
    let mut model = Model::new();
    let mut written_buffered = 0u64;
    for step in 0..4000u64 {
        let ctx = format!("seed {seed}, direct reads {direct_reads}, step {step}");
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
                let s = db.stats();
                assert_eq!(s.sst_bytes_written_direct, 0, "{ctx}: an O_DIRECT SST write");
                written_buffered += s.sst_bytes_written_buffered;
                db.close().unwrap();
                db = Db::open(dir.path(), opts.clone()).unwrap();
            }
        }
    }
    let ctx = format!("seed {seed}, direct reads {direct_reads}");
    check_against(&db, &model, &format!("{ctx}, end"));
    db.compact_range().unwrap();
    check_against(&db, &model, &format!("{ctx}, compacted"));
    assert_written_buffered(&db, &ctx);
    written_buffered += db.stats().sst_bytes_written_buffered;
    assert!(written_buffered > 0);
    db.check().unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), opts).unwrap();
    check_against(&db, &model, &format!("{ctx}, reopened"));
    assert_read_by(&db, direct_reads, &ctx);
}

/// Overwrites a third of a small key space per round, flushes, reads everything (so the live
/// SSTs' pages are cached), compacts (freeing their slots for the next SSTs) and reads again.
fn overwrite_rounds(db: &Db, model: &mut Model, rng: &mut SmallRng, write: &mut u64, ctx: &str) {
    for round in 0..20 {
        for _ in 0..300 {
            let n = rng.gen_range(0..900);
            *write += 1;
            if rng.gen_bool(0.1) {
                db.delete(&key(n)).unwrap();
                model.remove(&key(n));
            } else {
                db.put(&key(n), &value(n, *write)).unwrap();
                model.insert(key(n), value(n, *write));
            }
        }
        db.flush().unwrap();
        check_against(db, model, &format!("{ctx}, round {round}, before compaction"));
        db.compact_range().unwrap();
        check_against(db, model, &format!("{ctx}, round {round}, after compaction"));
    }
}

#[test]
fn reused_slots_written_buffered_never_read_stale_bytes() {
    for direct_reads in [false, true] {
        let ctx = format!("direct reads {direct_reads}");
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), options(direct_reads)).unwrap();
        let mut rng = SmallRng::seed_from_u64(15);
        let (mut model, mut write) = (Model::new(), 0u64);
        overwrite_rounds(&db, &mut model, &mut rng, &mut write, &ctx);
        overwrite_rounds(&db, &mut model, &mut rng, &mut write, &ctx);
        assert_written_buffered(&db, &ctx);
        assert_read_by(&db, direct_reads, &ctx);
        // The rounds wrote many times the slot area: slots were reused, many times over.
        let s = db.stats();
        let slot_area = u64::from(db.volume().slot_usage().total) * db.volume().layout().slot_bytes;
        assert!(
            s.sst_bytes_written_buffered > 2 * slot_area,
            "{ctx}: slots not reused enough: {} SST bytes written into a slot area of {slot_area}",
            s.sst_bytes_written_buffered
        );
        db.check().unwrap();
        db.close().unwrap();
        let db = Db::open(dir.path(), options(direct_reads)).unwrap();
        check_against(&db, &model, &format!("{ctx}, reopened"));
    }
}

#[test]
fn switching_write_paths_across_reopens_reads_the_same() {
    // Pages cached by buffered writes, then slots rewritten with O_DIRECT (read through the
    // page cache), then buffered writes over slots whose pages an O_DIRECT write dropped.
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SmallRng::seed_from_u64(16);
    let (mut model, mut write) = (Model::new(), 0u64);
    for (i, direct_writes) in [false, true, false, true, false].into_iter().enumerate() {
        let ctx = format!("reopen {i}, direct writes {direct_writes}");
        let o = Options { use_direct_io_for_flush_and_compaction: direct_writes, ..options(false) };
        let db = Db::open(dir.path(), o).unwrap();
        check_against(&db, &model, &format!("{ctx}, opened"));
        overwrite_rounds(&db, &mut model, &mut rng, &mut write, &ctx);
        let s = db.stats();
        if direct_writes {
            assert!(s.sst_bytes_written_direct > 0 && s.sst_bytes_written_buffered == 0, "{s:?}");
        } else {
            assert_written_buffered(&db, &ctx);
        }
        db.check().unwrap();
        db.close().unwrap();
    }
}

/// The live SSTs' byte ranges in the volume file of a closed store at `dir`.
fn sst_ranges(dir: &Path) -> Vec<std::ops::Range<u64>> {
    let db = Db::open_read_only(dir, options(false)).unwrap();
    let v = db.volume();
    v.live_extents().into_iter().map(|e| v.extent_range(e)).collect()
}

#[test]
fn a_flipped_byte_of_an_sst_written_buffered_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model::new();
    {
        let db = Db::open(dir.path(), options(false)).unwrap();
        for n in 0..600 {
            db.put(&key(n), &value(n, 1)).unwrap();
            model.insert(key(n), value(n, 1));
        }
        db.compact_range().unwrap();
        assert_written_buffered(&db, "written");
        db.close().unwrap();
    }
    let ranges = sst_ranges(dir.path());
    assert!(!ranges.is_empty());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.path().join(shale_space::VOLUME_FILE_NAME))
        .unwrap();
    let mut rng = SmallRng::seed_from_u64(5);
    for flip in 0..24 {
        let r = &ranges[flip % ranges.len()];
        let mut bytes = vec![0u8; (r.end - r.start) as usize];
        file.read_exact_at(&mut bytes, r.start).unwrap();
        // A byte of the SST itself, not its zero padding (which no checksum covers).
        let data: Vec<usize> = (0..bytes.len()).filter(|&i| bytes[i] != 0).collect();
        let at = match flip % 4 {
            0 => data[0],
            1 => *data.last().unwrap(),
            _ => data[rng.gen_range(0..data.len())],
        };
        let offset = r.start + at as u64;
        // Into the page cache, where buffered reads find it at once; an O_DIRECT read of the
        // range has the kernel write the dirty page back first.
        file.write_all_at(&[bytes[at] ^ (1 << rng.gen_range(0..8))], offset).unwrap();
        for direct_reads in [false, true] {
            let ctx = format!("flip at {offset} (SST {r:?}), direct reads {direct_reads}");
            match read_all(dir.path(), &model, direct_reads, &ctx) {
                Ok(()) => panic!("{ctx}: the damage went unnoticed"),
                Err(e) => {
                    assert!(matches!(e, Error::Corruption { .. }), "{ctx}: not Corruption: {e:?}")
                }
            }
        }
        file.write_all_at(&bytes[at..=at], offset).unwrap();
    }
    read_all(dir.path(), &model, false, "restored").unwrap();
}

/// Opens the store read-only and reads every key, a scan and the check. Wrong data panics;
/// the first error is returned.
fn read_all(dir: &Path, model: &Model, direct_reads: bool, ctx: &str) -> shale_lsm::Result<()> {
    let db = Db::open_read_only(dir, options(direct_reads))?;
    let mut first: Option<Error> = None;
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
    assert_read_by(&db, direct_reads, ctx);
    first.map_or(Ok(()), Err)
}

#[test]
fn a_store_on_a_device_writes_directly_whatever_the_option_says() {
    let dev = shale_io::SimDevice::new(common::DEVICE_BYTES, 4096, 1).unwrap();
    let db = Db::open_device(std::sync::Arc::new(dev), options(false)).unwrap();
    for n in 0..500 {
        db.put(&key(n), &value(n, 1)).unwrap();
    }
    db.compact_range().unwrap();
    assert_eq!(db.get(&key(7)).unwrap(), Some(value(7, 1)));
    let s = db.stats();
    assert!(s.sst_bytes_written_direct > 0 && s.sst_bytes_written_buffered == 0, "{s:?}");
    assert!(s.sst_bytes_read_direct > 0 && s.sst_bytes_read_buffered == 0, "{s:?}");
}

/// A loop device for a test, detached when dropped.
struct Loop(String);

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

#[test]
fn the_write_path_rule_answers_for_directories_files_and_block_devices() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("volume");
    std::fs::write(&file, b"").unwrap();
    for (direct, want) in [(false, true), (true, false)] {
        let mut o = options(false);
        o.use_direct_io_for_flush_and_compaction = direct;
        assert_eq!(o.writes_ssts_through_page_cache(dir.path()), want, "a directory, {direct}");
        assert_eq!(o.writes_ssts_through_page_cache(&file), want, "a file, {direct}");
        let missing = dir.path().join("new-store");
        assert_eq!(o.writes_ssts_through_page_cache(&missing), want, "a new store, {direct}");
        // Any block device the machine has answers no, whatever the option says.
        let block = std::fs::read_dir("/sys/block").ok().and_then(|mut d| d.next()?.ok());
        match block.map(|e| Path::new("/dev").join(e.file_name())).filter(|p| p.exists()) {
            Some(dev) => assert!(!o.writes_ssts_through_page_cache(&dev), "{}", dev.display()),
            None => shale_testkit::prerequisite::missing(
                "a block device under /dev",
                "/sys/block lists none: the device half is not checked",
            ),
        }
    }
}

#[test]
fn a_store_on_a_loop_device_writes_directly_and_reads_back_by_either_path() {
    let _serial = common::serial();
    let dir = tempfile::tempdir().unwrap();
    let backing = dir.path().join("disk");
    std::fs::File::create(&backing).unwrap().set_len(64 << 20).unwrap();
    let out = Command::new("losetup").args(["-f", "--show"]).arg(&backing).output();
    let dev = match out {
        Ok(o) if o.status.success() => String::from_utf8(o.stdout).unwrap().trim().to_string(),
        other => {
            return shale_testkit::prerequisite::missing("a loop device", format!("{other:?}"));
        }
    };
    let _loop = Loop(dev.clone());
    let mut rng = SmallRng::seed_from_u64(17);
    let (mut model, mut write) = (Model::new(), 0u64);
    for direct_reads in [false, true, false] {
        let ctx = format!("{dev}, direct reads {direct_reads}");
        let db = Db::open(&dev, options(direct_reads)).unwrap();
        check_against(&db, &model, &format!("{ctx}, opened"));
        overwrite_rounds(&db, &mut model, &mut rng, &mut write, &ctx);
        let s = db.stats();
        assert!(s.sst_bytes_written_direct > 0, "{ctx}: no SST written with O_DIRECT: {s:?}");
        assert_eq!(s.sst_bytes_written_buffered, 0, "{ctx}: SSTs written buffered: {s:?}");
        assert_read_by(&db, direct_reads, &ctx);
        db.check().unwrap();
        db.close().unwrap();
    }
}

// The kill test: a child process writes batches (one in eight synced, the rest kept by the
// WAL tail in /dev/shm) while another of its threads compacts the whole store over and over,
// so SSTs are being written buffered, synced and committed when SIGKILL lands. The parent
// reopens, checks every checksum and invariant, and finds every acknowledged batch, whole.

const KILL_CHILD_ENV: &str = "SHALE_BUFFERED_KILL_CHILD_DIR";
const KEYS_PER_BATCH: u64 = 8;
const KILL_ROUNDS: u64 = 6;

fn kill_options() -> Options {
    let mut o = Options::small_for_tests();
    o.write_buffer_bytes = 128 << 10;
    o.use_direct_io_for_flush_and_compaction = false;
    // Room in the version log for the SSTs the rounds write (see tests/kill.rs).
    o.volume.layout.version_log_bytes = 1 << 20;
    o
}

/// The writer: batch n puts keys "b{n}-{i}" for i in 0..8 and prints "acked n" once the
/// write returns; a second thread compacts the store in a loop.
fn kill_child(dir: &Path) {
    let db = Db::open(dir, kill_options()).expect("child: open");
    let start: u64 = std::env::var("SHALE_BUFFERED_KILL_START").unwrap().parse().unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            loop {
                db.compact_range().expect("child: compact");
                println!("compacted");
            }
        });
        for n in start.. {
            let mut b = WriteBatch::new();
            for i in 0..KEYS_PER_BATCH {
                b.put(format!("b{n:08}-{i}").as_bytes(), &vec![(n % 251) as u8; 100 + i as usize]);
            }
            db.write(&b, &WriteOptions { sync: n % 8 == 0 }).expect("child: write");
            println!("acked {n}");
        }
    });
}

#[test]
#[ignore = "child process entry point, run by \
            sigkill_mid_compaction_with_buffered_writes_loses_no_acked_write"]
fn buffered_kill_child_entry_point() {
    let parent = "sigkill_mid_compaction_with_buffered_writes_loses_no_acked_write";
    kill_child(Path::new(&shale_testkit::child_env(KILL_CHILD_ENV, parent)));
}

#[test]
fn sigkill_mid_compaction_with_buffered_writes_loses_no_acked_write() {
    // On the repository's file system: /tmp may be tmpfs.
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("buffered-kill");
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    let dir = base.join("store");
    let mut rng = SmallRng::seed_from_u64(0xb5f);
    let (mut next_batch, mut acked_total, mut compactions_total) = (0u64, 0u64, 0u64);
    for round in 0..KILL_ROUNDS {
        let kill_after = Duration::from_millis(rng.gen_range(200..900));
        let envs = [
            (KILL_CHILD_ENV, dir.display().to_string()),
            ("SHALE_BUFFERED_KILL_START", next_batch.to_string()),
        ];
        let entry = "buffered_kill_child_entry_point";
        let lines = shale_testkit::run_child_until_killed(entry, &envs, kill_after);
        let acked = shale_testkit::acked_numbers(&lines);
        let compactions = lines.iter().filter(|l| *l == "compacted").count() as u64;
        let db = Db::open(&dir, kill_options()).unwrap_or_else(|e| panic!("round {round}: {e}"));
        db.check().unwrap_or_else(|e| panic!("round {round}: check after SIGKILL: {e}"));
        for &n in &acked {
            for i in 0..KEYS_PER_BATCH {
                let k = format!("b{n:08}-{i}");
                assert!(
                    db.get(k.as_bytes()).unwrap().is_some(),
                    "round {round}: acknowledged batch {n} lost key {k}"
                );
            }
        }
        let mut it = db.iter(&ReadOptions::default());
        let mut per_batch = BTreeMap::<u64, u64>::new();
        it.seek_to_first();
        while it.valid() {
            let k = String::from_utf8(it.key().to_vec()).unwrap();
            *per_batch.entry(k[1..9].parse().unwrap()).or_default() += 1;
            it.next();
        }
        it.status().unwrap();
        for (n, count) in &per_batch {
            assert_eq!(*count, KEYS_PER_BATCH, "round {round}: batch {n} is torn");
        }
        drop(it);
        next_batch = per_batch.keys().next_back().map_or(next_batch, |n| n + 1).max(next_batch);
        // An SST written in this open, whatever the kill left to replay (a child killed before
        // its first batch leaves nothing, and compacting a compacted store writes nothing): a
        // whole batch of the next number, so later rounds count it whole, flushed.
        let mut batch = WriteBatch::new();
        for i in 0..KEYS_PER_BATCH {
            batch.put(format!("b{next_batch:08}-{i}").as_bytes(), b"written after recovery");
        }
        db.write(&batch, &WriteOptions::default()).unwrap();
        next_batch += 1;
        db.flush().unwrap();
        db.compact_range().unwrap();
        assert_written_buffered(&db, &format!("round {round}, after recovery"));
        acked_total += acked.len() as u64;
        compactions_total += compactions;
        db.close().unwrap();
    }
    println!(
        "buffered kill test: {KILL_ROUNDS} SIGKILLs, {acked_total} acknowledged batches, \
         {compactions_total} whole-store compactions acknowledged, all present"
    );
    assert!(acked_total > 0, "the child never acknowledged a write");
    assert!(compactions_total > 0, "the child never finished a compaction");
}
