//! KVSB, the KV-SSD paper's benchmark, for any key-value engine: N instances (one per volume),
//! each driven by its own client threads, all started together by a barrier; fixed-size keys
//! and values; sequential, uniform and zipfian writes, then YCSB's workloads A to D.
//!
//! `shale kvbench` (the hash and lsm engines) and `shale-compare kvbench` (RocksDB) drive their
//! engines through this one driver and print the same lines ([`report`]), so their outputs
//! tabulate side by side.
//!
//! Stages of one workload ([`Bench::run`]):
//! 1. Snapshot each instance's device bytes written, and the process's CPU time.
//! 2. Spawn `threads_per_instance` client threads per instance (pinned to CPU `i mod ncpu`
//!    with `pin`; an engine pins its own threads there too, as the hash engine's worker
//!    does with `HashOptions::worker_cpu`); all of them meet at one barrier, then each runs its share of the
//!    operations, keeping up to `queue_depth` submissions in flight (1: one call at a time).
//! 3. Join them; the instance's time is its slowest thread's, from the barrier on.
//! 4. Let each engine finish the background work the workload's writes started
//!    ([`Instance::settle`]: the lsm engine's flushes and compactions), outside the timed part.
//! 5. Snapshot again: operations, latency percentiles, host write amplification (device bytes
//!    / user bytes, GC apart, counted after stage 4 so that an engine that keeps recent writes
//!    in memory is charged for them), CPU time per operation and resident memory.
//!
//! A caller may stop a workload early ([`Bench::stop_on`]: a flag, set by a signal handler,
//! say): each client thread stops before its next operation, and the result counts what was
//! done. [`Bench::ops_done`] tells a progress display how far the workload is.
//!
//! The key space of an instance is record numbers `0..records` (`records` starts at `num`,
//! and YCSB D's inserts extend it). Every workload runs on the same store, in the order given:
//! `seqfill` writes the records in key order, `randfill` and `zipffill` overwrite `num`
//! records drawn uniformly and by YCSB's scrambled zipfian, and `ycsb-a` to `ycsb-d` run
//! YCSB's mixes over the records. YCSB's updates are blind puts of a whole value here, as
//! KVSB's are.

pub mod process;
pub mod report;

use std::collections::VecDeque;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};

use crate::engine::EngineResult;
use crate::generator::{
    AcknowledgedCounterGenerator, ScrambledZipfianGenerator, SkewedLatestGenerator,
    UniformLongGenerator, ZipfianGenerator,
};
use crate::latency::Latency;
use crate::workload::{Preset, RequestDistribution, Workload as YcsbWorkload};

pub use report::{InstanceResult, Line, WorkloadResult};

/// Shortest key: the record number is its last 8 bytes (big-endian, so key order is number
/// order).
pub const KEY_BYTES_MIN: usize = 8;
/// Longest key the driver makes.
pub const KEY_BYTES_MAX: usize = 255;
/// Most client threads per instance: each is an OS thread.
pub const THREADS_PER_INSTANCE_MAX: usize = 256;
/// Most instances: each is a volume and an open store.
pub const INSTANCES_MAX: usize = 256;
/// Deepest window of submissions a client thread keeps in flight.
pub const QUEUE_DEPTH_MAX: usize = 4096;
/// Times a thread with nothing in flight retries a submission answered Busy (another thread
/// of the instance fills the queue) before it counts the operation as an error.
pub const BUSY_RETRIES_MAX: u32 = 1_000_000;

/// One of KVSB's workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Puts of records `0..num` in key order.
    SeqFill,
    /// `num` puts of records drawn uniformly.
    RandFill,
    /// `num` puts of records drawn by YCSB's scrambled zipfian.
    ZipfFill,
    /// YCSB A: 50% reads, 50% updates, zipfian.
    YcsbA,
    /// YCSB B: 95% reads, 5% updates, zipfian.
    YcsbB,
    /// YCSB C: reads only, zipfian.
    YcsbC,
    /// YCSB D: 95% reads of the latest records, 5% inserts.
    YcsbD,
}

impl Workload {
    /// Every workload, in KVSB's order.
    pub const ALL: [Workload; 7] = [
        Workload::SeqFill,
        Workload::RandFill,
        Workload::ZipfFill,
        Workload::YcsbA,
        Workload::YcsbB,
        Workload::YcsbC,
        Workload::YcsbD,
    ];

