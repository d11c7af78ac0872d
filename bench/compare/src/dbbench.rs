//! `shale-compare dbbench`: `shale bench` against RocksDB's own `db_bench` (the yardstick:
//! 11.8.1 built in release mode by `bench/compare/build_rocksdb.sh`), with the same flags,
//! alternating runs, in two RocksDB modes. The report names db_bench's version from its own
//! header.
//!
//! Stages:
//! 1. Plan the processes: each *group* is one process per engine whose `--benchmarks` list
//!    starts from an empty store (see [`groups`]).
//! 2. For each repeat, for each group, run RocksDB buffered, shale, RocksDB direct in turn
//!    (A B C A B C ...: each engine's runs are spread over the whole session, so a burst of
//!    load from other work falls on all of them).
//! 3. From each process take its result lines, `--histogram` P99s and `--statistics`
//!    counters, its peak RSS, its storage writes as the kernel counted them, and the store's
//!    size after it exited.
//! 4. Write `dbbench.md` (medians, ratios shale / RocksDB, targets met or MISSED, every run's
//!    figure), `dbbench.csv`, `dbbench-process.csv`, `dbbench.svg` and the raw outputs.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::child::{self, Finished};
use crate::parse::{self, Percentiles, ResultLine};
use crate::summary::{Target, median_of, ratio, verdict};
use crate::svg;
use crate::table::{self, Table};
use crate::{Error, machine};

/// The benchmarks of the target suite, in the order they are reported.
pub const SUITE: &[&str] = &[
    "fillseq",
    "fillrandom",
    "overwrite",
    "readrandom",
    "seekrandom",
    "readseq",
    "multireadrandom",
    "readrandom16",
    "fillsync",
];

/// Threads of `readrandom16`: readrandom on the random process's store with this many readers,
/// measured against fio's 4 KiB random reads at the same queue depth beside it (`fio`).
pub const READERS: usize = 16;

/// Threads of `fillsync` (the issue's target is for 16 writers syncing each write).
pub const FILLSYNC_THREADS: usize = 16;

/// Arguments of `shale-compare dbbench`.
#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// Keys per benchmark (db_bench's --num).
    #[arg(long, default_value_t = 1_000_000)]
    pub num: u64,
    /// Runs of each engine; the tables show medians.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Benchmarks to report, from: fillseq, fillrandom, overwrite, readrandom, seekrandom,
    /// readseq, multireadrandom, readrandom16 (readrandom on 16 threads, with fio's IOPS beside
    /// it), fillsync.
    #[arg(
        long,
        default_value = "fillseq,fillrandom,overwrite,readrandom,seekrandom,readseq,multireadrandom,readrandom16,fillsync"
    )]
    pub benchmarks: String,
    /// Operations of each read benchmark (db_bench's --reads; readrandom16 divides them among
    /// its threads). Default: --num. Bounds the reads of a store too big to read whole in
    /// the time at hand, such as regime (c)'s 50M keys.
    #[arg(long)]
    pub reads: Option<u64>,
    /// Keys per multireadrandom operation (db_bench's --batch_size, with
    /// --multiread_batched: RocksDB's batched MultiGet).
    #[arg(long, default_value_t = 16)]
    pub multiread_batch: u64,
    /// Block cache bytes, the same for every engine. The default holds the whole data set of
    /// 1M keys (about 140 MiB): regime (a). Smaller than the data, reads that miss it go to
    /// the page cache (both engines' default) or, with direct reads, to the device.
    #[arg(long, default_value_t = 1 << 30)]
    pub cache_size: u64,
    /// shale reads and writes its SSTs with O_DIRECT too (RocksDB direct's two flags), for
    /// regime (d): run it with `--modes direct`, so that both engines go around the page cache.
    #[arg(long)]
    pub direct_reads: bool,
    /// Memtable bytes (db_bench's --write_buffer_size).
    #[arg(long, default_value_t = 64 << 20)]
    pub write_buffer_size: u64,
    /// Bytes per key.
    #[arg(long, default_value_t = 16)]
    pub key_size: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 100)]
    pub value_size: u64,
    /// Seed of both tools' key generators (db_bench draws a random one for 0).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// RocksDB modes to run: buffered, direct or both.
    #[arg(long, default_value = "buffered,direct")]
    pub modes: String,
    /// The `shale` binary (built in release by bench/compare.sh).
    #[arg(long, default_value = "target/release/shale")]
    pub shale: PathBuf,
    /// RocksDB's db_bench: the release build of 11.8.1 that `bench/compare/build_rocksdb.sh`
    /// prints (never Debian's rocksdb-tools 7.8.3, which has assertions on).
    #[arg(long, default_value = "db_bench")]
    pub db_bench: PathBuf,
    /// Where the stores live while running (emptied before each run, removed at the end).
    #[arg(long, default_value = "target/compare-work")]
    pub work_dir: PathBuf,
    /// Where the tables, charts, CSVs and raw outputs go.
    #[arg(long)]
    pub out: PathBuf,
    /// Run each process in a memory cgroup bounded to this many bytes, RSS and page cache
    /// together (cgroup v1, root): the regime where the data outgrows the memory the process
    /// may use. 0: unbounded (every process still runs in a group of its own, so its peak
    /// memory with page cache is reported).
    #[arg(long, default_value_t = 0)]
    pub memory_limit: u64,
    /// Run nothing: write the tables and chart again from the raw outputs and
    /// dbbench-process.csv of a finished run in --out (with the same flags).
    #[arg(long)]
    pub replot: bool,
}

/// An engine as run by db_bench-style tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Engine {
    /// db_bench with the page cache.
    RocksBuffered,
    /// db_bench with O_DIRECT reads, flushes and compactions.
    RocksDirect,
    /// shale bench (always O_DIRECT).
    Shale,
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::RocksBuffered => "rocksdb-buffered",
            Engine::RocksDirect => "rocksdb-direct",
            Engine::Shale => "shale",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Engine::RocksBuffered => "RocksDB buffered",
            Engine::RocksDirect => "RocksDB direct",
            Engine::Shale => "shale",
        }
    }
}

/// One process per engine: a `--benchmarks` list that starts from an empty store.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    pub name: &'static str,
    /// The `--benchmarks` value.
    pub benchmarks: String,
    /// Benchmarks whose result lines are reported.
    pub measured: Vec<&'static str>,
    pub threads: usize,
    /// The group whose store this one opens (`--use_existing_db`), instead of an empty one.
    pub reuses: Option<&'static str>,
    /// A result line the report names otherwise: (the tool's name, the report's name).
    pub rename: Option<(&'static str, &'static str)>,
}

impl Group {
    fn new(name: &'static str, benchmarks: &str, measured: Vec<&'static str>) -> Group {
        Group {
            name,
            benchmarks: benchmarks.into(),
            measured,
            threads: 1,
            reuses: None,
            rename: None,
        }
    }

