//! The steps serve's `run.rs` takes around the group commit, stated again in the same order,
//! each under the name of the function it stands for (a change to one of them must be made
//! here too): a run takes the stripes of its keys, reads a key's pending entry before the
//! engine's value (`Run::stored`), queues its batch holding the stripes, lets them go and
//! waits for its ticket; a run that wrote nothing but read a pending entry waits for the
//! committed mark (`Run::write` under `appendfsync always`, with `release`).

use crate::commit::GroupWriter;
use crate::store::Store;
use crate::value::Value;

/// `Run::stored`: the key's pending entry (the run then depends on its batch), or the
/// engine's value.
pub fn stored(store: &Store, key: &[u8], depends: &mut Vec<u64>) -> Option<Value> {
    if let Some((value, ticket)) = store.commits().pending(key) {
        if !depends.contains(&ticket) {
            depends.push(ticket);
        }
        return value;
    }
    store.get(key)
}

/// A run of one INCR of `key` (a value absent counts as 0), its batch counted as `bytes`:
/// the new value, or the error text of its failed write.
pub async fn incr(store: &Store, key: &[u8], bytes: usize) -> Result<u64, String> {
    let (ticket, n) = {
        let _stripe = store.lock_stripes([key]);
        let mut depends = Vec::new();
        let n = stored(store, key, &mut depends).map_or(0, |v| number(&v)) + 1;
        let entries = vec![(key.to_vec(), Some(Value::new(n.to_string().into_bytes())))];
        (store.commits().enqueue(entries, None, depends, bytes), n)
        // `Run::write` with `release`: the stripe is let go before the wait.
    };
    store.commits().wait(ticket).await.map(|_| n)
}

/// A run of one GET of `key`: the ticket of the pending entry it read, if it read one, and
/// its value once that entry is written, or the error text if its write failed.
pub async fn get(store: &Store, key: &[u8]) -> (Option<u64>, Result<Option<Value>, String>) {
    let mut depends = Vec::new();
    let value = {
        let _stripe = store.lock_stripes([key]);
        stored(store, key, &mut depends)
    };
    let read = depends.first().copied();
    (read, store.commits().wait_committed(&depends).await.map(|()| value))
}

/// A run's MSET-like batch (its stripes taken in index order) queued holding the stripes,
/// which are let go after: what the run then waits for, with `Commits::wait`.
pub fn queue(store: &Store, entries: &[(&[u8], &[u8])], bytes: usize) -> crate::commit::Ticket {
    let _held = store.lock_stripes(entries.iter().map(|(k, _)| *k));
    let entries = entries.iter().map(|(k, v)| (k.to_vec(), Some(Value::new(v.to_vec())))).collect();
    store.commits().enqueue(entries, None, Vec::new(), bytes)
}

/// An INCR's value as a number.
pub fn number(v: &Value) -> u64 {
    std::str::from_utf8(&v.data).ok().and_then(|s| s.parse().ok()).expect("a number")
}
