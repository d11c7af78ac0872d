//! The memory a store may count on: the limit of the process's memory cgroup or the machine's
//! RAM, whichever is smaller, and the share of it the store's own buffers may take.
//!
//! Why: ADOC's tuner grows the memtables under write pressure (up to eight write buffers,
//! 512 MiB at the defaults), and the WAL tail holds the records of every unflushed memtable in
//! shared memory beside them. In a container with a memory limit that growth is what the
//! kernel's OOM killer answers: regime (c) of BENCHMARKS.md (50M keys, a 1 GiB cgroup, a
//! 256 MiB block cache) had shale killed with 877 MB of heap and 149 MB of tail, its batch
//! grown to 128 MiB. RocksDB sizes nothing by itself and so needs no limit; a store that
//! tunes its own memory must know what it has. The tuner's batch is therefore bounded by
//! [`batch_memory_cap`]: the block cache, the index and filter blocks held beside it, the
//! memtables and the tail together within [`STORE_SHARE`] of the limit.
//!
//! The limit is read once, at open. A cgroup's limit is the tightest of the limits on the
//! way from the process's group up to its hierarchy's root (a child may set none of its own
//! and still live under its parent's): cgroup v2's `memory.max` and `memory.high` ("max" for
//! none; past `memory.high` the kernel throttles the group) and v1's
//! `memory.limit_in_bytes` (a value near 2^63 for none), in whichever hierarchy holds the
//! memory controller, found through `/proc/self/mountinfo` and `/proc/self/cgroup`.

use std::path::{Path, PathBuf};

/// The memory the process may use, as a store reads it ([`crate::Options::memory_limit`]).
///
/// ```
/// use shale_lsm::{Db, MemoryLimit, Options};
///
/// let dir = tempfile::tempdir()?;
/// let opts = Options { memory_limit: MemoryLimit::Bytes(1 << 30), ..Options::default() };
/// let db = Db::open(dir.path().join("store"), opts)?;
/// assert_eq!(MemoryLimit::default(), MemoryLimit::Host);
/// assert!(MemoryLimit::Host.resolve().is_some(), "a machine has RAM");
/// db.close()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MemoryLimit {
    /// The smaller of the process's memory cgroup limit and the machine's RAM, read when the
    /// store opens (the default).
    #[default]
    Host,
    /// This many bytes, whatever the host says.
    Bytes(u64),
    /// None: the tuner's batch is bounded by `TunerOptions::batch_max` alone.
    Unlimited,
}

impl MemoryLimit {
    /// The limit in bytes, `None` where there is none.
    pub fn resolve(self) -> Option<u64> {
        match self {
            MemoryLimit::Host => host_memory_limit(),
            MemoryLimit::Bytes(b) => Some(b),
            MemoryLimit::Unlimited => None,
        }
    }
}

/// The share of the limit (numerator, denominator) the store's block cache, index and filter
/// blocks, memtables and WAL tail may take together: half. The other half is left to what the
/// store does not size (compaction's buffers, the allocator's slack, the page cache of
/// buffered SST reads and writes, which a memory cgroup charges to the process) and to the
/// application around the store.
pub const STORE_SHARE: (u64, u64) = (1, 2);

/// The largest memtable (the tuner's batch) for which `cache_bytes` (the block cache, and the
/// index and filter blocks held beside it), `memtables` memtables of it, and, with a WAL tail
/// in memory, their records in the tail (about a memtable's bytes each) fit in
/// [`STORE_SHARE`] of `limit`. 0 where the cache alone takes the share; the tuner keeps the
/// write buffer the store opened with ([`write_buffer_within`]) as the floor.
pub fn batch_memory_cap(limit: u64, cache_bytes: u64, memtables: u64, tail: bool) -> u64 {
    let share = limit / STORE_SHARE.1 * STORE_SHARE.0;
    let per_batch = memtables.max(1) * if tail { 2 } else { 1 };
    share.saturating_sub(cache_bytes) / per_batch
}

/// The smallest write buffer the memory limit lowers a store's to (an owner's smaller one is
/// kept): 4 MiB. Below it flushes and L0 SSTs multiply for little memory saved; a limit that
/// leaves less than this gets a warning at open.
pub const WRITE_BUFFER_FLOOR: u64 = 4 << 20;

