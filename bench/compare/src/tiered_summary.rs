//! `shale-compare tiered-summary`: the tables of bench/tiered.sh (issue #15, part 4) from the
//! CSV it writes, one row per process: medians per workload and placement, the ratios the
//! issue's targets name with a verdict each, and the fast device's share of the bytes written.
//!
//! The CSV's columns (by name; order free): `engine,config,workload,threads,repeat,ops_per_sec,
//! p99_us,seconds,fast_bytes,capacity_bytes,fast_share,status,log[,tail_us]`. `config` is one of
//! [`CONFIGS`]; `workload` is `fillrandom`, `fillsync`, `ycsb-load`, `ycsb-A` (and the other
//! letters), `ycsb-reload`, `recovery-fill` or `recovery`; `p99_us` is a number for db_bench's
//! benchmarks and `OP:us OP:us` for a YCSB phase; `seconds` is the recovery time; `tail_us`
//! (optional, absent from runs before it) is `OP:p50/p99/p99.9/max OP:...` in microseconds,
//! each operation type's tail line (`ycsb::latency`) or db_bench's `--histogram` block, as
//! bench/lib/tails.py reads them. Only rows with `status` `ok` count in medians; the others
//! are listed.

use std::path::PathBuf;

use crate::Error;
use crate::summary::{Target, median_of, ratio, verdict};
use crate::table::{self, Table};

/// The six placements, in the order the tables show them.
pub const CONFIGS: [&str; 6] = [
    "rocksdb-capacity",
    "rocksdb-wal-fast",
    "rocksdb-fast",
    "shale-capacity",
    "shale-tiered",
    "shale-fast",
];

/// What each placement puts where, for the report's legend.
const LEGEND: [(&str, &str); 6] = [
    ("rocksdb-capacity", "RocksDB, everything on the capacity device"),
    ("rocksdb-wal-fast", "RocksDB, WAL on the fast device (`--wal_dir`), the rest on capacity"),
    ("rocksdb-fast", "RocksDB, everything on the fast device"),
    ("shale-capacity", "shale, one volume on the capacity device"),
    ("shale-tiered", "shale, fast volume of 10% of the data (and the WAL) + capacity volume"),
    ("shale-fast", "shale, one volume on the fast device"),
];

/// Arguments of `shale-compare tiered-summary`.
#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// The CSV bench/tiered.sh writes (runs.csv).
    #[arg(long)]
    pub csv: PathBuf,
}

/// One process of the run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Row {
    pub config: String,
    pub workload: String,
    pub threads: u32,
    pub repeat: u32,
    pub ops: Option<f64>,
    pub p99: String,
    pub seconds: Option<f64>,
    pub fast_bytes: Option<f64>,
    pub capacity_bytes: Option<f64>,
    pub status: String,
    pub log: String,
    /// `OP:p50/p99/p99.9/max ...` in microseconds (the `tail_us` column), or empty.
    pub tail: String,
}

impl Row {
    fn ok(&self) -> bool {
        self.status == "ok"
    }

    /// The P99 in microseconds: db_bench's single figure (`op` None), or operation `op`'s of a
    /// YCSB phase.
    pub fn p99_us(&self, op: Option<&str>) -> Option<f64> {
        match op {
            None => self.p99.trim().parse().ok(),
            Some(op) => self.p99.split_whitespace().find_map(|pair| {
                let (name, v) = pair.rsplit_once(':')?;
                (name == op).then(|| v.parse().ok()).flatten()
            }),
        }
    }

    /// Figure `k` (0: p50, 1: p99, 2: p99.9, 3: max, microseconds) of operation `op`'s tail,
    /// or of the first operation's when `op` is `None` (db_bench's benchmarks time one).
    pub fn tail_us(&self, op: Option<&str>, k: usize) -> Option<f64> {
        self.tail.split_whitespace().find_map(|pair| {
            let (name, figures) = pair.rsplit_once(':')?;
            if op.is_some_and(|o| o != name) {
                return None;
            }
            figures.split('/').nth(k)?.parse().ok()
        })
    }

    /// The operations named in a YCSB phase's P99 field, in order.
    fn p99_ops(&self) -> Vec<String> {
        self.p99
            .split_whitespace()
            .filter_map(|p| p.rsplit_once(':').map(|(n, _)| n.to_string()))
            .collect()
    }

