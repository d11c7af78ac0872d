//! KVSB's report: db_bench-style lines per instance and in total, the same for every engine,
//! a CSV row per line group, and a parser of the lines (for tests and summaries).
//!
//! For each workload, each instance `i` and then the total (label `NAME[i]`, then `NAME`):
//!
//! ```text
//! randfill[0]  :      12.345 micros/op 81004 ops/sec 12.345 seconds 1000000 operations; 316.4 MB/s
//! randfill[0]  put latency micros : p50 3.100 p99 12.000 p99.9 40.200 max 812.000 ops 1000000
//! randfill[0]  write amplification : 1.0012 (device 4096000000 / user 4016000000 bytes; gc 0 bytes, no GC yet; source /sys/block/loop0/stat)
//! randfill     : ...
//! randfill     put latency micros : ...
//! randfill     write amplification : ...
//! randfill     cpu : 10.200 micros/op (user 8.000 s, sys 2.200 s, 2000000 ops); rss 412300000 bytes
//! ```
//!
//! The total's seconds are the slowest instance's (they start together), its operations the
//! sum; micros/op is one over its throughput, as db_bench's for one thread. The latency lines
//! are [`crate::latency`]'s tail lines, one per operation type that ran (`get`, then `put`;
//! a YCSB D insert is a put), from submission to completion as the client thread sees it.

use std::fmt::Write as _;
use std::time::Duration;

use crate::kvsb::process::CpuTime;
use crate::latency::{Latency, TailLine};

/// What one instance did in one workload.
#[derive(Clone, Debug)]
pub struct InstanceResult {
    /// Operations completed (errors included).
    pub ops: u64,
    /// Of them, gets; and gets that found their key.
    pub gets: u64,
    pub found: u64,
    /// Operations that failed, and the first error's message.
    pub errors: u64,
    pub first_error: Option<String>,
    /// Key and value bytes of the puts.
    pub user_bytes: u64,
    /// Bytes written to the device during the workload, and of them by GC.
    pub device_bytes: u64,
    pub gc_bytes: u64,
    /// Where the device bytes come from, and a note on GC.
    pub written_source: String,
    pub gc_note: String,
    /// From the barrier to the instance's last completion.
    pub elapsed: Duration,
    /// Latency of each get, and of each put, submission to completion.
    pub get_latency: Latency,
    pub put_latency: Latency,
}

impl Default for InstanceResult {
    fn default() -> InstanceResult {
        InstanceResult {
            ops: 0,
            gets: 0,
            found: 0,
            errors: 0,
            first_error: None,
            user_bytes: 0,
            device_bytes: 0,
            gc_bytes: 0,
            written_source: String::new(),
            gc_note: String::new(),
            elapsed: Duration::ZERO,
            get_latency: Latency::new(),
            put_latency: Latency::new(),
        }
    }
}

impl InstanceResult {
    fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Host write amplification: device bytes over user bytes (0 without puts).
    pub fn write_amplification(&self) -> f64 {
        if self.user_bytes == 0 { 0.0 } else { self.device_bytes as f64 / self.user_bytes as f64 }
    }

    /// Gets and puts together.
    pub fn latency(&self) -> Latency {
        let mut all = self.get_latency.clone();
        all.merge(&self.put_latency);
        all
    }
}

/// What every instance did in one workload, and the process around them.
#[derive(Clone, Debug)]
pub struct WorkloadResult {
    /// The workload's name.
    pub workload: String,
    /// Per instance, in path order.
    pub instances: Vec<InstanceResult>,
    /// The process's CPU time during the workload.
    pub cpu: CpuTime,
    /// The process's resident memory after it.
    pub rss_bytes: u64,
}

/// Who ran the workload, for the CSV.
#[derive(Clone, Debug)]
pub struct CsvContext {
    /// `hash`, `lsm`, `rocksdb`.
    pub engine: String,
    /// Repeat number, or any tag the script gives.
    pub run: String,
    pub num: u64,
    pub key_size: usize,
    pub value_size: usize,
    pub threads_per_instance: usize,
    pub queue_depth: usize,
    pub sync: bool,
}

