//! Crash-point enumeration for the WAL on the simulated device: random batches (some spanning
//! several pages), random sync flags, memtable switches (seal a group, start the next) and
//! flushes (free the oldest group or two; a group freed beyond the one kept allocated is released,
//! a write of zeros). After a power cut at every device write, in several damage
//! variants, recovery must return a prefix of the appended batches with no hole, containing
//! every batch acknowledged with sync (P1, P3); under `Damage::Keep`, which is what a killed
//! process leaves (every completed write reached the device), every acknowledged batch (P2).
//!
//! The pipelined runs append sync batches as the engine's pipeline does (`wal/pipeline.rs`):
//! packed with `stage_sync`, up to 2 or 3 tickets in flight, each written by a thread of its
//! own on one of 2 or 3 logger queues, the threads started in a shuffled order (a later
//! group's pages often reach the device before an earlier group's), each batch acknowledged
//! only once its turn came. A crash between the two must never yield an acknowledged batch
//! after a hole.

use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use shale_io::AlignedBuf;
use shale_io::{Damage, DeviceRef, QueueOptions, SimDevice};
use shale_lsm::batch::{WriteBatch, decode};
use shale_lsm::wal::{AppendError, LogPipeline, WalLayout, WalWriter, recover};
use shale_space::{IoClass, Volume, VolumeOptions};

const GROUPS: u32 = 3;

struct Appended {
    seq: u64,
    ltn: u64,
    sync: bool,
    acked_at: u64,
}

struct Run {
    batches: Vec<Appended>,
    /// (write count, oldest unflushed LTN from then on)
    flushed: Vec<(u64, u64)>,
    /// Groups whose storage the writer released.
    releases: u64,
}

fn layout_of(volume: &Volume) -> WalLayout {
    let l = volume.layout();
    WalLayout::new(l.wal_offset, 64 * 4096 + 2 * 4096, GROUPS).unwrap()
}

fn batch_for(seq: u64, rng: &mut SmallRng) -> WriteBatch {
    let mut b = WriteBatch::new();
    let value_len =
        if rng.gen_bool(0.1) { rng.gen_range(4000..12000) } else { rng.gen_range(1..300) };
    b.put(&seq.to_le_bytes(), &vec![(seq % 251) as u8; value_len]);
    b
}

/// Memtable switch: seal this group; if none is free, "flush" the oldest first, or the two
/// oldest, so that more than one group is free and the writer releases one beyond the one it
/// keeps allocated (a write of zeros on the simulated device). The flush's version edit is
/// durable before the groups are freed. Then start generation `ltn + 1`.
fn switch_group(
    wal: &mut WalWriter,
    dev: &SimDevice,
    rng: &mut SmallRng,
    run: &mut Run,
    live_ltns: &mut Vec<u64>,
    ltn: &mut u64,
) {
    wal.seal_group().unwrap();
    if !wal.has_free_group() {
        let flushed = if rng.gen_bool(0.5) { 2 } else { 1 };
        let oldest: Vec<u64> = live_ltns.drain(..flushed).collect();
        run.flushed.push((dev.writes(), live_ltns.first().copied().unwrap_or(*ltn + 1)));
        let before = dev.stats().releases;
        for old in oldest {
            wal.free_group(old).unwrap();
        }
        run.releases += dev.stats().releases - before;
    }
    *ltn += 1;
    live_ltns.push(*ltn);
    wal.start_group(*ltn).unwrap().expect("a group was freed");
}

fn workload(dev: &SimDevice, volume: &Volume, seed: u64, batches: u64) -> Run {
    let mut rng = SmallRng::seed_from_u64(seed);
    let layout = layout_of(volume);
    let queue =
        volume.queue(IoClass::Wal, &QueueOptions { depth: 8, ..Default::default() }).unwrap();
    let mut wal = WalWriter::new(
        layout,
        Box::new(queue),
        volume.device().clone(),
        shale_lsm::wal::meta::WalMeta::empty(GROUPS, layout.pages_per_group),
    );
    let mut ltn = 1;
    let mut live_ltns = vec![ltn];
    wal.start_group(ltn).unwrap().unwrap();
    let mut run = Run { batches: Vec::new(), flushed: vec![(0, 1)], releases: 0 };
    for seq in 1..=batches {
        let sync = rng.gen_bool(0.3);
        let rec = batch_for(seq, &mut rng).encode(seq);
        loop {
            match wal.append(&[&rec], sync) {
                Ok(()) => break,
                Err(AppendError::GroupFull) => {}
                Err(AppendError::Failed(e)) => panic!("append: {e}"),
            }
            switch_group(&mut wal, dev, &mut rng, &mut run, &mut live_ltns, &mut ltn);
        }
        run.batches.push(Appended { seq, ltn, sync, acked_at: dev.writes() });
    }
    run
}

