//! `shale-compare adoc-record`: one process of bench/adoc.sh (issue #10) becomes one row of
//! its `runs.csv`, with every figure the summary shows taken from the process's own output:
//!
//! - db_bench's and `shale bench`'s fillrandom: ops/s from the result line; p50, p99, p99.9
//!   and max of the writes from the `--histogram` block; stall time by kind from the run's per-second
//!   series ([`crate::adoc_series`]: shale's `--timeline` CSV, or for RocksDB the series this
//!   command builds from its progress lines and info LOG and writes to `--timeline`); write
//!   amplification from the engines' `--statistics` counters;
//! - a YCSB phase (`shale ycsb`, `shale-compare adoc-ycsb`): the report's throughput and its
//!   write operation's p99 and p99.9 (INSERT or UPDATE, whichever the phase did more of; a
//!   read-modify-write's update counts under UPDATE), and its p50 and max from the phase's tail
//!   line (`ycsb::latency`); the same four figures of its reads (READ), where it read;
//!   stall time from the statistics the process printed, where it printed some;
//! - from the script: bytes the kernel counted written on the device (`--device-bytes`),
//!   peak memory of the process's memory cgroup (RSS and page cache) and peak RSS.
//!
//! Write amplification, two ways: `engine_write_bytes` (RocksDB WAL + flush + compaction
//! bytes, shale WAL + SST + version-log bytes, as the dbbench suite counts them; the SST part
//! alone in `sst_write_bytes`) and `device_write_bytes` (the kernel's count of sectors written
//! to the loop device, one meter for both engines), each over `user_bytes` (key + value bytes
//! of the writes, or 1140 bytes per YCSB record written).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::adoc_series::{self, KINDS, RocksRun, Second};
use crate::dbbench::{self, Engine};
use crate::{Error, parse};

/// The columns of runs.csv, in order.
pub const HEADER: &str = "engine,config,device,device_bps,workload,repeat,ops_per_sec,\
operations,seconds,p99_write_us,p999_write_us,stall_us,stall_memtable_us,stall_l0_slowdown_us,\
stall_l0_stop_us,stall_pending_slowdown_us,stall_pending_stop_us,stall_kinds,user_bytes,\
engine_write_bytes,sst_write_bytes,device_write_bytes,levels,peak_memory_bytes,peak_rss_bytes,\
tuner,timeline,status,log,p50_write_us,max_write_us,p50_read_us,p99_read_us,p999_read_us,\
max_read_us";

/// The columns at the end of [`HEADER`] that runs.csv files written before them lack: read as
/// empty there.
const LATER_COLUMNS: [&str; 6] =
    ["p50_write_us", "max_write_us", "p50_read_us", "p99_read_us", "p999_read_us", "max_read_us"];

/// Arguments of `shale-compare adoc-record`.
#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// runs.csv: the row is appended (the file and its header made if missing).
    #[arg(long)]
    pub csv: PathBuf,
    /// rocksdb or shale.
    #[arg(long)]
    pub engine: String,
    /// The configuration's name (rocksdb-default, shale-adoc, ...).
    #[arg(long)]
    pub config: String,
    /// The emulated device's name (hdd, sata, pm, nvme).
    #[arg(long)]
    pub device: String,
    /// Its throttle, bytes per second.
    #[arg(long, default_value_t = 0)]
    pub device_bps: u64,
    /// fillrandom, or ycsb-load, ycsb-A, ... for a YCSB phase.
    #[arg(long)]
    pub workload: String,
    #[arg(long, default_value_t = 1)]
    pub repeat: u32,
    /// The process's output: PREFIX.stdout and PREFIX.stderr.
    #[arg(long)]
    pub output: PathBuf,
    /// RocksDB's info LOG of the run (whole, or bench/adoc.sh's filtered copy).
    #[arg(long)]
    pub log: Option<PathBuf>,
    /// The per-second series: shale's `--timeline` file to read; for RocksDB, where to write
    /// the series built from its output.
    #[arg(long)]
    pub timeline: Option<PathBuf>,
    /// RocksDB's background jobs and memtable bytes, for its series' columns.
    #[arg(long)]
    pub background_jobs: Option<u64>,
    #[arg(long)]
    pub write_buffer_size: Option<u64>,
    #[arg(long, default_value_t = 16)]
    pub key_size: u64,
    #[arg(long, default_value_t = 1000)]
    pub value_size: u64,
    /// Peak of the process's memory cgroup (memory.max_usage_in_bytes).
    #[arg(long)]
    pub peak_memory: Option<u64>,
    /// Peak RSS (GNU time's %M, in KiB, times 1024).
    #[arg(long)]
    pub peak_rss: Option<u64>,
    /// Bytes the kernel counted written to the device during the process (and a sync).
    #[arg(long)]
    pub device_bytes: Option<u64>,
    /// ok, or why not.
    #[arg(long, default_value = "ok")]
    pub status: String,
}

