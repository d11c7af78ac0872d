//! `shale-compare adoc-summary`: the tables and charts of bench/adoc.sh (issue #10, part 4)
//! from its runs.csv ([`crate::adoc_record`]): per device, each configuration's throughput,
//! stall time by kind, p50, p99, p99.9 and max write latency, write amplification and peak memory
//! (medians over repeats); the targets with a verdict each; and the charts
//! ([`crate::adoc_chart`]) of every fillrandom run and of every device's runs side by side.
//!
//! The targets, per device and workload, for shale with the tuner (`shale-adoc`):
//! - stall time at most 20% of RocksDB's with the auto-tuned rate limiter (`rocksdb-ratelimit`);
//! - throughput at least 1.3x that of the best RocksDB configuration of the point;
//! - more throughput and less stall time than shale with the tuner off (`shale-off`): strictly
//!   more and less, except that no stall time on both sides is no loss;
//! - peak memory no higher than RocksDB's large fixed setting (`rocksdb-large`).
//!
//! A figure a run did not give (a configuration not run, a failed process, a YCSB phase whose
//! engine printed no stall counters) makes its target `n/a`, never met.

use std::path::{Path, PathBuf};

use crate::Error;
use crate::adoc_chart::{self, RunChart, Scales};
use crate::adoc_record::{Row, parse_csv};
use crate::adoc_series::{self, KIND_TITLES, Second};
use crate::summary::{median_of, ratio};
use crate::table::{self, Table};

/// The configurations, in the order the tables show them, with what each is.
pub const CONFIGS: [(&str, &str); 7] = [
    ("rocksdb-default", "RocksDB 11.8.1, its defaults: 2 background jobs, 64 MiB memtable"),
    (
        "rocksdb-ratelimit",
        "RocksDB, defaults plus its auto-tuned rate limiter at the device's bandwidth",
    ),
    ("rocksdb-large", "RocksDB, large fixed setting like SILK-O's: 8 jobs, 512 MiB memtable"),
    ("shale-off", "shale at its defaults, tuner off"),
    ("shale-adoc-t", "shale, ADOC-T: the tuner turns threads only"),
    ("shale-adoc-b", "shale, ADOC-B: the tuner turns the batch (memtable size) only"),
    ("shale-adoc", "shale, ADOC: threads and batch"),
];

/// Arguments of `shale-compare adoc-summary`.
#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// The runs.csv bench/adoc.sh writes.
    #[arg(long)]
    pub csv: PathBuf,
    /// Where the SVG charts go (default: charts/ beside the CSV); none with --no-charts.
    #[arg(long)]
    pub charts: Option<PathBuf>,
    #[arg(long)]
    pub no_charts: bool,
}

/// The successful runs of one point and configuration.
fn runs<'a>(
    rows: &'a [Row],
    device: &'a str,
    workload: &'a str,
    config: &'a str,
) -> impl Iterator<Item = &'a Row> {
    rows.iter().filter(move |r| {
        r.ok() && r.device == device && r.workload == workload && r.config == config
    })
}

/// The median of `f` over those runs.
fn med(
    rows: &[Row],
    device: &str,
    workload: &str,
    config: &str,
    f: impl Fn(&Row) -> Option<f64>,
) -> Option<f64> {
    median_of(runs(rows, device, workload, config).map(f))
}

/// Distinct values of `f` in order of first appearance.
fn distinct(rows: &[Row], f: impl Fn(&Row) -> &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rows {
        if !out.iter().any(|x| x == f(r)) {
            out.push(f(r).to_string());
        }
    }
    out
}

