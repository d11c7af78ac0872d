//! `shale-compare kvbench`: KVSB on RocksDB 11.8.1 (one DB per path), through the same driver
//! and report lines as `shale kvbench` (`ycsb::kvsb`), so the outputs tabulate side by side.
//!
//! RocksDB opens with [`engines::rocks_options`] (no compression, 64 MiB memtable, 32 MiB LRU
//! block cache, 10 bloom bits, dynamic level sizing, 2 background jobs), its WAL on and its
//! other defaults; writes are unsynced unless `--sync` (as `shale kvbench --engine lsm`).
//! Device bytes come from `/sys/block/<dev>/stat` where the path is on a loop device of its
//! own (bench/kvbench.sh mounts one per DB), else from RocksDB's statistics: WAL file bytes,
//! flush and compaction write bytes. The report says which.

use std::convert::Infallible;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rocksdb::statistics::Ticker;
use ycsb::EngineResult;
use ycsb::kvsb::process::BlockStat;
use ycsb::kvsb::report::{CSV_HEADER, CsvContext};
use ycsb::kvsb::{Bench, Config, Instance, Op, Submitted, Written, parse_workloads};

use crate::Error;
use crate::engines::rocks_options;

/// Longest wait for RocksDB's compactions after the workloads, polled every 100 ms.
const SETTLE_MAX: Duration = Duration::from_secs(600);

/// Flags of `shale-compare kvbench`: `shale kvbench`'s, less the engine.
#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// One RocksDB per path (comma-separated directories; each is emptied first).
    #[arg(long = "paths", value_delimiter = ',', required = true)]
    pub paths: Vec<PathBuf>,
    #[arg(long = "num", default_value_t = 100_000)]
    pub num: u64,
    #[arg(long = "operations")]
    pub operations: Option<u64>,
    #[arg(long = "key_size", default_value_t = 16)]
    pub key_size: usize,
    #[arg(long = "value_size", default_value_t = 4096)]
    pub value_size: usize,
    #[arg(
        long = "workloads",
        default_value = "seqfill,randfill,zipffill,ycsb-a,ycsb-b,ycsb-c,ycsb-d"
    )]
    pub workloads: String,
    #[arg(long = "threads_per_instance", default_value_t = 1)]
    pub threads_per_instance: usize,
    /// Accepted for the same command lines; RocksDB's calls are synchronous: 1 only.
    #[arg(long = "queue_depth", default_value_t = 1)]
    pub queue_depth: usize,
    #[arg(long = "pin")]
    pub pin: bool,
    #[arg(long = "duration")]
    pub duration: Option<f64>,
    /// Sync the WAL on every write.
    #[arg(long = "sync")]
    pub sync: bool,
    #[arg(long = "csv")]
    pub csv: Option<PathBuf>,
    #[arg(long = "run", default_value = "1")]
    pub run: String,
    #[arg(long = "seed", default_value_t = 0)]
    pub seed: u64,
    #[arg(long = "cache_size", default_value_t = 32 << 20)]
    pub cache_size: u64,
    #[arg(long = "write_buffer_size", default_value_t = 64 << 20)]
    pub write_buffer_size: u64,
}

/// RocksDB on one path.
struct Rocks {
    db: rocksdb::DB,
    /// Holds the statistics object the tickers are read from.
    options: rocksdb::Options,
    write: rocksdb::WriteOptions,
    stat: Option<BlockStat>,
}

impl Instance for Rocks {
    type Pending = Infallible;

    fn submit(&self, op: Op<'_>) -> EngineResult<Submitted<Infallible>> {
        match op {
            Op::Put { key, value } => {
                self.db.put_opt(key, value, &self.write)?;
                Ok(Submitted::Done(true))
            }
            Op::Get { key } => Ok(Submitted::Done(self.db.get_pinned(key)?.is_some())),
        }
    }

    fn poll(&self, pending: &mut Infallible) -> Option<EngineResult<bool>> {
        match *pending {}
    }

    fn wait(&self, pending: Infallible) -> EngineResult<bool> {
        match pending {}
    }

    fn written(&self) -> Written {
        let device_bytes = match &self.stat {
            Some(s) => s.write_bytes(),
            None => [Ticker::WalFileBytes, Ticker::FlushWriteBytes, Ticker::CompactWriteBytes]
                .into_iter()
                .map(|t| self.options.get_ticker_count(t))
                .sum(),
        };
        Written { device_bytes, gc_bytes: 0 }
    }

    fn written_source(&self) -> String {
        match &self.stat {
            Some(s) => s.source(),
            None => "rocksdb statistics: wal file + flush write + compact write bytes".into(),
        }
    }

    fn gc_note(&self) -> &'static str {
        "compaction counted in device bytes"
    }
}

