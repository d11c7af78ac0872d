//! `shale.Snapshot`: a consistent view of a store as of its creation.

use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::encoding::Encoding;
use crate::error::{Closed, InvalidArgument};
use crate::iterator::{Iterator, Range, Yields};
use crate::read::{get_at, multi_get_at};

/// A snapshot and the store it belongs to, shared with the iterators reading through it.
pub struct SnapshotShared {
    pub db: Arc<shale_lsm::Db>,
    pub snapshot: shale_lsm::Snapshot,
}

/// A consistent view of the store as of `Db.snapshot()`: reads through it see exactly the
/// writes before it. It reads as a read-only mapping (`snap[key]`, `key in snap`,
/// `snap.items()`), with the keys and values of its `Db`'s encoding. Release it with
/// `release()` or by leaving its `with` block; until then compaction keeps every version it
/// reads.
#[pyclass(frozen, module = "shale._shale", name = "Snapshot")]
pub struct Snapshot {
    /// `None` once released.
    shared: Mutex<Option<Arc<SnapshotShared>>>,
    /// The Python type of keys and values, its `Db`'s.
    encoding: Encoding,
}

impl Snapshot {
    pub fn new(shared: SnapshotShared, encoding: Encoding) -> Snapshot {
        Snapshot { shared: Mutex::new(Some(Arc::new(shared))), encoding }
    }

    /// An iterator over `range` as of the snapshot.
    fn walk(&self, py: Python<'_>, range: Range, yields: Yields) -> PyResult<Iterator> {
        let shared = self.shared()?;
        let store = shared.db.clone();
        Ok(Iterator::over_range(py, store, Some(shared), range, yields, self.encoding))
    }

    /// The snapshot, checked to belong to `db`.
    ///
    /// # Errors
    /// `Closed` once released; `InvalidArgument` for a snapshot of another store.
    pub fn shared_for(&self, db: &Arc<shale_lsm::Db>) -> PyResult<Arc<SnapshotShared>> {
        let shared = self.shared()?;
        if !Arc::ptr_eq(&shared.db, db) {
            return Err(InvalidArgument::new_err("the snapshot belongs to another store"));
        }
        Ok(shared)
    }

    fn shared(&self) -> PyResult<Arc<SnapshotShared>> {
        self.shared.lock().clone().ok_or_else(|| Closed::new_err("the snapshot is released"))
    }
}

#[pymethods]
impl Snapshot {
    /// The value of `key` as of the snapshot, or `default` where it had none. With a list of
    /// keys, the list of their values (`default` for each missing one).
    #[pyo3(signature = (key, default=None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let default = default.unwrap_or_else(|| py.None().into_bound(py));
        let shared = self.shared()?;
        let (store, snapshot) = (&shared.db, Some(&shared.snapshot));
        if key.is_instance_of::<PyList>() {
            let values = multi_get_at(py, store, self.encoding, key, &default, snapshot)?;
            return Ok(values.into_any());
        }
        let encoded = self.encoding.arg(key, "key")?;
        match get_at(py, store, &encoded, snapshot)? {
            Some(value) => self.encoding.object(py, &value),
            None => Ok(default),
        }
    }

    /// The values of `keys` as of the snapshot, in their order, `None` for each missing one.
    fn multi_get<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let shared = self.shared()?;
        let none = py.None().into_bound(py);
        multi_get_at(py, &shared.db, self.encoding, keys, &none, Some(&shared.snapshot))
    }

    /// `snap[key]`: the value of `key` as of the snapshot, or `KeyError`. With a list of
    /// keys, the list of their values, `None` for each missing one.
    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if key.is_instance_of::<PyList>() {
            return Ok(self.multi_get(py, key)?.into_any());
        }
        let shared = self.shared()?;
        let encoded = self.encoding.arg(key, "key")?;
        match get_at(py, &shared.db, &encoded, Some(&shared.snapshot))? {
            Some(value) => self.encoding.object(py, &value),
            None => Err(PyKeyError::new_err((key.clone().unbind(),))),
        }
    }

    /// `key in snap`: whether `key` had a value as of the snapshot.
    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let shared = self.shared()?;
        let key = self.encoding.arg(key, "key")?;
        Ok(get_at(py, &shared.db, &key, Some(&shared.snapshot))?.is_some())
    }

    /// `iter(snap)`: the keys as of the snapshot, as `keys()`.
    fn __iter__(&self, py: Python<'_>) -> PyResult<Iterator> {
        self.walk(py, Range::default(), Yields::Keys)
    }

    /// The keys as of the snapshot, as `Db.keys(...)` gives them.
    #[pyo3(signature = (backwards=false, from_key=None, to_key=None, *, prefix=None))]
    fn keys(
        &self,
        py: Python<'_>,
        backwards: bool,
        from_key: Option<&Bound<'_, PyAny>>,
        to_key: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Iterator> {
        let range = Range::from_args(self.encoding, backwards, from_key, to_key, prefix)?;
        self.walk(py, range, Yields::Keys)
    }

    /// The values as of the snapshot, as `Db.values(...)` gives them.
    #[pyo3(signature = (backwards=false, from_key=None, to_key=None, *, prefix=None))]
    fn values(
        &self,
        py: Python<'_>,
        backwards: bool,
        from_key: Option<&Bound<'_, PyAny>>,
        to_key: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Iterator> {
        let range = Range::from_args(self.encoding, backwards, from_key, to_key, prefix)?;
        self.walk(py, range, Yields::Values)
    }

    /// `(key, value)` pairs as of the snapshot, as `Db.items(...)` gives them.
    #[pyo3(signature = (backwards=false, from_key=None, to_key=None, *, prefix=None))]
    fn items(
        &self,
        py: Python<'_>,
        backwards: bool,
        from_key: Option<&Bound<'_, PyAny>>,
        to_key: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Iterator> {
        let range = Range::from_args(self.encoding, backwards, from_key, to_key, prefix)?;
        self.walk(py, range, Yields::Items)
    }

    /// The sequence number the snapshot reads at.
    #[getter]
    fn seq(&self) -> PyResult<u64> {
        Ok(self.shared()?.snapshot.seq())
    }

    /// Whether `release()` was called.
    #[getter]
    fn released(&self) -> bool {
        self.shared.lock().is_none()
    }

    /// Releases the snapshot (iterators reading through it keep it until they go). Calling it
    /// again does nothing.
    fn release(&self, py: Python<'_>) {
        let shared = self.shared.lock().take();
        // The last release takes the store's state lock: not while holding the GIL.
        py.detach(move || drop(shared));
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
    ) -> bool {
        self.release(py);
        false
    }

    fn __repr__(&self) -> String {
        match &*self.shared.lock() {
            Some(s) => format!("<shale.Snapshot seq={}>", s.snapshot.seq()),
            None => "<shale.Snapshot released>".to_string(),
        }
    }
}
