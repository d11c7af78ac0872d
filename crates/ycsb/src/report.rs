//! The result of a load or run, printed in YCSB's text format
//! (`site.ycsb.measurements.exporter.TextMeasurementsExporter` over HdrHistogram measurements):
//!
//! ```text
//! [OVERALL], RunTime(ms), 10146
//! [OVERALL], Throughput(ops/sec), 9856.100926473487
//! [READ], Operations, 49872
//! [READ], AverageLatency(us), 77.43270372152711
//! [READ], MinLatency(us), 9
//! [READ], MaxLatency(us), 14591
//! [READ], 50thPercentileLatency(us), 42
//! [READ], 95thPercentileLatency(us), 231
//! [READ], 99thPercentileLatency(us), 571
//! [READ], 99.9PercentileLatency(us), 2005
//! [READ], Return=OK, 49872
//! ```
//!
//! As YCSB, an operation that does not succeed counts under its own name by status
//! (`Return=NOT_FOUND`, `Return=ERROR`) but its latency goes to a separate `[READ-FAILED]`
//! block, so the percentiles of `[READ]` are those of successful reads. (YCSB's own
//! `[READ-MODIFY-WRITE]` block keeps its failures; here they go to
//! `[READ-MODIFY-WRITE-FAILED]` like every other operation's.) Latencies are recorded in
//! nanoseconds (three significant digits) and printed in whole microseconds, truncated, as
//! YCSB records them; the average keeps its fraction. Throughput is operations over the exact
//! run time (YCSB divides by whole milliseconds). Numbers with a fraction print as Java's
//! `Double.toString` prints them, so parsers of YCSB output read these too. YCSB's JVM lines
//! (`[TOTAL_GCS_...]`, `[CLEANUP]`) have no counterpart and are left out.

use std::fmt;
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::latency::Latency;
use crate::workload::Operation;

/// Engine errors a report keeps the message of; later ones are only counted.
pub const ERRORS_KEPT: usize = 10;

/// Which phase a report is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Inserting the records (YCSB's `-load`).
    Load,
    /// Running the workload's operations (YCSB's `-t`).
    Run,
}

impl Phase {
    /// `load` or `run`, the label of the phase's tail lines.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Load => "load",
            Phase::Run => "run",
        }
    }
}

/// How one operation ended (YCSB's `Status`, the ones a key-value engine can return).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Done.
    Ok,
    /// The record does not exist (a read or update of a missing key).
    NotFound,
    /// The engine returned an error.
    Error,
}

impl Status {
    /// YCSB's name, as in `Return=NOT_FOUND`.
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::NotFound => "NOT_FOUND",
            Status::Error => "ERROR",
        }
    }
}

/// Counts and latencies of one kind of operation.
#[non_exhaustive]
#[derive(Clone, Debug)]
pub struct OpReport {
    /// Which operation.
    pub operation: Operation,
    /// Latencies of the operations that returned OK, measured by the client thread around
    /// the engine's call.
    pub latency: Latency,
    /// Latencies of the others (NOT_FOUND or ERROR): YCSB's `[OP-FAILED]`.
    pub failed_latency: Latency,
    /// Operations that returned OK.
    pub ok: u64,
    /// Operations that found no record.
    pub not_found: u64,
    /// Operations the engine failed.
    pub error: u64,
}

impl OpReport {
    /// No operations yet.
    pub fn new(operation: Operation) -> OpReport {
        OpReport {
            operation,
            latency: Latency::new(),
            failed_latency: Latency::new(),
            ok: 0,
            not_found: 0,
            error: 0,
        }
    }

    /// Counts one operation that ended with `status` after `latency`.
    pub fn record(&mut self, status: Status, latency: Duration) {
        let (hist, count) = match status {
            Status::Ok => (&mut self.latency, &mut self.ok),
            Status::NotFound => (&mut self.failed_latency, &mut self.not_found),
            Status::Error => (&mut self.failed_latency, &mut self.error),
        };
        hist.record(latency);
        *count += 1;
    }

    /// Adds another thread's counts of the same operation.
    pub fn merge(&mut self, other: &OpReport) {
        assert_eq!(self.operation, other.operation, "merging reports of different operations");
        self.latency.merge(&other.latency);
        self.failed_latency.merge(&other.failed_latency);
        self.ok += other.ok;
        self.not_found += other.not_found;
        self.error += other.error;
    }

    /// Operations of every status.
    pub fn count(&self) -> u64 {
        self.ok + self.not_found + self.error
    }

    /// The latency below which `percentile` percent of the OK operations fall, in whole
    /// microseconds.
    pub fn percentile_us(&self, percentile: f64) -> u64 {
        self.latency.histogram().value_at_percentile(percentile) / 1000
    }
}

