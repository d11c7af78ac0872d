//! Crash-point enumeration: a scripted workload of commits (with wraps and trims of a tiny
//! version log, extents allocated, freed and abandoned) runs on the simulated device; then a
//! power cut is simulated after every single device write, in several damage variants, and
//! each crash image is recovered and checked:
//! - every acknowledged commit is present, nothing after an unbegun one is (prefix, P1/P3);
//! - the live extents are exactly the recovered commit's, and hold its data;
//! - no slot is both free and live, none leaked, none pending;
//! - recovery writes nothing but the repair of each copy the crash tore (one mirror's
//!   anchor or object) from its valid twin, and opening the image again finds nothing to
//!   repair and gives the same state;
//! - work continued after recovery (giving back free storage, overwriting the torn tail)
//!   survives crashes too; the version log gives back its ring behind each new base, and
//!   those releases (unsynced zero writes on the simulated device) are crash points as well.
//!
//! `SHALE_CRASH_SEEDS=N` runs N scenarios instead of the default; a failure names its seed.

mod common;

use common::*;
use shale_io::{Damage, DeviceRef, SimDevice};
use shale_space::LayoutOptions;

/// Damage variants applied at every crash point.
fn damages(k: u64, seed: u64, sector: u32) -> [Damage; 5] {
    let s = seed.wrapping_mul(1_000_003).wrapping_add(k);
    [
        Damage::Lose,
        Damage::Keep,
        Damage::Random { seed: s, torn_unit: 512 },
        Damage::Random { seed: s ^ 0x5EED, torn_unit: sector.max(4096) },
        Damage::TornLast { seed: s, torn_unit: 512 },
    ]
}

struct Tally {
    images: u64,
    nested_images: u64,
    trims: u64,
    wraps: u64,
}

/// The log state without the counters that only describe this open.
fn durable_part(mut s: shale_space::LogState) -> shale_space::LogState {
    s.wraps_since_open = 0;
    s.trims_since_open = 0;
    s
}

fn sim_ref(d: &SimDevice) -> DeviceRef {
    arc(d.clone())
}

/// Recovers one crash image and checks it; returns the reopened device and commit number.
fn recover_and_check(
    image: Vec<u8>,
    sector: u32,
    seed: u64,
    layout: &LayoutOptions,
    record: &Record,
    crash_at: u64,
    first_commit: u64,
) -> (SimDevice, u64) {
    let dev = SimDevice::from_image(image, sector, seed).unwrap();
    let opened = open(sim_ref(&dev), layout);
    if !opened.created {
        // Recovery writes nothing but the repair of a copy torn by the crash (one mirror's
        // anchor or object, one header copy), one write per copy, from its valid twin.
        let damaged = opened.volume.damaged_copies();
        assert!(damaged.iter().all(|d| d.repaired), "seed {seed}, crash {crash_at}: {damaged:?}");
        assert_eq!(
            dev.writes(),
            damaged.len() as u64,
            "recovery wrote more than its repairs (seed {seed}, crash {crash_at}): {damaged:?}"
        );
    }
    let n = check_recovered(&opened, record, crash_at, first_commit);
    let mut state = opened.volume.log_state();
    drop(opened);
    // A crash during (or right after) recovery: opening again must give the same state.
    let again = open(sim_ref(&dev), layout);
    assert_eq!(
        again.volume.damaged_copies(),
        &[],
        "a repaired copy was found damaged again (seed {seed}, crash {crash_at})"
    );
    let again_state = durable_part(again.volume.log_state());
    state = durable_part(state);
    assert_eq!(again_state, state, "second recovery differs (seed {seed}, crash {crash_at})");
    assert_eq!(recovered_commit(&again), n);
    (dev, n)
}

fn scenario(seed: u64, sector: u32, commits: u64, tally: &mut Tally) {
    let layout = tiny_layout();
    let dev = SimDevice::new(1 << 20, sector, seed).unwrap();
    let opened = open(sim_ref(&dev), &layout);
    let empty = Committed { live: Default::default() };
    let record = run_workload(&opened.volume, seed, commits, empty, 1, &|| dev.writes());
    let state = opened.volume.log_state();
    // Trims gave back the ring before each new base, so these crash images include releases.
    assert!(
        opened.volume.version_log_held_bytes() < state.ring_bytes,
        "the version log held its whole ring (seed {seed})"
    );
    tally.trims += state.trims_since_open;
    tally.wraps += state.wraps_since_open;
    drop(opened);
    let total = dev.writes();
    for k in 0..=total {
        for damage in damages(k, seed, sector) {
            let image = dev.crash_image(k, damage);
            let (after, n) = recover_and_check(image, sector, seed, &layout, &record, k, 1);
            tally.images += 1;
            // Now and then, go on working on the recovered volume and crash that too.
            if k % 17 == 3 && matches!(damage, Damage::Random { .. } | Damage::TornLast { .. }) {
                continue_and_crash(after, n, &record, seed ^ k, sector, &layout, tally);
            }
        }
    }
}

fn continue_and_crash(
    dev: SimDevice,
    n: u64,
    record: &Record,
    seed: u64,
    sector: u32,
    layout: &LayoutOptions,
    tally: &mut Tally,
) {
    let opened = open(sim_ref(&dev), layout);
    let start_writes = dev.writes();
    // What the engine does once its recovery is done: give back free slots and the version
    // log's ring outside the live chain (releases are unsynced zero writes here, so the crash
    // points below fall before, between and after them).
    opened.volume.release_free_storage().unwrap();
    let start = record.states[n as usize].clone();
    let more = run_workload(&opened.volume, seed, 6, start, n + 1, &|| dev.writes());
    drop(opened);
    for k in start_writes..=dev.writes() {
        let image = dev.crash_image(k, Damage::Random { seed: seed ^ k, torn_unit: 512 });
        recover_and_check(image, sector, seed, layout, &more, k, n + 1);
        tally.nested_images += 1;
    }
}

#[test]
fn every_crash_point_recovers_a_committed_prefix() {
    let seeds: u64 =
        std::env::var("SHALE_CRASH_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(8);
    let mut tally = Tally { images: 0, nested_images: 0, trims: 0, wraps: 0 };
    for seed in 0..seeds {
        let sector = if seed % 2 == 0 { 512 } else { 4096 };
        scenario(seed, sector, 110, &mut tally);
    }
    println!(
        "crash enumeration: {} crash images checked ({} at every write of {seeds} scenarios x 5 \
         damage variants, {} after continuing on a recovered volume); {} trims, {} wraps; 0 violations",
        tally.images + tally.nested_images,
        tally.images,
        tally.nested_images,
        tally.trims,
        tally.wraps
    );
    assert!(tally.images + tally.nested_images >= 10_000, "fewer than 10,000 images checked");
    assert!(tally.trims > 0 && tally.wraps > 0, "scenarios must trim and wrap the version log");
}
