//! Model-based test of the store on the simulated device: random operations checked against a
//! BTreeMap oracle that knows which writes were acknowledged with sync.
//!
//! Operations: put, delete, batch, get, iterators (both directions, bounds, prefixes),
//! snapshot reads, flush, compact, clean reopen, and a simulated power cut or process crash.
//! After a power cut the store must equal the oracle after some prefix of the writes that
//! contains every synced one (P1, P3); after a process crash, every acknowledged write (P2).
//!
//! `SHALE_MODEL_SEEDS=N` runs N seeds (default 6); `SHALE_MODEL_SEED=S` replays one seed. A
//! failure names its seed.

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shale_io::{Damage, SimDevice};
use shale_lsm::batch::WriteBatch;
use shale_lsm::{Db, Options, ReadOptions, WriteOptions};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

fn options() -> Options {
    let mut o = Options::small_for_tests();
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

fn run(seed: u64, steps: usize) -> (u64, u64) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut dev = SimDevice::new(64 << 20, 4096, seed).unwrap();
    let mut db = Db::open_device(Arc::new(dev.clone()), options()).unwrap();
    let mut model = Model { now: Map::new(), since_sync: vec![Map::new()] };
    let mut seq = 0u64;
    let (mut crashes, mut reopens) = (0, 0);
    for step in 0..steps {
        let ctx = format!("seed {seed} step {step}");
        match rng.gen_range(0..100) {
            0..=39 => {
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
                for _ in 0..rng.gen_range(1..20) {
                    seq += 1;
                    let k = key(&mut rng);
                    if rng.gen_bool(0.3) {
                        b.delete(&k);
                        model.now.remove(&k);
                    } else {
                        let v = value(&mut rng, seq);
                        b.put(&k, &v);
                        model.now.insert(k, v);
                    }
                }
                let sync = rng.gen_bool(0.3);
                db.write(&b, &WriteOptions { sync }).unwrap();
                record(&mut model, sync);
            }
            58..=69 => {
                for _ in 0..5 {
                    let k = key(&mut rng);
                    assert_eq!(db.get(&k).unwrap(), model.now.get(&k).cloned(), "{ctx}: get");
                }
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
                    let (k, v) = (key(&mut rng), value(&mut rng, seq));
                    db.put(&k, &v).unwrap();
                    model.now.insert(k, v);
                    record(&mut model, false);
                }
                if rng.gen_bool(0.3) {
                    db.flush().unwrap();
                }
                let opts = ReadOptions { snapshot: Some(snap.seq()), ..Default::default() };
                let k = key(&mut rng);
                assert_eq!(
                    db.get_opt(&k, &opts).unwrap(),
                    frozen.get(&k).cloned(),
                    "{ctx}: snapshot get"
                );
                assert_eq!(
                    scan(&db, &opts),
                    in_bounds(&frozen, &None, &None),
                    "{ctx}: snapshot scan"
                );
            }
            85..=88 => db.flush().unwrap(),
            89..=90 => db.compact_range().unwrap(),
            91..=93 => {
                db.close().unwrap();
                reopens += 1;
                db = Db::open_device(Arc::new(dev.clone()), options()).unwrap();
                model.since_sync = vec![model.now.clone()];
                assert_eq!(
                    scan(&db, &ReadOptions::default()),
                    in_bounds(&model.now, &None, &None),
                    "{ctx}: after reopen"
                );
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
                let image = dev.crash_image(dev.writes(), damage);
                drop(db);
                dev = SimDevice::from_image(image, 4096, seed).unwrap();
                db = Db::open_device(Arc::new(dev.clone()), options())
                    .unwrap_or_else(|e| panic!("{ctx}: reopen after crash: {e}"));
                crashes += 1;
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
    db.close().unwrap();
    (crashes, reopens)
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
    let (mut crashes, mut reopens) = (0, 0);
    for seed in 0..seeds {
        let (c, r) = run(seed, 1500);
        crashes += c;
        reopens += r;
    }
    println!(
        "model test: {seeds} seeds x 1500 steps, {crashes} crashes and {reopens} reopens checked"
    );
}