/// The write buffer a store opens with under `limit`: the owner's `write_buffer`, lowered
/// (to whole MiB) where `memtables` memtables of it, their records in the WAL tail (`tail`)
/// and `cache_bytes` of block cache would not fit in [`STORE_SHARE`] of the limit
/// ([`batch_memory_cap`]), but never below [`WRITE_BUFFER_FLOOR`]. With no limit, the
/// owner's.
///
/// Why at open and not only in the tuner: the owner's write buffer (64 MiB by default) is
/// chosen without knowing the container. In a 256 MiB memory cgroup, two memtables of
/// 64 MiB, their 128 MiB of WAL tail in shared memory (charged to the group) and a 32 MiB
/// cache passed the limit, and `shale bench` and `shale ycsb` were OOM-killed in their
/// first seconds where RocksDB's `db_bench` lived (BENCHMARKS-history.md, "the write
/// buffer within the memory limit").
pub fn write_buffer_within(
    limit: Option<u64>,
    write_buffer: u64,
    cache_bytes: u64,
    memtables: u64,
    tail: bool,
) -> u64 {
    let Some(limit) = limit else { return write_buffer };
    let cap = batch_memory_cap(limit, cache_bytes, memtables, tail) & !((1 << 20) - 1);
    write_buffer.min(cap.max(WRITE_BUFFER_FLOOR))
}

/// The smallest budget the memory limit lowers the block cache to (an owner's smaller cache
/// is kept): 4 MiB, what a few hundred recently read blocks take. Below it the hot blocks of
/// a point read (the data block a key lands in twice) fall out between two reads.
pub const BLOCK_CACHE_FLOOR: u64 = 4 << 20;

/// The block cache's budget under `limit`: the owner's `cache_bytes`, lowered where it would
/// not fit in [`STORE_SHARE`] of the limit beside `memtables` memtables of the opened
/// `write_buffer` (and, with `tail`, their records in the WAL tail) and the `held_meta` bytes
/// of index and filter blocks the SST readers hold, never below [`BLOCK_CACHE_FLOOR`]. With
/// no limit, the owner's.
///
/// Why: the write buffer is fitted to the limit at open ([`write_buffer_within`]), but the
/// index and filter blocks held beside the cache grow with the data, about 12 bytes a key
/// (one index entry a data block, ten filter bits a key): 25 MB for 2M records of YCSB's
/// 1 KB, a fifth of a 128 MiB container. The memtables cannot give that room back (they are
/// at the floor there already); the cache can, block by block, costing hits rather than the
/// process. The tuner's batch ([`batch_memory_cap`]) counts the owner's whole cache, so it
/// never grows into room taken from the cache here.
pub fn block_cache_within(
    limit: Option<u64>,
    cache_bytes: u64,
    write_buffer: u64,
    memtables: u64,
    tail: bool,
    held_meta: u64,
) -> u64 {
    let Some(limit) = limit else { return cache_bytes };
    let share = limit / STORE_SHARE.1 * STORE_SHARE.0;
    let buffers = write_buffer * memtables.max(1) * if tail { 2 } else { 1 };
    let room = share.saturating_sub(buffers).saturating_sub(held_meta);
    cache_bytes.min(room.max(BLOCK_CACHE_FLOOR))
}

/// The index and filter blocks SST readers may hold outside the block cache under `limit`:
/// half of what [`STORE_SHARE`] of the limit leaves beside `memtables` memtables of the opened
/// `write_buffer` (and their records in the WAL tail with `tail`); the cache keeps the other
/// half at least ([`block_cache_within`]). An SST opened while the readers hold this much
/// keeps its blocks in the cache instead (RocksDB's `cache_index_and_filter_blocks`, for that
/// SST), where they are charged and evicted like data blocks. With no limit, no bound.
///
/// Why: held blocks grow with the data and nothing evicts them; past the share, the cache's
/// floor and the held blocks together passed the limit: `shale ycsb` of 2M records (40 MB
/// held) in a 128 MiB memory cgroup (BENCHMARKS-history.md, "the cache, the held blocks and
/// freed memory within the memory limit").
pub fn held_meta_room(limit: Option<u64>, write_buffer: u64, memtables: u64, tail: bool) -> u64 {
    let Some(limit) = limit else { return u64::MAX };
    let share = limit / STORE_SHARE.1 * STORE_SHARE.0;
    let buffers = write_buffer * memtables.max(1) * if tail { 2 } else { 1 };
    share.saturating_sub(buffers) / 2
}

/// The host's limit: the process's memory cgroup limit, within the machine's RAM.
pub fn host_memory_limit() -> Option<u64> {
    let read = |p: &Path| std::fs::read_to_string(p).ok();
    let cgroup =
        match (read(Path::new("/proc/self/mountinfo")), read(Path::new("/proc/self/cgroup"))) {
            (Some(mounts), Some(groups)) => cgroup_memory_limit(&mounts, &groups, read),
            _ => None,
        };
    [cgroup, physical_memory()].into_iter().flatten().min()
}