/// A sync batch packed for the pipeline and not yet acknowledged.
struct Staged {
    seq: u64,
    ltn: u64,
    ticket: u64,
    pages: Vec<(u64, AlignedBuf)>,
}

/// Runs the staged tickets as concurrent leaders would: a thread each, started in a shuffled
/// order (so a later group's pages often reach the device first), each writing its pages on
/// a logger, waiting for its turn, acknowledging (recording the device's write count then)
/// and publishing.
fn drain(
    pipe: &LogPipeline,
    staged: &mut Vec<Staged>,
    run: &mut Run,
    dev: &SimDevice,
    rng: &mut SmallRng,
) {
    let mut order: Vec<Staged> = std::mem::take(staged);
    order.shuffle(rng);
    let acked = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for s in order {
            let (acked, pipe) = (&acked, pipe);
            scope.spawn(move || {
                let logger = pipe.acquire();
                assert!(logger.is_some(), "a logger is allowed");
                pipe.write(logger, s.ticket, s.pages);
                pipe.wait_turn(s.ticket).unwrap();
                acked.lock().unwrap().push(Appended {
                    seq: s.seq,
                    ltn: s.ltn,
                    sync: true,
                    acked_at: dev.writes(),
                });
                pipe.published(s.ticket);
            });
            // Let it start before the next one, mostly.
            std::thread::yield_now();
        }
    });
    let mut acked = acked.into_inner().unwrap();
    acked.sort_by_key(|a| a.seq);
    run.batches.extend(acked);
}

/// As [`workload`], with sync batches through a pipeline of `loggers` logger queues.
fn pipelined_workload(
    dev: &SimDevice,
    volume: &Volume,
    seed: u64,
    batches: u64,
    loggers: usize,
) -> Run {
    let mut rng = SmallRng::seed_from_u64(seed);
    let layout = layout_of(volume);
    let queue_opts = QueueOptions { depth: 8, ..Default::default() };
    let mut wal = WalWriter::new(
        layout,
        Box::new(volume.queue(IoClass::Wal, &queue_opts).unwrap()),
        volume.device().clone(),
        shale_lsm::wal::meta::WalMeta::empty(GROUPS, layout.pages_per_group),
    );
    let queues: Vec<Box<dyn shale_io::Queue>> = (0..loggers)
        .map(|_| {
            Box::new(volume.queue(IoClass::Wal, &queue_opts).unwrap()) as Box<dyn shale_io::Queue>
        })
        .collect();
    let pipe = LogPipeline::new(queues, false);
    let mut ltn = 1;
    let mut live_ltns = vec![ltn];
    wal.start_group(ltn).unwrap().unwrap();
    let mut run = Run { batches: Vec::new(), flushed: vec![(0, 1)], releases: 0 };
    let mut staged: Vec<Staged> = Vec::new();
    for seq in 1..=batches {
        let sync = rng.gen_bool(0.7);
        let rec = batch_for(seq, &mut rng).encode(seq);
        loop {
            // As the engine does: pages staged next claim what has published durable.
            wal.tickets_published_below(pipe.published_below());
            let attempt = if sync { wal.stage_sync(&[&rec]) } else { Ok(None) };
            let appended = match attempt {
                Ok(Some(pages)) => {
                    let ticket = pipe.begin();
                    wal.staged_as(ticket);
                    staged.push(Staged { seq, ltn, ticket, pages });
                    if staged.len() >= rng.gen_range(1..=loggers) {
                        drain(&pipe, &mut staged, &mut run, dev, &mut rng);
                    }
                    break;
                }
                Ok(None) => {
                    // The engine drains the pipeline before an append it cannot stage.
                    drain(&pipe, &mut staged, &mut run, dev, &mut rng);
                    wal.staged_pages_durable();
                    wal.append(&[&rec], sync)
                }
                Err(e) => Err(e),
            };
            match appended {
                Ok(()) => {
                    run.batches.push(Appended { seq, ltn, sync, acked_at: dev.writes() });
                    break;
                }
                Err(AppendError::GroupFull) => {}
                Err(AppendError::Failed(e)) => panic!("append: {e}"),
            }
            // Memtable switch, after the pipeline drained (as `switch_memtable` waits).
            drain(&pipe, &mut staged, &mut run, dev, &mut rng);
            wal.staged_pages_durable();
            switch_group(&mut wal, dev, &mut rng, &mut run, &mut live_ltns, &mut ltn);
        }
    }
    drain(&pipe, &mut staged, &mut run, dev, &mut rng);
    run
}

