//! `shale ycsb --engine table`: the workloads on the table engine, in LATTE's row layout (a
//! 255-byte key and five 50-byte columns: `ycsb::table`).
//!
//! Stages, as for the lsm engine (`super::run`), with the table store's own:
//! 1. The record layout is fixed at five fields of 50 bytes: other `--fieldcount` or
//!    `--fieldlength` values are refused, not silently changed.
//! 2. The store is a directory (a temporary one without `--db`). Its undo log is on its
//!    volume unless DAX persistent memory is found (`--undo_log auto`, the default), or in a
//!    persistent memory file when asked for (`--undo_log pmem`, or `--pmem_path`: LATTE's
//!    emulation, by default a new file in /dev/shm; printed in the header). A store made
//!    with a file names it in its catalog, so `--use_existing_db` finds it, and a copy or a
//!    reboot that loses it is refused (`shale_table::Error::UndoLogMissing`). Without
//!    `--use_existing_db`, a table store at `--db` is destroyed (its volume, and its undo log
//!    file when its own: never the file of the store a copy was made from) and anything
//!    else there is refused untouched.
//! 3. The phases run and print YCSB's report; every operation is a transaction committed
//!    (durable) before it returns, so `--sync` changes nothing here.

use std::path::{Path, PathBuf};

use ::ycsb::table::{TableEngine, TableEngineOptions};
use shale_table::{PMEM_FILE_NAME, TableOptions, TableStore, UndoLogPlace};

use super::{Args, Error};

/// The volume file of a table store (`shale_table`'s name for it).
const VOLUME_FILE: &str = "volume.shale";

/// Checks that the record layout is LATTE's.
///
/// # Errors
/// `--fieldcount` or `--fieldlength` other than 5 and 50.
pub fn check_layout(args: &Args) -> Result<(), Error> {
    let l = ::ycsb::table::LAYOUT;
    if (args.field_count(), args.field_length()) != (l.field_count, l.field_length) {
        return Err(format!(
            "--engine table stores LATTE's rows: a 255-byte key and {} columns of {} bytes; pass \
             --fieldcount {} --fieldlength {} (got {} x {})",
            l.field_count,
            l.field_length,
            l.field_count,
            l.field_length,
            args.field_count(),
            args.field_length()
        )
        .into());
    }
    Ok(())
}

/// Where `args` put the undo log.
pub fn place(args: &Args) -> UndoLogPlace {
    match (args.undo_log.as_deref(), &args.pmem_path) {
        (Some("volume"), _) => UndoLogPlace::Volume,
        (Some("pmem"), _) | (None, Some(_)) => UndoLogPlace::Pmem,
        _ => UndoLogPlace::Auto,
    }
}

/// A new persistent memory file in /dev/shm for a new store whose log `--undo_log pmem`
/// puts in emulated persistent memory without `--pmem_path`: named by the process and the
/// clock, never by the store's path (a store made there later, or a copy, must not find
/// it); the store names it in its catalog.
fn new_shm_file() -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    PathBuf::from(format!("/dev/shm/shale-table-undo-{}-{nanos:x}.pmem", std::process::id()))
}

/// The store's options for `args`; `new_store`: no store is at the path yet.
pub fn options(args: &Args, new_store: bool) -> TableOptions {
    let undo_log = place(args);
    let pmem_path = match (&args.pmem_path, undo_log, new_store) {
        (Some(p), _, _) => Some(p.clone()),
        (None, UndoLogPlace::Pmem, true) => Some(new_shm_file()),
        _ => None,
    };
    let mut o = TableOptions {
        undo_log,
        pmem_path,
        accept_lost_undo_log: args.accept_lost_undo_log,
        ..TableOptions::default()
    };
    if let Some(bytes) = args.cache_size {
        o.cache_blocks = (bytes / shale_table::BLOCK_BYTES).max(16);
    }
    if args.io_queues > 0 {
        o.queue_pairs = Some(shale_io::QueuePairOptions {
            pairs: args.io_queues,
            affinity: args.io_affinity,
            poller: args.io_poller,
            sq_poll: args.io_sq_poll,
            ..shale_io::QueuePairOptions::default()
        });
    }
    o
}

