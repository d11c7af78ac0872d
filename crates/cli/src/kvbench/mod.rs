//! `shale kvbench`: KVSB, the KV-SSD paper's benchmark, on the hash or the lsm engine: one
//! instance per path (a directory, a volume file or a block device), each driven by its own
//! client threads, all started together; the workloads, the driver and the report lines are
//! `ycsb::kvsb`'s, shared with `shale-compare kvbench` (RocksDB), so the outputs tabulate side
//! by side.
//!
//! Stages of one invocation:
//! 1. Check the flags ([`Args`]): each bad value is a [`FlagError`] naming the flag. With no
//!    flags at all, run [`DEFAULT_SUITE`].
//! 2. Empty and open one store per path (as `shale bench` empties `--db`: only a shale store
//!    not in use is emptied; anything else is refused untouched); without `--paths`, one
//!    store in a temporary directory, removed at the end (`crate::temp_store`).
//! 3. Print the header (engine, sizes, durability), then run each workload on every instance
//!    at once and print its lines (and CSV rows with `--csv`); the workload's progress goes
//!    to stderr ([`Progress`]). The driver lets each engine finish the background work of a
//!    workload's writes before it counts their device bytes (`Instance::settle`).
//! 4. Let the lsm engine finish its flushes and compactions, print the session's write
//!    amplification (what the writes left behind included), close the stores.
//!
//! SIGINT or SIGTERM stops the workload under way (no lines for it), skips the rest, closes
//! the stores and removes a temporary one (`crate::interrupt`).

mod engine;

use std::io::{IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use shale_hash::{HashOptions, HashStore};
use shale_lsm::WriteOptions;
use ycsb::kvsb::process::BlockStat;
use ycsb::kvsb::report::{CSV_HEADER, CsvContext};
use ycsb::kvsb::{Bench, Config, Instance, Workload, WorkloadResult, parse_workloads};

use crate::kvbench::engine::{HashInstance, LsmInstance};
use crate::temp_store::TempStore;

/// What `shale kvbench` runs when given no flags: every workload on the hash engine in a
/// temporary store, small enough to finish in seconds (8 s on a 2-core machine's disk), with
/// the deep queue the hash engine is meant to be driven with (docs/cli.md).
pub const DEFAULT_SUITE: &[&str] =
    &["--engine=hash", "--num=5000", "--value_size=1024", "--queue_depth=32"];

/// How often a line of progress goes to stderr when it is not a terminal (a terminal gets a
/// bar instead).
const PROGRESS_LINE_INTERVAL: Duration = Duration::from_secs(10);
/// How often the bar on a terminal is redrawn.
const PROGRESS_BAR_INTERVAL: Duration = Duration::from_millis(200);

/// The engine under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineArg {
    /// shale-hash: the KV-SSD engine (every store durable on return).
    Hash,
    /// shale-lsm: the LSM engine (WAL on; writes unsynced unless --sync).
    Lsm,
}

/// Where the hash engine keeps its index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum IndexArg {
    /// In memory (19 to 23 bytes a key).
    #[value(name = "in-memory")]
    InMemory,
    /// In pages on the volume behind a cache of --index_cache_bytes.
    Bounded,
}

