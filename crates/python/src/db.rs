//! `shale.Db`: an open lsm store.

use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::RwLock;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use shale_lsm::{Options, ReadOptions, WriteOptions};

use crate::batch::WriteBatch;
use crate::bytes_arg::{bytes_arg, optional_bytes_arg};
use crate::error::{Closed, InvalidArgument, to_py};
use crate::iterator::Iterator;
use crate::snapshot::{Snapshot, SnapshotShared};

/// An open lsm store. Keys and values are bytes; writes are atomic and ordered.
#[pyclass(frozen, module = "shale._shale", name = "Db")]
pub struct Db {
    /// `None` once closed. Read for a moment per call to clone the `Arc` (rule 2 of
    /// lib.rs): the call then runs without the lock and without the GIL.
    store: RwLock<Option<Arc<shale_lsm::Db>>>,
    /// Writes without a `sync` argument sync when this is true.
    sync: bool,
    path: PathBuf,
}

/// How `Db(...)` and `Db.open(...)` open a store.
struct OpenArgs {
    path: PathBuf,
    create_if_missing: bool,
    write_buffer_size: Option<usize>,
    block_cache_size: Option<usize>,
    sync: bool,
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
        Ok(Db { store: RwLock::new(Some(Arc::new(store))), sync: args.sync, path: args.path })
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
}

/// The value of `key` in `store` (as of `snapshot`, when given), read with the GIL released.
pub fn get_at<'py>(
    py: Python<'py>,
    store: &shale_lsm::Db,
    key: &[u8],
    snapshot: Option<&shale_lsm::Snapshot>,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let opts = ReadOptions { snapshot, ..ReadOptions::default() };
    let value = py.detach(|| store.get_opt(key, &opts)).map_err(to_py)?;
    Ok(value.map(|v| PyBytes::new(py, &v)))
}

#[pymethods]
impl Db {
    /// Opens the store at `path` (a directory, created if missing, or a volume file or block
    /// device), creating a new one where nothing is stored, recovering it after a crash.
    #[new]
    #[pyo3(signature = (path, *, create_if_missing=true, write_buffer_size=None, block_cache_size=None, sync=false))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        create_if_missing: bool,
        write_buffer_size: Option<usize>,
        block_cache_size: Option<usize>,
        sync: bool,
    ) -> PyResult<Db> {
        let args = OpenArgs { path, create_if_missing, write_buffer_size, block_cache_size, sync };
        Db::open_with(py, args)
    }

    /// The same as `Db(path, ...)`.
    #[staticmethod]
    #[pyo3(signature = (path, *, create_if_missing=true, write_buffer_size=None, block_cache_size=None, sync=false))]
    fn open(
        py: Python<'_>,
        path: PathBuf,
        create_if_missing: bool,
        write_buffer_size: Option<usize>,
        block_cache_size: Option<usize>,
        sync: bool,
    ) -> PyResult<Db> {
        let args = OpenArgs { path, create_if_missing, write_buffer_size, block_cache_size, sync };
        Db::open_with(py, args)
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
        let store = self.store()?;
        let (key, value) = (bytes_arg(key, "key")?, bytes_arg(value, "value")?);
        let opts = self.write_options(sync);
        py.detach(|| {
            let mut batch = shale_lsm::WriteBatch::new();
            batch.put(&key, &value);
            store.write(&batch, &opts)
        })
        .map_err(to_py)
    }

    /// The value of `key` (as of `snapshot`, when given), or `None`.
    #[pyo3(signature = (key, snapshot=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        snapshot: Option<&Bound<'py, Snapshot>>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let store = self.store()?;
        let key = bytes_arg(key, "key")?;
        let shared = match snapshot {
            Some(s) => Some(s.get().shared_for(&store)?),
            None => None,
        };
        get_at(py, &store, &key, shared.as_ref().map(|s| &s.snapshot))
    }

    /// Deletes `key` (nothing happens where it has no value).
    #[pyo3(signature = (key, sync=None))]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, sync: Option<bool>) -> PyResult<()> {
        let store = self.store()?;
        let key = bytes_arg(key, "key")?;
        let opts = self.write_options(sync);
        py.detach(|| {
            let mut batch = shale_lsm::WriteBatch::new();
            batch.delete(&key);
            store.write(&batch, &opts)
        })
        .map_err(to_py)
    }

    /// A batch for this store; as a context manager it writes itself on leaving the block.
    #[pyo3(signature = (sync=None))]
    fn write_batch(slf: &Bound<'_, Self>, sync: Option<bool>) -> PyResult<WriteBatch> {
        slf.get().store()?;
        Ok(WriteBatch::for_db(slf.clone().unbind(), sync))
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
        let prefix = optional_bytes_arg(prefix, "prefix")?;
        if prefix.is_some()
            && (lower.is_some_and(|b| !b.is_none()) || upper.is_some_and(|b| !b.is_none()))
        {
            return Err(InvalidArgument::new_err("give a prefix or bounds, not both"));
        }
        let snapshot = match snapshot {
            Some(s) => Some(s.get().shared_for(&store)?),
            None => None,
        };
        let opts = ReadOptions {
            snapshot: snapshot.as_ref().map(|s| &s.snapshot),
            lower_bound: optional_bytes_arg(lower, "lower")?,
            upper_bound: optional_bytes_arg(upper, "upper")?,
            prefix,
        };
        Ok(Iterator::new(py, store, snapshot.clone(), &opts, reverse))
    }

    /// A snapshot of the current state, for `get(key, snapshot=...)` and
    /// `iterator(snapshot=...)`.
    fn snapshot(&self, py: Python<'_>) -> PyResult<Snapshot> {
        let store = self.store()?;
        let snapshot = py.detach(|| store.snapshot());
        Ok(Snapshot::new(SnapshotShared { db: store, snapshot }))
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
        format!("<shale.Db {} {state}>", self.path.display())
    }
}