/// The machine's RAM, from `sysconf`.
fn physical_memory() -> Option<u64> {
    // SAFETY: sysconf reads a system value and touches no memory of ours.
    let (pages, page) =
        unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    (pages > 0 && page > 0).then(|| pages as u64 * page as u64)
}

/// v1's "no limit": the largest page-aligned `i64` (9223372036854771712 with 4 KiB pages),
/// or anything near it. No real limit comes within a factor of 2 of it.
const V1_UNLIMITED_FROM: u64 = 1 << 62;

/// The tightest memory limit of the process's cgroups: `mountinfo` is
/// `/proc/self/mountinfo`, `groups` is `/proc/self/cgroup`, `read` reads a file of the
/// cgroup file systems. `None` where no hierarchy with a memory controller limits the process.
fn cgroup_memory_limit(
    mountinfo: &str,
    groups: &str,
    read: impl Fn(&Path) -> Option<String>,
) -> Option<u64> {
    let mut tightest: Option<u64> = None;
    for mount in mountinfo.lines().filter_map(CgroupMount::parse) {
        // The process's group in this mount's hierarchy: v2's line is "0::/path", v1's
        // "N:controller,...:/path" for the line naming the mount's memory controller.
        let path = groups.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (id, controllers, path) = (f.next()?, f.next()?, f.next()?);
            let ours = if mount.v2 {
                id == "0" && controllers.is_empty()
            } else {
                controllers.split(',').any(|c| c == "memory")
            };
            ours.then_some(path)
        });
        let Some(path) = path else { continue };
        // The group as this mount shows it: the mount's root is a group of the hierarchy.
        let Ok(rel) = Path::new(path).strip_prefix(&mount.root) else { continue };
        // v2's `memory.high` too: past it the kernel throttles the group and reclaims hard
        // (systemd's MemoryHigh=), which a store should no more grow into than the hard limit.
        let files: &[&str] =
            if mount.v2 { &["memory.max", "memory.high"] } else { &["memory.limit_in_bytes"] };
        let mut dir = mount.point.join(rel);
        loop {
            for file in files {
                let limit = read(&dir.join(file)).and_then(|s| {
                    let s = s.trim();
                    s.parse::<u64>().ok().filter(|&b| b < V1_UNLIMITED_FROM)
                });
                if let Some(b) = limit {
                    tightest = Some(tightest.map_or(b, |t| t.min(b)));
                }
            }
            if dir == mount.point || !dir.pop() {
                break;
            }
        }
    }
    tightest
}

/// A cgroup file system mounted with the memory controller, from a line of `mountinfo`.
struct CgroupMount {
    /// The hierarchy's group the mount shows at its mount point.
    root: PathBuf,
    point: PathBuf,
    v2: bool,
}

impl CgroupMount {
    /// `36 25 0:31 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory`: fields 4
    /// and 5 are the root and the mount point; after the " - ", the type and super options.
    /// A v2 mount is taken whatever its controllers (its `memory.max` files exist where
    /// the memory controller is enabled); a v1 mount only with `memory` among its options.
    fn parse(line: &str) -> Option<CgroupMount> {
        let (before, after) = line.split_once(" - ")?;
        let mut f = before.split(' ');
        let root = f.nth(3)?;
        let point = f.next()?;
        let mut a = after.split(' ');
        let (kind, _source, options) = (a.next()?, a.next()?, a.next().unwrap_or(""));
        let v2 = match kind {
            "cgroup2" => true,
            "cgroup" if options.split(',').any(|o| o == "memory") => false,
            _ => return None,
        };
        Some(CgroupMount { root: unescape(root), point: unescape(point), v2 })
    }
}

