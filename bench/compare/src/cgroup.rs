//! A memory cgroup (v1) per benchmark process: it bounds what the process may use, page cache
//! included, and reports the most it used.
//!
//! Why: RocksDB reads through the kernel's page cache by default and shale through its own
//! block cache, so a process's RSS alone hides half of RocksDB's memory, and an unbounded page
//! cache hides what each engine does when the data outgrows memory. A cgroup v1 memory group
//! charges the page cache a process causes to that process's group: `memory.limit_in_bytes`
//! bounds RSS and page cache together (the kernel reclaims the group's page cache before it
//! kills), and `memory.max_usage_in_bytes` is the peak of both, the figure the reports show as
//! "peak memory". Groups live under `/sys/fs/cgroup/memory/shale-compare-*` and are removed
//! after the process exits (their page cache emptied first).
//!
//! Where the memory controller is not mounted or not writable (no root), processes run
//! without a group and the figure is missing.

use std::ffi::CString;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where cgroup v1 mounts the memory controller.
const MEMORY_ROOT: &str = "/sys/fs/cgroup/memory";

/// One process's memory group, removed on drop.
pub struct MemoryGroup {
    dir: PathBuf,
}

impl MemoryGroup {
    /// A new group, bounded to `limit_bytes` (RSS and page cache together) if given; `None`
    /// where the memory controller cannot be used.
    pub fn create(limit_bytes: Option<u64>) -> Option<MemoryGroup> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir =
            PathBuf::from(MEMORY_ROOT).join(format!("shale-compare-{}-{n}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        let group = MemoryGroup { dir };
        if let Some(limit) = limit_bytes
            && let Err(e) =
                std::fs::write(group.dir.join("memory.limit_in_bytes"), limit.to_string())
        {
            eprintln!("shale-compare: warning: memory limit {limit}: {e}");
            return None;
        }
        Some(group)
    }

    /// Makes `cmd`'s process join this group before it executes its program, so everything
    /// it maps or caches is charged here from the start.
    pub fn attach(&self, cmd: &mut Command) -> io::Result<()> {
        let procs =
            CString::new(self.dir.join("cgroup.procs").into_os_string().into_encoded_bytes())
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // SAFETY: the closure runs in the forked child before exec, where only
        // async-signal-safe calls are allowed: it calls open, write and close on a path made
        // beforehand, and allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                // Writing "0" to cgroup.procs moves the writing process into the group.
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                let wrote = libc::write(fd, b"0".as_ptr().cast(), 1);
                let err = io::Error::last_os_error();
                libc::close(fd);
                if wrote == 1 { Ok(()) } else { Err(err) }
            });
        }
        Ok(())
    }

    /// The most memory the group's processes used at once: RSS and page cache, in bytes.
    pub fn peak_bytes(&self) -> Option<u64> {
        std::fs::read_to_string(self.dir.join("memory.max_usage_in_bytes"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }
}

impl Drop for MemoryGroup {
    fn drop(&mut self) {
        // A group with charged page cache cannot be removed: empty it first. The processes
        // in it have exited (the caller reaped them).
        let _ = std::fs::write(self.dir.join("memory.force_empty"), "0");
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            eprintln!("shale-compare: warning: removing {}: {e}", self.dir.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_charged_its_page_cache_and_bounded_by_the_limit() {
        let Some(group) = MemoryGroup::create(Some(256 << 20)) else {
            println!("skipped: no writable cgroup v1 memory controller (not root?)");
            return;
        };
        let file = std::env::temp_dir().join(format!("shale-compare-cg-{}", std::process::id()));
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(format!(
            "head -c 67108864 /dev/zero > {0} && cat {0} > /dev/null",
            file.display()
        ));
        group.attach(&mut cmd).unwrap();
        assert!(cmd.status().unwrap().success());
        std::fs::remove_file(&file).unwrap();
        let peak = group.peak_bytes().unwrap();
        // The 64 MiB written went through the page cache, charged to the group.
        assert!(peak >= 60 << 20, "peak {peak}");
        assert!(peak <= 256 << 20, "peak {peak} over the limit");
    }
}