/// What a load or run did: YCSB's report. `Display` prints it in YCSB's format.
#[non_exhaustive]
#[derive(Clone, Debug)]
pub struct Report {
    /// Load or run.
    pub phase: Phase,
    /// The engine's [`name`](crate::Engine::name).
    pub engine: String,
    /// Wall-clock time from the threads' start to the last one's end.
    pub runtime: Duration,
    /// Operations done, of every status.
    pub operations: u64,
    /// One entry per operation that ran, in [`Operation::ALL`]'s order.
    pub ops: Vec<OpReport>,
    /// The first [`ERRORS_KEPT`] engine errors, as `OPERATION key: message`.
    pub errors: Vec<String>,
}

impl Report {
    /// Operations per second over [`runtime`](Self::runtime).
    pub fn throughput(&self) -> f64 {
        let secs = self.runtime.as_secs_f64();
        if secs > 0.0 { self.operations as f64 / secs } else { 0.0 }
    }

    /// The counts of one operation, if it ran.
    pub fn op(&self, operation: Operation) -> Option<&OpReport> {
        self.ops.iter().find(|o| o.operation == operation)
    }

    /// The phase's tail lines ([`crate::latency`]), each ending in a newline: per operation
    /// that ran, its OK operations (`READ`), then, if any, the others (`READ-FAILED`), as the
    /// YCSB blocks split them. They are not YCSB's format: print them after the report.
    pub fn tail_lines(&self) -> String {
        let mut out = String::new();
        for op in &self.ops {
            let name = op.operation.name();
            if let Some(t) = op.latency.tail() {
                out.push_str(&t.line(self.phase.name(), name));
                out.push('\n');
            }
            if let Some(t) = op.failed_latency.tail() {
                out.push_str(&t.line(self.phase.name(), &format!("{name}-FAILED")));
                out.push('\n');
            }
        }
        out
    }

    /// Operations the engine failed, over all kinds (`Return=ERROR`).
    pub fn error_count(&self) -> u64 {
        self.ops.iter().map(|o| o.error).sum()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "[OVERALL], RunTime(ms), {}", self.runtime.as_millis())?;
        writeln!(f, "[OVERALL], Throughput(ops/sec), {}", java_double(self.throughput()))?;
        for op in &self.ops {
            let name = op.operation.name();
            write_latencies(f, name, op.latency.histogram())?;
            for (status, n) in
                [(Status::Ok, op.ok), (Status::NotFound, op.not_found), (Status::Error, op.error)]
            {
                if n > 0 {
                    writeln!(f, "[{name}], Return={}, {n}", status.name())?;
                }
            }
            if !op.failed_latency.is_empty() {
                write_latencies(f, &format!("{name}-FAILED"), op.failed_latency.histogram())?;
            }
        }
        Ok(())
    }
}

/// One measurement's block: YCSB's `OneMeasurementHdrHistogram.exportMeasurements` with the
/// percentiles 50, 95, 99 and 99.9 (YCSB labels a whole percentile `50th` and a fractional one
/// `99.9`).
fn write_latencies(f: &mut fmt::Formatter<'_>, name: &str, h: &Histogram<u64>) -> fmt::Result {
    let us = |ns: u64| ns / 1000;
    writeln!(f, "[{name}], Operations, {}", h.len())?;
    writeln!(f, "[{name}], AverageLatency(us), {}", java_double(h.mean() / 1000.0))?;
    writeln!(f, "[{name}], MinLatency(us), {}", if h.is_empty() { 0 } else { us(h.min()) })?;
    writeln!(f, "[{name}], MaxLatency(us), {}", if h.is_empty() { 0 } else { us(h.max()) })?;
    for (label, p) in [("50th", 50.0), ("95th", 95.0), ("99th", 99.0), ("99.9", 99.9)] {
        writeln!(f, "[{name}], {label}PercentileLatency(us), {}", us(h.value_at_percentile(p)))?;
    }
    Ok(())
}

