//! Injected I/O errors (P5): after a failed write or flush the store stops acknowledging
//! writes until reopened, and nothing it acknowledged is lost.
//!
//! A scripted workload (WAL appends, synced and not, an explicit flush, more appends, a full
//! compaction) runs on the simulated device with one fault planned: an EIO at the k-th device
//! write (once or from then on) for every k the fault-free script reaches, an EIO at the k-th
//! device flush for every such k, and a device that runs out of space at several offsets (in
//! the WAL area, the version log, the slot area). For each run:
//! - the call that meets the failure, or a later one when background work failed, returns a
//!   typed error (Io, NoSpace or Stopped), and a fault that fired is always reported, but
//!   for a full slot area that a flush or compaction recovered from by running again once
//!   room came back (counted in `Stats`; every acknowledged write is then checked after a
//!   clean close);
//! - `stats().stopped` says why, and every later write, flush and compaction returns
//!   `Error::Stopped`, even once the device works again (a failed sync is never retried),
//!   and its reads show exactly the acknowledged writes;
//! - reopened on a power-cut image (unsynced writes lost) the store equals a prefix of the
//!   writes holding every synced acknowledged one; reopened on the device as the process left
//!   it, every acknowledged one; `Db::check` passes and the store takes writes again.
//!
//! EIO at every device write runs twice: without a WAL tail (every write waits for its page)
//! and with one (pages complete in the background, so a failed page write surfaces at a later
//! call; the process-crash reopen gets a copy of the tail).
//!
//! Why: error paths run rarely in production and are where a store silently loses data or
//! keeps acknowledging writes it can no longer persist.

mod common;

use std::sync::Arc;
use std::time::Instant;

use common::*;
use shale_io::{Damage, Fault, FaultPlan, OpKind, SimDevice};
use shale_lsm::{Db, Error, MemoryTail, Options, WalTail, WriteBatch, WriteOptions};

const KEYS: u16 = 60;
const VALUE_FILLER_MAX: usize = 900;
/// Writes before the fault is planned (they must all survive).
const WRITES_BEFORE: u32 = 40;
/// Writes in each of the two append phases after it.
const WRITES_PER_PHASE: u32 = 60;

/// Where the first error surfaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Append,
    Flush,
    Compaction,
    End,
    /// One more write and a flush: a failure no earlier call could report (the release of a
    /// compaction's inputs after `compact_range` returned) surfaces at the next commit.
    Probe,
}

struct Run {
    /// `states[i]`: the store after the first `i` writes.
    states: Vec<State>,
    /// `(synced, acknowledged)` of each write that was attempted.
    writes: Vec<(bool, bool)>,
    failed: Option<(Phase, Error)>,
    fired: bool,
    device_writes: u64,
    device_flushes: u64,
}

/// The `w`-th write of every run: the same for every plan, so runs differ only in the fault.
fn batch_for(w: u32) -> (WriteBatch, State, bool) {
    let mut batch = WriteBatch::new();
    let mut changes = State::new();
    let ops = 1 + (w % 4) as u16;
    for op in 0..ops {
        let n = ((w * 37 + u32::from(op) * 11) % u32::from(KEYS)) as u16;
        let stamp = (w, op);
        batch.put(&key(n), &value(n, stamp, VALUE_FILLER_MAX));
        changes.insert(n, stamp);
    }
    (batch, changes, w % 3 == 0)
}

fn write_one(db: &Db, run: &mut Run, w: u32) -> shale_lsm::Result<()> {
    let (batch, changes, sync) = batch_for(w);
    let result = db.write(&batch, &WriteOptions { sync });
    run.writes.push((sync, result.is_ok()));
    if result.is_ok() {
        let mut state = run.states.last().unwrap().clone();
        state.extend(changes);
        run.states.push(state);
    }
    result
}

/// The options, with `tail` as the WAL tail if given.
fn options(tail: &Option<MemoryTail>) -> Options {
    let mut o = small_options();
    if let Some(t) = tail {
        o.wal_tail = WalTail::Memory(t.clone());
    }
    o
}

