//! Running one benchmark process: its stdout and stderr go to files (kept as the run's raw
//! record), and when it exits we take its peak resident set size (`ru_maxrss` from `wait4`)
//! and the bytes it caused to be written to storage (`/proc/PID/io`, read while the exited
//! child is still unreaped).

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// What one child process did.
#[derive(Clone, Debug, Default)]
pub struct Finished {
    /// Its exit code, or `None` when a signal ended it.
    pub exit_code: Option<i32>,
    /// Everything it printed on stdout.
    pub stdout: String,
    /// Everything it printed on stderr.
    pub stderr: String,
    /// Peak resident set size, in bytes.
    pub peak_rss_bytes: u64,
    /// Peak memory of its memory cgroup: RSS and the page cache it caused, in bytes
    /// (`cgroup.rs`); `None` where it ran without a group.
    pub peak_memory_bytes: Option<u64>,
    /// Bytes it sent toward storage (`write_bytes - cancelled_write_bytes` of /proc/PID/io:
    /// page-cache pages it dirtied that were not discarded before writeback, plus direct
    /// writes), or `None` where the kernel does not account I/O per task.
    pub storage_write_bytes: Option<u64>,
    /// Wall-clock time from spawn to exit.
    pub wall: Duration,
}

/// Runs `cmd` to completion, writing its output to `log_prefix.stdout` and `.stderr`, in a
/// memory cgroup of its own where one can be made (unbounded).
///
/// # Errors
/// Spawning or waiting failed, or the output files could not be written or read.
pub fn run(cmd: Command, log_prefix: &Path) -> io::Result<Finished> {
    run_limited(cmd, log_prefix, None)
}

/// As [`run`], in a memory cgroup bounded to `memory_limit_bytes` (RSS and page cache
/// together) when given.
///
/// # Errors
/// As [`run`]; a limit asked for where no memory cgroup can be made.
pub fn run_limited(
    mut cmd: Command,
    log_prefix: &Path,
    memory_limit_bytes: Option<u64>,
) -> io::Result<Finished> {
    let group = crate::cgroup::MemoryGroup::create(memory_limit_bytes);
    match &group {
        Some(g) => g.attach(&mut cmd)?,
        None if memory_limit_bytes.is_some() => {
            return Err(io::Error::other(
                "a memory limit needs the cgroup v1 memory controller, writable (root)",
            ));
        }
        None => {}
    }
    let out_path = with_suffix(log_prefix, "stdout");
    let err_path = with_suffix(log_prefix, "stderr");
    cmd.stdout(File::create(&out_path)?).stderr(File::create(&err_path)?);
    let started = Instant::now();
    let child = cmd.spawn()?;
    let pid = child.id() as libc::pid_t;
    // Wait for the exit without reaping, so /proc/PID/io still describes the child.
    // SAFETY: an all-zero siginfo_t is a valid value for waitid to overwrite.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `info` is a valid, writable siginfo_t; `pid` is our own unreaped child.
        let rc = unsafe {
            libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOWAIT)
        };
        if rc == 0 {
            break;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    let storage_write_bytes = proc_io_write_bytes(pid);
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `status` and `usage` are valid and writable; `pid` is our exited child.
        let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if rc == pid {
            break;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    // `child` was reaped above; dropping a std Child never waits or kills.
    drop(child);
    let exit_code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    Ok(Finished {
        exit_code,
        stdout: std::fs::read_to_string(&out_path)?,
        stderr: std::fs::read_to_string(&err_path)?,
        // ru_maxrss is in kilobytes on Linux.
        peak_rss_bytes: usage.ru_maxrss.max(0) as u64 * 1024,
        peak_memory_bytes: group.as_ref().and_then(|g| g.peak_bytes()),
        storage_write_bytes,
        wall: started.elapsed(),
    })
}

fn with_suffix(prefix: &Path, suffix: &str) -> PathBuf {
    let mut s = prefix.as_os_str().to_os_string();
    s.push(".");
    s.push(suffix);
    PathBuf::from(s)
}

/// `write_bytes - cancelled_write_bytes` from /proc/PID/io.
fn proc_io_write_bytes(pid: libc::pid_t) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    parse_proc_io(&text)
}

/// Parses /proc/PID/io's `write_bytes` less `cancelled_write_bytes`.
pub fn parse_proc_io(text: &str) -> Option<u64> {
    let field = |name: &str| {
        text.lines().find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse::<u64>().ok()))
    };
    let written = field("write_bytes:")?;
    let cancelled = field("cancelled_write_bytes:").unwrap_or(0);
    Some(written.saturating_sub(cancelled))
}

/// Total size of the files under `dir` whose names `keep` accepts, in bytes.
pub fn dir_bytes(dir: &Path, keep: &dyn Fn(&str) -> bool) -> io::Result<u64> {
    dir_sum(dir, keep, &|m| m.len())
}

/// Bytes the file system has allocated to the files under `dir` whose names `keep` accepts
/// (`st_blocks * 512`, what `du` counts): one meter for every engine, which counts a
/// pre-allocated range and not a hole, whatever a file's length says.
///
/// # Errors
/// A directory or file that cannot be read.
pub fn dir_allocated_bytes(dir: &Path, keep: &dyn Fn(&str) -> bool) -> io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    dir_sum(dir, keep, &|m| m.blocks() * 512)
}

/// `measure` summed over the files under `dir` whose names `keep` accepts.
fn dir_sum(
    dir: &Path,
    keep: &dyn Fn(&str) -> bool,
    measure: &dyn Fn(&std::fs::Metadata) -> u64,
) -> io::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        if meta.is_dir() {
            total += dir_sum(&entry.path(), keep, measure)?;
        } else if keep(&entry.file_name().to_string_lossy()) {
            total += measure(&meta);
        }
    }
    Ok(total)
}

/// Writes back every file under `dir` (`fsync`), so that deleting them cancels no write.
///
/// # Errors
/// A file that cannot be opened or synced.
pub fn fsync_tree(dir: &Path) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.metadata()?.is_dir() {
            fsync_tree(&entry.path())?;
        } else {
            File::open(entry.path())?.sync_all()?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_reports_its_output_exit_code_and_memory() {
        let dir = tempdir();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo out; echo err >&2; head -c 1000000 /dev/zero > \"$0/f\"; exit 3"])
            .arg(&dir);
        let f = run(cmd, &dir.join("log")).unwrap();
        assert_eq!(f.exit_code, Some(3));
        assert_eq!((f.stdout.as_str(), f.stderr.as_str()), ("out\n", "err\n"));
        assert!(f.peak_rss_bytes > 0);
        assert!(std::fs::read_to_string(dir.join("log.stdout")).unwrap() == "out\n");
        assert_eq!(dir_bytes(&dir, &|n| n == "f").unwrap(), 1_000_000);
        fsync_tree(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn proc_io_less_cancelled() {
        let text = "rchar: 1\nwchar: 2\nsyscr: 3\nsyscw: 4\nread_bytes: 5\nwrite_bytes: 8192\ncancelled_write_bytes: 4096\n";
        assert_eq!(parse_proc_io(text), Some(4096));
        assert_eq!(parse_proc_io("rchar: 1\n"), None);
    }

    fn tempdir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("shale-compare-test-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
