//! `shale check PATH`: verify a store of any engine without writing to it, and exit non-zero
//! naming what is wrong. The engine is told from the store (`engine_kind.rs`):
//! - lsm: recover the store read-only (its WAL and WAL tail replayed into memory), verify
//!   every checksum (range-deletion blocks read again from the device included) and the LSM
//!   invariants, and read every key once through the merged view, so a store whose writes
//!   are still in its WAL is counted too;
//! - hash: every record of every segment read and checksummed, the index checkpoint decoded,
//!   and the index rebuilt the engine's way compared with the log (`shale_hash::check_store`);
//! - table: the undo logs walked, every block of every table checked, the catalog and
//!   schemas, every live row found through its primary index (`shale_table::check_store`).

use std::path::PathBuf;

use shale_lsm::{Db, Options, ReadOptions};

use crate::engine_kind::{EngineKind, engine_of};

/// Arguments of `shale check`.
#[derive(clap::Args)]
pub struct Args {
    /// A store: its directory, its volume file, or a block device.
    path: PathBuf,
    /// The capacity volume of a tiered store (its directory, its file, or a block device):
    /// a tiered store is checked over both volumes.
    #[arg(long = "capacity_path", alias = "capacity-path")]
    capacity_path: Option<PathBuf>,
}

/// Runs the command on the store's engine. Nothing is written, so a check never changes
/// what it verifies, works on a read-only mount or a full file system, and runs beside
/// other readers (a store open for writing is refused as in use). A store that cannot be
/// recovered is reported as such.
///
/// # Errors
/// The first problem found.
pub fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let kind = match &args.capacity_path {
        // Only the lsm engine has tiered stores.
        Some(_) => EngineKind::Lsm,
        None => engine_of(&args.path)
            .map_err(|e| format!("cannot open the store: {}", shale_io::Chain(&e)))?,
    };
    let damaged = scrub(args)?;
    match kind {
        EngineKind::Lsm => run_lsm(args),
        EngineKind::Hash => run_hash(args),
        EngineKind::Table => run_table(args),
    }?;
    if damaged > 0 {
        return Err(format!(
            "{damaged} damaged redundant copies (listed above): the store is readable from their \
             twins, but one more hit loses it; open it read-write once (any command that opens \
             it for writing) to rewrite them"
        )
        .into());
    }
    Ok(())
}

/// The scrub of the redundant copies, for every engine: both copies of each format header
/// and both mirrors of the version log's live chain and anchors, read by a read-only open of
/// the volume. Each damaged copy gets a `damaged:` line; returns how many.
fn scrub(args: &Args) -> Result<usize, Box<dyn std::error::Error>> {
    let opts = shale_space::VolumeOptions { create_if_blank: false, ..Default::default() };
    let files = shale_io::FileOptions::default();
    let opened = match &args.capacity_path {
        None => shale_space::Volume::open_path_read_only(&args.path, &opts, &files),
        Some(cap) => {
            shale_space::Volume::open_path_tiered_read_only(&args.path, cap, &opts, &files)
        }
    }
    .map_err(|e| format!("cannot open the store: {}", shale_io::Chain(&e)))?;
    let damaged = opened.volume.damaged_copies();
    for d in damaged {
        println!("damaged: {} at byte offset {} (its twin is valid)", d.what, d.offset);
    }
    Ok(damaged.len())
}

/// The lsm engine's check. The store is opened read-only ([`Db::open_read_only`]): its WAL
/// and WAL tail are replayed into memtables and checked there.
fn run_lsm(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let mut opts = Options::default();
    opts.volume.create_if_blank = false;
    opts.tiers.capacity_path = args.capacity_path.clone();
    let db = Db::open_read_only(&args.path, opts)
        .map_err(|e| format!("cannot open the store: {}", shale_io::Chain(&e)))?;
    let report = db.check().map_err(|e| format!("check failed: {}", shale_io::Chain(&e)))?;
    let stats = db.stats();
    // Every key once through the merged view: memtables recovered from the WAL included.
    let mut keys = 0u64;
    let mut it = db.iter(&ReadOptions::default());
    it.seek_to_first();
    while it.valid() {
        keys += 1;
        it.next();
    }
    it.status().map_err(|e| format!("check failed reading the keys: {}", shale_io::Chain(&e)))?;
    drop(it);
    println!(
        "ok: lsm store, {} SSTs, {} entries in SSTs, {} range tombstones, {} live slots; \
         files per level {:?}",
        report.ssts,
        report.entries,
        report.range_tombstones,
        report.live_slots,
        stats.files_per_level
    );
    println!(
        "recovered: {} memtables recovered from the WAL; {keys} live keys in all (SSTs and \
         memtables), last sequence {}",
        stats.memtables, stats.last_seq
    );
    if stats.tiers.len() > 1 {
        let t: Vec<String> = stats
            .tiers
            .iter()
            .map(|t| format!("{} SSTs, {} bytes on the {} volume", t.ssts, t.live_bytes, t.name))
            .collect();
        println!("tiers: {}", t.join("; "));
    }
    db.close()?;
    Ok(())
}

fn run_hash(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let r = shale_hash::check_store(&args.path)
        .map_err(|e| format!("check failed: {}", shale_io::Chain(&e)))?;
    let checkpoint = match r.checkpoint {
        Some((generation, entries)) => {
            format!("index checkpoint generation {generation} ({entries} entries) valid")
        }
        None => "no index checkpoint".to_string(),
    };
    let index = match (r.bounded, r.checkpoint.is_some()) {
        (true, _) => {
            "bounded index: its pages on the volume are not read by the check; an index \
             rebuilt from every segment agrees with the log"
        }
        (false, true) => "the index rebuilt from the checkpoint and the log agrees with the log",
        (false, false) => "the index rebuilt from the log agrees with it",
    };
    println!(
        "ok: hash store, {} segments, {} records ({} stores, {} deletes), {} live keys; \
         {checkpoint}; {index}",
        r.segments.len(),
        r.records,
        r.stores,
        r.records - r.stores,
        r.keys
    );
    Ok(())
}

fn run_table(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let r = shale_table::check_store(&args.path)
        .map_err(|e| format!("check failed: {}", shale_io::Chain(&e)))?;
    let rows: u64 = r.tables.iter().map(|t| t.rows).sum();
    let blocks: u64 = r.tables.iter().map(|t| t.blocks).sum();
    let undo = match &r.undo_file {
        Some(p) => format!("undo log in {}", p.display()),
        None => "undo log on the volume".to_string(),
    };
    println!(
        "ok: table store, {} tables, {rows} rows, {blocks} blocks checked, every row found \
         through its primary index; {undo}, {} records not yet expired",
        r.tables.len(),
        r.undo_records
    );
    for t in &r.tables {
        println!(
            "table {:?}: {} rows, {} dead, {} of {} blocks used",
            t.name, t.rows, t.dead_rows, t.blocks_used, t.blocks
        );
    }
    Ok(())
}
