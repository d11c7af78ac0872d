//! Locks of tables and rows, held by transactions, granted or waited for with a timeout.
//!
//! Rows are locked by primary key (present or not, so two inserts of one key meet on one
//! lock), tables as a whole. Modes: shared (S) and exclusive (X) for both, and the intention
//! modes (IS, IX) a row lock's transaction takes on its table first, so a table lock sees
//! the row locks under it. A request that conflicts waits up to the timeout and then fails
//! with [`Error::LockTimeout`]: deadlocks end that way too (there is no detector).
//!
//! A table-wide shared or exclusive request that waits goes before intention requests that
//! arrive after it and conflict with it: without that, a stream of writers, each taking the
//! table's IX lock while another still holds it, kept a whole-table reader (a checkpoint)
//! waiting forever.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// The contention profile's sites: a stripe's mutex, and a wait for a lock another
/// transaction holds.
static LOCK_STRIPE: shale_space::contention::Site =
    shale_space::contention::Site::new("table: lock table stripe mutex");
static LOCK_WAIT: shale_space::contention::Site =
    shale_space::contention::Site::new("table: row or table lock wait");
use xxhash_rust::xxh3::xxh3_64_with_seed;

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

/// Stripes of the lock table: a power of two, so a key's stripe is its hash's low bits.
const STRIPES: usize = 64;

/// The lock table, in stripes by key hash, each its own mutex and condition variable: on
/// many cores every transaction locks rows, and one mutex for all of them (with every
/// release waking every waiter) was where 16 client threads queued (2026-11-27, 16-core
/// run in BENCHMARKS.md). A request or release touches one key, so one stripe; a
/// transaction's `release_all` takes its keys' stripes one after another, never two at
/// once, so stripes cannot deadlock with each other. A table's own lock (its intention
/// locks) is one key, so one stripe, as before.
#[derive(Debug)]
pub struct LockManager {
    stripes: Box<[Stripe]>,
}

#[derive(Debug, Default)]
struct Stripe {
    state: Mutex<StripeState>,
    released: Condvar,
}

#[derive(Debug, Default)]
struct StripeState {
    held: HashMap<LockKey, Vec<(u64, LockMode)>>,
    /// Requests of this stripe waiting now: a release wakes waiters only when there are any.
    waiting: usize,
    /// Table-wide shared and exclusive requests waiting now, by table: new intention
    /// requests that conflict with them wait behind them.
    table_waiters: HashMap<u32, TableWaiters>,
}

/// The table-wide requests waiting on one table.
#[derive(Debug, Default, Clone, Copy)]
struct TableWaiters {
    shared: usize,
    exclusive: usize,
}

impl TableWaiters {
    /// Whether a new intention request in `mode` must wait behind these.
    fn hold_back(&self, mode: LockMode) -> bool {
        match mode {
            LockMode::IntentShared => self.exclusive > 0,
            LockMode::IntentExclusive => self.exclusive > 0 || self.shared > 0,
            LockMode::Shared | LockMode::Exclusive => false,
        }
    }
}

impl Default for LockManager {
    fn default() -> LockManager {
        LockManager { stripes: (0..STRIPES).map(|_| Stripe::default()).collect() }
    }
}

impl LockManager {
    fn stripe(&self, key: &LockKey) -> &Stripe {
        let h = match key {
            LockKey::Table(t) => u64::from(*t).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32,
            LockKey::Row(t, k) => xxh3_64_with_seed(k, u64::from(*t)),
        };
        &self.stripes[h as usize & (STRIPES - 1)]
    }

    /// Grants `txn` the lock `key` in `mode` (or a stronger mode it holds already), waiting
    /// up to `timeout` for holders of conflicting modes to release. Returns whether `txn`
    /// did not hold `key` before (a new lock to release later), false for an upgrade or a
    /// mode it holds.
    ///
    /// # Errors
    /// [`Error::LockTimeout`] when the wait runs out; nothing is granted then.
    pub fn acquire(
        &self,
        txn: u64,
        key: &LockKey,
        mode: LockMode,
        timeout: Duration,
    ) -> Result<bool> {
        let deadline = Instant::now() + timeout;
        let stripe = self.stripe(key);
        let mut st = LOCK_STRIPE.lock(&stripe.state);
        loop {
            // The key is cloned only for a lock nobody holds.
            if !st.held.contains_key(key) {
                st.held.insert(key.clone(), Vec::new());
            }
            let table = match key {
                LockKey::Table(t) => Some(*t),
                LockKey::Row(..) => None,
            };
            let waiters = table.and_then(|t| st.table_waiters.get(&t).copied());
            let holders = st.held.get_mut(key).expect("inserted above");
            let mine = holders.iter().position(|(t, _)| *t == txn);
            let want = mine.map_or(mode, |i| holders[i].1.join(mode));
            if mine.is_some_and(|i| holders[i].1 == want) {
                return Ok(false);
            }
            let free = holders.iter().all(|(t, m)| *t == txn || want.compatible(*m));
            // A new intention request waits behind a waiting table-wide one it conflicts
            // with (a transaction holding the table already is never held back).
            let held_back = mine.is_none() && waiters.is_some_and(|w| w.hold_back(want));
            if free && !held_back {
                match mine {
                    Some(i) => holders[i].1 = want,
                    None => holders.push((txn, want)),
                }
                return Ok(mine.is_none());
            }
            let table_wide =
                table.filter(|_| matches!(want, LockMode::Shared | LockMode::Exclusive));
            if let Some(t) = table_wide {
                let w = st.table_waiters.entry(t).or_default();
                if want == LockMode::Shared { w.shared += 1 } else { w.exclusive += 1 }
            }
            st.waiting += 1;
            let timed_out = LOCK_WAIT
                .wait(|| st.unlocked(|g| stripe.released.wait_until(g, deadline).timed_out()));
            st.waiting -= 1;
            if let Some(t) = table_wide {
                let w = st.table_waiters.get_mut(&t).expect("counted above");
                if want == LockMode::Shared {
                    w.shared -= 1
                } else {
                    w.exclusive -= 1
                }
                if w.shared == 0 && w.exclusive == 0 {
                    st.table_waiters.remove(&t);
                }
                // Requests held back behind this one may go now (granted or given up).
                stripe.released.notify_all();
            }
            if timed_out {
                if st.held.get(key).is_some_and(Vec::is_empty) {
                    st.held.remove(key);
                }
                return Err(Error::LockTimeout);
            }
        }
    }

