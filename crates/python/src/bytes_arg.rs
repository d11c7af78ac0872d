//! Byte-string arguments: `bytes`, `bytearray` and `memoryview` in, `bytes` out.

use std::borrow::Cow;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyMemoryView, PyString};

/// The bytes of `ob`, named `what` in errors. A `bytes` object is borrowed (it is immutable,
/// and the caller's reference keeps it alive while the GIL is released); a `bytearray` or
/// `memoryview` is copied, because another thread may change it while the GIL is released.
///
/// # Errors
/// `TypeError` for any other type (`str` included: text has no single byte form, unless the
/// `Db` names one, see `encoding.rs`).
pub fn bytes_arg<'a>(ob: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Cow<'a, [u8]>> {
    if let Ok(b) = ob.cast::<PyBytes>() {
        return Ok(Cow::Borrowed(b.as_bytes()));
    }
    if let Ok(b) = ob.cast::<PyByteArray>() {
        return Ok(Cow::Owned(b.to_vec()));
    }
    if ob.is_instance_of::<PyMemoryView>() {
        let copy = ob.call_method0("tobytes")?;
        return Ok(Cow::Owned(copy.cast::<PyBytes>()?.as_bytes().to_vec()));
    }
    let hint = if ob.is_instance_of::<PyString>() {
        " (open the Db with encoding=\"utf-8\" for str keys and values)"
    } else {
        ""
    };
    Err(PyTypeError::new_err(format!(
        "{what} must be bytes, bytearray or memoryview, not {}{hint}",
        ob.get_type().name()?
    )))
}
