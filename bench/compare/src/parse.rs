//! Parsers for what the tools print: db_bench's (and `shale bench`'s) result lines, percentile
//! blocks, `--statistics` counters and `--stats_interval_seconds` progress lines, and the
//! figures of `shale inspect`.
//!
//! Both tools print the same shapes (shale bench copies db_bench's printf formats), so each
//! parser serves both; where they differ (db_bench prefixes interval lines with a date, shale
//! with the benchmark's name) the parser accepts either.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

/// One benchmark's result line:
/// `fillrandom   :       9.325 micros/op 107212 ops/sec 0.187 seconds 20000 operations;   11.9 MB/s`.
#[derive(Clone, Debug, PartialEq)]
pub struct ResultLine {
    /// The benchmark's name.
    pub name: String,
    /// Threads' summed time per operation.
    pub micros_per_op: f64,
    /// Operations per second of wall-clock time.
    pub ops_per_sec: f64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Operations done.
    pub operations: u64,
    /// MB/s (2^20 bytes), when the benchmark moved bytes.
    pub mb_per_sec: Option<f64>,
    /// `(found, looked up)` for lookups.
    pub found: Option<(u64, u64)>,
}

static RESULT_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^([a-z0-9_]+)\s+:\s+([0-9.]+) micros/op ([0-9]+) ops/sec ([0-9.]+) seconds ([0-9]+) operations;(?:\s+([0-9.]+) MB/s)?(?:\s+\(([0-9]+) of ([0-9]+) found\))?",
    )
    .expect("the result-line pattern compiles")
});

/// Parses one result line; `None` for any other line.
pub fn parse_result_line(line: &str) -> Option<ResultLine> {
    let c = RESULT_LINE.captures(line.trim_end())?;
    let num = |i: usize| c.get(i).and_then(|m| m.as_str().parse::<f64>().ok());
    let int = |i: usize| c.get(i).and_then(|m| m.as_str().parse::<u64>().ok());
    Some(ResultLine {
        name: c[1].to_string(),
        micros_per_op: num(2)?,
        ops_per_sec: num(3)?,
        seconds: num(4)?,
        operations: int(5)?,
        mb_per_sec: num(6),
        found: int(7).zip(int(8)),
    })
}

/// Every result line of a run's output, in order.
pub fn result_lines(text: &str) -> Vec<ResultLine> {
    text.lines().filter_map(parse_result_line).collect()
}

/// The percentile line of a `--histogram` block, in microseconds, and the block's maximum.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Percentiles {
    pub p50: f64,
    pub p75: f64,
    pub p99: f64,
    pub p99_9: f64,
    pub p99_99: f64,
    /// The `Max:` of the block's `Min: ... Median: ... Max: N` line (whole microseconds, the
    /// exact largest sample in both tools); 0 from [`parse_percentile_line`] alone.
    pub max: f64,
}

static MAX_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^Min: [0-9.]+\s+Median: [0-9.]+\s+Max: ([0-9.]+)")
        .expect("the min-median-max pattern compiles")
});

static PERCENTILE_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^Percentiles: P50: ([0-9.]+) P75: ([0-9.]+) P99: ([0-9.]+) P99\.9: ([0-9.]+) P99\.99: ([0-9.]+)",
    )
    .expect("the percentile pattern compiles")
});

/// Parses `Percentiles: P50: 7.38 P75: 8.83 P99: 17.97 P99.9: 223.33 P99.99: 3650.00`.
pub fn parse_percentile_line(line: &str) -> Option<Percentiles> {
    let c = PERCENTILE_LINE.captures(line.trim())?;
    let v = |i: usize| c[i].parse::<f64>().ok();
    Some(Percentiles { p50: v(1)?, p75: v(2)?, p99: v(3)?, p99_9: v(4)?, p99_99: v(5)?, max: 0.0 })
}

/// The percentile block printed after each benchmark's result line, by benchmark name (the
/// last block wins when a name repeats). Both tools print the block right after the result
/// line it belongs to, so a block belongs to the result line before it; blocks before any
/// result line (db_bench's per-level read-latency histograms in `stats`) are not benchmarks'.
pub fn percentiles_by_benchmark(text: &str) -> BTreeMap<String, Percentiles> {
    let mut out = BTreeMap::new();
    let mut last: Option<String> = None;
    let mut max = 0.0;
    for line in text.lines() {
        if let Some(r) = parse_result_line(line) {
            last = Some(r.name);
            max = 0.0;
        } else if let Some(c) = MAX_LINE.captures(line.trim()) {
            max = c[1].parse().unwrap_or(0.0);
        } else if let Some(p) = parse_percentile_line(line) {
            if let Some(name) = last.take() {
                out.insert(name, Percentiles { max, ..p });
            }
        } else if line.starts_with("** ") {
            // A stats dump begins: its histograms are not a benchmark's.
            last = None;
        }
    }
    out
}