    /// Releases `txn`'s lock `key` (read committed's short read lock).
    pub fn release(&self, txn: u64, key: &LockKey) {
        let stripe = self.stripe(key);
        let mut st = LOCK_STRIPE.lock(&stripe.state);
        release_in(&mut st, txn, key);
        if st.waiting > 0 {
            stripe.released.notify_all();
        }
    }

    /// Releases every lock of `keys` that `txn` holds.
    pub fn release_all(&self, txn: u64, keys: &[LockKey]) {
        for key in keys {
            self.release(txn, key);
        }
    }
}

fn release_in(st: &mut StripeState, txn: u64, key: &LockKey) {
    if let Some(holders) = st.held.get_mut(key) {
        holders.retain(|(t, _)| *t != txn);
        if holders.is_empty() {
            st.held.remove(key);
        }
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

    /// Keys fall in many stripes: `release_all` frees each, waking a waiter in any stripe,
    /// and a lock in one stripe never blocks a key of another.
    #[test]
    fn locks_in_every_stripe_are_released_and_their_waiters_woken() {
        let m = std::sync::Arc::new(LockManager::default());
        let keys: Vec<LockKey> =
            (0..500u32).map(|i| LockKey::Row(i % 3, i.to_le_bytes().to_vec())).collect();
        let stripes: std::collections::HashSet<*const Stripe> =
            keys.iter().map(|k| m.stripe(k) as *const Stripe).collect();
        assert_eq!(stripes.len(), STRIPES, "500 keys cover every stripe");
        for k in &keys {
            assert!(m.acquire(1, k, Exclusive, T).unwrap());
        }
        let waiters: Vec<_> = [7usize, 250, 499]
            .into_iter()
            .map(|i| {
                let (m, k) = (m.clone(), keys[i].clone());
                std::thread::spawn(move || {
                    m.acquire(2 + i as u64, &k, Shared, Duration::from_secs(10))
                })
            })
            .collect();
        assert!(m.acquire(9, &LockKey::Row(0, b"other".to_vec()), Exclusive, T).unwrap());
        std::thread::sleep(Duration::from_millis(30));
        m.release_all(1, &keys);
        for w in waiters {
            assert!(w.join().unwrap().unwrap());
        }
        assert!(m.acquire(3, &keys[100], Exclusive, T).unwrap(), "released");
    }

    /// Found by the checkpoint's test on a loaded machine: writers taking the table's IX lock
    /// one after another kept a waiting table-wide S request (the checkpoint) out for good.
    #[test]
    fn a_waiting_table_lock_goes_before_later_intention_locks() {
        let m = std::sync::Arc::new(LockManager::default());
        let t = LockKey::Table(1);
        let long = Duration::from_secs(30);
        assert!(m.acquire(1, &t, IntentExclusive, long).unwrap());
        let reader = {
            let m = m.clone();
            std::thread::spawn(move || m.acquire(2, &LockKey::Table(1), Shared, long))
        };
        // Wait (on the event) until the shared request is queued.
        loop {
            let st = m.stripe(&t).state.lock();
            if st.table_waiters.get(&1).is_some_and(|w| w.shared == 1) {
                break;
            }
            drop(st);
            std::thread::yield_now();
        }
        // A later IX request conflicts with the waiting S: it waits behind it (and gives up),
        // though it is compatible with the IX held now. An IS request does not conflict.
        let later = m.acquire(3, &t, IntentExclusive, Duration::from_millis(50));
        assert!(matches!(later, Err(Error::LockTimeout)), "{later:?}");
        assert!(m.acquire(4, &t, IntentShared, long).unwrap());
        // The holder of IX may still take its table again (no self-deadlock).
        assert!(!m.acquire(1, &t, IntentExclusive, long).unwrap());
        m.release(1, &t);
        assert!(reader.join().unwrap().unwrap(), "the shared request got the lock");
        m.release(4, &t);
        m.release(2, &t);
        assert!(m.acquire(3, &t, IntentExclusive, long).unwrap());
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
