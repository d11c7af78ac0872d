//! A scripted workload for the space layer's scenario tests, and the checks a recovered volume
//! must pass.
//!
//! The workload stands in for an LSM engine: it allocates extents, fills them with data that
//! names the extent and the commit, makes the data durable, commits an edit that adds the new
//! extents and removes some live ones (a flush or a compaction), and sometimes abandons an
//! allocation (a failed flush). The "engine state" is the number of the last commit, so the
//! recovered state says exactly which prefix of commits survived.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shale_io::{AlignedBuf, DeviceRef, Queue, QueueExt, QueueOptions};
use shale_space::{Edit, Extent, IoClass, LayoutOptions, Opened, Volume, VolumeOptions};

/// A small layout that makes the version log wrap and trim often.
pub fn tiny_layout() -> LayoutOptions {
    LayoutOptions { slot_bytes: 4096, version_log_bytes: 64 << 10, wal_bytes: 8192 }
}

pub fn options(layout: LayoutOptions) -> VolumeOptions {
    VolumeOptions { layout, engine: Some(shale_space::EngineKind::Lsm), ..VolumeOptions::default() }
}

/// What the workload knows after each acknowledged commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    /// Live extents and the commit that wrote each.
    pub live: BTreeMap<Extent, u64>,
}

/// The script's record of a run.
#[derive(Debug, Default)]
pub struct Record {
    /// `states[n]`: the committed state after commit n (states[0] = empty volume).
    pub states: Vec<Committed>,
    /// `acked_at[n-1]`: device write count when commit n was acknowledged.
    pub acked_at: Vec<u64>,
    /// `began_at[n-1]`: device write count just before commit n wrote anything (its data).
    pub began_at: Vec<u64>,
}

/// Bytes of one slot's data: a 16-byte stamp (first slot, commit) repeated.
pub fn slot_data(slot_bytes: u64, first: u32, commit: u64) -> AlignedBuf {
    let mut buf = AlignedBuf::zeroed(slot_bytes as usize);
    let mut stamp = [0u8; 16];
    stamp[..4].copy_from_slice(&first.to_le_bytes());
    stamp[8..].copy_from_slice(&commit.to_le_bytes());
    for chunk in buf.chunks_mut(16) {
        chunk.copy_from_slice(&stamp[..chunk.len()]);
    }
    buf
}

/// Runs `commits` commits of a seeded workload on an open volume. `writes` reads the device's
/// write counter (the crash-point clock); `start` is the state the volume holds.
pub fn run_workload(
    volume: &Volume,
    seed: u64,
    commits: u64,
    start: Committed,
    first_commit: u64,
    writes: &dyn Fn() -> u64,
) -> Record {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut q = volume.queue(IoClass::Slot, &QueueOptions::default()).expect("slot queue");
    let slot_bytes = volume.layout().slot_bytes;
    let mut state = start;
    let mut record = Record { states: vec![state.clone()], ..Record::default() };
    let mut held: Vec<Extent> = Vec::new();
    for n in first_commit..first_commit + commits {
        if rng.gen_bool(0.15) {
            // An abandoned flush: allocated, partly written, never committed.
            if let Ok(e) = volume.allocate(rng.gen_range(1..=2)) {
                let buf = slot_data(slot_bytes, e.first, u64::MAX);
                q.write_at(volume.extent_range(e).start, buf, false).expect("write");
                volume.release(e);
            }
        }
        let began = writes();
        let mut added = Vec::new();
        for _ in 0..rng.gen_range(0..=2) {
            let Ok(e) = volume.allocate(rng.gen_range(1..=3)) else { break };
            write_extent(volume, &mut *q_ref(&mut q), e, n, slot_bytes);
            added.push(e);
        }
        let removable: Vec<Extent> = state.live.keys().copied().collect();
        let mut removed: Vec<Extent> = Vec::new();
        if !removable.is_empty() {
            for _ in 0..rng.gen_range(0..=2) {
                let e = removable[rng.gen_range(0..removable.len())];
                if !removed.contains(&e) {
                    removed.push(e);
                }
            }
        }
        if !added.is_empty() {
            q.flush().expect("flush slot data");
        }
        let mut engine_state = n.to_le_bytes().to_vec();
        // Pad the engine bytes now and then so bases and deltas of several sectors occur.
        engine_state.resize(8 + rng.gen_range(0..1500), 0xAB);
        // Sometimes keep the removed extents allocated, as the engine does while readers use
        // them, and give them back a commit later.
        let hold_removed = rng.gen_bool(0.3);
        let edit = Edit {
            removed: removed.clone(),
            added: added.clone(),
            engine: engine_state,
            hold_removed,
        };
        let full = edit.engine.clone();
        volume.commit(&edit, &mut || full.clone()).expect("commit");
        for e in held.drain(..) {
            volume.release(e);
        }
        if hold_removed {
            held = removed.clone();
        }
        for e in &removed {
            state.live.remove(e);
        }
        for e in &added {
            state.live.insert(*e, n);
        }
        record.began_at.push(began);
        record.acked_at.push(writes());
        record.states.push(state.clone());
    }
    record
}

