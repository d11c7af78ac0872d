//! The driver: YCSB's client, loading records or running a workload on `threads` threads.
//!
//! Stages of [`load`] and [`run`]:
//! 1. Check the configuration ([`Config::validate`], and for a run [`Config::validate_run`]).
//! 2. Build what all threads share: the load phase's record counter, or the run phase's
//!    acknowledged insert counter (starting at `record_count`) and, for "latest", the zipfian
//!    over the loaded records (its zeta, a power per record, is summed once, not per thread).
//! 3. Start the threads. Each takes its share of the operations (the first
//!    `operations % threads` one more, as YCSB's `Client`), seeds its own random number
//!    generator from `seed`, the phase and its index, and builds its own choosers.
//! 4. Each thread times every operation into its own histograms and, every
//!    [`PROGRESS_EVERY_OPS`] operations, adds them to the shared count and calls the progress
//!    callback with the total.
//! 5. Join the threads, merge their counts into a [`Report`]; its run time spans 3 to 5.
//!
//! [`load_watched`] and [`run_watched`] also take a stop flag: once it is set (by a signal
//! handler, say), each thread stops before its next operation, and the report counts the
//! operations done.

mod choosers;
mod client;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use rand::SeedableRng;
use rand::rngs::SmallRng;

use crate::config::Config;
use crate::engine::Engine;
use crate::error::Result;
use crate::generator::{AcknowledgedCounterGenerator, CounterGenerator, ZipfianGenerator};
use crate::report::{ERRORS_KEPT, OpReport, Phase, Report};
use crate::workload::Operation;
use choosers::{KeyChooser, OperationChooser, ScanLengthChooser};
use client::{Client, RunState, ThreadStats};

/// Operations a thread does between updates of the shared progress count.
pub const PROGRESS_EVERY_OPS: u64 = 256;

/// A progress callback: called from the client threads with the operations done so far over
/// all threads (non-decreasing per thread, not strictly across threads).
pub type Progress<'a> = &'a (dyn Fn(u64) + Sync);

/// The load phase: inserts records `0..record_count` (YCSB's `-load`).
///
/// # Errors
/// [`Error::InvalidConfig`](crate::Error::InvalidConfig) for a bad configuration. The
/// engine's errors do not stop the load: they are counted in the report.
pub fn load<E: Engine + ?Sized>(engine: &E, config: &Config) -> Result<Report> {
    load_with_progress(engine, config, &|_| {})
}

/// [`load`], calling `progress` with the inserts done so far.
///
/// # Errors
/// As [`load`].
pub fn load_with_progress<E: Engine + ?Sized>(
    engine: &E,
    config: &Config,
    progress: Progress<'_>,
) -> Result<Report> {
    load_watched(engine, config, progress, None)
}

/// [`load_with_progress`], stopping early once `stop` is set.
///
/// # Errors
/// As [`load`].
pub fn load_watched<E: Engine + ?Sized>(
    engine: &E,
    config: &Config,
    progress: Progress<'_>,
    stop: Option<&AtomicBool>,
) -> Result<Report> {
    config.validate()?;
    let keys = CounterGenerator::new(0);
    let phase = Phase::Load;
    drive(
        engine,
        config,
        phase,
        config.record_count,
        Watch { progress, stop },
        |_| (),
        |client, ()| {
            client.load_one(&keys);
        },
    )
}

/// The run phase: `operation_count` operations of the workload on records loaded by [`load`]
/// with the same `record_count` (YCSB's `-t`).
///
/// # Errors
/// [`Error::InvalidConfig`](crate::Error::InvalidConfig) for a bad configuration. The
/// engine's errors do not stop the run: they are counted in the report.
pub fn run<E: Engine + ?Sized>(engine: &E, config: &Config) -> Result<Report> {
    run_with_progress(engine, config, &|_| {})
}

/// [`run`], calling `progress` with the operations done so far.
///
/// # Errors
/// As [`run`].
pub fn run_with_progress<E: Engine + ?Sized>(
    engine: &E,
    config: &Config,
    progress: Progress<'_>,
) -> Result<Report> {
    run_watched(engine, config, progress, None)
}

