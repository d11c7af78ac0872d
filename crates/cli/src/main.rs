//! The `shale` command-line tool: one subcommand per job, each in its own module.

/// `println!` for `bench` and `ycsb`, which end quietly when stdout goes away ([`write_out`]).
macro_rules! outln {
    () => {
        $crate::write_out(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::write_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` for `bench` and `ycsb` ([`write_out`]).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::write_out(format_args!($($arg)*))
    };
}

/// `eprintln!` for `bench` and `ycsb`: a closed stderr is no reason to stop, nor to panic.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::write_err(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// mimalloc rather than glibc's malloc. glibc keeps what a thread frees in that thread's
/// arena: blocks that flushes and compactions put into the block cache are freed by whichever
/// thread evicts them, so once readers took over the cache, a background arena still held the
/// cache's worth of freed memory (regime (c) of BENCHMARKS.md: +236 MB of RSS over a 256 MiB
/// block cache in 13 s of readrandom, and the 1 GiB memory cgroup killed the process). An
/// application embedding `shale-lsm` picks its own allocator; this is the tool's. Built with
/// `--no-default-features`, the tool uses the system allocator (for heap profilers).
///
/// Built with mimalloc's `no_thp`: by default mimalloc advises all the memory it maps
/// `MADV_HUGEPAGE`, and where the kernel's transparent huge pages are `madvise`-only with
/// `defrag=madvise` (this machine, and a common distribution default), each first touch of
/// such memory takes a 2 MiB page that the fault zeroes, after reclaiming and compacting
/// memory for it when none is free. Every new memtable chunk and block-cache buffer paid
/// that: `perf` put 36% of a 1M-key fillseq in `clear_page_erms` (RocksDB's: 0.6%), and
/// fillseq ran at 1.14 to 1.71M ops/s from run to run; with `MIMALLOC_ALLOW_THP=0`, at 1.58
/// to 1.65M in the same alternating runs, each in a memory cgroup as the benchmarks run.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod allocator;
mod bench;
mod check;
mod checkpoint;
mod engine_kind;
mod flag_spelling;
mod inspect;
mod interrupt;
mod iobench;
mod kvbench;
mod orphans;
mod serve;
mod store;
mod temp_store;
mod ycsb;

use std::io::Write;
use std::process::ExitCode;
use std::sync::OnceLock;

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
    /// Copy a store (of any engine) into a new one at DST: one consistent state of it.
    Checkpoint(checkpoint::Args),
    /// Measure the lsm engine with RocksDB db_bench's benchmarks, flags and output.
    #[command(args_override_self = true)]
    Bench(Box<bench::Args>),
    /// Run YCSB's core workloads (A to F) on the lsm engine, printing YCSB's report.
    #[command(args_override_self = true)]
    Ycsb(Box<ycsb::Args>),
    /// KVSB (the KV-SSD paper's benchmark) on the hash or lsm engine: N volumes at once.
    Kvbench(Box<kvbench::Args>),
    /// Serve the store over RESP (the Redis protocol) on TCP and a Unix socket.
    Serve(Box<serve::Args>),
    /// List the files stores keep in /dev/shm (lsm WAL tails, table undo logs) whose store is
    /// gone; remove them with --remove.
    Orphans(orphans::Args),
}

fn main() -> ExitCode {
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
    // Flags renamed to follow the spelling rule keep their old spelling for a release.
    let (argv, warnings) = flag_spelling::respell(argv);
    for w in warnings {
        eprintln!("{w}");
    }
    let command = Cli::parse_from(argv).command;
    // A server must outlive clients that go away: SIGPIPE stays ignored.
    if !matches!(
        command,
        Command::Bench(_) | Command::Ycsb(_) | Command::Kvbench(_) | Command::Serve(_)
    ) {
        restore_sigpipe();
    }
    // The jobs that run a store for long give freed memory back near the memory limit.
    let memory_limit = match &command {
        Command::Bench(a) => a.memory_limit,
        Command::Ycsb(a) => a.memory_limit,
        _ => None,
    };
    if matches!(
        command,
        Command::Bench(_) | Command::Ycsb(_) | Command::Kvbench(_) | Command::Serve(_)
    ) {
        allocator::give_back_near(memory_limit.unwrap_or_default().resolve());
    }
    // The benchmarks stop cleanly on SIGINT and SIGTERM, removing their temporary stores.
    if matches!(command, Command::Bench(_) | Command::Ycsb(_) | Command::Kvbench(_)) {
        if let Err(e) = interrupt::install() {
            errln!("shale: installing the SIGINT and SIGTERM handlers: {e}");
            return ExitCode::FAILURE;
        }
    }
    let result: Result<(), Box<dyn std::error::Error>> = match command {
        Command::Iobench(args) => iobench::run(&args),
        Command::Inspect(args) => inspect::run(&args),
        Command::Check(args) => check::run(&args),
        Command::Checkpoint(args) => checkpoint::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Ycsb(args) => ycsb::run(&args),
        Command::Kvbench(args) => kvbench::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Orphans(args) => orphans::run(&args),
    };
    if let Some(signal) = interrupt::signal() {
        // The command stopped and cleaned up: end by the signal, as if it had not been caught.
        if let Err(e) = &result {
            errln!("shale: {}", shale_io::Chain(&**e));
        }
        errln!("shale: stopped by {}", interrupt::name(signal));
        interrupt::end_by_signal(signal);
        return ExitCode::from(128 + signal as u8);
    }
    match (result, STDOUT_FAILED.get()) {
        // The reader went away and the command has cleaned up: end as a Unix tool ends.
        (_, Some(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            restore_sigpipe();
            // SAFETY: raise only sends SIGPIPE to this process, whose disposition is now the
            // default: the process ends here.
            unsafe {
                libc::raise(libc::SIGPIPE);
            }
            ExitCode::FAILURE
        }
        (Ok(()), Some(e)) => {
            errln!("shale: writing the results to stdout: {e}");
            ExitCode::FAILURE
        }
        (Ok(()), None) => ExitCode::SUCCESS,
        (Err(e), _) => {
            errln!("shale: {}", shale_io::Chain(&*e));
            ExitCode::FAILURE
        }
    }
}

/// The first error writing to stdout in `bench` or `ycsb`; set once, and from then on their
/// output is dropped and they stop at the next benchmark or phase.
static STDOUT_FAILED: OnceLock<std::io::Error> = OnceLock::new();

/// Writes to stdout for `bench` and `ycsb`. A failed write (the reader of a pipe went away,
/// EPIPE, or a full disk) is recorded instead of panicking as `println!` does; later output is
/// dropped, and [`stdout_failed`] tells the command to stop, close its store and remove its
/// temporary directory before `main` ends the process.
pub(crate) fn write_out(args: std::fmt::Arguments<'_>) {
    if STDOUT_FAILED.get().is_some() {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args).and_then(|()| out.flush()) {
        let _ = STDOUT_FAILED.set(e);
    }
}

/// Whether stdout failed: a command should stop starting work whose results no one can read.
pub(crate) fn stdout_failed() -> bool {
    STDOUT_FAILED.get().is_some()
}

/// Writes to stderr, ignoring a failure: there is nowhere left to report it.
pub(crate) fn write_err(args: std::fmt::Arguments<'_>) {
    let _ = std::io::stderr().lock().write_fmt(args);
}

/// Lets a closed stdout end the command quietly, as it ends `cat` or `grep`: `shale inspect |
/// head -1` stops at the first line instead of panicking in `println!` ("failed printing to
/// stdout: Broken pipe", exit 101).
///
/// Two ways, chosen by what a command leaves behind when it ends abruptly:
/// - `inspect`, `check` and `iobench` get SIGPIPE's default disposition back (Rust sets it to
///   ignored before `main`): the kernel ends the process at its first write to the closed
///   pipe, exit status 128 + 13 in a shell, as Unix tools end. They hold nothing a killed
///   process does not release (`check`'s store is left as after a crash, and recovers).
/// - `bench` and `ycsb` often run on a temporary store: killed, they would leave its volume
///   file (tens of MB on disk, hundreds long) in the temporary directory and its WAL tail in
///   `/dev/shm`. They keep SIGPIPE ignored and write through [`write_out`], which records
///   EPIPE instead of panicking; they then stop, close the store and remove the directory,
///   and `main` ends the process with SIGPIPE itself.
fn restore_sigpipe() {
    // SAFETY: signal only installs the default disposition for SIGPIPE; no handler runs Rust
    // code, and no other thread exists yet.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
