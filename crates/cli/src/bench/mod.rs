//! `shale bench`: the lsm engine measured the way RocksDB's `db_bench` measures RocksDB.
//!
//! Same benchmark names, same flags (`--flag=value` or `--flag value`), same output: a header
//! block, then one result line per benchmark,
//!
//! `fillrandom   :       4.123 micros/op 242541 ops/sec 4.123 seconds 1000000 operations;   26.8 MB/s`
//!
//! so that results sit beside db_bench's. micros/op is the threads' summed time per operation,
//! ops/sec is operations over wall-clock time, and MB is 2^20 bytes (as db_bench's).
//!
//! Stages of one run:
//! 1. Parse flags ([`Args`]); with no flags at all, use the default suite ([`DEFAULT_SUITE`]).
//!    db_bench's flags without a shale knob are taken out first, each named once in a warning
//!    on stderr ([`db_bench_flags`]).
//! 2. Check every value against its limit and map the flags to the engine's
//!    [`shale_lsm::Options`] ([`config`]); stages 1 and 2 are [`options_from_args`], which
//!    never touches the file system.
//! 3. Open the store (a fresh temporary directory without `--db`; an existing shale store is
//!    destroyed unless `--use_existing_db`, and anything else at `--db` is refused untouched:
//!    `crate::store`), print the header ([`report::print_header`]).
//! 4. Run each benchmark on `--threads` threads ([`workload`]), print its result line and, with
//!    `--histogram`, its latency percentiles. Fill benchmarks start from an empty store.
//! 5. Close the store; with `--statistics`, print the engine's counters.

mod async_workload;
pub mod config;
pub mod db_bench_flags;
mod histogram;
mod keys;
#[cfg(test)]
mod options_props;
mod report;
pub(crate) use report::print_statistics;
pub(crate) mod timeline;
mod workload;

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Instant;

use shale_lsm::Db;

use crate::bench::report::Stats;
use crate::bench::workload::{Benchmark, Shared};
use crate::temp_store::TempStore;

/// The suite `shale bench` runs when given no flags: small enough to finish in well under a
/// minute on a 2-core machine, large enough to flush and compact several times. Each unsynced
/// put costs the engine one WAL device write today (about 5,000 a second on the reference
/// machine), which bounds --num here: 200,000 entries took 2.5 minutes.
pub const DEFAULT_SUITE: &[&str] = &[
    "--benchmarks=fillseq,fillrandom,overwrite,readrandom,readseq,seekrandom",
    "--num=30000",
    "--write_buffer_size=524288",
    "--target_file_size_base=524288",
    "--max_bytes_for_level_base=2097152",
    "--cache_size=1048576",
];