/// One row of runs.csv.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Row {
    pub engine: String,
    pub config: String,
    pub device: String,
    pub device_bps: Option<f64>,
    pub workload: String,
    pub repeat: u32,
    pub ops_per_sec: Option<f64>,
    pub operations: Option<f64>,
    pub seconds: Option<f64>,
    pub p99_write_us: Option<f64>,
    pub p999_write_us: Option<f64>,
    /// The writes' median and maximum latency, as the client sees them.
    pub p50_write_us: Option<f64>,
    pub max_write_us: Option<f64>,
    /// A YCSB phase's reads (READ): p50, p99, p99.9 and max, as the client sees them; none
    /// where the phase read nothing (a load, fillrandom).
    pub read_us: [Option<f64>; 4],
    /// All stall time.
    pub stall_us: Option<f64>,
    /// By kind ([`KINDS`]).
    pub stall_kind_us: [Option<f64>; 5],
    /// How the kinds were found: `exact`, `estimated`, `total only` or empty (no figure).
    pub stall_kinds: String,
    pub user_bytes: Option<f64>,
    pub engine_write_bytes: Option<f64>,
    pub sst_write_bytes: Option<f64>,
    pub device_write_bytes: Option<f64>,
    /// Levels holding files at the end (RocksDB's last stats dump).
    pub levels: Option<f64>,
    pub peak_memory_bytes: Option<f64>,
    pub peak_rss_bytes: Option<f64>,
    /// Seconds in which the tuner's last answer was each overflow: `L0O:3 RDO:0 MMO:12`.
    pub tuner: String,
    /// The per-second series, relative to runs.csv's folder.
    pub timeline: String,
    pub status: String,
    /// The process's output prefix, relative to runs.csv's folder.
    pub log: String,
}

impl Row {
    pub fn ok(&self) -> bool {
        self.status == "ok"
    }

    /// Write amplification by the engine's counters.
    pub fn write_amp(&self) -> Option<f64> {
        crate::summary::ratio(self.engine_write_bytes, self.user_bytes.filter(|u| *u > 0.0))
    }

    /// Write amplification of the SSTs alone (flushes and compactions).
    pub fn write_amp_sst(&self) -> Option<f64> {
        crate::summary::ratio(self.sst_write_bytes, self.user_bytes.filter(|u| *u > 0.0))
    }

    /// Write amplification by the kernel's count of the device's writes.
    pub fn write_amp_device(&self) -> Option<f64> {
        crate::summary::ratio(self.device_write_bytes, self.user_bytes.filter(|u| *u > 0.0))
    }

