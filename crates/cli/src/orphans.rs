//! `shale orphans [--dir DIR] [--under DIR] [--remove]`: the files stores keep in `/dev/shm`
//! (or DIR) whose store is gone, listed and, on request, removed.
//!
//! Why: two kinds of file live outside a store's directory, in memory until a reboot:
//! - the lsm engine's WAL tail (`shale-<volume id>-<instance id>.tail`), which holds the
//!   writes a store acknowledged without sync until their WAL pages are on the device;
//! - the table engine's undo log in emulated persistent memory (`shale ycsb --engine table
//!   --undo_log pmem` makes `shale-table-undo-*.pmem`; `--pmem_path` any name), which holds
//!   the before-images that roll back a transaction in flight.
//!
//! Each is removed when its store closes cleanly or is destroyed; a store deleted by hand
//! after a crash (`rm -r`) leaves it holding memory until the machine reboots. Each names
//! the store's volume file as its last read-write open saw it (the tail's trailer,
//! `wal/tail.rs`; the undo log's owner trailer, `pmem_owner.rs`), and the volume and the
//! instance it belongs to (its header), so a file is:
//! - in use: a store holds it now (its lock is taken);
//! - kept: the file it names is that store's volume (same volume and instance id);
//! - orphaned: nothing is at that path, or another volume or another copy is;
//! - unknown: a file that names no volume file (a tail of format 1, an undo log written
//!   before the owner trailer): never removed here.
//!
//! Files of other kinds in the directory are left out of the listing: a tail is recognized
//! by its name and magic, an undo log by its checksummed headers.
//! A store moved (renamed to another directory) while it was not open still finds its
//! files (by volume and instance id, or by its catalog), but they name the old path until
//! its next open: open such a store once before removing orphans.
//! Removal takes the file's lock and looks again under it, so a store opening meanwhile
//! keeps its file.

use std::path::{Path, PathBuf};

use shale_lsm::wal::tail::{TailFile, describe as describe_tail};
use shale_table::pmem_owner::{PmemFile, describe as describe_undo_log};

/// Arguments of `shale orphans`.
#[derive(clap::Args)]
pub struct Args {
    /// The directory the files are in (`WalTail::Dir`'s or `--pmem_path`'s, or the default).
    #[arg(long, default_value = "/dev/shm")]
    dir: PathBuf,
    /// Remove the orphaned files (without it, only list them).
    #[arg(long)]
    remove: bool,
    /// Only the files whose store (the volume file each names) lies under this directory:
    /// what the stores of one tree left, say a test run's temporary directory, leaving
    /// every other store's files alone.
    #[arg(long, value_name = "DIR")]
    under: Option<PathBuf>,
}

/// What became of one tail.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    InUse,
    Kept,
    Orphaned(String),
    Unknown,
}

/// A file a store keeps outside its directory.
#[derive(Debug)]
enum Leftover {
    Tail(TailFile),
    UndoLog(PmemFile),
}

impl Leftover {
    fn path(&self) -> &Path {
        match self {
            Leftover::Tail(t) => &t.path,
            Leftover::UndoLog(u) => &u.path,
        }
    }

    /// What it is and what it holds, for the listing.
    fn what(&self) -> String {
        match self {
            Leftover::Tail(t) => format!("WAL tail, {} bytes of records", t.held_bytes),
            Leftover::UndoLog(u) => format!("table undo log, {} bytes", u.bytes),
        }
    }

    fn volume_path(&self) -> Option<&Path> {
        match self {
            Leftover::Tail(t) => t.volume_path.as_deref(),
            Leftover::UndoLog(u) => u.volume_path.as_deref(),
        }
    }

    fn in_use(&self) -> bool {
        match self {
            Leftover::Tail(t) => t.in_use,
            Leftover::UndoLog(u) => u.in_use,
        }
    }

    fn volume_id(&self) -> [u8; 16] {
        match self {
            Leftover::Tail(t) => t.volume_id,
            Leftover::UndoLog(u) => u.volume_id,
        }
    }

    /// Whether the volume file at `volume`, of volume id `id`, is the very store instance
    /// this file belongs to. Each engine names an instance its own way: the tail by
    /// `shale_space::instance_id`, the undo log by the table engine's file identity.
    fn belongs_to(&self, volume: &Path, id: [u8; 16]) -> bool {
        match self {
            Leftover::Tail(t) => {
                id == t.volume_id
                    && shale_space::instance_id(volume).is_ok_and(|i| i == t.instance_id)
            }
            Leftover::UndoLog(u) => u.belongs_to(volume, id),
        }
    }
}