/// Flags of `shale kvbench`.
#[derive(clap::Args, Clone, Debug)]
#[command(after_help = "Durability differs and the header says so: the hash engine makes \
every store durable before it returns (it has no unsynced mode); the lsm engine acknowledges \
a write once its record is in the WAL tail (survives a killed process), durable only with \
--sync. Workloads run in the order given, on the same stores: seqfill writes records 0..num in \
key order, randfill and zipffill overwrite num records drawn uniformly or by YCSB's scrambled \
zipfian, ycsb-a..d run YCSB's mixes (updates are blind puts of a whole value).")]
pub struct Args {
    /// Engine: hash (the default) or lsm.
    #[arg(long = "engine", value_enum, default_value = "hash")]
    pub engine: EngineArg,
    /// One instance per path (comma-separated): a new or empty directory, a volume file or a
    /// blank block device. Without it, one instance in a temporary directory, removed at the
    /// end.
    #[arg(long = "paths", value_delimiter = ',')]
    pub paths: Vec<PathBuf>,
    /// Records per instance, and the operations of each fill.
    #[arg(long = "num", default_value_t = 100_000)]
    pub num: u64,
    /// Operations of each YCSB workload per instance (default: --num).
    #[arg(long = "operations")]
    pub operations: Option<u64>,
    /// Bytes per key (8 to 255; the record number is its last 8 bytes, big-endian).
    #[arg(long = "key_size", default_value_t = 16)]
    pub key_size: usize,
    /// Bytes per value (1 to 2 MiB for the hash engine).
    #[arg(long = "value_size", default_value_t = 4096)]
    pub value_size: usize,
    /// Workloads, comma-separated, in order: seqfill, randfill, zipffill, ycsb-a, ycsb-b,
    /// ycsb-c, ycsb-d.
    #[arg(
        long = "workloads",
        default_value = "seqfill,randfill,zipffill,ycsb-a,ycsb-b,ycsb-c,ycsb-d"
    )]
    pub workloads: String,
    /// Client threads per instance.
    #[arg(long = "threads_per_instance", default_value_t = 1)]
    pub threads_per_instance: usize,
    /// Submissions each client thread keeps in flight (hash engine; 1: synchronous calls).
    #[arg(long = "queue_depth", default_value_t = 1)]
    pub queue_depth: usize,
    /// Pin instance i's threads to CPU i mod ncpu: its client threads, and the hash engine's
    /// worker thread beside them.
    #[arg(long = "pin")]
    pub pin: bool,
    /// Stop each workload after this many seconds.
    #[arg(long = "duration")]
    pub duration: Option<f64>,
    /// Durable writes on both engines (the hash engine's always are).
    #[arg(long = "sync")]
    pub sync: bool,
    /// Append a CSV row per instance and a total per workload to FILE (header if new).
    #[arg(long = "csv")]
    pub csv: Option<PathBuf>,
    /// A tag for the CSV's run column (a repeat number, say).
    #[arg(long = "run", default_value = "1")]
    pub run: String,
    /// Seed of the client threads' generators.
    #[arg(long = "seed", default_value_t = 0)]
    pub seed: u64,
    /// Print the contention profile after each workload: per lock or hand-off of the engine,
    /// acquisitions, waits, time waited and held, per operation (`shale_space::contention`).
    #[arg(long = "contention", value_parser = crate::bench::parse_bool, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub contention: bool,

    /// The lsm engine's block cache in bytes (default 32 MiB, RocksDB's harness's too).
    #[arg(long = "cache_size", default_value_t = 32 << 20)]
    pub cache_size: usize,
    /// The lsm engine's memtable in bytes (default 64 MiB, RocksDB's harness's too).
    #[arg(long = "write_buffer_size", default_value_t = 64 << 20)]
    pub write_buffer_size: usize,
    /// The hash engine's index: in-memory, or bounded (pages on the volume behind a fixed
    /// cache).
    #[arg(long = "index", value_enum, default_value = "in-memory")]
    pub index: IndexArg,
    /// The bounded index's page cache in bytes (--index bounded).
    #[arg(long = "index_cache_bytes", default_value_t = 64 << 20)]
    pub index_cache_bytes: u64,
    /// The hash engine's cache of values read, in bytes (0: off).
    #[arg(long = "value_cache_bytes", default_value_t = HashOptions::default().value_cache_bytes)]
    pub value_cache_bytes: usize,
    /// The hash engine's batches whose durable writes may be in flight at once (1: one at a
    /// time; `HashOptions::batches_in_flight`).
    #[arg(long = "batches_in_flight", default_value_t = HashOptions::default().batches_in_flight)]
    pub batches_in_flight: usize,
    /// Read what misses the engine's own cache (the hash engine's records, the lsm engine's
    /// SST blocks) with O_DIRECT only (true), or through the kernel's page cache (false, the
    /// default of both engines and db_bench's meaning: `shale_hash::RecordReads`,
    /// `Options::use_direct_reads`).
    #[arg(long = "use_direct_reads", value_parser = crate::bench::parse_bool, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub use_direct_reads: bool,
}

impl Args {
    /// The hash engine's index mode the flags ask for.
    pub fn index_mode(&self) -> shale_hash::IndexMode {
        match self.index {
            IndexArg::InMemory => shale_hash::IndexMode::InMemory,
            IndexArg::Bounded => {
                shale_hash::IndexMode::Bounded { cache_bytes: self.index_cache_bytes }
            }
        }
    }
}