    /// The row as a CSV line (no commas inside fields: statuses have theirs replaced).
    pub fn to_csv(&self) -> String {
        let n = |v: Option<f64>| match v {
            Some(v) if v.fract() == 0.0 => format!("{v:.0}"),
            Some(v) => format!("{v:.3}"),
            None => String::new(),
        };
        let clean = |s: &str| s.replace([',', '\n'], ";");
        let mut s = String::new();
        let _ = write!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{},{}",
            clean(&self.engine),
            clean(&self.config),
            clean(&self.device),
            n(self.device_bps),
            clean(&self.workload),
            self.repeat,
            n(self.ops_per_sec),
            n(self.operations),
            n(self.seconds),
            n(self.p99_write_us),
            n(self.p999_write_us),
            n(self.stall_us)
        );
        for v in self.stall_kind_us {
            let _ = write!(s, ",{}", n(v));
        }
        let _ = write!(
            s,
            ",{},{},{},{},{},{},{},{},{},{},{},{}",
            clean(&self.stall_kinds),
            n(self.user_bytes),
            n(self.engine_write_bytes),
            n(self.sst_write_bytes),
            n(self.device_write_bytes),
            n(self.levels),
            n(self.peak_memory_bytes),
            n(self.peak_rss_bytes),
            clean(&self.tuner),
            clean(&self.timeline),
            clean(&self.status),
            clean(&self.log)
        );
        let _ = write!(s, ",{},{}", n(self.p50_write_us), n(self.max_write_us));
        for v in self.read_us {
            let _ = write!(s, ",{}", n(v));
        }
        s
    }
}

/// Parses runs.csv by its header's column names.
///
/// # Errors
/// A missing column, or a repeat that is not a number.
pub fn parse_csv(text: &str) -> Result<Vec<Row>, Error> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<&str> = lines.next().ok_or("runs.csv is empty")?.split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| h.trim() == name)
            .ok_or_else(|| format!("runs.csv has no {name} column"))
    };
    let names: Vec<&str> = HEADER.split(',').collect();
    // A later column missing from an older file reads past every row's end: empty.
    let idx: Vec<usize> = names
        .iter()
        .map(|n| if LATER_COLUMNS.contains(n) { col(n).or(Ok(usize::MAX)) } else { col(n) })
        .collect::<Result<_, String>>()?;
    let mut rows = Vec::new();
    for line in lines {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        let get = |name: &str| {
            let i = names.iter().position(|n| *n == name).expect("a column of HEADER");
            f.get(idx[i]).copied().unwrap_or("")
        };
        let num = |name: &str| get(name).parse::<f64>().ok().filter(|v| v.is_finite());
        rows.push(Row {
            engine: get("engine").into(),
            config: get("config").into(),
            device: get("device").into(),
            device_bps: num("device_bps"),
            workload: get("workload").into(),
            repeat: get("repeat").parse().map_err(|_| format!("repeat in {line:?}"))?,
            ops_per_sec: num("ops_per_sec"),
            operations: num("operations"),
            seconds: num("seconds"),
            p99_write_us: num("p99_write_us"),
            p999_write_us: num("p999_write_us"),
            p50_write_us: num("p50_write_us"),
            max_write_us: num("max_write_us"),
            read_us: ["p50_read_us", "p99_read_us", "p999_read_us", "max_read_us"].map(num),
            stall_us: num("stall_us"),
            stall_kind_us: KINDS.map(|k| num(&format!("stall_{k}_us"))),
            stall_kinds: get("stall_kinds").into(),
            user_bytes: num("user_bytes"),
            engine_write_bytes: num("engine_write_bytes"),
            sst_write_bytes: num("sst_write_bytes"),
            device_write_bytes: num("device_write_bytes"),
            levels: num("levels"),
            peak_memory_bytes: num("peak_memory_bytes"),
            peak_rss_bytes: num("peak_rss_bytes"),
            tuner: get("tuner").into(),
            timeline: get("timeline").into(),
            status: get("status").into(),
            log: get("log").into(),
        });
    }
    Ok(rows)
}

/// One operation's figures in a YCSB report.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OpFigures {
    pub operations: u64,
    pub p99_us: Option<f64>,
    pub p999_us: Option<f64>,
    /// From the phase's tail line, where the report has one.
    pub p50_us: Option<f64>,
    pub max_us: Option<f64>,
}

/// One YCSB phase's report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct YcsbPhase {
    pub throughput: Option<f64>,
    pub runtime_ms: Option<f64>,
    /// By operation name.
    pub ops: BTreeMap<String, OpFigures>,
}