/// Flags of `shale bench`, with db_bench's names, meanings and (for the benchmark's shape)
/// defaults. Engine knobs left out keep the engine's own defaults, which are RocksDB's.
#[derive(clap::Args, Clone, Debug, PartialEq)]
pub struct Args {
    /// Comma-separated benchmarks, run in order (fillseq, fillrandom, filluniquerandom,
    /// overwrite, fillsync, fillbatch, readseq, readreverse, readrandom, readmissing,
    /// multireadrandom, seekrandom, readwhilewriting, deleterandom, stats, levelstats, flush,
    /// compact, waitforcompaction).
    #[arg(
        long = "benchmarks",
        default_value = "fillseq,fillrandom,overwrite,readrandom,readseq,seekrandom"
    )]
    pub benchmarks: String,
    /// Number of key-value pairs to place in the store (and of writes per benchmark).
    #[arg(long = "num", default_value_t = 1_000_000)]
    pub num: u64,
    /// Reads per read benchmark; negative means --num.
    #[arg(long = "reads", default_value_t = -1, allow_negative_numbers = true)]
    pub reads: i64,
    /// Writes per thread of a write benchmark; negative (or 0) means --num, as in db_bench
    /// (fillsync too: it writes this many over --num/1000 keys).
    #[arg(long = "writes", default_value_t = -1, allow_negative_numbers = true)]
    pub writes: i64,
    /// Concurrent threads per benchmark (readwhilewriting adds one writer).
    #[arg(long = "threads", default_value_t = 1)]
    pub threads: usize,
    /// Seconds each benchmark runs for instead of a number of operations; 0 means use --num.
    #[arg(long = "duration", default_value_t = 0)]
    pub duration: u64,
    /// Bytes per key.
    #[arg(long = "key_size", default_value_t = 16)]
    pub key_size: usize,
    /// Bytes per value.
    #[arg(long = "value_size", default_value_t = 100)]
    pub value_size: usize,
    /// Entries per write batch (and keys per multireadrandom operation: one `Db::multi_get`).
    #[arg(long = "batch_size", default_value_t = 1)]
    pub batch_size: usize,
    /// Base of the random generators' seeds; each benchmark's threads get the next seeds.
    /// 0 (the default) takes the clock's microseconds, printed so that a run can be replayed
    /// with `--seed` (db_bench's "Set seed to N because --seed was 0").
    #[arg(long = "seed", default_value_t = 0)]
    pub seed: u64,
    /// Sync every write (durable when acknowledged).
    #[arg(long = "sync", value_parser = parse_bool, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub sync: bool,
    /// Write without the WAL (not supported by the engine yet).
    #[arg(long = "disable_wal", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub disable_wal: Option<bool>,
    /// Where the store lives; without it, a temporary directory deleted afterwards.
    #[arg(long = "db")]
    pub db: Option<PathBuf>,
    /// Keep the store at --db and skip the fill benchmarks, which need an empty store.
    #[arg(long = "use_existing_db", value_parser = parse_bool, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub use_existing_db: bool,
    /// Bytes a memtable holds before it is flushed.
    #[arg(long = "write_buffer_size")]
    pub write_buffer_size: Option<usize>,
    /// Memtables, active and sealed, before writes stall.
    #[arg(long = "max_write_buffer_number")]
    pub max_write_buffer_number: Option<usize>,
    /// Background threads: one flushes, the others compact (at least 2).
    #[arg(long = "max_background_jobs", allow_negative_numbers = true)]
    pub max_background_jobs: Option<i64>,
    /// The capacity volume and the level pointer of a tiered store (shale's own flags).
    #[command(flatten)]
    pub tiers: crate::store::TierArgs,
    /// ADOC's tuner: adoc (threads and batch, the default), off, adoc-t (threads only) or
    /// adoc-b (batch only) (shale's own flag).
    #[arg(long = "tuner", value_parser = parse_tuner)]
    pub tuner: Option<shale_lsm::TunerMode>,
    /// The tuner's window in milliseconds (default 1000).
    #[arg(long = "tuner_window_ms")]
    pub tuner_window_ms: Option<u64>,
    /// The memory the process may use, within half of which the store keeps the block cache,
    /// the memtables (their size lowered at open where need be) and the WAL tail: host (the
    /// process's memory cgroup limit within the machine's RAM, the default), none, or bytes
    /// (shale's own flag: `Options::memory_limit`).
    #[arg(long = "memory_limit", value_parser = parse_memory_limit)]
    pub memory_limit: Option<shale_lsm::MemoryLimit>,
    /// Write a row per second to this CSV file: operations, p99 write latency, threads,
    /// batch, memtables, L0 files, pending compaction bytes, stalls by kind and the tuner's
    /// answer (docs/cli.md, "Timelines").
    #[arg(long = "timeline")]
    pub timeline: Option<PathBuf>,
    /// Most write groups whose sync WAL writes are in flight at once (shale's own flag:
    /// `Options::wal_loggers`, 0 to 8, 0 for none; the store adapts up to it).
    #[arg(long = "wal_loggers")]
    pub wal_loggers: Option<usize>,
    /// Size at which compaction output is cut into a new SST.
    #[arg(long = "target_file_size_base")]
    pub target_file_size_base: Option<u64>,
    /// Target size of L1 (static level sizing) or of the base level (dynamic).
    #[arg(long = "max_bytes_for_level_base")]
    pub max_bytes_for_level_base: Option<u64>,
    /// Growth factor of level sizes, a whole number of at least 2 (db_bench's is a double).
    #[arg(long = "max_bytes_for_level_multiplier", allow_negative_numbers = true)]
    pub max_bytes_for_level_multiplier: Option<f64>,
    /// Bytes of pending compaction from which each write is delayed.
    #[arg(long = "soft_pending_compaction_bytes_limit")]
    pub soft_pending_compaction_bytes_limit: Option<u64>,
    /// Bytes of pending compaction at which writes wait for compaction.
    #[arg(long = "hard_pending_compaction_bytes_limit")]
    pub hard_pending_compaction_bytes_limit: Option<u64>,
    /// Bytes a second writes go at, at most, while the store is slowed down (L0 past the
    /// slowdown trigger or debt past the soft limit); at least 16384, or 0 (the engine's
    /// default): each slowdown starts from the rate writes went in before it.
    #[arg(long = "delayed_write_rate")]
    pub delayed_write_rate: Option<u64>,
    /// Size levels from the largest one up. Off unless given, as in db_bench 11.8.1 (whose
    /// default is false), although the engine's `Options::default()` and RocksDB's library
    /// turn it on.
    #[arg(long = "level_compaction_dynamic_level_bytes", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub level_compaction_dynamic_level_bytes: Option<bool>,
    /// L0 SSTs that start a compaction into L1.
    #[arg(long = "level0_file_num_compaction_trigger")]
    pub level0_file_num_compaction_trigger: Option<usize>,
    /// L0 SSTs from which each write is delayed.
    #[arg(long = "level0_slowdown_writes_trigger")]
    pub level0_slowdown_writes_trigger: Option<usize>,
    /// L0 SSTs at which writes wait for compaction.
    #[arg(long = "level0_stop_writes_trigger")]
    pub level0_stop_writes_trigger: Option<usize>,
    /// Compression of SST data blocks: none, lz4 or zstd.
    #[arg(long = "compression_type")]
    pub compression_type: Option<String>,
    /// Bloom filter bits per key; negative means the engine's default, 0 no filter.
    #[arg(long = "bloom_bits", allow_negative_numbers = true)]
    pub bloom_bits: Option<f64>,
    /// Bytes of block cache; 0 or negative for none, as db_bench's `--cache_size=-1`.
    #[arg(long = "cache_size", allow_negative_numbers = true)]
    pub cache_size: Option<i64>,
    /// 1 puts the blocks of each new SST (flush and compaction outputs) into the block cache
    /// as it is written, 0 does not (default: the engine's, 1).
    #[arg(long = "prepopulate_block_cache", value_parser = clap::value_parser!(u8).range(0..=1))]
    pub prepopulate_block_cache: Option<u8>,
    /// Read SST blocks that miss the block cache with O_DIRECT (true) or through the page
    /// cache (false, db_bench's and the engine's default: `Options::use_direct_reads`).
    #[arg(long = "use_direct_reads", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub use_direct_reads: Option<bool>,
    /// Read compactions' inputs in the idle I/O class while the store is not behind (true),
    /// or at the threads' own priority (false, the engine's default:
    /// `Options::idle_compaction_io`).
    #[arg(long = "idle_compaction_io", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub idle_compaction_io: Option<bool>,
    /// How the flush and compaction threads compete for the CPU with the client threads:
    /// normal (the engine's default), low (niceness 19) or idle (`SCHED_IDLE`: they run only
    /// on cores the clients leave free) (`Options::background_cpu_priority`).
    #[arg(long = "background_cpu_priority", value_parser = parse_cpu_priority)]
    pub background_cpu_priority: Option<shale_lsm::CpuPriority>,
    /// Write the SSTs of flushes and compactions with O_DIRECT (true) or through the page
    /// cache, synced before they are committed (false, db_bench's and the engine's default:
    /// `Options::use_direct_io_for_flush_and_compaction`).
    #[arg(long = "use_direct_io_for_flush_and_compaction", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub use_direct_io_for_flush_and_compaction: Option<bool>,
    /// Keep SSTs' index and filter blocks in the block cache, charged and evictable (true),
    /// or held by each SST's reader outside it (false, db_bench's and the engine's default:
    /// `Options::cache_index_and_filter_blocks`).
    #[arg(long = "cache_index_and_filter_blocks", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub cache_index_and_filter_blocks: Option<bool>,
    /// Uncompressed bytes per SST data block.
    #[arg(long = "block_size")]
    pub block_size: Option<usize>,
    /// Keep uncompressed data blocks from crossing 4 KiB boundaries (`SstOptions::block_align`;
    /// true by default in shale, false in db_bench).
    #[arg(long = "block_align", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub block_align: Option<bool>,
    /// Issue puts and gets through the async API (`Db::submit_write`, `Db::submit_get`):
    /// each thread keeps up to 32 tickets outstanding and resubmits on Busy. Applies to the
    /// fill benchmarks, overwrite, readrandom and readmissing; the others run as without it.
    /// Not a db_bench flag.
    #[arg(long = "async", value_parser = parse_bool, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub use_async: bool,
    /// Print each benchmark's latency percentiles.
    #[arg(long = "histogram", value_parser = parse_bool, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub histogram: bool,
    /// Print the contention profile after each benchmark: per lock or hand-off of the
    /// engine, acquisitions, waits, time waited and held, per operation
    /// (`shale_space::contention`). Not a db_bench flag.
    #[arg(long = "contention", value_parser = parse_bool, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub contention: bool,
    /// Print the engine's counters at the end.
    #[arg(long = "statistics", value_parser = parse_bool, num_args = 0..=1, default_value = "false", default_missing_value = "true")]
    pub statistics: bool,
    /// Print each thread's progress on stderr this often; 0 means never.
    #[arg(long = "stats_interval_seconds", default_value_t = 0)]
    pub stats_interval_seconds: u64,
    /// Bytes per second all writing threads together may write; 0 means no limit.
    #[arg(long = "benchmark_write_rate_limit", default_value_t = 0)]
    pub benchmark_write_rate_limit: u64,
}

