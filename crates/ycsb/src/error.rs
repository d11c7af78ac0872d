//! The crate's error type. Engine errors are not here: they are counted in the report.

use std::fmt;

/// Why a load or run could not start.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// A bad [`Config`](crate::Config) value, named.
    InvalidConfig(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidConfig(s) => write!(f, "invalid YCSB configuration: {s}"),
        }
    }
}

impl std::error::Error for Error {}

/// A result with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
