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
    restore_sigpipe();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    // db_bench's flags that shale has no knob for are taken out before parsing, each named
    // once in a warning, so a db_bench command line runs unchanged.
    let argv = match bench::strip_ignored_flags(std::env::args_os().collect()) {
        Ok(argv) => argv,
        Err(e) => {
            eprintln!("shale bench: {e}");
            return ExitCode::from(2);
        }
    };
    let result: Result<(), Box<dyn std::error::Error>> = match Cli::parse_from(argv).command {
        Command::Iobench(args) => iobench::run(&args),
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

/// Lets a closed stdout end the command quietly, as it ends `cat` or `grep`: `shale bench |
/// head -1` stops at the first line instead of panicking in `println!` ("failed printing to
/// stdout: Broken pipe", exit 101).
///
/// Why the signal and not `ErrorKind::BrokenPipe` handled at each print: Rust sets SIGPIPE to
/// ignored before `main`, so every `println!` of every command (the reports, `inspect`'s
/// listing) would need a fallible write and a path back to `main`. With the default
/// disposition the kernel ends the process at the first write to the closed pipe, exit status
/// 128 + 13 in a shell, as Unix tools end. A store open at that moment is left as a killed
/// process leaves it: its acknowledged writes survive (P2) and the next open recovers them.
fn restore_sigpipe() {
    // SAFETY: signal only installs the default disposition for SIGPIPE; no handler runs Rust
    // code, and no other thread exists yet.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
