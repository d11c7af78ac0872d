//! `shale.Iterator`: the entries of a store in key order (as `(key, value)` pairs, keys or
//! values), read in batches with the GIL released; and [`Range`], the walks that
//! `keys()`, `values()`, `items()` and `iterator()` describe.

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use shale_lsm::{DbIterator, ReadOptions};

use crate::encoding::Encoding;
use crate::error::{InvalidArgument, to_py};
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

/// What an iterator yields for each entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Yields {
    /// `(key, value)` tuples: `items()`, `iterator()`.
    Items,
    /// Keys alone: `keys()`, `iter(db)`. Values are not copied out of the engine.
    Keys,
    /// Values alone: `values()`. Keys are not copied out of the engine.
    Values,
}

impl Yields {
    fn name(self) -> &'static str {
        match self {
            Yields::Items => "items",
            Yields::Keys => "keys",
            Yields::Values => "values",
        }
    }
}

/// A walk over the keys of a store, in the terms of `keys()`, `values()` and `items()`:
/// from `from_key` (included) to `to_key` (excluded) in the direction of the walk, as a
/// Python slice goes, or over the keys starting with `prefix`. Forward, `from_key <= key <
/// to_key`; backwards (RocksDict's `backwards=True`, whose `from_key` is where the walk
/// starts too), `from_key >= key > to_key`.
#[derive(Default)]
pub struct Range {
    pub from_key: Option<Vec<u8>>,
    pub to_key: Option<Vec<u8>>,
    pub prefix: Option<Vec<u8>>,
    pub backwards: bool,
}

/// The smallest key greater than `key` in bytewise order: `key` followed by a zero byte. Every key `k > key` either has
/// `key` as a proper prefix (so `k >= key + [0]`) or differs from it at an earlier byte that
/// is greater; so `k <= key` exactly when `k < successor(key)`, which turns an inclusive
/// upper end into the engine's exclusive upper bound, and an exclusive lower end into its
/// inclusive lower bound.
fn successor(mut key: Vec<u8>) -> Vec<u8> {
    key.push(0);
    key
}

impl Range {
    /// The range from the arguments of `keys()`, `values()` and `items()`.
    ///
    /// # Errors
    /// `InvalidArgument` for a prefix given with `from_key` or `to_key`; as
    /// [`Encoding::arg`] for arguments of the wrong type.
    pub fn from_args(
        encoding: Encoding,
        backwards: bool,
        from_key: Option<&Bound<'_, PyAny>>,
        to_key: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Range> {
        let range = Range {
            from_key: encoding.optional_arg(from_key, "from_key")?,
            to_key: encoding.optional_arg(to_key, "to_key")?,
            prefix: encoding.optional_arg(prefix, "prefix")?,
            backwards,
        };
        if range.prefix.is_some() && (range.from_key.is_some() || range.to_key.is_some()) {
            return Err(InvalidArgument::new_err("give a prefix or from_key/to_key, not both"));
        }
        Ok(range)
    }

    /// The engine's bounds for this walk: `(lower, upper)`, lower included, upper excluded.
    fn bounds(self) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
        if self.backwards {
            (self.to_key.map(successor), self.from_key.map(successor))
        } else {
            (self.from_key, self.to_key)
        }
    }

    /// Read options for this walk, as of `snapshot`.
    pub fn read_options<'a>(self, snapshot: Option<&'a shale_lsm::Snapshot>) -> ReadOptions<'a> {
        let prefix = self.prefix.clone();
        let (lower_bound, upper_bound) = self.bounds();
        ReadOptions { snapshot, lower_bound, upper_bound, prefix }
    }
}

/// Where an iterator is, used only with the GIL released (rule 1 of lib.rs).
struct Cursor {
    iter: DbIterator,
    reverse: bool,
    yields: Yields,
    /// The first step seeks; later ones move.
    positioned: bool,
    /// No entry follows.
    done: bool,
    /// An error met after entries still to be returned: raised by the next step.
    failed: Option<shale_lsm::Error>,
    fill_entries: usize,
}

/// A key and a value as read (one of them left empty where the iterator yields the other).
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
            let key = if self.yields == Yields::Values { Vec::new() } else { it.key().to_vec() };
            let value = if self.yields == Yields::Keys { Vec::new() } else { it.value().to_vec() };
            bytes += key.len() + value.len();
            out.push((key, value));
        }
        self.fill_entries = (self.fill_entries * 2).min(FILL_ENTRIES_MAX);
        Ok(out)
    }
}