    /// The name on the command line and in the report.
    pub fn name(self) -> &'static str {
        match self {
            Workload::SeqFill => "seqfill",
            Workload::RandFill => "randfill",
            Workload::ZipfFill => "zipffill",
            Workload::YcsbA => "ycsb-a",
            Workload::YcsbB => "ycsb-b",
            Workload::YcsbC => "ycsb-c",
            Workload::YcsbD => "ycsb-d",
        }
    }

    /// Whether it is one of the fills (its operation count is `num`, not `operations`).
    pub fn is_fill(self) -> bool {
        matches!(self, Workload::SeqFill | Workload::RandFill | Workload::ZipfFill)
    }

    fn ycsb(self) -> Option<YcsbWorkload> {
        let preset = match self {
            Workload::YcsbA => Preset::A,
            Workload::YcsbB => Preset::B,
            Workload::YcsbC => Preset::C,
            Workload::YcsbD => Preset::D,
            _ => return None,
        };
        Some(YcsbWorkload::preset(preset))
    }
}

impl FromStr for Workload {
    type Err = String;

    fn from_str(s: &str) -> Result<Workload, String> {
        Workload::ALL.into_iter().find(|w| w.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Workload::ALL.iter().map(|w| w.name()).collect();
            format!("unknown workload {s:?} (one of {})", names.join(", "))
        })
    }
}

/// Parses a comma-separated list of workloads.
///
/// # Errors
/// An unknown name, or an empty list.
pub fn parse_workloads(list: &str) -> Result<Vec<Workload>, String> {
    let w: Vec<Workload> = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    if w.is_empty() {
        return Err("no workload named".into());
    }
    Ok(w)
}

/// What every instance runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// Records per instance, and the operations of each fill.
    pub num: u64,
    /// Operations of each YCSB workload per instance.
    pub operations: u64,
    /// Bytes of every key.
    pub key_size: usize,
    /// Bytes of every value.
    pub value_size: usize,
    /// Client threads per instance.
    pub threads_per_instance: usize,
    /// Submissions each client thread keeps in flight (1: synchronous calls).
    pub queue_depth: usize,
    /// Pin instance `i`'s threads to CPU `i mod ncpu`.
    pub pin: bool,
    /// Stop each workload after this long, whatever is left of its operations.
    pub duration: Option<Duration>,
    /// Seed of the client threads' generators.
    pub seed: u64,
}

impl Config {
    /// Checks the sizes the driver itself bounds (an engine checks its own limits).
    ///
    /// # Errors
    /// The first bad value, named as its flag.
    pub fn validate(&self, instances: usize) -> Result<(), String> {
        let check = |flag: &str, v: usize, lo: usize, hi: usize| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(format!("--{flag} {v} is out of range {lo}..={hi}"))
            }
        };
        check("key_size", self.key_size, KEY_BYTES_MIN, KEY_BYTES_MAX)?;
        check("threads_per_instance", self.threads_per_instance, 1, THREADS_PER_INSTANCE_MAX)?;
        check("queue_depth", self.queue_depth, 1, QUEUE_DEPTH_MAX)?;
        check("paths (instances)", instances, 1, INSTANCES_MAX)?;
        if self.num == 0 {
            return Err("--num must be at least 1".into());
        }
        if self.duration.is_some_and(|d| d.is_zero()) {
            return Err("--duration must be more than 0 seconds".into());
        }
        Ok(())
    }
}

/// The key of record `n`: zeros, then `n` big-endian in the last 8 bytes (`key_size` at least
/// [`KEY_BYTES_MIN`]), so that numbers in order are keys in order.
pub fn write_key(n: u64, key: &mut [u8]) {
    let (pad, num) = key.split_at_mut(key.len() - 8);
    pad.fill(0);
    num.copy_from_slice(&n.to_be_bytes());
}

/// One operation, as an engine's adapter receives it.
#[derive(Clone, Copy, Debug)]
pub enum Op<'a> {
    /// Store `value` under `key` (insert or overwrite).
    Put {
        /// The key.
        key: &'a [u8],
        /// The value.
        value: &'a [u8],
    },
    /// Read the value under `key`.
    Get {
        /// The key.
        key: &'a [u8],
    },
}