    /// fast / (fast + capacity) of the bytes the process wrote; `None` when it wrote none.
    pub fn fast_share(&self) -> Option<f64> {
        let (f, c) = (self.fast_bytes?, self.capacity_bytes?);
        (f + c > 0.0).then(|| f / (f + c))
    }

    fn total_bytes(&self) -> Option<f64> {
        Some(self.fast_bytes? + self.capacity_bytes?)
    }
}

/// Parses the CSV by its header's column names.
///
/// # Errors
/// A missing column, or a row whose threads or repeat is not a number.
pub fn parse_csv(text: &str) -> Result<Vec<Row>, Error> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<&str> = lines.next().ok_or("the CSV is empty")?.split(',').collect();
    let col = |name: &str| {
        header.iter().position(|h| h.trim() == name).ok_or(format!("the CSV has no {name} column"))
    };
    let c = [
        col("config")?,
        col("workload")?,
        col("threads")?,
        col("repeat")?,
        col("ops_per_sec")?,
        col("p99_us")?,
        col("seconds")?,
        col("fast_bytes")?,
        col("capacity_bytes")?,
        col("status")?,
        col("log")?,
    ];
    let tail = header.iter().position(|h| h.trim() == "tail_us");
    let mut rows = Vec::new();
    for line in lines {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        let get = |i: usize| f.get(c[i]).copied().unwrap_or("");
        let num = |i: usize| get(i).parse::<f64>().ok().filter(|v| v.is_finite());
        rows.push(Row {
            config: get(0).to_string(),
            workload: get(1).to_string(),
            threads: get(2).parse().map_err(|_| format!("threads {:?} in {line:?}", get(2)))?,
            repeat: get(3).parse().map_err(|_| format!("repeat {:?} in {line:?}", get(3)))?,
            ops: num(4),
            p99: get(5).to_string(),
            seconds: num(6),
            fast_bytes: num(7),
            capacity_bytes: num(8),
            status: get(9).to_string(),
            log: get(10).to_string(),
            tail: tail.and_then(|i| f.get(i)).map_or(String::new(), |v| v.to_string()),
        });
    }
    Ok(rows)
}

/// The successful runs of one placement and workload (and thread count, if given).
fn runs<'a>(
    rows: &'a [Row],
    config: &'a str,
    workload: &'a str,
    threads: Option<u32>,
) -> impl Iterator<Item = &'a Row> + 'a {
    rows.iter().filter(move |r| {
        r.ok()
            && r.config == config
            && r.workload == workload
            && threads.is_none_or(|t| r.threads == t)
    })
}

/// The median of `f` over those runs.
fn med(
    rows: &[Row],
    config: &str,
    workload: &str,
    threads: Option<u32>,
    f: impl Fn(&Row) -> Option<f64>,
) -> Option<f64> {
    median_of(runs(rows, config, workload, threads).map(f))
}

/// `p50 / p99 / p99.9 / max` of operation `op`, each the median over the runs, in
/// microseconds; `-` for a figure no run has.
fn tail_cell(rows: &[Row], c: &str, w: &str, t: Option<u32>, op: Option<&str>) -> String {
    (0..4)
        .map(|k| table::fixed(med(rows, c, w, t, |r| r.tail_us(op, k)), 1))
        .collect::<Vec<_>>()
        .join(" / ")
}

/// What a target compares.
#[derive(Clone, Copy, Debug)]
enum Metric {
    /// Median ops/s; higher is better.
    Ops,
    /// Median recovery seconds; lower is better.
    Seconds,
}

/// One target of the issue: shale's placement against a peer, on a workload.
struct Spec {
    what: &'static str,
    workload: &'static str,
    threads: Option<u32>,
    shale: &'static str,
    peer: &'static str,
    metric: Metric,
    target: Target,
}

