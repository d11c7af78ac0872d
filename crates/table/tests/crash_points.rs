//! Crash-point enumeration: a scripted workload of transactions (inserts, in-place updates
//! of fixed columns and of a row spanning two blocks, moves, erases, aborts, enough rows for
//! new segments and enough before-images to wrap the undo log's ring and reclaim it in
//! batches) runs on the simulated device beside simulated persistent memory. Then a power
//! cut is simulated at every device write and after every persist of the persistent memory:
//! the device image drops or tears unsynced writes (one damage variant per point, in turn),
//! the persistent memory keeps or loses each unpersisted line by a seed. Each pair is
//! recovered and checked:
//! - every transaction whose commit returned is there, whole (P1);
//! - nothing of a transaction that had not begun to commit is there, and the store equals
//!   the state after some prefix of the transactions (P3);
//! - the recovered store takes a new transaction, and keeps it across a reopen.
//!
//! A second script runs transactions larger than the persistent memory's ring, so that the
//! undo log spills to the volume (committed, aborted, and beside small ones), and is cut
//! the same way: spilled records are written with FUA (packed, before the next block write,
//! and with each expiry), so every point between two writes of the spill area is a device
//! write.
//!
//! `SHALE_CRASH_SEEDS=N` checks N damage variants per point instead of 3.

mod common;

use std::collections::BTreeMap;

use common::*;
use shale_io::{Damage, SimDevice};
use shale_table::{Isolation, SimPmem, TableOptions, TableStore, UndoLogPlace};

type Rows = BTreeMap<Vec<u8>, (Vec<u8>, u64)>;

/// A transaction of the script: its changes, and whether it commits.
enum Op {
    Insert(u64, usize),
    Text(u64, usize),
    N(u64),
    Erase(u64),
    /// The reclaiming pass, run while the transaction is open.
    Reclaim,
}

struct Txn {
    ops: Vec<Op>,
    commit: bool,
}

fn script() -> Vec<Txn> {
    use Op::*;
    let t = |ops: Vec<Op>, commit| Txn { ops, commit };
    let mut s = vec![
        // Row 3 spans two blocks (5000 bytes of text in 4064-byte payloads).
        t(vec![Insert(1, 100), Insert(2, 3000), Insert(3, 5000), Insert(4, 50)], true),
        t(vec![N(2)], true),
        // In place: the spanning row and a small one, in one transaction.
        t(vec![Text(3, 4990), N(1)], true),
        // A move (the text outgrows its slot) and an erase, aborted.
        t(vec![Text(4, 2000), Erase(2)], false),
        t(vec![Erase(1)], true),
        t(vec![Text(3, 5000), Insert(5, 700)], false),
    ];
    // Enough rows for new segments (16 blocks each), a few per transaction.
    for i in 0..8 {
        s.push(t(
            vec![Insert(10 + 3 * i, 3500), Insert(11 + 3 * i, 3500), Insert(12 + 3 * i, 400)],
            true,
        ));
    }
    // Before-images of about 5 KiB each: the 64 KiB ring wraps and is reclaimed.
    for i in 0..14 {
        let commit = i % 4 != 3;
        s.push(t(vec![Text(3, 4000 + i * 70), N(10 + i as u64)], commit));
    }
    s.push(t(vec![Text(4, 6000), Erase(12), Erase(2), Insert(2, 10)], true));
    s
}

/// Rows erased, their space found by the reclaiming pass and taken by new rows (committed,
/// aborted, updated in place and moved into a reclaimed slot, erased again), and an erase
/// not yet committed whose slot the pass must leave alone.
fn reclaim_script() -> Vec<Txn> {
    use Op::*;
    let t = |ops: Vec<Op>, commit| Txn { ops, commit };
    vec![
        t((0..20).map(|i| Insert(i, 900)).collect(), true),
        t((0..20).filter(|i| i % 2 == 0).map(Erase).collect(), true),
        t(vec![Erase(1), Erase(3)], false),
        t(vec![Reclaim, Insert(30, 900), Insert(31, 850), Insert(32, 900)], true),
        t(vec![Reclaim, Insert(33, 900), Insert(34, 800), Text(31, 840), N(33)], false),
        // Erased here and so not free to the pass run after it: 36 is appended.
        t(vec![Erase(5), Reclaim, Insert(35, 900), Insert(36, 1500), Text(30, 890)], true),
        t(vec![Reclaim, Erase(36), Erase(31), Insert(37, 900), Insert(41, 1400)], true),
        // Moves: a row outgrows its slot and takes a reclaimed one (36's, then 41's).
        t(vec![Reclaim, Text(7, 1200), Insert(38, 880), Insert(39, 900), Erase(41)], true),
        t(vec![Reclaim, Text(11, 1300), Erase(38), Insert(40, 700)], false),
        t(vec![Reclaim, Text(11, 1300), N(39)], true),
    ]
}

