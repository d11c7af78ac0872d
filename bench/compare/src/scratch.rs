//! Scratch directories: the stores the harness makes under `--work-dir`, emptied between
//! runs and removed at the end, and nothing else.
//!
//! Why: the harness's directories have fixed names (`ycsb-rocksdb`, `shale-fillseq`, ...)
//! under a directory the user names; removing whatever stands at such a name would delete a
//! directory of the user's that happens to share it. Each scratch directory is made with a
//! marker file in it, and only a directory with the marker (or an empty one) is ever emptied
//! or removed; anything else is refused, untouched.

use std::path::Path;

use crate::Error;

/// The marker file the harness writes into each scratch directory it makes.
const MARKER: &str = ".shale-compare-scratch";

/// Makes `dir` an empty scratch directory: a new one, or one the harness made before
/// (emptied); an empty directory is taken over. Anything else is refused.
///
/// # Errors
/// A directory (or file) at `dir` that the harness did not make; the file system's errors.
pub fn fresh(dir: &Path) -> Result<(), Error> {
    remove(dir)?;
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join(MARKER), b"made by shale-compare; removed with its directory\n")?;
    Ok(())
}

/// Where an engine's store goes inside the scratch directory `dir`: a directory of its own,
/// not made yet, since an engine may ask for a new or empty one (shale refuses a directory
/// holding anything but its store, the marker included).
pub fn store(dir: &Path) -> std::path::PathBuf {
    dir.join("store")
}

/// Removes the scratch directory `dir` with everything in it, if the harness made it; an
/// empty directory goes too, and a missing one is fine.
///
/// # Errors
/// As [`fresh`].
pub fn remove(dir: &Path) -> Result<(), Error> {
    let meta = match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e.into()),
        Ok(m) => m,
    };
    let ours =
        meta.is_dir() && (dir.join(MARKER).is_file() || std::fs::read_dir(dir)?.next().is_none());
    if !ours {
        return Err(format!(
            "{} is not a scratch directory of shale-compare (no {MARKER} in it): refusing to \
             remove it; name another --work-dir",
            dir.display()
        )
        .into());
    }
    std::fs::remove_dir_all(dir)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_harness_directories_are_removed() {
        let base = tempfile_dir();
        let scratch = base.join("ycsb-rocksdb");
        fresh(&scratch).unwrap();
        std::fs::write(scratch.join("data"), b"x").unwrap();
        fresh(&scratch).unwrap();
        assert!(!scratch.join("data").exists(), "emptied");
        remove(&scratch).unwrap();
        assert!(!scratch.exists());
        // A user's directory at a harness name is refused and kept.
        let users = base.join("ycsb-shale");
        std::fs::create_dir_all(&users).unwrap();
        std::fs::write(users.join("thesis.tex"), b"precious").unwrap();
        assert!(fresh(&users).is_err());
        assert!(remove(&users).is_err());
        assert_eq!(std::fs::read(users.join("thesis.tex")).unwrap(), b"precious");
        // A file at a harness name too; an empty directory is taken over.
        let file = base.join("timeline-shale");
        std::fs::write(&file, b"notes").unwrap();
        assert!(fresh(&file).is_err());
        let empty = base.join("shale-fillseq");
        std::fs::create_dir_all(&empty).unwrap();
        fresh(&empty).unwrap();
        std::fs::remove_dir_all(&base).unwrap();
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("shale-compare-scratch-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
