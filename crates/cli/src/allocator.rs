//! Freed memory given back to the kernel while the process nears its memory limit.
//!
//! Why: the allocator keeps what the engine frees for reuse: mimalloc (the tool's allocator,
//! main.rs) purges freed pages a second after they empty, glibc's malloc keeps them in the
//! freeing thread's arena. Flushes and compactions free megabytes a second (SST blocks,
//! buffers), so a writing store's resident memory runs well ahead of what it holds: `shale
//! bench` of 3M keys with `--memory_limit` of 128 MiB (an 8 MiB write buffer) peaked at 178 MB
//! of anonymous memory against a live heap of 67 MB (heaptrack), and the memory cgroup's
//! OOM killer ended it where RocksDB's `db_bench` lived (BENCHMARKS-history.md, "the cache,
//! the held blocks and freed memory within the memory limit"). With mimalloc purging at once
//! (`MIMALLOC_PURGE_DELAY=0`) the same run peaked at 113 MB of anonymous memory; a purge delay
//! of 10 ms for every limit below 1 GiB, tried before, cost YCSB's load 0.90x its throughput
//! where nothing needed it.
//!
//! So a thread samples the process's anonymous and shared memory (what a cgroup cannot
//! reclaim without swap) every [`SAMPLE_EVERY`], and while it is past [`PRESSURE_SHARE`] of
//! the limit, the store's share (`shale_lsm::Options::memory_limit`), it asks the allocator to
//! give back what it holds freed: mimalloc's `mi_collect(true)`, which purges every arena's
//! freed pages whatever their delay, or glibc's `malloc_trim(0)`. Below that share, where the
//! limit is far, nothing changes.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How often the thread samples the process's memory.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(50);

/// The share of the limit (numerator, denominator) past which freed memory is given back:
/// half, the share the store keeps its own buffers within (`shale_lsm::Options::memory_limit`).
pub const PRESSURE_SHARE: (u64, u64) = (1, 2);

/// Give-backs asked of the allocator since the process started.
static GIVE_BACKS: AtomicU64 = AtomicU64::new(0);

/// Starts the thread for a limit of `limit` bytes (none: nothing to do). Once per process;
/// later calls keep the first limit.
pub fn give_back_near(limit: Option<u64>) {
    static STARTED: OnceLock<()> = OnceLock::new();
    let Some(limit) = limit else { return };
    let threshold = limit / PRESSURE_SHARE.1 * PRESSURE_SHARE.0;
    STARTED.get_or_init(|| {
        let spawned = std::thread::Builder::new()
            .name("shale-give-back".into())
            .spawn(move || watch(threshold));
        if let Err(e) = spawned {
            log::warn!("freed memory will not be given back near the memory limit: {e}");
        }
    });
}

/// Give-backs so far (for tests).
#[cfg(test)]
pub fn give_backs() -> u64 {
    GIVE_BACKS.load(Ordering::Relaxed)
}

fn watch(threshold: u64) {
    loop {
        std::thread::sleep(SAMPLE_EVERY);
        if unreclaimable_bytes().is_some_and(|held| held > threshold) {
            give_back();
        }
    }
}

/// The process's anonymous and shared resident memory (`RssAnon` + `RssShmem` of
/// `/proc/self/status`), `None` where it cannot be read.
pub fn unreclaimable_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        line[name.len()..].trim().trim_end_matches("kB").trim().parse().ok()
    };
    Some((kib("RssAnon:")? + kib("RssShmem:")?) << 10)
}

/// Asks the allocator to return the memory it holds freed.
pub fn give_back() {
    GIVE_BACKS.fetch_add(1, Ordering::Relaxed);
    #[cfg(feature = "mimalloc")]
    // SAFETY: mi_collect takes no pointer; forced, it frees the calling thread's empty pages
    // and purges every arena's freed pages, which no live allocation uses.
    unsafe {
        libmimalloc_sys::mi_collect(true);
    }
    #[cfg(not(feature = "mimalloc"))]
    // SAFETY: malloc_trim takes no pointer and releases only free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_memory_is_read_and_a_give_back_returns_freed_pages() {
        let before = unreclaimable_bytes().expect("Linux has /proc/self/status");
        assert!(before > 0);
        // 256 MiB touched and freed (far more than the other tests of this binary hold):
        // after a give-back the process holds much less than with it. mimalloc (the default
        // build, as CI runs it) keeps the freed block mapped until its purge delay ends
        // (checked: without the give-back the process still held it).
        let block = vec![1u8; 256 << 20];
        std::hint::black_box(&block);
        let held = unreclaimable_bytes().unwrap();
        assert!(held >= before + (128 << 20), "{held} after 256 MiB touched, {before} before");
        drop(block);
        give_back();
        let after = unreclaimable_bytes().unwrap();
        assert!(after + (128 << 20) <= held, "{after} after the give-back, {held} with the block");
        assert!(give_backs() >= 1);
    }

    #[test]
    fn the_thread_gives_back_past_the_share_of_the_limit() {
        // A limit the process is past already: the thread gives back within a few samples.
        let held = unreclaimable_bytes().unwrap();
        let start = give_backs();
        give_back_near(Some(held));
        let until = std::time::Instant::now() + Duration::from_secs(30);
        while give_backs() < start + 2 {
            assert!(std::time::Instant::now() < until, "no give-back past half the limit");
            std::thread::sleep(SAMPLE_EVERY);
        }
    }
}