/// Empties a table store at `dir`: destroys the store (its volume, and its undo log file
/// when its own); refuses anything else that is there, untouched.
fn empty_store(dir: &Path) -> Result<(), Error> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(()) };
    let names: Vec<String> =
        entries.filter_map(Result::ok).map(|e| e.file_name().to_string_lossy().into()).collect();
    let ours = |n: &String| n == VOLUME_FILE || n == PMEM_FILE_NAME;
    if let Some(other) = names.iter().find(|n| !ours(n)) {
        return Err(format!(
            "{} holds {other:?}, which is not a table store's: refusing to empty it",
            dir.display()
        )
        .into());
    }
    if names.iter().any(|n| n == VOLUME_FILE) {
        TableStore::destroy(dir).map_err(|e| {
            format!("emptying the table store at {}: {}", dir.display(), shale_io::Chain(&e))
        })?;
    }
    // A file the open of a store retired, or one left without its volume.
    match std::fs::remove_file(dir.join(PMEM_FILE_NAME)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
        _ => Ok(()),
    }
}

/// Opens the store for `args` at `dir` (emptied first unless `--use_existing_db`); returns
/// it with its undo log's persistent memory file, if it has one.
///
/// # Errors
/// Something else at `--db`, the store's errors.
pub fn open(args: &Args, dir: &Path) -> Result<(TableEngine, Option<PathBuf>), Error> {
    if args.use_existing_db {
        if !dir.join(VOLUME_FILE).exists() {
            return Err(format!("--use_existing_db: no table store at {}", dir.display()).into());
        }
    } else {
        empty_store(dir)?;
    }
    let mut opts = options(args, !args.use_existing_db);
    opts.create_if_missing = !args.use_existing_db;
    let made = opts.pmem_path.clone().filter(|p| !p.exists());
    let engine = TableEngine::open(dir, TableEngineOptions { table: opts }).map_err(|e| {
        // A file this open made for a store that did not open goes with it.
        if let Some(p) = &made {
            let _ = std::fs::remove_file(p);
        }
        format!(
            "opening the table store at {}: {}",
            dir.display(),
            flag_names(&shale_io::Chain(&*e).to_string())
        )
    })?;
    let pmem = engine.store().undo_log_path().map(Path::to_path_buf);
    Ok((engine, pmem))
}

/// The engine's message with its option names as this command's flags.
fn flag_names(msg: &str) -> String {
    msg.replace("(accept_lost_undo_log)", "(--accept_lost_undo_log)")
        .replace("as pmem_path", "as --pmem_path")
        .replace("(pmem_path)", "(--pmem_path)")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(flags: &[&str]) -> Args {
        super::super::tests::parse_args(flags).unwrap()
    }

    #[test]
    fn the_undo_log_goes_where_the_flags_say() {
        let a = parse(&[]);
        assert_eq!(place(&a), UndoLogPlace::Auto);
        assert_eq!(options(&a, true).pmem_path, None);
        let a = parse(&["--undo_log=pmem"]);
        let p = options(&a, true).pmem_path.unwrap();
        assert!(p.starts_with("/dev/shm") && p.to_string_lossy().ends_with(".pmem"), "{p:?}");
        // An existing store names its own file: none is made up.
        assert_eq!(options(&a, false).pmem_path, None);
        let a = parse(&["--pmem_path=/tmp/log", "--cache_size=1048576"]);
        assert_eq!(place(&a), UndoLogPlace::Pmem);
        assert_eq!(options(&a, false).pmem_path.as_deref(), Some(Path::new("/tmp/log")));
        assert_eq!(options(&a, true).cache_blocks, 256);
        let a = parse(&["--undo_log=volume", "--accept_lost_undo_log"]);
        let o = options(&a, true);
        assert_eq!((o.undo_log, o.accept_lost_undo_log), (UndoLogPlace::Volume, true));
        assert!(super::super::tests::parse_args(&["--undo_log=shm"]).is_err());
        let a = parse(&["--engine=table"]);
        check_layout(&a).unwrap();
        let a = parse(&["--engine=table", "--fieldcount=10"]);
        assert!(check_layout(&a).unwrap_err().to_string().contains("--fieldcount 5"));
    }

    #[test]
    fn only_a_table_store_is_emptied() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("precious"), b"x").unwrap();
        let err = empty_store(dir.path()).unwrap_err().to_string();
        assert!(err.contains("precious"), "{err}");
        assert!(dir.path().join("precious").exists());
        std::fs::remove_file(dir.path().join("precious")).unwrap();
        let shm = tempfile::tempdir().unwrap();
        let pmem = shm.path().join("p");
        let o = TableOptions {
            undo_log: UndoLogPlace::Pmem,
            pmem_path: Some(pmem.clone()),
            ..TableOptions::default()
        };
        drop(TableStore::open(dir.path(), o).unwrap());
        assert!(pmem.exists());
        empty_store(dir.path()).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert!(!pmem.exists());
    }
}