/// Runs the workloads on one RocksDB per path and prints `shale kvbench`'s lines.
///
/// # Errors
/// Bad flags, RocksDB's errors, a CSV that cannot be written, or failed operations.
pub fn run(args: &Args) -> Result<(), Error> {
    let workloads = parse_workloads(&args.workloads).map_err(|e| format!("--workloads: {e}"))?;
    if args.value_size == 0 {
        return Err("--value_size: 0: values must hold at least 1 byte".into());
    }
    if args.queue_depth != 1 {
        return Err("--queue_depth: RocksDB's calls are synchronous here: use 1".into());
    }
    let duration = args.duration.map(Duration::from_secs_f64);
    let config = Config {
        num: args.num,
        operations: args.operations.unwrap_or(args.num),
        key_size: args.key_size,
        value_size: args.value_size,
        threads_per_instance: args.threads_per_instance,
        queue_depth: 1,
        pin: args.pin,
        duration,
        seed: args.seed,
    };
    config.validate(args.paths.len())?;
    let mut instances = Vec::with_capacity(args.paths.len());
    for p in &args.paths {
        empty_dir(p)?;
        let mut o = rocks_options(args.write_buffer_size, args.cache_size, 2);
        o.create_if_missing(true);
        o.enable_statistics();
        let db = rocksdb::DB::open(&o, p)
            .map_err(|e| format!("opening RocksDB at {}: {e}", p.display()))?;
        let mut write = rocksdb::WriteOptions::default();
        write.set_sync(args.sync);
        instances.push(Rocks { db, options: o, write, stat: BlockStat::for_path(p) });
    }
    let names: Vec<String> = args.paths.iter().map(|p| p.display().to_string()).collect();
    let version = crate::engines::version("rocksdb", &args.paths[0]).unwrap_or_else(|| "?".into());
    println!(
        "# shale-compare kvbench: engine rocksdb {version}, {} instances ({}), num {} per instance, operations {} per YCSB workload, key {} B, value {} B, {} threads per instance, queue depth 1, pin {}, duration {}",
        args.paths.len(),
        names.join(","),
        config.num,
        config.operations,
        config.key_size,
        config.value_size,
        config.threads_per_instance,
        if config.pin { "on" } else { "off" },
        duration.map_or("none".to_string(), |d| format!("{} s", d.as_secs_f64()))
    );
    if args.sync {
        println!("# durability: every write durable when acknowledged (WAL synced per write)");
    } else {
        println!(
            "# durability: writes acknowledged once in the WAL file's page cache, not synced (WAL on; --sync for durable writes)"
        );
    }
    println!("# {} CPUs", ycsb::kvsb::process::cpus());
    let mut csv = match &args.csv {
        None => None,
        Some(f) => {
            let new = std::fs::metadata(f).map_or(true, |m| m.len() == 0);
            let mut file = std::fs::OpenOptions::new().create(true).append(true).open(f)?;
            if new {
                writeln!(file, "{CSV_HEADER}")?;
            }
            Some(file)
        }
    };
    let ctx = CsvContext {
        engine: "rocksdb".into(),
        run: args.run.clone(),
        num: config.num,
        key_size: config.key_size,
        value_size: config.value_size,
        threads_per_instance: config.threads_per_instance,
        queue_depth: 1,
        sync: args.sync,
    };
    let entry_bytes = config.key_size + config.value_size;
    let bench = Bench::new(instances, config)?;
    let mut errors = 0;
    for &w in &workloads {
        let r = bench.run(w);
        errors += r.total().errors;
        print!("{}", r.lines(entry_bytes));
        if let Some(f) = csv.as_mut() {
            f.write_all(r.csv_rows(&ctx).as_bytes())?;
        }
    }
    // What the writes left behind counts in the session's bytes: flush, then let the
    // compactions finish.
    for i in bench.instances() {
        i.db.flush()?;
        settle(&i.db)?;
    }
    // The WAL's pages that are still dirty in the page cache reach the device now, so the
    // kernel's count holds every byte RocksDB wrote (on the statistics it changes nothing).
    // SAFETY: sync takes no arguments and only schedules and waits for writeback.
    unsafe { libc::sync() };
    let s = bench.session();
    print!("{}", s.session_lines());
    if let Some(f) = csv.as_mut() {
        f.write_all(s.csv_rows(&ctx).as_bytes())?;
    }
    drop(bench);
    if errors > 0 {
        return Err(format!("{errors} operations failed (see the lines above)").into());
    }
    Ok(())
}

/// Waits until RocksDB has no compaction pending or running, for at most [`SETTLE_MAX`].
fn settle(db: &rocksdb::DB) -> Result<(), Error> {
    let started = Instant::now();
    while started.elapsed() < SETTLE_MAX {
        let pending = db.property_int_value("rocksdb.compaction-pending")?.unwrap_or(0);
        let running = db.property_int_value("rocksdb.num-running-compactions")?.unwrap_or(0);
        let flushes = db.property_int_value("rocksdb.num-running-flushes")?.unwrap_or(0);
        if pending == 0 && running == 0 && flushes == 0 {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("shale-compare kvbench: compactions still running after {SETTLE_MAX:?}");
    Ok(())
}

/// Empties `dir` of a RocksDB a previous run left (only files RocksDB names), or makes it.
fn empty_dir(dir: &std::path::Path) -> Result<(), Error> {
    if !dir.exists() {
        std::fs::create_dir_all(dir)?;
        return Ok(());
    }
    let entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    if entries.is_empty() {
        return Ok(());
    }
    if !dir.join("CURRENT").exists() {
        return Err(format!(
            "{}: {} entries and no RocksDB (CURRENT is missing); give a new or empty directory",
            dir.display(),
            entries.len()
        )
        .into());
    }
    rocksdb::DB::destroy(&rocksdb::Options::default(), dir)?;
    Ok(())
}