    /// The group whose store this process works on (itself, or the one it reuses).
    pub fn store_group(&self) -> &'static str {
        self.reuses.unwrap_or(self.name)
    }

    /// Whether its benchmarks read (and so take `--reads`).
    fn reads(&self) -> bool {
        !matches!(self.name, "fillseq" | "fillsync")
    }
}

/// The processes that cover `wanted` benchmarks:
/// - `fillseq,flush,waitforcompaction`
/// - `fillrandom,flush,waitforcompaction,readrandom,seekrandom,readseq,overwrite,flush,waitforcompaction`
///   (the reads run after fillrandom and waitforcompaction, overwrite on the filled store)
/// - `fillsync` on 16 threads.
/// - `multireadrandom` (batches of `--multiread_batch` keys) and `readrandom` on 16 threads,
///   each a process of its own on the store the random process left (`--use_existing_db`):
///   their flags (--batch_size, --threads) would change the random process's writes.
///
/// Each write ends with `flush,waitforcompaction` so that the write amplification and the
/// bytes on disk include the work a write leaves behind (a memtable not yet flushed, a
/// compaction not yet run), for both engines alike. RocksDB's waitforcompaction does not flush
/// and shale's does, so the explicit `flush` gives both the same work.
pub fn groups(wanted: &[&str]) -> Vec<Group> {
    let has = |b: &str| wanted.contains(&b);
    let mut out = Vec::new();
    if has("fillseq") {
        out.push(Group::new("fillseq", "fillseq,flush,waitforcompaction", vec!["fillseq"]));
    }
    let random: Vec<&'static str> =
        ["fillrandom", "readrandom", "seekrandom", "readseq", "overwrite"]
            .into_iter()
            .filter(|b| has(b))
            .collect();
    let reusing = has("multireadrandom") || has("readrandom16");
    if !random.is_empty() || reusing {
        let mut list = vec!["fillrandom", "flush", "waitforcompaction"];
        list.extend(random.iter().filter(|b| b.starts_with("read") || b.starts_with("seek")));
        if has("overwrite") {
            list.extend(["overwrite", "flush", "waitforcompaction"]);
        }
        let mut measured = vec!["fillrandom"];
        measured.extend(random.iter().filter(|b| **b != "fillrandom"));
        out.push(Group::new("random", &list.join(","), measured));
    }
    if has("multireadrandom") {
        out.push(Group {
            reuses: Some("random"),
            ..Group::new("multiread", "multireadrandom", vec!["multireadrandom"])
        });
    }
    if has("readrandom16") {
        out.push(Group {
            threads: READERS,
            reuses: Some("random"),
            rename: Some(("readrandom", "readrandom16")),
            ..Group::new("readers", "readrandom", vec!["readrandom16"])
        });
    }
    if has("fillsync") {
        out.push(Group {
            threads: FILLSYNC_THREADS,
            ..Group::new("fillsync", "fillsync", vec!["fillsync"])
        });
    }
    out
}

/// The flags both tools get for `group`.
pub fn common_flags(a: &Args, group: &Group, db: &Path) -> Vec<String> {
    let mut flags = vec![
        format!("--benchmarks={}", group.benchmarks),
        format!("--num={}", a.num),
        format!("--threads={}", group.threads),
        format!("--key_size={}", a.key_size),
        format!("--value_size={}", a.value_size),
        "--compression_type=none".into(),
        "--bloom_bits=10".into(),
        // Both size levels dynamically by default (RocksDB since 8.4): said explicitly, so an
        // older db_bench given by --db-bench runs alike.
        "--level_compaction_dynamic_level_bytes=true".into(),
        format!("--write_buffer_size={}", a.write_buffer_size),
        format!("--cache_size={}", a.cache_size),
        // Each engine caches the blocks of the SSTs it writes: RocksDB for flushes only, shale
        // for flushes and compactions (its default).
        "--prepopulate_block_cache=1".into(),
        format!("--seed={}", a.seed),
        "--histogram=1".into(),
        "--statistics=1".into(),
        format!("--db={}", db.display()),
    ];
    if group.reuses.is_some() {
        flags.push("--use_existing_db=1".into());
    }
    if group.reads() {
        let reads = a.reads.unwrap_or(a.num);
        // db_bench's --reads is per thread: the readers share the same total.
        flags.push(format!("--reads={}", (reads / group.threads as u64).max(1)));
    }
    if group.name == "multiread" {
        flags.push(format!("--batch_size={}", a.multiread_batch));
        flags.push("--multiread_batched=true".into());
    }
    flags
}

/// RocksDB's direct-I/O flags.
pub const DIRECT_FLAGS: [&str; 2] =
    ["--use_direct_reads=true", "--use_direct_io_for_flush_and_compaction=true"];

/// The command line of one run.
pub fn command_line(a: &Args, engine: Engine, group: &Group, db: &Path) -> (PathBuf, Vec<String>) {
    let mut flags = common_flags(a, group, db);
    if group.name == "fillsync" {
        // Both tools divide --num by 1000 for fillsync's keys but then write --writes entries
        // per thread, which defaults to --num (db_bench 7.8.3 and 11.8.1 alike; shale bench
        // follows db_bench): pass it, so that both write --num/1000 entries per thread as
        // db_bench's help says.
        flags.push(format!("--writes={}", fillsync_writes(a.num)));
    }
    match engine {
        Engine::Shale => {
            flags.insert(0, "bench".into());
            if a.direct_reads {
                // RocksDB direct's flags exactly: reads and flush/compaction writes O_DIRECT.
                flags.extend(DIRECT_FLAGS.iter().map(|s| s.to_string()));
            }
            (a.shale.clone(), flags)
        }
        Engine::RocksBuffered | Engine::RocksDirect => {
            if engine == Engine::RocksDirect {
                flags.extend(DIRECT_FLAGS.iter().map(|s| s.to_string()));
            }
            (a.db_bench.clone(), flags)
        }
    }
}

/// Entries each fillsync thread writes: --num / 1000, as both tools define it.
pub fn fillsync_writes(num: u64) -> u64 {
    (num / 1000).max(1)
}

/// What one process produced.
#[derive(Clone, Debug)]
pub struct Run {
    pub group: &'static str,
    pub repeat: usize,
    pub engine: Engine,
    /// 1-minute load average when it started.
    pub load_before: f64,
    pub results: Vec<ResultLine>,
    pub percentiles: BTreeMap<String, Percentiles>,
    pub counters: BTreeMap<String, u64>,
    /// Key + value bytes of every write (operations of the write benchmarks times entry size).
    pub user_bytes: u64,
    /// Bytes the engine says it wrote to its device (WAL, SSTs, version log or manifest).
    pub device_bytes: Option<u64>,
    /// The store's size after the run (see [`store_bytes`]).
    pub disk_bytes: Option<u64>,
    /// Bytes of SSTs in the store after the run.
    pub sst_bytes: Option<u64>,
    /// fio's 4 KiB random-read IOPS beside the store, on a written file as large as its
    /// largest file's storage, at the group's queue depth
    /// (shale's readrandom16 run only).
    pub fio_iops: Option<f64>,
    pub process: Finished,
}