/// Parses `--tuner`.
pub(crate) fn parse_tuner(text: &str) -> Result<shale_lsm::TunerMode, String> {
    shale_lsm::TunerMode::parse(text)
        .ok_or_else(|| format!("'{text}' is no tuner mode (off, adoc, adoc-t, adoc-b)"))
}

/// Parses `--memory_limit`: host, none, or a positive number of bytes.
pub(crate) fn parse_memory_limit(text: &str) -> Result<shale_lsm::MemoryLimit, String> {
    match text.to_ascii_lowercase().as_str() {
        "host" => Ok(shale_lsm::MemoryLimit::Host),
        "none" | "unlimited" => Ok(shale_lsm::MemoryLimit::Unlimited),
        n => match n.parse::<u64>() {
            Ok(b) if b > 0 => Ok(shale_lsm::MemoryLimit::Bytes(b)),
            _ => Err(format!("'{text}' is no memory limit (host, none, or bytes above 0)")),
        },
    }
}

/// Parses `--background_cpu_priority`.
pub(crate) fn parse_cpu_priority(text: &str) -> Result<shale_lsm::CpuPriority, String> {
    shale_lsm::CpuPriority::parse(text)
        .ok_or_else(|| format!("'{text}' is no CPU priority (normal, low, idle)"))
}

