//! `shale check PATH`: recover a store read-only, verify every checksum (range-deletion blocks read again
//! from the device included) and the LSM invariants, and exit non-zero naming what is wrong.

use std::path::PathBuf;

use shale_lsm::{Db, Options};

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

/// Runs the command. The store is opened read-only ([`Db::open_read_only`]): its WAL and WAL
/// tail are replayed into memory and checked there, and nothing is written, so a check never
/// changes what it verifies, works on a read-only mount or a full file system, and runs beside
/// other readers (a store open for writing is refused as in use). A store that cannot be
/// recovered is reported as such.
///
/// # Errors
/// The first problem found.
pub fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let mut opts = Options::default();
    opts.volume.create_if_blank = false;
    opts.tiers.capacity_path = args.capacity_path.clone();
    let db =
        Db::open_read_only(&args.path, opts).map_err(|e| format!("cannot open the store: {e}"))?;
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
