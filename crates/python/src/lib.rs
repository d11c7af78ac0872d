//! shale's Python package: the lsm engine's API (`shale_lsm::Db`) as the extension module
//! `shale._shale`, which `python/shale/__init__.py` re-exports.
//!
//! Each Python object holds what it reads through an `Arc`, as the C ABI's handles do
//! (`crates/capi/src/db.rs`): a `Db` holds the store, and every `Snapshot` and `Iterator`
//! holds a clone, so one used after `Db.close()` still reads a live store, never freed
//! memory; the store closes when the last of them goes.
//!
//! The GIL is released around every call into the engine that may wait for the device or a
//! lock (writes, reads, iterator steps, open, close), so other Python threads run meanwhile
//! and threads sharing one `Db` reach the engine side by side. Two rules keep that free of
//! deadlocks:
//! 1. A lock that is held while the GIL is released (a batch being written, an iterator's
//!    cursor) is taken only after releasing it, never while holding the GIL.
//! 2. Every other lock (the store handle, a snapshot, an iterator's buffered entries) is held
//!    only for a few instructions, and never across a release of the GIL.

mod batch;
mod bytes_arg;
mod db;
mod encoding;
mod error;
mod iterator;
mod read;
mod snapshot;

use pyo3::prelude::*;

/// The extension module `shale._shale`.
#[pymodule]
fn _shale(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<db::Db>()?;
    m.add_class::<batch::WriteBatch>()?;
    m.add_class::<snapshot::Snapshot>()?;
    m.add_class::<iterator::Iterator>()?;
    error::register(m)?;
    Ok(())
}
