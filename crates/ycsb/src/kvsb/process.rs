//! What KVSB measures of the process and the kernel: CPU time (`getrusage`), resident memory
//! (`VmRSS`), and bytes written to a block device
//! (`/sys/dev/block/MAJ:MIN/stat`, field 7: sectors written).

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// User and system CPU time of the whole process (every thread, the engine's included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTime {
    /// User time.
    pub user: Duration,
    /// System time.
    pub sys: Duration,
}

impl CpuTime {
    /// The time spent since `earlier`.
    pub fn since(&self, earlier: &CpuTime) -> CpuTime {
        CpuTime {
            user: self.user.saturating_sub(earlier.user),
            sys: self.sys.saturating_sub(earlier.sys),
        }
    }

    /// User plus system time.
    pub fn total(&self) -> Duration {
        self.user + self.sys
    }
}

/// The process's CPU time so far (`getrusage(RUSAGE_SELF)`); zero if the call fails.
pub fn cpu_time() -> CpuTime {
    // SAFETY: rusage is plain old data, which getrusage fills in whole.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage the call may write.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return CpuTime::default();
    }
    let d = |tv: libc::timeval| {
        Duration::from_secs(tv.tv_sec as u64) + Duration::from_micros(tv.tv_usec as u64)
    };
    CpuTime { user: d(ru.ru_utime), sys: d(ru.ru_stime) }
}

/// The process's resident memory now (`VmRSS` of `/proc/self/status`), 0 where unreadable.
pub fn rss_bytes() -> u64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else { return 0 };
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// CPUs this process may use (the io layer's count, which `--pin` places threads by).
pub use shale_io::affinity::cpus;

/// A block device's write counter in sysfs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockStat {
    /// `/sys/dev/block/MAJ:MIN/stat`.
    pub stat: PathBuf,
    /// The device's kernel name (`loop0`, `vda`).
    pub name: String,
}

impl BlockStat {
    /// The device to count for `path`: `path` itself when it is a block device; the device
    /// under its file system when that is a loop device (one device per volume, as the
    /// benchmark scripts make them); otherwise `None`, as a shared disk's counter would count
    /// other processes' writes too.
    pub fn for_path(path: &Path) -> Option<BlockStat> {
        let meta = std::fs::metadata(path).ok()?;
        let (dev, own) = if meta.file_type().is_block_device() {
            (meta.rdev(), true)
        } else {
            (meta.dev(), false)
        };
        let (major, minor) = (libc::major(dev), libc::minor(dev));
        let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
        let name = std::fs::canonicalize(&sys).ok()?.file_name()?.to_string_lossy().into_owned();
        if !own && !name.starts_with("loop") {
            return None;
        }
        let stat = sys.join("stat");
        stat.exists().then_some(BlockStat { stat, name })
    }

    /// Bytes the kernel counted written to the device so far (sectors of 512 bytes).
    pub fn write_bytes(&self) -> u64 {
        std::fs::read_to_string(&self.stat)
            .ok()
            .and_then(|s| s.split_whitespace().nth(6).and_then(|v| v.parse::<u64>().ok()))
            .map_or(0, |sectors| sectors * 512)
    }

    /// Names the source in reports: `/sys/block/loop0/stat`.
    pub fn source(&self) -> String {
        format!("/sys/block/{}/stat", self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_measures_itself() {
        let before = cpu_time();
        let mut x = 0u64;
        for i in 0..3_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(cpu_time().since(&before).total() > Duration::ZERO || x == 1);
        assert!(rss_bytes() > 0);
        // A temporary directory is on a shared disk or a tmpfs: no device of its own.
        let dir = std::env::temp_dir();
        if let Some(b) = BlockStat::for_path(&dir) {
            assert!(b.name.starts_with("loop"));
        }
    }
}