impl Run {
    pub fn result(&self, bench: &str) -> Option<&ResultLine> {
        self.results.iter().rev().find(|r| r.name == bench)
    }

    /// Microseconds writes spent stalled, by the engine's own count.
    pub fn stall_micros(&self) -> Option<u64> {
        stall_micros(self.engine, &self.counters)
    }

    pub fn write_amp(&self) -> Option<f64> {
        let d = self.device_bytes? as f64;
        (self.user_bytes > 0).then(|| d / self.user_bytes as f64)
    }
}

/// Benchmarks that write one entry per operation.
fn is_write(bench: &str) -> bool {
    bench.starts_with("fill") || bench == "overwrite"
}

/// Device bytes from the engine's own counters:
/// RocksDB `rocksdb.wal.bytes + rocksdb.flush.write.bytes + rocksdb.compact.write.bytes`
/// (MANIFEST writes have no ticker), shale `shale.wal.bytes + shale.sst.bytes.written +
/// shale.version.log.bytes`.
pub fn device_bytes(engine: Engine, counters: &BTreeMap<String, u64>) -> Option<u64> {
    let names: &[&str] = match engine {
        Engine::Shale => &["shale.wal.bytes", "shale.sst.bytes.written", "shale.version.log.bytes"],
        _ => &["rocksdb.wal.bytes", "rocksdb.flush.write.bytes", "rocksdb.compact.write.bytes"],
    };
    names.iter().map(|n| counters.get(*n).copied()).sum()
}

/// Microseconds writes spent stalled, by the engine's own count: RocksDB's
/// `rocksdb.stall.micros`, shale's memtable, L0 slowdown and L0 stop stall micros.
pub fn stall_micros(engine: Engine, counters: &BTreeMap<String, u64>) -> Option<u64> {
    let names: &[&str] = match engine {
        Engine::Shale => &[
            "shale.stall.memtable.micros",
            "shale.stall.l0.slowdown.micros",
            "shale.stall.l0.stop.micros",
        ],
        _ => &["rocksdb.stall.micros"],
    };
    names.iter().map(|n| counters.get(*n).copied()).sum()
}

/// The store's bytes on disk after a run, and its SST bytes:
/// - bytes on disk: what the file system has allocated to the store's files (`du`), by one
///   meter for both engines; RocksDB's info `LOG` files are left out (diagnostics). For shale
///   that is its volume file: the header, the version-log areas, the WAL groups in use and
///   every slot the volume has grown to, live or free.
/// - SST bytes: RocksDB's `*.sst` files; shale's live SST slots, by `shale inspect`.
pub fn store_bytes(engine: Engine, shale: &Path, db: &Path) -> Result<(u64, u64), Error> {
    let on_disk = child::dir_allocated_bytes(db, &|n| !is_info_log(n))?;
    match engine {
        Engine::Shale => {
            let out = Command::new(shale).arg("inspect").arg(db).output()?;
            let text = String::from_utf8_lossy(&out.stdout);
            let i = parse::parse_inspect(&text)
                .ok_or_else(|| format!("shale inspect {}: no figures in {text:?}", db.display()))?;
            Ok((on_disk, i.live_slot_bytes()))
        }
        _ => Ok((on_disk, child::dir_bytes(db, &|n| n.ends_with(".sst"))?)),
    }
}

fn is_info_log(name: &str) -> bool {
    name == "LOG" || name.starts_with("LOG.old")
}

/// The 1-minute load average, NaN where /proc/loadavg cannot be read.
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(f64::NAN)
}

/// Runs one process of `group` and collects its figures.
///
/// `keep`: a later group opens the store this one leaves, so it stays.
fn run_one(
    a: &Args,
    engine: Engine,
    group: &Group,
    repeat: usize,
    keep: bool,
) -> Result<Run, Error> {
    let scratch = a.work_dir.join(format!("{}-{}", engine.name(), group.store_group()));
    if group.reuses.is_none() {
        crate::scratch::fresh(&scratch)?;
    } else if a.memory_limit > 0 {
        // The pages the filling process read or wrote stay cached when its group goes (the
        // kernel charges them to the parent): without this a reopened store would be read
        // from memory the new group is not charged for.
        drop_page_cache();
    }
    let db = crate::scratch::store(&scratch);
    let (bin, flags) = command_line(a, engine, group, &db);
    let mut cmd = Command::new(&bin);
    cmd.args(&flags);
    let raw = a.out.join("raw");
    std::fs::create_dir_all(&raw)?;
    let log = raw.join(format!("{}-{}-{}", group.name, engine.name(), repeat));
    let load_before = load_average();
    eprintln!(
        "shale-compare: run {repeat} {} {} (load {load_before:.2}): {} {}",
        group.name,
        engine.name(),
        bin.display(),
        flags.join(" ")
    );
    let process = child::run_limited(cmd, &log, (a.memory_limit > 0).then_some(a.memory_limit))?;
    if process.exit_code != Some(0) {
        return Err(format!(
            "{} exited with {:?}; its output is in {}.stdout/.stderr",
            bin.display(),
            process.exit_code,
            log.display()
        )
        .into());
    }
    let mut run = Run::from_output(engine, group, repeat, process, a.key_size + a.value_size);
    run.load_before = load_before;
    if let Some(m) = group.measured.iter().find(|m| run.result(m).is_none()) {
        return Err(format!(
            "{}: no result line for {m} in {}.stdout",
            bin.display(),
            log.display()
        )
        .into());
    }
    match store_bytes(engine, &a.shale, &db) {
        Ok((d, s)) => (run.disk_bytes, run.sst_bytes) = (Some(d), Some(s)),
        Err(e) => eprintln!("shale-compare: warning: store size of {}: {e}", db.display()),
    }
    if engine == Engine::Shale && group.name == "readers" {
        match crate::fio::random_read_iops(&db, group.threads) {
            Ok(iops) => {
                eprintln!(
                    "shale-compare:   fio 4 KiB random reads, depth {}: {iops:.0} IOPS",
                    group.threads
                );
                run.fio_iops = Some(iops);
            }
            Err(e) => eprintln!("shale-compare: warning: fio on {}: {e}", db.display()),
        }
    }
    if !keep {
        crate::scratch::remove(&scratch)?;
    }
    for m in &group.measured {
        let ops = run.result(m).map_or(0.0, |r| r.ops_per_sec);
        eprintln!("shale-compare:   {m}: {ops:.0} ops/sec");
    }
    Ok(run)
}