/// What a submission became.
pub enum Submitted<P> {
    /// Done already (a synchronous engine); for a get, whether the key was found.
    Done(bool),
    /// In flight: poll or wait on it.
    Pending(P),
    /// The engine's queue is full; nothing was submitted.
    Busy,
}

/// Where an instance's device bytes come from, for the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// Bytes written to the device since the store was opened.
    pub device_bytes: u64,
    /// Of them, bytes garbage collection wrote (copies of live records).
    pub gc_bytes: u64,
}

/// One instance of an engine on one volume, driven by its client threads.
pub trait Instance: Send + Sync {
    /// An operation in flight.
    type Pending: Send;

    /// Submits `op`. A synchronous engine does the work and answers [`Submitted::Done`].
    ///
    /// # Errors
    /// The engine's error for this operation (counted, the run goes on).
    fn submit(&self, op: Op<'_>) -> EngineResult<Submitted<Self::Pending>>;

    /// Takes the outcome of `pending` if it is complete (for a get: found).
    fn poll(&self, pending: &mut Self::Pending) -> Option<EngineResult<bool>>;

    /// Waits for the outcome of `pending`.
    ///
    /// # Errors
    /// The engine's error for this operation.
    fn wait(&self, pending: Self::Pending) -> EngineResult<bool>;

    /// Bytes written to the device since the open, and by GC.
    fn written(&self) -> Written;

    /// Where [`Instance::written`]'s figures come from (`/sys/block/loop0/stat`, the volume's
    /// I/O counters, ...), for the report.
    fn written_source(&self) -> String;

    /// A note on GC for the report ("no GC yet", "compaction counted in device bytes").
    fn gc_note(&self) -> &'static str;

    /// Finishes the background work the workload's writes started, so that
    /// [`Instance::written`] counts what they cost the device: an engine that holds recent
    /// writes in memory (a memtable) writes them out here. Runs after the workload's timed
    /// part. The default does nothing, for engines whose writes reach the device before they
    /// are acknowledged.
    ///
    /// # Errors
    /// The engine's error (reported; the bytes are then those written so far).
    fn settle(&self) -> EngineResult<()> {
        Ok(())
    }
}

/// Operations a client thread does between updates of [`Bench::ops_done`].
const PROGRESS_EVERY_OPS: u64 = 256;

/// The driver over a set of instances: it keeps each one's record count between workloads.
pub struct Bench<I: Instance> {
    instances: Vec<I>,
    config: Config,
    records: Vec<AtomicU64>,
    /// Each instance's bytes written when the driver was made, and user bytes since.
    opened: Vec<Written>,
    user_bytes: Vec<AtomicU64>,
    /// Set by the caller to stop the workload under way ([`Bench::stop_on`]).
    stop: Option<Arc<AtomicBool>>,
    /// Operations of the workload under way done so far, over every instance.
    ops_done: AtomicU64,
}

/// What the client threads share with the caller while a workload runs.
struct Control<'a> {
    stop: Option<&'a AtomicBool>,
    ops_done: &'a AtomicU64,
}

impl Control<'_> {
    fn stopped(&self) -> bool {
        self.stop.is_some_and(|s| s.load(Ordering::Relaxed))
    }
}

/// A thread's share of a workload, and what it measured.
struct ThreadOutcome {
    ops: u64,
    gets: u64,
    found: u64,
    errors: u64,
    first_error: Option<String>,
    user_bytes: u64,
    elapsed: Duration,
    get_latency: Latency,
    put_latency: Latency,
}

/// A submission in flight.
struct InFlight<P> {
    pending: P,
    started: Instant,
    is_get: bool,
    insert: Option<u64>,
}

impl<I: Instance> Bench<I> {
    /// A driver over `instances`, each holding no records yet.
    ///
    /// # Errors
    /// A bad configuration, named.
    pub fn new(instances: Vec<I>, config: Config) -> Result<Bench<I>, String> {
        config.validate(instances.len())?;
        let records = instances.iter().map(|_| AtomicU64::new(config.num)).collect();
        let opened = instances.iter().map(Instance::written).collect();
        let user_bytes = instances.iter().map(|_| AtomicU64::new(0)).collect();
        Ok(Bench {
            instances,
            config,
            records,
            opened,
            user_bytes,
            stop: None,
            ops_done: AtomicU64::new(0),
        })
    }