/// The CSV's header line (without a newline). `p50_us`, `p99_us` and `p999_us` are of gets
/// and puts together; the `get_` and `put_` columns are each operation type's tail line
/// (empty where the workload had none of that type).
pub const CSV_HEADER: &str = "engine,run,workload,instance,instances,num,key_size,value_size,\
threads_per_instance,queue_depth,sync,ops,seconds,ops_per_sec,p50_us,p99_us,p999_us,user_bytes,\
device_bytes,gc_bytes,write_amplification,written_source,cpu_us_per_op,rss_bytes,errors,\
get_p50_us,get_p99_us,get_p999_us,get_max_us,put_p50_us,put_p99_us,put_p999_us,put_max_us";

impl WorkloadResult {
    /// Operations of all instances.
    pub fn total_ops(&self) -> u64 {
        self.instances.iter().map(|i| i.ops).sum()
    }

    /// The instances taken together: operations, bytes and latencies summed, the slowest
    /// instance's time.
    pub fn total(&self) -> InstanceResult {
        let mut t = InstanceResult::default();
        let mut sources: Vec<&str> = Vec::new();
        for i in &self.instances {
            t.ops += i.ops;
            t.gets += i.gets;
            t.found += i.found;
            t.errors += i.errors;
            t.user_bytes += i.user_bytes;
            t.device_bytes += i.device_bytes;
            t.gc_bytes += i.gc_bytes;
            t.elapsed = t.elapsed.max(i.elapsed);
            t.get_latency.merge(&i.get_latency);
            t.put_latency.merge(&i.put_latency);
            if t.first_error.is_none() {
                t.first_error.clone_from(&i.first_error);
            }
            if !sources.contains(&i.written_source.as_str()) {
                sources.push(&i.written_source);
            }
            t.gc_note.clone_from(&i.gc_note);
        }
        t.written_source = sources.join(" + ");
        t
    }

    /// CPU time per operation of all instances, in microseconds.
    pub fn cpu_us_per_op(&self) -> f64 {
        self.cpu.total().as_secs_f64() * 1e6 / self.total_ops().max(1) as f64
    }

    /// The report's lines for this workload (module comment), each ending in a newline.
    pub fn lines(&self, entry_bytes: usize) -> String {
        let mut out = String::new();
        for (k, i) in self.instances.iter().enumerate() {
            instance_lines(&mut out, &format!("{}[{k}]", self.workload), i, entry_bytes);
        }
        let t = self.total();
        instance_lines(&mut out, &self.workload, &t, entry_bytes);
        let _ = writeln!(
            out,
            "{:<12} cpu : {:.3} micros/op (user {:.3} s, sys {:.3} s, {} ops); rss {} bytes",
            self.workload,
            self.cpu_us_per_op(),
            self.cpu.user.as_secs_f64(),
            self.cpu.sys.as_secs_f64(),
            t.ops,
            self.rss_bytes
        );
        out
    }

    /// The write amplification lines of [`crate::kvsb::Bench::session`]: per instance, then
    /// the total.
    pub fn session_lines(&self) -> String {
        let mut out = String::new();
        for (k, i) in self.instances.iter().enumerate() {
            waf_line(&mut out, &format!("{}[{k}]", self.workload), i);
        }
        waf_line(&mut out, &self.workload, &self.total());
        out
    }

    /// CSV rows (each ending in a newline): one per instance, then the total.
    pub fn csv_rows(&self, c: &CsvContext) -> String {
        let mut out = String::new();
        let n = self.instances.len();
        let row = |out: &mut String, who: &str, i: &InstanceResult, cpu: &str, rss: &str| {
            // Gets and puts together, nearest rank (0 without operations).
            let tail = i.latency().tail();
            let us = |f: fn(&crate::latency::Tail) -> u64| {
                tail.as_ref().map_or(0.0, |t| f(t) as f64 / 1000.0)
            };
            let _ = writeln!(
                out,
                "{},{},{},{who},{n},{},{},{},{},{},{},{},{:.6},{:.1},{:.3},{:.3},{:.3},{},{},{},{:.4},{},{cpu},{rss},{}",
                c.engine,
                c.run,
                self.workload,
                c.num,
                c.key_size,
                c.value_size,
                c.threads_per_instance,
                c.queue_depth,
                c.sync,
                i.ops,
                i.elapsed.as_secs_f64(),
                i.ops_per_sec(),
                us(|t| t.p50_ns),
                us(|t| t.p99_ns),
                us(|t| t.p999_ns),
                i.user_bytes,
                i.device_bytes,
                i.gc_bytes,
                i.write_amplification(),
                i.written_source.replace(',', ";"),
                i.errors
            );
            // Replace the newline with the per-operation tail columns.
            out.pop();
            for latency in [&i.get_latency, &i.put_latency] {
                match latency.tail() {
                    Some(t) => {
                        for ns in [t.p50_ns, t.p99_ns, t.p999_ns, t.max_ns] {
                            let _ = write!(out, ",{:.3}", ns as f64 / 1000.0);
                        }
                    }
                    None => out.push_str(",,,,"),
                }
            }
            out.push('\n');
        };
        for (k, i) in self.instances.iter().enumerate() {
            row(&mut out, &k.to_string(), i, "", "");
        }
        let cpu = format!("{:.3}", self.cpu_us_per_op());
        row(&mut out, "total", &self.total(), &cpu, &self.rss_bytes.to_string());
        out
    }
}