/// Parses a gflags-style boolean: true/false, 1/0, yes/no.
pub(crate) fn parse_bool(text: &str) -> Result<bool, String> {
    match text.to_ascii_lowercase().as_str() {
        "1" | "true" | "t" | "yes" | "y" => Ok(true),
        "0" | "false" | "f" | "no" | "n" => Ok(false),
        _ => Err(format!("{text:?} is not a boolean (true, false, 1 or 0)")),
    }
}

/// A run that failed: bad flags, or the store's error.
pub type Error = Box<dyn std::error::Error>;

/// Takes db_bench's flags without a shale knob out of the command line, warning once on
/// stderr for each: `argv` is the whole command line; only `shale bench`'s are touched.
///
/// # Errors
/// An ignored flag without its value, named.
pub fn strip_ignored_flags(argv: Vec<OsString>) -> Result<Vec<OsString>, String> {
    if argv.get(1).is_none_or(|a| a != "bench") {
        return Ok(argv);
    }
    let mut argv = argv;
    let flags = argv.split_off(2);
    let (kept, warnings) = db_bench_flags::strip_ignored(flags)?;
    for w in warnings {
        errln!("shale bench: warning: {w}");
    }
    argv.extend(kept);
    Ok(argv)
}

/// Stages 1 and 2 in one, without touching the file system: the flags (after `bench`) parsed,
/// checked and mapped to the engine's options, with the warnings they earn. What the
/// property test drives.
///
/// # Errors
/// Unknown flags, bad values, values beyond a limit (each named with its limit), unknown
/// benchmarks, options the engine refuses.
pub fn options_from_args(
    flags: &[&str],
) -> Result<(Args, config::DbPlan, Vec<String>), Box<dyn std::error::Error>> {
    let (kept, mut warnings) =
        db_bench_flags::strip_ignored(flags.iter().map(OsString::from).collect())?;
    let kept: Vec<String> = kept.into_iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let args = parse_args(kept.iter().map(String::as_str))?;
    let plan = config::plan(&args, &mut |w| warnings.push(w))?;
    Ok((args, plan, warnings))
}