fn run_with(plan: FaultPlan, tail: &Option<MemoryTail>) -> (SimDevice, Db, Run) {
    let dev = SimDevice::new(DEVICE_BYTES, 4096, 7).unwrap();
    let db = Db::open_device(Arc::new(dev.clone()), options(tail)).unwrap();
    let mut run = Run {
        states: vec![State::new()],
        writes: Vec::new(),
        failed: None,
        fired: false,
        device_writes: 0,
        device_flushes: 0,
    };
    for w in 1..=WRITES_BEFORE {
        write_one(&db, &mut run, w).unwrap();
    }
    db.flush().unwrap();
    let before = dev.stats();
    dev.set_faults(plan);
    let mut w = WRITES_BEFORE;
    let mut step = |phase: Phase, db: &Db, run: &mut Run| -> bool {
        let result = match phase {
            Phase::Append => (0..WRITES_PER_PHASE).try_for_each(|_| {
                w += 1;
                write_one(db, run, w)
            }),
            Phase::Flush => db.flush(),
            Phase::Compaction | Phase::End => db.compact_range(),
            Phase::Probe => {
                w += 1;
                write_one(db, run, w).and_then(|()| db.flush())
            }
        };
        if let Err(e) = result {
            run.failed = Some((phase, e));
        }
        run.failed.is_some()
    };
    let phases =
        [Phase::Append, Phase::Flush, Phase::Append, Phase::Compaction, Phase::End, Phase::Probe];
    for phase in phases {
        if step(phase, &db, &mut run) {
            break;
        }
    }
    // Background work the last phase started (a compaction after its flush, an SST given back
    // on the release thread) may meet the fault after every call returned: let it finish, so
    // that the faults counted are those of the run, and have the store report what it met.
    if run.failed.is_none() {
        if let Err(e) = db.wait_for_compaction() {
            run.failed = Some((Phase::Probe, e));
        }
    }
    let after = dev.stats();
    run.fired = after.faults > before.faults;
    if run.fired && run.failed.is_none() {
        // A failed give-back stops the volume without failing a call: the next commit says
        // why. One more write and flush is that commit.
        w += 1;
        if let Err(e) = write_one(&db, &mut run, w).and_then(|()| db.flush()) {
            run.failed = Some((Phase::Probe, e));
        }
    }
    run.device_writes = after.writes - before.writes;
    run.device_flushes = after.flushes - before.flushes;
    (dev, db, run)
}

