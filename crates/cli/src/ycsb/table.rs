//! `shale ycsb --engine table`: the workloads on the table engine, in LATTE's row layout (a
//! 255-byte key and five 50-byte columns: `ycsb::table`).
//!
//! Stages, as for the lsm engine (`super::run`), with the table store's own:
//! 1. The record layout is fixed at five fields of 50 bytes: other `--fieldcount` or
//!    `--fieldlength` values are refused, not silently changed.
//! 2. The store is a directory (a temporary one without `--db`); its undo log's persistent
//!    memory is a file in /dev/shm unless `--pmem_path` names another (printed in the header).
//!    Without `--use_existing_db`, a table store at `--db` is emptied (its volume and its
//!    persistent memory file) and anything else there is refused untouched.
//! 3. The phases run and print YCSB's report; every operation is a transaction committed
//!    (durable) before it returns, so `--sync` changes nothing here.

use std::path::{Path, PathBuf};

use ::ycsb::table::{TableEngine, TableEngineOptions};
use shale_table::{PMEM_FILE_NAME, TableOptions};

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

/// The persistent memory file for the store at `dir`: `--pmem_path`, or a file in /dev/shm
/// named after the store's path, so that a store at `--db` finds its log again with
/// `--use_existing_db`.
pub fn pmem_path(args: &Args, dir: &Path) -> PathBuf {
    if let Some(p) = &args.pmem_path {
        return p.clone();
    }
    // FNV-1a of the path: a short name that stays the same for the same store.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in dir.as_os_str().as_encoded_bytes() {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    PathBuf::from(format!("/dev/shm/shale-ycsb-table-{h:016x}.pmem"))
}

/// The store's options for `args`.
pub fn options(args: &Args, pmem: PathBuf) -> TableOptions {
    let mut o = TableOptions {
        pmem_path: Some(pmem),
        undo_log_on_volume: args.undo_on_volume,
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

/// Empties a table store at `dir` (volume and persistent memory file); refuses anything
/// else that is there.
fn empty_store(dir: &Path, pmem: &Path) -> Result<(), Error> {
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
    // The volume goes only if it is a table store's (another engine's is refused untouched).
    crate::store::destroy(dir, shale_space::EngineKind::Table)?;
    match std::fs::remove_file(pmem) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
        _ => Ok(()),
    }
}

/// Opens the store for `args` at `dir` (emptied first unless `--use_existing_db`).
///
/// # Errors
/// Something else at `--db`, the store's errors.
pub fn open(args: &Args, dir: &Path) -> Result<(TableEngine, PathBuf), Error> {
    let pmem = pmem_path(args, dir);
    if args.use_existing_db {
        if !dir.join(VOLUME_FILE).exists() {
            return Err(format!("--use_existing_db: no table store at {}", dir.display()).into());
        }
    } else {
        empty_store(dir, &pmem)?;
    }
    let mut opts = options(args, pmem.clone());
    opts.create_if_missing = !args.use_existing_db;
    let engine = TableEngine::open(dir, TableEngineOptions { table: opts })
        .map_err(|e| format!("opening the table store at {}: {e}", dir.display()))?;
    Ok((engine, pmem))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pmem_file_follows_the_store() {
        let a = super::super::tests::parse_args(&[]).unwrap();
        let p = pmem_path(&a, Path::new("/x/store"));
        assert!(p.starts_with("/dev/shm") && p.to_string_lossy().ends_with(".pmem"));
        assert_eq!(p, pmem_path(&a, Path::new("/x/store")));
        assert_ne!(p, pmem_path(&a, Path::new("/x/other")));
        let a = super::super::tests::parse_args(&["--pmem_path=/tmp/log", "--cache_size=1048576"])
            .unwrap();
        assert_eq!(pmem_path(&a, Path::new("/x")), Path::new("/tmp/log"));
        assert_eq!(options(&a, "/tmp/log".into()).cache_blocks, 256);
        let a = super::super::tests::parse_args(&["--engine=table"]).unwrap();
        check_layout(&a).unwrap();
        let a = super::super::tests::parse_args(&["--engine=table", "--fieldcount=10"]).unwrap();
        assert!(check_layout(&a).unwrap_err().to_string().contains("--fieldcount 5"));
        let a = super::super::tests::parse_args(&["--engine=table", "--undo_on_volume"]).unwrap();
        assert!(options(&a, "/tmp/log".into()).undo_log_on_volume);
        assert!(!options(&a_default(), "/tmp/log".into()).undo_log_on_volume);
    }

    fn a_default() -> Args {
        super::super::tests::parse_args(&[]).unwrap()
    }

    #[test]
    fn only_a_table_store_is_emptied() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("precious"), b"x").unwrap();
        let err = empty_store(dir.path(), &dir.path().join("p")).unwrap_err().to_string();
        assert!(err.contains("precious"), "{err}");
        assert!(dir.path().join("precious").exists());
        std::fs::remove_file(dir.path().join("precious")).unwrap();
        std::fs::write(dir.path().join(VOLUME_FILE), b"v").unwrap();
        std::fs::write(dir.path().join(PMEM_FILE_NAME), b"pm").unwrap();
        let shm = tempfile::tempdir().unwrap();
        std::fs::write(shm.path().join("p"), b"pm").unwrap();
        empty_store(dir.path(), &shm.path().join("p")).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert!(!shm.path().join("p").exists());
    }
}
