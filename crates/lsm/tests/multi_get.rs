//! `Db::multi_get` answers as `Db::get` does, key by key, at one snapshot: over overlapping
//! L0 SSTs with no bloom filter (so a key's lookup searches blocks of newer SSTs that do not
//! hold it and must go on to older ones), deletes, range deletes, duplicates and keys never
//! written, through the page cache and with O_DIRECT, on a block cache too small to hold the
//! data (so the batches read the device).

use std::collections::BTreeMap;

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use shale_lsm::{Db, Options, ReadOptions};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const KEYS: u32 = 3000;

fn options(direct: bool) -> Options {
    let mut o = Options::small_for_tests();
    o.write_buffer_bytes = 64 << 10;
    o.sst.bloom_bits_per_key = 0;
    // Many overlapping L0 SSTs, compacted only now and then.
    o.level0_file_num_compaction_trigger = 12;
    o.level0_slowdown_writes_trigger = 40;
    o.level0_stop_writes_trigger = 60;
    o.block_cache_bytes = 64 << 10;
    o.use_direct_reads = direct;
    o
}

fn key(n: u32) -> Vec<u8> {
    format!("key{n:06}").into_bytes()
}

/// Every key of `0..KEYS + 200` (the last 200 never written) in shuffled batches of 1 to 80
/// with repeats, by multi_get, against `want`.
fn check(db: &Db, want: &Model, opts: &ReadOptions, rng: &mut SmallRng, ctx: &str) {
    let mut order: Vec<u32> = (0..KEYS + 200).collect();
    order.shuffle(rng);
    let mut at = 0;
    while at < order.len() {
        let n = rng.gen_range(1..=80).min(order.len() - at);
        let mut keys: Vec<Vec<u8>> = order[at..at + n].iter().map(|&k| key(k)).collect();
        if rng.gen_bool(0.3) {
            let again = keys[rng.gen_range(0..keys.len())].clone();
            keys.push(again);
        }
        at += n;
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let got = db.multi_get(&refs, opts).unwrap();
        for (k, v) in keys.iter().zip(got) {
            assert_eq!(v.as_ref(), want.get(k), "{ctx}: {}", String::from_utf8_lossy(k));
            assert_eq!(db.get_opt(k, opts).unwrap(), v, "{ctx}: get disagrees");
        }
    }
}

fn run(direct: bool, seed: u64) {
    let ctx = format!("direct {direct}, seed {seed}");
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(direct)).unwrap();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut model = Model::new();
    let mut frozen = None;
    for round in 0..14u32 {
        for _ in 0..900 {
            let k = key(rng.gen_range(0..KEYS));
            if rng.gen_bool(0.15) {
                db.delete(&k).unwrap();
                model.remove(&k);
            } else {
                let v = format!("v{round}-{}", rng.gen_range(0..1_000_000)).repeat(3).into_bytes();
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
        }
        if round % 5 == 4 {
            let a = rng.gen_range(0..KEYS - 100);
            let (start, end) = (key(a), key(a + rng.gen_range(1..100)));
            db.delete_range(&start, &end).unwrap();
            model.retain(|k, _| k < &start || k >= &end);
        }
        if round == 7 {
            frozen = Some((db.snapshot(), model.clone()));
        }
        db.flush().unwrap();
    }
    let l0 = db.stats().files_per_level[0];
    assert!(l0 >= 3, "{ctx}: the test needs overlapping L0 SSTs, has {l0}");
    check(&db, &model, &ReadOptions::default(), &mut rng, &ctx);
    let (snap, old) = frozen.unwrap();
    let at_snap = ReadOptions { snapshot: Some(&snap), ..Default::default() };
    check(&db, &old, &at_snap, &mut rng, &format!("{ctx}, snapshot"));
    db.compact_range().unwrap();
    check(&db, &model, &ReadOptions::default(), &mut rng, &format!("{ctx}, compacted"));
    drop(snap);
    db.close().unwrap();
    let db = Db::open(dir.path(), options(direct)).unwrap();
    check(&db, &model, &ReadOptions::default(), &mut rng, &format!("{ctx}, reopened"));
}

#[test]
fn answers_as_get_through_the_page_cache() {
    run(false, 1);
}

#[test]
fn answers_as_get_with_o_direct() {
    run(true, 2);
}

#[test]
fn an_empty_batch_has_no_answers() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(false)).unwrap();
    assert!(db.multi_get(&[], &ReadOptions::default()).unwrap().is_empty());
}