impl Run {
    /// The figures of one process's output (`entry_bytes`: key + value bytes per write); the
    /// store's sizes and the load average are filled in by the caller.
    pub fn from_output(
        engine: Engine,
        group: &Group,
        repeat: usize,
        process: Finished,
        entry_bytes: u64,
    ) -> Run {
        let mut results = parse::result_lines(&process.stdout);
        let mut percentiles = parse::percentiles_by_benchmark(&process.stdout);
        if let Some((from, to)) = group.rename {
            results.iter_mut().filter(|r| r.name == from).for_each(|r| r.name = to.into());
            if let Some(p) = percentiles.remove(from) {
                percentiles.insert(to.into(), p);
            }
        }
        let counters = parse::statistics(&process.stdout);
        let user_bytes =
            results.iter().filter(|r| is_write(&r.name)).map(|r| r.operations * entry_bytes).sum();
        Run {
            group: group.name,
            repeat,
            engine,
            load_before: f64::NAN,
            percentiles,
            device_bytes: device_bytes(engine, &counters),
            results,
            counters,
            user_bytes,
            disk_bytes: None,
            sst_bytes: None,
            fio_iops: None,
            process,
        }
    }
}

/// Drops clean pages from the page cache (after `sync`), so that a reopened store is read
/// from the device by any engine alike; a warning where that is not allowed.
fn drop_page_cache() {
    let _ = Command::new("sync").status();
    if let Err(e) = std::fs::write("/proc/sys/vm/drop_caches", "1") {
        eprintln!("shale-compare: warning: cannot drop the page cache: {e}");
    }
}

/// Parses `--modes`.
pub fn parse_modes(s: &str) -> Result<Vec<Engine>, Error> {
    let mut peers = Vec::new();
    for m in s.split(',').map(str::trim).filter(|m| !m.is_empty()) {
        peers.push(match m {
            "buffered" => Engine::RocksBuffered,
            "direct" => Engine::RocksDirect,
            other => {
                return Err(format!("unknown RocksDB mode {other:?} (buffered, direct)").into());
            }
        });
    }
    if peers.is_empty() {
        return Err("--modes names no RocksDB mode".into());
    }
    Ok(peers)
}

/// Parses `--benchmarks` against [`SUITE`].
pub fn parse_benchmarks(s: &str) -> Result<Vec<&'static str>, Error> {
    let mut out = Vec::new();
    for b in s.split(',').map(str::trim).filter(|b| !b.is_empty()) {
        let known = SUITE.iter().find(|x| **x == b).ok_or_else(|| {
            format!("benchmark {b:?} is not in the comparison suite ({})", SUITE.join(", "))
        })?;
        out.push(*known);
    }
    Ok(out)
}

/// Runs the whole comparison and writes its files.
///
/// # Errors
/// A tool that fails or prints no result, or files that cannot be written.
pub fn run(a: &Args) -> Result<(), Error> {
    let wanted = parse_benchmarks(&a.benchmarks)?;
    let peers = parse_modes(&a.modes)?;
    if a.repeats == 0 {
        return Err("--repeats must be at least 1".into());
    }
    let mut engines = Vec::new();
    for (i, p) in peers.iter().enumerate() {
        engines.push(*p);
        if i == 0 {
            engines.push(Engine::Shale);
        }
    }
    let plan = groups(&wanted);
    if a.replot {
        let (runs, shale_version) = replot(a, &plan)?;
        let report = Report {
            args: a,
            wanted: &wanted,
            peers: &peers,
            groups: &plan,
            runs: &runs,
            shale_version,
            failures: Vec::new(),
        };
        return report.write(&a.out);
    }
    // Named before the runs, so that edits made while they run do not mark it dirty.
    let shale_version = machine::shale_version();
    std::fs::create_dir_all(&a.out)?;
    std::fs::create_dir_all(&a.work_dir)?;
    let mut runs = Vec::new();
    let mut failures = Vec::new();
    for repeat in 1..=a.repeats {
        for (i, g) in plan.iter().enumerate() {
            let keep = plan[i + 1..].iter().any(|h| h.reuses == Some(g.store_group()));
            for e in &engines {
                // A failed process is reported, never dropped silently; the others go on.
                match run_one(a, *e, g, repeat, keep) {
                    Ok(run) => runs.push(run),
                    Err(err) => {
                        eprintln!("shale-compare: FAILED: {err}");
                        failures.push(format!("run {repeat}, {}, {}: {err}", g.name, e.name()));
                    }
                }
                // Written after every process, so an interrupted session leaves its figures.
                let report = Report {
                    args: a,
                    wanted: &wanted,
                    peers: &peers,
                    groups: &plan,
                    runs: &runs,
                    shale_version: shale_version.clone(),
                    failures: failures.clone(),
                };
                report.write(&a.out)?;
            }
        }
    }
    eprintln!("shale-compare: wrote {}/dbbench.{{md,csv,svg}}", a.out.display());
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("{} processes failed; dbbench.md lists them", failures.len()).into())
    }
}

/// The runs of a finished session, read back: each process's output from `raw/`, the figures
/// taken outside it (peak RSS, store sizes, kernel write count, load) from
/// `dbbench-process.csv`, and shale's commit from the old `dbbench.md`.
fn replot(a: &Args, plan: &[Group]) -> Result<(Vec<Run>, String), Error> {
    let csv = std::fs::read_to_string(a.out.join("dbbench-process.csv"))?;
    let mut lines = csv.lines();
    let header: Vec<&str> =
        lines.next().ok_or("dbbench-process.csv is empty")?.split(',').collect();
    let col = |name: &str| {
        header.iter().position(|h| *h == name).ok_or(format!("dbbench-process.csv has no {name}"))
    };
    let (c_rep, c_group, c_engine) = (col("repeat")?, col("group")?, col("engine")?);
    let (c_disk, c_sst, c_io) =
        (col("disk_bytes")?, col("sst_bytes")?, col("storage_write_bytes")?);
    let (c_rss, c_wall, c_load) = (col("peak_rss_bytes")?, col("wall_s")?, col("load_before")?);
    let mut runs = Vec::new();
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        let Some(group) = plan.iter().find(|g| g.name == f[c_group]) else { continue };
        let engine = [Engine::RocksBuffered, Engine::RocksDirect, Engine::Shale]
            .into_iter()
            .find(|e| e.name() == f[c_engine])
            .ok_or(format!("unknown engine {} in dbbench-process.csv", f[c_engine]))?;
        let repeat: usize = f[c_rep].parse()?;
        let raw = a.out.join("raw").join(format!("{}-{}-{repeat}", group.name, engine.name()));
        let process = Finished {
            exit_code: Some(0),
            stdout: std::fs::read_to_string(raw.with_extension("stdout"))?,
            stderr: std::fs::read_to_string(raw.with_extension("stderr"))?,
            peak_rss_bytes: f[c_rss].parse()?,
            // A CSV written before the column existed has none.
            peak_memory_bytes: col("peak_memory_bytes").ok().and_then(|c| f.get(c)?.parse().ok()),
            storage_write_bytes: f[c_io].parse().ok(),
            wall: std::time::Duration::from_secs_f64(f[c_wall].parse()?),
        };
        let mut run = Run::from_output(engine, group, repeat, process, a.key_size + a.value_size);
        run.disk_bytes = f[c_disk].parse().ok();
        run.sst_bytes = f[c_sst].parse().ok();
        run.load_before = f[c_load].parse().unwrap_or(f64::NAN);
        run.fio_iops = col("fio_iops").ok().and_then(|c| f.get(c)?.parse().ok());
        runs.push(run);
    }
    let old = std::fs::read_to_string(a.out.join("dbbench.md")).unwrap_or_default();
    let version = old
        .lines()
        .find_map(|l| l.split_once("; shale: ").map(|(_, v)| v.trim().to_string()))
        .unwrap_or_else(|| "commit unknown".into());
    Ok((runs, version))
}