/// Checks a store stopped by a failure, then reopens it both ways and checks what survived.
fn check_run(dev: SimDevice, db: Db, run: &Run, tail: &Option<MemoryTail>, ctx: &str) {
    if run.fired && run.failed.is_none() {
        // Only a device full in the slot area may pass unreported: the flush or compaction
        // that met it gave back what it wrote and ran again into room a release gave back
        // (`Inner::wait_for_held_room`) or a compaction freed (`retried_for_room`), as a
        // volume file's file system gets room back from a punched hole. Counted, never
        // silent, and every acknowledged write is there after a clean close.
        let s = db.stats();
        assert!(
            s.waited_for_held_room + s.retried_for_room > 0 && s.stopped.is_none(),
            "{ctx}: a fault fired but no call reported an error: {s:?}"
        );
        dev.set_faults(FaultPlan::default());
        db.close().unwrap_or_else(|e| panic!("{ctx}: close after a recovered fault: {e}"));
        let ctx = format!("{ctx}, recovered, reopened");
        reopen_and_check(dev.current_image(), run, true, &options(tail), &ctx);
        return;
    }
    let Some((_, e)) = &run.failed else {
        db.close().unwrap();
        return;
    };
    assert!(
        matches!(e, Error::Io(_) | Error::NoSpace(_) | Error::Stopped(_)),
        "{ctx}: untyped or unexpected error {e:?}"
    );
    assert!(db.stats().stopped.is_some(), "{ctx}: error {e} but stats().stopped is not set");
    // Reads of the stopped store see exactly the acknowledged writes: nothing of the failed
    // write (its group may be in the memtable, above the published sequence) and nothing lost.
    let visible = scan_state(&db, VALUE_FILLER_MAX).unwrap_or_else(|e| panic!("{ctx}: scan: {e}"));
    assert!(
        visible == run.states[run.states.len() - 1],
        "{ctx}: the stopped store shows other writes than the acknowledged ones"
    );
    // The device works again; the store must still refuse (P5).
    dev.set_faults(FaultPlan::default());
    let mut b = WriteBatch::new();
    b.put(&key(0), b"after the failure");
    for sync in [false, true] {
        let r = db.write(&b, &WriteOptions { sync });
        assert!(matches!(r, Err(Error::Stopped(_))), "{ctx}: write after failure: {r:?}");
    }
    assert!(matches!(db.flush(), Err(Error::Stopped(_))), "{ctx}: flush after failure");
    assert!(matches!(db.compact_range(), Err(Error::Stopped(_))), "{ctx}: compact after failure");
    let power_cut = dev.crash_image(dev.writes(), Damage::Lose);
    drop(db);
    let kept = dev.current_image();
    // A power cut loses the tail (memory); a crash of the process leaves it.
    let lost_tail = tail.as_ref().map(|_| MemoryTail::new());
    let kept_tail = tail.as_ref().map(MemoryTail::crash_copy);
    for (image, keep, tail) in [(power_cut, false, lost_tail), (kept, true, kept_tail)] {
        let ctx = format!("{ctx}, reopened ({})", if keep { "process crash" } else { "power cut" });
        reopen_and_check(image, run, keep, &options(&tail), &ctx);
    }
}

fn reopen_and_check(image: Vec<u8>, run: &Run, keep: bool, opts: &Options, ctx: &str) {
    let dev = SimDevice::from_image(image, 4096, 7).unwrap();
    let db = Db::open_device(Arc::new(dev.clone()), opts.clone())
        .unwrap_or_else(|e| panic!("{ctx}: open: {e}"));
    let got = scan_state(&db, VALUE_FILLER_MAX).unwrap_or_else(|e| panic!("{ctx}: scan: {e}"));
    db.check().unwrap_or_else(|e| panic!("{ctx}: check: {e}"));
    // Acknowledged writes form a prefix of the attempted ones (the first failure stops all).
    let acked = run.states.len() - 1;
    let must = run.writes[..acked].iter().rposition(|&(sync, _)| keep || sync).map_or(0, |i| i + 1);
    let attempted = run.writes.len();
    let mut ok = (must..=acked).any(|i| run.states[i] == got);
    if !ok && attempted > acked {
        // The failed write itself may have reached the WAL before its error.
        let (_, changes, _) = batch_for(attempted as u32);
        let mut with_failed = run.states[acked].clone();
        with_failed.extend(changes);
        ok = with_failed == got;
    }
    assert!(ok, "{ctx}: the store equals no prefix of writes {must}..={attempted} (lost data)");
    let mut b = WriteBatch::new();
    b.put(&key(1), b"accepted again");
    db.write(&b, &WriteOptions { sync: true })
        .unwrap_or_else(|e| panic!("{ctx}: reopened store refuses writes: {e}"));
    db.close().unwrap();
    let db = Db::open_device(Arc::new(dev), opts.clone()).unwrap();
    assert_eq!(db.get(&key(1)).unwrap().as_deref(), Some(&b"accepted again"[..]), "{ctx}");
}

#[derive(Default, Debug)]
struct Tally {
    runs: u64,
    failed_in: Vec<(Phase, u64)>,
}

impl Tally {
    fn add(&mut self, run: &Run) {
        self.runs += 1;
        if let Some((phase, _)) = &run.failed {
            match self.failed_in.iter_mut().find(|(p, _)| p == phase) {
                Some((_, n)) => *n += 1,
                None => self.failed_in.push((*phase, 1)),
            }
        }
    }

    fn count(&self, phase: Phase) -> u64 {
        self.failed_in.iter().find(|(p, _)| *p == phase).map_or(0, |(_, n)| *n)
    }
}