/// A flag whose value cannot be run, with the reason.
#[derive(Debug, PartialEq, Eq)]
pub struct FlagError {
    /// The flag, as written on the command line.
    pub flag: &'static str,
    /// What is wrong with its value.
    pub why: String,
}

impl std::fmt::Display for FlagError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.flag, self.why)
    }
}

impl std::error::Error for FlagError {}

fn bad(flag: &'static str, why: impl Into<String>) -> FlagError {
    FlagError { flag, why: why.into() }
}

/// The driver's configuration for `args`, checked (stage 1).
///
/// # Errors
/// The first bad flag.
pub fn config(args: &Args) -> Result<(Config, Vec<Workload>), FlagError> {
    let workloads = parse_workloads(&args.workloads).map_err(|e| bad("--workloads", e))?;
    if args.paths.iter().any(|p| p.as_os_str().is_empty()) {
        return Err(bad("--paths", "an empty path"));
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(p) = args.paths.iter().find(|p| !seen.insert(*p)) {
        return Err(bad("--paths", format!("{} is named twice", p.display())));
    }
    if args.value_size == 0 {
        return Err(bad("--value_size", "0: values must hold at least 1 byte"));
    }
    match args.engine {
        EngineArg::Hash if args.value_size > shale_hash::VALUE_BYTES_MAX => {
            return Err(bad(
                "--value_size",
                format!(
                    "{} is over the hash engine's {} bytes (2 MiB)",
                    args.value_size,
                    shale_hash::VALUE_BYTES_MAX
                ),
            ));
        }
        EngineArg::Lsm if args.value_size > crate::store::ENTRY_BYTES_MAX - args.key_size => {
            return Err(bad(
                "--value_size",
                format!("{} is over the lsm engine's limit for one entry", args.value_size),
            ));
        }
        EngineArg::Lsm if args.index != IndexArg::InMemory => {
            return Err(bad("--index", "the lsm engine has no index mode: leave --index out"));
        }
        EngineArg::Hash
            if args.index == IndexArg::Bounded
                && args.index_cache_bytes < shale_hash::INDEX_CACHE_BYTES_MIN =>
        {
            return Err(bad(
                "--index_cache_bytes",
                format!(
                    "{} is under the bounded index's {} bytes (four pages)",
                    args.index_cache_bytes,
                    shale_hash::INDEX_CACHE_BYTES_MIN
                ),
            ));
        }
        EngineArg::Lsm if args.queue_depth > 1 => {
            return Err(bad(
                "--queue_depth",
                "the lsm engine is driven by synchronous calls here: use 1 (or more threads)",
            ));
        }
        _ => {}
    }
    let duration = match args.duration {
        None => None,
        Some(s) if s.is_finite() && s > 0.0 && s <= 1e6 => Some(Duration::from_secs_f64(s)),
        Some(s) => return Err(bad("--duration", format!("{s}: seconds in (0, 1000000]"))),
    };
    let c = Config {
        num: args.num,
        operations: args.operations.unwrap_or(args.num),
        key_size: args.key_size,
        value_size: args.value_size,
        threads_per_instance: args.threads_per_instance,
        queue_depth: args.queue_depth,
        pin: args.pin,
        duration,
        seed: args.seed,
    };
    c.validate(args.paths.len().max(1)).map_err(|e| {
        let flag = ["--key_size", "--threads_per_instance", "--queue_depth", "--num", "--duration"]
            .into_iter()
            .find(|f| e.starts_with(f))
            .unwrap_or("--paths");
        // The driver's message names the flag first: said once, before the colon.
        let why = e.strip_prefix(flag).map_or(e.as_str(), str::trim_start);
        bad(flag, why)
    })?;
    Ok((c, workloads))
}

/// Runs the workloads and prints their lines.
///
/// # Errors
/// Bad flags, a path that cannot hold a store, the stores' errors, a CSV that cannot be
/// written, or operations that failed.
pub fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    shale_space::contention::enable(args.contention);
    // argv is `shale kvbench` and nothing else: the default suite.
    let default;
    let args = if std::env::args_os().len() <= 2 {
        errln!(
            "shale kvbench: no flags given, running the default suite on a temporary store: {}",
            DEFAULT_SUITE.join(" ")
        );
        default = default_suite()?;
        &default
    } else {
        args
    };
    let (config, workloads) = config(args)?;
    // Declared before the stores, so they are closed before it is removed.
    let temp = match args.paths.is_empty() {
        true => Some(TempStore::new(
            "shale-kvbench-",
            match args.engine {
                // The lsm engine keeps its WAL tail in /dev/shm: its own removal takes it too.
                EngineArg::Lsm => Some(crate::store::destroy_lsm),
                EngineArg::Hash => None,
            },
        )?),
        false => None,
    };
    let mut paths = Vec::with_capacity(args.paths.len().max(1));
    for p in &args.paths {
        let path = crate::store::prepare(p, false)?;
        let engine = match args.engine {
            EngineArg::Hash => shale_space::EngineKind::Hash,
            EngineArg::Lsm => shale_space::EngineKind::Lsm,
        };
        crate::store::destroy(&path, engine)?;
        paths.push(path);
    }
    if let Some(t) = &temp {
        paths.push(t.path().to_path_buf());
    }
    let mut csv = match &args.csv {
        None => None,
        Some(f) => {
            let new = std::fs::metadata(f).map_or(true, |m| m.len() == 0);
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(f)
                .map_err(|e| crate::store::PathError::new("opening --csv", f, e))?;
            if new {
                writeln!(file, "{CSV_HEADER}")?;
            }
            Some(file)
        }
    };
    let ctx = CsvContext {
        engine: match args.engine {
            EngineArg::Hash => "hash",
            EngineArg::Lsm => "lsm",
        }
        .into(),
        run: args.run.clone(),
        num: config.num,
        key_size: config.key_size,
        value_size: config.value_size,
        threads_per_instance: config.threads_per_instance,
        queue_depth: config.queue_depth,
        sync: args.sync || args.engine == EngineArg::Hash,
    };
    let mut out =
        Output { csv: csv.as_mut(), ctx: &ctx, entry_bytes: config.key_size + config.value_size };
    match args.engine {
        EngineArg::Hash => {
            let instances = open_hash(&paths, &config, args)?;
            if let (Some(t), Some(i)) = (&temp, instances.first()) {
                t.announce("kvbench", &i.store.volume().header().volume_id);
            }
            header(
                args,
                &config,
                &paths,
                "every store durable when acknowledged (the hash engine has no unsynced mode; --sync changes nothing)",
            );
            let bench = Bench::new(instances, config)?.stop_on(crate::interrupt::flag());
            let errors = run_workloads(&bench, &workloads, &mut out)?;
            if crate::interrupt::requested() {
                for i in bench.into_instances() {
                    i.store.close();
                }
                return Ok(());
            }
            out.session(&bench)?;
            for (k, i) in bench.instances().iter().enumerate() {
                let s = i.store.stats();
                outln!(
                    "# hash[{k}]: {} keys, user bytes {}, log bytes written {} (gc {}), {} checkpoints of {} bytes, {} segments, index {:?}: {} bytes in memory, {} pages read, {} written, {} buckets; {} batches ({} behind others in flight), {} busy; {} reads from the value cache, {} reads answered on the caller's thread",
                    s.keys,
                    s.user_bytes,
                    s.log_bytes_written,
                    s.gc_bytes_written,
                    s.checkpoints,
                    s.checkpoint_bytes_written,
                    s.segments,
                    args.index_mode(),
                    s.index_memory_bytes,
                    s.index_page_reads,
                    s.index_page_writes,
                    s.index_buckets,
                    s.batches,
                    s.batches_overlapped,
                    s.busy,
                    s.value_cache_hits,
                    s.caller_reads
                );
            }
            for i in bench.into_instances() {
                i.store.close();
            }
            finish(errors)
        }
        EngineArg::Lsm => {
            let instances = open_lsm(args, &paths)?;
            if let (Some(t), Some(i)) = (&temp, instances.first()) {
                t.announce("kvbench", &i.db.volume().header().volume_id);
            }
            let durability = if args.sync {
                "every write durable when acknowledged (--sync: WAL synced per write)"
            } else {
                "writes acknowledged once their record is in the WAL tail, not synced: a killed process keeps them, a power cut may not (--sync for durable writes)"
            };
            header(args, &config, &paths, durability);
            let bench = Bench::new(instances, config)?.stop_on(crate::interrupt::flag());
            let errors = run_workloads(&bench, &workloads, &mut out)?;
            if crate::interrupt::requested() {
                for i in bench.into_instances() {
                    i.db.close()?;
                }
                return Ok(());
            }
            // What the writes left behind counts in the session's bytes.
            for i in bench.instances() {
                i.db.flush()?;
                i.db.wait_for_compaction()?;
            }
            out.session(&bench)?;
            for i in bench.into_instances() {
                i.db.close()?;
            }
            finish(errors)
        }
    }
}

