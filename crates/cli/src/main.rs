//! The `shale` command-line tool: one subcommand per job, each in its own module.

mod bench;
mod check;
mod inspect;
mod iobench;
mod store;
mod ycsb;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "shale", version, about = "The shale storage engine's command-line tool")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Measure the io layer alone: one thread, one queue, Q requests in flight.
    Iobench(iobench::Args),
    /// Show a volume's layout, version-log state, slot use, levels and SSTs (writes nothing).
    Inspect(inspect::Args),
    /// Recover a store and verify every checksum and the LSM invariants.
    Check(check::Args),
    /// Measure the lsm engine with RocksDB db_bench's benchmarks, flags and output.
    #[command(args_override_self = true)]
    Bench(Box<bench::Args>),
    /// Run YCSB's core workloads (A to F) on the lsm engine, printing YCSB's report.
    #[command(args_override_self = true)]
    Ycsb(Box<ycsb::Args>),
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let result: Result<(), Box<dyn std::error::Error>> = match Cli::parse().command {
        Command::Iobench(args) => iobench::run(&args).map_err(Into::into),
        Command::Inspect(args) => inspect::run(&args),
        Command::Check(args) => check::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Ycsb(args) => ycsb::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shale: {e}");
            ExitCode::FAILURE
        }
    }
}
