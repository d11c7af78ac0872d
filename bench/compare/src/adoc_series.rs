//! Per-second series of one write run for bench/adoc.sh (issue #10): what each second did,
//! in the columns of `shale bench --timeline`, for shale and for RocksDB's db_bench alike, so
//! one chart and one summary serve both engines.
//!
//! shale writes the series itself (`shale bench --timeline FILE.csv`, one row per second:
//! [`SHALE_HEADER`]). db_bench has no such file; its series is pieced together from what it
//! prints (verified on 11.8.1):
//! - `ops`: the `--stats_interval_seconds=1` progress lines on stderr, each line's operations
//!   spread over the seconds it spans ([`crate::parse::per_second`]);
//! - everything else: the periodic dumps `--stats_dump_period_sec=1` writes into the store's
//!   info `LOG` (not stdout), one a second from the open: `Uptime(secs): T total`, the
//!   statistics' `rocksdb.stall.micros COUNT : N` (with `--statistics`; else the DB stats'
//!   `Cumulative stall: H:M:S`), the column family's `Write Stall (count): ...` counters, the
//!   `L0  F/C` row of its compaction stats and `Estimated pending compaction bytes: N`;
//! - `background_jobs` and `write_buffer_bytes`: the run's fixed settings, given by the caller;
//! - `p99_write_us` and `memtables`: not printed per second; left empty.
//!
//! RocksDB counts stall time only as a total (`rocksdb.stall.micros`, delays and stops, each
//! recorded when the stall ends, as shale's columns). Its per-kind figures are counts of the
//! times a stall condition was (re)computed, not of stalled writes, so the split of a second's
//! stall time by kind is an estimate: in proportion to the kinds' counts that rose in that
//! second, or, in a second where none rose, the last split seen. The exact per-second total
//! stays in an extra column, `stall_total_us`.

use std::fmt::Write as _;

use crate::Error;
use crate::parse;

/// The header `shale bench --timeline` writes.
pub const SHALE_HEADER: &str = "second,ops,p99_write_us,background_jobs,write_buffer_bytes,\
memtables,l0_files,pending_compaction_bytes,stall_memtable_count,stall_memtable_us,\
stall_l0_slowdown_count,stall_l0_slowdown_us,stall_l0_stop_count,stall_l0_stop_us,\
stall_pending_slowdown_count,stall_pending_slowdown_us,stall_pending_stop_count,\
stall_pending_stop_us,tuner";

/// The stall kinds of the columns, in order.
pub const KINDS: [&str; 5] =
    ["memtable", "l0_slowdown", "l0_stop", "pending_slowdown", "pending_stop"];

/// The kinds as the reports name them.
pub const KIND_TITLES: [&str; 5] =
    ["memtable", "L0 slowdown", "L0 stop", "pending slowdown", "pending stop"];

/// One second of a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Second {
    /// The second's end, in whole seconds since the benchmark began (1 for the first).
    pub second: u64,
    /// Operations completed in the second.
    pub ops: Option<f64>,
    /// p99 latency of the second's writes.
    pub p99_write_us: Option<f64>,
    /// Background threads at the second's end (ADOC's threads).
    pub background_jobs: Option<f64>,
    /// Memtable size at the second's end (ADOC's batch).
    pub write_buffer_bytes: Option<f64>,
    pub memtables: Option<f64>,
    pub l0_files: Option<f64>,
    pub pending_compaction_bytes: Option<f64>,
    /// Stalls that ended in the second, by kind ([`KINDS`]).
    pub stall_count: [Option<f64>; 5],
    /// Their microseconds, by kind.
    pub stall_us: [Option<f64>; 5],
    /// The exact total where the kinds are an estimate (RocksDB); `None`: the kinds' sum.
    pub stall_total_us: Option<f64>,
    /// The overflow the tuner answered last ("L0O", "RDO", "MMO"), or empty.
    pub tuner: String,
}