/// The target on shale / `peer` for `bench` (the issue's targets).
pub fn target(bench: &str, peer: Engine) -> Option<Target> {
    match bench {
        "fillseq" | "fillrandom" | "overwrite" => Some(Target::at_least(1.5)),
        "readrandom" | "seekrandom" | "readseq" | "multireadrandom" | "readrandom16" => {
            Some(Target::at_least(match peer {
                Engine::RocksDirect => 1.2,
                _ => 1.0,
            }))
        }
        "fillsync" => Some(Target::at_least(2.0)),
        _ => None,
    }
}

/// Turns the runs into tables, CSVs and a chart.
pub struct Report<'a> {
    pub args: &'a Args,
    pub wanted: &'a [&'static str],
    pub peers: &'a [Engine],
    pub groups: &'a [Group],
    pub runs: &'a [Run],
    /// The commit shale was built from.
    pub shale_version: String,
    /// Processes that failed, with why.
    pub failures: Vec<String>,
}

impl Report<'_> {
    /// Writes dbbench.md, dbbench.csv, dbbench-process.csv and dbbench.svg into `out`.
    ///
    /// # Errors
    /// A file that cannot be written.
    pub fn write(&self, out: &Path) -> Result<(), Error> {
        std::fs::write(out.join("dbbench.md"), self.markdown())?;
        std::fs::write(out.join("dbbench.csv"), self.csv())?;
        std::fs::write(out.join("dbbench-process.csv"), self.process_csv())?;
        std::fs::write(out.join("dbbench.svg"), self.chart())?;
        Ok(())
    }

    fn runs_of(&self, engine: Engine, group: &str) -> impl Iterator<Item = &Run> {
        self.runs.iter().filter(move |r| r.engine == engine && r.group == group)
    }

    fn group_of(&self, bench: &str) -> Option<&Group> {
        self.groups.iter().find(|g| g.measured.contains(&bench))
    }

    /// Every run's ops/s of `bench` by `engine`, in run order.
    fn ops(&self, engine: Engine, bench: &str) -> Vec<Option<f64>> {
        let Some(g) = self.group_of(bench) else { return Vec::new() };
        self.runs_of(engine, g.name).map(|r| r.result(bench).map(|x| x.ops_per_sec)).collect()
    }

    fn median_ops(&self, engine: Engine, bench: &str) -> Option<f64> {
        median_of(self.ops(engine, bench))
    }

    fn median_percentile(
        &self,
        engine: Engine,
        bench: &str,
        f: fn(&Percentiles) -> f64,
    ) -> Option<f64> {
        let g = self.group_of(bench)?;
        median_of(self.runs_of(engine, g.name).map(|r| r.percentiles.get(bench).map(f)))
    }

    /// `p50 / p99 / p99.9 / max` of `bench` by `engine`, each the median over the runs of each
    /// run's figure from its `--histogram` block.
    fn tail_cell(&self, engine: Engine, bench: &str) -> String {
        let figures: [fn(&Percentiles) -> f64; 4] = [|p| p.p50, |p| p.p99, |p| p.p99_9, |p| p.max];
        figures
            .iter()
            .map(|f| table::fixed(self.median_percentile(engine, bench, *f), 1))
            .collect::<Vec<_>>()
            .join(" / ")
    }

    fn median_process(
        &self,
        engine: Engine,
        group: &str,
        f: &dyn Fn(&Run) -> Option<f64>,
    ) -> Option<f64> {
        median_of(self.runs_of(engine, group).map(f))
    }

    /// The throughput table.
    pub fn throughput_table(&self) -> Table {
        let mut headers = vec!["benchmark".to_string()];
        for p in self.peers {
            headers.push(format!("{} ops/s", p.title()));
        }
        headers.push("shale ops/s".into());
        for p in self.peers {
            headers.push(format!("shale / {}", p.title()));
            headers.push("target".into());
            headers.push("verdict".into());
        }
        for p in self.peers {
            headers.push(format!("{} p50 / p99 / p99.9 / max us", p.title()));
        }
        headers.push("shale p50 / p99 / p99.9 / max us".into());
        let refs: Vec<&str> = headers.iter().map(String::as_str).collect();
        let mut t = Table::new(&refs);
        for bench in self.wanted {
            let shale = self.median_ops(Engine::Shale, bench);
            let mut row = vec![bench.to_string()];
            for p in self.peers {
                row.push(table::count(self.median_ops(*p, bench)));
            }
            row.push(table::count(shale));
            for p in self.peers {
                let r = ratio(shale, self.median_ops(*p, bench));
                let tg = target(bench, *p);
                row.push(format!("**{}**", table::ratio(r)));
                row.push(tg.map_or("-".into(), |t| t.label()));
                row.push(verdict(tg, r));
            }
            for p in self.peers {
                row.push(self.tail_cell(*p, bench));
            }
            row.push(self.tail_cell(Engine::Shale, bench));
            t.row(row);
        }
        t
    }

    /// The cost table: per process group, write amplification, bytes on disk, peak RSS.
    pub fn cost_table(&self) -> Table {
        let mut headers = vec!["process".to_string(), "figure".to_string()];
        for p in self.peers {
            headers.push(p.title().to_string());
        }
        headers.push("shale".into());
        for p in self.peers {
            headers.push(format!("shale / {}", p.title()));
            headers.push("verdict (<= 1x)".into());
        }
        let refs: Vec<&str> = headers.iter().map(String::as_str).collect();
        let mut t = Table::new(&refs);
        type Figure = (&'static str, fn(&Run) -> Option<f64>, fn(Option<f64>) -> String, bool);
        let figures: [Figure; 6] = [
            ("write amplification", |r| r.write_amp(), |v| table::fixed(v, 2), true),
            ("bytes on disk (a)", |r| r.disk_bytes.map(|b| b as f64), table::mib, true),
            ("SST bytes (b)", |r| r.sst_bytes.map(|b| b as f64), table::mib, false),
            (
                "storage writes, kernel count (c)",
                |r| r.process.storage_write_bytes.map(|b| b as f64),
                table::mib,
                false,
            ),
            ("peak RSS", |r| Some(r.process.peak_rss_bytes as f64), table::mib, false),
            (
                "peak memory, RSS + page cache (d)",
                |r| r.process.peak_memory_bytes.map(|b| b as f64),
                table::mib,
                true,
            ),
        ];
        for g in self.groups {
            for (name, get, fmt, has_target) in &figures {
                let shale = self.median_process(Engine::Shale, g.name, get);
                let mut row = vec![g.name.to_string(), name.to_string()];
                for p in self.peers {
                    row.push(fmt(self.median_process(*p, g.name, get)));
                }
                row.push(fmt(shale));
                for p in self.peers {
                    let r = ratio(shale, self.median_process(*p, g.name, get));
                    row.push(table::ratio(r));
                    row.push(if *has_target {
                        verdict(Some(Target::at_most(1.0)), r)
                    } else {
                        "-".into()
                    });
                }
                t.row(row);
            }
        }
        t
    }

    /// Every run's ops/s, in run order.
    pub fn runs_table(&self) -> Table {
        let mut engines: Vec<Engine> = self.peers.to_vec();
        engines.push(Engine::Shale);
        let mut headers = vec!["benchmark".to_string()];
        headers.extend(engines.iter().map(|e| format!("{} runs", e.title())));
        let refs: Vec<&str> = headers.iter().map(String::as_str).collect();
        let mut t = Table::new(&refs);
        for bench in self.wanted {
            let mut row = vec![bench.to_string()];
            for e in &engines {
                let v: Vec<String> = self.ops(*e, bench).into_iter().map(table::count).collect();
                row.push(v.join(", "));
            }
            t.row(row);
        }
        t
    }

    /// The whole markdown report.
    pub fn markdown(&self) -> String {
        let a = self.args;
        let mut s = String::new();
        let loads: Vec<f64> =
            self.runs.iter().map(|r| r.load_before).filter(|x| x.is_finite()).collect();
        let (lo, hi) = loads.iter().fold((f64::MAX, 0.0f64), |(l, h), x| (l.min(*x), h.max(*x)));
        let _ = writeln!(s, "# shale bench vs RocksDB db_bench\n");
        let _ = writeln!(s, "{}", machine::describe());
        let _ = writeln!(
            s,
            "- RocksDB: {}; shale: {}\n- {} keys of {} B, values of {} B, no compression, bloom 10 bits, \
             {} MiB write buffer, {} MiB block cache for every engine{}; shale reads {}; medians of {} \
             alternating runs per engine; 1-minute load average {lo:.2} to {hi:.2} before the runs.\n",
            rocksdb_version(self.runs),
            self.shale_version,
            a.num,
            a.key_size,
            a.value_size,
            a.write_buffer_size >> 20,
            a.cache_size >> 20,
            if a.memory_limit > 0 {
                format!(
                    ", each process in a memory cgroup of {} MiB (RSS and page cache)",
                    a.memory_limit >> 20
                )
            } else {
                String::new()
            },
            if a.direct_reads {
                "and writes SSTs with O_DIRECT (RocksDB direct's flags)"
            } else {
                "and writes SSTs through the page cache (its defaults)"
            },
            a.repeats
        );
        let _ = writeln!(s, "## Throughput (median ops/s) and tail latency\n");
        s.push_str(&self.throughput_table().to_markdown());
        let _ = writeln!(
            s,
            "\nshale / peer is the ratio of medians; a target is met when the ratio reaches it. Each \
             latency cell is p50 / p99 / p99.9 / max, each the median over runs of that run's figure \
             from its `--histogram` block (microseconds per operation, timed by the client thread: \
             db_bench's own block for RocksDB, read as printed). fillsync runs on {FILLSYNC_THREADS} threads, each writing --num/1000 entries with sync (db_bench also gets `--writes=` that number: \
             without it db_bench writes --num entries per thread to --num/1000 keys).\n"
        );
        if let Some(fio) = self.fio_section() {
            s.push_str(&fio);
        }
        let _ =
            writeln!(s, "## Write amplification, bytes on disk, memory (medians per process)\n");
        s.push_str(&self.cost_table().to_markdown());
        let _ = writeln!(
            s,
            "\nWrite amplification is the bytes each engine says it wrote to its device over the key + \
             value bytes of every write in the process (the same denominator for both): RocksDB \
             `rocksdb.wal.bytes + rocksdb.flush.write.bytes + rocksdb.compact.write.bytes` (its MANIFEST \
             has no counter), shale `shale.wal.bytes + shale.sst.bytes.written + shale.version.log.bytes`. \
             Each process ends with `flush,waitforcompaction`, so the figure includes the work a write \
             leaves behind.\n\n\
             (a) What the file system has allocated to the store's files after the run (`du`: \
             `st_blocks`), by one meter for both engines; RocksDB's info LOG files are left out. For \
             shale that is its volume file: its header, the version log's live chunks, the WAL pages \
             in use and its live SSTs' pages (free slots, and the zero pages before an SST's footer, \
             are holes).\n\
             (b) RocksDB: the `*.sst` files; shale: the live SST slots.\n\
             (c) `write_bytes - cancelled_write_bytes` of the process in /proc/PID/io: what the kernel \
             sent (or will send) to storage on its behalf, by one meter for both engines; buffered \
             writes count when dirtied.\n\
             (d) `memory.max_usage_in_bytes` of the memory cgroup (v1) each process runs in: its RSS \
             and the page cache it caused, by one meter for both engines (RocksDB's reads go through \
             the page cache, which RSS does not show); empty where no cgroup could be made. With \
             `--memory-limit` the group also bounds both.\n"
        );
        if !self.failures.is_empty() {
            let _ = writeln!(s, "## FAILED processes (their figures are missing above)\n");
            for f in &self.failures {
                let _ = writeln!(s, "- {f}");
            }
            s.push('\n');
        }
        let _ = writeln!(s, "## Every run (ops/s, in run order)\n");
        s.push_str(&self.runs_table().to_markdown());
        let _ = writeln!(s, "\n## Commands\n");
        let _ = writeln!(
            s,
            "Runs alternate {} within each repeat; each process starts from an empty directory, \
             except those with `--use_existing_db=1`, which open the store the random process left \
             (after dropping the page cache when a memory limit is set).\n",
            {
                let mut e: Vec<&str> = self.peers.iter().map(|p| p.title()).collect();
                e.insert(1, "shale");
                e.join(", ")
            }
        );
        s.push_str("```\n");
        let dir = PathBuf::from("DIR");
        for g in self.groups {
            let mut seen = Vec::new();
            for e in self.peers.iter().copied().chain([Engine::Shale]) {
                let (bin, flags) = command_line(a, e, g, &dir);
                let line = format!("{} {}", bin.display(), flags.join(" "));
                if !seen.contains(&line) {
                    let _ = writeln!(s, "{line}");
                    seen.push(line);
                }
            }
        }
        s.push_str("```\n");
        s
    }

    /// readrandom on [`READERS`] threads against fio's IOPS at the same depth beside shale's
    /// store (measured right after shale's run; see `fio`), if that ran.
    fn fio_section(&self) -> Option<String> {
        let fio = median_of(self.runs_of(Engine::Shale, "readers").map(|r| r.fio_iops))?;
        let shale = self.median_ops(Engine::Shale, "readrandom16");
        let r = ratio(shale, Some(fio));
        let target = Target::at_least(0.7);
        let mut s = String::new();
        let _ = writeln!(s, "### readrandom on {READERS} threads against the device\n");
        let mut t = Table::new(&["figure", "median", "shale / fio", "target", "verdict"]);
        t.row(vec![
            format!("fio 4 KiB random reads, O_DIRECT, io_uring depth {READERS}, IOPS"),
            table::count(Some(fio)),
            String::new(),
            String::new(),
            String::new(),
        ]);
        t.row(vec![
            format!("shale readrandom, {READERS} threads, ops/s"),
            table::count(shale),
            table::ratio(r),
            target.label(),
            verdict(Some(target), r),
        ]);
        s.push_str(&t.to_markdown());
        let _ = writeln!(
            s,
            "\nfio reads for 20 s after each shale run of readrandom16, beside shale's store, a \
             file written whole as large as the storage shale's volume file holds (the volume \
             is sparse, and reads of its free slots return zeros without the device; \
             `bench/compare/src/fio.rs`); a lookup that the bloom filter and the caches do not \
             answer costs one data block read.\n"
        );
        Some(s)
    }

    /// One row per run and measured benchmark.
    pub fn csv(&self) -> String {
        let mut s = String::from(
            "repeat,group,engine,benchmark,ops_per_sec,micros_per_op,seconds,operations,p50_us,p99_us,p99_9_us,load_before,max_us\n",
        );
        for r in self.runs {
            let g =
                self.groups.iter().find(|g| g.name == r.group).expect("a run's group is planned");
            for m in &g.measured {
                let Some(x) = r.result(m) else { continue };
                let p = r.percentiles.get(*m).copied().unwrap_or_default();
                let _ = writeln!(
                    s,
                    "{},{},{},{},{},{},{},{},{},{},{},{:.2},{}",
                    r.repeat,
                    r.group,
                    r.engine.name(),
                    m,
                    x.ops_per_sec,
                    x.micros_per_op,
                    x.seconds,
                    x.operations,
                    p.p50,
                    p.p99,
                    p.p99_9,
                    r.load_before,
                    p.max
                );
            }
        }
        s
    }

    /// One row per process.
    pub fn process_csv(&self) -> String {
        let mut s = String::from(
            "repeat,group,engine,user_bytes,device_bytes,write_amp,disk_bytes,sst_bytes,storage_write_bytes,stall_micros,peak_rss_bytes,wall_s,load_before,peak_memory_bytes,fio_iops\n",
        );
        let opt = |v: Option<u64>| v.map_or(String::new(), |x| x.to_string());
        for r in self.runs {
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{},{},{},{},{},{:.3},{:.2},{},{}",
                r.repeat,
                r.group,
                r.engine.name(),
                r.user_bytes,
                opt(r.device_bytes),
                r.write_amp().map_or(String::new(), |w| format!("{w:.4}")),
                opt(r.disk_bytes),
                opt(r.sst_bytes),
                opt(r.process.storage_write_bytes),
                opt(r.stall_micros()),
                r.process.peak_rss_bytes,
                r.process.wall.as_secs_f64(),
                r.load_before,
                opt(r.process.peak_memory_bytes),
                r.fio_iops.map_or(String::new(), |x| format!("{x:.0}"))
            );
        }
        s
    }

    /// Ratio bars per benchmark and RocksDB mode, with the targets.
    pub fn chart(&self) -> String {
        let series = self
            .peers
            .iter()
            .map(|p| svg::Bars {
                name: format!("shale / {}", p.title()),
                values: self
                    .wanted
                    .iter()
                    .map(|b| ratio(self.median_ops(Engine::Shale, b), self.median_ops(*p, b)))
                    .collect(),
                targets: self.wanted.iter().map(|b| target(b, *p).map(|t| t.ratio)).collect(),
            })
            .collect();
        svg::bar_chart(&svg::BarChart {
            title: format!(
                "shale bench / RocksDB db_bench, median ops/s, {} keys ({} runs each)",
                self.args.num, self.args.repeats
            ),
            y_label: "ratio shale / RocksDB (higher is better)".into(),
            categories: self.wanted.iter().map(|b| b.to_string()).collect(),
            series,
            reference: Some(1.0),
        })
    }
}

