//! Point reads shared by `Db` and `Snapshot`: one key (`get`, `db[key]`, `key in db`) and
//! many keys at one snapshot (`multi_get`, `db[[k1, k2]]`), each read with the GIL released.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyMemoryView, PyString};
use shale_lsm::ReadOptions;

use crate::encoding::Encoding;
use crate::error::to_py;

/// The value of `key` in `store` (as of `snapshot`, when given).
///
/// # Errors
/// The engine's, as `shale.Error`s.
pub fn get_at(
    py: Python<'_>,
    store: &shale_lsm::Db,
    key: &[u8],
    snapshot: Option<&shale_lsm::Snapshot>,
) -> PyResult<Option<Vec<u8>>> {
    let opts = ReadOptions { snapshot, ..ReadOptions::default() };
    py.detach(|| store.get_opt(key, &opts)).map_err(to_py)
}

/// The values of the keys `keys` (any iterable of keys but a single key) in their order, as
/// one engine `multi_get` at one snapshot (`snapshot`, or one taken by the call), with
/// `default` where a key has no value.
///
/// # Errors
/// `TypeError` when `keys` is one key (a `str` or bytes-like object, whose items would
/// otherwise pass as keys) or not iterable, or when a key is of the wrong type; the engine's
/// errors as `shale.Error`s.
pub fn multi_get_at<'py>(
    py: Python<'py>,
    store: &shale_lsm::Db,
    encoding: Encoding,
    keys: &Bound<'py, PyAny>,
    default: &Bound<'py, PyAny>,
    snapshot: Option<&shale_lsm::Snapshot>,
) -> PyResult<Bound<'py, PyList>> {
    if keys.is_instance_of::<PyString>()
        || keys.is_instance_of::<PyBytes>()
        || keys.is_instance_of::<PyByteArray>()
        || keys.is_instance_of::<PyMemoryView>()
    {
        return Err(PyTypeError::new_err(format!(
            "multi_get takes a list (or other iterable) of keys, not one {}",
            keys.get_type().name()?
        )));
    }
    let objects: Vec<Bound<'py, PyAny>> = keys.try_iter()?.collect::<PyResult<_>>()?;
    let encoded = objects.iter().map(|ob| encoding.arg(ob, "key")).collect::<PyResult<Vec<_>>>()?;
    let slices: Vec<&[u8]> = encoded.iter().map(|k| k.as_ref()).collect();
    let opts = ReadOptions { snapshot, ..ReadOptions::default() };
    let answers = py.detach(|| store.multi_get(&slices, &opts)).map_err(to_py)?;
    let out = PyList::empty(py);
    for answer in answers {
        match answer {
            Some(value) => out.append(encoding.object(py, &value)?)?,
            None => out.append(default)?,
        }
    }
    Ok(out)
}