    /// Stops each workload's client threads before their next operation once `flag` is set.
    #[must_use]
    pub fn stop_on(mut self, flag: Arc<AtomicBool>) -> Bench<I> {
        self.stop = Some(flag);
        self
    }

    /// Operations of the workload under way done so far, over every instance (updated every
    /// few hundred operations of each thread), for a progress display.
    pub fn ops_done(&self) -> u64 {
        self.ops_done.load(Ordering::Relaxed)
    }

    /// Operations `workload` asks of every instance together (before `--duration`).
    pub fn ops_total(&self, workload: Workload) -> u64 {
        let per_instance =
            if workload.is_fill() { self.config.num } else { self.config.operations };
        per_instance.saturating_mul(self.instances.len() as u64)
    }

    /// The instances, to close them.
    pub fn into_instances(self) -> Vec<I> {
        self.instances
    }

    /// Every workload so far taken together, named `session`: user bytes of all of them, and
    /// device bytes since the driver was made (call it once the engines' background work is
    /// done, to count what their writes left behind). Only the bytes are set.
    pub fn session(&self) -> WorkloadResult {
        let instances = self
            .instances
            .iter()
            .zip(&self.opened)
            .zip(&self.user_bytes)
            .map(|((inst, opened), user)| {
                let now = inst.written();
                InstanceResult {
                    user_bytes: user.load(Ordering::Relaxed),
                    device_bytes: now.device_bytes.saturating_sub(opened.device_bytes),
                    gc_bytes: now.gc_bytes.saturating_sub(opened.gc_bytes),
                    written_source: inst.written_source(),
                    gc_note: inst.gc_note().to_string(),
                    ..InstanceResult::default()
                }
            })
            .collect();
        WorkloadResult {
            workload: "session".into(),
            instances,
            cpu: process::CpuTime::default(),
            rss_bytes: process::rss_bytes(),
        }
    }

    /// The instances.
    pub fn instances(&self) -> &[I] {
        &self.instances
    }

    /// Runs `workload` on every instance at once (the stages of the module comment).
    pub fn run(&self, workload: Workload) -> WorkloadResult {
        self.ops_done.store(0, Ordering::Relaxed);
        let control = Control { stop: self.stop.as_deref(), ops_done: &self.ops_done };
        let before: Vec<Written> = self.instances.iter().map(Instance::written).collect();
        let cpu_before = process::cpu_time();
        let threads = self.config.threads_per_instance;
        let barrier = Barrier::new(self.instances.len() * threads);
        let zipf_latest: Vec<Option<ZipfianGenerator>> = self
            .records
            .iter()
            .map(|r| {
                let d = workload.ycsb().map(|w| w.request_distribution);
                (d == Some(RequestDistribution::Latest))
                    .then(|| ZipfianGenerator::new(r.load(Ordering::Relaxed)))
            })
            .collect();
        let counters: Vec<Arc<AcknowledgedCounterGenerator>> = if workload == Workload::YcsbD {
            self.records
                .iter()
                .map(|r| Arc::new(AcknowledgedCounterGenerator::new(r.load(Ordering::Relaxed))))
                .collect()
        } else {
            Vec::new()
        };
        let outcomes: Vec<Vec<ThreadOutcome>> = std::thread::scope(|s| {
            let handles: Vec<Vec<_>> = (0..self.instances.len())
                .map(|i| {
                    (0..threads)
                        .map(|t| {
                            let plan = Plan {
                                workload,
                                instance: i,
                                thread: t,
                                records: self.records[i].load(Ordering::Relaxed),
                                counter: counters.get(i).cloned(),
                                latest: zipf_latest[i].clone(),
                            };
                            let (inst, barrier, config, control) =
                                (&self.instances[i], &barrier, &self.config, &control);
                            s.spawn(move || client(inst, config, &plan, barrier, control))
                        })
                        .collect()
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.into_iter().map(|h| h.join().expect("a client thread panicked")).collect()
                })
                .collect()
        });
        // YCSB D's inserts extend the key space of the workloads after it.
        for (r, c) in self.records.iter().zip(&counters) {
            r.store(c.last_value().map_or(0, |v| v + 1), Ordering::Relaxed);
        }
        let cpu = process::cpu_time().since(&cpu_before);
        // Stage 4, outside the timed part; not for a stopped workload, whose results are cut.
        let settled: Vec<EngineResult<()>> = self
            .instances
            .iter()
            .map(|i| if control.stopped() { Ok(()) } else { i.settle() })
            .collect();
        let instances: Vec<InstanceResult> = outcomes
            .into_iter()
            .zip(&self.instances)
            .zip(before)
            .zip(settled)
            .map(|(((threads, inst), before), settled)| {
                let after = inst.written();
                let mut r = instance_result(threads, &before, &after, inst);
                if let Err(e) = settled {
                    r.errors += 1;
                    if r.first_error.is_none() {
                        r.first_error = Some(format!(
                            "finishing the writes' background work: {}",
                            shale_io::Chain(&*e)
                        ));
                    }
                }
                r
            })
            .collect();
        for (u, i) in self.user_bytes.iter().zip(&instances) {
            u.fetch_add(i.user_bytes, Ordering::Relaxed);
        }
        WorkloadResult {
            workload: workload.name().to_string(),
            instances,
            cpu,
            rss_bytes: process::rss_bytes(),
        }
    }
}