/// The version (`11.8.1`) from db_bench's stderr header, or "unknown".
fn rocksdb_version(runs: &[Run]) -> String {
    runs.iter()
        .filter(|r| r.engine != Engine::Shale)
        .find_map(|r| {
            r.process
                .stderr
                .lines()
                .chain(r.process.stdout.lines())
                .find_map(|l| l.strip_prefix("RocksDB:").map(|v| format!("db_bench {}", v.trim())))
        })
        .unwrap_or_else(|| "db_bench (version unknown)".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_cover_the_suite_once() {
        let all = groups(SUITE);
        assert_eq!(all.len(), 5);
        assert_eq!(
            all[1].benchmarks,
            "fillrandom,flush,waitforcompaction,readrandom,seekrandom,readseq,overwrite,flush,waitforcompaction"
        );
        let measured: Vec<&str> = all.iter().flat_map(|g| g.measured.clone()).collect();
        for b in SUITE {
            assert_eq!(measured.iter().filter(|m| *m == b).count(), 1, "{b}");
        }
        assert_eq!(all[4].threads, FILLSYNC_THREADS);
        assert_eq!((all[2].reuses, all[3].reuses), (Some("random"), Some("random")));
        assert_eq!(all[3].threads, READERS);
        let reuse_only = groups(&["readrandom16"]);
        assert_eq!(reuse_only[0].name, "random", "a reusing group brings the store's maker");
        let reads = groups(&["readseq"]);
        assert_eq!(reads.len(), 1);
        assert_eq!(reads[0].benchmarks, "fillrandom,flush,waitforcompaction,readseq");
        assert_eq!(reads[0].measured, ["fillrandom", "readseq"]);
    }

    #[test]
    fn only_the_direct_mode_adds_flags() {
        let a = test_args();
        let g = &groups(&["fillseq"])[0];
        let db = Path::new("/d");
        let (b, buffered) = command_line(&a, Engine::RocksBuffered, g, db);
        let (_, direct) = command_line(&a, Engine::RocksDirect, g, db);
        let (s, shale) = command_line(&a, Engine::Shale, g, db);
        assert_eq!(b, PathBuf::from("db_bench"));
        assert_eq!(s, PathBuf::from("target/release/shale"));
        assert_eq!(shale[0], "bench");
        assert_eq!(&shale[1..], &buffered[..]);
        assert_eq!(&direct[..buffered.len()], &buffered[..]);
        assert_eq!(&direct[buffered.len()..], DIRECT_FLAGS);
        assert!(buffered.contains(&"--cache_size=1073741824".to_string()));
        assert!(buffered.contains(&"--prepopulate_block_cache=1".to_string()));
        assert!(buffered.contains(&"--write_buffer_size=67108864".to_string()));
        let sync = &groups(&["fillsync"])[0];
        let (_, rocks) = command_line(&a, Engine::RocksDirect, sync, db);
        let (_, shale) = command_line(&a, Engine::Shale, sync, db);
        assert!(rocks.contains(&"--writes=1000".to_string()));
        assert!(rocks.contains(&"--threads=16".to_string()));
        // Both get it: shale bench follows db_bench's --writes.
        assert!(shale.contains(&"--writes=1000".to_string()));
        assert!(!shale.iter().any(|f| f.starts_with("--reads")), "fillsync reads nothing");
        let plan = groups(SUITE);
        let (_, multi) = command_line(&a, Engine::RocksBuffered, &plan[2], db);
        for f in [
            "--use_existing_db=1",
            "--batch_size=16",
            "--multiread_batched=true",
            "--reads=1000000",
        ] {
            assert!(multi.contains(&f.to_string()), "{f}");
        }
        let (_, readers) = command_line(&a, Engine::Shale, &plan[3], db);
        assert!(readers.contains(&"--threads=16".to_string()));
        assert!(readers.contains(&"--reads=62500".to_string()), "the same total over 16 threads");
        let (_, random) = command_line(&a, Engine::Shale, &plan[1], db);
        assert!(!random.iter().any(|f| f.starts_with("--use_existing_db")));
    }

    #[test]
    fn targets_follow_the_issue() {
        assert_eq!(target("fillseq", Engine::RocksDirect), Some(Target::at_least(1.5)));
        assert_eq!(target("readrandom", Engine::RocksBuffered), Some(Target::at_least(1.0)));
        assert_eq!(target("readrandom", Engine::RocksDirect), Some(Target::at_least(1.2)));
        assert_eq!(target("fillsync", Engine::RocksBuffered), Some(Target::at_least(2.0)));
        assert!(parse_benchmarks("fillseq,nope").is_err());
        assert_eq!(parse_modes("direct").unwrap(), [Engine::RocksDirect]);
        assert!(parse_modes("mmap").is_err());
    }

    #[test]
    fn device_bytes_sum_the_engines_counters() {
        let mut c = BTreeMap::new();
        c.insert("rocksdb.wal.bytes".to_string(), 10);
        c.insert("rocksdb.flush.write.bytes".to_string(), 20);
        assert_eq!(device_bytes(Engine::RocksBuffered, &c), None, "a missing counter is no figure");
        c.insert("rocksdb.compact.write.bytes".to_string(), 30);
        assert_eq!(device_bytes(Engine::RocksDirect, &c), Some(60));
        assert_eq!(device_bytes(Engine::Shale, &c), None);
    }

    pub(crate) fn test_args() -> Args {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct W {
            #[command(flatten)]
            a: Args,
        }
        W::parse_from(["x", "--out", "/tmp/out"]).a
    }

    /// A report from real outputs: RocksDB direct and shale, one run each of the random
    /// process (tests/data/), with made-up store sizes.
    #[test]
    fn report_from_captured_output() {
        let a = test_args();
        let wanted = ["fillrandom", "readrandom", "seekrandom", "readseq", "overwrite"];
        let plan = groups(&wanted);
        let out = |text: &str| Finished {
            stdout: text.into(),
            peak_rss_bytes: 1 << 20,
            ..Default::default()
        };
        let mut rocks = Run::from_output(
            Engine::RocksDirect,
            &plan[0],
            1,
            out(include_str!("../tests/data/db_bench-random.stdout")),
            116,
        );
        let mut shale = Run::from_output(
            Engine::Shale,
            &plan[0],
            1,
            out(include_str!("../tests/data/shale-random.stdout")),
            116,
        );
        (rocks.disk_bytes, shale.disk_bytes) = (Some(1000), Some(500));
        assert_eq!(rocks.user_bytes, 40_000 * 116, "fillrandom and overwrite, 20000 each");
        assert_eq!(shale.user_bytes, rocks.user_bytes);
        let wa = shale.write_amp().unwrap();
        assert!((wa - (169_553_920.0 + 19_922_944.0 + 147_456.0) / 4_640_000.0).abs() < 1e-9);
        assert!(rocks.write_amp().unwrap() > 1.0);
        let runs = [rocks, shale];
        let report = Report {
            args: &a,
            wanted: &wanted,
            peers: &[Engine::RocksDirect],
            groups: &plan,
            runs: &runs,
            shale_version: "commit test".into(),
            failures: vec!["run 2, random, shale: exited with Some(1)".into()],
        };
        let t = report.throughput_table();
        assert_eq!(t.rows.len(), 5);
        // readrandom: shale 197312 / RocksDB 91825 = 2.15, target 1.2x against direct.
        assert_eq!(
            t.rows[1][..6],
            ["readrandom", "91,825", "197,312", "**2.15**", ">= 1.2x", "met"]
        );
        assert_eq!(t.rows[0][5], "**MISSED**", "fillrandom 2644 vs 28828");
        let costs = report.cost_table();
        let disk = costs.rows.iter().find(|r| r[1].starts_with("bytes on disk")).unwrap();
        assert_eq!(disk[4..], ["0.50", "met"]);
        let md = report.markdown();
        assert!(md.contains("## FAILED processes"));
        assert!(md.contains("- run 2, random, shale: exited with Some(1)"));
        assert!(md.contains("db_bench --benchmarks=fillrandom,flush,waitforcompaction,readrandom"));
        assert!(md.contains("--use_direct_reads=true"));
        assert_eq!(report.csv().lines().count(), 1 + 2 * 5);
        assert_eq!(report.process_csv().lines().count(), 3);
        let svg = report.chart();
        assert_eq!(svg.matches("<title>").count(), 5, "one bar per benchmark");
    }
}
