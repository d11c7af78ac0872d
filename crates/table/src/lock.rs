//! Locks of tables and rows, held by transactions, granted or waited for with a timeout.
//!
//! Rows are locked by primary key (present or not, so two inserts of one key meet on one
//! lock), tables as a whole. Modes: shared (S) and exclusive (X) for both, and the intention
//! modes (IS, IX) a row lock's transaction takes on its table first, so a table lock sees
//! the row locks under it. A request that conflicts waits up to the timeout and then fails
//! with [`Error::LockTimeout`]: deadlocks end that way too (there is no detector).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};

/// A lock's mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    /// Intention to lock rows of the table shared.
    IntentShared,
    /// Intention to lock rows of the table exclusively.
    IntentExclusive,
    /// Shared.
    Shared,
    /// Exclusive.
    Exclusive,
}

impl LockMode {
    fn compatible(self, other: LockMode) -> bool {
        use LockMode::*;
        matches!(
            (self, other),
            (IntentShared, IntentShared | IntentExclusive | Shared)
                | (IntentExclusive, IntentShared | IntentExclusive)
                | (Shared, IntentShared | Shared)
        )
    }

    /// The weakest mode that grants both.
    fn join(self, other: LockMode) -> LockMode {
        use LockMode::*;
        match (self, other) {
            (a, b) if a == b => a,
            (Exclusive, _) | (_, Exclusive) => Exclusive,
            (IntentShared, b) | (b, IntentShared) => b,
            // IX with S would be SIX; X grants both.
            _ => Exclusive,
        }
    }
}

/// What is locked.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LockKey {
    /// A whole table.
    Table(u32),
    /// One primary key of a table.
    Row(u32, Vec<u8>),
}

/// The lock table.
#[derive(Debug, Default)]
pub struct LockManager {
    held: Mutex<HashMap<LockKey, Vec<(u64, LockMode)>>>,
    released: Condvar,
}

impl LockManager {
    /// Grants `txn` the lock `key` in `mode` (or a stronger mode it holds already), waiting
    /// up to `timeout` for conflicting holders to release. Returns whether the lock is new to
    /// `txn` (so the caller releases it).
    ///
    /// # Errors
    /// [`Error::LockTimeout`] when the lock is still held by another at the timeout.
    pub fn acquire(
        &self,
        txn: u64,
        key: &LockKey,
        mode: LockMode,
        timeout: Duration,
    ) -> Result<bool> {
        let deadline = Instant::now() + timeout;
        let mut held = self.held.lock();
        loop {
            let holders = held.entry(key.clone()).or_default();
            let mine = holders.iter().position(|(t, _)| *t == txn);
            let want = mine.map_or(mode, |i| holders[i].1.join(mode));
            if mine.is_some_and(|i| holders[i].1 == want) {
                return Ok(false);
            }
            let free = holders.iter().all(|(t, m)| *t == txn || want.compatible(*m));
            if free {
                match mine {
                    Some(i) => holders[i].1 = want,
                    None => holders.push((txn, want)),
                }
                return Ok(mine.is_none());
            }
            if self.released.wait_until(&mut held, deadline).timed_out() {
                let holders = held.entry(key.clone()).or_default();
                if holders.is_empty() {
                    held.remove(key);
                }
                return Err(Error::LockTimeout);
            }
        }
    }

    /// Releases `txn`'s lock on `key`.
    pub fn release(&self, txn: u64, key: &LockKey) {
        let mut held = self.held.lock();
        if let Some(holders) = held.get_mut(key) {
            holders.retain(|(t, _)| *t != txn);
            if holders.is_empty() {
                held.remove(key);
            }
        }
        self.released.notify_all();
    }

    /// Releases every lock of `keys` that `txn` holds.
    pub fn release_all(&self, txn: u64, keys: &[LockKey]) {
        let mut held = self.held.lock();
        for key in keys {
            if let Some(holders) = held.get_mut(key) {
                holders.retain(|(t, _)| *t != txn);
                if holders.is_empty() {
                    held.remove(key);
                }
            }
        }
        self.released.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use LockMode::*;

    const T: Duration = Duration::from_millis(20);

    #[test]
    fn the_compatibility_matrix() {
        let m = LockManager::default();
        let k = LockKey::Table(1);
        assert!(m.acquire(1, &k, IntentExclusive, T).unwrap());
        assert!(m.acquire(2, &k, IntentShared, T).unwrap());
        assert!(matches!(m.acquire(3, &k, Shared, T), Err(Error::LockTimeout)));
        m.release(1, &k);
        assert!(m.acquire(3, &k, Shared, T).unwrap());
        assert!(matches!(m.acquire(2, &k, Exclusive, T), Err(Error::LockTimeout)));
        m.release(3, &k);
        assert!(!m.acquire(2, &k, Exclusive, T).unwrap(), "an upgrade is not a new lock");
        assert!(!m.acquire(2, &k, Shared, T).unwrap(), "X grants S");
    }

    #[test]
    fn a_waiter_gets_the_lock_when_it_is_released() {
        let m = std::sync::Arc::new(LockManager::default());
        let k = LockKey::Row(1, b"k".to_vec());
        m.acquire(1, &k, Exclusive, T).unwrap();
        let m2 = m.clone();
        let k2 = k.clone();
        let waiter =
            std::thread::spawn(move || m2.acquire(2, &k2, Shared, Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(30));
        m.release_all(1, &[k]);
        assert!(waiter.join().unwrap().unwrap());
    }
}
