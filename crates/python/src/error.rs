//! shale's Python exceptions and the mapping from the lsm engine's typed errors.
//!
//! Every exception the package raises for the store derives from `shale.Error`, one subclass
//! per kind of error ([`shale_io::ErrorKind`]) that the lsm engine returns; `shale.Closed` is raised
//! by a call on a closed `Db` or a released `Snapshot`. Wrong Python types (a `str` key)
//! raise Python's own `TypeError` instead: they are the caller's bug, not the store's state.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(shale, Error, PyException, "Base class of every error of a shale store.");
create_exception!(
    shale,
    InvalidArgument,
    Error,
    "Bad options or input (an oversized key or value, an empty path, a snapshot of another store)."
);
create_exception!(
    shale,
    Corruption,
    Error,
    "Persisted bytes are damaged: a checksum or structure check failed."
);
create_exception!(shale, IoError, Error, "The device failed a request.");
create_exception!(shale, NoSpace, Error, "No room on the volume or the device.");
create_exception!(shale, Busy, Error, "The request queue is full: resubmit later.");
create_exception!(shale, InUse, Error, "The store is open already, in this process or another.");
create_exception!(
    shale,
    Stopped,
    Error,
    "An earlier failed write stopped the store: it takes no writes until reopened (after a full device, free space on it or move the store to a larger volume first)."
);
create_exception!(shale, ReadOnly, Error, "A write on a store that only reads.");
create_exception!(shale, Closed, Error, "A call on a closed Db, or through a released Snapshot.");
create_exception!(
    shale,
    NotAStore,
    Error,
    "The path holds no lsm store: another engine's store, a newer format, or foreign data. Nothing was written to it."
);

/// The Python exception for an error of the engine: its class by the error's kind
/// ([`shale_lsm::Error::kind`], shared by every shale layer), its message the engine's own with
/// its causes ("what failed: why", `shale_io::Chain`).
pub fn to_py(e: shale_lsm::Error) -> PyErr {
    use shale_io::ErrorKind as K;
    let msg = shale_io::Chain(&e).to_string();
    match e.kind() {
        // The backend cannot do what was asked: the device's failure, as it always was here.
        K::Io | K::Unsupported => IoError::new_err(msg),
        K::Corruption => Corruption::new_err(msg),
        K::InvalidArgument => InvalidArgument::new_err(msg),
        K::NoSpace => NoSpace::new_err(msg),
        K::Busy => Busy::new_err(msg),
        K::Stopped => Stopped::new_err(msg),
        K::InUse => InUse::new_err(msg),
        K::ReadOnly => ReadOnly::new_err(msg),
        K::NotAStore | K::NewerFormat => NotAStore::new_err(msg),
        // Kinds the lsm engine does not return, and kinds added later.
        _ => Error::new_err(msg),
    }
}

/// Adds the exception classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("InvalidArgument", py.get_type::<InvalidArgument>())?;
    m.add("Corruption", py.get_type::<Corruption>())?;
    m.add("IoError", py.get_type::<IoError>())?;
    m.add("NoSpace", py.get_type::<NoSpace>())?;
    m.add("Busy", py.get_type::<Busy>())?;
    m.add("InUse", py.get_type::<InUse>())?;
    m.add("Stopped", py.get_type::<Stopped>())?;
    m.add("ReadOnly", py.get_type::<ReadOnly>())?;
    m.add("Closed", py.get_type::<Closed>())?;
    m.add("NotAStore", py.get_type::<NotAStore>())?;
    Ok(())
}