/// Stage 2 for the hash engine: a store per path.
fn open_hash(
    paths: &[PathBuf],
    config: &Config,
    args: &Args,
) -> Result<Vec<HashInstance>, Box<dyn std::error::Error>> {
    let reads = if args.use_direct_reads {
        shale_hash::RecordReads::Direct
    } else {
        shale_hash::RecordReads::PageCache
    };
    let mut instances = Vec::with_capacity(paths.len());
    for (i, p) in paths.iter().enumerate() {
        let opts = HashOptions {
            // Room for every thread's window, so the driver's depth is what is in flight and
            // Busy stays rare.
            queue_depth: (config.threads_per_instance * config.queue_depth)
                .clamp(64, shale_hash::QUEUE_DEPTH_MAX),
            index: args.index_mode(),
            value_cache_bytes: args.value_cache_bytes,
            batches_in_flight: args.batches_in_flight,
            // With --pin, instance i's worker runs on the CPU its client threads run on.
            worker_cpu: config.pin.then_some(i),
            ..HashOptions::default()
        };
        let store = HashStore::open_with_reads(p, opts, reads)
            .map_err(|e| crate::store::PathError::new("opening the hash store at", p, e))?;
        instances.push(HashInstance {
            store,
            asynchronous: config.queue_depth > 1,
            stat: BlockStat::for_path(p),
        });
    }
    Ok(instances)
}

