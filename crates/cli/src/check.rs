//! `shale check PATH`: recover a store, verify every checksum (range-deletion blocks read again
//! from the device included) and the LSM invariants, and exit non-zero naming what is wrong.

use std::path::PathBuf;

use shale_lsm::{Db, Options};

/// Arguments of `shale check`.
#[derive(clap::Args)]
pub struct Args {
    /// A store: its directory, its volume file, or a block device.
    path: PathBuf,
}

/// Runs the command. Opening a store recovers it (replays its WAL into an L0 SST), which
/// writes; a store that cannot be recovered is reported as such.
///
/// # Errors
/// The first problem found.
pub fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let mut opts = Options::default();
    opts.volume.create_if_blank = false;
    let db = Db::open(&args.path, opts).map_err(|e| format!("cannot open the store: {e}"))?;
    let report = db.check().map_err(|e| format!("check failed: {e}"))?;
    let stats = db.stats();
    println!(
        "ok: {} SSTs, {} entries, {} range tombstones, {} live slots; files per level {:?}",
        report.ssts,
        report.entries,
        report.range_tombstones,
        report.live_slots,
        stats.files_per_level
    );
    db.close()?;
    Ok(())
}