fn oldest_unflushed(run: &Run, k: u64) -> u64 {
    // The engine learns the oldest unflushed LTN from its committed version; a flush's
    // version commits before its group is freed, so at crash point k every flush decided at
    // or before k counts.
    run.flushed.iter().filter(|(w, _)| *w <= k).map(|(_, l)| *l).max().unwrap()
}

fn check(run: &Run, image: Vec<u8>, k: u64, keep: bool, layout: WalLayout) -> usize {
    let dev: DeviceRef = Arc::new(SimDevice::from_image(image, 4096, 0).unwrap());
    let mut q = dev.open_queue(&QueueOptions::default()).unwrap();
    let min_ltn = oldest_unflushed(run, k);
    let (_, groups) =
        recover(&layout, &mut *q, min_ltn).unwrap_or_else(|e| panic!("crash at {k}: {e}"));
    let mut seqs = Vec::new();
    for g in &groups {
        for rec in &g.records {
            let b = decode(rec, 0).unwrap();
            assert_eq!(b.ops.len(), 1);
            assert_eq!(b.ops[0].key, &b.first_seq.to_le_bytes(), "record content");
            assert!(b.ops[0].value.iter().all(|&x| x == (b.first_seq % 251) as u8));
            seqs.push(b.first_seq);
        }
    }
    // Expected: the batches of unflushed generations, in order; recovered must be a prefix.
    let expected: Vec<&Appended> = run.batches.iter().filter(|a| a.ltn >= min_ltn).collect();
    assert!(seqs.len() <= expected.len(), "crash at {k}: more records than appended");
    for (got, want) in seqs.iter().zip(&expected) {
        assert_eq!(*got, want.seq, "crash at {k}: hole or reordering in the recovered WAL");
    }
    let must =
        expected.iter().rposition(|a| a.acked_at <= k && (keep || a.sync)).map_or(0, |i| i + 1);
    assert!(
        seqs.len() >= must,
        "crash at {k} (keep={keep}): {} records recovered, {must} were acknowledged{}",
        seqs.len(),
        if keep { "" } else { " with sync" }
    );
    1
}

/// Checks every crash point of `run` in four damage variants; returns the images checked.
fn enumerate(dev: &SimDevice, run: &Run, start: u64, seed: u64, layout: WalLayout) -> usize {
    let mut images = 0;
    for k in start..=dev.writes() {
        let s = seed * 1_000_003 + k;
        for (damage, keep) in [
            (Damage::Lose, false),
            (Damage::Keep, true),
            (Damage::Random { seed: s, torn_unit: 512 }, false),
            (Damage::TornLast { seed: s, torn_unit: 512 }, false),
        ] {
            images += check(run, dev.crash_image(k, damage), k, keep, layout);
        }
    }
    images
}

fn seeds() -> u64 {
    std::env::var("SHALE_CRASH_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(2)
}

#[test]
fn every_crash_point_recovers_an_acknowledged_prefix() {
    let mut images = 0;
    for seed in 0..seeds() {
        let dev = SimDevice::new(8 << 20, 4096, seed).unwrap();
        let opened =
            Volume::open(Arc::new(dev.clone()), &VolumeOptions::small_for_tests()).unwrap();
        let layout = layout_of(&opened.volume);
        let start = dev.writes();
        let run = workload(&dev, &opened.volume, seed, 300);
        assert!(run.flushed.len() > 2, "the workload must recycle groups");
        assert!(run.releases > 0, "the workload must release groups");
        images += enumerate(&dev, &run, start, seed, layout);
    }
    println!("WAL crash enumeration: {images} crash images checked, 0 violations");
    assert!(images > 1000);
}

#[test]
fn pipelined_sync_appends_never_acknowledge_a_write_after_a_hole() {
    let mut images = 0;
    for loggers in [2, 3] {
        for seed in 0..seeds() {
            let dev = SimDevice::new(8 << 20, 4096, seed).unwrap();
            let opened =
                Volume::open(Arc::new(dev.clone()), &VolumeOptions::small_for_tests()).unwrap();
            let layout = layout_of(&opened.volume);
            let start = dev.writes();
            let run = pipelined_workload(&dev, &opened.volume, seed, 300, loggers);
            assert!(run.flushed.len() > 2, "the workload must recycle groups");
            let sync = run.batches.iter().filter(|b| b.sync).count();
            assert!(sync > 150, "most batches go through the pipeline: {sync}");
            images += enumerate(&dev, &run, start, seed, layout);
        }
    }
    println!("pipelined WAL crash enumeration: {images} crash images checked, 0 violations");
    assert!(images > 1000);
}