fn baseline(tail: &Option<MemoryTail>) -> Run {
    let (_, db, run) = run_with(FaultPlan::default(), tail);
    assert!(run.failed.is_none(), "the fault-free script failed: {:?}", run.failed);
    let stats = db.stats();
    assert!(stats.flushes >= 3 && stats.compactions >= 1, "script too small: {stats:?}");
    db.close().unwrap();
    run
}

#[test]
fn a_failed_device_write_stops_the_store_and_loses_nothing() {
    failed_device_writes(None);
}

#[test]
fn with_a_wal_tail_a_failed_device_write_stops_the_store_and_loses_nothing() {
    failed_device_writes(Some(MemoryTail::new()));
}

fn failed_device_writes(tail: Option<MemoryTail>) {
    let started = Instant::now();
    let base = baseline(&tail);
    let mut tally = Tally::default();
    for k in 1..=base.device_writes + 1 {
        let sticky = k % 3 == 0;
        let plan = FaultPlan { faults: vec![Fault::Eio { op: OpKind::Write, nth: k, sticky }] };
        // Each run starts from an empty tail, as from a fresh process.
        let tail = tail.as_ref().map(|_| MemoryTail::new());
        let (dev, db, run) = run_with(plan, &tail);
        tally.add(&run);
        check_run(dev, db, &run, &tail, &format!("EIO at device write {k} (sticky {sticky})"));
    }
    println!(
        "io errors{}: EIO at each of {} device writes: {tally:?}, {:?}",
        if tail.is_some() { " with a WAL tail" } else { "" },
        base.device_writes + 1,
        started.elapsed()
    );
    for phase in [Phase::Append, Phase::Flush, Phase::Compaction] {
        assert!(tally.count(phase) > 0, "no failure surfaced in {phase:?}: {tally:?}");
    }
}

#[test]
fn a_failed_device_flush_stops_the_store_and_loses_nothing() {
    let started = Instant::now();
    let base = baseline(&None);
    let mut tally = Tally::default();
    for k in 1..=base.device_flushes + 1 {
        let plan =
            FaultPlan { faults: vec![Fault::Eio { op: OpKind::Flush, nth: k, sticky: false }] };
        let (dev, db, run) = run_with(plan, &None);
        tally.add(&run);
        check_run(dev, db, &run, &None, &format!("EIO at device flush {k}"));
    }
    println!(
        "io errors: EIO at each of {} device flushes: {tally:?}, {:?}",
        base.device_flushes + 1,
        started.elapsed()
    );
    assert!(tally.count(Phase::Append) > 0, "no synced append met a failed flush: {tally:?}");
    let background = tally.count(Phase::Flush) + tally.count(Phase::Compaction);
    assert!(background > 0, "no flush or compaction met a failed flush: {tally:?}");
}

#[test]
fn a_full_device_stops_the_store_and_loses_nothing() {
    let dev = SimDevice::new(DEVICE_BYTES, 4096, 7).unwrap();
    let layout = Db::open_device(Arc::new(dev), small_options()).unwrap().volume().layout();
    let mut offsets = vec![
        layout.version_log_offset + (8 << 10),
        layout.mirror_offset(1) + (8 << 10),
        layout.wal_offset + (64 << 10),
        layout.wal_offset + layout.wal_bytes - 4096,
    ];
    offsets.extend((1..12).map(|j| layout.slot_to_offset(j)));
    let mut tally = Tally::default();
    for from_offset in offsets {
        let plan = FaultPlan { faults: vec![Fault::NoSpace { from_offset }] };
        let (dev, db, run) = run_with(plan, &None);
        tally.add(&run);
        check_run(dev, db, &run, &None, &format!("no space from byte {from_offset}"));
    }
    println!("io errors: device full at 15 offsets: {tally:?}");
    // The WAL and version log offsets always fail; the slot offsets fail where allocation
    // reaches them.
    assert!(tally.failed_in.iter().map(|(_, n)| n).sum::<u64>() >= 6, "{tally:?}");
}
