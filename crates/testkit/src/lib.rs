//! Fixtures shared by the tests of several shale crates.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether the process runs as root (loop devices need it).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and only reads the process's credentials.
    unsafe { libc::geteuid() == 0 }
}

/// A loop device over a file, attached with `losetup --direct-io=on` and detached when dropped
/// (even when the test fails).
pub struct LoopDevice {
    path: PathBuf,
}

impl LoopDevice {
    /// Attaches `file` to a free loop device.
    ///
    /// # Errors
    /// Why it could not (not root, no losetup, no free device), for the test to print as its
    /// reason to skip.
    pub fn attach(file: &Path) -> Result<LoopDevice, String> {
        if !is_root() {
            return Err("attaching a loop device needs root".into());
        }
        let out = Command::new("losetup")
            .args(["--direct-io=on", "--find", "--show"])
            .arg(file)
            .output()
            .map_err(|e| format!("cannot run losetup: {e}"))?;
        if !out.status.success() {
            return Err(format!("losetup failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(LoopDevice { path: PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()) })
    }

    /// The device node, e.g. `/dev/loop0`.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let status = Command::new("losetup").arg("--detach").arg(&self.path).status();
        if !matches!(status, Ok(s) if s.success()) {
            eprintln!("could not detach {}: {status:?}", self.path.display());
        }
    }
}
