//! `shale-compare`: shale against RocksDB (and fjall) on the same machine, in the same run.
//!
//! Kept apart from the engine's workspace so the engine never depends on RocksDB. See
//! README.md beside this crate for what each subcommand runs and how its figures are taken.

mod adoc_chart;
mod adoc_record;
mod adoc_series;
mod adoc_summary;
mod adoc_ycsb;
mod cgroup;
mod child;
mod dbbench;
mod engines;
mod fio;
mod kvbench;
mod kvbench_summary;
mod latte;
mod machine;
mod mariadb;
mod parse;
mod scratch;
mod summary;
mod svg;
mod table;
mod tiered_summary;
mod tiered_ycsb;
mod timeline;
mod ycsb_suite;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// An error of any stage, with a message that says what failed.
pub type Error = Box<dyn std::error::Error>;

#[derive(Parser)]
#[command(name = "shale-compare", about = "shale against RocksDB, fjall and MariaDB, side by side")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// shale bench against RocksDB's db_bench: the target suite, alternating runs, two modes.
    Dbbench(Box<dbbench::Args>),
    /// One long fillrandom per engine, throughput second by second.
    Timeline(Box<timeline::Args>),
    /// YCSB workloads A-F on shale, RocksDB and fjall through one engine trait.
    Ycsb(Box<ycsb_suite::Args>),
    /// One engine's YCSB phases in this process (what `ycsb` runs as its child).
    #[command(hide = true)]
    YcsbEngine(Box<ycsb_suite::EngineArgs>),
    /// One YCSB phase on RocksDB with its WAL where bench/tiered.sh puts it.
    TieredYcsb(Box<tiered_ycsb::Args>),
    /// bench/tiered.sh's tables, from the CSV it writes.
    TieredSummary(Box<tiered_summary::Args>),
    /// One process of bench/adoc.sh as a row of its runs.csv (and RocksDB's per-second series).
    AdocRecord(Box<adoc_record::Args>),
    /// bench/adoc.sh's tables, targets and charts, from its runs.csv.
    AdocSummary(Box<adoc_summary::Args>),
    /// One YCSB phase on RocksDB in one of bench/adoc.sh's configurations.
    AdocYcsb(Box<adoc_ycsb::Args>),
    /// One engine's YCSB phases in LATTE's row layout: shale's table engine, or MariaDB's
    /// InnoDB or MyRocks on bench/latte.sh's server (what that script runs per repeat).
    LatteEngine(Box<latte::EngineArgs>),
    /// bench/latte.sh's tables and issue #12's targets, from the runs' raw outputs.
    LatteSummary(Box<latte::SummaryArgs>),
    /// KVSB on RocksDB, one DB per path: `shale kvbench`'s workloads, flags and lines.
    Kvbench(Box<kvbench::Args>),
    /// bench/kvbench.sh's tables and issue #11's targets, from the CSV the runs append to.
    KvbenchSummary(Box<kvbench_summary::Args>),
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Cmd::Dbbench(a) => dbbench::run(&a),
        Cmd::Timeline(a) => timeline::run(&a),
        Cmd::Ycsb(a) => ycsb_suite::run(&a),
        Cmd::YcsbEngine(a) => ycsb_suite::run_engine(&a),
        Cmd::TieredYcsb(a) => tiered_ycsb::run(&a),
        Cmd::TieredSummary(a) => tiered_summary::run(&a),
        Cmd::AdocRecord(a) => adoc_record::run(&a),
        Cmd::AdocSummary(a) => adoc_summary::run(&a),
        Cmd::AdocYcsb(a) => adoc_ycsb::run(&a),
        Cmd::LatteEngine(a) => latte::run_engine(&a),
        Cmd::LatteSummary(a) => latte::summarize(&a),
        Cmd::Kvbench(a) => kvbench::run(&a),
        Cmd::KvbenchSummary(a) => kvbench_summary::run(&a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shale-compare: {e}");
            ExitCode::FAILURE
        }
    }
}
