//! Crash-point enumeration: a scripted workload of stores (one page to hundreds of pages,
//! enough to fill segments and start new ones), overwrites and deletes runs on the simulated
//! device; then a power cut is simulated after every device write, in several damage
//! variants, and each crash image is opened and checked:
//! - every acknowledged store and delete is there (P1), each pair whole (a store is atomic);
//! - the store equals the state after some prefix of the operations: no holes (P3);
//! - work continued on the recovered store, and its reopen, keep what was acknowledged.
//!
//! Two workloads: one synchronous call at a time, and windows of up to 12 submissions in
//! flight, whose records share batches and pages (each batch one durable write), with up to
//! three batches' writes in flight at once. A crash may then keep a later batch and lose an
//! earlier one still in flight: each write submitted while earlier ones were not yet reaped
//! is also cut with each of those lost (`Damage::LostInFlight`); recovery must end the log at
//! the hole and still hold everything acknowledged before the lost write was submitted.
//!
//! `SHALE_CRASH_SEEDS=N` runs N workloads instead of 2; a failure names its seed and write.

mod common;

use std::collections::BTreeMap;

use common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shale_hash::{HashOptions, HashStore, StoreMode};
use shale_io::{Damage, SimDevice};

type State = BTreeMap<Vec<u8>, Vec<u8>>;

struct Run {
    /// `states[n]`: the store after n operations.
    states: Vec<State>,
    /// `acked_at[n]`: device writes when operation n+1 was acknowledged.
    acked_at: Vec<u64>,
    /// `began_at[n]`: device writes just before operation n+1 started.
    began_at: Vec<u64>,
    /// Batches the store wrote behind others in flight.
    overlapped: u64,
}

/// One operation of a workload: a delete, or a store of this value.
fn operation(rng: &mut SmallRng, n: usize) -> (Vec<u8>, Option<Vec<u8>>) {
    let key = format!("key-{:02}", rng.gen_range(0..24)).into_bytes();
    if rng.gen_bool(0.2) {
        return (key, None);
    }
    // Mostly small; now and then a record of tens or hundreds of pages.
    let len = match rng.gen_range(0..10) {
        0 => rng.gen_range(100_000..900_000),
        1..=3 => rng.gen_range(3_000..12_000),
        _ => rng.gen_range(0..600),
    };
    let v = value(&key, n as u64, len);
    (key, Some(v))
}

fn workload(d: &SimDevice, opts: &HashOptions, seed: u64, ops: usize) -> Run {
    let store = open(d, opts);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut state = State::new();
    let mut run = Run {
        states: vec![state.clone()],
        acked_at: Vec::new(),
        began_at: Vec::new(),
        overlapped: 0,
    };
    for n in 0..ops {
        run.began_at.push(d.writes());
        match operation(&mut rng, n) {
            (key, None) => {
                store.delete(&key).unwrap();
                state.remove(&key);
            }
            (key, Some(v)) => {
                store.store(&key, &v, StoreMode::Overwrite).unwrap();
                state.insert(key, v);
            }
        }
        run.acked_at.push(d.writes());
        run.states.push(state.clone());
    }
    run
}

/// The operations submitted in windows of 1 to 12, each window waited for whole; they apply
/// in submission order, so the states are those after each prefix of submissions.
fn async_workload(d: &SimDevice, opts: &HashOptions, seed: u64, ops: usize) -> Run {
    let store = open(d, opts);
    let mut rng = SmallRng::seed_from_u64(seed ^ 0xA5);
    let mut state = State::new();
    let mut run = Run {
        states: vec![state.clone()],
        acked_at: Vec::new(),
        began_at: Vec::new(),
        overlapped: 0,
    };
    let mut n = 0;
    while n < ops {
        let window = rng.gen_range(1..=12).min(ops - n);
        let mut stores = Vec::new();
        let mut deletes = Vec::new();
        for _ in 0..window {
            run.began_at.push(d.writes());
            match operation(&mut rng, n) {
                (key, None) => {
                    deletes.push(store.submit_delete(&key).unwrap());
                    state.remove(&key);
                }
                (key, Some(v)) => {
                    stores.push(store.submit_store(&key, &v, StoreMode::Overwrite).unwrap());
                    state.insert(key, v);
                }
            }
            run.states.push(state.clone());
            n += 1;
        }
        for t in stores {
            t.wait().unwrap();
        }
        for t in deletes {
            t.wait().unwrap();
        }
        let acked = d.writes();
        run.acked_at.extend(std::iter::repeat_n(acked, window));
    }
    run.overlapped = store.stats().batches_overlapped;
    run
}