/// Runs the benchmarks and prints their results.
///
/// # Errors
/// Bad flags or benchmark names, a `--db` that holds something other than a shale store (or
/// no store, with `--use_existing_db`), and the store's errors, each naming the path.
pub fn run(args: &Args) -> Result<(), Error> {
    // argv is `shale bench` and nothing else: the default suite.
    let args = if std::env::args_os().len() <= 2 {
        errln!(
            "shale bench: no flags given, running the default suite: {}",
            DEFAULT_SUITE.join(" ")
        );
        default_suite()?
    } else {
        args.clone()
    };
    let mut plan = config::plan(&args, &mut |w| errln!("shale bench: warning: {w}"))?;
    args.tiers.apply(&mut plan.options);
    crate::store::apply_tuner(
        &mut plan.options,
        args.tuner,
        args.tuner_window_ms,
        args.memory_limit,
    );
    let benchmarks = config::benchmarks(&args)?;
    // Declared before the store, so the store is closed (or dropped) before it is removed.
    let temp = match &args.db {
        Some(_) => None,
        None => Some(TempStore::new("shale-bench-", Some(crate::store::destroy_lsm))?),
    };
    let path: PathBuf = match (&args.db, &temp) {
        (Some(p), _) => crate::store::prepare(p, args.use_existing_db)?,
        (None, Some(t)) => t.path().to_path_buf(),
        (None, None) => unreachable!("a temporary directory exists without --db"),
    };
    if !args.use_existing_db {
        crate::store::destroy(&path, shale_space::EngineKind::Lsm)?;
    }
    args.tiers.prepare(&mut plan.options, args.use_existing_db)?;
    let open = || crate::store::open(&path, plan.options.clone(), args.use_existing_db);
    let timeline = match &args.timeline {
        Some(p) => Some(
            timeline::Timeline::create(p)
                .map_err(|e| crate::store::PathError::new("creating the timeline", p, e))?,
        ),
        None => None,
    };
    let mut db = Some(open()?);
    if let (Some(t), Some(store)) = (&temp, &db) {
        t.announce("bench", &store.volume().header().volume_id);
    }
    let mut seed_next = seed_base(args.seed);
    report::print_header(&args, &plan, &path);
    shale_space::contention::enable(args.contention);
    // The store is empty until a benchmark has run on it: a first fill benchmark needs no
    // emptying (which a block device could not have: shale does not erase devices).
    let mut empty = !args.use_existing_db;
    for bench in benchmarks {
        if crate::stdout_failed() || crate::interrupt::requested() {
            // No one reads the results (`| head`), or SIGINT or SIGTERM came: stop, and
            // clean up below.
            break;
        }
        if bench.needs_fresh_db() {
            if args.use_existing_db {
                outln!("{:<12} : skipped (--use_existing_db is true)", bench.name());
                continue;
            }
            if !empty {
                if let Some(old) = db.take() {
                    old.close()?;
                }
                crate::store::destroy(&path, shale_space::EngineKind::Lsm)?;
                crate::store::destroy_capacity(&plan.options)?;
                db = Some(open()?);
            }
        }
        let store = db.as_ref().expect("the store is open between benchmarks");
        empty = false;
        run_one(store, bench, &args, &mut seed_next, timeline.as_ref())?;
    }
    if let Some(store) = db.take() {
        if args.statistics && !crate::interrupt::requested() {
            report::print_statistics(&store.stats());
        }
        store.close()?;
    }
    drop(temp);
    Ok(())
}

