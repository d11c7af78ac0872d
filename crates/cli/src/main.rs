//! The `shale` command-line tool: one subcommand per job, each in its own module.

mod iobench;

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
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let result = match Cli::parse().command {
        Command::Iobench(args) => iobench::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shale: {e}");
            ExitCode::FAILURE
        }
    }
}