/// Transactions of 14 before-images of about 5 KiB: more than the 64 KiB ring holds.
fn spill_script() -> Vec<Txn> {
    use Op::*;
    let t = |ops: Vec<Op>, commit| Txn { ops, commit };
    let rows = 0..14u64;
    vec![
        t(rows.clone().map(|i| Insert(i, 5000)).collect(), true),
        t(rows.clone().map(|i| Text(i, 4990)).collect(), true),
        // Aborted: the spilled before-images are written back by the abort.
        t(rows.clone().map(|i| Text(i, 4980)).chain([Erase(3), Insert(20, 300)]).collect(), false),
        // Records of one row in both logs (erased, inserted anew, updated): rolled back in
        // order at a crash.
        t(
            rows.clone()
                .map(|i| Text(i, 5000))
                .chain([Erase(5), Insert(5, 100), Text(5, 90), Insert(21, 4000)])
                .collect(),
            true,
        ),
        t(rows.clone().map(N).collect(), true),
        t(rows.map(|i| Text(i, 4000)).chain([Erase(21)]).collect(), true),
    ]
}

/// A moment of the run: device writes and persistent memory events so far.
type Moment = (u64, usize);

struct Run {
    /// `states[n]`: the rows after the n-th committed transaction.
    states: Vec<Rows>,
    /// Per transaction: (device writes, persistent memory events) when it began and when
    /// it returned, and whether it committed.
    spans: Vec<(Moment, Moment, bool)>,
    /// Records the undo log spilled to the volume.
    spilled: u64,
    /// Rows placed into reclaimed space.
    reused: u64,
}

fn opts() -> TableOptions {
    TableOptions { reclaim_batch: 3, ..small_options() }
}

fn workload(d: &SimDevice, p: &SimPmem, script: Vec<Txn>, o: &TableOptions) -> Run {
    let store = open(d, p, o);
    let t = store.create_table("t", schema()).unwrap();
    let mut rows = Rows::new();
    let mut run = Run { states: vec![rows.clone()], spans: Vec::new(), spilled: 0, reused: 0 };
    for (v, txn) in script.into_iter().enumerate() {
        let v = v as u64 + 1;
        let began = (d.writes(), p.events());
        let mut view = rows.clone();
        let mut tx = store.begin(Isolation::ReadCommitted);
        for op in txn.ops {
            match op {
                Op::Insert(i, len) => {
                    let x = text(&key(i), v, len);
                    tx.insert(t, &row(&key(i), &x, v)).unwrap();
                    view.insert(key(i), (x, v));
                }
                Op::Text(i, len) => {
                    let x = text(&key(i), v, len);
                    tx.update(t, &key(i), "text", &x).unwrap();
                    view.get_mut(&key(i)).unwrap().0 = x;
                }
                Op::N(i) => {
                    tx.update(t, &key(i), "n", &v.to_le_bytes()).unwrap();
                    view.get_mut(&key(i)).unwrap().1 = v;
                }
                Op::Erase(i) => {
                    tx.erase(t, &key(i)).unwrap();
                    view.remove(&key(i));
                }
                Op::Reclaim => {
                    store.reclaim_space().unwrap();
                }
            }
        }
        if txn.commit {
            tx.commit().unwrap();
            rows = view;
            run.states.push(rows.clone());
        } else {
            tx.abort().unwrap();
        }
        run.spans.push((began, (d.writes(), p.events()), txn.commit));
    }
    let stats = store.stats();
    assert!(stats.undo.reclaimed + stats.spill.reclaimed > 20, "{stats:?}");
    run.spilled = stats.spill.appended;
    run.reused = stats.reused;
    run
}

fn contents(store: &TableStore) -> Option<Rows> {
    let t = store.table_id("t")?;
    let rows = all_rows(store, t);
    // The ordered index, rebuilt by the recovery, serves ranges as it serves the whole.
    check_ranges(store, t, &rows);
    Some(
        rows.into_iter()
            .map(|r| {
                (r[0].clone(), (r[1].clone(), u64::from_le_bytes(r[2][..].try_into().unwrap())))
            })
            .collect(),
    )
}

/// The states the store may hold after a crash after device write `k` and persistent
/// memory event `cut`.
fn allowed(run: &Run, k: u64, cut: usize) -> Vec<usize> {
    let mut done = 0;
    for &(began, returned, commit) in &run.spans {
        if k >= returned.0 && cut >= returned.1 {
            done += usize::from(commit);
        } else {
            if (k > began.0 || cut > began.1) && commit {
                return vec![done, done + 1];
            }
            break;
        }
    }
    vec![done]
}

