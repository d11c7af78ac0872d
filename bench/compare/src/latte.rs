//! The latte suite (issue #12): shale's table engine against MariaDB's InnoDB and MyRocks, in
//! LATTE's row layout (a 255-byte key and five 50-byte columns), through the same YCSB
//! driver. bench/latte.sh installs and starts the servers and runs, per repeat and engine:
//!
//! 1. `shale-compare latte-engine` (this module's child): opens the engine (the table store in
//!    a directory, or a connection to the script's server), prints the bytes on disk of the
//!    empty table, then runs load and the workloads in order (A, B, C, D, E, F by default) on
//!    the one loaded table. Each phase's record count is the rows loaded plus the rows the
//!    phases before it inserted, so D's and E's inserts take new keys (YCSB's `recordcount`
//!    for a table that grew). After each phase it prints `== PHASE`, YCSB's report and three
//!    lines of its own in the report's shape: `[DEVICE], WriteBytes, N` (the storage writes
//!    of the process that stores the data, from /proc/PID/io: this process for the table
//!    engine, mariadbd for MariaDB), `[DISK], Bytes, N` (what the data lives in: the table
//!    store's directory and its persistent memory file, or the server's data directory, as
//!    `du` counts) and `[MEMORY], PeakRssBytes, N` (VmHWM of that process).
//! 2. `shale-compare latte-summary`: reads every child's output from `raw/` and writes
//!    `latte.md` (medians, the issue's targets met or MISSED) and `latte.csv`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use ycsb::table::{ROW_BYTES, TableEngine, TableEngineOptions};

use crate::mariadb::{Mariadb, Storage};
use crate::summary::{Target, median_of, ratio, verdict};
use crate::table::{self, Table};
use crate::{Error, machine};

/// The engines, in the order a repeat runs them.
pub const ENGINES: [&str; 3] = ["table", "innodb", "myrocks"];

/// Arguments of `shale-compare latte-engine` (one engine, one process).
#[derive(clap::Args, Clone, Debug)]
pub struct EngineArgs {
    /// table, innodb or myrocks.
    #[arg(long)]
    pub engine: String,
    #[arg(long)]
    pub records: u64,
    /// Operations per workload.
    #[arg(long)]
    pub operations: u64,
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    #[arg(long, default_value = "A,B,C,D,E,F")]
    pub workloads: String,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The table engine's block cache, in bytes (MariaDB's is the server's option).
    #[arg(long, default_value_t = 64 << 20)]
    pub cache_size: u64,
    /// The table engine's store directory.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// The table engine's persistent memory file (the undo log).
    #[arg(long)]
    pub pmem_path: Option<PathBuf>,
    /// MariaDB's unix socket.
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// MariaDB's data directory (for its bytes on disk).
    #[arg(long)]
    pub datadir: Option<PathBuf>,
    /// mariadbd's process id (for its storage writes and memory).
    #[arg(long)]
    pub server_pid: Option<u32>,
}

/// Where an engine's bytes and writes are measured.
struct Meter {
    /// The process that writes the data.
    pid: String,
    /// Directories and files whose allocated bytes are the data on disk.
    paths: Vec<PathBuf>,
    /// The table engine's persistent memory file (one of `paths`), also shown alone.
    pmem: Option<PathBuf>,
}

impl Meter {
    fn device_write_bytes(&self) -> Option<u64> {
        let text = std::fs::read_to_string(format!("/proc/{}/io", self.pid)).ok()?;
        crate::child::parse_proc_io(&text)
    }

    fn disk_bytes(&self) -> Option<u64> {
        use std::os::unix::fs::MetadataExt;
        let mut total = 0;
        for p in &self.paths {
            let meta = std::fs::metadata(p).ok()?;
            total += if meta.is_dir() {
                crate::child::dir_allocated_bytes(p, &|_| true).ok()?
            } else {
                meta.blocks() * 512
            };
        }
        Some(total)
    }