impl YcsbPhase {
    /// The phase's write operation: INSERT or UPDATE, whichever it did more of.
    pub fn write_op(&self) -> Option<(&str, OpFigures)> {
        ["INSERT", "UPDATE"]
            .into_iter()
            .filter_map(|name| self.ops.get(name).map(|v| (name, *v)))
            .filter(|(_, v)| v.operations > 0)
            .max_by_key(|(_, v)| v.operations)
    }

    /// Records written: INSERT and UPDATE operations.
    pub fn records_written(&self) -> u64 {
        ["INSERT", "UPDATE"].iter().filter_map(|n| self.ops.get(*n)).map(|v| v.operations).sum()
    }

    pub fn operations(&self) -> u64 {
        self.ops.values().map(|v| v.operations).sum()
    }
}

/// Parses the YCSB report of a one-phase process (`[OP], metric, value` lines).
pub fn parse_ycsb(text: &str) -> YcsbPhase {
    let mut p = YcsbPhase::default();
    for line in text.lines() {
        if let Some(t) = ycsb::latency::TailLine::parse(line) {
            if t.op.ends_with("-FAILED") {
                continue;
            }
            let e = p.ops.entry(t.op).or_default();
            (e.p50_us, e.max_us) = (Some(t.p50_us), Some(t.max_us));
            continue;
        }
        let parts: Vec<&str> = line.splitn(3, ", ").collect();
        let [section, metric, value] = parts[..] else { continue };
        let Some(op) = section.strip_prefix('[').and_then(|s| s.strip_suffix(']')) else {
            continue;
        };
        let v = value.trim().parse::<f64>().ok();
        if op == "OVERALL" {
            match metric {
                "Throughput(ops/sec)" => p.throughput = v,
                "RunTime(ms)" => p.runtime_ms = v,
                _ => {}
            }
            continue;
        }
        if op.ends_with("-FAILED") {
            continue;
        }
        let e = p.ops.entry(op.to_string()).or_default();
        match metric {
            "Operations" => e.operations = v.map_or(0, |x| x as u64),
            "99thPercentileLatency(us)" => e.p99_us = v,
            "99.9PercentileLatency(us)" => e.p999_us = v,
            _ => {}
        }
    }
    p
}

/// shale's stall micros by kind from `--statistics` counters, where it prints them; the
/// pending kinds' counters are named as the memtable and L0 ones are.
fn shale_stall_counters(c: &BTreeMap<String, u64>) -> Option<[Option<f64>; 5]> {
    let names = [
        "shale.stall.memtable.micros",
        "shale.stall.l0.slowdown.micros",
        "shale.stall.l0.stop.micros",
        "shale.stall.pending.slowdown.micros",
        "shale.stall.pending.stop.micros",
    ];
    let v = names.map(|n| c.get(n).map(|v| *v as f64));
    v.iter().any(Option::is_some).then_some(v)
}

/// Path `p` relative to `base` where it lies under it.
fn relative(p: &Path, base: &Path) -> String {
    p.strip_prefix(base).unwrap_or(p).display().to_string()
}

fn read(p: &Path) -> Result<String, Error> {
    std::fs::read_to_string(p).map_err(|e| format!("reading {}: {e}", p.display()).into())
}

fn with_suffix(prefix: &Path, suffix: &str) -> PathBuf {
    let mut s = prefix.as_os_str().to_os_string();
    s.push(suffix);
    PathBuf::from(s)
}

