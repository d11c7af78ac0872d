//! shale's lsm engine: an LSM-tree key-value store on a shale volume.

pub mod cache;
pub mod error;
pub mod iter;
pub mod key;
pub mod sst;

pub use error::{Error, Result};