    fn peak_rss_bytes(&self) -> Option<u64> {
        let text = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).ok()?;
        parse_vm_hwm(&text)
    }

    /// The suite's lines after a phase's report.
    fn lines(&self) -> String {
        let v = |x: Option<u64>| x.map_or_else(|| "-1".to_string(), |b| b.to_string());
        let mut s = format!(
            "[DEVICE], WriteBytes, {}\n[DISK], Bytes, {}\n[MEMORY], PeakRssBytes, {}\n",
            v(self.device_write_bytes()),
            v(self.disk_bytes()),
            v(self.peak_rss_bytes())
        );
        if let Some(pmem) = &self.pmem {
            use std::os::unix::fs::MetadataExt;
            let bytes = std::fs::metadata(pmem).ok().map(|m| m.blocks() * 512);
            s.push_str(&format!("[DISK], PmemBytes, {}\n", v(bytes)));
        }
        s
    }
}

/// `VmHWM` of /proc/PID/status, in bytes.
pub fn parse_vm_hwm(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    let kib: u64 = line.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

fn open(a: &EngineArgs) -> Result<(Box<dyn ycsb::Engine>, Meter), Error> {
    let need = |what: Option<&PathBuf>, flag: &str| {
        what.cloned().ok_or_else(|| format!("--engine {} needs {flag}", a.engine))
    };
    if a.engine == "table" {
        let dir = need(a.dir.as_ref(), "--dir")?;
        let pmem = need(a.pmem_path.as_ref(), "--pmem-path")?;
        // LATTE's setting: the undo log in (emulated) persistent memory, asked for.
        let opts = shale_table::TableOptions {
            undo_log: shale_table::UndoLogPlace::Pmem,
            pmem_path: Some(pmem.clone()),
            cache_blocks: (a.cache_size as usize / shale_table::BLOCK_BYTES).max(16),
            ..shale_table::TableOptions::default()
        };
        let engine = TableEngine::open(&dir, TableEngineOptions { table: opts })
            .map_err(|e| format!("opening the table store at {}: {e}", dir.display()))?;
        let meter = Meter { pid: "self".into(), paths: vec![dir, pmem.clone()], pmem: Some(pmem) };
        return Ok((Box::new(engine), meter));
    }
    let storage = Storage::from_name(&a.engine)
        .ok_or_else(|| format!("unknown engine {:?} ({})", a.engine, ENGINES.join(", ")))?;
    let socket = need(a.socket.as_ref(), "--socket")?;
    let datadir = need(a.datadir.as_ref(), "--datadir")?;
    let pid = a.server_pid.ok_or("MariaDB needs --server-pid")?;
    let engine = Mariadb::open(&socket, storage)?;
    Ok((Box::new(engine), Meter { pid: pid.to_string(), paths: vec![datadir], pmem: None }))
}

/// The child: every phase on one engine, each report followed by the suite's lines.
///
/// # Errors
/// The engine cannot be opened, or YCSB refuses the configuration.
pub fn run_engine(a: &EngineArgs) -> Result<(), Error> {
    let workloads = crate::ycsb_suite::parse_workloads(&a.workloads)?;
    let (engine, meter) = open(a)?;
    println!("== start\n{}", meter.lines());
    let config = |preset: ycsb::Preset, records: u64| {
        let mut c = ycsb::Config::new(preset);
        c.record_count = records;
        c.operation_count = a.operations;
        c.threads = a.threads;
        c.seed = a.seed;
        c.layout = ycsb::table::LAYOUT;
        c
    };
    let report = ycsb::load(engine.as_ref(), &config(workloads[0], a.records))?;
    println!("== load\n{report}{}{}", report.tail_lines(), meter.lines());
    eprintln!("shale-compare: latte {} load: {:.0} ops/sec", a.engine, report.throughput());
    let mut records = a.records;
    for w in workloads {
        let report = ycsb::run(engine.as_ref(), &config(w, records))?;
        records += report.op(ycsb::Operation::Insert).map_or(0, |o| o.count());
        let phase = w.letter().to_ascii_uppercase();
        println!("== {phase}\n{report}{}{}", report.tail_lines(), meter.lines());
        eprintln!("shale-compare: latte {} {phase}: {:.0} ops/sec", a.engine, report.throughput());
    }
    drop(engine);
    Ok(())
}

/// One phase's report: `(section, metric) -> value`, e.g. `("INSERT",
/// "50thPercentileLatency(us)")`; a phase's tail lines (`ycsb::latency`) add the metrics of
/// [`TAIL_METRICS`] to their operation's section.
pub type Block = BTreeMap<(String, String), f64>;

/// The metrics a tail line adds: p50, p99, p99.9 and max, microseconds with three decimals.
pub const TAIL_METRICS: [&str; 4] = ["tail p50 us", "tail p99 us", "tail p99.9 us", "tail max us"];

/// Splits a child's stdout into its phases' blocks.
pub fn parse_blocks(text: &str) -> BTreeMap<String, Block> {
    let mut out: BTreeMap<String, Block> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("== ") {
            current = Some(name.trim().to_string());
            out.entry(name.trim().to_string()).or_default();
            continue;
        }
        let Some(block) = current.as_ref().and_then(|c| out.get_mut(c)) else { continue };
        if let Some(t) = ycsb::latency::TailLine::parse(line) {
            for (m, v) in TAIL_METRICS.iter().zip([t.p50_us, t.p99_us, t.p999_us, t.max_us]) {
                block.insert((t.op.clone(), (*m).to_string()), v);
            }
            continue;
        }
        let parts: Vec<&str> = line.splitn(3, ", ").collect();
        let [section, metric, value] = parts[..] else { continue };
        let section = section.trim_start_matches('[').trim_end_matches(']');
        if let Ok(v) = value.trim().parse::<f64>()
            && v >= 0.0
        {
            block.insert((section.to_string(), metric.to_string()), v);
        }
    }
    out
}

