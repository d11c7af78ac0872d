//! Crash-point enumeration of the whole store on the simulated device.
//!
//! A seeded script of writes (puts, deletes and batches, some synced) with explicit flushes and
//! two full compactions runs on small options, so the store switches memtables and WAL groups,
//! flushes in the background, compacts and rewrites its version log. Each write's device write
//! count when it started and when it was acknowledged is recorded. Then a power cut is
//! simulated after every device write (or, for long scripts, every write inside the windows
//! of the flushes, the compactions and the first group switch, and a stride elsewhere), in several
//! damage variants, and every crash image is opened and checked:
//! - the store equals the oracle after some prefix of the writes (P3: no holes, batches atomic)
//!   that contains every write acknowledged with sync at or before the crash (P1), and under
//!   `Damage::Keep`, what a killed process leaves, every acknowledged write (P2);
//! - seeks to every key on the cold cache (each reading a block of every sorted run in one
//!   batch), a full scan and batched multi-gets all read the same state;
//! - `Db::check` passes (checksums, levels, slot accounting);
//! - recovery is repeatable: reopening the recovered device (every other image) gives the same
//!   state, and on some images the recovery's own device writes are crashed at every point too,
//!   and each of those images must recover to the same state again;
//! - the page-cache read path (issue #14) recovers the same state: at every fifth crash point
//!   the image of `Damage::Keep` (all writes issued, what a killed process leaves) is also
//!   written to a volume file and opened with buffered reads and no block cache, so recovery
//!   and every read go through `pread` and the kernel's page cache.
//!
//! Why: recovery has to pick the WAL prefix, the version, and the slots apart from whatever a
//! power cut left half-written; only checking every cut point shows that no point is missed.
//! `SHALE_CRASH_SEEDS=N` runs N scripts (default 2: seed 0 with the plain group commit, seed 1
//! with the WAL pipeline's 3 loggers always on); a failure names its seed and crash point.

mod common;

use std::sync::Arc;
use std::time::Instant;

use common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shale_io::{Damage, SimDevice};
use shale_lsm::{Db, Options, WriteBatch, WriteOptions};

/// Keys are drawn from `0..KEYS`.
const KEYS: u16 = 100;
/// Values carry up to this much filler.
const VALUE_FILLER_MAX: usize = 700;
/// Writes in one script.
const SCRIPT_WRITES: u32 = 500;

/// When one write started and was acknowledged, in device writes.
struct Acked {
    sync: bool,
    started_at: u64,
    acked_at: u64,
}

/// What a script did: the oracle state after each prefix of writes and the device-write
/// windows of its explicit flush and compaction calls.
struct Script {
    /// `states[i]`: the store after the first `i` writes.
    states: Vec<State>,
    writes: Vec<Acked>,
    windows: Vec<(u64, u64)>,
}

fn run_script(dev: &SimDevice, seed: u64) -> Script {
    let mut rng = SmallRng::seed_from_u64(seed);
    // Odd seeds write sync batches through the WAL pipeline, its 3 loggers always on; even
    // seeds start without it (the adaptive default) and, short as the script is, keep so.
    let mut opts = small_options();
    opts.adaptive_wal_loggers = seed % 2 == 0;
    let db = Db::open_device(Arc::new(dev.clone()), opts).unwrap();
    let mut script = Script { states: vec![State::new()], writes: Vec::new(), windows: Vec::new() };
    let mut first_switch = None;
    for w in 1..=SCRIPT_WRITES {
        let mut state = script.states.last().unwrap().clone();
        let mut batch = WriteBatch::new();
        let ops = if rng.gen_bool(0.25) { rng.gen_range(2..8) } else { 1 };
        for op in 0..ops {
            let n = rng.gen_range(0..KEYS);
            if rng.gen_bool(0.15) {
                batch.delete(&key(n));
                state.remove(&n);
            } else {
                let stamp = (w, op as u16);
                batch.put(&key(n), &value(n, stamp, VALUE_FILLER_MAX));
                state.insert(n, stamp);
            }
        }
        let sync = rng.gen_bool(0.3);
        let started_at = dev.writes();
        let memtables_before = db.stats().memtables;
        db.write(&batch, &WriteOptions { sync }).unwrap();
        script.writes.push(Acked { sync, started_at, acked_at: dev.writes() });
        script.states.push(state);
        if first_switch.is_none() && db.stats().memtables > memtables_before {
            first_switch = Some((started_at, dev.writes()));
        }
        if w % 140 == 70 {
            let before = dev.writes();
            db.flush().unwrap();
            script.windows.push((before, dev.writes()));
        }
        if w == SCRIPT_WRITES / 3 || w == SCRIPT_WRITES * 2 / 3 {
            let before = dev.writes();
            db.compact_range().unwrap();
            script.windows.push((before, dev.writes()));
        }
    }
    let stats = db.stats();
    assert!(stats.flushes >= 4, "the script must flush several memtables: {stats:?}");
    // Two explicit full compactions: background ones depend on timing (flushes come first).
    assert!(stats.compactions >= 2, "the script must compact: {stats:?}");
    // No close: the last writes stay in the WAL, so the tail of the trace crashes them too.
    drop(db);
    script.windows.extend(first_switch);
    script
}