fn q_ref(q: &mut shale_space::VolumeQueue) -> &mut dyn Queue {
    q
}

fn write_extent(volume: &Volume, q: &mut dyn Queue, e: Extent, commit: u64, slot_bytes: u64) {
    for i in 0..e.count {
        let offset = volume.extent_range(e).start + u64::from(i) * slot_bytes;
        let buf = slot_data(slot_bytes, e.first, commit);
        q.write_at(offset, buf, false).expect("write slot");
    }
}

/// The commit number a recovered volume holds (0 = no commit survived).
pub fn recovered_commit(opened: &Opened) -> u64 {
    let v = &opened.versions;
    let bytes = v.deltas.last().map(|d| &d.engine).unwrap_or(&v.base.engine);
    if bytes.is_empty() { 0 } else { u64::from_le_bytes(bytes[..8].try_into().unwrap()) }
}

/// Checks a recovered volume against the record: the recovered commit lies between the last
/// acknowledged one and the last begun one, its live extents are exactly that commit's, their
/// data is the data that commit wrote, and every slot is free or live exactly once.
pub fn check_recovered(opened: &Opened, record: &Record, crash_at: u64, first_commit: u64) -> u64 {
    let n = recovered_commit(opened);
    let acked = record.acked_at.iter().filter(|&&w| w <= crash_at).count() as u64;
    let began = record.began_at.iter().filter(|&&w| w < crash_at).count() as u64;
    let base = first_commit - 1;
    assert!(
        n >= base + acked && n <= base + began.max(acked),
        "crash after write {crash_at}: recovered commit {n}, acknowledged {}, begun {}",
        base + acked,
        base + began
    );
    let expected = &record.states[(n - base) as usize];
    let volume = &opened.volume;
    let live: Vec<Extent> = volume.live_extents();
    assert_eq!(
        live,
        expected.live.keys().copied().collect::<Vec<_>>(),
        "live extents after commit {n}"
    );
    volume.check_slots().expect("slot map invariants");
    let usage = volume.slot_usage();
    assert_eq!(usage.pending, 0, "pending allocations survived a reopen");
    assert_eq!(usage.live, live.iter().map(|e| e.count).sum::<u32>());
    let mut q = volume.queue(IoClass::Slot, &QueueOptions::default()).expect("queue");
    let slot_bytes = volume.layout().slot_bytes;
    for (e, &commit) in &expected.live {
        let range = volume.extent_range(*e);
        let data = q.read_at(range.start, (range.end - range.start) as usize).expect("read");
        let want = slot_data(slot_bytes, e.first, commit);
        for chunk in data.chunks(slot_bytes as usize) {
            assert!(chunk == &want[..], "extent {e:?} of commit {commit} holds other data");
        }
    }
    n
}

/// Opens a volume, panicking with the error.
pub fn open(device: DeviceRef, layout: &LayoutOptions) -> Opened {
    Volume::open(device, &options(layout.clone())).unwrap_or_else(|e| panic!("open: {e}"))
}

pub fn arc<D: shale_io::Device + 'static>(d: D) -> DeviceRef {
    Arc::new(d)
}