/// One child's run, parsed.
#[derive(Clone, Debug)]
pub struct Run {
    pub engine: String,
    pub repeat: usize,
    pub blocks: BTreeMap<String, Block>,
}

impl Run {
    fn get(&self, phase: &str, section: &str, metric: &str) -> Option<f64> {
        self.blocks.get(phase)?.get(&(section.to_string(), metric.to_string())).copied()
    }
}

/// Reads `raw/latte-ENGINE-REPEAT.stdout` files.
///
/// # Errors
/// The directory cannot be read.
pub fn read_runs(raw: &Path) -> Result<Vec<Run>, Error> {
    let mut runs = Vec::new();
    for entry in std::fs::read_dir(raw)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_prefix("latte-").and_then(|n| n.strip_suffix(".stdout")) else {
            continue;
        };
        let Some((engine, repeat)) = stem.rsplit_once('-') else { continue };
        let Ok(repeat) = repeat.parse() else { continue };
        let text = std::fs::read_to_string(raw.join(&name))?;
        runs.push(Run { engine: engine.to_string(), repeat, blocks: parse_blocks(&text) });
    }
    runs.sort_by(|a, b| (a.repeat, &a.engine).cmp(&(b.repeat, &b.engine)));
    Ok(runs)
}

/// Arguments of `shale-compare latte-summary`.
#[derive(clap::Args, Clone, Debug)]
pub struct SummaryArgs {
    /// The results directory: reads raw/, writes latte.md and latte.csv.
    #[arg(long)]
    pub out: PathBuf,
    #[arg(long)]
    pub records: u64,
    #[arg(long)]
    pub operations: u64,
    #[arg(long)]
    pub threads: usize,
    #[arg(long)]
    pub cache_size: u64,
    #[arg(long, default_value = "A,B,C,D,E,F")]
    pub workloads: String,
    /// The command that ran the session, printed in the report.
    #[arg(long, default_value = "")]
    pub command: String,
    /// What the servers ran with, one line each, printed in the report.
    #[arg(long, default_value = "")]
    pub servers: String,
}

/// The throughput target of shale's table engine over `peer` in `phase` (issue #12): at
/// least 3x InnoDB and 2x MyRocks on load, A, B and D.
pub fn target(phase: &str, peer: &str) -> Option<Target> {
    if !matches!(phase, "load" | "A" | "B" | "D") {
        return None;
    }
    match peer {
        "innodb" => Some(Target::at_least(3.0)),
        "myrocks" => Some(Target::at_least(2.0)),
        _ => None,
    }
}

/// Insert p50 under this many microseconds (issue #12).
pub const INSERT_P50_US_MAX: f64 = 50.0;
/// Bytes on disk after load at most this many times the logical data (issue #12).
pub const DISK_OVER_LOGICAL_MAX: f64 = 1.3;

/// The report of a session.
pub struct Report<'a> {
    pub args: &'a SummaryArgs,
    pub runs: &'a [Run],
    pub phases: Vec<String>,
}