/// Stage 2 for the lsm engine: a store per path, with the comparison's options (those
/// `shale-compare kvbench` gives RocksDB: no compression, 10 bloom bits, the same memtable and
/// block cache).
fn open_lsm(
    args: &Args,
    paths: &[PathBuf],
) -> Result<Vec<LsmInstance>, Box<dyn std::error::Error>> {
    let mut instances = Vec::with_capacity(paths.len());
    for p in paths {
        let mut o = shale_lsm::Options {
            block_cache_bytes: args.cache_size,
            write_buffer_bytes: args.write_buffer_size,
            use_direct_reads: args.use_direct_reads,
            ..shale_lsm::Options::default()
        };
        o.sst.bloom_bits_per_key = 10;
        o.sst.compression = shale_lsm::sst::Compression::None;
        crate::store::fit_volume(&mut o);
        crate::store::validate_for_flags(&o)?;
        let db = crate::store::open(p, o, false)?;
        instances.push(LsmInstance {
            db,
            write: WriteOptions { sync: args.sync },
            stat: BlockStat::for_path(p),
        });
    }
    Ok(instances)
}

fn finish(errors: u64) -> Result<(), Box<dyn std::error::Error>> {
    if errors > 0 {
        return Err(format!("{errors} operations failed (see the lines above)").into());
    }
    Ok(())
}

fn header(args: &Args, c: &Config, paths: &[PathBuf], durability: &str) {
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    outln!(
        "# shale kvbench: engine {:?}, {} instances ({}), num {} per instance, operations {} per YCSB workload, key {} B, value {} B, {} threads per instance, queue depth {}, pin {}, duration {}, reads {}",
        args.engine,
        paths.len(),
        names.join(","),
        c.num,
        c.operations,
        c.key_size,
        c.value_size,
        c.threads_per_instance,
        c.queue_depth,
        if c.pin { "on" } else { "off" },
        c.duration.map_or("none".to_string(), |d| format!("{} s", d.as_secs_f64())),
        if args.use_direct_reads { "O_DIRECT" } else { "through the page cache" }
    );
    outln!("# durability: {durability}");
    outln!("# {} CPUs", shale_io::affinity::cpus());
}

