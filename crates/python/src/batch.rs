//! `shale.WriteBatch`: puts and deletes applied atomically by `Db.write`.

use parking_lot::Mutex;
use pyo3::prelude::*;

use crate::bytes_arg::bytes_arg;
use crate::db::Db;

/// Puts and deletes applied atomically, in order, by `Db.write(batch)`. One from
/// `Db.write_batch()` is also a context manager that writes itself on leaving its `with`
/// block without an exception (and is cleared, unwritten, on an exception).
#[pyclass(frozen, module = "shale._shale", name = "WriteBatch")]
pub struct WriteBatch {
    /// Locked while the GIL is held only for a moment (rule 2 of lib.rs); `Db.write` locks it
    /// after releasing the GIL (rule 1).
    pub batch: Mutex<shale_lsm::WriteBatch>,
    /// The store a `with` block writes to.
    db: Option<Py<Db>>,
    sync: Option<bool>,
}

impl WriteBatch {
    pub fn for_db(db: Py<Db>, sync: Option<bool>) -> WriteBatch {
        WriteBatch { batch: Mutex::new(shale_lsm::WriteBatch::new()), db: Some(db), sync }
    }
}

#[pymethods]
impl WriteBatch {
    /// An empty batch, for `Db.write`.
    #[new]
    fn new() -> WriteBatch {
        WriteBatch { batch: Mutex::new(shale_lsm::WriteBatch::new()), db: None, sync: None }
    }

    /// Sets `key` to `value` when the batch is written.
    fn put(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let (key, value) = (bytes_arg(key, "key")?, bytes_arg(value, "value")?);
        self.batch.lock().put(&key, &value);
        Ok(())
    }

    /// Deletes `key` when the batch is written.
    fn delete(&self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = bytes_arg(key, "key")?;
        self.batch.lock().delete(&key);
        Ok(())
    }

    /// Drops every operation.
    fn clear(&self) {
        *self.batch.lock() = shale_lsm::WriteBatch::new();
    }

    fn __len__(&self) -> usize {
        self.batch.lock().len()
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// Writes the batch to its store when the block ended without an exception; clears it
    /// either way.
    fn __exit__(
        slf: &Bound<'_, Self>,
        exc_type: &Bound<'_, PyAny>,
        _exc: &Bound<'_, PyAny>,
        _traceback: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let this = slf.get();
        if exc_type.is_none() {
            let Some(db) = &this.db else {
                return Err(crate::error::InvalidArgument::new_err(
                    "a WriteBatch() made alone has no store to write to: use Db.write(batch), \
                     or Db.write_batch() for a with block",
                ));
            };
            db.get().write_batch_to(slf.py(), slf, this.sync)?;
        }
        this.clear();
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("<shale.WriteBatch of {} operations>", self.batch.lock().len())
    }
}
