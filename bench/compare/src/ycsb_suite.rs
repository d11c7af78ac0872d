//! `shale-compare ycsb`: YCSB's core workloads on shale, RocksDB and fjall, through the one
//! `ycsb::Engine` trait and the same generators (the crate `shale-ycsb`).
//!
//! Stages:
//! 1. For each repeat, for each engine (RocksDB, shale, fjall in turn), start a child process
//!    (`shale-compare ycsb-engine`) so each engine has its own address space and its peak RSS
//!    can be measured.
//! 2. The child opens the engine on an empty directory and runs YCSB's recommended sequence:
//!    load, then the workloads in the order given (A, B, C, F, D by default); workload E runs
//!    on a store loaded afresh, because D's inserts would change its key space. It prints
//!    `== PHASE` before each phase's YCSB report.
//! 3. The parent parses throughput and per-operation P99 from the reports and writes
//!    `ycsb.md`, `ycsb.csv` and `ycsb.svg`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::child::{self, Finished};
use crate::engines::{self, Settings};
use crate::summary::{Target, median_of, ratio, verdict};
use crate::svg;
use crate::table::{self, Table};
use crate::{Error, machine};

/// Arguments of `shale-compare ycsb`.
#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// Records loaded (YCSB's recordcount); each is 10 fields of 100 bytes.
    #[arg(long, default_value_t = 1_000_000)]
    pub records: u64,
    /// Operations per workload (YCSB's operationcount).
    #[arg(long, default_value_t = 1_000_000)]
    pub operations: u64,
    /// Client threads.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Runs of each engine; the tables show medians.
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Workloads, run in this order after one load (E on a fresh load).
    #[arg(long, default_value = "A,B,C,F,D,E")]
    pub workloads: String,
    /// Engines, run in this order within each repeat.
    #[arg(long, default_value = "rocksdb,shale,fjall")]
    pub engines: String,
    /// Block cache bytes, the same for every engine. The default is 32 MiB, the default of
    /// all three (RocksDB's LRU cache, fjall's `cache_size`, shale's `block_cache_bytes`):
    /// what a user gets who sets nothing. Each engine reads what misses it through the page
    /// cache (shale's `use_direct_reads` is off by default, as RocksDB's).
    #[arg(long, default_value_t = 32 << 20)]
    pub cache_size: u64,
    /// Run each engine's process in a memory cgroup bounded to this many bytes, RSS and page
    /// cache together (cgroup v1, root): the regime where the data outgrows the memory the
    /// process may use (0: unbounded, the group still measures peak memory).
    #[arg(long, default_value_t = 0)]
    pub memory_limit: u64,
    /// Memtable bytes, the same for every engine.
    #[arg(long, default_value_t = 64 << 20)]
    pub write_buffer_size: u64,
    /// RocksDB with O_DIRECT reads, flushes and compactions (default: the page cache).
    #[arg(long)]
    pub rocksdb_direct: bool,
    /// shale with `Options::idle_compaction_io` on: compactions read in the idle I/O class
    /// while the store is not behind (off by default, in shale as here).
    #[arg(long)]
    pub shale_idle_compaction_io: bool,
    /// Seed of the generators.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The `shale` binary, for `shale inspect` (the store's bytes on disk).
    #[arg(long, default_value = "target/release/shale")]
    pub shale: PathBuf,
    /// Where the stores live while running.
    #[arg(long, default_value = "target/compare-work")]
    pub work_dir: PathBuf,
    /// Where ycsb.{md,csv,svg} and the raw outputs go.
    #[arg(long)]
    pub out: PathBuf,
    /// Run nothing: write the tables and chart again from the raw outputs and ycsb.csv of a
    /// finished run in --out (with the same flags).
    #[arg(long)]
    pub replot: bool,
}

/// Arguments of the hidden `shale-compare ycsb-engine` (one engine, one child process).
#[derive(clap::Args, Clone, Debug)]
pub struct EngineArgs {
    #[arg(long)]
    pub engine: String,
    #[arg(long)]
    pub dir: PathBuf,
    #[arg(long)]
    pub records: u64,
    #[arg(long)]
    pub operations: u64,
    #[arg(long)]
    pub threads: usize,
    #[arg(long)]
    pub workloads: String,
    #[arg(long)]
    pub cache_size: u64,
    #[arg(long)]
    pub write_buffer_size: u64,
    #[arg(long)]
    pub rocksdb_direct: bool,
    #[arg(long)]
    pub shale_idle_compaction_io: bool,
    #[arg(long)]
    pub seed: u64,
}

