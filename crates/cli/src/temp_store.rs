//! The temporary store of a benchmark run without `--db` (or `--paths`): a directory made in
//! `$TMPDIR`, removed when the run ends, fails or is stopped by SIGINT or SIGTERM
//! (`crate::interrupt`).
//!
//! Removal has two steps, in this order, when the [`TempStore`] is dropped (after the store
//! itself was closed or dropped: declare the `TempStore` before the store):
//! 1. The engine's own removal (`crate::store::destroy` for the lsm engine), which also
//!    removes what the store keeps outside its directory (its WAL tail in `/dev/shm`); a
//!    failure is reported on stderr, and step 2 still runs.
//! 2. The directory and whatever it still holds (`tempfile::TempDir`'s drop).

use std::path::Path;

use tempfile::TempDir;

/// An engine's removal of a closed store at a path (step 1 of the module comment).
pub type Destroy = fn(&Path) -> Result<(), Box<dyn std::error::Error>>;

/// A temporary directory holding one store, removed on drop.
pub struct TempStore {
    dir: TempDir,
    destroy: Option<Destroy>,
}

impl TempStore {
    /// A new, empty directory named `prefix...` in the temporary directory; `destroy` is the
    /// engine's removal, `None` for an engine that keeps nothing outside the directory.
    ///
    /// # Errors
    /// The directory cannot be made (the error names where).
    pub fn new(
        prefix: &str,
        destroy: Option<Destroy>,
    ) -> Result<TempStore, Box<dyn std::error::Error>> {
        Ok(TempStore { dir: crate::store::temp_dir(prefix)?, destroy })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Says on stderr where the store is and which volume it is, so that a user (or a test)
    /// knows what the run makes and removes: the volume id names the store's files outside
    /// the directory (its WAL tail in `/dev/shm`).
    pub fn announce(&self, command: &str, volume_id: &[u8; 16]) {
        let id: String = volume_id.iter().map(|b| format!("{b:02x}")).collect();
        errln!(
            "shale {command}: temporary store {} (volume id {id}), removed when the run ends \
             or is stopped by SIGINT or SIGTERM",
            self.path().display()
        );
    }
}

impl Drop for TempStore {
    fn drop(&mut self) {
        if let Some(destroy) = self.destroy {
            if let Err(e) = destroy(self.dir.path()) {
                errln!("shale: removing the temporary store {}: {e}", self.dir.path().display());
            }
        }
    }
}