impl Second {
    /// Microseconds of stalls that ended in the second.
    pub fn stall_us_total(&self) -> f64 {
        self.stall_total_us.unwrap_or_else(|| self.stall_us.iter().flatten().sum())
    }
}

/// Parses a timeline CSV by its header's column names: shale's ([`SHALE_HEADER`]) or the one
/// [`to_csv`] writes for RocksDB. Empty cells are missing figures; unknown columns are
/// ignored, so a later shale may add some.
///
/// # Errors
/// No `second` column, or a row whose second is not a number.
pub fn parse_csv(text: &str) -> Result<Vec<Second>, Error> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<&str> = lines.next().ok_or("the timeline is empty")?.split(',').collect();
    let col = |name: &str| header.iter().position(|h| h.trim() == name);
    let second = col("second").ok_or("the timeline has no second column")?;
    let kind_cols = |suffix: &str| KINDS.map(|k| col(&format!("stall_{k}_{suffix}")));
    let (counts, micros) = (kind_cols("count"), kind_cols("us"));
    let named =
        ["ops", "p99_write_us", "background_jobs", "write_buffer_bytes", "memtables"].map(&col);
    let more = ["l0_files", "pending_compaction_bytes", "stall_total_us"].map(&col);
    let tuner = col("tuner");
    let mut out = Vec::new();
    for line in lines {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        let num = |c: Option<usize>| {
            c.and_then(|i| f.get(i)).and_then(|v| v.parse::<f64>().ok()).filter(|v| v.is_finite())
        };
        let s = f.get(second).copied().unwrap_or("");
        out.push(Second {
            second: s.parse().map_err(|_| format!("second {s:?} in {line:?}"))?,
            ops: num(named[0]),
            p99_write_us: num(named[1]),
            background_jobs: num(named[2]),
            write_buffer_bytes: num(named[3]),
            memtables: num(named[4]),
            l0_files: num(more[0]),
            pending_compaction_bytes: num(more[1]),
            stall_count: counts.map(num),
            stall_us: micros.map(num),
            stall_total_us: num(more[2]),
            tuner: tuner.and_then(|i| f.get(i)).unwrap_or(&"").to_string(),
        });
    }
    Ok(out)
}

/// Writes `rows` in shale's columns plus `stall_total_us`.
pub fn to_csv(rows: &[Second]) -> String {
    let mut s = format!("{SHALE_HEADER},stall_total_us\n");
    let cell = |s: &mut String, v: Option<f64>| match v {
        Some(v) if v.fract() == 0.0 => {
            let _ = write!(s, ",{v:.0}");
        }
        Some(v) => {
            let _ = write!(s, ",{v:.1}");
        }
        None => s.push(','),
    };
    for r in rows {
        let _ = write!(s, "{}", r.second);
        for v in [r.ops, r.p99_write_us, r.background_jobs, r.write_buffer_bytes, r.memtables] {
            cell(&mut s, v);
        }
        cell(&mut s, r.l0_files);
        cell(&mut s, r.pending_compaction_bytes);
        for k in 0..KINDS.len() {
            cell(&mut s, r.stall_count[k]);
            cell(&mut s, r.stall_us[k]);
        }
        let _ = write!(s, ",{}", r.tuner);
        cell(&mut s, r.stall_total_us);
        s.push('\n');
    }
    s
}

/// One periodic stats dump in RocksDB's info LOG.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Dump {
    /// Seconds since the store was opened.
    pub uptime: f64,
    /// `rocksdb.stall.micros`, cumulative (with `--statistics`).
    pub stall_micros: Option<u64>,
    /// `Cumulative stall`, in microseconds (milliseconds resolution).
    pub cumulative_stall_us: Option<u64>,
    /// Cumulative stall-condition counts by kind ([`KINDS`]).
    pub counts: [u64; 5],
    /// L0 files.
    pub l0_files: Option<u64>,
    /// Levels holding files, L0 included (dynamic level sizing leaves the levels between L0
    /// and the base level empty: a small store may sit in L0 and L6 alone).
    pub levels: usize,
    pub pending_compaction_bytes: Option<u64>,
}