/// Runs one benchmark and prints its result.
fn run_one(
    db: &Db,
    bench: Benchmark,
    args: &Args,
    seed_next: &mut u64,
    timeline: Option<&timeline::Timeline>,
) -> Result<(), Error> {
    match bench {
        Benchmark::Stats => {
            report::print_db_stats(&db.stats());
            return Ok(());
        }
        Benchmark::LevelStats => {
            report::print_level_stats(&db.stats());
            return Ok(());
        }
        _ => {}
    }
    let mut shared = Shared::new(args, bench, *seed_next);
    shale_space::contention::reset();
    let started = Instant::now();
    let stats: Stats = match timeline {
        Some(t) => {
            let counters = std::sync::Arc::new(timeline::Counters::default());
            shared.timeline = Some(counters.clone());
            t.record(db, &counters, || workload::run(db, &shared))?
        }
        None => workload::run(db, &shared)?,
    };
    // Wrapping: --seed may be any u64, as db_bench's.
    *seed_next = seed_next.wrapping_add(shared.threads_total() as u64);
    if crate::interrupt::requested() {
        // Cut short by SIGINT or SIGTERM: no result line, which would read as a whole run.
        return Ok(());
    }
    report::print_result(bench.name(), &stats, started.elapsed());
    if args.histogram {
        report::print_histogram(bench.name(), bench.op_noun(), &stats);
    }
    if args.contention {
        for line in shale_space::contention::report(stats.ops()) {
            println!("{line}");
        }
    }
    Ok(())
}

/// The seed of the first benchmark's first thread: `--seed`, or for 0 the clock's
/// microseconds since the epoch, printed as db_bench prints it, so that a later run with
/// `--seed` replays this one and a later run without it draws other keys (a readrandom in a
/// separate invocation must not replay the fill's keys and find every one).
///
/// As in db_bench, each thread of each benchmark then takes the next seed in turn, so that
/// within one invocation a read benchmark draws other keys than the fill before it.
fn seed_base(seed: u64) -> u64 {
    if seed != 0 {
        return seed;
    }
    let micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    let seed = micros.max(1);
    outln!("Set seed to {seed} because --seed was 0");
    seed
}

/// The default suite's flags, parsed.
fn default_suite() -> Result<Args, Error> {
    options_from_args(DEFAULT_SUITE).map(|(args, _, _)| args)
}