/// The counters of a `--statistics` dump: lines `name COUNT : value` (RocksDB's tickers and
/// shale's counters); RocksDB's histogram lines (`name P50 : ...`) are skipped.
pub fn statistics(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some((name, value)) = line.split_once(" COUNT : ") else { continue };
        if name.contains(' ') {
            continue;
        }
        if let Ok(v) = value.trim().parse::<u64>() {
            out.insert(name.to_string(), v);
        }
    }
    out
}

/// One progress line of `--stats_interval_seconds`:
/// db_bench: `2026/11/21-16:38:13  ... thread 0: (63000,63000) ops and (62846.0,62846.0) ops/second in (1.002450,1.002450) seconds`;
/// shale: `fillrandom: thread 0: (63000,63000) ops and ... seconds`.
#[derive(Clone, Debug, PartialEq)]
pub struct Interval {
    /// The reporting thread.
    pub thread: usize,
    /// Operations in this interval.
    pub ops: u64,
    /// Operations since the benchmark began.
    pub ops_total: u64,
    /// Seconds this interval lasted.
    pub seconds: f64,
    /// Seconds since the benchmark began, at the end of this interval.
    pub seconds_total: f64,
}

static INTERVAL_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"thread ([0-9]+): \(([0-9]+),([0-9]+)\) ops and \(([0-9.]+),([0-9.]+)\) ops/second in \(([0-9.]+),([0-9.]+)\) seconds",
    )
    .expect("the interval pattern compiles")
});

/// Parses one progress line; `None` for any other line.
pub fn parse_interval_line(line: &str) -> Option<Interval> {
    let c = INTERVAL_LINE.captures(line)?;
    Some(Interval {
        thread: c[1].parse().ok()?,
        ops: c[2].parse().ok()?,
        ops_total: c[3].parse().ok()?,
        seconds: c[6].parse().ok()?,
        seconds_total: c[7].parse().ok()?,
    })
}

/// Every progress line of a run's stderr.
pub fn intervals(text: &str) -> Vec<Interval> {
    text.lines().filter_map(parse_interval_line).collect()
}

/// Operations per second in each whole second since the start, from progress lines of any
/// number of threads. An interval's operations are spread evenly over the seconds it spans,
/// so a write stall that holds a thread for 5 s shows as 5 slow seconds, not one. A last
/// partial second is left out: its operations over a whole second would read as a dip.
pub fn per_second(intervals: &[Interval]) -> Vec<f64> {
    let end = intervals.iter().map(|i| i.seconds_total).fold(0.0, f64::max);
    let mut out = vec![0.0; end.floor() as usize];
    for i in intervals {
        let (start, stop) = ((i.seconds_total - i.seconds).max(0.0), i.seconds_total);
        if stop <= start {
            continue;
        }
        let rate = i.ops as f64 / (stop - start);
        let mut s = start.floor() as usize;
        while (s as f64) < stop && s < out.len() {
            let overlap = stop.min(s as f64 + 1.0) - start.max(s as f64);
            out[s] += rate * overlap.max(0.0);
            s += 1;
        }
    }
    out
}

/// What `shale inspect` says about a store's space.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Inspect {
    /// Bytes of the volume (its file's size).
    pub capacity_bytes: u64,
    /// Bytes per slot.
    pub slot_bytes: u64,
    /// Slots holding live SSTs.
    pub slots_live: u64,
    /// Bytes of the WAL area (reserved at format time).
    pub wal_area_bytes: u64,
    /// Bytes of one version-log mirror (there are two).
    pub version_log_bytes: u64,
    /// Live bytes of the version log ring.
    pub version_log_live_bytes: u64,
}

impl Inspect {
    /// Bytes of live SSTs, in whole slots.
    pub fn live_slot_bytes(&self) -> u64 {
        self.slots_live * self.slot_bytes
    }
}

