//! Fixtures shared by the tests of several shale crates.

use std::path::{Path, PathBuf};
use std::process::Command;

pub mod format_fixtures;
pub mod ports;
pub mod prefix_writers;
pub mod prerequisite;

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
    /// Why it could not (not root, no losetup, no free device), for the test to report as a
    /// missing prerequisite ([`prerequisite::require`]).
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

/// Replaying the fuzz targets' regression inputs (`fuzz/regressions/<target>/`) from ordinary
/// tests, so every input a fuzzer once found keeps being tested on stable Rust.
pub mod fuzz_regressions {
    use std::path::{Path, PathBuf};

    /// The directory of one target's regression inputs.
    pub fn dir(target: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions").join(target)
    }

    /// Runs `check` on every input of `target`; `check` panics when a property breaks.
    ///
    /// # Panics
    /// When the directory is missing or empty, or a check panics.
    pub fn replay(target: &str, check: fn(&[u8])) {
        let dir = dir(target);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.expect("directory entry").path())
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no regression inputs for fuzz target {target}");
        for file in files {
            let data = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            eprintln!("{target}: {}", file.display());
            check(&data);
        }
    }

    /// Checks that the committed `seed-*` inputs are the ones the generator makes now, so a
    /// format change that makes them stale is noticed; with `SHALE_WRITE_FUZZ_SEEDS` set it
    /// (re)writes them instead.
    ///
    /// # Panics
    /// When a seed is stale or names a target not in `targets`.
    pub fn check_seeds(targets: &[&str], seeds: Vec<(&'static str, &'static str, Vec<u8>)>) {
        let write = std::env::var_os("SHALE_WRITE_FUZZ_SEEDS").is_some();
        for (target, name, bytes) in seeds {
            assert!(targets.contains(&target), "seed for unknown target {target}");
            let path = dir(target).join(format!("seed-{name}"));
            if write {
                std::fs::create_dir_all(path.parent().unwrap()).expect("create regressions dir");
                std::fs::write(&path, &bytes).expect("write seed");
                continue;
            }
            let committed =
                std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(
                committed == bytes,
                "{} is stale; rerun with SHALE_WRITE_FUZZ_SEEDS=1",
                path.display()
            );
        }
    }
}

/// Bytes of `path` in `range` that the file system has given storage to, allocated-but-
/// unwritten extents included (what `du` counts, for one range of a file), by the FIEMAP
/// ioctl. A tool for tests of disk space: a hole counts nothing, a preallocated range counts
/// whole.
///
/// # Errors
/// Opening the file, or the ioctl (a file system without FIEMAP: EOPNOTSUPP).
pub fn allocated_bytes_in(
    path: &std::path::Path,
    range: std::ops::Range<u64>,
) -> std::io::Result<u64> {
    use std::os::unix::io::AsRawFd;
    /// `struct fiemap_extent` of linux/fiemap.h.
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Extent {
        logical: u64,
        physical: u64,
        length: u64,
        reserved64: [u64; 2],
        flags: u32,
        reserved: [u32; 3],
    }
    /// `struct fiemap` with room for `EXTENTS` extents after it.
    #[repr(C)]
    struct Map {
        start: u64,
        length: u64,
        flags: u32,
        mapped_extents: u32,
        extent_count: u32,
        reserved: u32,
        extents: [Extent; EXTENTS],
    }
    const EXTENTS: usize = 64;
    const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
    const FIEMAP_FLAG_SYNC: u32 = 1;
    const FIEMAP_EXTENT_LAST: u32 = 1;
    let file = std::fs::File::open(path)?;
    let (mut at, mut total) = (range.start, 0);
    while at < range.end {
        let mut map = Map {
            start: at,
            length: range.end - at,
            flags: FIEMAP_FLAG_SYNC,
            mapped_extents: 0,
            extent_count: EXTENTS as u32,
            reserved: 0,
            extents: [Extent::default(); EXTENTS],
        };
        // SAFETY: FS_IOC_FIEMAP reads the header and writes at most `extent_count` extents
        // into the array that follows it, all inside `map`; the fd is open for the call.
        if unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP, &mut map as *mut Map) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let found = &map.extents[..map.mapped_extents as usize];
        for e in found {
            let (s, t) = (e.logical.max(range.start), (e.logical + e.length).min(range.end));
            total += t.saturating_sub(s);
        }
        match found.last() {
            Some(last) if last.flags & FIEMAP_EXTENT_LAST == 0 => at = last.logical + last.length,
            _ => break,
        }
    }
    Ok(total)
}