fn instance_result<I: Instance>(
    threads: Vec<ThreadOutcome>,
    before: &Written,
    after: &Written,
    inst: &I,
) -> InstanceResult {
    let mut r = InstanceResult {
        device_bytes: after.device_bytes.saturating_sub(before.device_bytes),
        gc_bytes: after.gc_bytes.saturating_sub(before.gc_bytes),
        written_source: inst.written_source(),
        gc_note: inst.gc_note().to_string(),
        ..InstanceResult::default()
    };
    for t in threads {
        r.ops += t.ops;
        r.gets += t.gets;
        r.found += t.found;
        r.errors += t.errors;
        r.user_bytes += t.user_bytes;
        r.elapsed = r.elapsed.max(t.elapsed);
        if r.first_error.is_none() {
            r.first_error = t.first_error;
        }
        r.get_latency.merge(&t.get_latency);
        r.put_latency.merge(&t.put_latency);
    }
    r
}

/// What one client thread runs.
struct Plan {
    workload: Workload,
    instance: usize,
    thread: usize,
    records: u64,
    counter: Option<Arc<AcknowledgedCounterGenerator>>,
    latest: Option<ZipfianGenerator>,
}

/// Picks each operation's kind and record number.
enum Chooser {
    Seq { next: u64 },
    Uniform(UniformLongGenerator),
    Zipf(ScrambledZipfianGenerator),
    Ycsb { read: f64, update: f64, keys: Keys, counter: Option<Arc<AcknowledgedCounterGenerator>> },
}

enum Keys {
    Uniform(UniformLongGenerator),
    Zipf(ScrambledZipfianGenerator),
    Latest(SkewedLatestGenerator),
}

/// An operation chosen: a get or a put of record `n`, or an insert of a new record `n`.
#[derive(Clone, Copy)]
enum Choice {
    Get(u64),
    Put(u64),
    Insert(u64),
}

impl Chooser {
    fn new(plan: &Plan, first: u64) -> Chooser {
        let last = plan.records.max(1) - 1;
        match plan.workload {
            Workload::SeqFill => Chooser::Seq { next: first },
            Workload::RandFill => Chooser::Uniform(UniformLongGenerator::new(0, last)),
            Workload::ZipfFill => Chooser::Zipf(ScrambledZipfianGenerator::new(last + 1)),
            w => {
                let y = w.ycsb().expect("a YCSB workload");
                let total = y.read_proportion + y.update_proportion + y.insert_proportion;
                let keys = match y.request_distribution {
                    RequestDistribution::Uniform => {
                        Keys::Uniform(UniformLongGenerator::new(0, last))
                    }
                    RequestDistribution::Zipfian => {
                        Keys::Zipf(ScrambledZipfianGenerator::new(last + 1))
                    }
                    RequestDistribution::Latest => {
                        Keys::Latest(SkewedLatestGenerator::with_zipfian(
                            plan.counter.clone().expect("latest follows the insert counter"),
                            plan.latest.clone().expect("latest has its zipfian"),
                        ))
                    }
                };
                Chooser::Ycsb {
                    read: y.read_proportion / total,
                    update: y.update_proportion / total,
                    keys,
                    counter: plan.counter.clone(),
                }
            }
        }
    }