/// Issue #15's targets on these benchmarks, in its order.
fn specs() -> Vec<Spec> {
    let ops = |what, workload, threads, shale, peer, target| Spec {
        what,
        workload,
        threads,
        shale,
        peer,
        metric: Metric::Ops,
        target,
    };
    let mut v = Vec::new();
    for w in ["fillrandom", "fillsync"] {
        v.push(ops(
            "all-write, 16 threads: >= 3x RocksDB on the capacity device",
            w,
            Some(16),
            "shale-capacity",
            "rocksdb-capacity",
            Target::at_least(3.0),
        ));
        v.push(ops(
            "all-write, 16 threads: >= 1.5x RocksDB with its WAL on the fast device",
            w,
            Some(16),
            "shale-tiered",
            "rocksdb-wal-fast",
            Target::at_least(1.5),
        ));
    }
    for (t, r) in [(16, 2.0), (32, 3.0)] {
        for (shale, peer) in [
            ("shale-capacity", "rocksdb-capacity"),
            ("shale-tiered", "rocksdb-wal-fast"),
            ("shale-fast", "rocksdb-fast"),
        ] {
            v.push(ops(
                if t == 16 {
                    "fillsync, 16 threads: >= 2x RocksDB on the same device(s)"
                } else {
                    "fillsync, 32 threads: >= 3x RocksDB on the same device(s)"
                },
                "fillsync",
                Some(t),
                shale,
                peer,
                Target::at_least(r),
            ));
        }
    }
    for w in ["fillrandom", "fillsync"] {
        for t in [1, 8, 16, 32] {
            v.push(ops(
                "shale tiered within 20% of shale all-fast on all-write",
                w,
                Some(t),
                "shale-tiered",
                "shale-fast",
                Target::at_least(0.8),
            ));
        }
    }
    for (w, r) in [("ycsb-A", 2.0), ("ycsb-B", 1.0), ("ycsb-E", 1.0)] {
        v.push(ops(
            "YCSB: A >= 2x, B and E >= 1x RocksDB with its WAL on the fast device",
            w,
            None,
            "shale-tiered",
            "rocksdb-wal-fast",
            Target::at_least(r),
        ));
    }
    for (shale, peer) in [
        ("shale-capacity", "rocksdb-capacity"),
        ("shale-tiered", "rocksdb-wal-fast"),
        ("shale-fast", "rocksdb-fast"),
    ] {
        v.push(Spec {
            what: "recovery after a kill: no longer than RocksDB's",
            workload: "recovery",
            threads: None,
            shale,
            peer,
            metric: Metric::Seconds,
            target: Target::at_most(1.0),
        });
    }
    v
}

