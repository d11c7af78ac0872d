//! `shale.WriteBatch`: puts and deletes applied atomically by `Db.write`.

use parking_lot::Mutex;
use pyo3::prelude::*;

use crate::db::Db;
use crate::encoding::Encoding;

/// Puts, deletes and range deletes applied atomically, in order, by `Db.write(batch)`. One
/// from `Db.write_batch()` takes keys and values of its store's encoding, and is also a
/// context manager that writes itself on leaving its `with` block without an exception (and
/// is cleared, unwritten, on an exception).
#[pyclass(frozen, module = "shale._shale", name = "WriteBatch")]
pub struct WriteBatch {
    /// Locked while the GIL is held only for a moment (rule 2 of lib.rs); `Db.write` locks it
    /// after releasing the GIL (rule 1).
    pub batch: Mutex<shale_lsm::WriteBatch>,
    /// The store a `with` block writes to.
    db: Option<Py<Db>>,
    sync: Option<bool>,
    /// The Python type of keys and values.
    encoding: Encoding,
}

impl WriteBatch {
    pub fn for_db(db: Py<Db>, sync: Option<bool>, encoding: Encoding) -> WriteBatch {
        let batch = Mutex::new(shale_lsm::WriteBatch::new());
        WriteBatch { batch, db: Some(db), sync, encoding }
    }
}

#[pymethods]
impl WriteBatch {
    /// An empty batch, for `Db.write`, of bytes keys and values (`str` ones with
    /// `encoding="utf-8"`).
    #[new]
    #[pyo3(signature = (*, encoding=None))]
    fn new(py: Python<'_>, encoding: Option<&str>) -> PyResult<WriteBatch> {
        let encoding = Encoding::from_arg(py, encoding)?;
        let batch = Mutex::new(shale_lsm::WriteBatch::new());
        Ok(WriteBatch { batch, db: None, sync: None, encoding })
    }

    /// Sets `key` to `value` when the batch is written.
    fn put(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = self.encoding.arg(key, "key")?;
        let value = self.encoding.arg(value, "value")?;
        self.batch.lock().put(&key, &value);
        Ok(())
    }

    /// Deletes `key` when the batch is written.
    fn delete(&self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = self.encoding.arg(key, "key")?;
        self.batch.lock().delete(&key);
        Ok(())
    }

    /// Deletes every key `k` with `begin <= k < end` when the batch is written, in the order
    /// of the batch's operations (a put after it survives it). `Db.write` refuses a batch
    /// holding an empty range (`begin >= end`) with `InvalidArgument`, and applies none of it.
    fn delete_range(&self, begin: &Bound<'_, PyAny>, end: &Bound<'_, PyAny>) -> PyResult<()> {
        let begin = self.encoding.arg(begin, "begin")?;
        let end = self.encoding.arg(end, "end")?;
        self.batch.lock().delete_range(&begin, &end);
        Ok(())
    }

    /// `batch[key] = value`: `put(key, value)`.
    fn __setitem__(&self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.put(key, value)
    }

    /// `del batch[key]`: `delete(key)`.
    fn __delitem__(&self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.delete(key)
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