fn contents(store: &HashStore, keys: impl Iterator<Item = Vec<u8>>) -> State {
    keys.filter_map(|k| store.retrieve(&k).unwrap().map(|v| (k, v))).collect()
}

fn all_keys() -> impl Iterator<Item = Vec<u8>> {
    (0..24).map(|i| format!("key-{i:02}").into_bytes())
}

#[test]
fn every_crash_point_recovers_an_acknowledged_prefix() {
    each_mode(|| {
        enumerate("synchronous calls", workload);
    });
}

#[test]
fn every_crash_point_of_batched_submissions_recovers_an_acknowledged_prefix() {
    each_mode(|| {
        enumerate("submission windows", async_workload);
    });
}

fn enumerate(what: &str, workload: fn(&SimDevice, &HashOptions, u64, usize) -> Run) {
    let seeds: u64 =
        std::env::var("SHALE_CRASH_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(2);
    // A bounded store rebuilds its index at each crashed open, which costs more: one
    // workload by default.
    let seeds = if mode() == shale_hash::IndexMode::InMemory { seeds } else { seeds.div_ceil(2) };
    let opts = HashOptions { batches_in_flight: 3, ..small_options() };
    let mut images = 0;
    let mut overlapped = 0;
    // Whether a batch overlaps another depends on how the worker's turns meet the
    // submissions (threads): the windows workload runs more seeds, up to EXTRA_SEEDS, until
    // one did, so that a write lost in flight is always cut.
    const EXTRA_SEEDS: u64 = 30;
    let must_overlap = what == "submission windows";
    let mut seed = 0;
    while seed < seeds || (must_overlap && overlapped == 0 && seed < seeds + EXTRA_SEEDS) {
        let d = sim(8, seed);
        // Completions one reap late: the worker's batches then overlap, as on a device.
        d.set_late_completions(true);
        let run = workload(&d, &opts, seed, 60);
        d.set_late_completions(false);
        overlapped += run.overlapped;
        let writes = d.writes();
        for k in 0..=writes {
            let begun = run.began_at.iter().filter(|&&w| w < k).count();
            let mut damages: Vec<(Damage, u64)> =
                [Damage::Lose, Damage::Keep, Damage::TornLast { seed: k, torn_unit: 512 }]
                    .into_iter()
                    .map(|damage| (damage, k))
                    .collect();
            damages
                .extend(lost_in_flight(&d, k).map(|write| (Damage::LostInFlight { write }, write)));
            for (damage, kept_before) in damages {
                // Acknowledged with every write it needed kept: before the cut, or before the
                // write lost in flight arrived.
                let acked = run
                    .acked_at
                    .iter()
                    .filter(|&&w| w <= k && (kept_before == k || w < kept_before))
                    .count();
                let image = d.crash_image(k, damage);
                let crashed = SimDevice::from_image(image, 4096, seed).unwrap();
                let store = HashStore::open_device(device(&crashed), opts.clone())
                    .unwrap_or_else(|e| panic!("seed {seed} write {k} {damage:?}: open: {e}"));
                let got = contents(&store, all_keys());
                let prefix = (acked..=begun.max(acked)).find(|&p| run.states[p] == got);
                assert!(
                    prefix.is_some(),
                    "seed {seed} write {k} {damage:?}: not the state after any of ops {acked}..={begun}"
                );
                // Work goes on after recovery and survives a reopen.
                if k % 7 == 0 {
                    store.store(b"after", b"crash", StoreMode::Overwrite).unwrap();
                    drop(store);
                    let again = HashStore::open_device(device(&crashed), opts.clone()).unwrap();
                    assert_eq!(again.retrieve(b"after").unwrap(), Some(b"crash".to_vec()));
                    assert_eq!(contents(&again, all_keys()), got, "seed {seed} write {k}");
                }
                images += 1;
            }
        }
        seed += 1;
    }
    if must_overlap {
        assert!(
            overlapped > 0,
            "no batch was written behind another in {seed} workloads: nothing lost in flight \
             was cut"
        );
    }
    println!(
        "{what}: {images} crash images recovered and checked over {seed} workloads \
         ({overlapped} batches written behind others in flight)"
    );
}

/// The writes that a crash right after write `k` may have lost in flight while `k`
/// completed: those the store's queue had not reaped when `k` was submitted (the store had
/// not been told they were done, so it acknowledged nothing that needs them).
fn lost_in_flight(d: &SimDevice, k: u64) -> impl Iterator<Item = u64> {
    let lost = if k > 0 { d.unreaped_at(k) } else { Vec::new() };
    lost.into_iter()
}