    fn next(&mut self, rng: &mut SmallRng) -> Choice {
        match self {
            Chooser::Seq { next } => {
                *next += 1;
                Choice::Put(*next - 1)
            }
            Chooser::Uniform(g) => Choice::Put(g.next_value(rng)),
            Chooser::Zipf(g) => Choice::Put(g.next_value(rng)),
            Chooser::Ycsb { read, update, keys, counter } => {
                let p: f64 = rng.r#gen();
                match counter {
                    Some(c) if p >= *read + *update => return Choice::Insert(c.next_value()),
                    _ => {}
                }
                let n = match keys {
                    Keys::Uniform(g) => g.next_value(rng),
                    Keys::Zipf(g) => g.next_value(rng),
                    Keys::Latest(g) => g.next_value(rng),
                };
                if p < *read { Choice::Get(n) } else { Choice::Put(n) }
            }
        }
    }
}

/// The operations of thread `t` of `threads` out of `total`, and the first record number of
/// its share (for the sequential fill).
fn share(total: u64, threads: usize, t: usize) -> (u64, u64) {
    let (threads, t) = (threads as u64, t as u64);
    let ops = total / threads + u64::from(t < total % threads);
    let first = t * (total / threads) + t.min(total % threads);
    (ops, first)
}

/// One client thread: stage 2 of the module comment.
fn client<I: Instance>(
    inst: &I,
    config: &Config,
    plan: &Plan,
    barrier: &Barrier,
    control: &Control<'_>,
) -> ThreadOutcome {
    if config.pin {
        shale_io::affinity::pin_current_thread(plan.instance);
    }
    let total = if plan.workload.is_fill() { config.num } else { config.operations };
    let (ops, first) = share(total, config.threads_per_instance, plan.thread);
    let seed = config.seed ^ ((plan.instance as u64) << 32) ^ (plan.thread as u64) << 16;
    let mut rng = SmallRng::seed_from_u64(seed.wrapping_add(plan.workload as u64));
    let mut chooser = Chooser::new(plan, first);
    let mut key = vec![0u8; config.key_size];
    let mut value = vec![0u8; config.value_size];
    rng.fill_bytes(&mut value);
    let mut out = ThreadOutcome {
        ops: 0,
        gets: 0,
        found: 0,
        errors: 0,
        first_error: None,
        user_bytes: 0,
        elapsed: Duration::ZERO,
        get_latency: Latency::new(),
        put_latency: Latency::new(),
    };
    let depth = config.queue_depth;
    let mut window: VecDeque<InFlight<I::Pending>> = VecDeque::with_capacity(depth);
    barrier.wait();
    let started = Instant::now();
    let deadline = config.duration.map(|d| started + d);
    let mut unreported = 0;
    for i in 0..ops {
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) || control.stopped() {
            break;
        }
        unreported += 1;
        if unreported == PROGRESS_EVERY_OPS {
            control.ops_done.fetch_add(unreported, Ordering::Relaxed);
            unreported = 0;
        }
        let choice = chooser.next(&mut rng);
        let (n, insert) = match choice {
            Choice::Get(n) | Choice::Put(n) => (n, None),
            Choice::Insert(n) => (n, Some(n)),
        };
        write_key(n, &mut key);
        let is_get = matches!(choice, Choice::Get(_));
        let op = if is_get {
            Op::Get { key: &key }
        } else {
            // Each value differs from the last in its first bytes.
            let stamp = i.to_le_bytes();
            let k = stamp.len().min(value.len());
            value[..k].copy_from_slice(&stamp[..k]);
            out.user_bytes += (key.len() + value.len()) as u64;
            Op::Put { key: &key, value: &value }
        };
        submit(inst, op, is_get, insert, plan, &mut window, &mut out);
        if window.len() >= depth {
            reap(inst, plan, &mut window, &mut out, depth);
        }
    }
    reap(inst, plan, &mut window, &mut out, 1);
    out.elapsed = started.elapsed();
    control.ops_done.fetch_add(unreported, Ordering::Relaxed);
    out
}

