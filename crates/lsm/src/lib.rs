//! shale's lsm engine: an LSM-tree key-value store on a shale volume.

pub mod error;
pub mod iter;
pub mod key;
pub mod memtable;

pub use error::{Error, Result};