/// Parses `A,B,...` into presets.
pub fn parse_workloads(s: &str) -> Result<Vec<ycsb::Preset>, Error> {
    let w: Vec<ycsb::Preset> = s
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| x.parse::<ycsb::Preset>().map_err(Error::from))
        .collect::<Result<_, _>>()?;
    if w.is_empty() {
        return Err("--workloads names no workload".into());
    }
    Ok(w)
}

/// The phases a child runs, in order: `load`, then each workload; a workload E after any
/// other workload gets a fresh store and load first (`reload`).
pub fn phases(workloads: &[ycsb::Preset]) -> Vec<String> {
    let mut out = vec!["load".to_string()];
    for (i, w) in workloads.iter().enumerate() {
        if *w == ycsb::Preset::E && i > 0 {
            out.push("reload".into());
        }
        out.push(w.letter().to_ascii_uppercase().to_string());
    }
    out
}

fn config(a: &EngineArgs, preset: ycsb::Preset) -> ycsb::Config {
    let mut c = ycsb::Config::new(preset);
    c.record_count = a.records;
    c.operation_count = a.operations;
    c.threads = a.threads;
    c.seed = a.seed;
    c
}

/// The child: runs the phases on one engine and prints each report after `== PHASE`.
///
/// # Errors
/// The engine cannot be opened, or YCSB refuses the configuration.
pub fn run_engine(a: &EngineArgs) -> Result<(), Error> {
    let settings = Settings {
        cache_bytes: a.cache_size,
        write_buffer_bytes: a.write_buffer_size,
        rocksdb_direct: a.rocksdb_direct,
        shale_idle_compaction_io: a.shale_idle_compaction_io,
    };
    let workloads = parse_workloads(&a.workloads)?;
    // The store goes in a directory of its own inside --dir (the parent's scratch directory,
    // whose marker file a store directory must not hold).
    let store = crate::scratch::store(&a.dir);
    let mut engine = Some(engines::open(&a.engine, &store, &settings)?);
    // Before the first phase, so parse_phases skips it; the report names what it ran.
    if let Some(v) = engines::version(&a.engine, &store) {
        println!("{ENGINE_VERSION}{v}");
    }
    for phase in phases(&workloads) {
        let report = match phase.as_str() {
            "load" | "reload" => {
                if phase == "reload" {
                    drop(engine.take());
                    // Written back before the files go: pages still dirty when a file is
                    // deleted are taken off the process's storage-write count (its
                    // cancelled_write_bytes), which would hide the first load's writes of a
                    // buffered engine and not those of shale's direct ones.
                    child::fsync_tree(&a.dir)?;
                    crate::scratch::fresh(&a.dir)?;
                    engine = Some(engines::open(&a.engine, &store, &settings)?);
                }
                let e = engine.as_deref().expect("the engine is open");
                ycsb::load(e, &config(a, workloads[0]))?
            }
            letter => {
                let preset: ycsb::Preset = letter.parse()?;
                let e = engine.as_deref().expect("the engine is open");
                ycsb::run(e, &config(a, preset))?
            }
        };
        println!("== {phase}\n{report}{}", report.tail_lines());
        eprintln!("shale-compare: ycsb {} {phase}: {:.0} ops/sec", a.engine, report.throughput());
    }
    drop(engine);
    Ok(())
}

/// The line a child prints before its phases, naming the engine's version.
const ENGINE_VERSION: &str = "engine version: ";

/// The version engine `name` printed in its first run that printed one.
fn printed_version(runs: &[Run], name: &str) -> Option<String> {
    runs.iter().filter(|r| r.engine == name).find_map(|r| {
        r.process.stdout.lines().find_map(|l| l.strip_prefix(ENGINE_VERSION).map(str::to_string))
    })
}

/// One phase's figures from a YCSB report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Phase {
    pub throughput: f64,
    /// P99 in microseconds by operation name (`READ`, `UPDATE`, ...).
    pub p99_us: BTreeMap<String, f64>,
    /// p50, p99, p99.9 and max in microseconds by operation name, from the phase's tail
    /// lines (`ycsb::latency`; absent from reports before them).
    pub tail_us: BTreeMap<String, [f64; 4]>,
    /// Operations that returned an error.
    pub errors: u64,
    /// Operations by name (YCSB's `Operations` line).
    pub ops: BTreeMap<String, u64>,
}

