//! Model-based test of the store on the simulated device: random operations checked against a
//! BTreeMap oracle that knows which writes were acknowledged with sync.
//!
//! Operations: put, delete, delete_range (alone and inside batches; empty ranges must be
//! refused), batch, get, iterators (both directions, bounds, prefixes), snapshot reads (with
//! range deletes after the snapshot), flush, compact (then `check`), clean reopen, a
//! simulated power cut or process crash, and bursts of three writer threads and a reader at
//! once (`concurrent_burst`). After a power cut the store must equal the oracle
//! after some prefix of the writes that contains every synced one (P1, P3); after a process
//! crash, every acknowledged write (P2).
//!
//! `SHALE_MODEL_SEEDS=N` runs N seeds (default 6); `SHALE_MODEL_SEED=S` replays one seed. A
//! failure names its seed.

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shale_io::{Damage, SimDevice};
use shale_lsm::batch::WriteBatch;
use shale_lsm::{Db, Error, MemoryTail, Options, ReadOptions, WalTail, WriteOptions};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// Odd seeds keep unsynced writes in a WAL tail (in memory; a process crash hands a copy of
/// it to the next open, a power cut an empty one); even seeds run without a tail. Every third
/// seed has a block cache far smaller than the data, so that reads, scans and seeks go to
/// the device (seeks reading the blocks of their sorted runs in batches, scans reading
/// ahead); the others cache it all.
fn options(tail: &Option<MemoryTail>, seed: u64) -> Options {
    let mut o = Options::small_for_tests();
    if seed % 3 == 2 {
        o.block_cache_bytes = 16 << 10;
    }
    if let Some(t) = tail {
        o.wal_tail = WalTail::Memory(t.clone());
    }
    o.write_buffer_bytes = 64 << 10;
    o.target_file_size_base = 64 << 10;
    o.max_bytes_for_level_base = 256 << 10;
    o.level0_file_num_compaction_trigger = 2;
    // Two compaction threads, so that concurrent compactions meet every operation too.
    o.max_background_jobs = 3;
    o
}

fn key(rng: &mut SmallRng) -> Vec<u8> {
    format!("key{:04}", rng.gen_range(0..400)).into_bytes()
}

/// A range bound: a whole key, or a shorter prefix of one, which falls between keys.
fn range_bound(rng: &mut SmallRng, n: u32) -> Vec<u8> {
    if rng.gen_bool(0.3) {
        format!("key{:03}", n / 10).into_bytes()
    } else {
        format!("key{n:04}").into_bytes()
    }
}

/// A range `[start, end)` of 1 to 40 keys mostly, sometimes of most of the key space; may be
/// empty (start >= end) when the bounds' forms collide.
fn range(rng: &mut SmallRng) -> (Vec<u8>, Vec<u8>) {
    let a = rng.gen_range(0..400);
    let span = if rng.gen_bool(0.1) { rng.gen_range(1..400) } else { rng.gen_range(1..40) };
    (range_bound(rng, a), range_bound(rng, (a + span).min(400)))
}

fn delete_range_in(map: &mut Map, start: &[u8], end: &[u8]) {
    map.retain(|k, _| !(k.as_slice() >= start && k.as_slice() < end));
}

fn value(rng: &mut SmallRng, seq: u64) -> Vec<u8> {
    let mut v = seq.to_le_bytes().to_vec();
    v.resize(rng.gen_range(8..400), b'v');
    v
}

fn scan(db: &Db, opts: &ReadOptions) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db.iter(opts);
    let mut out = Vec::new();
    it.seek_to_first();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().unwrap();
    out
}

fn scan_reverse(db: &Db, opts: &ReadOptions) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db.iter(opts);
    let mut out = Vec::new();
    it.seek_to_last();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    it.status().unwrap();
    out.reverse();
    out
}

