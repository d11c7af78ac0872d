//! How keys and values cross between Python and the store: `bytes` (the default) or `str`
//! encoded as UTF-8 (`Db(..., encoding="utf-8")`).
//!
//! The store keeps bytes and orders keys bytewise. UTF-8 is the one encoding offered because
//! its bytewise order is the order of code points, which is how Python sorts `str`: a range
//! of `str` keys is the same range in the store, and iteration yields them in `sorted()`
//! order. (UTF-16, Latin-1 with its missing characters, and the rest would not keep that.)

use std::borrow::Cow;

use pyo3::exceptions::{PyTypeError, PyUnicodeDecodeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::bytes_arg::bytes_arg;
use crate::error::InvalidArgument;

/// The Python type of keys and values, in and out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// `bytes`, `bytearray` or `memoryview` in, `bytes` out.
    Bytes,
    /// `str` in, encoded as UTF-8; `str` out, decoded strictly.
    Utf8,
}

impl Encoding {
    /// The encoding named by the `encoding` argument: `None` for bytes, or any of Python's
    /// names of UTF-8 (`"utf-8"`, `"utf8"`, `"UTF_8"`, ...), as `codecs.lookup` resolves them.
    ///
    /// # Errors
    /// `InvalidArgument` for an unknown encoding or one other than UTF-8.
    pub fn from_arg(py: Python<'_>, name: Option<&str>) -> PyResult<Encoding> {
        let Some(name) = name else {
            return Ok(Encoding::Bytes);
        };
        let codecs = py.import("codecs")?;
        let canonical: String = match codecs.call_method1("lookup", (name,)) {
            Ok(info) => info.getattr("name")?.extract()?,
            Err(_) => return Err(InvalidArgument::new_err(format!("unknown encoding {name:?}"))),
        };
        if canonical == "utf-8" {
            return Ok(Encoding::Utf8);
        }
        Err(InvalidArgument::new_err(format!(
            "encoding {name:?} is not supported: give \"utf-8\" (str keys and values, whose \
             bytes sort as the str do) or None (bytes)"
        )))
    }

    /// The name `Db.encoding` shows: `None` for bytes.
    pub fn name(self) -> Option<&'static str> {
        match self {
            Encoding::Bytes => None,
            Encoding::Utf8 => Some("utf-8"),
        }
    }

    /// The bytes of a key or value argument `ob`, named `what` in errors.
    ///
    /// # Errors
    /// `TypeError` for an object of the wrong type (`str` with bytes, bytes with `str`);
    /// `UnicodeEncodeError` for a `str` holding a lone surrogate, which UTF-8 cannot encode.
    pub fn arg<'a>(self, ob: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Cow<'a, [u8]>> {
        match self {
            Encoding::Bytes => bytes_arg(ob, what),
            Encoding::Utf8 => str_arg(ob, what),
        }
    }

    /// As [`Encoding::arg`] for an optional argument (`None` stays `None`).
    pub fn optional_arg(
        self,
        ob: Option<&Bound<'_, PyAny>>,
        what: &str,
    ) -> PyResult<Option<Vec<u8>>> {
        match ob {
            Some(ob) if !ob.is_none() => Ok(Some(self.arg(ob, what)?.into_owned())),
            _ => Ok(None),
        }
    }

    /// The Python object for stored `bytes`: `bytes`, or the `str` they encode.
    ///
    /// # Errors
    /// `UnicodeDecodeError` when the bytes are not UTF-8 (written through a `Db` without
    /// the encoding).
    pub fn object<'py>(self, py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Encoding::Bytes => Ok(PyBytes::new(py, bytes).into_any()),
            Encoding::Utf8 => match std::str::from_utf8(bytes) {
                Ok(s) => Ok(PyString::new(py, s).into_any()),
                Err(e) => Err(PyUnicodeDecodeError::new_err_from_utf8(py, bytes, e)),
            },
        }
    }
}

/// The UTF-8 bytes of the `str` `ob`: a copy in this abi3-py39 build (the stable ABI lends a
/// `str`'s UTF-8 form only from Python 3.10), borrowed by builds that can (a `str` is
/// immutable, and the caller's reference keeps it alive while the GIL is released).
fn str_arg<'a>(ob: &'a Bound<'_, PyAny>, what: &str) -> PyResult<Cow<'a, [u8]>> {
    let Ok(s) = ob.cast::<PyString>() else {
        return Err(PyTypeError::new_err(format!(
            "{what} must be str (the Db was opened with encoding=\"utf-8\"), not {}",
            ob.get_type().name()?
        )));
    };
    Ok(match s.to_cow()? {
        Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
        Cow::Owned(s) => Cow::Owned(s.into_bytes()),
    })
}
