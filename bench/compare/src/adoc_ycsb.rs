//! `shale-compare adoc-ycsb`: one YCSB phase on RocksDB 11.8.1 in one of the configurations
//! of issue #10's evaluation (bench/adoc.sh): its defaults (2 background jobs, 64 MiB
//! memtable), with the auto-tuned rate limiter, or a large fixed setting like SILK-O's (8
//! jobs, 512 MiB), beside `shale ycsb --tuner ...` for shale's.
//!
//! One phase per process, as `shale ycsb --phase` and `shale-compare tiered-ycsb` run them:
//! the script loads, then runs each workload on the store reopened. The store is opened with
//! the settings of `tiered-ycsb` (no compression, LRU block cache, 10 bloom bits, dynamic level
//! sizing, WAL on and not synced: `engines::rocks_options`), with the background jobs, memtable
//! size and rate limiter given, and statistics on: after the
//! report the process prints RocksDB's statistics (`rocksdb.stall.micros COUNT : N`, ...) so
//! that the phase's stall time and flush and compaction bytes are known.

use std::path::PathBuf;

use crate::engines::{Rocks, rocks_options};

use crate::Error;
use crate::tiered_ycsb::Phase;

/// Arguments of `shale-compare adoc-ycsb`.
#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// RocksDB's store directory.
    #[arg(long)]
    pub db: PathBuf,
    /// The phase to run.
    #[arg(long, value_enum)]
    pub phase: Phase,
    /// Core workload, a to f (a load uses only its record count and key format).
    #[arg(long, default_value = "a")]
    pub workload: ycsb::Preset,
    /// Records loaded (YCSB's recordcount), each 10 fields of 100 bytes.
    #[arg(long)]
    pub records: u64,
    /// Operations of a run (YCSB's operationcount), over all threads.
    #[arg(long, default_value_t = 1000)]
    pub operations: u64,
    /// Client threads.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Seed of the client threads' generators.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Block cache bytes.
    #[arg(long, default_value_t = 32 << 20)]
    pub cache_size: u64,
    /// Memtable bytes (RocksDB's write_buffer_size).
    #[arg(long, default_value_t = 64 << 20)]
    pub write_buffer_size: u64,
    /// RocksDB's max_background_jobs.
    #[arg(long, default_value_t = 2)]
    pub background_jobs: i32,
    /// Bytes per second of a rate limiter on flush and compaction writes (0: none), as
    /// db_bench's --rate_limiter_bytes_per_sec (100 ms refills, fairness 10).
    #[arg(long, default_value_t = 0)]
    pub rate_limiter_bytes_per_sec: u64,
    /// The rate limiter tunes its rate to the demand (db_bench's --rate_limiter_auto_tuned).
    #[arg(long)]
    pub rate_limiter_auto_tuned: bool,
}

/// The options of `a`: the suites' (`engines::rocks_options`) with its background jobs and
/// memtable, statistics on, and the rate limiter asked for.
fn options(a: &Args) -> rocksdb::Options {
    let mut o = rocks_options(a.write_buffer_size, a.cache_size, a.background_jobs);
    o.create_if_missing(a.phase == Phase::Load);
    o.set_error_if_exists(a.phase == Phase::Load);
    o.enable_statistics();
    if a.rate_limiter_bytes_per_sec > 0 {
        let rate = a.rate_limiter_bytes_per_sec as i64;
        // db_bench's refill period (100 ms) and fairness (10).
        if a.rate_limiter_auto_tuned {
            o.set_auto_tuned_ratelimiter(rate, 100_000, 10);
        } else {
            o.set_ratelimiter(rate, 100_000, 10);
        }
    }
    o
}

/// The heading of a phase's report, as `shale ycsb` prints it.
fn heading(a: &Args) -> String {
    match a.phase {
        Phase::Load => "# load".into(),
        Phase::Run => format!("# run, workload {}", a.workload),
    }
}

/// Runs the phase, prints its report after a heading, then RocksDB's statistics.
///
/// # Errors
/// The store cannot be opened, YCSB refuses the configuration, or operations failed.
pub fn run(a: &Args) -> Result<(), Error> {
    let mut c = ycsb::Config::new(a.workload);
    c.record_count = a.records;
    c.operation_count = a.operations;
    c.threads = a.threads;
    c.seed = a.seed;
    c.validate()?;
    if a.phase == Phase::Run {
        c.validate_run()?;
    }
    let o = options(a);
    let engine = Rocks::from_db(rocksdb::DB::open(&o, &a.db)?);
    let version = crate::engines::version("rocksdb", &a.db).unwrap_or_else(|| "unknown".into());
    println!(
        "# rocksdb ycsb: RocksDB {version}, workload {}, records {}, operations {}, threads {}, \
         seed {}; store {}; background jobs {}, write buffer {}, rate limiter {}",
        a.workload,
        a.records,
        a.operations,
        a.threads,
        a.seed,
        a.db.display(),
        a.background_jobs,
        a.write_buffer_size,
        match (a.rate_limiter_bytes_per_sec, a.rate_limiter_auto_tuned) {
            (0, _) => "none".to_string(),
            (r, true) => format!("{r} B/s, auto-tuned"),
            (r, false) => format!("{r} B/s"),
        }
    );
    let report = match a.phase {
        Phase::Load => ycsb::load(&engine, &c)?,
        Phase::Run => ycsb::run(&engine, &c)?,
    };
    println!("{}\n{report}{}", heading(a), report.tail_lines());
    // Statistics after the report: the phase's stalls, flush and compaction bytes.
    drop(engine);
    if let Some(s) = o.get_statistics() {
        println!("STATISTICS:\n{s}");
    }
    let errors = report.error_count();
    if errors > 0 {
        for e in report.errors.iter().take(5) {
            eprintln!("shale-compare: adoc-ycsb: {e}");
        }
        return Err(format!("{errors} operations failed (Return=ERROR)").into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(db: &std::path::Path, phase: Phase, workload: &str) -> Args {
        Args {
            db: db.to_path_buf(),
            phase,
            workload: workload.parse().unwrap(),
            records: 2000,
            operations: 2000,
            threads: 2,
            seed: 1,
            cache_size: 1 << 20,
            write_buffer_size: 1 << 20,
            background_jobs: 8,
            rate_limiter_bytes_per_sec: 50 << 20,
            rate_limiter_auto_tuned: true,
        }
    }

    /// A load and a run with the rate limiter and eight jobs; the options reach the store
    /// (its OPTIONS file says so) and the run finds the loaded store.
    #[test]
    fn phases_run_with_the_configured_options() {
        let root = std::env::temp_dir().join(format!("shale-adoc-ycsb-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let db = root.join("db");
        run(&args(&db, Phase::Load, "a")).unwrap();
        run(&args(&db, Phase::Run, "f")).unwrap();
        let options = std::fs::read_dir(&db)
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("OPTIONS-"))
            .map(|e| std::fs::read_to_string(e.path()).unwrap())
            .last()
            .unwrap();
        assert!(options.contains("max_background_jobs=8"), "{options}");
        assert!(options.contains("write_buffer_size=1048576"), "{options}");
        assert!(run(&args(&db, Phase::Load, "a")).is_err(), "a load never reuses a store");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