/// An iterator over a store's entries, from `Db.iterator(...)`, `keys()`, `values()`,
/// `items()` or `iter(db)`. It reads as of its creation (or its snapshot) and keeps its store
/// open while it lives.
#[pyclass(frozen, module = "shale._shale", name = "Iterator")]
pub struct Iterator {
    /// Locked only with the GIL released (rule 1 of lib.rs).
    cursor: Mutex<Cursor>,
    /// Entries read ahead, handed out with the GIL held (rule 2).
    buffered: Mutex<VecDeque<Entry>>,
    yields: Yields,
    encoding: Encoding,
    /// Dropped after the cursor (fields drop in order): the store and snapshot it reads.
    _store: Arc<shale_lsm::Db>,
    _snapshot: Option<Arc<SnapshotShared>>,
}

/// How an iterator walks and what it hands out.
pub struct IterStyle {
    pub reverse: bool,
    pub yields: Yields,
    pub encoding: Encoding,
}

impl Iterator {
    pub fn new(
        py: Python<'_>,
        store: Arc<shale_lsm::Db>,
        snapshot: Option<Arc<SnapshotShared>>,
        opts: &ReadOptions,
        style: IterStyle,
    ) -> Iterator {
        let iter = py.detach(|| store.iter(opts));
        let cursor = Cursor {
            iter,
            reverse: style.reverse,
            yields: style.yields,
            positioned: false,
            done: false,
            failed: None,
            fill_entries: FILL_ENTRIES_FIRST,
        };
        Iterator {
            cursor: Mutex::new(cursor),
            buffered: Mutex::new(VecDeque::new()),
            yields: style.yields,
            encoding: style.encoding,
            _store: store,
            _snapshot: snapshot,
        }
    }

    /// An iterator over `range` of `store` (as of `snapshot`, or of now).
    pub fn over_range(
        py: Python<'_>,
        store: Arc<shale_lsm::Db>,
        snapshot: Option<Arc<SnapshotShared>>,
        range: Range,
        yields: Yields,
        encoding: Encoding,
    ) -> Iterator {
        let style = IterStyle { reverse: range.backwards, yields, encoding };
        let opts = range.read_options(snapshot.as_ref().map(|s| &s.snapshot));
        Iterator::new(py, store, snapshot.clone(), &opts, style)
    }

    /// The next buffered entry as the Python object this iterator yields.
    fn pop<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Some((k, v)) = self.buffered.lock().pop_front() else {
            return Ok(None);
        };
        let e = self.encoding;
        let ob = match self.yields {
            Yields::Items => PyTuple::new(py, [e.object(py, &k)?, e.object(py, &v)?])?.into_any(),
            Yields::Keys => e.object(py, &k)?,
            Yields::Values => e.object(py, &v)?,
        };
        Ok(Some(ob))
    }
}

#[pymethods]
impl Iterator {
    fn __iter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        if let Some(entry) = self.pop(py)? {
            return Ok(Some(entry));
        }
        let entries = py.detach(|| self.cursor.lock().fill()).map_err(to_py)?;
        self.buffered.lock().extend(entries);
        self.pop(py)
    }

    fn __repr__(&self) -> String {
        format!("<shale.Iterator of {}>", self.yields.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_send<T: Send>() {}

    #[test]
    fn the_store_s_iterator_and_handle_are_send() {
        // The iterator is Send only if every source it merges is (memtable, SST, level).
        is_send::<shale_lsm::DbIterator>();
        is_send::<std::sync::Arc<shale_lsm::Db>>();
    }

    fn bounds(range: Range) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
        range.bounds()
    }

    #[test]
    fn forward_ranges_are_the_engine_s_bounds() {
        let range = Range {
            from_key: Some(b"b".to_vec()),
            to_key: Some(b"e".to_vec()),
            ..Range::default()
        };
        assert_eq!(bounds(range), (Some(b"b".to_vec()), Some(b"e".to_vec())));
        assert_eq!(bounds(Range::default()), (None, None));
    }

    #[test]
    fn backward_ranges_include_from_key_and_exclude_to_key() {
        // Backwards from "e" to "b": "e" >= key > "b", which is "b\0" <= key < "e\0".
        let range = Range {
            from_key: Some(b"e".to_vec()),
            to_key: Some(b"b".to_vec()),
            backwards: true,
            ..Range::default()
        };
        assert_eq!(bounds(range), (Some(b"b\0".to_vec()), Some(b"e\0".to_vec())));
    }

    #[test]
    fn the_successor_is_the_smallest_greater_key() {
        let key = b"ab".to_vec();
        let next = successor(key.clone());
        for k in [&b"a"[..], b"ab", b"ab\0", b"ab\0\0", b"ab\x01", b"ac", b"b", b"aa\xff"] {
            assert_eq!(k <= key.as_slice(), k < next.as_slice(), "{k:?}");
            assert_eq!(k > key.as_slice(), k >= next.as_slice(), "{k:?}");
        }
    }
}