impl Report<'_> {
    fn engines(&self) -> Vec<&'static str> {
        ENGINES.iter().copied().filter(|e| self.runs.iter().any(|r| r.engine == *e)).collect()
    }

    fn median(&self, engine: &str, phase: &str, section: &str, metric: &str) -> Option<f64> {
        median_of(
            self.runs.iter().filter(|r| r.engine == engine).map(|r| r.get(phase, section, metric)),
        )
    }

    fn repeats(&self, engine: &str) -> usize {
        self.runs.iter().filter(|r| r.engine == engine).count()
    }

    /// Logical bytes after load: rows x 505.
    pub fn logical_bytes(&self) -> u64 {
        self.args.records * ROW_BYTES as u64
    }

    /// Median ops/s per phase, the ratios and the targets.
    pub fn throughput_table(&self) -> Table {
        let engines = self.engines();
        let peers: Vec<&str> = engines.iter().copied().filter(|e| *e != "table").collect();
        let mut headers: Vec<String> = vec!["phase".into()];
        headers.extend(engines.iter().map(|e| format!("{} ops/s", title(e))));
        for p in &peers {
            headers.extend([format!("shale / {}", title(p)), "target".into(), "verdict".into()]);
        }
        let refs: Vec<&str> = headers.iter().map(String::as_str).collect();
        let mut t = Table::new(&refs);
        for phase in &self.phases {
            let tput = |e: &str| self.median(e, phase, "OVERALL", "Throughput(ops/sec)");
            let mut row = vec![phase_title(phase)];
            row.extend(engines.iter().map(|e| table::count(tput(e))));
            for p in &peers {
                let r = ratio(tput("table"), tput(p));
                let tg = target(phase, p);
                row.push(format!("**{}**", table::ratio(r)));
                row.push(tg.map_or("-".into(), |t| t.label()));
                row.push(verdict(tg, r));
            }
            t.row(row);
        }
        t
    }

    /// p50 and p99 per phase and operation (YCSB's blocks), then p50 / p99 / p99.9 / max (the
    /// tail lines), medians over the runs.
    pub fn latency_table(&self) -> Table {
        let engines = self.engines();
        let mut headers: Vec<String> = vec!["phase".into(), "operation".into()];
        for e in &engines {
            headers.extend([format!("{} p50 us", title(e)), format!("{} p99 us", title(e))]);
        }
        for e in &engines {
            headers.push(format!("{} p50 / p99 / p99.9 / max us", title(e)));
        }
        let refs: Vec<&str> = headers.iter().map(String::as_str).collect();
        let mut t = Table::new(&refs);
        for phase in &self.phases {
            let mut ops: Vec<String> = self
                .runs
                .iter()
                .filter_map(|r| r.blocks.get(phase))
                .flat_map(|b| b.keys())
                .filter(|(_, m)| m == "50thPercentileLatency(us)")
                .map(|(s, _)| s.clone())
                .filter(|s| !s.ends_with("-FAILED"))
                .collect();
            ops.sort();
            ops.dedup();
            for op in ops {
                let mut row = vec![phase_title(phase), op.clone()];
                for e in &engines {
                    for m in ["50thPercentileLatency(us)", "99thPercentileLatency(us)"] {
                        row.push(table::count(self.median(e, phase, &op, m)));
                    }
                }
                for e in &engines {
                    let tail: Vec<String> = TAIL_METRICS
                        .iter()
                        .map(|m| table::fixed(self.median(e, phase, &op, m), 1))
                        .collect();
                    row.push(tail.join(" / "));
                }
                t.row(row);
            }
        }
        t
    }

    /// The absolute targets: insert p50 and bytes on disk after load.
    pub fn targets_table(&self) -> Table {
        let engines = self.engines();
        let mut headers: Vec<String> = vec!["figure".into()];
        headers.extend(engines.iter().map(|e| title(e).to_string()));
        headers.extend(["target (shale)".into(), "verdict".into()]);
        let refs: Vec<&str> = headers.iter().map(String::as_str).collect();
        let mut t = Table::new(&refs);
        let p50 = |e: &str| self.median(e, "load", "INSERT", "50thPercentileLatency(us)");
        let mut row = vec!["insert p50 in the load (us)".to_string()];
        row.extend(engines.iter().map(|e| table::count(p50(e))));
        row.push(format!("< {INSERT_P50_US_MAX} us"));
        row.push(met(p50("table").map(|v| v < INSERT_P50_US_MAX)));
        t.row(row);
        let logical = self.logical_bytes() as f64;
        let disk = |e: &str| self.median(e, "load", "DISK", "Bytes");
        let mut row = vec!["bytes on disk after load / logical data".to_string()];
        row.extend(engines.iter().map(|e| table::fixed(disk(e).map(|d| d / logical), 2)));
        row.push(format!("<= {DISK_OVER_LOGICAL_MAX}x"));
        row.push(met(disk("table").map(|d| d / logical <= DISK_OVER_LOGICAL_MAX)));
        t.row(row);
        t
    }

    /// Bytes on disk, device writes, write amplification and memory, medians.
    pub fn cost_table(&self) -> Table {
        let engines = self.engines();
        let mut headers: Vec<String> = vec!["figure".into()];
        headers.extend(engines.iter().map(|e| title(e).to_string()));
        let refs: Vec<&str> = headers.iter().map(String::as_str).collect();
        let mut t = Table::new(&refs);
        let logical = self.logical_bytes() as f64;
        let last = self.phases.last().cloned().unwrap_or_else(|| "load".into());
        let load_writes = |r: &Run| {
            let before = r.get("start", "DEVICE", "WriteBytes")?;
            Some(r.get("load", "DEVICE", "WriteBytes")? - before)
        };
        type Figure<'f> =
            (String, Box<dyn Fn(&Run) -> Option<f64> + 'f>, fn(Option<f64>) -> String);
        let figures: Vec<Figure> = vec![
            (
                "bytes on disk, empty table (a)".into(),
                Box::new(|r: &Run| r.get("start", "DISK", "Bytes")),
                table::mib,
            ),
            (
                "bytes on disk after load (a)".into(),
                Box::new(|r: &Run| r.get("load", "DISK", "Bytes")),
                table::mib,
            ),
            (
                "of which the persistent memory file (the undo log)".into(),
                Box::new(|r: &Run| r.get("load", "DISK", "PmemBytes")),
                table::mib,
            ),
            (
                format!("bytes on disk after {} (a)", phase_title(&last)),
                Box::new(move |r: &Run| r.get(&last, "DISK", "Bytes")),
                table::mib,
            ),
            ("device writes during load (b)".into(), Box::new(load_writes), table::mib),
            (
                "write amplification of the load (b) / logical data".into(),
                Box::new(move |r: &Run| load_writes(r).map(|w| w / logical)),
                |v| table::fixed(v, 2),
            ),
            (
                "peak RSS of the storing process (c)".into(),
                Box::new(|r: &Run| {
                    r.blocks
                        .values()
                        .filter_map(|b| b.get(&("MEMORY".into(), "PeakRssBytes".into())))
                        .copied()
                        .reduce(f64::max)
                }),
                table::mib,
            ),
        ];
        for (name, get, fmt) in &figures {
            let mut row = vec![name.clone()];
            row.extend(
                engines
                    .iter()
                    .map(|e| fmt(median_of(self.runs.iter().filter(|r| r.engine == *e).map(get)))),
            );
            t.row(row);
        }
        t
    }

    pub fn markdown(&self) -> String {
        let a = self.args;
        let mut s = String::new();
        let _ = writeln!(s, "# LATTE: shale's table engine, MariaDB InnoDB and MyRocks (YCSB)\n");
        let _ = writeln!(s, "{}", machine::describe());
        let repeats: Vec<String> =
            self.engines().iter().map(|e| format!("{} {}", title(e), self.repeats(e))).collect();
        let _ = writeln!(
            s,
            "- shale: {}. {}\n- {} rows of 505 bytes (a 255-byte key, five 50-byte columns: {} \
             MiB of logical data), {} operations per workload, {} client threads, load then \
             {} on the one loaded table; cache {} MiB for every engine; every operation its \
             own transaction, durable when it returns. Medians of runs per engine ({}), \
             alternating engines within each repeat.\n",
            machine::shale_version(),
            a.servers,
            a.records,
            self.logical_bytes() >> 20,
            a.operations,
            a.threads,
            a.workloads,
            a.cache_size >> 20,
            repeats.join(", ")
        );
        let _ = writeln!(s, "## Throughput (median ops/s) and issue #12's targets\n");
        s.push_str(&self.throughput_table().to_markdown());
        let _ = writeln!(s, "\n## Insert latency and space: issue #12's targets\n");
        s.push_str(&self.targets_table().to_markdown());
        let _ = writeln!(
            s,
            "\nLogical data: {} rows x 505 bytes = {} bytes. shale's bytes on disk are its \
             volume file's allocated bytes plus its persistent memory file's (the undo log).\n",
            a.records,
            self.logical_bytes()
        );
        let _ = writeln!(s, "## Latency (median over runs, microseconds)\n");
        s.push_str(&self.latency_table().to_markdown());
        let _ = writeln!(s, "\n## Space, writes and memory (medians)\n");
        s.push_str(&self.cost_table().to_markdown());
        let _ = writeln!(
            s,
            "\n(a) Allocated bytes (`du`: `st_blocks`) of what holds the data: for shale the \
             store directory (its volume) and the persistent memory file in /dev/shm; for \
             MariaDB the whole data directory (tablespaces, redo and undo logs, MyRocks' \
             files, and the server's own system tables, which the empty-table row shows).\n\
             (b) `write_bytes - cancelled_write_bytes` of /proc/PID/io of the process that \
             stores the data (the harness's own for shale, mariadbd for MariaDB), over the load; \
             the amplification divides it by the logical data. Writes to the persistent memory \
             file (a mapping in /dev/shm) are not storage writes and are not counted.\n\
             (c) VmHWM of /proc/PID/status of that process, the most over the phases.\n"
        );
        let _ = writeln!(s, "## Every run (ops/s)\n");
        let mut t = Table::new(&["engine", "run", "phases (ops/s)"]);
        for r in self.runs {
            let v: Vec<String> = self
                .phases
                .iter()
                .filter_map(|p| {
                    r.get(p, "OVERALL", "Throughput(ops/sec)")
                        .map(|x| format!("{p} {}", table::count(Some(x))))
                })
                .collect();
            t.row(vec![title(&r.engine).into(), r.repeat.to_string(), v.join(", ")]);
        }
        s.push_str(&t.to_markdown());
        let _ = writeln!(s, "\n## Command\n\n```\n{}\n```", a.command);
        s
    }

    pub fn csv(&self) -> String {
        let mut s = String::from("repeat,engine,phase,section,metric,value\n");
        for r in self.runs {
            for (phase, block) in &r.blocks {
                for ((section, metric), v) in block {
                    let _ = writeln!(s, "{},{},{phase},{section},{metric},{v}", r.repeat, r.engine);
                }
            }
        }
        s
    }
}