/// `d` as Java's `Double.toString` writes it: the shortest digits that read back as `d`, with
/// at least one digit after the point, in scientific notation (`1.0E7`) outside
/// `[1e-3, 1e7)`.
pub fn java_double(d: f64) -> String {
    if d.is_nan() {
        return "NaN".into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    let magnitude = d.abs();
    if magnitude == 0.0 || (1e-3..1e7).contains(&magnitude) {
        let s = d.to_string();
        return if s.contains('.') { s } else { s + ".0" };
    }
    let s = format!("{d:e}");
    let (mantissa, exponent) = s.split_once('e').expect("`{:e}` writes an exponent");
    let mantissa =
        if mantissa.contains('.') { mantissa.to_string() } else { format!("{mantissa}.0") };
    format!("{mantissa}E{exponent}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_print_as_java() {
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(java_double(1000.0), "1000.0");
        assert_eq!(java_double(9856.125), "9856.125");
        assert_eq!(java_double(1.0 / 3.0), "0.3333333333333333");
        assert_eq!(java_double(0.5), "0.5");
        assert_eq!(java_double(0.001), "0.001");
        assert_eq!(java_double(0.0001), "1.0E-4");
        assert_eq!(java_double(12_345_678.9), "1.23456789E7");
        assert_eq!(java_double(1e7), "1.0E7");
        assert_eq!(java_double(f64::NAN), "NaN");
    }

    fn sample_report() -> Report {
        let mut read = OpReport::new(Operation::Read);
        for us in 1..=1000u64 {
            read.record(Status::Ok, Duration::from_micros(us));
        }
        read.record(Status::NotFound, Duration::from_micros(5));
        read.record(Status::Error, Duration::from_micros(7));
        let mut update = OpReport::new(Operation::Update);
        update.record(Status::Ok, Duration::from_nanos(1500));
        Report {
            phase: Phase::Run,
            engine: "test".into(),
            runtime: Duration::from_millis(2000),
            operations: 1003,
            ops: vec![read, update],
            errors: vec!["READ user1: boom".into()],
        }
    }

    #[test]
    fn report_prints_ycsbs_lines() {
        let text = sample_report().to_string();
        let want = "\
[OVERALL], RunTime(ms), 2000
[OVERALL], Throughput(ops/sec), 501.5
[READ], Operations, 1000
[READ], AverageLatency(us), ";
        assert!(text.starts_with(want), "{text}");
        for line in [
            "[READ], MinLatency(us), 1\n",
            "[READ], MaxLatency(us), 1000\n",
            "[READ], 50thPercentileLatency(us), 500\n",
            "[READ], 95thPercentileLatency(us), 950\n",
            "[READ], 99thPercentileLatency(us), 990\n",
            // 99.9% of 1000 samples rounds up to the last one, as HdrHistogram counts.
            "[READ], 99.9PercentileLatency(us), 1000\n",
            "[READ], Return=OK, 1000\n[READ], Return=NOT_FOUND, 1\n[READ], Return=ERROR, 1\n",
            "[READ-FAILED], Operations, 2\n",
            "[UPDATE], Operations, 1\n[UPDATE], AverageLatency(us), 1.5\n",
            "[UPDATE], MinLatency(us), 1\n",
            "[UPDATE], Return=OK, 1\n",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        assert!(!text.contains("[UPDATE-FAILED]"), "{text}");
        let every_line = regex_free_check(&text);
        assert!(every_line, "{text}");
    }

    /// Every line is `[NAME], Label, number`.
    fn regex_free_check(text: &str) -> bool {
        text.lines().all(|l| {
            let parts: Vec<&str> = l.split(", ").collect();
            parts.len() == 3
                && parts[0].starts_with('[')
                && parts[0].ends_with(']')
                && parts[2].parse::<f64>().is_ok()
        })
    }

    #[test]
    fn tail_lines_per_operation() {
        let text = sample_report().tail_lines();
        let lines: Vec<crate::latency::TailLine> = text
            .lines()
            .map(|l| crate::latency::TailLine::parse(l).unwrap_or_else(|| panic!("{l}")))
            .collect();
        let ops: Vec<(&str, &str, u64)> =
            lines.iter().map(|l| (l.label.as_str(), l.op.as_str(), l.ops)).collect();
        assert_eq!(ops, [("run", "READ", 1000), ("run", "READ-FAILED", 2), ("run", "UPDATE", 1)]);
        // 500 us lies in a bucket 0.1% wide, whose top the percentile reports.
        assert!((500.0..500.5).contains(&lines[0].p50_us), "{text}");
        assert_eq!(lines[0].max_us, 1000.0);
        assert_eq!((lines[2].p50_us, lines[2].max_us), (1.5, 1.5));
    }

    #[test]
    fn merge_and_accessors() {
        let r = sample_report();
        let read = r.op(Operation::Read).unwrap();
        assert_eq!((read.count(), read.ok, r.error_count()), (1002, 1000, 1));
        assert_eq!(read.percentile_us(50.0), 500);
        assert!(r.op(Operation::Scan).is_none());
        assert!((r.throughput() - 501.5).abs() < 1e-9);
        let mut a = OpReport::new(Operation::Read);
        a.merge(read);
        a.merge(read);
        assert_eq!((a.ok, a.not_found, a.latency.count()), (2000, 2, 2000));
    }
}
