//! shale's lsm engine: an LSM-tree key-value store on a shale volume.

pub mod batch;
pub mod cache;
pub mod db_iter;
pub mod error;
pub mod iter;
pub mod key;
pub mod merge;
pub mod sst;
pub mod version_edit;
pub mod wal;

pub use error::{Error, Result};