fn met(ok: Option<bool>) -> String {
    match ok {
        Some(true) => "met".into(),
        Some(false) => "**MISSED**".into(),
        None => "n/a (no figure)".into(),
    }
}

fn title(engine: &str) -> &str {
    match engine {
        "table" => "shale table",
        "innodb" => "InnoDB",
        "myrocks" => "MyRocks",
        other => other,
    }
}

fn phase_title(phase: &str) -> String {
    match phase {
        "load" => "load".into(),
        w => format!("workload {w}"),
    }
}

/// Writes latte.md and latte.csv from `out/raw`.
///
/// # Errors
/// Unreadable runs or unwritable files.
pub fn summarize(a: &SummaryArgs) -> Result<(), Error> {
    let runs = read_runs(&a.out.join("raw"))?;
    let workloads = crate::ycsb_suite::parse_workloads(&a.workloads)?;
    let mut phases = vec!["load".to_string()];
    phases.extend(workloads.iter().map(|w| w.letter().to_ascii_uppercase().to_string()));
    let report = Report { args: a, runs: &runs, phases };
    std::fs::write(a.out.join("latte.md"), report.markdown())?;
    std::fs::write(a.out.join("latte.csv"), report.csv())?;
    eprintln!("shale-compare: wrote {}/latte.{{md,csv}}", a.out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHILD: &str = "== start\n[DEVICE], WriteBytes, 100\n[DISK], Bytes, 4096\n\
        [MEMORY], PeakRssBytes, -1\n\
        == load\n[OVERALL], RunTime(ms), 10\n[OVERALL], Throughput(ops/sec), 1000.0\n\
        [INSERT], Operations, 10\n[INSERT], 50thPercentileLatency(us), 40\n\
        [INSERT], 99thPercentileLatency(us), 90\n\
        load         INSERT latency micros : p50 40.240 p99 90.500 p99.9 120.000 max 130.130 ops 10\n\
        [DEVICE], WriteBytes, 10200\n\
        [DISK], Bytes, 6060\n[MEMORY], PeakRssBytes, 1048576\n\
        == A\n[OVERALL], Throughput(ops/sec), 2.5E3\n[READ], 50thPercentileLatency(us), 7\n\
        [UPDATE-FAILED], 50thPercentileLatency(us), 99\n";

    fn args(records: u64) -> SummaryArgs {
        SummaryArgs {
            out: PathBuf::from("/nonexistent"),
            records,
            operations: 10,
            threads: 2,
            cache_size: 1 << 20,
            workloads: "A".into(),
            command: "bench/latte.sh".into(),
            servers: String::new(),
        }
    }

    #[test]
    fn child_output_splits_into_blocks() {
        let b = parse_blocks(CHILD);
        assert_eq!(b.len(), 3);
        let get = |p: &str, s: &str, m: &str| b[p].get(&(s.into(), m.into())).copied();
        assert_eq!(get("start", "DISK", "Bytes"), Some(4096.0));
        assert_eq!(get("start", "MEMORY", "PeakRssBytes"), None, "-1: not measured");
        assert_eq!(get("load", "INSERT", "50thPercentileLatency(us)"), Some(40.0));
        assert_eq!(get("A", "OVERALL", "Throughput(ops/sec)"), Some(2500.0));
        assert_eq!(get("load", "INSERT", "tail p99.9 us"), Some(120.0));
        assert_eq!(get("load", "INSERT", "tail max us"), Some(130.13));
        assert_eq!(parse_vm_hwm("Name: x\nVmHWM:\t  2048 kB\n"), Some(2 << 20));
        assert_eq!(parse_vm_hwm("Name: x\n"), None);
    }

    #[test]
    fn targets_follow_the_issue() {
        assert_eq!(target("load", "innodb"), Some(Target::at_least(3.0)));
        assert_eq!(target("D", "myrocks"), Some(Target::at_least(2.0)));
        assert_eq!(target("C", "innodb"), None);
        assert_eq!(target("E", "myrocks"), None);
        assert_eq!(target("A", "table"), None);
    }

    #[test]
    fn tables_show_medians_ratios_and_verdicts() {
        let mut runs = Vec::new();
        for (engine, factor) in [("table", 4.0), ("innodb", 1.0), ("myrocks", 2.5)] {
            for repeat in 1..=3 {
                let mut r = Run { engine: engine.into(), repeat, blocks: parse_blocks(CHILD) };
                let load = r.blocks.get_mut("load").unwrap();
                let tput = load.get_mut(&("OVERALL".into(), "Throughput(ops/sec)".into())).unwrap();
                *tput *= factor * repeat as f64;
                runs.push(r);
            }
        }
        let a = args(10);
        let report = Report { args: &a, runs: &runs, phases: vec!["load".into(), "A".into()] };
        let md = report.throughput_table().to_markdown();
        // Medians: 8000, 2000 and 5000 ops/s: 4x InnoDB (met), 1.6x MyRocks (missed).
        let load = md.lines().find(|l| l.starts_with("| load")).unwrap();
        assert!(load.contains("8,000") || load.contains("8000"), "{md}");
        assert!(load.contains("met") && load.contains("MISSED"), "{load}");
        let t = report.targets_table().to_markdown();
        assert!(t.lines().any(|l| l.contains("insert p50") && l.contains("met")), "{t}");
        // 6060 bytes on disk for 10 x 505 = 5050 logical: 1.2x, met.
        assert!(t.lines().any(|l| l.contains("1.20") && l.contains("met")), "{t}");
        let c = report.cost_table().to_markdown();
        assert!(c.contains("write amplification"), "{c}");
        // (10200 - 100) / 5050 = 2.00
        assert!(c.lines().any(|l| l.contains("amplification") && l.contains("2.00")), "{c}");
        let lat = report.latency_table().to_markdown();
        assert!(lat.contains("INSERT") && lat.contains("READ") && !lat.contains("FAILED"), "{lat}");
        assert!(lat.contains("| 40.2 / 90.5 / 120.0 / 130.1 |"), "{lat}");
        assert!(lat.contains("| - / - / - / - |"), "READ has no tail line: {lat}");
        let md = report.markdown();
        assert!(md.contains("bench/latte.sh") && md.contains("505 bytes"), "{md}");
        assert!(report.csv().lines().count() > 10);
    }
}