fn damage(variant: u64, seed: u64) -> Damage {
    match variant % 4 {
        0 => Damage::Random { seed, torn_unit: 512 },
        1 => Damage::Lose,
        2 => Damage::TornLast { seed, torn_unit: 512 },
        _ => Damage::Keep,
    }
}

#[test]
fn every_crash_point_recovers_a_prefix_of_committed_transactions() {
    let checked = every_crash_point(script(), 11);
    assert!(checked > 600);
}

#[test]
fn every_crash_point_over_space_reclamation_recovers_a_prefix_of_committed_transactions() {
    let checked = every_crash_point(reclaim_script(), 15);
    assert!(checked > 300);
}

/// The first script with the index in pages past 4 entries: their writes are among the
/// device writes cut, and the open rebuilds them.
#[test]
fn every_crash_point_with_index_pages_recovers_a_prefix_of_committed_transactions() {
    let o = TableOptions { index_memory_entries: Some(4), ..opts() };
    let checked = every_crash_point_with(script(), 17, &o);
    assert!(checked > 600);
}

#[test]
fn every_crash_point_over_log_spill_recovers_a_prefix_of_committed_transactions() {
    let checked = every_crash_point(spill_script(), 13);
    assert!(checked > 600);
}

/// The undo log on the volume (`UndoLogPlace::Volume`): every before-image goes to the
/// volume's page log (written with FUA before the next block write), none to persistent
/// memory; every cut of the first script, and
/// every one of its device writes torn, recovers a prefix of the committed transactions.
#[test]
fn every_crash_point_with_the_undo_log_on_the_volume_recovers_a_prefix_of_committed_transactions() {
    let o = TableOptions { undo_log: UndoLogPlace::Volume, ..opts() };
    let checked = every_crash_point_with(script(), 23, &o);
    assert!(checked > 300, "{checked}");
    assert!(every_write_torn_with(script(), 24, &o) > 100);
}

/// A power cut in the middle of each device write, FUA writes included (the spill area's
/// appends and expiries, which the images above never tear: a durable write is whole in
/// them): each 512-byte sector of the write is old or new, by a seed, every earlier write
/// kept. The persistent memory is as it was when the write began.
#[test]
fn every_write_torn_over_log_spill_recovers_a_prefix_of_committed_transactions() {
    // Counts of device writes, each torn once: write-behind (a dirty block written once per
    // commit round) made them fewer (198 here, from over 200), and the spill area's page
    // log fewer again (171 at the time of writing: spilled records are written together
    // before the next block write, not one FUA write each).
    assert!(every_write_torn(spill_script(), 18) > 150);
}

/// The same over the first script (segments zeroed with FUA, version log writes) and the
/// reclaiming one.
#[test]
fn every_write_torn_recovers_a_prefix_of_committed_transactions() {
    // 119 and 47 device writes at the time of writing, after write-behind.
    assert!(every_write_torn(script(), 19) > 100);
    assert!(every_write_torn(reclaim_script(), 20) > 40);
}

fn every_write_torn(script: Vec<Txn>, seed: u64) -> usize {
    every_write_torn_with(script, seed, &opts())
}

fn every_write_torn_with(script: Vec<Txn>, seed: u64, o: &TableOptions) -> usize {
    let d = sim(24, seed);
    let p = SimPmem::beside(PMEM_BYTES, &d);
    let run = workload(&d, &p, script, o);
    let mut checked = 0;
    let mut before = d.crash_image(0, Damage::Keep);
    for w in 1..=d.writes() {
        let after = d.crash_image(w, Damage::Keep);
        let mut x = w.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut torn = after.clone();
        for (sector, (old, new)) in before.chunks(512).zip(after.chunks(512)).enumerate() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if old != new && x % 2 == 0 {
                torn[sector * 512..sector * 512 + 512].copy_from_slice(old);
            }
        }
        let cut = p.events_until_device_write(w - 1);
        let cd = SimDevice::from_image(torn, 4096, w).unwrap();
        let cp = SimPmem::from_image(p.crash_image(cut, w), None);
        let store = TableStore::open_device(device(&cd), cp.boxed(), o.clone())
            .unwrap_or_else(|e| panic!("write {w} torn: open: {e}"));
        let got = contents(&store).unwrap_or_default();
        let ok = allowed(&run, w - 1, cut);
        assert!(ok.iter().any(|&j| run.states[j] == got), "write {w} torn: none of {ok:?}");
        before = after;
        checked += 1;
    }
    eprintln!("{checked} torn writes checked ({} undo records spilled)", run.spilled);
    checked
}

/// Runs `script`, cuts it at every point, checks each image; returns how many.
fn every_crash_point(script: Vec<Txn>, seed: u64) -> usize {
    every_crash_point_with(script, seed, &opts())
}

