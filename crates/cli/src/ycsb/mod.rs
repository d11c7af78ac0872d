//! `shale ycsb`: YCSB's core workloads (A to F) on the lsm engine, printing YCSB's report.
//!
//! The workloads, generators, client threads and report are the `shale-ycsb` crate's (shared
//! with the comparison harness, which drives other engines through the same code); this
//! module maps flags to its [`Config`] and to the store's options, and drives the store.
//!
//! Stages of one invocation:
//! 1. Parse flags ([`Args`]) into a [`Config`] and the store's options; decide the phases
//!    (`--phase`, default load then run; run alone with `--use_existing_db`).
//! 2. Open the store: a fresh temporary directory without `--db`; the store at `--db`, emptied
//!    first unless `--use_existing_db` (only a shale store not in use is emptied; anything else
//!    at `--db` is refused untouched, and `--use_existing_db` needs a store there:
//!    `crate::store`).
//! 3. A run phase on records loaded before (`--use_existing_db` without a load): the store
//!    must hold `--records` records, or the run is refused naming both counts
//!    ([`check_loaded`]), instead of answering most reads NOT_FOUND.
//! 4. Each phase: progress on stderr, then YCSB's report on stdout after a `# ` line naming it.
//! 5. Close the store. Engine errors (`Return=ERROR`) are listed on stderr and make the exit
//!    status non-zero.
//!
//! SIGINT or SIGTERM stops the phase under way (no report for it), closes the store and
//! removes a temporary one (`crate::interrupt`).

mod engine;
mod options;
mod table;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use ::ycsb::{
    Config, KeyFormat, Preset, RecordLayout, Report, RequestDistribution, ScanLengthDistribution,
};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use shale_lsm::WriteOptions;

use crate::temp_store::TempStore;
use crate::ycsb::engine::ShaleEngine;

/// Which phases to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PhaseArg {
    /// Insert the records only (YCSB's `load`).
    Load,
    /// Run the workload only, on records loaded before (YCSB's `run`).
    Run,
    /// Load, then run.
    Both,
}

/// Which engine runs the workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineArg {
    /// The lsm key-value store.
    Lsm,
    /// The table engine (LATTE), one row per record.
    Table,
}