fn damages(k: u64, seed: u64) -> [(Damage, bool); 4] {
    let s = seed.wrapping_mul(1_000_003).wrapping_add(k);
    [
        (Damage::Lose, false),
        (Damage::Keep, true),
        (Damage::Random { seed: s, torn_unit: 512 }, false),
        (Damage::TornLast { seed: s, torn_unit: 4096 }, false),
    ]
}

/// Opens an image and returns its state after checking it; `ctx` names the case.
fn open_and_read(dev: &SimDevice, ctx: &str) -> State {
    let db = Db::open_device(Arc::new(dev.clone()), small_options())
        .unwrap_or_else(|e| panic!("{ctx}: open failed: {e}"));
    read_and_check(&db, ctx)
}

/// Reads `db`'s state by seeks, a scan and multi-gets, checks they agree and that
/// `Db::check` passes, and returns it.
fn read_and_check(db: &Db, ctx: &str) -> State {
    // Seeks first, on the cold cache: each reads the blocks of every sorted run it lands in
    // together (one batch), the path a scan's start and every seek take.
    let sought =
        seek_state(db, KEYS, VALUE_FILLER_MAX).unwrap_or_else(|e| panic!("{ctx}: seeks: {e}"));
    let state = scan_state(db, VALUE_FILLER_MAX).unwrap_or_else(|e| panic!("{ctx}: scan: {e}"));
    assert_eq!(sought, state, "{ctx}: the seeks and the scan disagree");
    let batched = multi_get_state(db, KEYS, 16, VALUE_FILLER_MAX)
        .unwrap_or_else(|e| panic!("{ctx}: multi_get: {e}"));
    assert_eq!(batched, state, "{ctx}: multi_get and the scan disagree");
    db.check().unwrap_or_else(|e| panic!("{ctx}: check: {e}"));
    state
}

/// Options that read every SST block through the page cache: buffered reads, no block cache.
fn page_cache_options() -> Options {
    let mut o = small_options();
    o.use_direct_reads = false;
    o.block_cache_bytes = 0;
    o.prepopulate_block_cache = false;
    o
}

/// Opens `image` as a volume file with [`page_cache_options`] and returns its state after the
/// checks of [`read_and_check`], with the bytes it read from SSTs through the page cache.
fn open_as_file_and_read(image: &[u8], ctx: &str) -> (State, u64) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(shale_space::VOLUME_FILE_NAME), image).unwrap();
    let db = Db::open(dir.path(), page_cache_options())
        .unwrap_or_else(|e| panic!("{ctx}: open failed: {e}"));
    let state = read_and_check(&db, ctx);
    let stats = db.stats();
    assert_eq!(stats.sst_bytes_read_direct, 0, "{ctx}: SSTs read with O_DIRECT");
    (state, stats.sst_bytes_read_buffered)
}

/// Which prefixes a crash after device write `k` may leave: from the last write that must
/// survive to the last write that had started.
fn allowed_prefixes(script: &Script, k: u64, keep: bool) -> (usize, usize) {
    let must = script
        .writes
        .iter()
        .rposition(|a| a.acked_at <= k && (keep || a.sync))
        .map_or(0, |i| i + 1);
    let started = script.writes.iter().filter(|a| a.started_at < k).count();
    (must, started)
}

#[derive(Default)]
struct Tally {
    images: u64,
    reopened: u64,
    recovery_crash_images: u64,
    /// Images opened as a file with buffered reads, and those whose SSTs were read so.
    page_cache_images: u64,
    page_cache_images_with_sst_reads: u64,
}

fn check_image(script: &Script, dev: &SimDevice, k: u64, keep: bool, ctx: &str) -> State {
    let got = open_and_read(dev, ctx);
    let (must, started) = allowed_prefixes(script, k, keep);
    let found = (must..=started).rev().find(|&i| script.states[i] == got);
    assert!(
        found.is_some(),
        "{ctx}: the store equals no prefix of writes {must}..={started} (P1/P2/P3); \
         got {} keys",
        got.len()
    );
    got
}

