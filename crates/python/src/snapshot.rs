//! `shale.Snapshot`: a consistent view of a store as of its creation.

use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::bytes_arg::bytes_arg;
use crate::db::get_at;
use crate::error::{Closed, InvalidArgument};

/// A snapshot and the store it belongs to, shared with the iterators reading through it.
pub struct SnapshotShared {
    pub db: Arc<shale_lsm::Db>,
    pub snapshot: shale_lsm::Snapshot,
}

/// A consistent view of the store as of `Db.snapshot()`: reads through it see exactly the
/// writes before it. Release it with `release()` or by leaving its `with` block; until then
/// compaction keeps every version it reads.
#[pyclass(frozen, module = "shale._shale", name = "Snapshot")]
pub struct Snapshot {
    /// `None` once released.
    shared: Mutex<Option<Arc<SnapshotShared>>>,
}

impl Snapshot {
    pub fn new(shared: SnapshotShared) -> Snapshot {
        Snapshot { shared: Mutex::new(Some(Arc::new(shared))) }
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
    /// The value of `key` as of the snapshot, or `None`.
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let shared = self.shared()?;
        let key = bytes_arg(key, "key")?;
        get_at(py, &shared.db, &key, Some(&shared.snapshot))
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