impl Dump {
    /// Cumulative stall microseconds: the ticker, else the DB stats' line.
    pub fn stall_us(&self) -> Option<u64> {
        self.stall_micros.or(self.cumulative_stall_us)
    }
}

/// The kind a counter of `Write Stall (count):` adds to; `None` for the subsets and totals.
fn kind_of_counter(name: &str) -> Option<usize> {
    match name {
        "memtable-limit-delays" | "memtable-limit-stops" | "write-buffer-manager-limit-stops" => {
            Some(0)
        }
        "l0-file-count-limit-delays" => Some(1),
        "l0-file-count-limit-stops" => Some(2),
        "pending-compaction-bytes-delays" => Some(3),
        "pending-compaction-bytes-stops" => Some(4),
        _ => None,
    }
}

/// `00:01:2.345 H:M:S` as microseconds.
fn hms_us(text: &str) -> Option<u64> {
    let hms = text.split_whitespace().next()?;
    let mut parts = hms.split(':');
    let h: f64 = parts.next()?.parse().ok()?;
    let m: f64 = parts.next()?.parse().ok()?;
    let s: f64 = parts.next()?.parse().ok()?;
    Some(((h * 3600.0 + m * 60.0 + s) * 1e6).round() as u64)
}

/// The stats dumps of a RocksDB info LOG (whole, or only the lines bench/adoc.sh keeps), in
/// order. A dump runs from its `DUMPING STATS` line to the next; the statistics block that
/// follows it in the LOG belongs to it.
pub fn rocksdb_dumps(log: &str) -> Vec<Dump> {
    let mut out: Vec<Dump> = Vec::new();
    let mut uptime_seen = false;
    let mut l0_seen = false;
    for line in log.lines() {
        if line.contains("------- DUMPING STATS -------") {
            out.push(Dump::default());
            uptime_seen = false;
            l0_seen = false;
            continue;
        }
        let Some(d) = out.last_mut() else { continue };
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("Uptime(secs): ") {
            if !uptime_seen {
                d.uptime =
                    rest.split_whitespace().next().and_then(|v| v.parse().ok()).unwrap_or(0.0);
                uptime_seen = true;
            }
        } else if let Some(rest) = t.strip_prefix("Cumulative stall: ") {
            d.cumulative_stall_us = hms_us(rest);
        } else if let Some(rest) = t.strip_prefix("rocksdb.stall.micros COUNT : ") {
            d.stall_micros = rest.trim().parse().ok();
        } else if let Some(rest) = t.strip_prefix("Estimated pending compaction bytes: ") {
            d.pending_compaction_bytes = rest.trim().parse().ok();
        } else if let Some(rest) = t.strip_prefix("Write Stall (count): ") {
            for pair in rest.split(", ") {
                let Some((name, v)) = pair.split_once(": ") else { continue };
                if let (Some(k), Ok(v)) = (kind_of_counter(name.trim()), v.trim().parse::<u64>()) {
                    d.counts[k] += v;
                }
            }
        } else if let Some(level) = level_row(t) {
            // The per-level table comes once per dump (the priority table has no L rows).
            if level.0 == 0 && !l0_seen {
                d.l0_files = Some(level.1);
                l0_seen = true;
            }
            if level.1 > 0 {
                d.levels += 1;
            }
        }
    }
    out
}

/// A row of the compaction stats' level table, `L3     12/0   48.26 MB ...`: (level, files).
fn level_row(t: &str) -> Option<(usize, u64)> {
    let mut w = t.split_whitespace();
    let level = w.next()?.strip_prefix('L')?.parse().ok()?;
    let files = w.next()?.split_once('/')?.0.parse().ok()?;
    Some((level, files))
}