fn instance_lines(out: &mut String, label: &str, i: &InstanceResult, entry_bytes: usize) {
    let secs = i.elapsed.as_secs_f64();
    let ops_per_sec = i.ops_per_sec();
    let found =
        if i.gets > 0 { format!(" ({} of {} found)", i.found, i.gets) } else { String::new() };
    let errors = match (&i.first_error, i.errors) {
        (Some(e), n) if n > 0 => format!(" [{n} errors, first: {e}]"),
        _ => String::new(),
    };
    let _ = writeln!(
        out,
        "{label:<12} : {:11.3} micros/op {} ops/sec {secs:.3} seconds {} operations; {:.1} MB/s{found}{errors}",
        1e6 / ops_per_sec.max(1e-9),
        ops_per_sec as u64,
        i.ops,
        ops_per_sec * entry_bytes as f64 / 1_048_576.0,
    );
    for (op, latency) in [("get", &i.get_latency), ("put", &i.put_latency)] {
        if let Some(t) = latency.tail() {
            let _ = writeln!(out, "{}", t.line(label, op));
        }
    }
    waf_line(out, label, i);
}

fn waf_line(out: &mut String, label: &str, i: &InstanceResult) {
    let _ = writeln!(
        out,
        "{label:<12} write amplification : {:.4} (device {} / user {} bytes; gc {} bytes, {}; source {})",
        i.write_amplification(),
        i.device_bytes,
        i.user_bytes,
        i.gc_bytes,
        i.gc_note,
        i.written_source
    );
}

/// One parsed line of the report (the workload `session` is every workload together).
#[derive(Clone, Debug, PartialEq)]
pub enum Line {
    /// `NAME[i] : ...` or `NAME : ...` (instance `None`: the total).
    Throughput {
        workload: String,
        instance: Option<usize>,
        ops_per_sec: f64,
        seconds: f64,
        ops: u64,
    },
    /// `... OP latency micros : p50 X p99 Y p99.9 Z max W ops N` (a [`TailLine`]).
    Latency {
        workload: String,
        instance: Option<usize>,
        op: String,
        p50_us: f64,
        p99_us: f64,
        p999_us: f64,
        max_us: f64,
        ops: u64,
    },
    /// `... write amplification : W (device D / user U bytes; gc G bytes, ...)`.
    WriteAmplification {
        workload: String,
        instance: Option<usize>,
        waf: f64,
        device_bytes: u64,
        user_bytes: u64,
        gc_bytes: u64,
    },
    /// `NAME cpu : X micros/op (...); rss R bytes`.
    Cpu { workload: String, us_per_op: f64, rss_bytes: u64 },
}