/// [`run_with_progress`], stopping early once `stop` is set.
///
/// # Errors
/// As [`run`].
pub fn run_watched<E: Engine + ?Sized>(
    engine: &E,
    config: &Config,
    progress: Progress<'_>,
    stop: Option<&AtomicBool>,
) -> Result<Report> {
    config.validate_run()?;
    let inserts = Arc::new(AcknowledgedCounterGenerator::new(config.record_count));
    let loaded = config.record_count.saturating_sub(1);
    let latest = config.is_latest().then(|| ZipfianGenerator::new(loaded));
    let operations = OperationChooser::new(config);
    let state = |_| RunState {
        inserts: inserts.clone(),
        operations: operations.clone(),
        keys: KeyChooser::new(config, &inserts, latest.as_ref()),
        scan_lengths: ScanLengthChooser::new(config),
    };
    let watch = Watch { progress, stop };
    drive(engine, config, Phase::Run, config.operation_count, watch, state, |client, state| {
        client.run_one(state);
    })
}

/// What the caller follows and steers while a phase runs.
#[derive(Clone, Copy)]
struct Watch<'a> {
    progress: Progress<'a>,
    stop: Option<&'a AtomicBool>,
}

impl Watch<'_> {
    fn stopped(&self) -> bool {
        self.stop.is_some_and(|s| s.load(Ordering::Relaxed))
    }
}

/// Runs `total` operations of `phase` over the threads: each thread builds its state with
/// `state(thread)`, then does each of its operations with one call of `one`.
fn drive<E, S, M, F>(
    engine: &E,
    config: &Config,
    phase: Phase,
    total: u64,
    watch: Watch<'_>,
    state: M,
    one: F,
) -> Result<Report>
where
    E: Engine + ?Sized,
    M: Fn(usize) -> S + Sync,
    F: Fn(&mut Client<'_, E>, &mut S) + Sync,
{
    let done = AtomicU64::new(0);
    let threads = config.threads as u64;
    let started = Instant::now();
    let stats: Vec<ThreadStats> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..config.threads)
            .map(|t| {
                let share = total / threads + u64::from((t as u64) < total % threads);
                let (state, one, done) = (&state, &one, &done);
                scope.spawn(move || {
                    let progress = watch.progress;
                    let mut client = Client::new(engine, config, thread_rng(config, phase, t));
                    let mut state = state(t);
                    let mut pending = 0;
                    for _ in 0..share {
                        if watch.stopped() {
                            break;
                        }
                        one(&mut client, &mut state);
                        pending += 1;
                        if pending == PROGRESS_EVERY_OPS {
                            progress(done.fetch_add(pending, Ordering::Relaxed) + pending);
                            pending = 0;
                        }
                    }
                    if pending > 0 {
                        progress(done.fetch_add(pending, Ordering::Relaxed) + pending);
                    }
                    client.stats
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a client thread panicked")).collect()
    });
    let runtime = started.elapsed();
    // `total` unless a stop cut the phase short.
    let operations = done.load(Ordering::Relaxed);
    Ok(merge(engine.name(), phase, runtime, operations, stats))
}

/// Thread `t`'s generator: distinct streams per thread and per phase, all from `seed`.
fn thread_rng(config: &Config, phase: Phase, t: usize) -> SmallRng {
    let phase_salt: u64 = match phase {
        Phase::Load => 0x4c4f_4144, // "LOAD"
        Phase::Run => 0x5255_4e00,  // "RUN"
    };
    let mixed = splitmix64(config.seed ^ splitmix64(phase_salt.wrapping_add(t as u64)));
    SmallRng::seed_from_u64(mixed)
}

/// SplitMix64's finaliser: spreads nearby seeds over unrelated streams.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The threads' counts as one report: operations that ran, errors up to [`ERRORS_KEPT`].
fn merge(
    engine: &str,
    phase: Phase,
    runtime: std::time::Duration,
    operations: u64,
    stats: Vec<ThreadStats>,
) -> Report {
    let mut ops: Vec<OpReport> = Operation::ALL.map(OpReport::new).to_vec();
    let mut errors = Vec::new();
    for s in stats {
        for (all, mine) in ops.iter_mut().zip(&s.ops) {
            all.merge(mine);
        }
        errors.extend(s.errors);
    }
    errors.truncate(ERRORS_KEPT);
    ops.retain(|o| o.count() > 0);
    Report { phase, engine: engine.to_string(), runtime, operations, ops, errors }
}