/// The (workload, threads) pairs of the run in the order they first appear.
fn points(rows: &[Row], workload: impl Fn(&str) -> bool) -> Vec<(String, u32)> {
    let mut out: Vec<(String, u32)> = Vec::new();
    for r in rows {
        let p = (r.workload.clone(), r.threads);
        if workload(&r.workload) && !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// The placements that appear in the run, in [`CONFIGS`] order.
fn present(rows: &[Row]) -> Vec<&'static str> {
    CONFIGS.into_iter().filter(|c| rows.iter().any(|r| r.config == *c)).collect()
}

fn targets_table(rows: &[Row]) -> Table {
    let mut t = Table::new(&[
        "target", "workload", "threads", "shale", "peer", "shale", "peer", "ratio", "target",
        "verdict",
    ]);
    for s in specs() {
        // A point the run left out (a workload, a thread count) is no target of this run.
        let ran = |r: &Row| r.workload == s.workload && s.threads.is_none_or(|t| r.threads == t);
        if !rows.iter().any(ran) {
            continue;
        }
        let f = |r: &Row| match s.metric {
            Metric::Ops => r.ops,
            Metric::Seconds => r.seconds,
        };
        let (a, b) = (
            med(rows, s.shale, s.workload, s.threads, f),
            med(rows, s.peer, s.workload, s.threads, f),
        );
        let r = ratio(a, b);
        let fmt = |v| match s.metric {
            Metric::Ops => table::count(v),
            Metric::Seconds => v.map_or("-".into(), |v| format!("{v:.2} s")),
        };
        t.row(vec![
            s.what.into(),
            s.workload.into(),
            s.threads.map_or("-".into(), |t| t.to_string()),
            s.shale.into(),
            s.peer.into(),
            fmt(a),
            fmt(b),
            format!("**{}**", table::ratio(r)),
            s.target.label(),
            verdict(Some(s.target), r),
        ]);
    }
    t
}

/// Rows per point, a column per placement, cells from `cell`.
fn by_config(
    rows: &[Row],
    first: &str,
    points: &[(String, u32)],
    label: impl Fn(&str, u32) -> String,
    cell: impl Fn(&str, &str, u32) -> String,
) -> Table {
    let configs = present(rows);
    let mut headers = vec![first];
    headers.extend(configs.iter().copied());
    let mut t = Table::new(&headers);
    for (w, th) in points {
        let mut row = vec![label(w, *th)];
        row.extend(configs.iter().map(|c| cell(c, w, *th)));
        t.row(row);
    }
    t
}

/// The markdown of every table.
pub fn render(rows: &[Row]) -> String {
    let mut out = String::new();
    out.push_str("## Placements\n\n");
    for (c, what) in LEGEND {
        out.push_str(&format!("- `{c}`: {what}\n"));
    }
    out.push_str(
        "\n## Targets (issue #15, medians of the same run)\n\nEvery target is shown, met or \
         missed; `n/a` where a placement did not run (see the notes above).\n\n",
    );
    out.push_str(&targets_table(rows).to_markdown());

    for bench in ["fillrandom", "fillsync"] {
        let pts = points(rows, |w| w == bench);
        if pts.is_empty() {
            continue;
        }
        out.push_str(&format!("\n## All-write: {bench}, median ops/s\n\n"));
        let ops = |c: &str, w: &str, t: u32| table::count(med(rows, c, w, Some(t), |r| r.ops));
        out.push_str(&by_config(rows, "threads", &pts, |_, t| t.to_string(), ops).to_markdown());
        out.push_str(&format!("\n{bench}, median P99 latency (microseconds per write):\n\n"));
        let p99 = |c: &str, w: &str, t: u32| {
            table::fixed(med(rows, c, w, Some(t), |r| r.p99_us(None)), 1)
        };
        out.push_str(&by_config(rows, "threads", &pts, |_, t| t.to_string(), p99).to_markdown());
        out.push_str(&format!(
            "\n{bench}, median p50 / p99 / p99.9 / max latency (microseconds per write, as the \
             client sees it):\n\n"
        ));
        let tail = |c: &str, w: &str, t: u32| tail_cell(rows, c, w, Some(t), None);
        out.push_str(&by_config(rows, "threads", &pts, |_, t| t.to_string(), tail).to_markdown());
    }

    let ycsb = points(rows, |w| w.starts_with("ycsb-"));
    if !ycsb.is_empty() {
        out.push_str("\n## YCSB, median ops/s\n\n");
        let label = |w: &str, t: u32| format!("{} ({t} threads)", w.trim_start_matches("ycsb-"));
        let ops = |c: &str, w: &str, t: u32| table::count(med(rows, c, w, Some(t), |r| r.ops));
        out.push_str(&by_config(rows, "phase", &ycsb, label, ops).to_markdown());
        out.push_str("\nYCSB, median P99 latency by operation (microseconds):\n\n");
        // One row per phase and operation, the operations as the phase's reports name them.
        let mut op_points: Vec<(String, u32)> = Vec::new();
        for (w, t) in &ycsb {
            let mut names: Vec<String> = Vec::new();
            for r in rows.iter().filter(|r| &r.workload == w && r.threads == *t) {
                for n in r.p99_ops() {
                    if !names.contains(&n) {
                        names.push(n);
                    }
                }
            }
            for n in names {
                op_points.push((format!("{w}|{n}"), *t));
            }
        }
        let label = |k: &str, _| k.trim_start_matches("ycsb-").replace('|', " ");
        let p99 = |c: &str, k: &str, t: u32| {
            let (w, op) = k.split_once('|').unwrap_or((k, ""));
            table::fixed(med(rows, c, w, Some(t), |r| r.p99_us(Some(op))), 0)
        };
        out.push_str(&by_config(rows, "phase, operation", &op_points, label, p99).to_markdown());
        out.push_str(
            "\nYCSB, median p50 / p99 / p99.9 / max latency by operation (microseconds, as the \
             client sees it):\n\n",
        );
        let tail = |c: &str, k: &str, t: u32| {
            let (w, op) = k.split_once('|').unwrap_or((k, ""));
            tail_cell(rows, c, w, Some(t), Some(op))
        };
        out.push_str(&by_config(rows, "phase, operation", &op_points, label, tail).to_markdown());
    }

    if rows.iter().any(|r| r.workload == "recovery") {
        out.push_str("\n## Recovery after SIGKILL, seconds from exec to exit of the reopen\n\n");
        let mut t = Table::new(&["placement", "each run", "median", "fill before the kill, ops/s"]);
        for c in present(rows) {
            let each: Vec<String> = rows
                .iter()
                .filter(|r| r.config == c && r.workload == "recovery")
                .map(|r| if r.ok() { table::fixed(r.seconds, 2) } else { r.status.clone() })
                .collect();
            if each.is_empty() {
                continue;
            }
            t.row(vec![
                c.into(),
                each.join(" "),
                table::fixed(med(rows, c, "recovery", None, |r| r.seconds), 2),
                table::count(med(rows, c, "recovery-fill", None, |r| r.ops)),
            ]);
        }
        out.push_str(&t.to_markdown());
    }

    let all = points(rows, |_| true);
    if !all.is_empty() {
        out.push_str(
            "\n## The fast device's share of the bytes written\n\nfast / (fast + capacity) of \
             the sectors the kernel counted written on the loop devices (/sys/block/loopN/stat) \
             from before each process to after it and a `sync`, median over runs, with the \
             median of all bytes written beside it. Placements without a fast device show 0%, \
             those all on it 100%. RocksDB writes its WAL through the page cache: what it deletes \
             before the kernel writes it back (an unsynced WAL whose memtable was flushed within \
             a short run) never reaches a device and is not counted. So, since its deferred \
             WAL groups, does shale's: an unsynced record stays in the WAL tail (shared \
             memory) and reaches the device only when a sync write or a full tail needs it.\n\n",
        );
        let label = |w: &str, t: u32| format!("{w} ({t} threads)");
        let cell = |c: &str, w: &str, t: u32| {
            let share = med(rows, c, w, Some(t), Row::fast_share);
            let total = med(rows, c, w, Some(t), Row::total_bytes);
            match share {
                Some(s) => format!("{:.1}% of {}", s * 100.0, table::mib(total)),
                None => "-".into(),
            }
        };
        out.push_str(&by_config(rows, "workload", &all, label, cell).to_markdown());
    }

    let failed: Vec<&Row> = rows.iter().filter(|r| !r.ok()).collect();
    if !failed.is_empty() {
        out.push_str("\n## Runs that did not finish (left out of every median)\n\n");
        for r in failed {
            out.push_str(&format!(
                "- {} {} threads {} repeat {}: {} (`{}`)\n",
                r.config, r.workload, r.threads, r.repeat, r.status, r.log
            ));
        }
    }
    out
}

/// Prints the tables of the CSV on stdout.
///
/// # Errors
/// The CSV cannot be read or parsed.
pub fn run(a: &Args) -> Result<(), Error> {
    let text =
        std::fs::read_to_string(&a.csv).map_err(|e| format!("reading {}: {e}", a.csv.display()))?;
    print!("{}", render(&parse_csv(&text)?));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "engine,config,workload,threads,repeat,ops_per_sec,p99_us,seconds,\
                          fast_bytes,capacity_bytes,fast_share,status,log";

    fn csv(rows: &[&str]) -> String {
        let mut s = HEADER.to_string();
        for r in rows {
            s.push('\n');
            s.push_str(r);
        }
        s
    }

    #[test]
    fn tails_parse_and_render_beside_the_p99() {
        let text = format!(
            "{HEADER},tail_us\n\
             shale,shale-fast,fillrandom,1,1,30000,12,,0,10,0,ok,raw/a.txt,write:3/12/40.5/812\n\
             shale,shale-fast,fillrandom,1,2,31000,14,,0,10,0,ok,raw/b.txt,write:5/14/60.5/900\n\
             shale,shale-fast,ycsb-A,2,1,9000,READ:40 UPDATE:80,,0,10,0,ok,raw/c.txt,\
             READ:4/40/90/100 UPDATE:8/80/190/200"
        );
        let rows = parse_csv(&text).unwrap();
        assert_eq!((rows[0].tail_us(None, 0), rows[0].tail_us(None, 3)), (Some(3.0), Some(812.0)));
        assert_eq!(rows[2].tail_us(Some("UPDATE"), 2), Some(190.0));
        assert_eq!(rows[2].tail_us(Some("SCAN"), 0), None);
        let md = render(&rows);
        assert!(md.contains("fillrandom, median p50 / p99 / p99.9 / max latency"), "{md}");
        assert!(md.contains("| 4.0 / 13.0 / 50.5 / 856.0 |"), "{md}");
        assert!(md.contains("| 8.0 / 80.0 / 190.0 / 200.0 |"), "{md}");
        // A CSV from before the column: no tail, dashes.
        let old = parse_csv(&format!("{HEADER}\nshale,shale-fast,fillrandom,1,1,3,12,,0,1,0,ok,a"))
            .unwrap();
        assert_eq!(old[0].tail, "");
        assert!(render(&old).contains("| - / - / - / - |"));
    }

    #[test]
    fn rows_parse_by_column_name() {
        let text = csv(&[
            "shale,shale-tiered,fillsync,16,1,30000,120.5,,1048576,3145728,0.25,ok,raw/a.txt",
            "rocksdb,rocksdb-wal-fast,ycsb-A,2,1,9000,READ:40 UPDATE:80,,0,10,0,ok,raw/b.txt",
            "shale,shale-fast,recovery,1,2,,,3.25,5,0,1,failed (exit 1),raw/c.txt",
        ]);
        let rows = parse_csv(&text).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].ops, Some(30000.0));
        assert_eq!(rows[0].p99_us(None), Some(120.5));
        assert_eq!(rows[0].fast_share(), Some(0.25));
        assert_eq!(rows[1].p99_us(Some("UPDATE")), Some(80.0));
        assert_eq!(rows[1].p99_us(Some("SCAN")), None);
        assert_eq!(rows[1].p99_ops(), vec!["READ", "UPDATE"]);
        assert_eq!(rows[2].seconds, Some(3.25));
        assert!(!rows[2].ok());
        assert!(parse_csv("config,workload\n").is_err(), "columns are named");
    }

    /// Medians per placement, the ratios of the targets with verdicts, a failed run listed
    /// and left out of the medians.
    #[test]
    fn targets_come_from_medians_of_the_same_run() {
        let mut lines = Vec::new();
        for (rep, cap, wal, tier, fast) in
            [(1, 1000, 4000, 6000, 7000), (2, 1200, 4200, 6500, 6900), (3, 900, 3800, 6100, 8000)]
        {
            for (config, ops) in [
                ("rocksdb-capacity", cap),
                ("rocksdb-wal-fast", wal),
                ("shale-capacity", cap * 4),
                ("shale-tiered", tier),
                ("shale-fast", fast),
            ] {
                lines.push(format!(
                    "x,{config},fillrandom,16,{rep},{ops},10,,100,300,0.25,ok,raw/{config}"
                ));
            }
        }
        lines.push("shale,shale-capacity,fillrandom,16,4,1,1,,0,0,,failed (exit 1),raw/f".into());
        lines.push("rocksdb,rocksdb-capacity,recovery,1,1,,,10.0,0,5,0,ok,raw/r".into());
        lines.push("shale,shale-capacity,recovery,1,1,,,9.0,0,5,0,ok,raw/s".into());
        let text = csv(&lines.iter().map(String::as_str).collect::<Vec<_>>());
        let rows = parse_csv(&text).unwrap();
        assert_eq!(med(&rows, "shale-capacity", "fillrandom", Some(16), |r| r.ops), Some(4000.0));
        let md = render(&rows);
        // 4000 / 1000 = 4.00 against >= 3x; 6100 / 4000 = 1.52 against >= 1.5x.
        assert!(
            md.contains(
                "| shale-capacity | rocksdb-capacity | 4,000 | 1,000 | **4.00** | >= 3x | met |"
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "| shale-tiered | rocksdb-wal-fast | 6,100 | 4,000 | **1.52** | >= 1.5x | met |"
            ),
            "{md}"
        );
        // Tiered against all-fast: 6100 / 7000 = 0.87, within 20%.
        assert!(
            md.contains("| shale-tiered | shale-fast | 6,100 | 7,000 | **0.87** | >= 0.8x | met |"),
            "{md}"
        );
        // Recovery: 9 s against 10 s, lower is better.
        assert!(md.contains("| 9.00 s | 10.00 s | **0.90** | <= 1x | met |"), "{md}");
        // No fillsync in the run, no 32 threads: those targets are left out, not missing.
        assert!(!md.contains("| fillsync |"), "{md}");
        assert!(!md.contains("| fillrandom | 32 |"), "{md}");
        assert!(
            md.contains("shale-capacity fillrandom threads 16 repeat 4: failed (exit 1)"),
            "{md}"
        );
        assert!(md.contains("25.0% of 0.0 MiB"), "{md}");
    }

    #[test]
    fn a_missing_placement_is_no_figure() {
        let text = csv(&["rocksdb,rocksdb-wal-fast,ycsb-A,2,1,9000,READ:40,,0,10,0,ok,raw/b"]);
        let md = render(&parse_csv(&text).unwrap());
        assert!(
            md.contains(
                "| shale-tiered | rocksdb-wal-fast | - | 9,000 | **-** | >= 2x | n/a (no figure) |"
            ),
            "{md}"
        );
        assert!(md.contains("| A (2 threads) | 9,000 |"), "{md}");
        assert!(md.contains("| A READ | 40 |"), "{md}");
    }
}