/// A path of `mountinfo`, whose spaces, tabs, newlines and backslashes are octal escapes.
fn unescape(field: &str) -> PathBuf {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b.get(i + 1..i + 4).filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    use std::os::unix::ffi::OsStringExt;
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn reader(files: &[(&str, &str)]) -> impl Fn(&Path) -> Option<String> {
        let files: HashMap<PathBuf, String> =
            files.iter().map(|(p, c)| (PathBuf::from(p), c.to_string())).collect();
        move |p| files.get(p).cloned()
    }

    /// This machine's layout: hybrid, the memory controller in v1, a v2 hierarchy without it.
    const HYBRID: &str = "\
24 23 0:21 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755
25 24 0:22 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw
30 24 0:27 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory
31 24 0:28 / /sys/fs/cgroup/cpu rw,nosuid - cgroup cgroup rw,cpu
";
    const HYBRID_GROUPS: &str = "4:memory:/bench/run1\n1:cpu:/\n0::/\n";

    #[test]
    fn v1_takes_the_tightest_limit_up_to_the_root() {
        let read = reader(&[
            ("/sys/fs/cgroup/memory/bench/run1/memory.limit_in_bytes", "9223372036854771712\n"),
            ("/sys/fs/cgroup/memory/bench/memory.limit_in_bytes", "1073741824\n"),
            ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n"),
        ]);
        assert_eq!(cgroup_memory_limit(HYBRID, HYBRID_GROUPS, read), Some(1 << 30));
        let child_tighter = reader(&[
            ("/sys/fs/cgroup/memory/bench/run1/memory.limit_in_bytes", "536870912"),
            ("/sys/fs/cgroup/memory/bench/memory.limit_in_bytes", "1073741824"),
        ]);
        assert_eq!(cgroup_memory_limit(HYBRID, HYBRID_GROUPS, child_tighter), Some(512 << 20));
    }

    #[test]
    fn no_limit_anywhere_is_none() {
        let read = reader(&[
            ("/sys/fs/cgroup/memory/bench/run1/memory.limit_in_bytes", "9223372036854771712"),
            ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712"),
            // v2 without the memory controller: no memory.max files at all.
        ]);
        assert_eq!(cgroup_memory_limit(HYBRID, HYBRID_GROUPS, read), None);
        assert_eq!(cgroup_memory_limit("", HYBRID_GROUPS, reader(&[])), None);
    }

    #[test]
    fn v2_reads_memory_max_and_max_means_none() {
        let mounts = "29 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
        let groups = "0::/system.slice/shale.service\n";
        let read = reader(&[
            ("/sys/fs/cgroup/system.slice/shale.service/memory.max", "max\n"),
            ("/sys/fs/cgroup/system.slice/memory.max", "2147483648\n"),
        ]);
        assert_eq!(cgroup_memory_limit(mounts, groups, read), Some(2 << 30));
        let none = reader(&[("/sys/fs/cgroup/system.slice/shale.service/memory.max", "max")]);
        assert_eq!(cgroup_memory_limit(mounts, groups, none), None);
        // memory.high below memory.max (systemd's MemoryHigh=): the tighter one.
        let high = reader(&[
            ("/sys/fs/cgroup/system.slice/shale.service/memory.max", "2147483648"),
            ("/sys/fs/cgroup/system.slice/shale.service/memory.high", "1610612736"),
        ]);
        assert_eq!(cgroup_memory_limit(mounts, groups, high), Some(1536 << 20));
    }

    #[test]
    fn a_container_sees_its_group_at_the_mount_point() {
        // A cgroup namespace: the mount's root is the container's group, which
        // /proc/self/cgroup shows as "/"; or a bind mount of a group below the root.
        let ns = "50 40 0:26 / /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n";
        let read = reader(&[("/sys/fs/cgroup/memory.max", "805306368")]);
        assert_eq!(cgroup_memory_limit(ns, "0::/\n", read), Some(768 << 20));
        let bind = "50 40 0:26 /docker/abc /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n";
        let read = reader(&[("/sys/fs/cgroup/memory.max", "805306368")]);
        assert_eq!(cgroup_memory_limit(bind, "0::/docker/abc\n", read), Some(768 << 20));
        // A group outside what the mount shows is not read through it.
        let read = reader(&[("/sys/fs/cgroup/memory.max", "805306368")]);
        assert_eq!(cgroup_memory_limit(bind, "0::/other\n", read), None);
    }

    #[test]
    fn escaped_mount_points() {
        let mounts = "30 24 0:27 / /mnt/cg\\040mem rw - cgroup cgroup rw,memory\n";
        let read = reader(&[("/mnt/cg mem/memory.limit_in_bytes", "4096")]);
        assert_eq!(cgroup_memory_limit(mounts, "4:memory:/\n", read), Some(4096));
    }

    #[test]
    fn the_host_limit_is_within_the_machines_ram() {
        let ram = physical_memory().expect("sysconf knows the RAM");
        let host = host_memory_limit().expect("a machine has RAM");
        assert!(host <= ram, "{host} > {ram}");
        assert_eq!(MemoryLimit::Bytes(7).resolve(), Some(7));
        assert_eq!(MemoryLimit::Unlimited.resolve(), None);
    }

    #[test]
    fn the_write_buffer_is_lowered_into_the_limit_and_no_further_than_the_floor() {
        const MIB: u64 = 1 << 20;
        // The defaults in a 256 MiB group: half is 128 MiB, less the 32 MiB cache, over two
        // memtables each with its tail: 24 MiB.
        assert_eq!(write_buffer_within(Some(256 * MIB), 64 * MIB, 32 * MIB, 2, true), 24 * MIB);
        // Without a tail each memtable counts once.
        assert_eq!(write_buffer_within(Some(256 * MIB), 64 * MIB, 32 * MIB, 2, false), 48 * MIB);
        // Rounded down to whole MiB.
        assert_eq!(write_buffer_within(Some(250 * MIB), 64 * MIB, 32 * MIB, 2, true), 23 * MIB);
        // Room enough, no limit: the owner's write buffer.
        assert_eq!(write_buffer_within(Some(4 << 30), 64 * MIB, 32 * MIB, 2, true), 64 * MIB);
        assert_eq!(write_buffer_within(None, 64 * MIB, 32 * MIB, 2, true), 64 * MIB);
        // The cache takes the whole share: the floor, not zero.
        assert_eq!(write_buffer_within(Some(64 * MIB), 64 * MIB, 32 * MIB, 2, true), 4 * MIB);
        // An owner's write buffer below the floor is kept, never raised.
        assert_eq!(write_buffer_within(Some(64 * MIB), MIB, 32 * MIB, 2, true), MIB);
        assert_eq!(write_buffer_within(None, 256 << 10, 0, 2, true), 256 << 10);
    }

    #[test]
    fn the_cache_gives_the_held_index_and_filter_blocks_room_down_to_its_floor() {
        const MIB: u64 = 1 << 20;
        // 128 MiB at the defaults: an 8 MiB write buffer, two memtables and their tail take
        // 32 of the 64 MiB share, the 32 MiB cache the rest; nothing held yet: the owner's.
        let within = |held| block_cache_within(Some(128 * MIB), 32 * MIB, 8 * MIB, 2, true, held);
        assert_eq!(within(0), 32 * MIB);
        // 25 MiB of index and filter blocks (2M YCSB records): the cache keeps what is left.
        assert_eq!(within(25 * MIB), 7 * MIB);
        // Past the share: the floor.
        assert_eq!(within(40 * MIB), BLOCK_CACHE_FLOOR);
        // Without a tail the memtables count once; with no limit, or room, the owner's.
        let no_tail = block_cache_within(Some(128 * MIB), 32 * MIB, 8 * MIB, 2, false, 25 * MIB);
        assert_eq!(no_tail, 23 * MIB);
        assert_eq!(block_cache_within(None, 32 * MIB, 64 * MIB, 2, true, 1 << 30), 32 * MIB);
        assert_eq!(block_cache_within(Some(4 << 30), 32 * MIB, 64 * MIB, 2, true, MIB), 32 * MIB);
        // An owner's cache below the floor is kept, never raised.
        assert_eq!(block_cache_within(Some(64 * MIB), MIB, 8 * MIB, 2, true, 60 * MIB), MIB);
        // The held blocks' room: half of what the memtables leave, so the cache keeps the
        // other half (128 MiB at the defaults: 16 MiB each).
        assert_eq!(held_meta_room(Some(128 * MIB), 8 * MIB, 2, true), 16 * MIB);
        assert_eq!(within(held_meta_room(Some(128 * MIB), 8 * MIB, 2, true)), 16 * MIB);
        assert_eq!(held_meta_room(Some(128 * MIB), 8 * MIB, 2, false), 24 * MIB);
        assert_eq!(held_meta_room(Some(16 * MIB), 8 * MIB, 2, true), 0);
        assert_eq!(held_meta_room(None, 8 * MIB, 2, true), u64::MAX);
    }

    #[test]
    fn the_cap_leaves_the_cache_and_counts_the_tail() {
        const MB: u64 = 1 << 20;
        // Regime (c): 1 GiB, a 256 MiB cache, two memtables and their tail: 64 MiB.
        assert_eq!(batch_memory_cap(1024 * MB, 256 * MB, 2, true), 64 * MB);
        assert_eq!(batch_memory_cap(1024 * MB, 256 * MB, 2, false), 128 * MB);
        // A cache past the share leaves nothing: the caller's floor holds.
        assert_eq!(batch_memory_cap(1024 * MB, 600 * MB, 2, true), 0);
        assert_eq!(batch_memory_cap(1024 * MB, 0, 0, false), 512 * MB);
    }
}
