//! `shale-compare timeline`: one long fillrandom per engine with `--stats_interval_seconds=1`,
//! its throughput second by second on one chart, so write stalls show as dips.
//!
//! Both tools print a progress line per thread about once a second, but only when an
//! operation finishes: a write that stalls for 5 s yields one line covering 5 s. The
//! per-second series spreads each line's operations over the seconds it spans
//! ([`crate::parse::per_second`]), so such a stall shows as 5 slow seconds.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;

use crate::child;
use crate::dbbench::{DIRECT_FLAGS, Engine};
use crate::parse;
use crate::summary::median;
use crate::svg;
use crate::table::{self, Table};
use crate::{Error, machine};

/// Arguments of `shale-compare timeline`.
#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// Seconds each engine writes for (db_bench's --duration).
    #[arg(long, default_value_t = 60)]
    pub seconds: u64,
    /// Key space of the random writes (db_bench's --num).
    #[arg(long, default_value_t = 1_000_000)]
    pub num: u64,
    /// The RocksDB mode: buffered or direct.
    #[arg(long, default_value = "buffered")]
    pub mode: String,
    /// Block cache bytes, the same for both engines (as in the dbbench suite).
    #[arg(long, default_value_t = 1 << 30)]
    pub cache_size: u64,
    /// Memtable bytes.
    #[arg(long, default_value_t = 64 << 20)]
    pub write_buffer_size: u64,
    /// Bytes per key.
    #[arg(long, default_value_t = 16)]
    pub key_size: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 100)]
    pub value_size: u64,
    /// The `shale` binary.
    #[arg(long, default_value = "target/release/shale")]
    pub shale: PathBuf,
    /// RocksDB's db_bench: the release build of 11.8.1 from `bench/compare/build_rocksdb.sh`.
    #[arg(long, default_value = "db_bench")]
    pub db_bench: PathBuf,
    /// Where the stores live while running.
    #[arg(long, default_value = "target/compare-work")]
    pub work_dir: PathBuf,
    /// Where timeline.{md,csv,svg} and the raw outputs go.
    #[arg(long)]
    pub out: PathBuf,
    /// Run nothing: write the table, CSV and chart again from the raw outputs in --out.
    #[arg(long)]
    pub replot: bool,
}

/// The flags of one engine's run.
pub fn command_line(a: &Args, engine: Engine, db: &std::path::Path) -> (PathBuf, Vec<String>) {
    let mut flags = vec![
        "--benchmarks=fillrandom".to_string(),
        format!("--num={}", a.num),
        format!("--duration={}", a.seconds),
        "--stats_interval_seconds=1".into(),
        format!("--key_size={}", a.key_size),
        format!("--value_size={}", a.value_size),
        "--compression_type=none".into(),
        "--bloom_bits=10".into(),
        // Both size levels dynamically by default (RocksDB since 8.4): said explicitly, so an
        // older db_bench given by --db-bench runs alike.
        "--level_compaction_dynamic_level_bytes=true".into(),
        format!("--write_buffer_size={}", a.write_buffer_size),
        format!("--cache_size={}", a.cache_size),
        "--seed=1".into(),
        "--statistics=1".into(),
        format!("--db={}", db.display()),
    ];
    match engine {
        Engine::Shale => {
            flags.insert(0, "bench".into());
            (a.shale.clone(), flags)
        }
        Engine::RocksDirect => {
            flags.extend(DIRECT_FLAGS.iter().map(|s| s.to_string()));
            (a.db_bench.clone(), flags)
        }
        Engine::RocksBuffered => (a.db_bench.clone(), flags),
    }
}

/// One engine's timeline.
pub struct Series {
    pub engine: Engine,
    pub per_second: Vec<f64>,
    pub result: Option<parse::ResultLine>,
    /// Seconds spent in write stalls by the engine's own count.
    pub stall_seconds: Option<f64>,
    pub command: String,
}

/// Seconds whose throughput is below a tenth of the run's median second.
pub fn slow_seconds(per_second: &[f64]) -> usize {
    let Some(m) = median(per_second) else { return 0 };
    per_second.iter().filter(|v| **v < m / 10.0).count()
}

/// Stall time from `--statistics`, in seconds (see [`crate::dbbench::stall_micros`]).
pub fn stall_seconds(engine: Engine, text: &str) -> Option<f64> {
    crate::dbbench::stall_micros(engine, &parse::statistics(text)).map(|us| us as f64 / 1e6)
}

