//! The model's stand-in for the engine's write of a group (serve's `group_write.rs`), the one
//! step of the group commit that is not the real code: a map for the engine's keys, one
//! scheduling point for the synced write (runs queue and read meanwhile, as they do during
//! the WAL's sync), and failures on demand.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use crate::commit::{Commits, GroupWriter, Queued};
use crate::value::Value;

/// Stripes of the model's keys (run.rs's locks over keys): few, so that runs meet.
const STRIPES: usize = 4;

/// A keyspace under `appendfsync always`: the real queue ([`Commits`]), stripes, and the
/// stand-in engine.
pub struct Store {
    commits: Commits,
    stripes: Vec<shuttle::sync::Mutex<()>>,
    /// The engine's state. A std mutex: it is never held across a scheduling point, so each
    /// of its uses is one step of the model.
    engine: std::sync::Mutex<Engine>,
    /// Indexes of the engine writes (0 the first) that fail.
    failing: Vec<usize>,
}

#[derive(Default)]
struct Engine {
    data: HashMap<Vec<u8>, Value>,
    /// Writes begun.
    writes: usize,
    /// The last ticket handed to a write: tickets reach the engine in increasing order.
    last_ticket: u64,
    /// Tickets written, in write order.
    written: Vec<u64>,
    /// Tickets whose write failed.
    failed: Vec<u64>,
}

impl Store {
    /// A store whose engine writes numbered in `failing` (0 the first) fail.
    pub fn new(failing: &[usize]) -> Store {
        Store {
            commits: Commits::new(),
            stripes: (0..STRIPES).map(|_| shuttle::sync::Mutex::new(())).collect(),
            engine: Default::default(),
            failing: failing.to_vec(),
        }
    }

    /// The stripes of `keys`, taken in index order (`Keyspace::stripe`, `Run::hold`): what a
    /// run holds while it reads and queues.
    pub fn lock_stripes<'a>(
        &self,
        keys: impl IntoIterator<Item = &'a [u8]>,
    ) -> Vec<shuttle::sync::MutexGuard<'_, ()>> {
        let mut at: Vec<usize> = keys
            .into_iter()
            .map(|key| {
                let mut h = DefaultHasher::new();
                key.hash(&mut h);
                (h.finish() % STRIPES as u64) as usize
            })
            .collect();
        at.sort_unstable();
        at.dedup();
        at.into_iter()
            .map(|i| self.stripes[i].lock().expect("a panic ends the model run"))
            .collect()
    }

    /// A key's value in the engine (`Keyspace::get_stored`).
    pub fn get(&self, key: &[u8]) -> Option<Value> {
        self.engine().data.get(key).cloned()
    }

    /// Tickets written, in write order.
    pub fn written(&self) -> Vec<u64> {
        self.engine().written.clone()
    }

    /// Tickets whose write failed.
    pub fn failed(&self) -> Vec<u64> {
        self.engine().failed.clone()
    }

    fn engine(&self) -> std::sync::MutexGuard<'_, Engine> {
        self.engine.lock().expect("a panic ends the model run")
    }
}

impl GroupWriter for Store {
    fn commits(&self) -> &Commits {
        &self.commits
    }

    /// Checks that the group's tickets follow every ticket written before, then "syncs" (a
    /// scheduling point) and applies the group, or fails it.
    async fn write_group(&self, group: &[&Queued]) -> Result<u64, String> {
        assert!(!group.is_empty(), "a group written has a batch");
        let index = {
            let mut e = self.engine();
            for q in group {
                assert!(
                    q.ticket > e.last_ticket,
                    "ticket {} written after ticket {}: batches out of ticket order",
                    q.ticket,
                    e.last_ticket
                );
                e.last_ticket = q.ticket;
            }
            e.writes += 1;
            e.writes - 1
        };
        shuttle::future::yield_now().await;
        let mut e = self.engine();
        if self.failing.contains(&index) {
            e.failed.extend(group.iter().map(|q| q.ticket));
            return Err(format!("write {index} failed (the model's failure)"));
        }
        for q in group {
            for (key, value) in &q.entries {
                match value {
                    Some(v) => e.data.insert(key.clone(), v.clone()),
                    None => e.data.remove(key),
                };
            }
            e.written.push(q.ticket);
        }
        // The replication offset past the group: the model's stream counts batches.
        Ok(e.written.len() as u64)
    }
}