/// Parses `shale inspect`'s output; `None` when a figure is missing.
pub fn parse_inspect(text: &str) -> Option<Inspect> {
    let mut out = Inspect::default();
    let mut seen = 0;
    let words_after = |line: &str, key: &str| -> Option<Vec<String>> {
        let rest = line.trim_start().strip_prefix(key)?;
        Some(rest.split_whitespace().map(str::to_string).collect())
    };
    for line in text.lines() {
        if let Some(w) = words_after(line, "device") {
            // `device        file backend, 1234 bytes (1.2 MiB), ...`
            let i = w.iter().position(|x| x == "bytes")?;
            out.capacity_bytes = w.get(i.checked_sub(1)?)?.parse().ok()?;
            seen |= 1;
        } else if let Some(w) = words_after(line, "WAL") {
            // `              WAL                 1234       5678`
            out.wal_area_bytes = w.get(1)?.parse().ok()?;
            seen |= 2;
        } else if let Some(w) = words_after(line, "version log A") {
            out.version_log_bytes = w.get(1)?.parse().ok()?;
            seen |= 4;
        } else if let Some(w) = words_after(line, "slots  ") {
            // `slots          8192  65536 each` (layout) or `slots         12 total: 3 live, ...`
            if w.get(1).map(String::as_str) == Some("total:") {
                out.slots_live = w.get(2)?.parse().ok()?;
                seen |= 8;
            } else if w.get(2).map(String::as_str) == Some("each") {
                out.slot_bytes = w.get(1)?.parse().ok()?;
                seen |= 16;
            }
        } else if line.contains("ring bytes live") {
            // `head at N, U of R ring bytes live (x%), ...`
            let w: Vec<&str> = line.split_whitespace().collect();
            let i = w.iter().position(|x| *x == "of")?;
            out.version_log_live_bytes = w.get(i.checked_sub(1)?)?.parse().ok()?;
            seen |= 32;
        }
    }
    (seen == 63).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_lines_of_both_shapes() {
        let r = parse_result_line(
            "fillrandom   :       9.325 micros/op 107212 ops/sec 0.187 seconds 20000 operations;   11.9 MB/s",
        )
        .unwrap();
        assert_eq!(r.name, "fillrandom");
        assert_eq!((r.micros_per_op, r.ops_per_sec, r.seconds), (9.325, 107212.0, 0.187));
        assert_eq!((r.operations, r.mb_per_sec, r.found), (20000, Some(11.9), None));
        let r = parse_result_line("readrandom   :       3.560 micros/op 280579 ops/sec 0.071 seconds 20000 operations;   19.8 MB/s (12778 of 20000 found)").unwrap();
        assert_eq!(r.found, Some((12778, 20000)));
        let r = parse_result_line(
            "compact      :  500000.000 micros/op 2 ops/sec 0.500 seconds 1 operations;",
        )
        .unwrap();
        assert_eq!((r.mb_per_sec, r.operations), (None, 1));
        assert!(parse_result_line("Microseconds per write:").is_none());
        assert!(parse_result_line("DB path: [/tmp/x]").is_none());
    }

    #[test]
    fn intervals_spread_over_the_seconds_they_span() {
        let lines = [
            Interval { thread: 0, ops: 100, ops_total: 100, seconds: 1.0, seconds_total: 1.0 },
            // A 3-second stall in which 30 operations finished.
            Interval { thread: 0, ops: 30, ops_total: 130, seconds: 3.0, seconds_total: 4.0 },
            Interval { thread: 1, ops: 50, ops_total: 50, seconds: 0.5, seconds_total: 0.5 },
        ];
        let s = per_second(&lines);
        assert_eq!(s.len(), 4);
        assert!((s[0] - 150.0).abs() < 1e-9, "{s:?}");
        for v in &s[1..] {
            assert!((v - 10.0).abs() < 1e-9, "{s:?}");
        }
        assert!(per_second(&[]).is_empty());
    }

    #[test]
    fn statistics_skip_histogram_lines() {
        let s = statistics(
            "STATISTICS:\nrocksdb.wal.bytes COUNT : 2620000\n\
             rocksdb.db.get.micros P50 : 2.4 P95 : 5.0 P99 : 12.0 P100 : 677.0 COUNT : 20000 SUM : 63003\n\
             shale.sst.bytes.written COUNT : 12\n",
        );
        assert_eq!(s.len(), 2);
        assert_eq!(s["rocksdb.wal.bytes"], 2_620_000);
        assert_eq!(s["shale.sst.bytes.written"], 12);
    }

    // Real output, captured from the tools (tests/data/README.md says how).
    const DB_BENCH_RANDOM: &str = include_str!("../tests/data/db_bench-random.stdout");
    const DB_BENCH_INTERVALS: &str =
        include_str!("../tests/data/db_bench-fillrandom-intervals.stderr");
    const SHALE_RANDOM: &str = include_str!("../tests/data/shale-random.stdout");
    const SHALE_INTERVALS: &str = include_str!("../tests/data/shale-random.stderr");
    const SHALE_INSPECT: &str = include_str!("../tests/data/shale-inspect.txt");

    #[test]
    fn db_bench_output_gives_results_percentiles_and_counters() {
        let names: Vec<String> =
            result_lines(DB_BENCH_RANDOM).into_iter().map(|r| r.name).collect();
        assert_eq!(names, ["fillrandom", "readrandom", "seekrandom", "readseq", "overwrite"]);
        let seek = result_lines(DB_BENCH_RANDOM).into_iter().find(|r| r.name == "seekrandom");
        let seek = seek.unwrap();
        assert_eq!(
            (seek.ops_per_sec, seek.mb_per_sec, seek.found),
            (31758.0, None, Some((12546, 20000)))
        );
        let p = percentiles_by_benchmark(DB_BENCH_RANDOM);
        assert_eq!(
            p.keys().collect::<Vec<_>>(),
            ["fillrandom", "overwrite", "readrandom", "readseq", "seekrandom"]
        );
        assert!(p.values().all(|x| x.p50 <= x.p99 && x.p99 <= x.p99_99), "{p:?}");
        // The block's Max, each benchmark its own (readrandom's block is after a blank line).
        assert_eq!((p["fillrandom"].max, p["readrandom"].max), (64148.0, 38310.0));
        assert!(p.values().all(|x| x.p99_99 <= x.max), "{p:?}");
        let c = statistics(DB_BENCH_RANDOM);
        assert_eq!(c["rocksdb.number.keys.written"], 40_000);
        assert_eq!(
            c["rocksdb.bytes.written"],
            40_000 * 131,
            "12 B batch header + 3 B record framing"
        );
        assert!(c["rocksdb.wal.bytes"] > 0 && c["rocksdb.flush.write.bytes"] > 0);
        assert!(c.contains_key("rocksdb.compact.write.bytes"));
        assert!(!c.contains_key("rocksdb.db.get.micros"), "histograms are not counters");
    }

    #[test]
    fn shale_output_gives_results_percentiles_and_counters() {
        let r = result_lines(SHALE_RANDOM);
        assert_eq!(
            r.len(),
            9,
            "fillrandom, flush, waitforcompaction, 3 reads, overwrite, flush, wait"
        );
        assert_eq!(r[2].name, "waitforcompaction", "a name longer than the 12-column field");
        assert_eq!(r[3].found, Some((12641, 20000)));
        let p = percentiles_by_benchmark(SHALE_RANDOM);
        assert_eq!(p["readrandom"].p99, 98.44);
        assert_eq!(p["fillrandom"].p99_99, 40894.46);
        assert_eq!((p["readrandom"].max, p["fillrandom"].max), (8122.0, 80125.0));
        let c = statistics(SHALE_RANDOM);
        assert_eq!(c["shale.bytes.written"], 5_480_000);
        assert_eq!(c["shale.wal.bytes"], 169_553_920);
        assert_eq!(c.len(), 14);
    }

    #[test]
    fn interval_lines_of_both_tools() {
        let d = intervals(DB_BENCH_INTERVALS);
        assert_eq!(d.len(), 6);
        assert_eq!(
            d[1],
            Interval {
                thread: 0,
                ops: 79000,
                ops_total: 142000,
                seconds: 1.014456,
                seconds_total: 2.016906
            }
        );
        let s = intervals(SHALE_INTERVALS);
        assert_eq!(s.len(), 13, "7 of fillrandom, 6 of overwrite");
        assert_eq!(s[0].ops, 2445);
        // Per-second series: about one value per second, adding up to the operations.
        let fill: Vec<Interval> = s[..7].to_vec();
        let per = per_second(&fill);
        assert_eq!(per.len(), 7, "the last 0.0135 s are no whole second");
        let total: f64 = per.iter().sum();
        // All operations but the last interval's share of its 0.0135 s past second 7.
        let tail = 5003.0 * (7.013500 - 7.0) / 1.001636;
        assert!((total - (17961.0 - tail)).abs() < 1.0, "{total}");
        assert!(parse_interval_line("DB path: [/tmp]").is_none());
    }

    #[test]
    fn inspect_figures() {
        let i = parse_inspect(SHALE_INSPECT).unwrap();
        assert_eq!(i.capacity_bytes, 352_329_728);
        assert_eq!((i.slot_bytes, i.slots_live), (1_048_576, 3));
        assert_eq!(i.wal_area_bytes, 268_435_456);
        assert_eq!(i.version_log_bytes, 8_388_608);
        assert_eq!(i.version_log_live_bytes, 69_632);
        assert_eq!(i.live_slot_bytes(), 3 << 20);
        assert!(parse_inspect("volume x\n").is_none());
    }
}
