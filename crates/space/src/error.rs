//! The space layer's error type.

use std::fmt;

/// Errors of the space layer.
///
/// `Display` says what failed and `source()` gives its cause (an OS error), each printed once;
/// `shale_io::Chain` prints an error with its causes on one line.
#[non_exhaustive]
#[derive(Debug)]
pub enum Error {
    /// The device failed a request.
    Io(shale_io::Error),
    /// Persisted bytes are damaged: a checksum or structure check failed where the data was
    /// known to be complete (not a torn tail).
    Corruption {
        /// What is damaged ("format header", "version log object", ...).
        what: String,
        /// Byte offset on the device where the damage was found.
        offset: u64,
    },
    /// The device holds something that is not a shale volume; nothing was written to it.
    Foreign {
        /// Why it was not taken for a volume.
        why: String,
    },
    /// The volume was written by a newer shale whose format this one cannot read.
    NewerFormat {
        /// Format version found on the device.
        found: u32,
        /// Newest format version this build reads.
        supported: u32,
    },
    /// Bad options or a request that cannot be valid.
    InvalidArgument(String),
    /// No room: no free extent of the requested size, or the version log area is too small.
    NoSpace(String),
    /// A write or flush of the version log failed earlier: the volume accepts no more commits
    /// until it is reopened, because a failed sync cannot be trusted or retried (promise P5).
    Stopped(String),
    /// The volume was opened read-only ([`crate::Volume::open_read_only`]): it allocates
    /// and commits nothing.
    ReadOnly(String),
    /// The volumes given do not form one store: a tiered store opened without its capacity
    /// volume, with another store's, with a blank one in place of one that holds data, or a
    /// capacity volume given as the fast one. Nothing was written.
    Tiers(String),
    /// Another handle holds the store ([`crate::StoreLock`]): read-write excludes everyone,
    /// read-only excludes writers.
    InUse(String),
    /// The volume is the store of another engine than the one opening it (its format header
    /// says which); nothing was written to it.
    OtherEngine {
        /// The engine whose store the volume is.
        found: crate::EngineKind,
        /// The engine that tried to open it.
        expected: crate::EngineKind,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The io layer's error as it is: it says what failed, its source the cause.
            Error::Io(e) => fmt::Display::fmt(e, f),
            Error::Corruption { what, offset } => {
                write!(f, "corruption: {what} at byte offset {offset}")
            }
            Error::Foreign { why } => write!(f, "not a shale volume: {why}"),
            Error::NewerFormat { found, supported } => write!(
                f,
                "volume format version {found} is newer than this build reads ({supported})"
            ),
            Error::InvalidArgument(s) => write!(f, "invalid argument: {s}"),
            Error::NoSpace(s) => write!(f, "no space: {s}"),
            Error::InUse(s) => write!(f, "in use: {s}"),
            Error::Stopped(s) => write!(
                f,
                "volume stopped after a failed write ({s}): it takes no writes until reopened; if the device is full, free space on it or move the store to a larger volume, then reopen it"
            ),
            Error::ReadOnly(s) => write!(f, "volume opened read-only: {s}"),
            Error::Tiers(s) => write!(f, "volumes do not form one store: {s}; nothing was written"),
            Error::OtherEngine { found, expected } => write!(
                f,
                "this is {}, not {} (open it with the {found} engine); nothing was written to it",
                found.a_store(),
                expected.a_store()
            ),
        }
    }
}

// Display says what failed and source() the cause, each once (see `shale_io::Chain`).
impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // Transparent: the io error's own cause, so the chain does not repeat it.
            Error::Io(e) => std::error::Error::source(e),
            _ => None,
        }
    }
}

impl From<shale_io::Error> for Error {
    fn from(e: shale_io::Error) -> Error {
        match e {
            shale_io::Error::NoSpace { offset } => {
                Error::NoSpace(format!("device full (write at byte offset {offset})"))
            }
            shale_io::Error::InvalidArgument(s) => Error::InvalidArgument(s),
            // A file that could not be made or grown: the message names it and the sizes.
            other if other.is_no_space() => Error::NoSpace(shale_io::Chain(&other).to_string()),
            other => Error::Io(other),
        }
    }
}

impl Error {
    pub(crate) fn corruption(what: impl Into<String>, offset: u64) -> Error {
        Error::Corruption { what: what.into(), offset }
    }
}

/// The space layer's result alias.
pub type Result<T> = std::result::Result<T, Error>;