/// Builds the row of one process (and, for RocksDB's fillrandom, writes its series).
///
/// # Errors
/// Output files that cannot be read, a series that cannot be written.
pub fn build(a: &Args) -> Result<Row, Error> {
    let base = a.csv.parent().unwrap_or(Path::new("")).to_path_buf();
    let stdout = read(&with_suffix(&a.output, ".stdout")).unwrap_or_default();
    let stderr = read(&with_suffix(&a.output, ".stderr")).unwrap_or_default();
    let counters = parse::statistics(&stdout);
    let shale = a.engine == "shale";
    let mut row = Row {
        engine: a.engine.clone(),
        config: a.config.clone(),
        device: a.device.clone(),
        device_bps: Some(a.device_bps as f64).filter(|v| *v > 0.0),
        workload: a.workload.clone(),
        repeat: a.repeat,
        device_write_bytes: a.device_bytes.map(|v| v as f64),
        peak_memory_bytes: a.peak_memory.map(|v| v as f64),
        peak_rss_bytes: a.peak_rss.map(|v| v as f64),
        status: a.status.clone(),
        log: relative(&a.output, &base),
        ..Default::default()
    };
    if a.workload.starts_with("ycsb-") {
        let p = parse_ycsb(&stdout);
        row.ops_per_sec = p.throughput;
        row.seconds = p.runtime_ms.map(|ms| ms / 1000.0);
        row.operations = Some(p.operations() as f64).filter(|v| *v > 0.0);
        if let Some((_, w)) = p.write_op() {
            row.p99_write_us = w.p99_us;
            row.p999_write_us = w.p999_us;
            row.p50_write_us = w.p50_us;
            row.max_write_us = w.max_us;
        }
        if let Some(r) = p.ops.get("READ").filter(|r| r.operations > 0) {
            row.read_us = [r.p50_us, r.p99_us, r.p999_us, r.max_us];
        }
        let written = p.records_written() * crate::ycsb_suite::record_bytes();
        row.user_bytes = Some(written as f64).filter(|v| *v > 0.0);
        if shale {
            if let Some(kinds) = shale_stall_counters(&counters) {
                row.stall_kind_us = kinds;
                row.stall_us = Some(kinds.iter().flatten().sum());
                row.stall_kinds = "exact".into();
            }
        } else if let Some(us) = counters.get("rocksdb.stall.micros") {
            row.stall_us = Some(*us as f64);
            row.stall_kinds = "total only".into();
            row.engine_write_bytes =
                dbbench::device_bytes(Engine::RocksBuffered, &counters).map(|v| v as f64);
        }
        if row.ok() && row.ops_per_sec.is_none() {
            row.status = "failed (no YCSB report)".into();
        }
        return Ok(row);
    }
    // A db_bench-style write benchmark.
    let result = parse::result_lines(&stdout).into_iter().rev().find(|r| r.name == a.workload);
    if let Some(r) = &result {
        row.ops_per_sec = Some(r.ops_per_sec);
        row.operations = Some(r.operations as f64);
        row.seconds = Some(r.seconds);
        row.user_bytes = Some((r.operations * (a.key_size + a.value_size)) as f64);
    }
    if let Some(p) = parse::percentiles_by_benchmark(&stdout).get(&a.workload) {
        row.p99_write_us = Some(p.p99);
        row.p999_write_us = Some(p.p99_9);
        row.p50_write_us = Some(p.p50);
        row.max_write_us = Some(p.max).filter(|m| *m > 0.0);
    }
    let engine = if shale { Engine::Shale } else { Engine::RocksBuffered };
    row.engine_write_bytes = dbbench::device_bytes(engine, &counters).map(|v| v as f64);
    row.sst_write_bytes = if shale {
        counters.get("shale.sst.bytes.written").map(|v| *v as f64)
    } else {
        ["rocksdb.flush.write.bytes", "rocksdb.compact.write.bytes"]
            .iter()
            .map(|n| counters.get(*n).copied())
            .sum::<Option<u64>>()
            .map(|v| v as f64)
    };
    let series: Option<Vec<Second>> = if shale {
        match &a.timeline {
            Some(t) if t.exists() => Some(adoc_series::parse_csv(&read(t)?)?),
            _ => None,
        }
    } else {
        let log = a.log.as_ref().map(|l| read(l)).transpose()?.unwrap_or_default();
        let dumps = adoc_series::rocksdb_dumps(&log);
        row.levels = dumps.last().map(|d| d.levels as f64).filter(|v| *v > 0.0);
        let rows = adoc_series::rocksdb_series(&RocksRun {
            stderr: &stderr,
            log: &log,
            final_stall_us: counters.get("rocksdb.stall.micros").copied(),
            background_jobs: a.background_jobs,
            write_buffer_bytes: a.write_buffer_size,
            result: result.as_ref().map(|r| (r.operations, r.seconds)),
        });
        match &a.timeline {
            Some(t) if !rows.is_empty() => {
                std::fs::write(t, adoc_series::to_csv(&rows))
                    .map_err(|e| format!("writing {}: {e}", t.display()))?;
                Some(rows)
            }
            _ => None,
        }
    };
    if let Some(rows) = &series {
        let t = adoc_series::totals(rows);
        row.stall_kind_us = t.stall_us.map(Some);
        row.stall_us = Some(t.stall_total_us);
        row.stall_kinds = if shale { "exact" } else { "estimated" }.into();
        row.timeline = a.timeline.as_deref().map(|t| relative(t, &base)).unwrap_or_default();
        if shale {
            row.tuner = adoc_series::OVERFLOWS
                .iter()
                .zip(t.tuner_seconds)
                .map(|(o, n)| format!("{o}:{n}"))
                .collect::<Vec<_>>()
                .join(" ");
        }
    } else if shale {
        if let Some(kinds) = shale_stall_counters(&counters) {
            row.stall_kind_us = kinds;
            row.stall_us = Some(kinds.iter().flatten().sum());
            row.stall_kinds = "exact".into();
        }
    } else if let Some(us) = counters.get("rocksdb.stall.micros") {
        row.stall_us = Some(*us as f64);
        row.stall_kinds = "total only".into();
    }
    if row.ok() && result.is_none() {
        row.status = format!("failed (no {} result line)", a.workload);
    }
    Ok(row)
}