/// Splits a child's stdout into phases and parses each report.
pub fn parse_phases(text: &str) -> BTreeMap<String, Phase> {
    let mut out: BTreeMap<String, Phase> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("== ") {
            current = Some(name.trim().to_string());
            out.entry(name.trim().to_string()).or_default();
            continue;
        }
        let Some(phase) = current.as_ref().and_then(|c| out.get_mut(c)) else { continue };
        if let Some(t) = ycsb::latency::TailLine::parse(line) {
            phase.tail_us.insert(t.op, [t.p50_us, t.p99_us, t.p999_us, t.max_us]);
            continue;
        }
        let parts: Vec<&str> = line.splitn(3, ", ").collect();
        let [section, metric, value] = parts[..] else { continue };
        let section = section.trim_start_matches('[').trim_end_matches(']');
        match (section, metric) {
            ("OVERALL", "Throughput(ops/sec)") => {
                phase.throughput = value.trim().parse().unwrap_or(f64::NAN);
            }
            (op, "99thPercentileLatency(us)") if !op.ends_with("-FAILED") => {
                if let Ok(v) = value.trim().parse() {
                    phase.p99_us.insert(op.to_string(), v);
                }
            }
            (_, "Return=ERROR") => phase.errors += value.trim().parse::<u64>().unwrap_or(0),
            (op, "Operations") if !op.ends_with("-FAILED") => {
                if let Ok(v) = value.trim().parse() {
                    phase.ops.insert(op.to_string(), v);
                }
            }
            _ => {}
        }
    }
    out
}

/// One child's run.
#[derive(Clone, Debug)]
pub struct Run {
    pub repeat: usize,
    pub engine: String,
    pub phases: BTreeMap<String, Phase>,
    pub disk_bytes: Option<u64>,
    pub process: Finished,
    pub load_before: f64,
}

impl Run {
    /// Records written in all phases: YCSB's INSERT and UPDATE operations (a
    /// read-modify-write's update is counted under UPDATE too).
    pub fn records_written(&self) -> u64 {
        self.phases
            .values()
            .map(|p| {
                p.ops.get("INSERT").copied().unwrap_or(0)
                    + p.ops.get("UPDATE").copied().unwrap_or(0)
            })
            .sum()
    }

    /// Storage bytes the kernel counted for the process over the bytes of the records it
    /// wrote (`record_bytes` each; keys left out).
    pub fn write_amp(&self, record_bytes: u64) -> Option<f64> {
        let written = self.records_written() * record_bytes;
        let storage = self.process.storage_write_bytes? as f64;
        (written > 0).then(|| storage / written as f64)
    }
}

/// Bytes of one YCSB record as the driver encodes it (10 fields of 100 bytes: 1140).
pub fn record_bytes() -> u64 {
    ycsb::RecordLayout::default().record_bytes() as u64
}

/// The target on shale / `peer` for a phase: workloads A-D and F at least 1.2x RocksDB and
/// 1.0x fjall, E at least 1.0x both; loads have none.
pub fn target(phase: &str, peer: &str) -> Option<Target> {
    match (phase, peer) {
        ("load" | "reload", _) => None,
        ("E", _) => Some(Target::at_least(1.0)),
        (_, "rocksdb") => Some(Target::at_least(1.2)),
        (_, _) => Some(Target::at_least(1.0)),
    }
}