/// Submits one operation, making room in the window while the engine answers Busy.
fn submit<I: Instance>(
    inst: &I,
    op: Op<'_>,
    is_get: bool,
    insert: Option<u64>,
    plan: &Plan,
    window: &mut VecDeque<InFlight<I::Pending>>,
    out: &mut ThreadOutcome,
) {
    let started = Instant::now();
    for _ in 0..BUSY_RETRIES_MAX {
        match inst.submit(op) {
            Ok(Submitted::Done(found)) => {
                finish(plan, out, started, is_get, insert, Ok(found));
                return;
            }
            Ok(Submitted::Pending(pending)) => {
                window.push_back(InFlight { pending, started, is_get, insert });
                return;
            }
            Ok(Submitted::Busy) if window.is_empty() => std::thread::yield_now(),
            Ok(Submitted::Busy) => {
                let len = window.len();
                reap(inst, plan, window, out, len);
            }
            Err(e) => {
                finish(plan, out, started, is_get, insert, Err(e));
                return;
            }
        }
    }
    let e = format!("the engine answered Busy {BUSY_RETRIES_MAX} times with nothing in flight");
    finish(plan, out, started, is_get, insert, Err(e.into()));
}

/// Completes submissions until fewer than `below` are in flight: first every one that is
/// done, then the oldest, waiting for it.
fn reap<I: Instance>(
    inst: &I,
    plan: &Plan,
    window: &mut VecDeque<InFlight<I::Pending>>,
    out: &mut ThreadOutcome,
    below: usize,
) {
    let mut k = 0;
    while k < window.len() {
        if let Some(result) = inst.poll(&mut window[k].pending) {
            let f = window.remove(k).expect("an index within the window");
            finish(plan, out, f.started, f.is_get, f.insert, result);
        } else {
            k += 1;
        }
    }
    while window.len() >= below {
        let Some(f) = window.pop_front() else { break };
        let result = inst.wait(f.pending);
        finish(plan, out, f.started, f.is_get, f.insert, result);
    }
}