/// Parses bench flags (without the program and subcommand names).
pub(crate) fn parse_args<'a>(
    flags: impl IntoIterator<Item = &'a str>,
) -> Result<Args, clap::Error> {
    // As `main`'s `Bench` subcommand: a repeated flag overrides, as in db_bench.
    #[derive(clap::Parser)]
    #[command(args_override_self = true)]
    struct Wrapper {
        #[command(flatten)]
        args: Args,
    }
    use clap::Parser;
    let argv = std::iter::once("shale-bench").chain(flags);
    Wrapper::try_parse_from(argv).map(|w| w.args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mapped_boolean_flag_takes_gflags_noflag() {
        let cmd = <Args as clap::Args>::augment_args(clap::Command::new("bench"));
        let booleans: Vec<String> = cmd
            .get_arguments()
            // The boolean flags are those that may go without a value (`--flag`).
            .filter(|a| a.get_num_args().is_some_and(|n| n.min_values() == 0))
            .filter_map(|a| a.get_long().map(str::to_string))
            .collect();
        let mut sorted = booleans.clone();
        sorted.sort();
        assert_eq!(sorted, db_bench_flags::MAPPED_BOOLS, "db_bench_flags::MAPPED_BOOLS");
        for name in booleans {
            let (_, plan, _) = options_from_args(&[&format!("--no{name}")]).unwrap();
            let (_, plan_false, _) = options_from_args(&[&format!("--{name}=false")]).unwrap();
            assert_eq!(format!("{:?}", plan.options), format!("{:?}", plan_false.options));
        }
        let (args, plan, _) = options_from_args(&["--nocache_index_and_filter_blocks"]).unwrap();
        assert_eq!(args.cache_index_and_filter_blocks, Some(false));
        assert!(!plan.options.cache_index_and_filter_blocks);
    }

    #[test]
    fn defaults_are_db_bench_defaults() {
        let a = parse_args([]).unwrap();
        assert_eq!((a.num, a.reads, a.threads, a.duration), (1_000_000, -1, 1, 0));
        assert_eq!((a.key_size, a.value_size, a.batch_size, a.seed), (16, 100, 1, 0));
        assert!(!a.sync && !a.histogram && !a.statistics && !a.use_existing_db && !a.use_async);
        assert_eq!(a.db, None);
        assert_eq!(a.write_buffer_size, None);
        assert_eq!(a.disable_wal, None);
        assert_eq!(a.benchmark_write_rate_limit, 0);
    }

    #[test]
    fn both_flag_forms_parse() {
        let eq = parse_args(["--num=5", "--key_size=20", "--benchmarks=readseq", "--reads=-1"]);
        let sp = parse_args(["--num", "5", "--key_size", "20", "--benchmarks", "readseq"]);
        let (eq, sp) = (eq.unwrap(), sp.unwrap());
        assert_eq!(eq, sp);
        assert_eq!((eq.num, eq.key_size, eq.benchmarks.as_str()), (5, 20, "readseq"));
        let neg = parse_args(["--reads", "-1", "--bloom_bits", "-1"]).unwrap();
        assert_eq!((neg.reads, neg.bloom_bits), (-1, Some(-1.0)));
    }

    #[test]
    fn a_repeated_flag_takes_its_last_value() {
        let a =
            parse_args(["--num=5", "--benchmarks=fillseq", "--num", "7", "--benchmarks=readseq"]);
        let a = a.unwrap();
        assert_eq!((a.num, a.benchmarks.as_str()), (7, "readseq"));
    }

    #[test]
    fn booleans_parse_as_gflags_does() {
        for (flags, want) in [
            (&["--sync"][..], true),
            (&["--sync=1"][..], true),
            (&["--sync=true"][..], true),
            (&["--sync", "0"][..], false),
            (&["--sync=false"][..], false),
            (&[][..], false),
        ] {
            assert_eq!(parse_args(flags.iter().copied()).unwrap().sync, want, "{flags:?}");
        }
        assert!(parse_args(["--sync=maybe"]).is_err());
        let a = parse_args(["--histogram", "--num=3"]).unwrap();
        assert!(a.histogram);
        assert_eq!(a.num, 3);
    }

    #[test]
    fn unknown_flag_is_an_error_naming_it() {
        let err = parse_args(["--num=5", "--no_such_flag=3"]).unwrap_err().to_string();
        assert!(err.contains("--no_such_flag"), "{err}");
        let err = parse_args(["--value-size=5"]).unwrap_err().to_string();
        assert!(err.contains("--value-size"), "{err}");
    }

    #[test]
    fn default_suite_parses_with_small_sizes() {
        let a = default_suite().unwrap();
        assert_eq!(a.num, 30_000);
        assert_eq!(a.write_buffer_size, Some(512 << 10));
        assert!(workload::parse_benchmarks(&a.benchmarks).unwrap().len() >= 6);
    }
}