/// Runs every engine and writes the files.
///
/// # Errors
/// A child that fails, or files that cannot be written.
pub fn run(a: &Args) -> Result<(), Error> {
    let workloads = parse_workloads(&a.workloads)?;
    let engines: Vec<String> = a.engines.split(',').map(|s| s.trim().to_string()).collect();
    for e in &engines {
        if !engines::ALL.contains(&e.as_str()) {
            return Err(format!("unknown engine {e:?} ({})", engines::ALL.join(", ")).into());
        }
    }
    if a.replot {
        let (runs, shale_version) = replot(a)?;
        let report = Report {
            args: a,
            phases: phases(&workloads),
            engines: &engines,
            runs: &runs,
            shale_version,
            failures: Vec::new(),
        };
        return report.write(&a.out);
    }
    let shale_version = machine::shale_version();
    let raw = a.out.join("raw");
    std::fs::create_dir_all(&raw)?;
    let exe = std::env::current_exe()?;
    let mut runs = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    for repeat in 1..=a.repeats {
        for engine in &engines {
            let dir = a.work_dir.join(format!("ycsb-{engine}"));
            crate::scratch::fresh(&dir)?;
            let mut cmd = Command::new(&exe);
            cmd.args(engine_flags(a, engine, &dir));
            let load_before = crate::dbbench::load_average();
            eprintln!("shale-compare: ycsb run {repeat} {engine} (load {load_before:.2})");
            let limit = (a.memory_limit > 0).then_some(a.memory_limit);
            let process =
                child::run_limited(cmd, &raw.join(format!("ycsb-{engine}-{repeat}")), limit)?;
            if process.exit_code != Some(0) {
                // Reported, never dropped: the phases it finished still count.
                let why = format!(
                    "run {repeat}, {engine}: exited with {:?}: {}",
                    process.exit_code,
                    process.stderr.lines().last().unwrap_or("")
                );
                eprintln!("shale-compare: FAILED: {why}");
                failures.push(why);
            }
            let disk_bytes = store_bytes(engine, &a.shale, &crate::scratch::store(&dir)).ok();
            crate::scratch::remove(&dir)?;
            runs.push(Run {
                repeat,
                engine: engine.clone(),
                phases: parse_phases(&process.stdout),
                disk_bytes,
                process,
                load_before,
            });
            // Written after every engine, so an interrupted session leaves its figures.
            let report = Report {
                args: a,
                phases: phases(&workloads),
                engines: &engines,
                runs: &runs,
                shale_version: shale_version.clone(),
                failures: failures.clone(),
            };
            report.write(&a.out)?;
        }
    }
    eprintln!("shale-compare: wrote {}/ycsb.{{md,csv,svg}}", a.out.display());
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("{} engine runs failed; ycsb.md lists them", failures.len()).into())
    }
}

/// The runs of a finished session, read back: each child's reports from `raw/`, the figures
/// taken outside it from `ycsb.csv`, and shale's commit from the old `ycsb.md`.
fn replot(a: &Args) -> Result<(Vec<Run>, String), Error> {
    let csv = std::fs::read_to_string(a.out.join("ycsb.csv"))?;
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().ok_or("ycsb.csv is empty")?.split(',').collect();
    let col = |name: &str| {
        header.iter().position(|h| *h == name).ok_or(format!("ycsb.csv has no {name}"))
    };
    let (c_rep, c_engine, c_rss) = (col("repeat")?, col("engine")?, col("peak_rss_bytes")?);
    let (c_disk, c_io, c_load) =
        (col("disk_bytes")?, col("storage_write_bytes")?, col("load_before")?);
    let mut runs: Vec<Run> = Vec::new();
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        let repeat: usize = f[c_rep].parse()?;
        if runs.iter().any(|r| r.repeat == repeat && r.engine == f[c_engine]) {
            continue;
        }
        let raw = a.out.join("raw").join(format!("ycsb-{}-{repeat}", f[c_engine]));
        let process = Finished {
            exit_code: Some(0),
            stdout: std::fs::read_to_string(raw.with_extension("stdout"))?,
            stderr: std::fs::read_to_string(raw.with_extension("stderr"))?,
            peak_rss_bytes: f[c_rss].parse()?,
            // Absent from CSVs written before the column existed.
            peak_memory_bytes: col("peak_memory_bytes").ok().and_then(|c| f.get(c)?.parse().ok()),
            storage_write_bytes: f[c_io].parse().ok(),
            wall: std::time::Duration::ZERO,
        };
        runs.push(Run {
            repeat,
            engine: f[c_engine].to_string(),
            phases: parse_phases(&process.stdout),
            disk_bytes: f[c_disk].parse().ok(),
            process,
            load_before: f[c_load].parse().unwrap_or(f64::NAN),
        });
    }
    let old = std::fs::read_to_string(a.out.join("ycsb.md")).unwrap_or_default();
    let version = old
        .lines()
        .find_map(|l| l.strip_prefix("- shale: ").and_then(|v| v.split(';').next()))
        .map_or_else(|| "commit unknown".into(), str::to_string);
    Ok((runs, version))
}

