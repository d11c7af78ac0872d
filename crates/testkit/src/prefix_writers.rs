//! Writers whose acknowledged writes a copy of a store (a checkpoint) is checked against.
//!
//! Each writer owns `keys_per_writer` keys and writes them round-robin: its write number
//! `op` (from 1) sets key `(op - 1) % keys_per_writer` to a value holding `op`, its
//! version. Writes go in groups of `group` (one batch, one transaction), whole or not at
//! all. A copy made while the writers run holds, for each writer, the state after some
//! prefix of its writes, and [`check_copy`] finds that prefix from the copy alone: the
//! largest version `p` among the writer's keys. It then checks that every key holds
//! exactly what the first `p` writes leave (so no later write is in without an earlier
//! one: no holes), that `p` ends a group (no torn batch or transaction), and that `p` lies
//! between what was acknowledged before the copy began and what had been started when it
//! ended.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;

/// Bytes of a value after its version: a pattern made from the version, so that a value
/// torn or mixed with another is seen.
const PAD_BYTES: usize = 24;

/// How many writers, keys and writes per group.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Writer threads.
    pub writers: usize,
    /// Keys each writer owns.
    pub keys_per_writer: usize,
    /// Writes per batch or transaction.
    pub group: usize,
}

/// Writer `w`'s key number `k`.
pub fn key(w: usize, k: usize) -> Vec<u8> {
    format!("w{w:02}-k{k:05}").into_bytes()
}

/// The value of version `version`.
pub fn value(version: u64) -> Vec<u8> {
    let mut v = version.to_be_bytes().to_vec();
    v.extend((0..PAD_BYTES).map(|i| (version as u8).wrapping_mul(31).wrapping_add(i as u8)));
    v
}

/// The version a value holds; panics on a value that [`value`] did not make.
pub fn version_of(v: &[u8]) -> u64 {
    assert_eq!(v.len(), 8 + PAD_BYTES, "a writer's value has the wrong length: {v:?}");
    let version = u64::from_be_bytes(v[..8].try_into().expect("8 bytes"));
    assert_eq!(v, value(version), "a writer's value is damaged");
    version
}

/// The version key `k` holds after a writer's first `p` writes (0: never written).
fn expected(p: u64, k: usize, keys: usize) -> u64 {
    let first = k as u64 + 1;
    if p < first { 0 } else { p - (p - first) % keys as u64 }
}

/// Per writer: the last write started (submitted) and the last acknowledged.
#[derive(Debug)]
struct Progress {
    started: Vec<AtomicU64>,
    acked: Vec<AtomicU64>,
}

/// Running writers.
pub struct Writers {
    plan: Plan,
    progress: Arc<Progress>,
    stop: Arc<AtomicBool>,
    handles: Vec<JoinHandle<()>>,
}