/// Flags of `shale ycsb`. Workload flags are YCSB's property names (`--readproportion`, ...);
/// store flags are db_bench's, as `shale bench` takes them.
#[derive(clap::Args, Clone, Debug, PartialEq)]
#[command(after_help = "Writes are unsynced (--sync=false) by default, as YCSB's RocksDB \
binding writes: acknowledged once they reach the device (they survive a crash of the process), \
not once durable. Updates read the record, replace one random field and write the record back \
(YCSB's writeallfields=false); --writeallfields makes them blind writes of a whole record.")]
pub struct Args {
    /// The engine: lsm (the key-value store, the default) or table (the table engine, in
    /// LATTE's row layout: a 255-byte key and five 50-byte columns, one table `usertable`).
    #[arg(long = "engine", value_enum, default_value = "lsm")]
    pub engine: EngineArg,
    /// Where the table engine keeps its undo log: auto (on DAX persistent memory where
    /// found, else on the store's volume), volume, or pmem (a persistent memory file, DAX or
    /// emulated: LATTE's setting; a reboot may remove an emulated one). Default: pmem when
    /// --pmem_path is given, else auto.
    #[arg(long = "undo_log", value_parser = ["auto", "volume", "pmem"])]
    pub undo_log: Option<String>,
    /// The table engine's persistent memory file for its undo log (with --undo_log pmem: by
    /// default a new file in /dev/shm, printed in the header; a store made with one finds
    /// it again by itself).
    #[arg(long = "pmem_path")]
    pub pmem_path: Option<PathBuf>,
    /// Open a table store whose undo log file is missing (a reboot removed it) or is the
    /// original's (the store is a copy), rolling nothing back: right only if the store was
    /// closed cleanly.
    #[arg(long = "accept_lost_undo_log")]
    pub accept_lost_undo_log: bool,
    /// The table engine's block I/O through this many queue pairs, LATTE's parallel queues
    /// (each request to the queue whose requests in flight weigh least, a completion poller
    /// per queue); 0, the default: a queue per thread, waited on by that thread.
    #[arg(long = "io_queues", default_value_t = 0)]
    pub io_queues: usize,
    /// Where the queue pairs' threads run: naive, pair-binding, separated or skew (LATTE's
    /// affinity modes).
    #[arg(long = "io_affinity", default_value = "naive", value_parser = parse_affinity)]
    pub io_affinity: shale_io::Affinity,
    /// How the queue pairs' pollers wait: spin (a core each while requests are in flight)
    /// or adaptive (20 us of polling, then a sleep).
    #[arg(long = "io_poller", default_value = "adaptive", value_parser = parse_poller)]
    pub io_poller: shale_io::PollerWait,
    /// A polling kernel thread per queue pair takes its submissions (io_uring's SQPOLL, the
    /// pair's submission side that the affinity mode places).
    #[arg(long = "io_sq_poll", value_parser = parse_bool, num_args = 0..=1, default_value = "true", default_missing_value = "true")]
    pub io_sq_poll: bool,
    /// Core workload: a (50% read, 50% update), b (95/5 read/update), c (read only),
    /// d (95% read, 5% insert, latest), e (95% scan, 5% insert), f (50% read, 50%
    /// read-modify-write); all zipfian but d. Later flags override its properties.
    #[arg(long = "workload", default_value = "a")]
    pub workload: Preset,
    /// Phases to run: load, run or both; default both, or run with --use_existing_db.
    #[arg(long = "phase", value_enum)]
    pub phase: Option<PhaseArg>,
    /// Records to load (YCSB's recordcount); a run picks from this many.
    #[arg(long = "records", visible_alias = "recordcount", default_value_t = 1000)]
    pub records: u64,
    /// Operations of the run phase, over all threads (YCSB's operationcount).
    #[arg(long = "operations", visible_alias = "operationcount", default_value_t = 1000)]
    pub operations: u64,
    /// Client threads.
    #[arg(long = "threads", visible_alias = "threadcount", default_value_t = 1)]
    pub threads: usize,
    /// Fields per record (default 10; 5 with --engine table).
    #[arg(long = "fieldcount")]
    pub fieldcount: Option<usize>,
    /// Bytes per field (default 100; 50 with --engine table).
    #[arg(long = "fieldlength")]
    pub fieldlength: Option<usize>,
    /// How records are picked: uniform, zipfian or latest (default: the workload's).
    #[arg(long = "requestdistribution")]
    pub requestdistribution: Option<RequestDistribution>,
    /// Weight of reads (default: the workload's).
    #[arg(long = "readproportion")]
    pub readproportion: Option<f64>,
    /// Weight of updates (default: the workload's).
    #[arg(long = "updateproportion")]
    pub updateproportion: Option<f64>,
    /// Weight of inserts (default: the workload's).
    #[arg(long = "insertproportion")]
    pub insertproportion: Option<f64>,
    /// Weight of scans (default: the workload's).
    #[arg(long = "scanproportion")]
    pub scanproportion: Option<f64>,
    /// Weight of read-modify-writes (default: the workload's).
    #[arg(long = "readmodifywriteproportion")]
    pub readmodifywriteproportion: Option<f64>,
    /// Shortest scan in records (default: the workload's, 1).
    #[arg(long = "minscanlength")]
    pub minscanlength: Option<u64>,
    /// Longest scan in records (default: the workload's, 100 for e).
    #[arg(long = "maxscanlength")]
    pub maxscanlength: Option<u64>,
    /// How scan lengths are picked: uniform or zipfian (default: the workload's, uniform).
    #[arg(long = "scanlengthdistribution")]
    pub scanlengthdistribution: Option<ScanLengthDistribution>,
    /// Updates write every field, without reading the record first.
    #[arg(long = "writeallfields", value_parser = parse_bool, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub writeallfields: bool,
    /// Key order of inserts: hashed (keys "user" + FNV hash of the record number) or ordered.
    #[arg(long = "insertorder", default_value = "hashed", value_parser = ["hashed", "ordered"])]
    pub insertorder: String,
    /// Pad record numbers in keys with zeros to this many digits.
    #[arg(long = "zeropadding", default_value_t = 1)]
    pub zeropadding: usize,
    /// Seed of the client threads' random number generators.
    #[arg(long = "seed", default_value_t = 0)]
    pub seed: u64,
    /// Print the contention profile after each phase: per lock or hand-off of the engine,
    /// acquisitions, waits, time waited and held, per operation (`shale_space::contention`).
    #[arg(long = "contention", value_parser = crate::bench::parse_bool, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub contention: bool,

    /// Sync every write (durable when acknowledged).
    #[arg(long = "sync", value_parser = parse_bool, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub sync: bool,
    /// Where the store lives; without it, a temporary directory deleted afterwards.
    #[arg(long = "db")]
    pub db: Option<PathBuf>,
    /// The capacity volume and the level pointer of a tiered store (shale's own flags).
    #[command(flatten)]
    pub tiers: crate::store::TierArgs,
    /// ADOC's tuner: adoc (the default), off, adoc-t (threads only) or adoc-b (batch only).
    #[arg(long = "tuner", value_parser = crate::bench::parse_tuner)]
    pub tuner: Option<shale_lsm::TunerMode>,
    /// The tuner's window in milliseconds (default 1000).
    #[arg(long = "tuner_window_ms")]
    pub tuner_window_ms: Option<u64>,
    /// The memory the process may use, within half of which the store keeps the block cache,
    /// the memtables (their size lowered at open where need be) and the WAL tail: host (the
    /// default), none, or bytes (`shale bench --memory_limit`).
    #[arg(long = "memory_limit", value_parser = crate::bench::parse_memory_limit)]
    pub memory_limit: Option<shale_lsm::MemoryLimit>,
    /// After the reports, print the store's statistics as `shale bench --statistics` does
    /// (`shale.*` counters: bytes written, stalls by kind, the tuner's answers, the tiers).
    #[arg(long = "statistics", value_parser = crate::bench::parse_bool, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub statistics: bool,
    /// Keep the store at --db (loaded by an earlier `--phase load`) and only run.
    #[arg(long = "use_existing_db", value_parser = parse_bool, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub use_existing_db: bool,
    /// Bytes of block cache (default: the engine's, 32 MiB).
    #[arg(long = "cache_size")]
    pub cache_size: Option<usize>,
    /// Bytes a memtable holds before it is flushed (default: the engine's, 64 MiB).
    #[arg(long = "write_buffer_size")]
    pub write_buffer_size: Option<usize>,
    /// Memtables, active and sealed, before writes stall.
    #[arg(long = "max_write_buffer_number")]
    pub max_write_buffer_number: Option<usize>,
    /// Size at which compaction output is cut into a new SST.
    #[arg(long = "target_file_size_base")]
    pub target_file_size_base: Option<u64>,
    /// Target size of L1.
    #[arg(long = "max_bytes_for_level_base")]
    pub max_bytes_for_level_base: Option<u64>,
    /// Compression of SST data blocks: none, lz4 or zstd.
    #[arg(long = "compression_type", default_value = "none")]
    pub compression_type: String,
    /// Bloom filter bits per key; 0 for no filter.
    #[arg(long = "bloom_bits")]
    pub bloom_bits: Option<u32>,
    /// Read compactions' inputs in the idle I/O class while the store is not behind (true),
    /// or at the threads' own priority (false, the engine's default:
    /// `Options::idle_compaction_io`).
    #[arg(long = "idle_compaction_io", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub idle_compaction_io: Option<bool>,
    /// How the flush and compaction threads compete for the CPU with the client threads:
    /// normal (the engine's default), low (niceness 19) or idle (`SCHED_IDLE`)
    /// (`Options::background_cpu_priority`).
    #[arg(long = "background_cpu_priority", value_parser = crate::bench::parse_cpu_priority)]
    pub background_cpu_priority: Option<shale_lsm::CpuPriority>,
}

impl Args {
    /// Fields per record: `--fieldcount`, or the engine's default.
    pub fn field_count(&self) -> usize {
        let default = match self.engine {
            EngineArg::Lsm => RecordLayout::default().field_count,
            EngineArg::Table => ::ycsb::table::LAYOUT.field_count,
        };
        self.fieldcount.unwrap_or(default)
    }

    /// Bytes per field: `--fieldlength`, or the engine's default.
    pub fn field_length(&self) -> usize {
        let default = match self.engine {
            EngineArg::Lsm => RecordLayout::default().field_length,
            EngineArg::Table => ::ycsb::table::LAYOUT.field_length,
        };
        self.fieldlength.unwrap_or(default)
    }
}

/// Parses an affinity mode's name.
fn parse_affinity(text: &str) -> Result<shale_io::Affinity, String> {
    shale_io::Affinity::parse(text).ok_or_else(|| {
        let names: Vec<_> = shale_io::Affinity::ALL.iter().map(|m| m.name()).collect();
        format!("{text:?} is none of {}", names.join(", "))
    })
}

/// Parses a poller's wait: spin or adaptive.
fn parse_poller(text: &str) -> Result<shale_io::PollerWait, String> {
    match text.to_ascii_lowercase().as_str() {
        "spin" => Ok(shale_io::PollerWait::Spin),
        "adaptive" => Ok(shale_io::PollerWait::default()),
        _ => Err(format!("{text:?} is neither spin nor adaptive")),
    }
}

/// Parses a gflags-style boolean: true/false, 1/0, yes/no (as `shale bench`).
fn parse_bool(text: &str) -> Result<bool, String> {
    match text.to_ascii_lowercase().as_str() {
        "1" | "true" | "t" | "yes" | "y" => Ok(true),
        "0" | "false" | "f" | "no" | "n" => Ok(false),
        _ => Err(format!("{text:?} is not a boolean (true, false, 1 or 0)")),
    }
}

/// A run that failed: bad flags, the store's error, or engine errors during the phases.
pub type Error = Box<dyn std::error::Error>;

/// The driver's configuration for `args`.
///
/// # Errors
/// A value the driver refuses, named.
pub fn config(args: &Args) -> Result<Config, Error> {
    options::check_limits(args)?;
    let mut c = Config::new(args.workload);
    c.record_count = args.records;
    c.operation_count = args.operations;
    c.threads = args.threads;
    c.layout = RecordLayout { field_count: args.field_count(), field_length: args.field_length() };
    c.key_format = KeyFormat {
        ordered_inserts: args.insertorder == "ordered",
        zero_padding: args.zeropadding,
    };
    c.write_all_fields = args.writeallfields;
    c.seed = args.seed;
    let w = &mut c.workload;
    let set = |field: &mut f64, value: Option<f64>| *field = value.unwrap_or(*field);
    set(&mut w.read_proportion, args.readproportion);
    set(&mut w.update_proportion, args.updateproportion);
    set(&mut w.insert_proportion, args.insertproportion);
    set(&mut w.scan_proportion, args.scanproportion);
    set(&mut w.read_modify_write_proportion, args.readmodifywriteproportion);
    w.request_distribution = args.requestdistribution.unwrap_or(w.request_distribution);
    w.min_scan_length = args.minscanlength.unwrap_or(w.min_scan_length);
    w.max_scan_length = args.maxscanlength.unwrap_or(w.max_scan_length);
    w.scan_length_distribution = args.scanlengthdistribution.unwrap_or(w.scan_length_distribution);
    c.validate().map_err(|e| name_flags(&e.to_string()))?;
    Ok(c)
}

/// YCSB's property names in the driver's messages, as the flags that set them: the message
/// then names what to change on this command line.
fn name_flags(message: &str) -> String {
    const FLAGS: &[(&str, &str)] = &[
        ("recordcount", "--records"),
        ("operationcount", "--operations"),
        ("threads", "--threads"),
        ("fieldcount", "--fieldcount"),
        ("fieldlength", "--fieldlength"),
        ("readproportion", "--readproportion"),
        ("updateproportion", "--updateproportion"),
        ("insertproportion", "--insertproportion"),
        ("scanproportion", "--scanproportion"),
        ("readmodifywriteproportion", "--readmodifywriteproportion"),
        ("minscanlength", "--minscanlength"),
        ("maxscanlength", "--maxscanlength"),
    ];
    let mut out = String::with_capacity(message.len() + 16);
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        let flag = FLAGS.iter().find(|(p, _)| p == word).map(|(_, f)| *f);
        let already = out.ends_with('-');
        out.push_str(if already { word.as_str() } else { flag.unwrap_or(word.as_str()) });
        word.clear();
    };
    for ch in message.chars() {
        if ch.is_ascii_alphanumeric() {
            word.push(ch);
        } else {
            flush(&mut word, &mut out);
            out.push(ch);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// The phases to run: (load, run).
fn phases(args: &Args) -> Result<(bool, bool), Error> {
    if args.use_existing_db && args.db.is_none() {
        return Err("--use_existing_db needs --db PATH (a store loaded by `--phase load`)".into());
    }
    let default = if args.use_existing_db { PhaseArg::Run } else { PhaseArg::Both };
    match args.phase.unwrap_or(default) {
        PhaseArg::Load => Ok((true, false)),
        PhaseArg::Run if !args.use_existing_db => Err("--phase run needs records loaded \
            before: pass --db PATH --use_existing_db for a store loaded with --phase load"
            .into()),
        PhaseArg::Run => Ok((false, true)),
        PhaseArg::Both => Ok((true, true)),
    }
}

/// Runs the phases and prints their reports.
///
/// # Errors
/// Bad flags, the store's errors, and engine errors counted during the phases.
pub fn run(args: &Args) -> Result<(), Error> {
    let config = config(args)?;
    let (load, run) = phases(args)?;
    if run {
        // Checked before the store is touched, not when the run phase starts.
        config.validate_run().map_err(|e| name_flags(&e.to_string()))?;
    }
    let phases = Phases { load, run };
    if args.engine == EngineArg::Lsm && args.io_queues > 0 {
        return Err("--io_queues drives the table engine's queue pairs: pass --engine table".into());
    }
    match args.engine {
        EngineArg::Lsm => run_lsm(args, &config, phases),
        EngineArg::Table => run_table(args, &config, phases),
    }
}

/// Which phases an invocation runs.
#[derive(Clone, Copy)]
struct Phases {
    load: bool,
    run: bool,
}

/// The lsm engine's store, opened as `shale bench` opens it, and the phases on it.
fn run_lsm(args: &Args, config: &Config, phases: Phases) -> Result<(), Error> {
    let mut options = options::options(args)?;
    args.tiers.apply(&mut options);
    crate::store::apply_tuner(&mut options, args.tuner, args.tuner_window_ms, args.memory_limit);
    // Declared before the store, so the store is closed (or dropped) before it is removed.
    let temp = match &args.db {
        Some(_) => None,
        None => Some(TempStore::new("shale-ycsb-", Some(crate::store::destroy_lsm))?),
    };
    let path: PathBuf = match (&args.db, &temp) {
        (Some(p), _) => crate::store::prepare(p, args.use_existing_db)?,
        (None, Some(t)) => t.path().to_path_buf(),
        (None, None) => unreachable!("a temporary directory exists without --db"),
    };
    if !args.use_existing_db {
        crate::store::destroy(&path, shale_space::EngineKind::Lsm)?;
    }
    args.tiers.prepare(&mut options, args.use_existing_db)?;
    let db = crate::store::open(&path, options, args.use_existing_db)?;
    if let Some(t) = &temp {
        t.announce("ycsb", &db.volume().header().volume_id);
    }
    let engine = ShaleEngine::new(db, WriteOptions { sync: args.sync });
    let writes = if args.sync { "synced" } else { "unsynced" };
    print_header(args, config, writes, &format!("store {}", path.display()));
    let errors = run_phases(&engine, args, config, phases, &path)?;
    let db = engine.into_db();
    if args.statistics && !crate::interrupt::requested() {
        crate::bench::print_statistics(&db.stats());
    }
    db.close()?;
    drop(temp);
    check_errors(errors)
}

/// The table engine's store (`table.rs`), and the phases on it.
fn run_table(args: &Args, config: &Config, phases: Phases) -> Result<(), Error> {
    table::check_layout(args)?;
    let temp = match &args.db {
        Some(_) => None,
        None => Some(TempStore::new("shale-ycsb-table-", None)?),
    };
    let path: PathBuf = match (&args.db, &temp) {
        (Some(p), _) => crate::store::prepare(p, args.use_existing_db)?,
        (None, Some(t)) => t.path().to_path_buf(),
        (None, None) => unreachable!("a temporary directory exists without --db"),
    };
    let (engine, pmem) = table::open(args, &path)?;
    let io = match args.io_queues {
        0 => "a queue per thread".to_string(),
        n => format!(
            "{n} queue pairs, affinity {}, pollers {}, SQ polling {}",
            args.io_affinity.name(),
            match args.io_poller {
                shale_io::PollerWait::Spin => "spin",
                shale_io::PollerWait::Adaptive { .. } => "adaptive",
            },
            if args.io_sq_poll { "on" } else { "off" }
        ),
    };
    let undo = match &pmem {
        None => "on the volume".to_string(),
        Some(p) if shale_table::dax_at(p.parent().unwrap_or(&path)) => {
            format!("in {} (DAX persistent memory)", p.display())
        }
        Some(p) => format!("in {} (emulated persistent memory)", p.display()),
    };
    let where_ = format!(
        "table store {} (rows of 255 + 5 x 50 bytes), undo log {undo}, block I/O: {io}",
        path.display(),
    );
    print_header(args, config, "durable at commit (one transaction per operation)", &where_);
    let result = run_phases(&engine, args, config, phases, &path);
    if args.statistics && !crate::interrupt::requested() {
        outln!("# {:?}", engine.store().stats());
        for (i, p) in engine.store().queue_pair_stats().iter().enumerate() {
            outln!(
                "# queue pair {i}: {} requests, {} bytes, planned {:?}, poller on CPUs {:?}",
                p.requests,
                p.bytes,
                p.cpus,
                p.poller_cpus
            );
        }
    }
    drop(engine);
    if temp.is_some() {
        // The temporary store goes, and its persistent memory with it.
        if let Some(pmem) = &pmem {
            if let Err(e) = std::fs::remove_file(pmem) {
                errln!("shale ycsb: removing {}: {e}", pmem.display());
            }
        }
    }
    drop(temp);
    check_errors(result?)
}

/// Runs the phases on `engine` (the store at `path`), printing their reports; returns the
/// operations that failed. A phase stopped by SIGINT or SIGTERM prints no report.
fn run_phases(
    engine: &dyn ::ycsb::Engine,
    args: &Args,
    config: &Config,
    phases: Phases,
    path: &Path,
) -> Result<u64, Error> {
    let stop = crate::interrupt::flag();
    let mut errors = 0;
    shale_space::contention::enable(args.contention);
    let contention = |ops: u64| {
        if args.contention {
            for line in shale_space::contention::report(ops) {
                outln!("{line}");
            }
        }
    };
    if phases.load {
        shale_space::contention::reset();
        let bar = progress_bar("load", config.record_count);
        let report =
            ::ycsb::load_watched(engine, config, &|n| bar.set_position(n), Some(stop.as_ref()))?;
        bar.finish_and_clear();
        if crate::interrupt::requested() {
            return Ok(errors);
        }
        errors += print_report("load", &report);
        contention(config.record_count);
    }
    // No one reads the report any more (`| head`): skip the run, and clean up after.
    if phases.run && !crate::stdout_failed() && !crate::interrupt::requested() {
        if !phases.load {
            check_loaded(engine, config, path)?;
        }
        shale_space::contention::reset();
        let bar = progress_bar("run", config.operation_count);
        let report =
            ::ycsb::run_watched(engine, config, &|n| bar.set_position(n), Some(stop.as_ref()))?;
        bar.finish_and_clear();
        if crate::interrupt::requested() {
            return Ok(errors);
        }
        errors += print_report(&format!("run, workload {}", args.workload), &report);
        contention(config.operation_count);
    }
    Ok(errors)
}

/// Stage 3: checks that the store at `path` holds the `--records` records a run picks from.
/// A load inserts records `0..N` (every thread takes the next number), so the store holds
/// `--records` records when it holds the last one; when it does not, a binary search over
/// the record numbers finds how many a load put there (a few dozen reads), for the message.
///
/// # Errors
/// Fewer records than `--records`, naming both counts; the engine's error for a read.
fn check_loaded(engine: &dyn ::ycsb::Engine, config: &Config, path: &Path) -> Result<(), Error> {
    let asked = config.record_count;
    if asked == 0 {
        return Ok(());
    }
    let mut key = String::new();
    let mut present = |n: u64| -> Result<bool, Error> {
        config.key_format.write_key(n, &mut key);
        let found = engine.read(key.as_bytes()).map_err(|e| -> Error {
            format!(
                "reading record {n} of the store at {}: {}",
                path.display(),
                shale_io::Chain(&*e)
            )
            .into()
        })?;
        Ok(found.is_some())
    };
    if present(asked - 1)? {
        return Ok(());
    }
    if !present(0)? {
        return Err(format!(
            "--records {asked}: the store at {} holds none of the records a run reads (record \
             0, key {key:?}, is missing): load it first with --phase load, with the same \
             --insertorder and --zeropadding",
            path.display()
        )
        .into());
    }
    // Record `lo` is there, record `hi` is not.
    let (mut lo, mut hi) = (0, asked - 1);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if present(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let held = lo + 1;
    Err(format!(
        "--records {asked}: the store at {} holds {held} records (records 0 to {lo}; record \
         {hi} is missing), so most of the run's reads would find nothing: pass --records \
         {held}, or load {asked} records with --phase load",
        path.display()
    )
    .into())
}

/// The exit status for `errors` failed operations.
fn check_errors(errors: u64) -> Result<(), Error> {
    if errors > 0 {
        return Err(
            format!("{errors} operations failed (Return=ERROR); the first are above").into()
        );
    }
    Ok(())
}

/// What runs on what, as comment lines before the reports.
fn print_header(args: &Args, c: &Config, writes: &str, store: &str) {
    let w = &c.workload;
    outln!(
        "# shale ycsb: workload {}, records {} ({} fields x {} bytes), operations {}, threads {}, seed {}",
        args.workload,
        c.record_count,
        c.layout.field_count,
        c.layout.field_length,
        c.operation_count,
        c.threads,
        c.seed
    );
    let scans = if w.scan_proportion > 0.0 {
        format!(
            " (scans of {}..={} records, {})",
            w.min_scan_length, w.max_scan_length, w.scan_length_distribution
        )
    } else {
        String::new()
    };
    outln!(
        "# proportions read {} update {} insert {} scan {}{scans} read-modify-write {}; \
         {} requests; {} updates; {} writes; {}",
        w.read_proportion,
        w.update_proportion,
        w.insert_proportion,
        w.scan_proportion,
        w.read_modify_write_proportion,
        w.request_distribution,
        if c.write_all_fields { "whole-record" } else { "one-field (read, merge, write)" },
        writes,
        store
    );
}

/// Prints a phase's report, then its tail lines (`load READ latency micros : p50 ...`, see
/// `ycsb::latency`); lists its engine errors on stderr and returns how many there were.
fn print_report(phase: &str, report: &Report) -> u64 {
    outln!("# {phase}");
    out!("{report}");
    out!("{}", report.tail_lines());
    let errors = report.error_count();
    if errors > 0 {
        errln!("shale ycsb: {phase}: {errors} operations failed; the first:");
        for e in &report.errors {
            errln!("  {e}");
        }
    }
    errors
}

/// A bar on stderr when it is a terminal; hidden otherwise.
fn progress_bar(phase: &'static str, total: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    let style =
        ProgressStyle::with_template("{msg:>5} [{bar:40}] {pos}/{len} ops {per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style.progress_chars("=> "));
    bar.set_message(phase);
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn parse_args(flags: &[&str]) -> Result<Args, clap::Error> {
        parse(flags)
    }

    fn parse(flags: &[&str]) -> Result<Args, clap::Error> {
        #[derive(clap::Parser)]
        #[command(args_override_self = true)]
        struct Wrapper {
            #[command(flatten)]
            args: Args,
        }
        use clap::Parser;
        Wrapper::try_parse_from(std::iter::once("shale-ycsb").chain(flags.iter().copied()))
            .map(|w| w.args)
    }

    #[test]
    fn defaults_are_ycsbs() {
        let a = parse(&[]).unwrap();
        let c = config(&a).unwrap();
        assert_eq!(c, Config::new(Preset::A));
        assert_eq!(phases(&a).unwrap(), (true, true));
        assert!(!a.sync);
    }

    #[test]
    fn flags_override_the_workload() {
        let a = parse(&[
            "--workload=e",
            "--records",
            "50",
            "--operationcount=70",
            "--threads=3",
            "--fieldcount=2",
            "--fieldlength",
            "9",
            "--requestdistribution=uniform",
            "--maxscanlength=10",
            "--scanlengthdistribution=zipfian",
            "--insertproportion=0.5",
            "--writeallfields",
            "--seed=5",
        ])
        .unwrap();
        let c = config(&a).unwrap();
        assert_eq!((c.record_count, c.operation_count, c.threads, c.seed), (50, 70, 3, 5));
        assert_eq!((c.layout.field_count, c.layout.field_length), (2, 9));
        let w = &c.workload;
        assert_eq!(w.request_distribution, RequestDistribution::Uniform);
        assert_eq!((w.scan_proportion, w.insert_proportion, w.max_scan_length), (0.95, 0.5, 10));
        assert_eq!(w.scan_length_distribution, ScanLengthDistribution::Zipfian);
        assert!(c.write_all_fields);
    }

    #[test]
    fn bad_flags_and_values_are_named() {
        let err = parse(&["--workload=g"]).unwrap_err().to_string();
        assert!(err.contains("--workload") && err.contains("\"g\""), "{err}");
        let err = parse(&["--requestdistribution=hotspot"]).unwrap_err().to_string();
        assert!(err.contains("hotspot"), "{err}");
        let err = parse(&["--no_such_flag=1"]).unwrap_err().to_string();
        assert!(err.contains("--no_such_flag"), "{err}");
        let err = config(&parse(&["--threads=0"]).unwrap()).unwrap_err().to_string();
        assert!(err.contains("threads"), "{err}");
        let err = config(&parse(&["--readproportion=-1"]).unwrap()).unwrap_err().to_string();
        assert!(err.contains("readproportion"), "{err}");
    }

    #[test]
    fn driver_messages_name_the_flags() {
        assert_eq!(
            name_flags("recordcount is 0 but workload picks existing records"),
            "--records is 0 but workload picks existing records"
        );
        assert_eq!(
            name_flags("scan lengths 5..=1 are empty (minscanlength, maxscanlength)"),
            "scan lengths 5..=1 are empty (--minscanlength, --maxscanlength)"
        );
        assert_eq!(name_flags("--threads already"), "--threads already");
        let err = config(&parse(&["--readproportion=NaN"]).unwrap()).unwrap_err().to_string();
        assert!(err.contains("--readproportion"), "{err}");
    }

    #[test]
    fn phases_follow_the_store_flags() {
        let p = |flags: &[&str]| phases(&parse(flags).unwrap());
        assert_eq!(p(&["--phase=load"]).unwrap(), (true, false));
        assert!(p(&["--phase=run"]).unwrap_err().to_string().contains("--use_existing_db"));
        assert!(p(&["--use_existing_db"]).unwrap_err().to_string().contains("--db"));
        assert_eq!(p(&["--db=/x", "--use_existing_db"]).unwrap(), (false, true));
        assert_eq!(p(&["--db=/x", "--use_existing_db", "--phase=both"]).unwrap(), (true, true));
    }

    #[test]
    fn store_flags_reach_the_options() {
        let a = parse(&[
            "--cache_size=1048576",
            "--write_buffer_size=524288",
            "--target_file_size_base=262144",
            "--compression_type=lz4",
            "--bloom_bits=5",
        ])
        .unwrap();
        let o = options::options(&a).unwrap();
        assert_eq!((o.block_cache_bytes, o.write_buffer_bytes), (1 << 20, 512 << 10));
        assert_eq!(o.volume.layout.slot_bytes, 256 << 10);
        assert_eq!(o.sst.bloom_bits_per_key, 5);
        let err = options::options(&parse(&["--compression_type=snappy"]).unwrap()).unwrap_err();
        assert!(err.contains("snappy"), "{err}");
    }
}