/// The child's command-line flags.
pub fn engine_flags(a: &Args, engine: &str, dir: &Path) -> Vec<String> {
    let mut f = vec![
        "ycsb-engine".to_string(),
        format!("--engine={engine}"),
        format!("--dir={}", dir.display()),
        format!("--records={}", a.records),
        format!("--operations={}", a.operations),
        format!("--threads={}", a.threads),
        format!("--workloads={}", a.workloads),
        format!("--cache-size={}", a.cache_size),
        format!("--write-buffer-size={}", a.write_buffer_size),
        format!("--seed={}", a.seed),
    ];
    if a.rocksdb_direct {
        f.push("--rocksdb-direct".into());
    }
    if a.shale_idle_compaction_io {
        f.push("--shale-idle-compaction-io".into());
    }
    f
}

/// The store's bytes after the last phase: files in the directory (RocksDB without its info
/// LOG), or for shale the same `shale inspect` figure as the dbbench suite.
fn store_bytes(engine: &str, shale: &Path, dir: &Path) -> Result<u64, Error> {
    use crate::dbbench::Engine as E;
    match engine {
        "shale" => Ok(crate::dbbench::store_bytes(E::Shale, shale, dir)?.0),
        "rocksdb" => Ok(crate::dbbench::store_bytes(E::RocksBuffered, shale, dir)?.0),
        _ => Ok(child::dir_allocated_bytes(dir, &|_| true)?),
    }
}

/// Turns the runs into tables, a CSV and a chart.
pub struct Report<'a> {
    pub args: &'a Args,
    pub phases: Vec<String>,
    pub engines: &'a [String],
    pub runs: &'a [Run],
    pub shale_version: String,
    /// Engine runs that failed, with why.
    pub failures: Vec<String>,
}

