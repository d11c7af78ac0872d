//! A device that cannot grow, with its free slots left only in short runs: flushes and
//! compactions cut their outputs to the runs there are (`OutputSst::is_full_after`) instead of
//! stopping the store with free space left ("no run of N free slots"), and nothing is lost.
//!
//! The runs are made short by taking every free slot of the volume as a one-slot extent and
//! giving back every other one, so the store sees free slots in runs of one and nothing longer.

mod common;

use std::sync::Arc;

use shale_io::SimDevice;
use shale_lsm::{Db, Options};
use shale_space::Extent;

/// 1 MiB memtables (16 slots of 64 KiB), compaction only when asked for.
fn options() -> Options {
    let mut o = common::small_options();
    o.write_buffer_bytes = 1 << 20;
    o.target_file_size_base = 256 << 10;
    // With dynamic level sizes L0 is also compacted by its bytes (one 1 MiB flush is past
    // the base level's 256 KiB), which raced the check of the flushes' outputs in L0: scored
    // by its file count alone, it waits for compact_range.
    o.dynamic_level_bytes = false;
    o.level0_file_num_compaction_trigger = 1000;
    o.level0_slowdown_writes_trigger = 1000;
    o.level0_stop_writes_trigger = 1000;
    // Room in the WAL for whole memtables: a full WAL area would flush them early.
    o.volume.layout.wal_bytes = 8 << 20;
    o
}

const KEYS: u32 = 3000;

fn key(i: u32) -> Vec<u8> {
    format!("key{:06}", i * 7919 % KEYS).into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    format!("{i}/{round}:").into_bytes().into_iter().cycle().take(600).collect()
}

/// Takes every free slot as a one-slot extent, then gives back every other one; returns the
/// extents kept, to be given back at the end.
fn fragment(db: &Db) -> Vec<Extent> {
    let volume = db.volume();
    let mut taken = Vec::new();
    while let Ok(e) = volume.allocate(1) {
        taken.push(e);
    }
    let mut kept = Vec::new();
    for (n, e) in taken.into_iter().enumerate() {
        if n % 2 == 0 { volume.release(e) } else { kept.push(e) }
    }
    let u = volume.slot_usage();
    assert_eq!(u.largest_free_run, 1, "{u:?}");
    assert!(u.free > 64, "too few free slots for the test: {u:?}");
    kept
}

fn verify(db: &Db, round: u32, when: &str) {
    for i in 0..KEYS {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i, round)), "{when}: key {i}");
    }
}

#[test]
fn flushes_and_compactions_cut_their_outputs_to_the_free_runs_there_are() {
    let sim = SimDevice::new(48 << 20, 4096, 1).unwrap();
    let db = Db::open_device(Arc::new(sim.clone()), options()).unwrap();
    let kept = fragment(&db);

    // About 1.8 MiB of writes: at least one flush of a whole 1 MiB memtable, which needs 17
    // slots and finds runs of one.
    for round in 0..2 {
        for i in 0..KEYS {
            db.put(&key(i), &value(i, round)).unwrap();
        }
    }
    db.flush().unwrap();
    let s = db.stats();
    assert_eq!(s.stopped, None);
    assert!(s.flushes >= 2, "{s:?}");
    assert!(
        s.files_per_level[0] as u64 > s.flushes,
        "no flush was cut into several SSTs: {} L0 SSTs from {} flushes: {s:?}",
        s.files_per_level[0],
        s.flushes
    );
    assert_eq!(s.sst_relocations, 0, "an output outgrew its reservation: {s:?}");
    verify(&db, 1, "after the flushes");

    // Compaction outputs (256 KiB targets) are cut to the one-slot runs too.
    db.compact_range().unwrap();
    let s = db.stats();
    assert_eq!(s.stopped, None);
    assert_eq!(s.files_per_level[0], 0, "{s:?}");
    let deeper: usize = s.files_per_level[1..].iter().sum();
    let bytes: u64 = s.bytes_per_level.iter().sum();
    assert!(deeper as u64 >= bytes / (64 << 10), "outputs larger than a slot: {s:?}");
    verify(&db, 1, "after the compaction");
    db.check().unwrap();

    // The held slots go back; the store reopens whole, and its slot map accounts for them.
    for e in kept {
        db.volume().release(e);
    }
    db.close().unwrap();
    let db = Db::open_device(Arc::new(sim), options()).unwrap();
    verify(&db, 1, "after reopening");
    db.check().unwrap();
}