/// The command that runs this test binary's child-process entry point `entry` alone, its
/// output not captured, on one test thread.
///
/// A test that needs a second process (a writer to SIGKILL, a store held open by another
/// process) runs its own test binary again, selecting one entry point by name. The entry
/// point is an ignored test (`#[ignore = "child process entry point, run by <parent>"]`), so
/// it never counts as a passing test of its own; this command runs it with `--ignored
/// --exact`, and the entry point reads what to do from the environment ([`child_env`]).
///
/// # Panics
/// If the test binary's path cannot be found.
pub fn child_command(entry: &str) -> Command {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = Command::new(exe);
    cmd.args(["--ignored", "--exact", entry, "--nocapture", "--test-threads=1"]);
    cmd
}

/// The value of `var` in a child-process entry point ([`child_command`]).
///
/// # Panics
/// When `var` is not set: the entry point was run by hand (`cargo test -- --ignored`), not by
/// its parent test `parent`, and has nothing to do; it fails rather than pass doing nothing.
pub fn child_env(var: &str, parent: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!("a child process entry point, not a test: `{parent}` runs it with {var} set")
    })
}

/// Runs this test binary's entry point `entry` as a child process ([`child_command`]) with
/// `envs`, lets it run for `kill_after`, SIGKILLs it and returns every line it printed on
/// stdout, in order: the kill tests' harness (the child prints what it had acknowledged, the
/// parent checks it survived). The child's stderr is discarded.
///
/// # Panics
/// If the child cannot be started or waited for.
pub fn run_child_until_killed(
    entry: &str,
    envs: &[(&str, String)],
    kill_after: std::time::Duration,
) -> Vec<String> {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let mut child = child_command(entry)
        .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the child test");
    let stdout = child.stdout.take().expect("the child's stdout is piped");
    let started = std::time::Instant::now();
    let reader = std::thread::spawn(move || {
        BufReader::new(stdout).lines().map_while(Result::ok).collect::<Vec<String>>()
    });
    while started.elapsed() < kill_after {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().expect("SIGKILL the child");
    child.wait().expect("wait for the child");
    reader.join().expect("the reader thread")
}

/// The numbers of the `acked N` lines among a child's output ([`run_child_until_killed`]).
pub fn acked_numbers(lines: &[String]) -> Vec<u64> {
    lines
        .iter()
        .filter_map(|l| l.strip_prefix("acked "))
        .map(|n| n.parse().expect("acked lines carry a number"))
        .collect()
}

/// The files under /dev/shm that process `pid` has open or mapped: what a reboot would take
/// from a store that process holds (the reboot tests remove them before reopening).
pub fn shm_files_of(pid: u32) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    if let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
        for fd in fds.flatten() {
            if let Ok(target) = std::fs::read_link(fd.path()) {
                if target.starts_with("/dev/shm") {
                    found.push(target);
                }
            }
        }
    }
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    for line in maps.lines() {
        if let Some(at) = line.find("/dev/shm") {
            found.push(std::path::PathBuf::from(line[at..].trim_end_matches(" (deleted)")));
        }
    }
    found.sort();
    found.dedup();
    found
}

/// Bytes of `[offset, offset + len)` of the file at `path` that the kernel's page cache
/// holds now (`mincore(2)` over a read-only mapping of the range): what a buffered read would
/// find in memory. `offset` must be a multiple of the page size.
///
/// # Panics
/// If the file cannot be opened or mapped: a test's own file.
pub fn cached_bytes(path: &std::path::Path, offset: u64, len: u64) -> u64 {
    use std::os::fd::AsRawFd;
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let len = len as usize;
    if len == 0 {
        return 0;
    }
    // SAFETY: a shared read-only mapping of a file this function holds open, unmapped below;
    // only its residency is asked, its bytes are never touched.
    let map = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            offset as libc::off_t,
        )
    };
    let err = std::io::Error::last_os_error();
    assert_ne!(map, libc::MAP_FAILED, "mmap {} at {offset}: {err}", path.display());
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    let mut resident = vec![0u8; len.div_ceil(page)];
    // SAFETY: `map` is a mapping of `len` bytes and `resident` has one byte per page of it.
    let rc = unsafe { libc::mincore(map, len, resident.as_mut_ptr()) };
    let err = std::io::Error::last_os_error();
    // SAFETY: the mapping made above, of `len` bytes, unmapped once.
    unsafe { libc::munmap(map, len) };
    assert_eq!(rc, 0, "mincore {}: {err}", path.display());
    resident.iter().filter(|&&b| b & 1 == 1).count() as u64 * page as u64
}
