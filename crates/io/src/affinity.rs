//! Which CPUs a thread runs on: pinning (`sched_setaffinity`) and reading a thread's set
//! back (`sched_getaffinity`).
//!
//! The engines pin their own threads where a benchmark or a mode asks for it: the hash
//! engine's worker beside its shard's client (KVSB's one core per instance), and the
//! completion pollers of [`crate::QueuePairs`] in LATTE's affinity modes. A CPU is named by
//! its index among the CPUs online, taken modulo their count, so that a plan made for a big
//! machine still runs (doubled up) on a small one.

/// CPUs this process may use (at least 1).
pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The CPUs the process may run on (its main thread's set), ascending; CPU 0 alone if the
/// kernel will not say.
pub fn process_cpus() -> Vec<usize> {
    // SAFETY: getpid has no preconditions.
    let set = affinity_of(unsafe { libc::getpid() });
    if set.is_empty() { vec![0] } else { set }
}

/// The number of the `index mod n`-th of the process's `n` CPUs: how a plan made for any
/// machine names a CPU of this one.
pub fn cpu_at(index: usize) -> usize {
    let allowed = process_cpus();
    allowed[index % allowed.len()]
}

/// Pins the calling thread to the `index mod n`-th of the process's `n` CPUs
/// ([`process_cpus`]); returns that CPU's number, or `None` where the kernel refused (the
/// thread then runs where it ran before).
pub fn pin_current_thread(index: usize) -> Option<usize> {
    let cpu = cpu_at(index);
    // SAFETY: cpu_set_t is a plain bit set; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET writes one bit of the set; cpu came from a set of CPU_SETSIZE bits.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 is the calling thread; the pointer and size are the set's.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    (rc == 0).then_some(cpu)
}

/// The CPUs the calling thread may run on, ascending (empty if the kernel will not say).
pub fn current_thread_cpus() -> Vec<usize> {
    affinity_of(0)
}

/// The CPU set of thread or process `pid` (0: the calling thread).
fn affinity_of(pid: libc::pid_t) -> Vec<usize> {
    // SAFETY: as in `pin_current_thread`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the kernel writes at most the set's size.
    let rc =
        unsafe { libc::sched_getaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Vec::new();
    }
    // SAFETY: CPU_ISSET reads one bit of an initialised set, below CPU_SETSIZE.
    (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect()
}

/// This process's threads whose name starts with `prefix`, each with the CPUs it may run
/// on, as `/proc/self/task` shows them, in name order: where the engines' pinned threads
/// (and the kernel's io_uring threads, `iou-sqp-<pid>`) are, for tests and reports.
pub fn threads_named(prefix: &str) -> Vec<(String, Vec<usize>)> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return Vec::new() };
    let mut found = Vec::new();
    for task in tasks.filter_map(|t| t.ok()) {
        let dir = task.path();
        // A thread that ended since the listing has no files left: skipped.
        let Ok(comm) = std::fs::read_to_string(dir.join("comm")) else { continue };
        let comm = comm.trim_end();
        if !comm.starts_with(prefix) {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(dir.join("status")) else { continue };
        let Some(list) = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")) else {
            continue;
        };
        found.push((comm.to_string(), parse_cpu_list(list.trim())));
    }
    found.sort();
    found
}

/// The kernel's CPU list format, "0-2,5", as [0, 1, 2, 5] (what does not parse is left out).
fn parse_cpu_list(list: &str) -> Vec<usize> {
    let mut cpus = Vec::new();
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                    cpus.extend(a..=b);
                }
            }
            None => cpus.extend(part.parse::<usize>().ok()),
        }
    }
    cpus
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_thread_runs_on_its_cpu_only() {
        let allowed = process_cpus();
        let n = allowed.len();
        assert!(n >= 1 && cpus() >= 1);
        // On a thread of its own: the test harness's thread keeps its affinity.
        let (before, pinned, seen) = std::thread::spawn(move || {
            let before = current_thread_cpus();
            // Past the last CPU: taken modulo their count.
            (before, pin_current_thread(n + n - 1), current_thread_cpus())
        })
        .join()
        .unwrap();
        assert_eq!(before, allowed, "a new thread inherits the process's set");
        assert_eq!(pinned, Some(allowed[n - 1]));
        assert_eq!(seen, [allowed[n - 1]]);
    }

    #[test]
    fn threads_are_found_by_name_with_their_cpus() {
        let allowed = process_cpus();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::Builder::new()
            .name("affinity-probe".into())
            .spawn(move || {
                pin_current_thread(0);
                ready_tx.send(()).unwrap();
                done_rx.recv().unwrap();
            })
            .unwrap();
        ready_rx.recv().unwrap();
        assert_eq!(threads_named("affinity-pro"), [("affinity-probe".into(), vec![allowed[0]])]);
        done_tx.send(()).unwrap();
        t.join().unwrap();
        assert!(threads_named("affinity-probe").is_empty());
        assert_eq!(parse_cpu_list("0-2,5"), [0, 1, 2, 5]);
        assert_eq!(parse_cpu_list("7"), [7]);
        assert_eq!(parse_cpu_list(""), Vec::<usize>::new());
    }
}
