//! `shale.Iterator`: `(key, value)` pairs of a store in key order, read in batches with the
//! GIL released.

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use shale_lsm::{DbIterator, ReadOptions};

use crate::error::to_py;
use crate::snapshot::SnapshotShared;

/// Entries read by the first step of an iterator; each later step reads twice as many, up to
/// [`FILL_ENTRIES_MAX`]. A loop that stops after a few entries reads few more than it needs,
/// and a long scan releases the GIL once per batch rather than once per entry.
const FILL_ENTRIES_FIRST: usize = 8;
/// Most entries one step reads ahead.
const FILL_ENTRIES_MAX: usize = 512;
/// Most key and value bytes one step reads ahead (at least one entry is read whatever its
/// size).
const FILL_BYTES_MAX: usize = 1 << 20;

/// Where an iterator is, used only with the GIL released (rule 1 of lib.rs).
struct Cursor {
    iter: DbIterator,
    reverse: bool,
    /// The first step seeks; later ones move.
    positioned: bool,
    /// No entry follows.
    done: bool,
    /// An error met after entries still to be returned: raised by the next step.
    failed: Option<shale_lsm::Error>,
    fill_entries: usize,
}

type Entry = (Vec<u8>, Vec<u8>);

impl Cursor {
    /// The next entries, at most `fill_entries` and about [`FILL_BYTES_MAX`] bytes.
    fn fill(&mut self) -> shale_lsm::Result<Vec<Entry>> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let mut out = Vec::new();
        let mut bytes = 0;
        while !self.done && out.len() < self.fill_entries && bytes < FILL_BYTES_MAX {
            let it = &mut self.iter;
            match (self.positioned, self.reverse) {
                (false, false) => it.seek_to_first(),
                (false, true) => it.seek_to_last(),
                (true, false) => it.next(),
                (true, true) => it.prev(),
            }
            self.positioned = true;
            if !it.valid() {
                self.done = true;
                if let Err(e) = it.status() {
                    if out.is_empty() {
                        return Err(e);
                    }
                    self.failed = Some(e);
                }
                break;
            }
            bytes += it.key().len() + it.value().len();
            out.push((it.key().to_vec(), it.value().to_vec()));
        }
        self.fill_entries = (self.fill_entries * 2).min(FILL_ENTRIES_MAX);
        Ok(out)
    }
}

/// An iterator of `(key, value)` pairs, from `Db.iterator(...)`. It reads as of its
/// creation (or its snapshot) and keeps its store open while it lives.
#[pyclass(frozen, module = "shale._shale", name = "Iterator")]
pub struct Iterator {
    /// Locked only with the GIL released (rule 1 of lib.rs).
    cursor: Mutex<Cursor>,
    /// Entries read ahead, handed out with the GIL held (rule 2).
    buffered: Mutex<VecDeque<Entry>>,
    /// Dropped after the cursor (fields drop in order): the store and snapshot it reads.
    _store: Arc<shale_lsm::Db>,
    _snapshot: Option<Arc<SnapshotShared>>,
}

impl Iterator {
    pub fn new(
        py: Python<'_>,
        store: Arc<shale_lsm::Db>,
        snapshot: Option<Arc<SnapshotShared>>,
        opts: &ReadOptions,
        reverse: bool,
    ) -> Iterator {
        let iter = py.detach(|| store.iter(opts));
        let cursor = Cursor {
            iter,
            reverse,
            positioned: false,
            done: false,
            failed: None,
            fill_entries: FILL_ENTRIES_FIRST,
        };
        Iterator {
            cursor: Mutex::new(cursor),
            buffered: Mutex::new(VecDeque::new()),
            _store: store,
            _snapshot: snapshot,
        }
    }

    fn pop<'py>(&self, py: Python<'py>) -> Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let (k, v) = self.buffered.lock().pop_front()?;
        Some((PyBytes::new(py, &k), PyBytes::new(py, &v)))
    }
}

#[pymethods]
impl Iterator {
    fn __iter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __next__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>> {
        if let Some(entry) = self.pop(py) {
            return Ok(Some(entry));
        }
        let entries = py.detach(|| self.cursor.lock().fill()).map_err(to_py)?;
        self.buffered.lock().extend(entries);
        Ok(self.pop(py))
    }

    fn __repr__(&self) -> &'static str {
        "<shale.Iterator>"
    }
}

#[cfg(test)]
mod tests {
    fn is_send<T: Send>() {}

    #[test]
    fn the_store_s_iterator_and_handle_are_send() {
        // The iterator is Send only if every source it merges is (memtable, SST, level).
        is_send::<shale_lsm::DbIterator>();
        is_send::<std::sync::Arc<shale_lsm::Db>>();
    }
}