struct Output<'a> {
    csv: Option<&'a mut std::fs::File>,
    ctx: &'a CsvContext,
    entry_bytes: usize,
}

impl Output<'_> {
    fn emit(&mut self, r: &WorkloadResult, lines: &str) -> std::io::Result<()> {
        out!("{lines}");
        if let Some(f) = self.csv.as_mut() {
            f.write_all(r.csv_rows(self.ctx).as_bytes())?;
        }
        Ok(())
    }

    fn session<I: Instance>(&mut self, bench: &Bench<I>) -> std::io::Result<()> {
        let s = bench.session();
        let lines = s.session_lines();
        self.emit(&s, &lines)
    }
}

/// Stage 3: every workload, each on all instances at once; returns the failed operations.
fn run_workloads<I: Instance>(
    bench: &Bench<I>,
    workloads: &[Workload],
    out: &mut Output<'_>,
) -> Result<u64, Box<dyn std::error::Error>> {
    let mut errors = 0;
    for &w in workloads {
        if crate::stdout_failed() || crate::interrupt::requested() {
            break;
        }
        shale_space::contention::reset();
        let r = Progress::follow(bench, w);
        if crate::interrupt::requested() {
            // Cut short by SIGINT or SIGTERM: no lines, which would read as a whole run.
            break;
        }
        errors += r.total().errors;
        let lines = r.lines(out.entry_bytes);
        out.emit(&r, &lines)?;
        if shale_space::contention::enabled() {
            for line in shale_space::contention::report(r.total_ops()) {
                outln!("{line}");
            }
        }
    }
    Ok(errors)
}

/// The default suite's flags, parsed.
fn default_suite() -> Result<Args, clap::Error> {
    #[derive(clap::Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: Args,
    }
    use clap::Parser;
    Wrapper::try_parse_from(std::iter::once("shale-kvbench").chain(DEFAULT_SUITE.iter().copied()))
        .map(|w| w.args)
}

/// A workload's progress on stderr while it runs: a bar where stderr is a terminal, else a
/// line every [`PROGRESS_LINE_INTERVAL`] (so a long run in a log or under CI shows it is
/// alive), nothing for a workload shorter than that.
struct Progress;

impl Progress {
    /// Runs `workload` on `bench`, following its progress from a second thread that ends with
    /// the workload.
    fn follow<I: Instance>(bench: &Bench<I>, workload: Workload) -> WorkloadResult {
        let (finished, wait) = mpsc::channel::<()>();
        std::thread::scope(|s| {
            s.spawn(move || Progress::show(bench, workload, &wait));
            let r = bench.run(workload);
            drop(finished);
            r
        })
    }

    /// Shows the progress until `finished` says the workload is done (its sender dropped).
    fn show<I: Instance>(bench: &Bench<I>, workload: Workload, finished: &mpsc::Receiver<()>) {
        let total = bench.ops_total(workload);
        let name = workload.name();
        if std::io::stderr().is_terminal() {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "{msg:>8} [{bar:40}] {pos}/{len} ops {per_sec} eta {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style.progress_chars("=> "));
            bar.set_message(name);
            while finished.recv_timeout(PROGRESS_BAR_INTERVAL)
                == Err(mpsc::RecvTimeoutError::Timeout)
            {
                bar.set_position(bench.ops_done());
            }
            bar.finish_and_clear();
            return;
        }
        let started = Instant::now();
        while finished.recv_timeout(PROGRESS_LINE_INTERVAL) == Err(mpsc::RecvTimeoutError::Timeout)
        {
            let done = bench.ops_done();
            errln!(
                "shale kvbench: {name}: {done} of {total} operations ({:.0}%), {:.0} s",
                100.0 * done as f64 / total.max(1) as f64,
                started.elapsed().as_secs_f64()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_suite_runs_every_workload_on_a_temporary_store() {
        let a = default_suite().unwrap();
        assert!(a.paths.is_empty(), "no --paths: a temporary store");
        let (c, workloads) = config(&a).unwrap();
        assert_eq!(workloads, Workload::ALL.to_vec());
        assert_eq!((a.engine, c.num, c.queue_depth), (EngineArg::Hash, 5000, 32));
    }
}