/// What a RocksDB run's series is built from.
pub struct RocksRun<'a> {
    /// db_bench's stderr (the progress lines).
    pub stderr: &'a str,
    /// The store's info LOG, whole or filtered.
    pub log: &'a str,
    /// `rocksdb.stall.micros` at the end of the run (db_bench's `--statistics` on stdout):
    /// what stalled after the last dump goes into the last second.
    pub final_stall_us: Option<u64>,
    pub background_jobs: Option<u64>,
    pub write_buffer_bytes: Option<u64>,
    /// The result line's operations and seconds: what finished after the last progress line
    /// is spread over the time from it to the end.
    pub result: Option<(u64, f64)>,
}

/// The progress lines of `stderr`, and one more for the operations the result line counts
/// past the last of them.
fn intervals_to_end(stderr: &str, result: Option<(u64, f64)>) -> Vec<parse::Interval> {
    let mut lines = parse::intervals(stderr);
    if let Some((operations, seconds)) = result {
        let seen: u64 = lines.iter().map(|i| i.ops).sum();
        let last = lines.iter().map(|i| i.seconds_total).fold(0.0, f64::max);
        if operations > seen && seconds > last {
            lines.push(parse::Interval {
                thread: 0,
                ops: operations - seen,
                ops_total: operations,
                seconds: seconds - last,
                seconds_total: seconds,
            });
        }
    }
    lines
}

/// RocksDB's per-second series (see the module's comment).
pub fn rocksdb_series(run: &RocksRun<'_>) -> Vec<Second> {
    let ops = parse::per_second(&intervals_to_end(run.stderr, run.result));
    let dumps = rocksdb_dumps(run.log);
    let last_dump = dumps.iter().map(|d| d.uptime.round() as u64).max().unwrap_or(0);
    let n = (ops.len() as u64).max(last_dump) as usize;
    let mut rows: Vec<Second> = (1..=n as u64)
        .map(|s| Second {
            second: s,
            ops: ops.get(s as usize - 1).map(|v| v.round()),
            background_jobs: run.background_jobs.map(|v| v as f64),
            write_buffer_bytes: run.write_buffer_bytes.map(|v| v as f64),
            ..Default::default()
        })
        .collect();
    let mut prev_stall = 0u64;
    let mut prev_counts = [0u64; 5];
    let mut weights: Option<[f64; 5]> = None;
    // Adds `us` of stall and `counts` rises to second `s` (1-based), split by the counts.
    let mut add = |rows: &mut Vec<Second>, s: usize, us: u64, rises: [u64; 5]| {
        if s == 0 {
            return;
        }
        if rows.len() < s {
            rows.resize_with(s, Default::default);
            for (i, r) in rows.iter_mut().enumerate() {
                r.second = i as u64 + 1;
            }
        }
        let total: u64 = rises.iter().sum();
        if total > 0 {
            weights = Some(rises.map(|c| c as f64 / total as f64));
        }
        let r = &mut rows[s - 1];
        for k in 0..KINDS.len() {
            let count = r.stall_count[k].unwrap_or(0.0) + rises[k] as f64;
            r.stall_count[k] = Some(count);
            let share = weights.map_or(0.0, |w| w[k]) * us as f64;
            r.stall_us[k] = Some(r.stall_us[k].unwrap_or(0.0) + share.round());
        }
        r.stall_total_us = Some(r.stall_total_us.unwrap_or(0.0) + us as f64);
    };
    for d in &dumps {
        let s = d.uptime.round() as usize;
        let stall = d.stall_us().unwrap_or(prev_stall);
        let rises: [u64; 5] = std::array::from_fn(|k| d.counts[k].saturating_sub(prev_counts[k]));
        add(&mut rows, s, stall.saturating_sub(prev_stall), rises);
        prev_stall = prev_stall.max(stall);
        prev_counts = d.counts;
        if s >= 1 && s <= rows.len() {
            let r = &mut rows[s - 1];
            r.l0_files = d.l0_files.map(|v| v as f64).or(Some(0.0));
            r.pending_compaction_bytes = d.pending_compaction_bytes.map(|v| v as f64);
        }
    }
    if let Some(end) = run.final_stall_us
        && end > prev_stall
    {
        let s = rows.len().max(1);
        add(&mut rows, s, end - prev_stall, [0; 5]);
    }
    // Seconds without a dump still have a stall of zero: RocksDB was asked every second.
    if !dumps.is_empty() {
        for r in &mut rows {
            if r.stall_total_us.is_none() {
                r.stall_total_us = Some(0.0);
                r.stall_us = [Some(0.0); 5];
                r.stall_count = [Some(0.0); 5];
            }
        }
    }
    rows
}