fn in_bounds(map: &Map, lo: &Option<Vec<u8>>, hi: &Option<Vec<u8>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    map.iter()
        .filter(|(k, _)| lo.as_ref().is_none_or(|l| *k >= l) && hi.as_ref().is_none_or(|h| *k < h))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

struct Model {
    /// The state after every acknowledged write.
    now: Map,
    /// States since the last synced write (the candidates a power cut may leave), oldest first.
    since_sync: Vec<Map>,
}

/// What one run did, summed over seeds for the report.
#[derive(Default)]
struct Counts {
    crashes: u64,
    reopens: u64,
    range_deletes: u64,
    empty_ranges_refused: u64,
    /// Data blocks read by seeks in batches (`Stats::seek_batch_reads`), summed over opens.
    seek_batch_reads: u64,
}

fn run(seed: u64, steps: usize) -> Counts {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut dev = SimDevice::new(64 << 20, 4096, seed).unwrap();
    let mut tail = (seed % 2 == 1).then(MemoryTail::new);
    let mut db = Db::open_device(Arc::new(dev.clone()), options(&tail, seed)).unwrap();
    let mut model = Model { now: Map::new(), since_sync: vec![Map::new()] };
    let mut seq = 0u64;
    let mut counts = Counts::default();
    for step in 0..steps {
        let ctx = format!("seed {seed} step {step}");
        match rng.gen_range(0..100) {
            0..=3 => {
                let (start, end) = range(&mut rng);
                let sync = rng.gen_bool(0.2);
                let mut b = WriteBatch::new();
                b.delete_range(&start, &end);
                let written = db.write(&b, &WriteOptions { sync });
                if start >= end {
                    assert!(
                        matches!(written, Err(Error::InvalidArgument(_))),
                        "{ctx}: {written:?}"
                    );
                    counts.empty_ranges_refused += 1;
                    continue;
                }
                written.unwrap();
                delete_range_in(&mut model.now, &start, &end);
                record(&mut model, sync);
                counts.range_deletes += 1;
            }
            4..=39 => {
                seq += 1;
                let (k, v) = (key(&mut rng), value(&mut rng, seq));
                let sync = rng.gen_bool(0.2);
                db.write(
                    &{
                        let mut b = WriteBatch::new();
                        b.put(&k, &v);
                        b
                    },
                    &WriteOptions { sync },
                )
                .unwrap();
                model.now.insert(k, v);
                record(&mut model, sync);
            }
            40..=49 => {
                let k = key(&mut rng);
                let sync = rng.gen_bool(0.2);
                db.write(
                    &{
                        let mut b = WriteBatch::new();
                        b.delete(&k);
                        b
                    },
                    &WriteOptions { sync },
                )
                .unwrap();
                model.now.remove(&k);
                record(&mut model, sync);
            }
            50..=57 => {
                let mut b = WriteBatch::new();
                let mut next = model.now.clone();
                for _ in 0..rng.gen_range(1..20) {
                    seq += 1;
                    let k = key(&mut rng);
                    if rng.gen_bool(0.1) {
                        let (start, end) = range(&mut rng);
                        if start < end {
                            b.delete_range(&start, &end);
                            delete_range_in(&mut next, &start, &end);
                            counts.range_deletes += 1;
                        }
                    } else if rng.gen_bool(0.3) {
                        b.delete(&k);
                        next.remove(&k);
                    } else {
                        let v = value(&mut rng, seq);
                        b.put(&k, &v);
                        next.insert(k, v);
                    }
                }
                let sync = rng.gen_bool(0.3);
                db.write(&b, &WriteOptions { sync }).unwrap();
                model.now = next;
                record(&mut model, sync);
            }
            58..=69 => {
                let keys: Vec<Vec<u8>> = (0..5).map(|_| key(&mut rng)).collect();
                for k in &keys {
                    assert_eq!(db.get(k).unwrap(), model.now.get(k).cloned(), "{ctx}: get");
                }
                let mut it = db.iter(&ReadOptions::default());
                for k in &keys {
                    it.seek(k);
                    let want = model.now.range(k.clone()..).next();
                    let got = it.valid().then(|| (it.key(), it.value()));
                    it.status().unwrap_or_else(|e| panic!("{ctx}: seek: {e}"));
                    assert_eq!(got, want.map(|(k, v)| (&k[..], &v[..])), "{ctx}: seek");
                }
                let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
                let want: Vec<_> = keys.iter().map(|k| model.now.get(k).cloned()).collect();
                assert_eq!(
                    db.multi_get(&refs, &ReadOptions::default()).unwrap(),
                    want,
                    "{ctx}: multi_get"
                );
            }
            70..=76 => {
                let lo = rng.gen_bool(0.5).then(|| key(&mut rng));
                let hi = rng.gen_bool(0.5).then(|| key(&mut rng));
                let opts = ReadOptions {
                    lower_bound: lo.clone(),
                    upper_bound: hi.clone(),
                    ..Default::default()
                };
                let want = in_bounds(&model.now, &lo, &hi);
                if rng.gen_bool(0.5) {
                    assert_eq!(scan(&db, &opts), want, "{ctx}: forward scan");
                } else {
                    assert_eq!(scan_reverse(&db, &opts), want, "{ctx}: reverse scan");
                }
            }
            77..=79 => {
                let prefix = format!("key{:02}", rng.gen_range(0..4)).into_bytes();
                let opts = ReadOptions { prefix: Some(prefix.clone()), ..Default::default() };
                let want: Vec<_> = model
                    .now
                    .iter()
                    .filter(|(k, _)| k.starts_with(&prefix))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                assert_eq!(scan(&db, &opts), want, "{ctx}: prefix scan");
            }
            80..=84 => {
                // A snapshot, more writes, then reads at the snapshot see the old state.
                let snap = db.snapshot();
                let frozen = model.now.clone();
                for _ in 0..rng.gen_range(1..30) {
                    seq += 1;
                    if rng.gen_bool(0.15) {
                        let (start, end) = range(&mut rng);
                        if start < end {
                            db.delete_range(&start, &end).unwrap();
                            delete_range_in(&mut model.now, &start, &end);
                            record(&mut model, false);
                            counts.range_deletes += 1;
                        }
                        continue;
                    }
                    let (k, v) = (key(&mut rng), value(&mut rng, seq));
                    db.put(&k, &v).unwrap();
                    model.now.insert(k, v);
                    record(&mut model, false);
                }
                if rng.gen_bool(0.3) {
                    db.flush().unwrap();
                }
                if rng.gen_bool(0.2) {
                    // Compaction must keep what the snapshot reads.
                    db.compact_range().unwrap();
                }
                let opts = ReadOptions { snapshot: Some(&snap), ..Default::default() };
                let k = key(&mut rng);
                assert_eq!(
                    db.get_opt(&k, &opts).unwrap(),
                    frozen.get(&k).cloned(),
                    "{ctx}: snapshot get"
                );
                let keys: Vec<Vec<u8>> = (0..8).map(|_| key(&mut rng)).collect();
                let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
                let want: Vec<_> = keys.iter().map(|k| frozen.get(k).cloned()).collect();
                assert_eq!(db.multi_get(&refs, &opts).unwrap(), want, "{ctx}: snapshot multi_get");
                assert_eq!(
                    scan(&db, &opts),
                    in_bounds(&frozen, &None, &None),
                    "{ctx}: snapshot scan"
                );
                assert_eq!(
                    scan_reverse(&db, &opts),
                    in_bounds(&frozen, &None, &None),
                    "{ctx}: snapshot reverse scan"
                );
            }
            85..=87 => db.flush().unwrap(),
            88 => {
                seq += 1000;
                concurrent_burst(&db, &mut model, &mut rng, seq, &ctx);
            }
            89..=90 => {
                db.compact_range().unwrap();
                db.check().unwrap_or_else(|e| panic!("{ctx}: check after compaction: {e}"));
            }
            91..=93 => {
                counts.seek_batch_reads += db.stats().seek_batch_reads;
                db.close().unwrap();
                counts.reopens += 1;
                db = Db::open_device(Arc::new(dev.clone()), options(&tail, seed)).unwrap();
                model.since_sync = vec![model.now.clone()];
                assert_eq!(
                    scan(&db, &ReadOptions::default()),
                    in_bounds(&model.now, &None, &None),
                    "{ctx}: after reopen"
                );
                db.check().unwrap_or_else(|e| panic!("{ctx}: check after reopen: {e}"));
            }
            _ => {
                // A crash: a power cut (unsynced writes may be lost or torn) or a killed process
                // (every completed write reached the device).
                let power_cut = rng.gen_bool(0.6);
                let damage = if power_cut {
                    Damage::Random { seed: seed ^ step as u64, torn_unit: 512 }
                } else {
                    Damage::Keep
                };
                counts.seek_batch_reads += db.stats().seek_batch_reads;
                let image = dev.crash_image(dev.writes(), damage);
                tail = tail.map(|t| if power_cut { MemoryTail::new() } else { t.crash_copy() });
                drop(db);
                dev = SimDevice::from_image(image, 4096, seed).unwrap();
                db = Db::open_device(Arc::new(dev.clone()), options(&tail, seed))
                    .unwrap_or_else(|e| panic!("{ctx}: reopen after crash: {e}"));
                counts.crashes += 1;
                let got = scan(&db, &ReadOptions::default());
                if power_cut {
                    let found =
                        model.since_sync.iter().rposition(|m| in_bounds(m, &None, &None) == got);
                    let Some(i) = found else {
                        panic!(
                            "{ctx}: after a power cut the store matches no prefix since the last synced write ({} candidates)",
                            model.since_sync.len()
                        );
                    };
                    model.now = model.since_sync[i].clone();
                } else {
                    assert_eq!(
                        got,
                        in_bounds(&model.now, &None, &None),
                        "{ctx}: a process crash lost acknowledged writes (P2)"
                    );
                }
                model.since_sync = vec![model.now.clone()];
            }
        }
    }
    db.check().unwrap_or_else(|e| panic!("seed {seed}: check at the end: {e}"));
    counts.seek_batch_reads += db.stats().seek_batch_reads;
    db.close().unwrap();
    if seed % 3 == 2 && steps >= 1000 {
        assert!(counts.seek_batch_reads > 0, "seed {seed}: the small cache's seeks read no batch");
    }
    counts
}

/// A write of a burst: the key and its new value (`None`: deleted).
type Write = (Vec<u8>, Option<Vec<u8>>);

/// Writer threads, each on its own third of the keys, and a reader thread, all at once; then
/// a synced write, so every state a later power cut may leave is one the oracle knows.
/// Readers check what no interleaving may break: scans sorted and unique, every value one
/// written for its key (the oracle's before the burst, or one of the burst's).
fn concurrent_burst(db: &Db, model: &mut Model, rng: &mut SmallRng, seq: u64, ctx: &str) {
    const WRITERS: u64 = 3;
    let seeds: Vec<u64> = (0..=WRITERS).map(|_| rng.r#gen()).collect();
    let before = model.now.clone();
    let writes: Vec<Vec<Write>> = std::thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|t| {
                let seed = seeds[t as usize];
                s.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(seed);
                    let mut done = Vec::new();
                    for i in 0..25 {
                        let n = rng.gen_range(0..400 / WRITERS) * WRITERS + t;
                        let k = format!("key{n:04}").into_bytes();
                        let written = if rng.gen_bool(0.2) {
                            db.delete(&k).unwrap();
                            None
                        } else {
                            let v = value(&mut rng, seq + t * 100 + i);
                            db.put(&k, &v).unwrap();
                            Some(v)
                        };
                        // Read-your-writes: the key is this writer's alone, so a read that
                        // starts after the acknowledgement sees exactly this write, through
                        // a point read and through an iterator's seek (issue #9).
                        assert_eq!(db.get(&k).unwrap(), written, "{ctx}: get after own write");
                        let mut it = db.iter(&ReadOptions::default());
                        it.seek(&k);
                        let seen = it.valid().then(|| it.key() == k.as_slice());
                        let seen_value = (seen == Some(true)).then(|| it.value().to_vec());
                        assert_eq!(seen_value, written, "{ctx}: seek after own write");
                        done.push((k, written));
                    }
                    done
                })
            })
            .collect();
        let reader = s.spawn(|| {
            let mut rng = SmallRng::seed_from_u64(seeds[WRITERS as usize]);
            for _ in 0..10 {
                let got = scan(db, &ReadOptions::default());
                assert!(got.windows(2).all(|w| w[0].0 < w[1].0), "{ctx}: burst scan unsorted");
                let k = key(&mut rng);
                if let Some(v) = db.get(&k).unwrap() {
                    let from_before = before.get(&k) == Some(&v);
                    // A burst value carries its sequence number, above any before it.
                    let from_burst = u64::from_le_bytes(v[..8].try_into().unwrap()) >= seq;
                    assert!(
                        from_before || from_burst,
                        "{ctx}: burst get of {k:?}: a foreign value"
                    );
                }
            }
        });
        let writes = writers.into_iter().map(|h| h.join().unwrap()).collect();
        reader.join().unwrap();
        writes
    });
    for (k, v) in writes.into_iter().flatten() {
        match v {
            Some(v) => model.now.insert(k, v),
            None => model.now.remove(&k),
        };
    }
    // The synced write makes the whole burst durable (the WAL is in order).
    let k = key(rng);
    let v = value(rng, seq + 999);
    db.write(
        &{
            let mut b = WriteBatch::new();
            b.put(&k, &v);
            b
        },
        &WriteOptions { sync: true },
    )
    .unwrap();
    model.now.insert(k, v);
    record(model, true);
    assert_eq!(
        scan(db, &ReadOptions::default()),
        in_bounds(&model.now, &None, &None),
        "{ctx}: after a burst"
    );
}

fn record(model: &mut Model, sync: bool) {
    if sync {
        model.since_sync = vec![model.now.clone()];
    } else {
        model.since_sync.push(model.now.clone());
    }
}

#[test]
fn random_operations_match_the_oracle() {
    if let Ok(seed) = std::env::var("SHALE_MODEL_SEED") {
        run(seed.parse().expect("SHALE_MODEL_SEED is a number"), 3000);
        return;
    }
    let seeds: u64 =
        std::env::var("SHALE_MODEL_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(6);
    let mut total = Counts::default();
    for seed in 0..seeds {
        let c = run(seed, 1500);
        total.crashes += c.crashes;
        total.reopens += c.reopens;
        total.range_deletes += c.range_deletes;
        total.empty_ranges_refused += c.empty_ranges_refused;
        total.seek_batch_reads += c.seek_batch_reads;
    }
    println!(
        "model test: {seeds} seeds x 1500 steps, {} crashes and {} reopens checked, {} range \
         deletes ({} empty ranges refused), {} blocks read by seeks in batches",
        total.crashes,
        total.reopens,
        total.range_deletes,
        total.empty_ranges_refused,
        total.seek_batch_reads
    );
}
