//! The space layer's error type.

use std::fmt;

use shale_io::ErrorKind;

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
    /// What kind of error this is ([`ErrorKind`]): what a caller can do about it. An
    /// [`Error::Io`] has the io error's own kind.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Io(e) => e.kind(),
            Error::Corruption { .. } => ErrorKind::Corruption,
            Error::Foreign { .. } | Error::OtherEngine { .. } => ErrorKind::NotAStore,
            // The caller gave volumes that are not one store: like a path holding another
            // store, the fix is to give the right ones, and nothing was written.
            Error::Tiers(_) => ErrorKind::NotAStore,
            Error::NewerFormat { .. } => ErrorKind::NewerFormat,
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::NoSpace(_) => ErrorKind::NoSpace,
            Error::Stopped(_) => ErrorKind::Stopped,
            Error::ReadOnly(_) => ErrorKind::ReadOnly,
            Error::InUse(_) => ErrorKind::InUse,
        }
    }

    pub(crate) fn corruption(what: impl Into<String>, offset: u64) -> Error {
        Error::Corruption { what: what.into(), offset }
    }
}

/// The space layer's result alias.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EngineKind;

    /// Every variant has its kind; a wrapped io error has the io error's.
    #[test]
    fn every_variant_has_its_kind() {
        let s = || "why".to_string();
        let eio = shale_io::Error::Io {
            op: shale_io::OpKind::Read,
            offset: 0,
            source: std::io::Error::from_raw_os_error(libc::EIO),
        };
        let cases = [
            (Error::Io(eio), ErrorKind::Io),
            (Error::Io(shale_io::Error::Busy), ErrorKind::Busy),
            (Error::Io(shale_io::Error::Unsupported(s())), ErrorKind::Unsupported),
            (Error::corruption("format header", 0), ErrorKind::Corruption),
            (Error::Foreign { why: s() }, ErrorKind::NotAStore),
            (Error::NewerFormat { found: 9, supported: 3 }, ErrorKind::NewerFormat),
            (Error::InvalidArgument(s()), ErrorKind::InvalidArgument),
            (Error::NoSpace(s()), ErrorKind::NoSpace),
            (Error::Stopped(s()), ErrorKind::Stopped),
            (Error::ReadOnly(s()), ErrorKind::ReadOnly),
            (Error::Tiers(s()), ErrorKind::NotAStore),
            (Error::InUse(s()), ErrorKind::InUse),
            (
                Error::OtherEngine { found: EngineKind::Hash, expected: EngineKind::Lsm },
                ErrorKind::NotAStore,
            ),
        ];
        // Fails to compile when a variant is added, and the count below when no case has it.
        let variant = |e: &Error| match e {
            Error::Io(_) => 0,
            Error::Corruption { .. } => 1,
            Error::Foreign { .. } => 2,
            Error::NewerFormat { .. } => 3,
            Error::InvalidArgument(_) => 4,
            Error::NoSpace(_) => 5,
            Error::Stopped(_) => 6,
            Error::ReadOnly(_) => 7,
            Error::Tiers(_) => 8,
            Error::InUse(_) => 9,
            Error::OtherEngine { .. } => 10,
        };
        let covered: std::collections::BTreeSet<_> =
            cases.iter().map(|(e, _)| variant(e)).collect();
        assert_eq!(covered.len(), 11, "a variant has no case");
        for (e, kind) in &cases {
            assert_eq!(e.kind(), *kind, "{e:?}");
        }
        // The conversion from the io layer keeps the kind it had there.
        let full = shale_io::Error::at_path(
            shale_io::PathOp::Create,
            "/a",
            std::io::Error::from_raw_os_error(libc::ENOSPC),
        );
        assert_eq!(Error::from(full).kind(), ErrorKind::NoSpace);
    }
}