/// Totals of a series.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Totals {
    /// Stall microseconds by kind.
    pub stall_us: [f64; 5],
    /// All stall microseconds (the exact total where the kinds are estimated).
    pub stall_total_us: f64,
    /// Seconds in which the tuner's last answer was each overflow: L0O, RDO, MMO.
    pub tuner_seconds: [u64; 3],
}

/// The overflows the `tuner` column names, in the order [`Totals::tuner_seconds`] counts them.
pub const OVERFLOWS: [&str; 3] = ["L0O", "RDO", "MMO"];

/// Sums a series.
pub fn totals(rows: &[Second]) -> Totals {
    let mut t = Totals::default();
    for r in rows {
        for k in 0..KINDS.len() {
            t.stall_us[k] += r.stall_us[k].unwrap_or(0.0);
        }
        t.stall_total_us += r.stall_us_total();
        if let Some(i) = OVERFLOWS.iter().position(|o| *o == r.tuner) {
            t.tuner_seconds[i] += 1;
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    // db_bench 11.8.1 (the release build), 5 s of fillrandom with 1000-byte values and small
    // limits so that it stalls; the LOG as bench/adoc.sh filters it (see adoc_testdata/).
    const LOG: &str = include_str!("adoc_testdata/db_bench-fillrandom.LOG");
    const STDERR: &str = include_str!("adoc_testdata/db_bench-fillrandom.stderr");
    const STDOUT: &str = include_str!("adoc_testdata/db_bench-fillrandom.stdout");

    #[test]
    fn dumps_of_a_real_log() {
        let d = rocksdb_dumps(LOG);
        assert_eq!(d.len(), 6, "one at the open, then one a second");
        assert_eq!(d[0].uptime, 0.0);
        assert_eq!(d[1].uptime, 1.0);
        assert_eq!(d[1].stall_micros, Some(464_571));
        assert_eq!(d[1].cumulative_stall_us, Some(465_000));
        assert_eq!(d[1].l0_files, Some(4));
        assert_eq!(d[1].pending_compaction_bytes, Some(99_694_690));
        // l0-file-count-limit-delays 12, memtable-limit-stops 10 (the subsets left out).
        assert_eq!(d[1].counts, [10, 12, 0, 0, 0]);
        assert_eq!(d[1].levels, 3);
        assert_eq!(d[3].levels, 4, "L3 appears in the third second");
        assert_eq!(d[5].stall_micros, Some(2_958_541));
    }

    #[test]
    fn rocksdb_series_from_real_output() {
        let final_stall = parse::statistics(STDOUT).get("rocksdb.stall.micros").copied();
        let rows = rocksdb_series(&RocksRun {
            stderr: STDERR,
            log: LOG,
            final_stall_us: final_stall,
            background_jobs: Some(2),
            write_buffer_bytes: Some(4 << 20),
            result: Some((369_999, 5.007)),
        });
        assert_eq!(rows.len(), 5);
        assert_eq!(rows.iter().map(|r| r.second).collect::<Vec<_>>(), [1, 2, 3, 4, 5]);
        let t = totals(&rows);
        assert_eq!(t.stall_total_us, 2_958_541.0, "the ticker's total, second by second");
        assert_eq!(rows[0].stall_total_us, Some(464_571.0));
        // The first second's split: 12 L0 delays and 10 memtable stops.
        let r = &rows[0];
        assert_eq!(r.stall_us[1], Some((464_571.0f64 * 12.0 / 22.0).round()));
        assert_eq!(r.stall_us[0], Some((464_571.0f64 * 10.0 / 22.0).round()));
        assert!((t.stall_us.iter().sum::<f64>() - t.stall_total_us).abs() < 10.0);
        assert_eq!(r.background_jobs, Some(2.0));
        assert!(rows.iter().all(|r| r.ops.is_some_and(|o| o > 10_000.0)), "{rows:#?}");
        // The last second from the result line: all operations but 7 ms worth.
        let sum: f64 = rows.iter().filter_map(|r| r.ops).sum();
        assert!((sum - 369_999.0).abs() < 369_999.0 * 0.01, "{sum}");
        // Its CSV reads back the same.
        let back = parse_csv(&to_csv(&rows)).unwrap();
        assert_eq!(back, rows);
    }

    #[test]
    fn a_stall_without_new_counts_keeps_the_last_split_and_the_tail_goes_last() {
        let log = "------- DUMPING STATS -------\nUptime(secs): 0.0 total\n\
            rocksdb.stall.micros COUNT : 0\n\
            ------- DUMPING STATS -------\nUptime(secs): 1.0 total\n\
            Write Stall (count): l0-file-count-limit-stops: 1, memtable-limit-stops: 3, total-stops: 4\n\
            rocksdb.stall.micros COUNT : 400\n\
            ------- DUMPING STATS -------\nUptime(secs): 2.0 total\n\
            Write Stall (count): l0-file-count-limit-stops: 1, memtable-limit-stops: 3, total-stops: 4\n\
            rocksdb.stall.micros COUNT : 1200\n";
        let rows = rocksdb_series(&RocksRun {
            stderr: "",
            log,
            final_stall_us: Some(1300),
            background_jobs: None,
            write_buffer_bytes: None,
            result: None,
        });
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].stall_us[0], Some(300.0));
        assert_eq!(rows[0].stall_us[2], Some(100.0));
        assert_eq!(rows[1].stall_us[0], Some(675.0), "600 + 75 of the tail, split 3:1");
        assert_eq!(rows[1].stall_total_us, Some(900.0));
        assert_eq!(rows[1].stall_count[0], Some(0.0));
        assert_eq!(totals(&rows).stall_total_us, 1300.0);
    }

    #[test]
    fn shale_csv_by_column_names() {
        let text = format!(
            "{SHALE_HEADER}\n1,127742,41.0,2,67108864,2,0,0,1,102478,0,0,0,0,0,0,0,0,\n\
             2,96461,,4,134217728,1,2,0,2,132948,0,0,1,500,0,0,0,0,MMO\n"
        );
        let rows = parse_csv(&text).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].ops, Some(127_742.0));
        assert_eq!(rows[1].p99_write_us, None);
        assert_eq!(rows[1].background_jobs, Some(4.0));
        assert_eq!(
            rows[1].stall_us,
            [Some(132_948.0), Some(0.0), Some(500.0), Some(0.0), Some(0.0)]
        );
        assert_eq!(rows[1].tuner, "MMO");
        assert_eq!(rows[1].stall_us_total(), 133_448.0);
        let t = totals(&rows);
        assert_eq!(t.stall_total_us, 235_926.0);
        assert_eq!(t.tuner_seconds, [0, 0, 1]);
        assert!(parse_csv("ops\n1\n").is_err());
        assert!(parse_csv("second,ops\nx,1\n").is_err());
    }
}