/// What the file at `path` is, if a store made it: a tail by its name and magic, an undo
/// log by its headers. Files that cannot be read (another user's) are none of ours to judge.
fn recognize(path: &Path) -> Result<Option<Leftover>, Box<dyn std::error::Error>> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name.starts_with("shale-") && name.ends_with(".tail") {
        return Ok(describe_tail(path)?.map(Leftover::Tail));
    }
    if !std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file()) {
        return Ok(None);
    }
    Ok(describe_undo_log(path).ok().flatten().map(Leftover::UndoLog))
}

/// Lists the files of `args.dir` that stores made, with their verdict, and removes the
/// orphaned ones with `--remove`.
///
/// # Errors
/// The directory cannot be listed, or a tail cannot be read, or a file cannot be removed
/// (named).
pub fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let mut found = Vec::new();
    let entries =
        std::fs::read_dir(&args.dir).map_err(|e| format!("listing {}: {e}", args.dir.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| format!("listing {}: {e}", args.dir.display()))?.path();
        if let Some(f) = recognize(&path)? {
            found.push(f);
        }
    }
    let mut elsewhere = 0;
    if let Some(under) = &args.under {
        // Compared as a store records its path: canonical, as its open resolved it (the
        // directory may be gone already: then as given, made absolute).
        let under = std::fs::canonicalize(under)
            .or_else(|_| std::path::absolute(under))
            .map_err(|e| format!("--under {}: {e}", under.display()))?;
        let before = found.len();
        found.retain(|f| f.volume_path().is_some_and(|v| v.starts_with(&under)));
        elsewhere = before - found.len();
    }
    found.sort_by(|a, b| a.path().cmp(b.path()));
    let (mut orphaned, mut removed) = (0, 0);
    for f in &found {
        let verdict = judge(f);
        let store =
            f.volume_path().map_or("(no path recorded)".into(), |p| p.display().to_string());
        let what = match &verdict {
            Verdict::InUse => "in use".to_string(),
            Verdict::Kept => "kept: its store is there".to_string(),
            Verdict::Orphaned(why) => format!("orphaned: {why}"),
            Verdict::Unknown => "unknown: an older file that names no store (left)".to_string(),
        };
        println!("{}  {}  store {store}  {what}", f.path().display(), f.what());
        if let Verdict::Orphaned(_) = verdict {
            orphaned += 1;
            if args.remove && remove(f.path())? {
                removed += 1;
                println!("removed {}", f.path().display());
            }
        }
    }
    let others = match &args.under {
        Some(under) => format!(" ({elsewhere} of stores not under {} left out)", under.display()),
        None => String::new(),
    };
    println!("{} files, {orphaned} orphaned, {removed} removed{others}", found.len());
    if orphaned > 0 && !args.remove {
        println!(
            "(a store moved while it was not open still needs its files: open it once first; \
             then `shale orphans --remove`)"
        );
    }
    Ok(())
}

/// The verdict on one file, from what is at the path it names now.
fn judge(f: &Leftover) -> Verdict {
    if f.in_use() {
        return Verdict::InUse;
    }
    let Some(volume) = f.volume_path() else {
        return Verdict::Unknown;
    };
    if std::fs::symlink_metadata(volume).is_err() {
        return Verdict::Orphaned(format!("nothing is at {}", volume.display()));
    }
    match volume_id(volume) {
        Some(id) if f.belongs_to(volume, id) => Verdict::Kept,
        Some(id) if id == f.volume_id() => {
            Verdict::Orphaned(format!("{} is another copy of that store", volume.display()))
        }
        _ => Verdict::Orphaned(format!("{} holds another volume", volume.display())),
    }
}

/// The volume id of the volume file at `volume`, if it is one.
fn volume_id(volume: &Path) -> Option<[u8; 16]> {
    let device = shale_io::open_device_read_only(volume, &shale_io::FileOptions::default()).ok()?;
    Some(shale_space::Volume::peek_header(&device).ok()??.volume_id)
}

/// Removes the file at `path` under its exclusive lock, after judging it again there:
/// `false` when it is no orphan any more (a store took it meanwhile).
fn remove(path: &Path) -> Result<bool, Box<dyn std::error::Error>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| format!("opening {}: {e}", path.display()))?;
    // Held to the end, let go explicitly (`store_lock::unlock`) where the file stays.
    let Ok(_held) =
        shale_space::store_lock::LockedFile::lock(file, shale_space::store_lock::Mode::Exclusive)
    else {
        return Ok(false);
    };
    // Under our lock the file reads as in use: judge what it names.
    let Some(mut f) = recognize(path)? else { return Ok(false) };
    match &mut f {
        Leftover::Tail(t) => t.in_use = false,
        Leftover::UndoLog(u) => u.in_use = false,
    }
    if !matches!(judge(&f), Verdict::Orphaned(_)) {
        return Ok(false);
    }
    std::fs::remove_file(path).map_err(|e| format!("removing {}: {e}", path.display()))?;
    Ok(true)
}