impl Line {
    /// Parses one line of the report; `None` for any other line (headers, notes).
    pub fn parse(line: &str) -> Option<Line> {
        let (left, right) = line.split_once(" : ")?;
        let mut words = left.split_whitespace();
        let label = words.next()?;
        let what: Vec<&str> = words.collect();
        let (workload, instance) = match label.split_once('[') {
            Some((w, rest)) => (w.to_string(), Some(rest.strip_suffix(']')?.parse().ok()?)),
            None => (label.to_string(), None),
        };
        if workload != "session" {
            super::Workload::ALL.iter().find(|w| w.name() == workload)?;
        }
        let nums: Vec<&str> = right.split_whitespace().collect();
        let num =
            |k: usize| nums.get(k).and_then(|v| v.trim_matches(|c| c == '(').parse::<f64>().ok());
        let int = |k: usize| nums.get(k).and_then(|v| v.parse::<u64>().ok());
        match what.as_slice() {
            [] => Some(Line::Throughput {
                workload,
                instance,
                ops_per_sec: num(2)?,
                seconds: num(4)?,
                ops: int(6)?,
            }),
            [_, "latency", "micros"] => {
                let t = TailLine::parse(line)?;
                Some(Line::Latency {
                    workload,
                    instance,
                    op: t.op,
                    p50_us: t.p50_us,
                    p99_us: t.p99_us,
                    p999_us: t.p999_us,
                    max_us: t.max_us,
                    ops: t.ops,
                })
            }
            ["write", "amplification"] => Some(Line::WriteAmplification {
                workload,
                instance,
                waf: num(0)?,
                device_bytes: int(2)?,
                user_bytes: int(5)?,
                gc_bytes: int(8)?,
            }),
            ["cpu"] => Some(Line::Cpu {
                workload,
                us_per_op: num(0)?,
                rss_bytes: nums.iter().position(|w| *w == "rss").and_then(|k| int(k + 1))?,
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_back() {
        let mut i = InstanceResult {
            ops: 1000,
            gets: 500,
            found: 499,
            user_bytes: 4_112_000,
            device_bytes: 4_200_000,
            written_source: "volume counters".into(),
            gc_note: "no GC yet".into(),
            elapsed: Duration::from_millis(250),
            ..InstanceResult::default()
        };
        for v in [1000, 2000, 90_000] {
            i.put_latency.record_ns(v);
        }
        i.get_latency.record_ns(1500);
        let r = WorkloadResult {
            workload: "ycsb-a".into(),
            instances: vec![i.clone(), i],
            cpu: CpuTime { user: Duration::from_millis(100), sys: Duration::from_millis(50) },
            rss_bytes: 12345,
        };
        let text = r.lines(4112);
        let lines: Vec<Line> =
            text.lines().map(|l| Line::parse(l).unwrap_or_else(|| panic!("{l}"))).collect();
        assert_eq!(lines.len(), 13);
        assert_eq!(
            lines[0],
            Line::Throughput {
                workload: "ycsb-a".into(),
                instance: Some(0),
                ops_per_sec: 4000.0,
                seconds: 0.25,
                ops: 1000
            }
        );
        assert!(matches!(
            &lines[1],
            Line::Latency { op, instance: Some(0), p50_us, max_us, .. }
                if op == "get" && *p50_us == 1.5 && *max_us == 1.5
        ));
        assert!(matches!(
            &lines[2],
            Line::Latency { op, p50_us, p99_us, p999_us, max_us, .. }
                if op == "put" && *p50_us == 2.0 && *p99_us == 90.0 && *p999_us == 90.0 && *max_us == 90.0
        ));
        assert!(matches!(lines[8], Line::Throughput { instance: None, ops: 2000, .. }));
        assert!(matches!(
            lines[11],
            Line::WriteAmplification {
                device_bytes: 8_400_000,
                user_bytes: 8_224_000,
                gc_bytes: 0,
                ..
            }
        ));
        assert!(matches!(lines[12], Line::Cpu { rss_bytes: 12345, .. }));
        let Line::Cpu { us_per_op, .. } = lines[12] else { unreachable!() };
        assert!((us_per_op - 75.0).abs() < 1e-9);
        assert_eq!(Line::parse("fillrandom : 1 micros/op"), None);
        let c = CsvContext {
            engine: "hash".into(),
            run: "1".into(),
            num: 1,
            key_size: 16,
            value_size: 4096,
            threads_per_instance: 1,
            queue_depth: 1,
            sync: false,
        };
        let csv = r.csv_rows(&c);
        assert_eq!(csv.lines().count(), 3);
        for l in csv.lines() {
            assert_eq!(l.split(',').count(), CSV_HEADER.split(',').count(), "{l}");
        }
        let header: Vec<&str> = CSV_HEADER.split(',').collect();
        let total: Vec<&str> = csv.lines().last().unwrap().split(',').collect();
        let cell = |name: &str| total[header.iter().position(|h| *h == name).unwrap()];
        assert_eq!((cell("get_p50_us"), cell("get_max_us")), ("1.500", "1.500"));
        assert_eq!((cell("put_p99_us"), cell("put_max_us")), ("90.000", "90.000"));
        let only_gets = WorkloadResult {
            instances: vec![InstanceResult { ops: 1, ..InstanceResult::default() }],
            ..r.clone()
        };
        let row = only_gets.csv_rows(&c);
        assert!(row.lines().all(|l| l.ends_with(",,,,,,,,")), "no operations, empty tails: {row}");
    }
}
