//! `shale-compare tiered-ycsb`: one YCSB phase (load, or one workload's run) on RocksDB 11.8.1
//! with its files where the caller puts them: the store in `--db`, the WAL in `--wal-dir` if
//! given. bench/tiered.sh (issue #15, part 4) runs it for RocksDB's three placements (all on
//! the capacity device, WAL on the fast one, all on the fast one) beside `shale ycsb`, which
//! runs shale's three; both drive their engine through the `shale-ycsb` crate, so the
//! generators, client threads and the report are the same code.
//!
//! One phase per process, as `shale ycsb --phase load|run` does for shale: the script loads,
//! then runs each workload with the store reopened, and times nothing but the phases (YCSB's
//! report covers the phase alone, not the open). The store and WAL directories must be empty
//! or missing for a load, and hold a loaded store for a run.
//!
//! RocksDB is opened with the settings of the ycsb suite's engine (`engines::Rocks`: no
//! compression, the memtable and LRU block cache given, 10 bloom bits, two background jobs,
//! dynamic level sizing, WAL on and not synced), plus the WAL's directory. They are repeated
//! here rather than shared because that engine's `open` is private to `engines.rs`: a change
//! there must be made here too.

use std::path::PathBuf;

use crate::engines::{Rocks, rocks_options};

use crate::Error;

/// Which half of YCSB's sequence one process runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Phase {
    /// Insert the records into an empty store.
    Load,
    /// Run the workload on a store loaded before.
    Run,
}

/// Arguments of `shale-compare tiered-ycsb`.
#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// RocksDB's store directory: SSTs, MANIFEST, and the WAL unless --wal-dir names another.
    #[arg(long)]
    pub db: PathBuf,
    /// Where RocksDB keeps its WAL (`Options::set_wal_dir`, db_bench's `--wal_dir`).
    #[arg(long)]
    pub wal_dir: Option<PathBuf>,
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
    /// Block cache bytes (32 MiB: RocksDB's and shale's default).
    #[arg(long, default_value_t = 32 << 20)]
    pub cache_size: u64,
    /// Memtable bytes.
    #[arg(long, default_value_t = 64 << 20)]
    pub write_buffer_size: u64,
}

/// Opens the store in `a.db` with the suites' options (`engines::rocks_options`) and its WAL
/// in `a.wal_dir`: a new one for a load (refusing one already there, so a load always starts
/// empty), the loaded one for a run.
fn open(a: &Args) -> Result<Rocks, Error> {
    let mut o = rocks_options(a.write_buffer_size, a.cache_size, 2);
    o.create_if_missing(a.phase == Phase::Load);
    o.set_error_if_exists(a.phase == Phase::Load);
    if let Some(w) = &a.wal_dir {
        o.set_wal_dir(w);
    }
    Ok(Rocks::from_db(rocksdb::DB::open(&o, &a.db)?))
}

/// The driver's configuration for `a`.
fn config(a: &Args) -> ycsb::Config {
    let mut c = ycsb::Config::new(a.workload);
    c.record_count = a.records;
    c.operation_count = a.operations;
    c.threads = a.threads;
    c.seed = a.seed;
    c
}

/// The heading of a phase's report, as `shale ycsb` prints it (`# load`, `# run, workload a`),
/// so one parser reads both tools' output.
pub fn heading(a: &Args) -> String {
    match a.phase {
        Phase::Load => "# load".into(),
        Phase::Run => format!("# run, workload {}", a.workload),
    }
}

/// Runs the phase and prints its report after a heading; the version RocksDB wrote into the
/// store's OPTIONS file comes first, so the log names what ran.
///
/// # Errors
/// The store cannot be opened, YCSB refuses the configuration, or operations failed.
pub fn run(a: &Args) -> Result<(), Error> {
    let c = config(a);
    c.validate()?;
    if a.phase == Phase::Run {
        c.validate_run()?;
    }
    let engine = open(a)?;
    let version = crate::engines::version("rocksdb", &a.db).unwrap_or_else(|| "unknown".into());
    println!(
        "# rocksdb ycsb: RocksDB {version}, workload {}, records {}, operations {}, threads {}, \
         seed {}; store {}, WAL {}",
        a.workload,
        a.records,
        a.operations,
        a.threads,
        a.seed,
        a.db.display(),
        a.wal_dir.as_deref().unwrap_or(&a.db).display()
    );
    let report = match a.phase {
        Phase::Load => ycsb::load(&engine, &c)?,
        Phase::Run => ycsb::run(&engine, &c)?,
    };
    println!("{}\n{report}{}", heading(a), report.tail_lines());
    let errors = report.error_count();
    if errors > 0 {
        for e in report.errors.iter().take(5) {
            eprintln!("shale-compare: tiered-ycsb: {e}");
        }
        return Err(format!("{errors} operations failed (Return=ERROR)").into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use ycsb::Engine;

    /// Files in `dir` whose names end with `suffix`.
    fn files_ending(dir: &Path, suffix: &str) -> usize {
        std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter(|e| e.file_name().to_string_lossy().ends_with(suffix))
                    .count()
            })
            .unwrap_or(0)
    }

    fn args(db: &Path, wal: Option<&Path>, phase: Phase, workload: &str) -> Args {
        Args {
            db: db.to_path_buf(),
            wal_dir: wal.map(Path::to_path_buf),
            phase,
            workload: workload.parse().unwrap(),
            records: 500,
            operations: 500,
            threads: 2,
            seed: 1,
            cache_size: 1 << 20,
            write_buffer_size: 4 << 20,
        }
    }

    /// The WAL goes to --wal-dir and nowhere else; a run reopens the loaded store and finds
    /// every record; a second load into a store is refused rather than run on it.
    #[test]
    fn the_wal_lives_where_it_is_put_and_runs_reopen_the_load() {
        let root = std::env::temp_dir().join(format!("shale-tiered-ycsb-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let (db, wal) = (root.join("db"), root.join("wal"));
        run(&args(&db, Some(&wal), Phase::Load, "a")).unwrap();
        assert!(files_ending(&wal, ".log") > 0, "the WAL is in --wal-dir");
        assert_eq!(files_ending(&db, ".log"), 0, "and not in --db");
        for w in ["a", "e"] {
            run(&args(&db, Some(&wal), Phase::Run, w)).unwrap();
        }
        let reopened = open(&args(&db, Some(&wal), Phase::Run, "a")).unwrap();
        let key = ycsb::KeyFormat::default().key(0);
        assert!(reopened.read(key.as_bytes()).unwrap().is_some(), "record 0 was loaded");
        drop(reopened);
        let again = run(&args(&db, Some(&wal), Phase::Load, "a"));
        assert!(again.is_err(), "a load never runs on a store already there");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn headings_match_shale_ycsb() {
        let p = Path::new("/nonexistent");
        assert_eq!(heading(&args(p, None, Phase::Load, "e")), "# load");
        assert_eq!(heading(&args(p, None, Phase::Run, "F")), "# run, workload f");
    }
}