impl Report<'_> {
    /// Writes ycsb.md, ycsb.csv and ycsb.svg into `out`.
    ///
    /// # Errors
    /// A file that cannot be written.
    pub fn write(&self, out: &Path) -> Result<(), Error> {
        std::fs::write(out.join("ycsb.md"), self.markdown())?;
        std::fs::write(out.join("ycsb.csv"), self.csv())?;
        std::fs::write(out.join("ycsb.svg"), self.chart())?;
        Ok(())
    }

    fn median(&self, engine: &str, phase: &str) -> Option<f64> {
        median_of(
            self.runs
                .iter()
                .filter(|r| r.engine == engine)
                .map(|r| r.phases.get(phase).map(|p| p.throughput)),
        )
    }

    fn median_p99(&self, engine: &str, phase: &str, op: &str) -> Option<f64> {
        median_of(
            self.runs
                .iter()
                .filter(|r| r.engine == engine)
                .map(|r| r.phases.get(phase).and_then(|p| p.p99_us.get(op).copied())),
        )
    }

    /// `p50 / p99 / p99.9 / max` of `op` in `phase` by `engine`, each the median over the
    /// runs of that run's tail line.
    fn tail_cell(&self, engine: &str, phase: &str, op: &str) -> String {
        (0..4)
            .map(|k| {
                table::fixed(
                    median_of(self.runs.iter().filter(|r| r.engine == engine).map(|r| {
                        r.phases.get(phase).and_then(|p| p.tail_us.get(op)).map(|t| t[k])
                    })),
                    1,
                )
            })
            .collect::<Vec<_>>()
            .join(" / ")
    }

    fn peers(&self) -> Vec<&str> {
        self.engines.iter().map(String::as_str).filter(|e| *e != "shale").collect()
    }

    fn shown_phases(&self) -> impl Iterator<Item = &String> {
        self.phases.iter().filter(|p| *p != "reload")
    }

    /// Throughput table: median ops/s, ratios, targets.
    pub fn throughput_table(&self) -> Table {
        let peers = self.peers();
        let mut headers = vec!["workload".to_string()];
        headers.extend(self.engines.iter().map(|e| format!("{e} ops/s")));
        for p in &peers {
            headers.extend([format!("shale / {p}"), "target".into(), "verdict".into()]);
        }
        headers.push("errors".into());
        let refs: Vec<&str> = headers.iter().map(String::as_str).collect();
        let mut t = Table::new(&refs);
        for phase in self.shown_phases() {
            let shale = self.median("shale", phase);
            let mut row = vec![phase_title(phase)];
            row.extend(self.engines.iter().map(|e| table::count(self.median(e, phase))));
            for p in &peers {
                let r = ratio(shale, self.median(p, phase));
                let tg = target(phase, p);
                row.push(format!("**{}**", table::ratio(r)));
                row.push(tg.map_or("-".into(), |t| t.label()));
                row.push(verdict(tg, r));
            }
            let errors: u64 = self
                .runs
                .iter()
                .filter_map(|r| r.phases.get(phase.as_str()).map(|p| p.errors))
                .sum();
            row.push(errors.to_string());
            t.row(row);
        }
        t
    }

    /// Latency per workload and operation: YCSB's P99 (whole microseconds), then the tail
    /// line's p50 / p99 / p99.9 / max, per engine.
    pub fn latency_table(&self) -> Table {
        let mut headers = vec!["workload".to_string(), "operation".to_string()];
        headers.extend(self.engines.iter().map(|e| format!("{e} P99 us")));
        headers.extend(self.engines.iter().map(|e| format!("{e} p50 / p99 / p99.9 / max us")));
        let refs: Vec<&str> = headers.iter().map(String::as_str).collect();
        let mut t = Table::new(&refs);
        for phase in self.shown_phases() {
            let mut ops: Vec<String> = self
                .runs
                .iter()
                .filter_map(|r| r.phases.get(phase.as_str()))
                .flat_map(|p| p.p99_us.keys().cloned())
                .collect();
            ops.sort();
            ops.dedup();
            for op in ops {
                let mut row = vec![phase_title(phase), op.clone()];
                row.extend(
                    self.engines.iter().map(|e| table::count(self.median_p99(e, phase, &op))),
                );
                row.extend(self.engines.iter().map(|e| self.tail_cell(e, phase, &op)));
                t.row(row);
            }
        }
        t
    }

    /// Peak RSS and bytes on disk per engine (medians).
    pub fn cost_table(&self) -> Table {
        let peers = self.peers();
        let mut headers = vec!["figure".to_string()];
        headers.extend(self.engines.iter().cloned());
        for p in &peers {
            headers.push(format!("shale / {p}"));
            headers.push("verdict".into());
        }
        let refs: Vec<&str> = headers.iter().map(String::as_str).collect();
        let mut t = Table::new(&refs);
        let rb = record_bytes();
        type Figure<'f> =
            (&'static str, Box<dyn Fn(&Run) -> Option<f64> + 'f>, fn(Option<f64>) -> String, bool);
        let figures: [Figure; 5] = [
            (
                "peak RSS",
                Box::new(|r: &Run| Some(r.process.peak_rss_bytes as f64)),
                table::mib,
                false,
            ),
            (
                "peak memory, RSS + page cache (c)",
                Box::new(|r: &Run| r.process.peak_memory_bytes.map(|b| b as f64)),
                table::mib,
                true,
            ),
            (
                "bytes on disk after the last phase (a)",
                Box::new(|r: &Run| r.disk_bytes.map(|b| b as f64)),
                table::mib,
                true,
            ),
            (
                "storage writes, kernel count (b)",
                Box::new(|r: &Run| r.process.storage_write_bytes.map(|b| b as f64)),
                table::mib,
                false,
            ),
            (
                "write amplification (b) / record bytes written",
                Box::new(move |r: &Run| r.write_amp(rb)),
                |v| table::fixed(v, 2),
                true,
            ),
        ];
        for (name, get, fmt, has_target) in &figures {
            let med = |e: &str| median_of(self.runs.iter().filter(|r| r.engine == e).map(get));
            let mut row = vec![name.to_string()];
            row.extend(self.engines.iter().map(|e| fmt(med(e))));
            for p in &peers {
                let r = ratio(med("shale"), med(p));
                row.push(table::ratio(r));
                // The issue's cost targets are against RocksDB.
                let tg = (*has_target && *p == "rocksdb").then(|| Target::at_most(1.0));
                row.push(verdict(tg, r));
            }
            t.row(row);
        }
        t
    }

    pub fn markdown(&self) -> String {
        let a = self.args;
        let mut s = String::new();
        let _ = writeln!(s, "# YCSB: shale, RocksDB and fjall\n");
        let _ = writeln!(s, "{}", machine::describe());
        let _ = writeln!(
            s,
            "- shale: {}{}; RocksDB {} (release build, `rocksdb` crate 0.25, {}); fjall {}.\n\
             - {} records of 10 x 100-byte fields, {} operations per workload, {} client threads, \
             {} MiB block cache and {} MiB memtable for every engine, no compression, bloom 10 \
             bits, WAL on and not synced; medians of {} runs per engine, alternating {}.\n",
            self.shale_version,
            if a.shale_idle_compaction_io {
                ", compactions reading in the idle I/O class (`--shale-idle-compaction-io`)"
            } else {
                ""
            },
            printed_version(self.runs, "rocksdb").unwrap_or_else(|| "(version not read)".into()),
            if a.rocksdb_direct { "direct I/O" } else { "buffered I/O" },
            printed_version(self.runs, "fjall").unwrap_or_else(|| "3".into()),
            a.records,
            a.operations,
            a.threads,
            a.cache_size >> 20,
            a.write_buffer_size >> 20,
            a.repeats,
            self.engines.join(", ")
        );
        let _ = writeln!(s, "## Throughput (median ops/s)\n");
        s.push_str(&self.throughput_table().to_markdown());
        let _ = writeln!(
            s,
            "\nLoad is YCSB's load phase (inserts only, no target). Workloads run in the order \
             shown on one loaded store; E runs on a store loaded afresh. A plain write \
             returns, for shale, once its record is in the WAL tail (shared memory the kernel \
             keeps when the process dies), for RocksDB and fjall once it is in the OS page \
             cache: all three survive a killed process, none a power cut.\n"
        );
        let _ = writeln!(s, "## P99 latency (median over runs, microseconds)\n");
        s.push_str(&self.latency_table().to_markdown());
        let _ = writeln!(s, "\n## Memory and space\n");
        s.push_str(&self.cost_table().to_markdown());
        let _ = writeln!(
            s,
            "\n(a) What the file system has allocated to the store's files (`du`: `st_blocks`), \
             RocksDB's info LOG left out, as in the db_bench suite.\n\
             (b) `write_bytes - cancelled_write_bytes` of the engine's process in /proc/PID/io, \
             one meter for all three; write amplification divides it by the records written \
             (YCSB's INSERT and UPDATE operations, loads included) times {} bytes per record \
             (keys left out). Cost targets (no higher than RocksDB) apply to (a) and the write \
             amplification.\n\
             (c) `memory.max_usage_in_bytes` of the memory cgroup (v1) each engine's process runs \
             in: its RSS and the page cache it caused (RocksDB and fjall read through the page \
             cache, which RSS does not show); empty where no cgroup could be made.{}\n",
            record_bytes(),
            if a.memory_limit > 0 {
                format!(
                    " Each group was bounded to {} MiB (`--memory-limit`), RSS and page cache \
                     together.",
                    a.memory_limit >> 20
                )
            } else {
                String::new()
            }
        );
        if !self.failures.is_empty() {
            let _ = writeln!(s, "## FAILED engine runs (phases after the failure are missing)\n");
            for f in &self.failures {
                let _ = writeln!(s, "- {f}");
            }
            s.push('\n');
        }
        let _ = writeln!(s, "## Every run (ops/s)\n");
        let mut t = Table::new(&["engine", "run", "phases (ops/s)"]);
        for r in self.runs {
            let v: Vec<String> = self
                .phases
                .iter()
                .filter_map(|p| {
                    r.phases.get(p).map(|x| format!("{p} {}", table::count(Some(x.throughput))))
                })
                .collect();
            t.row(vec![r.engine.clone(), r.repeat.to_string(), v.join(", ")]);
        }
        s.push_str(&t.to_markdown());
        let _ = writeln!(s, "\n## Command\n\n```");
        let _ = writeln!(
            s,
            "shale-compare ycsb --records {} --operations {} --threads {} --repeats {} --workloads {} \
             --engines {} --cache-size {} --write-buffer-size {}{}{}{} --out OUT",
            a.records,
            a.operations,
            a.threads,
            a.repeats,
            a.workloads,
            a.engines,
            a.cache_size,
            a.write_buffer_size,
            if a.memory_limit > 0 {
                format!(" --memory-limit {}", a.memory_limit)
            } else {
                String::new()
            },
            if a.rocksdb_direct { " --rocksdb-direct" } else { "" },
            if a.shale_idle_compaction_io { " --shale-idle-compaction-io" } else { "" }
        );
        s.push_str("```\n");
        s
    }

    pub fn csv(&self) -> String {
        let mut s = String::from(
            "repeat,engine,phase,ops_per_sec,errors,operations,p99_us,peak_rss_bytes,disk_bytes,storage_write_bytes,records_written,load_before,peak_memory_bytes\n",
        );
        for r in self.runs {
            for p in &self.phases {
                let Some(x) = r.phases.get(p) else { continue };
                let p99: Vec<String> = x.p99_us.iter().map(|(op, v)| format!("{op}={v}")).collect();
                let ops: Vec<String> = x.ops.iter().map(|(op, v)| format!("{op}={v}")).collect();
                let _ = writeln!(
                    s,
                    "{},{},{},{},{},{},{},{},{},{},{},{:.2},{}",
                    r.repeat,
                    r.engine,
                    p,
                    x.throughput,
                    x.errors,
                    ops.join(" "),
                    p99.join(" "),
                    r.process.peak_rss_bytes,
                    r.disk_bytes.map_or(String::new(), |b| b.to_string()),
                    r.process.storage_write_bytes.map_or(String::new(), |b| b.to_string()),
                    r.records_written(),
                    r.load_before,
                    r.process.peak_memory_bytes.map_or(String::new(), |b| b.to_string())
                );
            }
        }
        s
    }

    pub fn chart(&self) -> String {
        let phases: Vec<&String> = self.shown_phases().collect();
        let series = self
            .peers()
            .into_iter()
            .map(|p| svg::Bars {
                name: format!("shale / {p}"),
                values: phases
                    .iter()
                    .map(|ph| ratio(self.median("shale", ph), self.median(p, ph)))
                    .collect(),
                targets: phases.iter().map(|ph| target(ph, p).map(|t| t.ratio)).collect(),
            })
            .collect();
        svg::bar_chart(&svg::BarChart {
            title: format!(
                "YCSB, median ops/s ratio, {} records, {} threads ({} runs each)",
                self.args.records, self.args.threads, self.args.repeats
            ),
            y_label: "ratio shale / peer (higher is better)".into(),
            categories: phases.iter().map(|p| phase_title(p)).collect(),
            series,
            reference: Some(1.0),
        })
    }
}

