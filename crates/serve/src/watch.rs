//! `WATCH`'s registry: which connections watch which keys, and the flag each one's `EXEC`
//! checks (Redis's `watched_keys` and `CLIENT_DIRTY_CAS`).
//!
//! Every write of a key marks the connections watching it (`touch`): a run's batch, for each
//! key it writes, while the run still holds the key's stripe (run.rs); FLUSHDB and a
//! replica's load of a snapshot mark every watcher. `WATCH` registers a key holding its
//! stripe, and `EXEC` checks the flag holding the stripes of every key watched, so a write
//! is either wholly before the registration (not a change since WATCH) or marks the flag
//! before the check. A server nobody watches pays one atomic load a batch.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// One connection's flag: set when a key it watches is written.
pub type Flag = Arc<AtomicBool>;

/// The keys watched, and by whom.
#[derive(Default)]
pub struct Watches {
    /// Registrations (a key and a connection's flag) held: 0 skips the map.
    count: AtomicUsize,
    map: Mutex<HashMap<Vec<u8>, Vec<Flag>>>,
}

impl Watches {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Vec<u8>, Vec<Flag>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks the connections watching any of `keys`. Called holding the keys' stripes.
    pub fn touch<'k>(&self, keys: impl IntoIterator<Item = &'k Vec<u8>>) {
        if self.count.load(Ordering::SeqCst) == 0 {
            return;
        }
        let map = self.lock();
        for key in keys {
            if let Some(flags) = map.get(key) {
                for f in flags {
                    f.store(true, Ordering::SeqCst);
                }
            }
        }
    }

    /// Marks every watcher (FLUSHDB, a replica's load). Called holding every stripe.
    pub fn touch_all(&self) {
        if self.count.load(Ordering::SeqCst) == 0 {
            return;
        }
        for flags in self.lock().values() {
            for f in flags {
                f.store(true, Ordering::SeqCst);
            }
        }
    }

    /// Registers `flag` as watching `key` (once, however often the connection watches it):
    /// true if it was not already. Called holding the key's stripe.
    pub fn watch(&self, key: &[u8], flag: &Flag) -> bool {
        let mut map = self.lock();
        let flags = map.entry(key.to_vec()).or_default();
        if flags.iter().any(|f| Arc::ptr_eq(f, flag)) {
            return false;
        }
        flags.push(flag.clone());
        self.count.fetch_add(1, Ordering::SeqCst);
        true
    }

    /// Forgets `flag`'s registrations of `keys`.
    pub fn unwatch<'k>(&self, keys: impl IntoIterator<Item = &'k [u8]>, flag: &Flag) {
        let mut map = self.lock();
        for key in keys {
            let Some(flags) = map.get_mut(key) else { continue };
            let before = flags.len();
            flags.retain(|f| !Arc::ptr_eq(f, flag));
            self.count.fetch_sub(before - flags.len(), Ordering::SeqCst);
            if flags.is_empty() {
                map.remove(key);
            }
        }
    }

    /// Registrations held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_marks_only_the_watchers_of_its_keys() {
        let w = Watches::default();
        let (a, b) = (Flag::default(), Flag::default());
        assert!(w.watch(b"k", &a));
        assert!(!w.watch(b"k", &a), "once per connection");
        assert!(w.watch(b"j", &b));
        assert_eq!(w.len(), 2);
        w.touch([&b"x".to_vec()]);
        assert!(!a.load(Ordering::SeqCst) && !b.load(Ordering::SeqCst));
        w.touch([&b"k".to_vec()]);
        assert!(a.load(Ordering::SeqCst) && !b.load(Ordering::SeqCst));
        w.unwatch([&b"k"[..]], &a);
        w.touch_all();
        assert!(b.load(Ordering::SeqCst));
        w.unwatch([&b"j"[..]], &b);
        assert_eq!(w.len(), 0);
        assert!(w.lock().is_empty());
    }
}