impl Writers {
    /// Starts `plan.writers` threads, each calling `write(w, group)` with its next group of
    /// (key, value) pairs until stopped. `write` returns whether the group was applied
    /// (false: refused whole, e.g. a lock timeout; the same group is tried again) and
    /// panics on an error that is not expected.
    pub fn start<F>(plan: Plan, write: F) -> Writers
    where
        F: Fn(usize, &[(Vec<u8>, Vec<u8>)]) -> bool + Send + Sync + 'static,
    {
        let progress = Arc::new(Progress {
            started: (0..plan.writers).map(|_| AtomicU64::new(0)).collect(),
            acked: (0..plan.writers).map(|_| AtomicU64::new(0)).collect(),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let write = Arc::new(write);
        let handles = (0..plan.writers)
            .map(|w| {
                let (progress, stop, write) = (progress.clone(), stop.clone(), write.clone());
                std::thread::spawn(move || {
                    let mut done = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let group: Vec<_> = (done + 1..=done + plan.group as u64)
                            .map(|op| {
                                let k = ((op - 1) % plan.keys_per_writer as u64) as usize;
                                (key(w, k), value(op))
                            })
                            .collect();
                        let last = done + plan.group as u64;
                        progress.started[w].store(last, Ordering::SeqCst);
                        if write(w, &group) {
                            done = last;
                            progress.acked[w].store(done, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        Writers { plan, progress, stop, handles }
    }

    /// Waits until every writer has had `ops` writes acknowledged; panics if a writer
    /// thread ended (its panic is the failure).
    pub fn wait_for_acked(&self, ops: u64) {
        while self.acked().iter().any(|&a| a < ops) {
            assert!(!self.handles.iter().any(|h| h.is_finished()), "a writer thread ended");
            std::thread::yield_now();
        }
    }

    /// Each writer's last acknowledged write.
    pub fn acked(&self) -> Vec<u64> {
        self.progress.acked.iter().map(|a| a.load(Ordering::SeqCst)).collect()
    }

    /// Each writer's last write started.
    pub fn started(&self) -> Vec<u64> {
        self.progress.started.iter().map(|a| a.load(Ordering::SeqCst)).collect()
    }

    /// The plan the writers follow.
    pub fn plan(&self) -> Plan {
        self.plan
    }

    /// Stops the writers and waits for them; a writer's panic is raised here.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.handles {
            if let Err(p) = h.join() {
                std::panic::resume_unwind(p);
            }
        }
    }
}

/// Checks a copy read through `get` against the writers' progress (see the module doc):
/// `acked_before`, each writer's acknowledged writes before the copy began, and
/// `started_after`, each writer's writes started when it ended. Returns each writer's
/// prefix in the copy; panics with the writer, key and versions where it is not one.
pub fn check_copy(
    plan: Plan,
    acked_before: &[u64],
    started_after: &[u64],
    mut get: impl FnMut(&[u8]) -> Option<Vec<u8>>,
) -> Vec<u64> {
    (0..plan.writers)
        .map(|w| {
            let versions: Vec<u64> = (0..plan.keys_per_writer)
                .map(|k| get(&key(w, k)).map_or(0, |v| version_of(&v)))
                .collect();
            let p = versions.iter().copied().max().unwrap_or(0);
            for (k, &v) in versions.iter().enumerate() {
                let want = expected(p, k, plan.keys_per_writer);
                assert_eq!(
                    v, want,
                    "writer {w}: key {k} holds version {v}, where the prefix of {p} writes that \
                     its newest key shows leaves {want}"
                );
            }
            assert_eq!(
                p % plan.group as u64,
                0,
                "writer {w}: a prefix of {p} writes tears a group"
            );
            assert!(
                p >= acked_before[w],
                "writer {w}: the copy holds {p} writes, {} were acknowledged before it began",
                acked_before[w]
            );
            assert!(
                p <= started_after[w],
                "writer {w}: the copy holds {p} writes, only {} were started when it ended",
                started_after[w]
            );
            p
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_versions_follow_the_round_robin() {
        // Keys 0..3, writes 1..=7: key 0 gets 1, 4, 7; key 1 gets 2, 5; key 2 gets 3, 6.
        assert_eq!([0, 1, 2].map(|k| expected(7, k, 3)), [7, 5, 6]);
        assert_eq!([0, 1, 2].map(|k| expected(1, k, 3)), [1, 0, 0]);
        assert_eq!([0, 1, 2].map(|k| expected(0, k, 3)), [0, 0, 0]);
    }

    #[test]
    fn a_hole_a_torn_group_and_a_stale_copy_are_caught() {
        let plan = Plan { writers: 1, keys_per_writer: 3, group: 2 };
        let copy = |versions: [u64; 3]| {
            move |k: &[u8]| {
                let i = (0..3).find(|&i| key(0, i) == k).unwrap();
                (versions[i] > 0).then(|| value(versions[i]))
            }
        };
        assert_eq!(check_copy(plan, &[4], &[6], copy([4, 2, 3])), vec![4]);
        let hole = std::panic::catch_unwind(|| check_copy(plan, &[0], &[6], copy([4, 0, 3])));
        assert!(hole.is_err(), "write 2 missing under write 4");
        let torn = std::panic::catch_unwind(|| check_copy(plan, &[0], &[6], copy([1, 2, 3])));
        assert!(torn.is_err(), "3 writes end inside the second group");
        let stale = std::panic::catch_unwind(|| check_copy(plan, &[6], &[6], copy([4, 2, 3])));
        assert!(stale.is_err(), "6 acknowledged before, 4 in the copy");
    }
}
