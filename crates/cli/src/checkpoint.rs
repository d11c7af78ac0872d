//! `shale checkpoint SRC DST`: a new store at DST holding one consistent state of the store
//! at SRC, whatever its engine (lsm, hash or table), through that engine's checkpoint
//! (`Db::checkpoint_with`, `HashStore::checkpoint_with`, `TableStore::checkpoint_with`).
//!
//! The store at SRC is opened by this command, so it must not be open in another process
//! (the store lock refuses it): a live store is checkpointed by the process that has it
//! open, through the library, the C ABI or Python. What this command is for is a store no
//! process has open, a crashed one above all: the lsm engine is opened read-only (nothing
//! written), its WAL and its WAL tail in `/dev/shm` replayed in memory, so the checkpoint
//! holds every write the store acknowledged, where a `cp -a` of its directory holds only
//! what reached the volume file. The hash and table engines are opened as they open
//! anywhere (the table engine rolls back the transactions the crash left unfinished).
//!
//! Stages:
//! 1. Find the engine of SRC ([`engine_of`]).
//! 2. Open SRC with that engine.
//! 3. Make the checkpoint, printing the entries copied to stderr every
//!    [`shale_lsm::PROGRESS_ENTRIES`] (or the hash and table engines' equivalents).
//! 4. Print what was copied.

use std::path::{Path, PathBuf};

use shale_hash::{HashOptions, HashStore};
use shale_lsm::{CheckpointOptions, Db, Options};
use shale_table::{TableOptions, TableStore};

/// Arguments of `shale checkpoint`.
#[derive(clap::Args)]
pub struct Args {
    /// The store to copy: its directory, its volume file or its block device.
    src: PathBuf,
    /// Where the checkpoint goes: a new directory (it must not exist, or be empty).
    dst: PathBuf,
    /// The capacity volume of a tiered (lsm) store at SRC.
    #[arg(long = "capacity_path", alias = "capacity-path")]
    capacity_path: Option<PathBuf>,
    /// Where the checkpoint of a tiered store puts its capacity volume (a new directory);
    /// required with --capacity_path.
    #[arg(long = "checkpoint_capacity_path", alias = "checkpoint-capacity-path")]
    checkpoint_capacity_path: Option<PathBuf>,
}

/// The engines a store can be of.
pub use shale_space::EngineKind as Engine;

/// The engine of the store at `path` ([`crate::engine_kind::engine_of`]: its format header,
/// or for an older volume its version log), read without writing.
///
/// # Errors
/// A path that holds no shale volume, or one that cannot be read, with the path named.
pub fn engine_of(path: &Path) -> Result<Engine, String> {
    crate::engine_kind::engine_of(path).map_err(|e| {
        format!(
            "cannot tell the engine of the store at {}: {}",
            path.display(),
            shale_io::Chain(&e)
        )
    })
}

/// Runs the command.
///
/// # Errors
/// A SRC that cannot be opened, a DST that holds anything, a copy that fails (nothing is
/// then left at DST).
pub fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let engine = match (&args.capacity_path, &args.checkpoint_capacity_path) {
        (Some(_), Some(_)) => Engine::Lsm,
        (Some(_), None) => {
            return Err("--capacity_path: a tiered store's checkpoint needs \
                        --checkpoint_capacity_path too (where its capacity volume goes)"
                .into());
        }
        (None, Some(_)) => {
            return Err("--checkpoint_capacity_path: only a tiered store, opened with \
                        --capacity_path, has a capacity volume to checkpoint"
                .into());
        }
        (None, None) => engine_of(&args.src)?,
    };
    let src = args.src.display();
    // Every engine reports every 100,000 entries and once more at the end; the end is the
    // line printed below.
    let mut progress = |n: u64| {
        if n > 0 && n % shale_lsm::PROGRESS_ENTRIES == 0 {
            eprintln!("shale checkpoint: {n} entries copied");
        }
    };
    let copied = match engine {
        Engine::Lsm => {
            let mut opts = Options::default();
            opts.volume.create_if_blank = false;
            opts.tiers.capacity_path = args.capacity_path.clone();
            let db = Db::open_read_only(&args.src, opts).map_err(|e| {
                format!("cannot open the lsm store at {src}: {}", shale_io::Chain(&e))
            })?;
            let copy = CheckpointOptions { capacity_path: args.checkpoint_capacity_path.clone() };
            let copied = db.checkpoint_with(&args.dst, &copy, &mut progress)?;
            db.close()?;
            copied
        }
        Engine::Hash => {
            let opts = HashOptions { create_if_missing: false, ..HashOptions::default() };
            let store = HashStore::open(&args.src, opts).map_err(|e| {
                format!("cannot open the hash store at {src}: {}", shale_io::Chain(&e))
            })?;
            let copied = store.checkpoint_with(&args.dst, &mut progress)?;
            store.close();
            copied
        }
        Engine::Table => {
            let opts = TableOptions { create_if_missing: false, ..TableOptions::default() };
            let store = TableStore::open(&args.src, opts).map_err(|e| {
                format!("cannot open the table store at {src}: {}", shale_io::Chain(&e))
            })?;
            store.checkpoint_with(&args.dst, &mut progress)?
        }
    };
    let unit = if engine == Engine::Table { "rows" } else { "entries" };
    println!(
        "checkpoint of the {} store at {src}: {copied} {unit} at {}",
        engine.name(),
        args.dst.display()
    );
    Ok(())
}
