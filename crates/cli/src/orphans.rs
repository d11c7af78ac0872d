//! `shale orphans [--dir DIR] [--remove]`: the WAL tails in `/dev/shm` (or DIR) whose store
//! is gone, listed and, on request, removed.
//!
//! Why: a tail holds the writes a store acknowledged without sync until their WAL pages are
//! on the device; it is removed when its store closes cleanly or is destroyed. A store
//! deleted by hand after a crash (`rm -r`) leaves its tail holding memory until the machine
//! reboots. Each tail's trailer names the store's volume file as its last read-write open saw
//! it, and its header the volume and instance ids (`wal/tail.rs`), so a tail is:
//! - in use: a store holds it now (its lock is taken);
//! - kept: the file it names is that store's volume (same volume and instance id);
//! - orphaned: nothing is at that path, or another volume or another copy is;
//! - unknown: a tail of format 1, which names no file: never removed here.
//!
//! A store moved (renamed to another directory) while it was not open still finds its tail
//! (by volume and instance id), but its tail names the old path until its next open: open
//! such a store once before removing orphans.
//! Removal takes the tail's lock and looks again under it, so a store opening meanwhile keeps
//! its tail.

use std::path::{Path, PathBuf};

use shale_lsm::wal::tail::{TailFile, describe};

/// Arguments of `shale orphans`.
#[derive(clap::Args)]
pub struct Args {
    /// The directory the tails are in (`WalTail::Dir`'s, or the default).
    #[arg(long, default_value = "/dev/shm")]
    dir: PathBuf,
    /// Remove the orphaned tails (without it, only list them).
    #[arg(long)]
    remove: bool,
}

/// What became of one tail.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    InUse,
    Kept,
    Orphaned(String),
    Unknown,
}

/// Lists the tails of `args.dir` with their verdict, and removes the orphaned ones with
/// `--remove`.
///
/// # Errors
/// The directory cannot be listed, or a tail cannot be read or removed (named).
pub fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let mut tails = Vec::new();
    let entries =
        std::fs::read_dir(&args.dir).map_err(|e| format!("listing {}: {e}", args.dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| format!("listing {}: {e}", args.dir.display()))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !(name.starts_with("shale-") && name.ends_with(".tail")) {
            continue;
        }
        if let Some(t) = describe(&path)? {
            tails.push(t);
        }
    }
    tails.sort_by(|a, b| a.path.cmp(&b.path));
    let (mut orphaned, mut removed) = (0, 0);
    for t in &tails {
        let verdict = judge(t);
        let held = format!("{} bytes of records", t.held_bytes);
        let store = t
            .volume_path
            .as_deref()
            .map_or("(no path recorded)".into(), |p| p.display().to_string());
        let what = match &verdict {
            Verdict::InUse => "in use".to_string(),
            Verdict::Kept => "kept: its store is there".to_string(),
            Verdict::Orphaned(why) => format!("orphaned: {why}"),
            Verdict::Unknown => "unknown: an older tail that names no store (left)".to_string(),
        };
        println!("{}  store {store}  {held}  {what}", t.path.display());
        if let Verdict::Orphaned(_) = verdict {
            orphaned += 1;
            if args.remove && remove(&t.path)? {
                removed += 1;
                println!("removed {}", t.path.display());
            }
        }
    }
    println!("{} tails, {orphaned} orphaned, {removed} removed", tails.len());
    if orphaned > 0 && !args.remove {
        println!(
            "(a store moved while it was not open still needs its tail: open it once first; \
             then `shale orphans --remove`)"
        );
    }
    Ok(())
}

/// The verdict on one tail, from what is at the path it names now.
fn judge(t: &TailFile) -> Verdict {
    if t.in_use {
        return Verdict::InUse;
    }
    let Some(volume) = &t.volume_path else {
        return Verdict::Unknown;
    };
    if std::fs::symlink_metadata(volume).is_err() {
        return Verdict::Orphaned(format!("nothing is at {}", volume.display()));
    }
    match identity(volume) {
        Some((id, instance)) if id == t.volume_id && instance == t.instance_id => Verdict::Kept,
        Some((id, _)) if id == t.volume_id => {
            Verdict::Orphaned(format!("{} is another copy of that store", volume.display()))
        }
        _ => Verdict::Orphaned(format!("{} holds another volume", volume.display())),
    }
}

/// The volume id and instance id of the volume file at `volume`, if it is one.
fn identity(volume: &Path) -> Option<([u8; 16], [u8; 16])> {
    let device = shale_io::open_device_read_only(volume, &shale_io::FileOptions::default()).ok()?;
    let header = shale_space::Volume::peek_header(&device).ok()??;
    Some((header.volume_id, shale_space::instance_id(volume).ok()?))
}

/// Removes the tail at `path` under its exclusive lock, after judging it again there:
/// `false` when it is no orphan any more (a store took it meanwhile).
fn remove(path: &Path) -> Result<bool, Box<dyn std::error::Error>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| format!("opening {}: {e}", path.display()))?;
    if shale_space::store_lock::lock(&file, shale_space::store_lock::Mode::Exclusive).is_err() {
        return Ok(false);
    }
    // Under our lock `describe` sees the tail as in use: judge what it names.
    let Some(mut t) = describe(path)? else { return Ok(false) };
    t.in_use = false;
    if !matches!(judge(&t), Verdict::Orphaned(_)) {
        return Ok(false);
    }
    std::fs::remove_file(path).map_err(|e| format!("removing {}: {e}", path.display()))?;
    Ok(true)
}
