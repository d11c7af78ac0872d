//! `shale.Db`: an open lsm store, with the methods of its engine (`put`, `get`, `delete`,
//! `write`, `iterator`, `snapshot`, ...) and those of a Python mapping (`db[key]`,
//! `key in db`, `keys()`, `items()`, ...), as RocksDict's `Rdict` has them.

use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::RwLock;
use pyo3::exceptions::{PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyList;
use shale_lsm::{Options, ReadOptions, WriteOptions};

use crate::batch::WriteBatch;
use crate::encoding::Encoding;
use crate::error::{Closed, InvalidArgument, to_py};
use crate::iterator::{IterStyle, Iterator, Range, Yields};
use crate::read::{get_at, multi_get_at};
use crate::snapshot::{Snapshot, SnapshotShared};

/// An open lsm store. Keys and values are bytes, or `str` with `encoding="utf-8"`; writes
/// are atomic and ordered.
#[pyclass(frozen, module = "shale._shale", name = "Db")]
pub struct Db {
    /// `None` once closed. Read for a moment per call to clone the `Arc` (rule 2 of
    /// lib.rs): the call then runs without the lock and without the GIL.
    store: RwLock<Option<Arc<shale_lsm::Db>>>,
    /// Writes without a `sync` argument sync when this is true.
    sync: bool,
    /// The Python type of keys and values.
    encoding: Encoding,
    path: PathBuf,
}

/// How `Db(...)` and `Db.open(...)` open a store.
struct OpenArgs {
    path: PathBuf,
    create_if_missing: bool,
    write_buffer_size: Option<usize>,
    block_cache_size: Option<usize>,
    sync: bool,
    encoding: Option<String>,
}

impl Db {
    /// The open store.
    ///
    /// # Errors
    /// `Closed` after `close()`.
    pub fn store(&self) -> PyResult<Arc<shale_lsm::Db>> {
        self.store
            .read()
            .clone()
            .ok_or_else(|| Closed::new_err(format!("the Db at {} is closed", self.path.display())))
    }

    fn open_with(py: Python<'_>, args: OpenArgs) -> PyResult<Db> {
        let encoding = Encoding::from_arg(py, args.encoding.as_deref())?;
        let mut opts = Options::default();
        if let Some(bytes) = args.write_buffer_size {
            opts.write_buffer_bytes = bytes;
        }
        if let Some(bytes) = args.block_cache_size {
            opts.block_cache_bytes = bytes;
        }
        opts.volume.create_if_blank = args.create_if_missing;
        if args.path.as_os_str().is_empty() {
            return Err(InvalidArgument::new_err("the path is empty"));
        }
        if !args.create_if_missing && !args.path.exists() {
            return Err(InvalidArgument::new_err(format!(
                "{} does not exist and create_if_missing is False",
                args.path.display()
            )));
        }
        let path = args.path.clone();
        let store = py.detach(move || shale_lsm::Db::open(&path, opts)).map_err(to_py)?;
        Ok(Db {
            store: RwLock::new(Some(Arc::new(store))),
            sync: args.sync,
            encoding,
            path: args.path,
        })
    }

    fn write_options(&self, sync: Option<bool>) -> WriteOptions {
        WriteOptions { sync: sync.unwrap_or(self.sync) }
    }

    /// Writes `batch` (rule 1 of lib.rs: its lock is taken with the GIL released).
    pub fn write_batch_to(
        &self,
        py: Python<'_>,
        batch: &Bound<'_, WriteBatch>,
        sync: Option<bool>,
    ) -> PyResult<()> {
        let store = self.store()?;
        let opts = self.write_options(sync);
        let batch = batch.get();
        py.detach(|| store.write(&batch.batch.lock(), &opts)).map_err(to_py)
    }

    /// Writes a batch of one operation, made by `add`.
    fn write_one(
        &self,
        py: Python<'_>,
        sync: Option<bool>,
        add: impl FnOnce(&mut shale_lsm::WriteBatch),
    ) -> PyResult<()> {
        let store = self.store()?;
        let opts = self.write_options(sync);
        let mut batch = shale_lsm::WriteBatch::new();
        add(&mut batch);
        py.detach(|| store.write(&batch, &opts)).map_err(to_py)
    }

    /// An iterator over `range`, as of `snapshot` or of now.
    fn walk(
        &self,
        py: Python<'_>,
        range: Range,
        snapshot: Option<&Bound<'_, Snapshot>>,
        yields: Yields,
    ) -> PyResult<Iterator> {
        let store = self.store()?;
        let snapshot = snapshot_of(&store, snapshot)?;
        Ok(Iterator::over_range(py, store, snapshot, range, yields, self.encoding))
    }
}

/// The shared state of `snapshot`, checked to belong to `store`.
fn snapshot_of(
    store: &Arc<shale_lsm::Db>,
    snapshot: Option<&Bound<'_, Snapshot>>,
) -> PyResult<Option<Arc<SnapshotShared>>> {
    snapshot.map(|s| s.get().shared_for(store)).transpose()
}

#[pymethods]
impl Db {
    /// Opens the store at `path` (a directory, created if missing, or a volume file or block
    /// device), creating a new one where nothing is stored, recovering it after a crash.
    /// With `encoding="utf-8"`, keys and values are `str` in and out instead of bytes.
    #[new]
    #[pyo3(signature = (path, *, create_if_missing=true, write_buffer_size=None, block_cache_size=None, sync=false, encoding=None))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        create_if_missing: bool,
        write_buffer_size: Option<usize>,
        block_cache_size: Option<usize>,
        sync: bool,
        encoding: Option<String>,
    ) -> PyResult<Db> {
        let args = OpenArgs {
            path,
            create_if_missing,
            write_buffer_size,
            block_cache_size,
            sync,
            encoding,
        };
        Db::open_with(py, args)
    }

    /// The same as `Db(path, ...)`.
    #[staticmethod]
    #[pyo3(signature = (path, *, create_if_missing=true, write_buffer_size=None, block_cache_size=None, sync=false, encoding=None))]
    fn open(
        py: Python<'_>,
        path: PathBuf,
        create_if_missing: bool,
        write_buffer_size: Option<usize>,
        block_cache_size: Option<usize>,
        sync: bool,
        encoding: Option<String>,
    ) -> PyResult<Db> {
        Db::new(py, path, create_if_missing, write_buffer_size, block_cache_size, sync, encoding)
    }

    /// Sets `key` to `value`.
    #[pyo3(signature = (key, value, sync=None))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        sync: Option<bool>,
    ) -> PyResult<()> {
        let key = self.encoding.arg(key, "key")?;
        let value = self.encoding.arg(value, "value")?;
        self.write_one(py, sync, |b| b.put(&key, &value))
    }

    /// The value of `key` (as of `snapshot`, when given), or `default` where it has none.
    /// With a list of keys, the list of their values (as `multi_get`, `default` for each
    /// missing one).
    #[pyo3(signature = (key, default=None, snapshot=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
        snapshot: Option<&Bound<'py, Snapshot>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let default = default.unwrap_or_else(|| py.None().into_bound(py));
        if default.is_instance_of::<Snapshot>() {
            // `get(key, snap)` read through the snapshot before `default` came second.
            return Err(PyTypeError::new_err(
                "get's second argument is the default for a missing key: pass a snapshot by \
                 name, get(key, snapshot=snap)",
            ));
        }
        let store = self.store()?;
        let snapshot = snapshot_of(&store, snapshot)?;
        let snapshot = snapshot.as_ref().map(|s| &s.snapshot);
        if key.is_instance_of::<PyList>() {
            let values = multi_get_at(py, &store, self.encoding, key, &default, snapshot)?;
            return Ok(values.into_any());
        }
        let key = self.encoding.arg(key, "key")?;
        match get_at(py, &store, &key, snapshot)? {
            Some(value) => self.encoding.object(py, &value),
            None => Ok(default),
        }
    }

    /// The values of `keys` in their order, `None` for each key without one, read at one
    /// snapshot (`snapshot`, or one taken by the call) with the engine's multi-get.
    #[pyo3(signature = (keys, snapshot=None))]
    fn multi_get<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
        snapshot: Option<&Bound<'py, Snapshot>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let store = self.store()?;
        let snapshot = snapshot_of(&store, snapshot)?;
        let none = py.None().into_bound(py);
        multi_get_at(py, &store, self.encoding, keys, &none, snapshot.as_ref().map(|s| &s.snapshot))
    }

    /// Deletes `key` (nothing happens where it has no value).
    #[pyo3(signature = (key, sync=None))]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, sync: Option<bool>) -> PyResult<()> {
        let key = self.encoding.arg(key, "key")?;
        self.write_one(py, sync, |b| b.delete(&key))
    }

    /// Deletes every key `k` with `begin <= k < end` as one write (the engine's range
    /// tombstone, whatever the range holds). An empty range (`begin >= end`) raises
    /// `InvalidArgument`, as the engine refuses it.
    #[pyo3(signature = (begin, end, sync=None))]
    fn delete_range(
        &self,
        py: Python<'_>,
        begin: &Bound<'_, PyAny>,
        end: &Bound<'_, PyAny>,
        sync: Option<bool>,
    ) -> PyResult<()> {
        let begin = self.encoding.arg(begin, "begin")?;
        let end = self.encoding.arg(end, "end")?;
        self.write_one(py, sync, |b| b.delete_range(&begin, &end))
    }

    /// `db[key]`: the value of `key`, or `KeyError`. With a list of keys, the list of their
    /// values, `None` for each missing one (RocksDict's `db[[k1, k2]]`).
    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let store = self.store()?;
        if key.is_instance_of::<PyList>() {
            let none = py.None().into_bound(py);
            return Ok(multi_get_at(py, &store, self.encoding, key, &none, None)?.into_any());
        }
        let encoded = self.encoding.arg(key, "key")?;
        match get_at(py, &store, &encoded, None)? {
            Some(value) => self.encoding.object(py, &value),
            None => Err(PyKeyError::new_err((key.clone().unbind(),))),
        }
    }

    /// `db[key] = value`: `put(key, value)`.
    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.put(py, key, value, None)
    }

    /// `del db[key]`: `delete(key)`. A key without a value raises nothing, as in RocksDict
    /// and unlike a dict: the engine writes a tombstone without reading first, and a read
    /// before it could not say whether another thread's write came between.
    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.delete(py, key, None)
    }

    /// `key in db`: whether `key` has a value.
    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let store = self.store()?;
        let key = self.encoding.arg(key, "key")?;
        Ok(get_at(py, &store, &key, None)?.is_some())
    }

    /// `iter(db)`, `for key in db`: the keys in order, as `keys()`.
    fn __iter__(&self, py: Python<'_>) -> PyResult<Iterator> {
        self.walk(py, Range::default(), None, Yields::Keys)
    }

    /// The keys in key order, lazily: from `from_key` (included) to `to_key` (excluded) in
    /// the walk's direction (descending with `backwards`), or those starting with `prefix`,
    /// as of `snapshot` or of the call.
    #[pyo3(signature = (backwards=false, from_key=None, to_key=None, *, prefix=None, snapshot=None))]
    fn keys(
        &self,
        py: Python<'_>,
        backwards: bool,
        from_key: Option<&Bound<'_, PyAny>>,
        to_key: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        snapshot: Option<&Bound<'_, Snapshot>>,
    ) -> PyResult<Iterator> {
        let range = Range::from_args(self.encoding, backwards, from_key, to_key, prefix)?;
        self.walk(py, range, snapshot, Yields::Keys)
    }

    /// The values in key order, lazily, over the keys `keys()` would give.
    #[pyo3(signature = (backwards=false, from_key=None, to_key=None, *, prefix=None, snapshot=None))]
    fn values(
        &self,
        py: Python<'_>,
        backwards: bool,
        from_key: Option<&Bound<'_, PyAny>>,
        to_key: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        snapshot: Option<&Bound<'_, Snapshot>>,
    ) -> PyResult<Iterator> {
        let range = Range::from_args(self.encoding, backwards, from_key, to_key, prefix)?;
        self.walk(py, range, snapshot, Yields::Values)
    }

    /// `(key, value)` pairs in key order, lazily, over the keys `keys()` would give.
    #[pyo3(signature = (backwards=false, from_key=None, to_key=None, *, prefix=None, snapshot=None))]
    fn items(
        &self,
        py: Python<'_>,
        backwards: bool,
        from_key: Option<&Bound<'_, PyAny>>,
        to_key: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        snapshot: Option<&Bound<'_, Snapshot>>,
    ) -> PyResult<Iterator> {
        let range = Range::from_args(self.encoding, backwards, from_key, to_key, prefix)?;
        self.walk(py, range, snapshot, Yields::Items)
    }

    /// A batch for this store; as a context manager it writes itself on leaving the block.
    #[pyo3(signature = (sync=None))]
    fn write_batch(slf: &Bound<'_, Self>, sync: Option<bool>) -> PyResult<WriteBatch> {
        let db = slf.get();
        db.store()?;
        Ok(WriteBatch::for_db(slf.clone().unbind(), sync, db.encoding))
    }

    /// Applies `batch` atomically.
    #[pyo3(name = "write", signature = (batch, sync=None))]
    fn py_write(
        &self,
        py: Python<'_>,
        batch: &Bound<'_, WriteBatch>,
        sync: Option<bool>,
    ) -> PyResult<()> {
        self.write_batch_to(py, batch, sync)
    }

    /// An iterator of `(key, value)` pairs in key order (descending with `reverse`), within
    /// `prefix` or the bounds `lower <= key < upper`, as of `snapshot` or of its creation.
    #[pyo3(signature = (prefix=None, lower=None, upper=None, reverse=false, snapshot=None))]
    fn iterator(
        &self,
        py: Python<'_>,
        prefix: Option<&Bound<'_, PyAny>>,
        lower: Option<&Bound<'_, PyAny>>,
        upper: Option<&Bound<'_, PyAny>>,
        reverse: bool,
        snapshot: Option<&Bound<'_, Snapshot>>,
    ) -> PyResult<Iterator> {
        let store = self.store()?;
        let prefix = self.encoding.optional_arg(prefix, "prefix")?;
        if prefix.is_some()
            && (lower.is_some_and(|b| !b.is_none()) || upper.is_some_and(|b| !b.is_none()))
        {
            return Err(InvalidArgument::new_err("give a prefix or bounds, not both"));
        }
        let snapshot = snapshot_of(&store, snapshot)?;
        let opts = ReadOptions {
            snapshot: snapshot.as_ref().map(|s| &s.snapshot),
            lower_bound: self.encoding.optional_arg(lower, "lower")?,
            upper_bound: self.encoding.optional_arg(upper, "upper")?,
            prefix,
        };
        let style = IterStyle { reverse, yields: Yields::Items, encoding: self.encoding };
        Ok(Iterator::new(py, store, snapshot.clone(), &opts, style))
    }

    /// A snapshot of the current state, for `get(key, snapshot=...)`,
    /// `items(snapshot=...)` and the rest, or read through itself (`snap[key]`).
    fn snapshot(&self, py: Python<'_>) -> PyResult<Snapshot> {
        let store = self.store()?;
        let snapshot = py.detach(|| store.snapshot());
        Ok(Snapshot::new(SnapshotShared { db: store, snapshot }, self.encoding))
    }

    /// Makes a checkpoint of the store at `path`: a new store, in a new directory (which
    /// must not exist, or be empty), holding the state of this store at one snapshot, while
    /// other threads go on writing. A logical copy: the data is read and written again. It
    /// is built under a temporary name beside `path` and renamed to `path` once durable.
    /// Returns the entries copied.
    fn checkpoint(&self, py: Python<'_>, path: PathBuf) -> PyResult<u64> {
        let store = self.store()?;
        py.detach(move || store.checkpoint(&path)).map_err(to_py)
    }

    /// Flushes the memtables to SSTs and waits for it.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let store = self.store()?;
        py.detach(|| store.flush()).map_err(to_py)
    }

    /// Flushes memtables, stops background work and closes the store. Snapshots and
    /// iterators still alive keep it open until they go. Calling it again does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let Some(store) = self.store.write().take() else {
            return Ok(());
        };
        py.detach(move || match Arc::try_unwrap(store) {
            Ok(store) => store.close(),
            // Snapshots, iterators or another thread's call hold it: the last drops it,
            // which syncs the WAL as a close does.
            Err(_shared) => Ok(()),
        })
        .map_err(to_py)
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.store.read().is_none()
    }

    /// The path the store was opened at.
    #[getter]
    fn path(&self) -> String {
        self.path.to_string_lossy().into_owned()
    }

    /// `"utf-8"` for a `Db` of `str` keys and values, `None` for bytes.
    #[getter]
    fn encoding(&self) -> Option<&'static str> {
        self.encoding.name()
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: &Bound<'_, PyAny>,
        _exc: &Bound<'_, PyAny>,
        _traceback: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let state = if self.closed() { "closed" } else { "open" };
        match self.encoding.name() {
            Some(name) => format!("<shale.Db {} {state} encoding={name}>", self.path.display()),
            None => format!("<shale.Db {} {state}>", self.path.display()),
        }
    }
}