fn finish(
    plan: &Plan,
    out: &mut ThreadOutcome,
    started: Instant,
    is_get: bool,
    insert: Option<u64>,
    result: EngineResult<bool>,
) {
    let ns = started.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64;
    if is_get { &mut out.get_latency } else { &mut out.put_latency }.record_ns(ns);
    out.ops += 1;
    match result {
        Ok(found) => {
            if is_get {
                out.gets += 1;
                out.found += u64::from(found);
            }
            if let (Some(n), Some(c)) = (insert, &plan.counter) {
                c.acknowledge(n);
            }
        }
        Err(e) => {
            out.errors += 1;
            if out.first_error.is_none() {
                out.first_error = Some(shale_io::Chain(&*e).to_string());
            }
            // A failed insert is acknowledged too, so "latest" moves past it (as YCSB's).
            if let (Some(n), Some(c)) = (insert, &plan.counter) {
                c.acknowledge(n);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::Mutex;

    /// An engine in a map, answering asynchronously every other submission. With `defer`,
    /// its writes reach the "device" only when it settles, as a memtable's do.
    #[derive(Default)]
    struct Memory {
        map: Mutex<HashMap<Vec<u8>, usize>>,
        written: AtomicU64,
        defer: bool,
        deferred: AtomicU64,
    }

    impl Instance for Memory {
        type Pending = bool;
        fn submit(&self, op: Op<'_>) -> EngineResult<Submitted<bool>> {
            let mut m = self.map.lock().unwrap();
            let found = match op {
                Op::Put { key, value } => {
                    let to = if self.defer { &self.deferred } else { &self.written };
                    to.fetch_add(value.len() as u64 + key.len() as u64, Ordering::Relaxed);
                    m.insert(key.to_vec(), value.len());
                    true
                }
                Op::Get { key } => m.contains_key(key),
            };
            Ok(if m.len() % 2 == 0 { Submitted::Pending(found) } else { Submitted::Done(found) })
        }
        fn poll(&self, p: &mut bool) -> Option<EngineResult<bool>> {
            Some(Ok(*p))
        }
        fn wait(&self, p: bool) -> EngineResult<bool> {
            Ok(p)
        }
        fn written(&self) -> Written {
            Written { device_bytes: self.written.load(Ordering::Relaxed), gc_bytes: 0 }
        }
        fn written_source(&self) -> String {
            "memory".into()
        }
        fn gc_note(&self) -> &'static str {
            "no GC"
        }
        fn settle(&self) -> EngineResult<()> {
            let held = self.deferred.swap(0, Ordering::Relaxed);
            self.written.fetch_add(held, Ordering::Relaxed);
            Ok(())
        }
    }

    /// Was: the lsm engine's fills printed "write amplification : 0.0000" while its writes
    /// sat in its memtable; a workload is charged once its writes are written out.
    #[test]
    fn a_workload_is_charged_for_the_writes_it_left_in_memory() {
        let deferring = || Memory { defer: true, ..Memory::default() };
        let bench = Bench::new(vec![deferring(), deferring()], config()).unwrap();
        let r = bench.run(Workload::SeqFill);
        for i in &r.instances {
            assert_eq!(i.user_bytes, 1000 * 116);
            assert_eq!(i.device_bytes, i.user_bytes, "settled before the second snapshot");
        }
        let reads = bench.run(Workload::YcsbC);
        assert_eq!(reads.total().device_bytes, 0, "a read-only workload wrote nothing");
    }

    #[test]
    fn a_stop_flag_ends_the_workload_and_progress_counts_every_operation() {
        let flag = Arc::new(AtomicBool::new(false));
        let bench = Bench::new(vec![Memory::default(), Memory::default()], config())
            .unwrap()
            .stop_on(flag.clone());
        let r = bench.run(Workload::SeqFill);
        assert_eq!(r.total_ops(), 2000);
        assert_eq!(bench.ops_done(), 2000, "every operation reported");
        assert_eq!(bench.ops_total(Workload::SeqFill), 2000);
        assert_eq!(bench.ops_total(Workload::YcsbA), 4000);
        flag.store(true, Ordering::Relaxed);
        let r = bench.run(Workload::YcsbA);
        assert_eq!(r.total_ops(), 0, "stopped before the first operation");
        assert_eq!(bench.ops_done(), 0);
    }

    fn config() -> Config {
        Config {
            num: 1000,
            operations: 2000,
            key_size: 16,
            value_size: 100,
            threads_per_instance: 3,
            queue_depth: 4,
            pin: false,
            duration: None,
            seed: 1,
        }
    }

    #[test]
    fn every_workload_counts_its_operations() {
        let bench = Bench::new(vec![Memory::default(), Memory::default()], config()).unwrap();
        for w in Workload::ALL {
            let r = bench.run(w);
            let want = if w.is_fill() { 1000 } else { 2000 };
            for i in &r.instances {
                assert_eq!(i.ops, want, "{}", w.name());
                assert_eq!(i.errors, 0);
                if w.is_fill() {
                    assert_eq!(i.user_bytes, want * 116);
                    assert_eq!(i.device_bytes, i.user_bytes);
                }
                if w != Workload::YcsbD {
                    assert_eq!(i.found, i.gets, "{}: every loaded key is found", w.name());
                }
            }
            assert_eq!(r.total_ops(), 2 * want);
        }
        let session = bench.session();
        let t = session.total();
        assert_eq!(t.device_bytes, t.user_bytes);
        assert_eq!(session.session_lines().lines().count(), 3);
        // The sequential fill wrote records 0..1000 exactly.
        assert!(bench.instances()[0].map.lock().unwrap().len() >= 1000);
    }

    #[test]
    fn shares_cover_the_total() {
        for (total, threads) in [(10, 3), (2, 5), (1000, 7)] {
            let mut next = 0;
            let mut sum = 0;
            for t in 0..threads {
                let (ops, first) = share(total, threads, t);
                assert_eq!(first, next);
                next += ops;
                sum += ops;
            }
            assert_eq!(sum, total);
        }
    }

    #[test]
    fn keys_sort_by_number() {
        let (mut a, mut b) = (vec![0u8; 16], vec![0u8; 16]);
        write_key(255, &mut a);
        write_key(256, &mut b);
        assert!(a < b);
        assert_eq!(
            parse_workloads("seqfill, ycsb-d").unwrap(),
            vec![Workload::SeqFill, Workload::YcsbD]
        );
        assert!(parse_workloads("ycsb-e").is_err());
    }
}