fn phase_title(phase: &str) -> String {
    match phase {
        "load" => "load".into(),
        "reload" => "reload".into(),
        w => format!("workload {w}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e_gets_a_fresh_load() {
        let w = parse_workloads("A,B,C,F,D,E").unwrap();
        assert_eq!(phases(&w), ["load", "A", "B", "C", "F", "D", "reload", "E"]);
        assert_eq!(phases(&parse_workloads("E").unwrap()), ["load", "E"]);
        assert!(parse_workloads("A,G").is_err());
        assert!(parse_workloads("").is_err());
    }

    #[test]
    fn targets_follow_the_issue() {
        assert_eq!(target("A", "rocksdb"), Some(Target::at_least(1.2)));
        assert_eq!(target("F", "fjall"), Some(Target::at_least(1.0)));
        assert_eq!(target("E", "rocksdb"), Some(Target::at_least(1.0)));
        assert_eq!(target("load", "rocksdb"), None);
    }

    #[test]
    fn reports_split_into_phases() {
        let text = "== load\n[OVERALL], RunTime(ms), 100\n[OVERALL], Throughput(ops/sec), 1000.0\n\
                    [INSERT], Operations, 100\n[INSERT], 99thPercentileLatency(us), 12\n\
                    [INSERT], Return=OK, 100\n== A\n[OVERALL], Throughput(ops/sec), 2.5E7\n\
                    [READ], 99thPercentileLatency(us), 7\n[UPDATE], 99thPercentileLatency(us), 30\n\
                    [UPDATE], Return=ERROR, 2\n[UPDATE-FAILED], 99thPercentileLatency(us), 99\n\
                    run          READ latency micros : p50 3.365 p99 7.423 p99.9 80.5 max 81.2 ops 49\n";
        let p = parse_phases(text);
        assert_eq!(p.len(), 2);
        assert_eq!(p["load"].throughput, 1000.0);
        assert_eq!(p["load"].p99_us["INSERT"], 12.0);
        assert_eq!(p["A"].throughput, 2.5e7, "Java's scientific notation parses");
        assert_eq!(p["A"].p99_us.len(), 2);
        assert_eq!(p["A"].errors, 2);
        assert_eq!(p["A"].tail_us["READ"], [3.365, 7.423, 80.5, 81.2]);
        assert!(p["load"].tail_us.is_empty(), "a report before the tail lines has none");
        assert_eq!(p["load"].ops["INSERT"], 100);
        let run = Run {
            repeat: 1,
            engine: "shale".into(),
            phases: p,
            disk_bytes: None,
            process: Finished { storage_write_bytes: Some(228_000), ..Default::default() },
            load_before: 0.0,
        };
        assert_eq!(run.records_written(), 100);
        assert_eq!(run.write_amp(1140), Some(2.0));
        assert_eq!(record_bytes(), 1140);
    }
}