/// Runs both engines and writes the files.
///
/// # Errors
/// A tool that fails, or files that cannot be written.
pub fn run(a: &Args) -> Result<(), Error> {
    let peer = match a.mode.as_str() {
        "buffered" => Engine::RocksBuffered,
        "direct" => Engine::RocksDirect,
        other => return Err(format!("unknown RocksDB mode {other:?} (buffered, direct)").into()),
    };
    std::fs::create_dir_all(a.out.join("raw"))?;
    let shale_version = if a.replot {
        let old = std::fs::read_to_string(a.out.join("timeline.md")).unwrap_or_default();
        old.lines()
            .find_map(|l| l.strip_prefix("- shale: ").map(str::to_string))
            .unwrap_or_else(|| "commit unknown".into())
    } else {
        machine::shale_version()
    };
    let mut series = Vec::new();
    for engine in [peer, Engine::Shale] {
        let raw = a.out.join("raw").join(format!("timeline-{}", engine.name()));
        let (bin, _) = command_line(a, engine, std::path::Path::new("DIR"));
        let f = if a.replot {
            child::Finished {
                exit_code: Some(0),
                stdout: std::fs::read_to_string(raw.with_extension("stdout"))?,
                stderr: std::fs::read_to_string(raw.with_extension("stderr"))?,
                ..Default::default()
            }
        } else {
            run_engine(a, engine, &raw)?
        };
        let intervals = parse::intervals(&f.stderr);
        if intervals.is_empty() {
            return Err(format!("{}: no progress lines on stderr", bin.display()).into());
        }
        let (_, shown) = command_line(a, engine, std::path::Path::new("DIR"));
        series.push(Series {
            engine,
            per_second: parse::per_second(&intervals),
            result: parse::result_lines(&f.stdout).into_iter().find(|r| r.name == "fillrandom"),
            stall_seconds: stall_seconds(engine, &f.stdout),
            command: format!("{} {}", bin.display(), shown.join(" ")),
        });
    }
    std::fs::write(a.out.join("timeline.csv"), csv(&series))?;
    std::fs::write(a.out.join("timeline.svg"), chart(a, &series))?;
    std::fs::write(a.out.join("timeline.md"), markdown(&series, &shale_version))?;
    eprintln!("shale-compare: wrote {}/timeline.{{md,csv,svg}}", a.out.display());
    Ok(())
}

/// Runs one engine's fillrandom, its output going to `raw`.stdout/.stderr.
fn run_engine(a: &Args, engine: Engine, raw: &std::path::Path) -> Result<child::Finished, Error> {
    let scratch = a.work_dir.join(format!("timeline-{}", engine.name()));
    crate::scratch::fresh(&scratch)?;
    let db = crate::scratch::store(&scratch);
    let (bin, flags) = command_line(a, engine, &db);
    eprintln!("shale-compare: timeline {}: {} {}", engine.name(), bin.display(), flags.join(" "));
    let mut cmd = Command::new(&bin);
    cmd.args(&flags);
    let f = child::run(cmd, raw)?;
    crate::scratch::remove(&scratch)?;
    if f.exit_code != Some(0) {
        return Err(format!("{} exited with {:?}", bin.display(), f.exit_code).into());
    }
    Ok(f)
}

/// `second,<engine>,...`: ops/s in each second.
pub fn csv(series: &[Series]) -> String {
    let mut s = String::from("second");
    for x in series {
        let _ = write!(s, ",{}", x.engine.name());
    }
    s.push('\n');
    let n = series.iter().map(|x| x.per_second.len()).max().unwrap_or(0);
    for i in 0..n {
        let _ = write!(s, "{}", i + 1);
        for x in series {
            match x.per_second.get(i) {
                Some(v) => {
                    let _ = write!(s, ",{v:.1}");
                }
                None => s.push(','),
            }
        }
        s.push('\n');
    }
    s
}

/// Both engines on one line chart; each second's point sits at its end.
pub fn chart(a: &Args, series: &[Series]) -> String {
    svg::line_chart(&svg::LineChart {
        title: format!(
            "fillrandom ops/s each second, {} s, {} MiB write buffer",
            a.seconds,
            a.write_buffer_size >> 20
        ),
        x_label: "seconds".into(),
        y_label: "ops/s".into(),
        lines: series
            .iter()
            .map(|x| svg::Line {
                name: x.engine.title().into(),
                points: x
                    .per_second
                    .iter()
                    .enumerate()
                    .map(|(i, v)| ((i + 1) as f64, *v))
                    .collect(),
            })
            .collect(),
    })
}

/// The summary table and the commands.
pub fn markdown(series: &[Series], shale_version: &str) -> String {
    let mut t = Table::new(&[
        "engine",
        "ops/s (result line)",
        "median second",
        "slowest second",
        "seconds below 1/10 of median",
        "stall time (engine's count)",
    ]);
    for x in series {
        t.row(vec![
            x.engine.title().into(),
            table::count(x.result.as_ref().map(|r| r.ops_per_sec)),
            table::count(median(&x.per_second)),
            table::count(x.per_second.iter().copied().reduce(f64::min)),
            slow_seconds(&x.per_second).to_string(),
            x.stall_seconds.map_or("-".into(), |s| format!("{s:.1} s")),
        ]);
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# fillrandom timeline\n\n{}\n- shale: {}\n",
        machine::describe(),
        shale_version
    );
    s.push_str(&t.to_markdown());
    let _ = writeln!(
        s,
        "\nOne run per engine, one after the other. Per-second throughput comes from the \
         `--stats_interval_seconds=1` progress lines; see timeline.csv and timeline.svg. Stall \
         time: RocksDB `rocksdb.stall.micros`, shale its memtable and L0 stall micros.\n\n```"
    );
    for x in series {
        let _ = writeln!(s, "{}", x.command);
    }
    s.push_str("```\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_seconds_count_dips() {
        assert_eq!(slow_seconds(&[100.0, 100.0, 5.0, 100.0, 0.0]), 2);
        assert_eq!(slow_seconds(&[]), 0);
    }

    #[test]
    fn csv_pads_the_shorter_series() {
        let s = |engine, v: Vec<f64>| Series {
            engine,
            per_second: v,
            result: None,
            stall_seconds: None,
            command: String::new(),
        };
        let text = csv(&[s(Engine::RocksBuffered, vec![1.0, 2.0]), s(Engine::Shale, vec![3.0])]);
        assert_eq!(text, "second,rocksdb-buffered,shale\n1,1.0,3.0\n2,2.0,\n");
    }
}