/// The configurations present, in [`CONFIGS`] order, then any others.
fn configs(rows: &[Row]) -> Vec<String> {
    let mut out: Vec<String> = CONFIGS
        .iter()
        .map(|c| c.0.to_string())
        .filter(|c| rows.iter().any(|r| &r.config == c))
        .collect();
    for c in distinct(rows, |r| &r.config) {
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

fn seconds(us: Option<f64>) -> String {
    us.map_or("-".into(), |v| format!("{:.1}", v / 1e6))
}

fn mib(bytes: Option<f64>) -> String {
    bytes.map_or("-".into(), |b| format!("{:.0}", b / 1_048_576.0))
}

/// The device's heading: `hdd, 158 MB/s`.
fn device_title(rows: &[Row], device: &str) -> String {
    match rows.iter().find(|r| r.device == device).and_then(|r| r.device_bps) {
        Some(bps) => format!("{device}, {:.0} MB/s", bps / 1e6),
        None => device.to_string(),
    }
}

/// A write benchmark's table for one device: one row per configuration.
fn write_table(
    rows: &[Row],
    device: &str,
    workload: &str,
    chart: &dyn Fn(&str) -> String,
) -> Table {
    let mut headers = vec!["configuration", "ops/s", "stall s"];
    let kinds: Vec<String> = KIND_TITLES.iter().map(|k| format!("{k} s")).collect();
    headers.extend(kinds.iter().map(String::as_str));
    headers.extend([
        "p50 write us",
        "p99 write us",
        "p99.9 write us",
        "max write us",
        "WA",
        "WA SST",
        "WA device",
        "peak memory MiB",
        "peak RSS MiB",
        "levels",
        "tuner seconds",
        "chart",
    ]);
    let mut t = Table::new(&headers);
    for c in configs(rows) {
        let here: Vec<&Row> = runs(rows, device, workload, &c).collect();
        if here.is_empty() {
            continue;
        }
        let m = |f: &dyn Fn(&Row) -> Option<f64>| med(rows, device, workload, &c, f);
        let estimated = here.iter().any(|r| r.stall_kinds == "estimated");
        let mut cells =
            vec![c.clone(), table::count(m(&|r| r.ops_per_sec)), seconds(m(&|r| r.stall_us))];
        for k in 0..KIND_TITLES.len() {
            let v = seconds(m(&|r| r.stall_kind_us[k]));
            cells.push(if estimated && v != "-" { format!("~{v}") } else { v });
        }
        cells.extend([
            table::fixed(m(&|r| r.p50_write_us), 1),
            table::fixed(m(&|r| r.p99_write_us), 1),
            table::fixed(m(&|r| r.p999_write_us), 1),
            table::fixed(m(&|r| r.max_write_us), 0),
            table::fixed(m(&Row::write_amp), 2),
            table::fixed(m(&Row::write_amp_sst), 2),
            table::fixed(m(&Row::write_amp_device), 2),
            mib(m(&|r| r.peak_memory_bytes)),
            mib(m(&|r| r.peak_rss_bytes)),
            table::fixed(m(&|r| r.levels), 0),
            here.first().map_or(String::new(), |r| r.tuner.clone()),
            chart(&c),
        ]);
        t.row(cells);
    }
    t
}

/// A YCSB device's tables: throughput, the writes' and the reads' latency, stall time, write
/// amplification by the device and peak memory, each a row per configuration and a column per
/// phase.
fn ycsb_tables(rows: &[Row], device: &str) -> String {
    let phases: Vec<String> = distinct(rows, |r| &r.workload)
        .into_iter()
        .filter(|w| {
            w.starts_with("ycsb-") && rows.iter().any(|r| &r.workload == w && r.device == device)
        })
        .collect();
    let names: Vec<String> =
        phases.iter().map(|p| p.trim_start_matches("ycsb-").to_string()).collect();
    let table_of = |what: &str, cell: &dyn Fn(&str, &str) -> String| {
        let mut headers = vec!["configuration".to_string()];
        headers.extend(names.iter().cloned());
        let h: Vec<&str> = headers.iter().map(String::as_str).collect();
        let mut t = Table::new(&h);
        for c in configs(rows) {
            if !phases.iter().any(|p| runs(rows, device, p, &c).next().is_some()) {
                continue;
            }
            let mut cells = vec![c.clone()];
            cells.extend(phases.iter().map(|p| cell(&c, p)));
            t.row(cells);
        }
        format!("\n{what}\n\n{}", t.to_markdown())
    };
    let mut out = String::new();
    out.push_str(&table_of("Throughput, ops/s:", &|c, p| {
        table::count(med(rows, device, p, c, |r| r.ops_per_sec))
    }));
    // Each figure's median over the repeats, as "p50 / p99 / p99.9 / max"; "-" where the
    // phase had none of the operations.
    let tail = |c: &str, p: &str, figures: [fn(&Row) -> Option<f64>; 4]| {
        let v: Vec<Option<f64>> = figures.iter().map(|f| med(rows, device, p, c, f)).collect();
        if v.iter().all(Option::is_none) {
            "-".to_string()
        } else {
            v.iter().map(|x| table::fixed(*x, 0)).collect::<Vec<_>>().join(" / ")
        }
    };
    out.push_str(&table_of(
        "p50 / p99 / p99.9 / max latency of the phase's writes (INSERT or UPDATE), us:",
        &|c, p| {
            tail(
                c,
                p,
                [|r| r.p50_write_us, |r| r.p99_write_us, |r| r.p999_write_us, |r| r.max_write_us],
            )
        },
    ));
    out.push_str(&table_of(
        "p50 / p99 / p99.9 / max latency of the phase's reads (READ), us:",
        &|c, p| {
            tail(c, p, [|r| r.read_us[0], |r| r.read_us[1], |r| r.read_us[2], |r| r.read_us[3]])
        },
    ));
    out.push_str(&table_of(
        "Stall time, s (RocksDB: `rocksdb.stall.micros`; shale: its stall counters where `shale \
         ycsb` prints them, else -):",
        &|c, p| seconds(med(rows, device, p, c, |r| r.stall_us)),
    ));
    out.push_str(&table_of(
        "Write amplification, the kernel's count of device writes over 1140 bytes per record \
         written:",
        &|c, p| table::fixed(med(rows, device, p, c, Row::write_amp_device), 2),
    ));
    out.push_str(&table_of("Peak memory (RSS + page cache), MiB:", &|c, p| {
        mib(med(rows, device, p, c, |r| r.peak_memory_bytes))
    }));
    out
}

/// One target's verdict on two figures.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Rule {
    /// shale / peer at least this.
    AtLeast(f64),
    /// shale / peer at most this.
    AtMost(f64),
    /// shale strictly above the peer.
    Above,
    /// shale strictly below the peer, or both zero.
    Below,
}

impl Rule {
    fn label(self) -> String {
        match self {
            Rule::AtLeast(r) => format!(">= {}x", crate::summary::trim_float(r)),
            Rule::AtMost(r) => format!("<= {}x", crate::summary::trim_float(r)),
            Rule::Above => "> 1x".into(),
            Rule::Below => "< 1x".into(),
        }
    }

    /// The verdict: `met`, `**MISSED**`, or `n/a` when a figure is missing.
    fn verdict(self, shale: Option<f64>, peer: Option<f64>) -> String {
        let (Some(s), Some(p)) = (shale, peer) else { return "n/a (no figure)".into() };
        let met = match self {
            Rule::AtLeast(r) => p > 0.0 && s / p >= r,
            // A peer without stalls: only none at all meets a fraction of it.
            Rule::AtMost(r) => {
                if p > 0.0 {
                    s / p <= r
                } else {
                    s <= 0.0
                }
            }
            Rule::Above => s > p,
            Rule::Below => s < p || (s == 0.0 && p == 0.0),
        };
        if met { "met".into() } else { "**MISSED**".into() }
    }
}

/// A figure of a run.
type Figure = fn(&Row) -> Option<f64>;

/// The targets of one point.
fn targets(rows: &[Row], device: &str, workload: &str, t: &mut Table) {
    let m = |config: &str, f: Figure| med(rows, device, workload, config, f);
    let ops = |r: &Row| r.ops_per_sec;
    let stall = |r: &Row| r.stall_us;
    let memory = |r: &Row| r.peak_memory_bytes;
    // The best RocksDB configuration of the point by median throughput.
    let best = CONFIGS
        .iter()
        .filter(|c| c.0.starts_with("rocksdb-"))
        .filter_map(|c| m(c.0, ops).map(|v| (c.0, v)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let specs: [(&str, &str, Figure, Rule, &str); 5] = [
        (
            "stall time <= 20% of RocksDB with the auto-tuned rate limiter",
            "rocksdb-ratelimit",
            stall,
            Rule::AtMost(0.2),
            "s",
        ),
        (
            "throughput >= 1.3x the best RocksDB configuration",
            best.map_or("rocksdb-*", |b| b.0),
            ops,
            Rule::AtLeast(1.3),
            "ops/s",
        ),
        ("the tuner beats tuner-off on throughput", "shale-off", ops, Rule::Above, "ops/s"),
        ("the tuner beats tuner-off on stall time", "shale-off", stall, Rule::Below, "s"),
        (
            "peak memory no higher than RocksDB's large fixed setting",
            "rocksdb-large",
            memory,
            Rule::AtMost(1.0),
            "MiB",
        ),
    ];
    for (what, peer, f, rule, unit) in specs {
        let shale = m("shale-adoc", f);
        let other = if peer == "rocksdb-*" { None } else { m(peer, f) };
        let show = |v: Option<f64>| match unit {
            "s" => seconds(v),
            "MiB" => mib(v),
            _ => table::count(v),
        };
        t.row(vec![
            device.to_string(),
            workload.to_string(),
            what.to_string(),
            peer.to_string(),
            show(shale),
            show(other),
            table::ratio(ratio(shale, other)),
            rule.label(),
            rule.verdict(shale, other),
        ]);
    }
}

/// One run's lines of figures: a compact one (for the side-by-side chart) and a fuller one.
fn totals_lines(r: &Row) -> Vec<String> {
    let f0 = |v: Option<f64>| table::fixed(v, 0);
    let mut kinds = Vec::new();
    for (k, title) in KIND_TITLES.iter().enumerate() {
        if let Some(v) = r.stall_kind_us[k].filter(|v| *v > 0.0) {
            kinds.push(format!("{title} {:.1}", v / 1e6));
        }
    }
    let est = if r.stall_kinds == "estimated" { ", kinds estimated" } else { "" };
    vec![
        format!(
            "{} ops/s, stall {} s, p50 {} us, p99 {} us, p99.9 {} us, max {} us, WA {}, peak {} MiB",
            table::count(r.ops_per_sec),
            seconds(r.stall_us),
            f0(r.p50_write_us),
            f0(r.p99_write_us),
            f0(r.p999_write_us),
            f0(r.max_write_us),
            table::fixed(r.write_amp(), 2),
            mib(r.peak_memory_bytes)
        ),
        format!(
            "stall by kind, s: {}{est}",
            if kinds.is_empty() { "none".into() } else { kinds.join(", ") }
        ),
        format!(
            "write amplification {} (SST {}, device {}); peak memory {} MiB (RSS {} MiB){}",
            table::fixed(r.write_amp(), 2),
            table::fixed(r.write_amp_sst(), 2),
            table::fixed(r.write_amp_device(), 2),
            mib(r.peak_memory_bytes),
            mib(r.peak_rss_bytes),
            if r.tuner.is_empty() {
                String::new()
            } else {
                format!("; tuner's last answer, seconds: {}", r.tuner)
            }
        ),
    ]
}

/// The series with no throughput in a last second the run did not fill (shale's timeline has
/// a row for the fraction of a second before the benchmark ended, whose few operations would
/// read as a dip; RocksDB's series leaves such a second out); its stalls stay.
fn drop_partial_second(mut rows: Vec<Second>, run_seconds: Option<f64>) -> Vec<Second> {
    if let Some(end) = run_seconds {
        for r in &mut rows {
            if r.second as f64 > end.floor() {
                r.ops = None;
                r.p99_write_us = None;
            }
        }
    }
    rows
}

/// A chart's file name for a point, or a run of it.
fn chart_name(device: &str, workload: &str, run: Option<&Row>) -> String {
    match run {
        Some(r) => format!("{device}-{workload}-{}-r{}.svg", r.config, r.repeat),
        None => format!("{device}-{workload}.svg"),
    }
}

/// Writes the charts of the write benchmarks' points into `dir`.
///
/// # Errors
/// A series or a chart that cannot be read or written.
fn write_charts(rows: &[Row], base: &Path, dir: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    for device in distinct(rows, |r| &r.device) {
        for workload in distinct(rows, |r| &r.workload) {
            let here: Vec<&Row> = rows
                .iter()
                .filter(|r| {
                    r.ok() && r.device == device && r.workload == workload && !r.timeline.is_empty()
                })
                .collect();
            if here.is_empty() {
                continue;
            }
            let mut series: Vec<(&Row, Vec<Second>)> = Vec::new();
            for r in here {
                let p = base.join(&r.timeline);
                let text = std::fs::read_to_string(&p)
                    .map_err(|e| format!("reading {}: {e}", p.display()))?;
                series.push((r, drop_partial_second(adoc_series::parse_csv(&text)?, r.seconds)));
            }
            let order = configs(rows);
            series.sort_by_key(|(r, _)| (order.iter().position(|c| *c == r.config), r.repeat));
            let scales = Scales::of(series.iter().map(|(_, s)| s.as_slice()));
            let title = |r: &Row| {
                if rows.iter().any(|x| x.repeat > 1) {
                    format!("{} r{}", r.config, r.repeat)
                } else {
                    r.config.clone()
                }
            };
            let charts: Vec<(&Row, RunChart<'_>)> = series
                .iter()
                .map(|(r, s)| (*r, RunChart { title: title(r), rows: s, totals: totals_lines(r) }))
                .collect();
            for (r, c) in &charts {
                let one = RunChart {
                    title: format!("{}, {workload}: {}", device_title(rows, &device), c.title),
                    rows: c.rows,
                    totals: c.totals[1..].to_vec(),
                };
                let mut svg_totals = vec![c.totals[0].clone()];
                svg_totals.extend(one.totals.iter().cloned());
                let one = RunChart { totals: svg_totals, ..one };
                let p = dir.join(chart_name(&device, &workload, Some(r)));
                std::fs::write(&p, adoc_chart::run_svg(&one, &scales))
                    .map_err(|e| format!("writing {}: {e}", p.display()))?;
            }
            let (left, right): (Vec<_>, Vec<_>) =
                charts.into_iter().partition(|(r, _)| r.engine != "shale");
            let left: Vec<RunChart<'_>> = left.into_iter().map(|(_, c)| c).collect();
            let right: Vec<RunChart<'_>> = right.into_iter().map(|(_, c)| c).collect();
            let svg = adoc_chart::grid_svg(
                &format!(
                    "{}, {workload}: RocksDB (left) and shale (right), one scale",
                    device_title(rows, &device)
                ),
                &left,
                &right,
                &scales,
            );
            let p = dir.join(chart_name(&device, &workload, None));
            std::fs::write(&p, svg).map_err(|e| format!("writing {}: {e}", p.display()))?;
        }
    }
    Ok(())
}

/// The markdown of a run; `charts` is where the charts are, relative to the CSV's folder.
pub fn render(rows: &[Row], charts: Option<&str>) -> String {
    let mut out = String::new();
    out.push_str("## Configurations\n\n");
    for (c, what) in CONFIGS {
        if rows.iter().any(|r| r.config == c) {
            out.push_str(&format!("- `{c}`: {what}\n"));
        }
    }
    let write_workloads: Vec<String> =
        distinct(rows, |r| &r.workload).into_iter().filter(|w| !w.starts_with("ycsb-")).collect();
    for w in &write_workloads {
        out.push_str(&format!(
            "\n## {w}, per device\n\nMedians over repeats. Stall time: what ended in the run, by \
             the engine's own count (shale's timeline; RocksDB's `rocksdb.stall.micros`, split \
             by kind in proportion to its stall-condition counters, marked ~). WA: the engine's \
             WAL + SST (+ shale's version log) bytes over key + value bytes; WA SST: flushes \
             and compactions only; WA device: the kernel's count of the device's writes. Peak \
             memory: the process's memory cgroup (RSS + page cache). Levels: levels holding \
             files at the end (RocksDB's last stats dump). Tuner seconds: seconds whose last \
             answer was each overflow.\n"
        ));
        for device in distinct(rows, |r| &r.device) {
            if !rows.iter().any(|r| r.device == device && &r.workload == w) {
                continue;
            }
            let link = |c: &str| -> String {
                let Some(dir) = charts else { return String::new() };
                runs(rows, &device, w, c)
                    .filter(|r| !r.timeline.is_empty())
                    .map(|r| format!("[svg]({dir}/{})", chart_name(&device, w, Some(r))))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            out.push_str(&format!("\n### {}\n\n", device_title(rows, &device)));
            out.push_str(&write_table(rows, &device, w, &link).to_markdown());
            if let Some(dir) = charts
                && rows.iter().any(|r| {
                    r.ok() && r.device == device && &r.workload == w && !r.timeline.is_empty()
                })
            {
                out.push_str(&format!(
                    "\n![{device} {w}]({dir}/{})\n",
                    chart_name(&device, w, None)
                ));
            }
        }
    }
    let ycsb_devices: Vec<String> = distinct(rows, |r| &r.device)
        .into_iter()
        .filter(|d| rows.iter().any(|r| &r.device == d && r.workload.starts_with("ycsb-")))
        .collect();
    for device in &ycsb_devices {
        out.push_str(&format!(
            "\n## YCSB on {} (one process per phase, medians over repeats)\n",
            device_title(rows, device)
        ));
        out.push_str(&ycsb_tables(rows, device));
    }

    out.push_str(
        "\n## Targets (issue #10), shale with the tuner (`shale-adoc`) against each peer, per \
         device and workload\n\n",
    );
    let mut t = Table::new(&[
        "device", "workload", "target", "peer", "shale", "peer", "ratio", "target", "verdict",
    ]);
    for device in distinct(rows, |r| &r.device) {
        for w in distinct(rows, |r| &r.workload) {
            if rows.iter().any(|r| r.device == device && r.workload == w) {
                targets(rows, &device, &w, &mut t);
            }
        }
    }
    out.push_str(&t.to_markdown());

    let failed: Vec<&Row> = rows.iter().filter(|r| !r.ok()).collect();
    if !failed.is_empty() {
        out.push_str("\n## Runs that did not finish (left out of every median)\n\n");
        for r in failed {
            out.push_str(&format!(
                "- {} {} {} repeat {}: {} (`{}`)\n",
                r.device, r.workload, r.config, r.repeat, r.status, r.log
            ));
        }
    }
    out
}

/// Writes the charts and prints the markdown on stdout.
///
/// # Errors
/// The CSV cannot be read or parsed, a chart cannot be written.
pub fn run(a: &Args) -> Result<(), Error> {
    let text =
        std::fs::read_to_string(&a.csv).map_err(|e| format!("reading {}: {e}", a.csv.display()))?;
    let rows = parse_csv(&text)?;
    let base = a.csv.parent().unwrap_or(Path::new("")).to_path_buf();
    let charts = if a.no_charts {
        None
    } else {
        let dir = a.charts.clone().unwrap_or_else(|| base.join("charts"));
        write_charts(&rows, &base, &dir)?;
        Some(dir.strip_prefix(&base).unwrap_or(&dir).display().to_string())
    };
    // The machine is setup.md's to name: a summary may be rendered again elsewhere.
    print!("{}", render(&rows, charts.as_deref()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adoc_record::HEADER;

    fn row(
        device: &str,
        workload: &str,
        config: &str,
        ops: f64,
        stall_s: f64,
        memory_mib: f64,
    ) -> Row {
        Row {
            engine: config.split('-').next().unwrap().into(),
            config: config.into(),
            device: device.into(),
            device_bps: Some(367_500_000.0),
            workload: workload.into(),
            repeat: 1,
            ops_per_sec: Some(ops),
            stall_us: Some(stall_s * 1e6),
            stall_kind_us: [Some(stall_s * 1e6), Some(0.0), Some(0.0), Some(0.0), Some(0.0)],
            stall_kinds: if config.starts_with("rocksdb") { "estimated" } else { "exact" }.into(),
            p99_write_us: Some(10.0),
            p999_write_us: Some(100.0),
            user_bytes: Some(1000.0),
            engine_write_bytes: Some(5000.0),
            peak_memory_bytes: Some(memory_mib * 1_048_576.0),
            status: "ok".into(),
            ..Default::default()
        }
    }

    fn point(device: &str, workload: &str, adoc: (f64, f64, f64)) -> Vec<Row> {
        vec![
            row(device, workload, "rocksdb-default", 50_000.0, 40.0, 900.0),
            row(device, workload, "rocksdb-ratelimit", 45_000.0, 50.0, 900.0),
            row(device, workload, "rocksdb-large", 60_000.0, 20.0, 2000.0),
            row(device, workload, "shale-off", 70_000.0, 12.0, 500.0),
            row(device, workload, "shale-adoc-t", 72_000.0, 11.0, 500.0),
            row(device, workload, "shale-adoc-b", 71_000.0, 10.0, 600.0),
            row(device, workload, "shale-adoc", adoc.0, adoc.1, adoc.2),
        ]
    }

    #[test]
    fn targets_against_the_right_peers() {
        let mut rows = point("sata", "fillrandom", (80_000.0, 9.0, 700.0));
        // nvme: misses throughput (1.2x of 60k), stall (> 20% of 50 s) and memory.
        rows.extend(point("nvme", "fillrandom", (72_000.0, 11.0, 2100.0)));
        let mut failed = row("nvme", "fillrandom", "shale-adoc", 1.0, 0.0, 1.0);
        failed.status = "failed (exit 1)".into();
        failed.log = "raw/x".into();
        rows.push(failed);
        let csv: String = std::iter::once(HEADER.to_string())
            .chain(rows.iter().map(Row::to_csv))
            .collect::<Vec<_>>()
            .join("\n");
        let rows = parse_csv(&csv).unwrap();
        let md = render(&rows, None);
        // sata: 9 s against 50 s is 0.18; 80k against the best (rocksdb-large, 60k) 1.33x.
        assert!(md.contains("| sata | fillrandom | stall time <= 20% of RocksDB with the auto-tuned rate limiter | rocksdb-ratelimit | 9.0 | 50.0 | 0.18 | <= 0.2x | met |"), "{md}");
        assert!(md.contains("| sata | fillrandom | throughput >= 1.3x the best RocksDB configuration | rocksdb-large | 80,000 | 60,000 | 1.33 | >= 1.3x | met |"), "{md}");
        assert!(md.contains("| sata | fillrandom | the tuner beats tuner-off on stall time | shale-off | 9.0 | 12.0 | 0.75 | < 1x | met |"), "{md}");
        assert!(md.contains("| sata | fillrandom | peak memory no higher than RocksDB's large fixed setting | rocksdb-large | 700 | 2000 | 0.35 | <= 1x | met |"), "{md}");
        assert!(md.contains("| nvme | fillrandom | throughput >= 1.3x the best RocksDB configuration | rocksdb-large | 72,000 | 60,000 | 1.20 | >= 1.3x | **MISSED** |"), "{md}");
        assert!(md.contains("| nvme | fillrandom | the tuner beats tuner-off on stall time | shale-off | 11.0 | 12.0 | 0.92 | < 1x | met |"), "{md}");
        assert!(md.contains("| nvme | fillrandom | peak memory no higher than RocksDB's large fixed setting | rocksdb-large | 2100 | 2000 | 1.05 | <= 1x | **MISSED** |"), "{md}");
        // The failed run is listed and left out of the median (72k, not 36k).
        assert!(
            md.contains("- nvme fillrandom shale-adoc repeat 1: failed (exit 1) (`raw/x`)"),
            "{md}"
        );
        // RocksDB's kinds are marked as estimates; shale's are not.
        assert!(md.contains("| rocksdb-default | 50,000 | 40.0 | ~40.0 |"), "{md}");
        assert!(md.contains("| shale-off | 70,000 | 12.0 | 12.0 |"), "{md}");
        assert!(md.contains("### sata, 368 MB/s"), "{md}");
    }

    #[test]
    fn a_last_partial_second_draws_no_throughput() {
        let rows: Vec<Second> =
            (1..=3).map(|s| Second { second: s, ops: Some(10.0), ..Default::default() }).collect();
        let trimmed = drop_partial_second(rows.clone(), Some(2.09));
        assert_eq!(
            trimmed.iter().map(|r| r.ops).collect::<Vec<_>>(),
            [Some(10.0), Some(10.0), None]
        );
        assert_eq!(drop_partial_second(rows.clone(), None), rows);
    }

    #[test]
    fn rules_on_zeros_and_missing_figures() {
        assert_eq!(Rule::AtMost(0.2).verdict(Some(0.0), Some(0.0)), "met");
        assert_eq!(Rule::AtMost(0.2).verdict(Some(1.0), Some(0.0)), "**MISSED**");
        assert_eq!(Rule::Below.verdict(Some(0.0), Some(0.0)), "met");
        assert_eq!(Rule::Below.verdict(Some(5.0), Some(5.0)), "**MISSED**");
        assert_eq!(Rule::Above.verdict(Some(5.0), Some(5.0)), "**MISSED**");
        assert_eq!(Rule::AtLeast(1.3).verdict(None, Some(5.0)), "n/a (no figure)");
    }

    #[test]
    fn ycsb_tables_and_targets_per_phase() {
        let mut rows = point("nvme", "ycsb-load", (80_000.0, 0.0, 700.0));
        rows.extend(point("nvme", "ycsb-A", (80_000.0, 0.0, 700.0)));
        for r in rows.iter_mut().filter(|r| r.workload == "ycsb-A") {
            r.read_us = [Some(5.0), Some(50.0), Some(500.0), Some(5000.0)];
        }
        for r in rows.iter_mut().filter(|r| r.engine == "shale") {
            r.stall_us = None;
            r.stall_kinds = String::new();
        }
        let md = render(&rows, None);
        assert!(md.contains("## YCSB on nvme, 368 MB/s"), "{md}");
        assert!(md.contains("| configuration | load | A |"), "{md}");
        assert!(md.contains("| shale-adoc | 80,000 | 80,000 |"), "{md}");
        // The reads' tail: none in the load, A's medians over the repeats.
        let reads = md.split("latency of the phase's reads (READ), us:").nth(1).unwrap();
        assert!(reads.contains("| shale-adoc | - | 5 / 50 / 500 / 5000 |"), "{md}");
        assert!(md.contains("| nvme | ycsb-A | stall time <= 20% of RocksDB with the auto-tuned rate limiter | rocksdb-ratelimit | - | 50.0 | - | <= 0.2x | n/a (no figure) |"), "{md}");
    }

    #[test]
    fn charts_of_each_run_and_each_point() {
        let d = std::env::temp_dir().join(format!("shale-adoc-summary-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("raw")).unwrap();
        let series = format!(
            "{}\n1,100,5,2,67108864,1,0,0,0,0,0,0,0,0,0,0,0,0,\n2,50,,4,67108864,2,3,0,1,9000,0,0,0,0,0,0,0,0,L0O\n",
            adoc_series::SHALE_HEADER
        );
        std::fs::write(d.join("raw/a.timeline.csv"), &series).unwrap();
        let mut rows = point("hdd", "fillrandom", (80_000.0, 9.0, 700.0));
        for r in &mut rows {
            r.timeline = "raw/a.timeline.csv".into();
        }
        let csv: String = std::iter::once(HEADER.to_string())
            .chain(rows.iter().map(Row::to_csv))
            .collect::<Vec<_>>()
            .join("\n");
        std::fs::write(d.join("runs.csv"), csv).unwrap();
        run(&Args { csv: d.join("runs.csv"), charts: None, no_charts: false }).unwrap();
        let names: Vec<String> = std::fs::read_dir(d.join("charts"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 8, "7 runs and the point: {names:?}");
        let grid = std::fs::read_to_string(d.join("charts/hdd-fillrandom.svg")).unwrap();
        assert!(grid.contains(">rocksdb-large</text>") && grid.contains(">shale-adoc</text>"));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