/// Appends the row of one process to runs.csv and prints it.
///
/// # Errors
/// As [`build`]; runs.csv cannot be written.
pub fn run(a: &Args) -> Result<(), Error> {
    let row = build(a)?;
    let mut text = match std::fs::read_to_string(&a.csv) {
        Ok(t) => t,
        Err(_) => format!("{HEADER}\n"),
    };
    text.push_str(&row.to_csv());
    text.push('\n');
    std::fs::write(&a.csv, text).map_err(|e| format!("writing {}: {e}", a.csv.display()))?;
    println!("{}", row.to_csv());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const STDOUT: &str = include_str!("adoc_testdata/db_bench-fillrandom.stdout");
    const STDERR: &str = include_str!("adoc_testdata/db_bench-fillrandom.stderr");
    const LOG: &str = include_str!("adoc_testdata/db_bench-fillrandom.LOG");

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("shale-adoc-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("raw")).unwrap();
        d
    }

    fn args(d: &Path, engine: &str, workload: &str) -> Args {
        Args {
            csv: d.join("runs.csv"),
            engine: engine.into(),
            config: format!("{engine}-x"),
            device: "sata".into(),
            device_bps: 367_500_000,
            workload: workload.into(),
            repeat: 1,
            output: d.join("raw/run"),
            log: None,
            timeline: None,
            background_jobs: Some(2),
            write_buffer_size: Some(4 << 20),
            key_size: 16,
            value_size: 1000,
            peak_memory: Some(1 << 30),
            peak_rss: None,
            device_bytes: Some(3 << 30),
            status: "ok".into(),
        }
    }

    #[test]
    fn a_rocksdb_fillrandom_row_and_its_series() {
        let d = dir("rocks");
        std::fs::write(d.join("raw/run.stdout"), STDOUT).unwrap();
        std::fs::write(d.join("raw/run.stderr"), STDERR).unwrap();
        std::fs::write(d.join("raw/run.LOG"), LOG).unwrap();
        let mut a = args(&d, "rocksdb", "fillrandom");
        a.log = Some(d.join("raw/run.LOG"));
        a.timeline = Some(d.join("raw/run.timeline.csv"));
        run(&a).unwrap();
        run(&a).unwrap();
        let rows = parse_csv(&std::fs::read_to_string(d.join("runs.csv")).unwrap()).unwrap();
        assert_eq!(rows.len(), 2, "appended under one header");
        let r = &rows[0];
        assert_eq!(r.ops_per_sec, Some(73898.0));
        assert_eq!(r.operations, Some(369_999.0));
        assert_eq!((r.p99_write_us, r.p999_write_us), (Some(17.70), Some(2282.61)));
        assert_eq!((r.p50_write_us, r.max_write_us), (Some(2.10), Some(30121.0)));
        assert_eq!(r.stall_us, Some(2_958_541.0));
        assert_eq!(r.stall_kinds, "estimated");
        assert_eq!(r.levels, Some(3.0), "L1, L2 and L3 at the end, L0 empty");
        assert_eq!(r.user_bytes, Some(369_999.0 * 1016.0));
        // WAL + flush + compaction over key + value bytes.
        let wa = r.write_amp().unwrap();
        let expect = (381_838_968.0 + 376_835_844.0 + 1_816_249_055.0) / (369_999.0 * 1016.0);
        assert!((wa - expect).abs() < 1e-3, "{wa}");
        assert!(r.write_amp_sst().unwrap() < wa);
        assert_eq!(r.timeline, "raw/run.timeline.csv");
        assert_eq!(r.log, "raw/run");
        let series =
            adoc_series::parse_csv(&std::fs::read_to_string(d.join(&r.timeline)).unwrap()).unwrap();
        assert_eq!(series.len(), 5);
        assert_eq!(rows[1], rows[0]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_shale_fillrandom_row_from_its_timeline() {
        let d = dir("shale");
        std::fs::write(
            d.join("raw/run.stdout"),
            "fillrandom   :       9.325 micros/op 107212 ops/sec 2.000 seconds 214424 operations;  104.0 MB/s\n\
             Microseconds per write:\n\
             Percentiles: P50: 7.38 P75: 8.83 P99: 17.97 P99.9: 223.33 P99.99: 3650.00\n\
             shale.bytes.written COUNT : 217854784\nshale.wal.bytes COUNT : 220000000\n\
             shale.sst.bytes.written COUNT : 400000000\nshale.version.log.bytes COUNT : 4096\n",
        )
        .unwrap();
        std::fs::write(d.join("raw/run.stderr"), "").unwrap();
        std::fs::write(
            d.join("raw/run.timeline.csv"),
            format!(
                "{}\n1,107000,41.0,2,67108864,2,0,0,1,1000,0,0,0,0,0,0,0,0,\n\
                 2,107424,50.0,4,67108864,1,2,0,0,0,2,3000,0,0,0,0,0,0,L0O\n",
                adoc_series::SHALE_HEADER
            ),
        )
        .unwrap();
        let mut a = args(&d, "shale", "fillrandom");
        a.timeline = Some(d.join("raw/run.timeline.csv"));
        let r = build(&a).unwrap();
        assert_eq!(r.stall_us, Some(4000.0));
        assert_eq!(r.stall_kind_us[1], Some(3000.0));
        assert_eq!(r.stall_kinds, "exact");
        assert_eq!(r.tuner, "L0O:1 RDO:0 MMO:0");
        assert_eq!(r.sst_write_bytes, Some(400_000_000.0));
        assert_eq!(r.p999_write_us, Some(223.33));
        // No result line: the run failed, whatever its exit status.
        std::fs::write(d.join("raw/run.stdout"), "").unwrap();
        assert_eq!(build(&a).unwrap().status, "failed (no fillrandom result line)");
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// Real output of `shale bench --tuner=adoc --timeline` (see adoc_testdata/README.md): the
    /// timeline's stalls add up to the statistics' counters.
    #[test]
    fn a_real_shale_run() {
        let d = dir("shale-real");
        std::fs::write(
            d.join("raw/run.stdout"),
            include_str!("adoc_testdata/shale-fillrandom.stdout"),
        )
        .unwrap();
        std::fs::write(d.join("raw/run.stderr"), "").unwrap();
        std::fs::write(
            d.join("raw/run.timeline.csv"),
            include_str!("adoc_testdata/shale-fillrandom.timeline.csv"),
        )
        .unwrap();
        let mut a = args(&d, "shale", "fillrandom");
        a.timeline = Some(d.join("raw/run.timeline.csv"));
        let r = build(&a).unwrap();
        let c = parse::statistics(include_str!("adoc_testdata/shale-fillrandom.stdout"));
        assert_eq!(r.stall_kind_us[0], Some(c["shale.stall.memtable.micros"] as f64));
        assert_eq!(r.stall_kind_us[1], Some(c["shale.stall.l0.slowdown.micros"] as f64));
        assert_eq!(r.stall_us, Some(789_910.0 + 300_856.0));
        assert_eq!(r.tuner, "L0O:2 RDO:0 MMO:2");
        assert_eq!((r.ops_per_sec, r.p999_write_us), (Some(148_008.0), Some(666.28)));
        assert_eq!((r.p50_write_us, r.max_write_us), (Some(1.76), Some(121_173.0)));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn ycsb_phases() {
        let text = "# run, workload a\n[OVERALL], RunTime(ms), 2000\n\
            [OVERALL], Throughput(ops/sec), 50000.5\n[READ], Operations, 50000\n\
            [READ], 99thPercentileLatency(us), 30\n[READ], 99.9PercentileLatency(us), 90\n\
            [UPDATE], Operations, 50000\n[UPDATE], 99thPercentileLatency(us), 40\n\
            [UPDATE], 99.9PercentileLatency(us), 400\n[UPDATE-FAILED], Operations, 3\n\
            run          READ latency micros : p50 3.000 p99 30.100 p99.9 90.200 max 95.000 ops 50000\n\
            run          UPDATE latency micros : p50 5.500 p99 40.100 p99.9 400.300 max 900.000 ops 50000\n\
            run          UPDATE-FAILED latency micros : p50 1.000 p99 1.000 p99.9 1.000 max 1.000 ops 3\n\
            rocksdb.stall.micros COUNT : 1234\n";
        let p = parse_ycsb(text);
        assert_eq!(p.throughput, Some(50000.5));
        assert_eq!(p.write_op().map(|(n, _)| n), Some("UPDATE"));
        assert_eq!(p.records_written(), 50000);
        assert_eq!(p.operations(), 100_000);
        assert!(parse_ycsb("[READ], Operations, 10\n").write_op().is_none());
        let d = dir("ycsb");
        std::fs::write(d.join("raw/run.stdout"), text).unwrap();
        let r = build(&args(&d, "rocksdb", "ycsb-A")).unwrap();
        assert_eq!((r.p99_write_us, r.p999_write_us), (Some(40.0), Some(400.0)));
        assert_eq!((r.p50_write_us, r.max_write_us), (Some(5.5), Some(900.0)));
        assert_eq!(r.read_us, [Some(3.0), Some(30.0), Some(90.0), Some(95.0)]);
        assert_eq!(r.stall_us, Some(1234.0));
        assert_eq!(r.stall_kinds, "total only");
        assert_eq!(r.user_bytes, Some(50000.0 * 1140.0));
        assert_eq!(r.seconds, Some(2.0));
        let csv = format!("{HEADER}\n{}\n", r.to_csv());
        assert_eq!(parse_csv(&csv).unwrap()[0], r);
        // A runs.csv from before the tail columns: its rows read them as empty.
        let old_header = HEADER
            .strip_suffix(
                ",p50_write_us,max_write_us,p50_read_us,p99_read_us,p999_read_us,max_read_us",
            )
            .unwrap();
        let old_row = r.to_csv();
        let old_row = old_row.rsplitn(7, ',').nth(6).unwrap();
        let old = parse_csv(&format!("{old_header}\n{old_row}\n")).unwrap();
        assert_eq!(
            (old[0].p50_write_us, old[0].max_write_us, old[0].p99_write_us),
            (None, None, Some(40.0))
        );
        assert_eq!(old[0].read_us, [None; 4]);
        // A load reads nothing: no read figures.
        std::fs::write(
            d.join("raw/run.stdout"),
            "[OVERALL], Throughput(ops/sec), 9.0\n[INSERT], Operations, 9\n",
        )
        .unwrap();
        assert_eq!(build(&args(&d, "shale", "ycsb-load")).unwrap().read_us, [None; 4]);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