/// Crashes the recovery of `image` itself at every one of its device writes.
fn crash_the_recovery(image: Vec<u8>, want: &State, seed: u64, ctx: &str, tally: &mut Tally) {
    let dev = SimDevice::from_image(image, 4096, seed).unwrap();
    let db = Db::open_device(Arc::new(dev.clone()), small_options()).unwrap();
    // Dropping (not closing) lets background work started by recovery finish, but flushes
    // nothing new: everything the recovery does is in the trace.
    drop(db);
    for j in 0..=dev.writes() {
        for damage in [Damage::Lose, Damage::Random { seed: seed ^ j, torn_unit: 512 }] {
            let again = SimDevice::from_image(dev.crash_image(j, damage), 4096, seed).unwrap();
            let ctx = format!("{ctx}, recovery crashed after its write {j} ({damage:?})");
            assert_eq!(&open_and_read(&again, &ctx), want, "{ctx}: state changed");
            tally.recovery_crash_images += 1;
        }
    }
}

fn crash_points(script: &Script, total: u64) -> Vec<u64> {
    // Every point when that is affordable; else the windows in full and a stride elsewhere.
    const EVERY_POINT_MAX: u64 = 1200;
    if total <= EVERY_POINT_MAX {
        return (0..=total).collect();
    }
    let stride = total / (EVERY_POINT_MAX / 2) + 1;
    (0..=total)
        .filter(|&k| {
            k % stride == 0
                || k == total
                || script.windows.iter().any(|&(a, b)| a <= k && k <= b.min(a + 150))
        })
        .collect()
}

fn scenario(seed: u64, tally: &mut Tally) {
    let dev = SimDevice::new(DEVICE_BYTES, 4096, seed).unwrap();
    let script = run_script(&dev, seed);
    let total = dev.writes();
    let points = crash_points(&script, total);
    println!("seed {seed}: {total} device writes, {} crash points", points.len());
    for &k in &points {
        for (damage, keep) in damages(k, seed) {
            let ctx = format!("seed {seed}, crash after write {k} of {total}, {damage:?}");
            let image = dev.crash_image(k, damage);
            let recovered = SimDevice::from_image(image.clone(), 4096, seed).unwrap();
            let state = check_image(&script, &recovered, k, keep, &ctx);
            tally.images += 1;
            // Recovery after recovery: the recovered device (with whatever the first recovery
            // wrote) opens to the same state. Every other image, to save time.
            if (k + tally.images) % 2 == 0 {
                let ctx2 = format!("{ctx}, reopened");
                assert_eq!(open_and_read(&recovered, &ctx2), state, "{ctx2}: state changed");
                tally.reopened += 1;
            }
            // The same image through the page-cache read path: the same state.
            if k % 5 == 0 && keep {
                let ctx3 = format!("{ctx}, as a file read through the page cache");
                let (through_cache, sst_bytes) = open_as_file_and_read(&image, &ctx3);
                assert_eq!(through_cache, state, "{ctx3}: another state than the device's");
                tally.page_cache_images += 1;
                tally.page_cache_images_with_sst_reads += u64::from(sst_bytes > 0);
            }
            if k % 89 == 7 && matches!(damage, Damage::Random { .. }) {
                crash_the_recovery(image, &state, seed ^ k, &ctx, tally);
            }
        }
    }
}

#[test]
fn every_crash_point_recovers_an_acknowledged_prefix() {
    let seeds: u64 =
        std::env::var("SHALE_CRASH_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(2);
    let started = Instant::now();
    let mut tally = Tally::default();
    for seed in 0..seeds {
        scenario(seed, &mut tally);
    }
    println!(
        "store crash enumeration: {} crash images checked ({} after a crash of the recovery \
         itself; {} recovered devices reopened; {} opened as a file through the page cache, \
         {} of them reading SSTs so), 0 violations, {:?}",
        tally.images + tally.recovery_crash_images,
        tally.recovery_crash_images,
        tally.reopened,
        tally.page_cache_images,
        tally.page_cache_images_with_sst_reads,
        started.elapsed()
    );
    assert!(tally.images >= 1000, "fewer than 1,000 crash images checked");
    assert!(tally.recovery_crash_images > 0, "no recovery was crashed");
    assert!(
        tally.page_cache_images_with_sst_reads >= 50,
        "only {} crash images read SSTs through the page cache",
        tally.page_cache_images_with_sst_reads
    );
}