fn every_crash_point_with(script: Vec<Txn>, seed: u64, o: &TableOptions) -> usize {
    let d = sim(24, seed);
    let p = SimPmem::beside(PMEM_BYTES, &d);
    let run = workload(&d, &p, script, o);
    eprintln!("{} undo records spilled, {} rows in reclaimed space", run.spilled, run.reused);
    let mut points: Vec<(u64, usize)> =
        (0..=d.writes()).map(|k| (k, p.events_until_device_write(k))).collect();
    points.extend(p.persist_points().into_iter().map(|(cut, k)| (k, cut)));
    points.sort_unstable();
    points.dedup();
    let variants = seeds("SHALE_CRASH_SEEDS", 3);
    let mut checked = 0;
    for (i, &(k, cut)) in points.iter().enumerate() {
        for v in 0..variants {
            let seed = i as u64 * 31 + v;
            let dmg = damage(i as u64 + v, seed);
            let image = d.crash_image(k, dmg);
            let pimage = p.crash_image(cut, seed);
            let cd = SimDevice::from_image(image, 4096, seed).unwrap();
            let cp = SimPmem::from_image(pimage, None);
            let store = TableStore::open_device(device(&cd), cp.boxed(), o.clone())
                .unwrap_or_else(|e| panic!("write {k}, event {cut}, {dmg:?}: open: {e}"));
            let got = contents(&store).unwrap_or_default();
            let ok = allowed(&run, k, cut);
            assert!(
                ok.iter().any(|&j| run.states[j] == got),
                "write {k}, event {cut}, {dmg:?}: {} rows, none of states {ok:?} ({:?} rows)",
                got.len(),
                ok.iter().map(|&j| run.states[j].len()).collect::<Vec<_>>()
            );
            // The recovered store goes on, and keeps what it then commits.
            if let Some(t) = store.table_id("t") {
                store.insert(t, &row(&key(999), b"after", 1)).unwrap();
                drop(store);
                let store = TableStore::open_device(device(&cd), cp.boxed(), o.clone()).unwrap();
                assert_eq!(
                    store.select_cell(t, &key(999), "text").unwrap(),
                    Some(b"after".to_vec())
                );
            }
            checked += 1;
        }
    }
    eprintln!(
        "{checked} crash images checked ({} device writes, {} persistent memory events)",
        d.writes(),
        p.events()
    );
    checked
}

/// A power cut during recovery itself: a recovery's rollback is written again by the next
/// one, so any crash of it recovers to what the uninterrupted recovery found.
#[test]
fn a_crash_during_recovery_recovers_the_same_rows() {
    assert!(crash_during_recovery(script(), 12) > 50);
}

/// The same, where recovery gives back slots that rows took from the reclaimed space.
#[test]
fn a_crash_during_recovery_of_reused_slots_recovers_the_same_rows() {
    assert!(crash_during_recovery(reclaim_script(), 16) > 50);
}

/// The same, where recovery rolls back spilled records and expires them on the volume.
#[test]
fn a_crash_during_recovery_of_spilled_records_recovers_the_same_rows() {
    assert!(crash_during_recovery(spill_script(), 14) > 50);
}

fn crash_during_recovery(script: Vec<Txn>, seed: u64) -> usize {
    let o = &opts();
    let d = sim(24, seed);
    let p = SimPmem::beside(PMEM_BYTES, &d);
    workload(&d, &p, script, o);
    let mut checked = 0;
    for k in (0..=d.writes()).step_by(3) {
        let cut = p.events_until_device_write(k);
        let seed = k * 7 + 1;
        let cd = SimDevice::from_image(d.crash_image(k, damage(k, seed)), 4096, seed).unwrap();
        let cp = SimPmem::from_image(p.crash_image(cut, seed), Some(cd.clone()));
        let before = (cd.writes(), cp.events());
        let store = TableStore::open_device(device(&cd), cp.boxed(), o.clone()).unwrap();
        let want = contents(&store);
        drop(store);
        if (cd.writes(), cp.events()) == before {
            continue; // nothing to roll back
        }
        for w in 0..=cd.writes() {
            let c2 =
                SimDevice::from_image(cd.crash_image(w, damage(w + 1, seed)), 4096, seed).unwrap();
            let p2 = SimPmem::from_image(
                cp.crash_image(cp.events_until_device_write(w), seed + w),
                None,
            );
            let store = TableStore::open_device(device(&c2), p2.boxed(), o.clone())
                .unwrap_or_else(|e| panic!("crash at {k}, then at recovery write {w}: {e}"));
            assert!(contents(&store) == want, "crash at {k}, then at recovery write {w}");
            checked += 1;
        }
    }
    eprintln!("{checked} crash images of recoveries checked");
    checked
}
