//! The lsm engine's error type.

use std::fmt;

use shale_io::ErrorKind;

/// Errors of the lsm engine.
///
/// `Display` says what failed and `source()` gives its cause (an OS error), each printed once;
/// `shale_io::Chain` prints an error with its causes on one line.
#[non_exhaustive]
#[derive(Debug)]
pub enum Error {
    /// The device failed a request.
    Io(shale_io::Error),
    /// Persisted bytes are damaged: a checksum or structure check failed.
    Corruption {
        /// What is damaged ("SST data block", "WAL page", ...).
        what: String,
        /// Byte offset on the device (or inside the structure, where said).
        offset: u64,
    },
    /// Bad options or input (oversized key or value, ...).
    InvalidArgument(String),
    /// No room on the volume.
    NoSpace(String),
    /// The request queue is full: resubmit later.
    Busy,
    /// An earlier failed write stopped the store: reopen it (P5).
    Stopped(String),
    /// An error of the space layer that is none of the above.
    Space(shale_space::Error),
    /// The store is open already, in this process or another.
    InUse(String),
    /// A write (or flush, compaction, option change) on a store opened with
    /// [`crate::Db::open_read_only`], or a read-write open of a store on a read-only file
    /// system.
    ReadOnly(String),
    /// The volume is another engine's store (a hash or table store: its format header, or
    /// for a volume older than format 3 its version log, says so); nothing was written to it.
    NotLsmStore(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The lower layers' errors as they are (transparent): each says what failed, its
            // source the cause, so a chain printed whole (`shale_io::Chain`) names it once.
            Error::Io(e) => fmt::Display::fmt(e, f),
            Error::Corruption { what, offset } => {
                write!(f, "corruption: {what} at byte offset {offset}")
            }
            Error::InvalidArgument(s) => write!(f, "invalid argument: {s}"),
            Error::NoSpace(s) => write!(f, "no space: {s}"),
            Error::Busy => f.write_str("busy: the request queue is full, resubmit later"),
            Error::Stopped(s) => write!(f, "store stopped after a failed write ({s}): it takes no writes until reopened; if the device is full, free space on it or move the store to a larger volume, then reopen it"),
            Error::Space(e) => fmt::Display::fmt(e, f),
            Error::InUse(s) => write!(f, "store in use: {s}"),
            Error::ReadOnly(s) => write!(f, "read-only: {s}"),
            Error::NotLsmStore(s) => write!(f, "not an lsm store: {s}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // Transparent, as their Display: the wrapped error's own cause.
            Error::Io(e) => std::error::Error::source(e),
            Error::Space(e) => std::error::Error::source(e),
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
            shale_io::Error::Busy => Error::Busy,
            // A file that could not be made or grown: the message names it and the sizes.
            other if other.is_no_space() => Error::NoSpace(shale_io::Chain(&other).to_string()),
            other => Error::Io(other),
        }
    }
}

impl From<shale_space::Error> for Error {
    fn from(e: shale_space::Error) -> Error {
        match e {
            shale_space::Error::Io(e) => Error::from(e),
            shale_space::Error::Corruption { what, offset } => Error::Corruption { what, offset },
            shale_space::Error::InvalidArgument(s) => Error::InvalidArgument(s),
            shale_space::Error::NoSpace(s) => Error::NoSpace(s),
            shale_space::Error::Stopped(s) => Error::Stopped(s),
            shale_space::Error::ReadOnly(s) => Error::ReadOnly(s),
            shale_space::Error::InUse(s) => Error::InUse(s),
            shale_space::Error::OtherEngine { found, .. } => Error::NotLsmStore(format!(
                "this is {}; nothing was written to it",
                found.a_store()
            )),
            other => Error::Space(other),
        }
    }
}

impl Error {
    /// What kind of error this is ([`ErrorKind`]): what a caller can do about it. An
    /// [`Error::Io`] or [`Error::Space`] has the wrapped error's own kind.
    ///
    /// ```
    /// use shale_lsm::{Db, ErrorKind, Options};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let db = Db::open(dir.path(), Options::small_for_tests())?;
    /// let Err(err) = Db::open(dir.path(), Options::small_for_tests()) else { panic!() };
    /// assert_eq!(err.kind(), ErrorKind::InUse); // open already: close the other handle
    /// # drop(db);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Io(e) => e.kind(),
            Error::Space(e) => e.kind(),
            Error::Corruption { .. } => ErrorKind::Corruption,
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::NoSpace(_) => ErrorKind::NoSpace,
            Error::Busy => ErrorKind::Busy,
            Error::Stopped(_) => ErrorKind::Stopped,
            Error::InUse(_) => ErrorKind::InUse,
            Error::ReadOnly(_) => ErrorKind::ReadOnly,
            Error::NotLsmStore(_) => ErrorKind::NotAStore,
        }
    }

    /// A corruption error.
    pub fn corruption(what: impl Into<String>, offset: u64) -> Error {
        Error::Corruption { what: what.into(), offset }
    }
}

/// The lsm engine's result alias.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant has its kind; a wrapped io or space error has its own.
    #[test]
    fn every_variant_has_its_kind() {
        let s = || "why".to_string();
        let eio = || shale_io::Error::Io {
            op: shale_io::OpKind::Flush,
            offset: 0,
            source: std::io::Error::from_raw_os_error(libc::EIO),
        };
        let cases = [
            (Error::Io(eio()), ErrorKind::Io),
            (Error::Io(shale_io::Error::Unsupported(s())), ErrorKind::Unsupported),
            (Error::corruption("SST data block", 4096), ErrorKind::Corruption),
            (Error::InvalidArgument(s()), ErrorKind::InvalidArgument),
            (Error::NoSpace(s()), ErrorKind::NoSpace),
            (Error::Busy, ErrorKind::Busy),
            (Error::Stopped(s()), ErrorKind::Stopped),
            (Error::Space(shale_space::Error::Tiers(s())), ErrorKind::NotAStore),
            (
                Error::Space(shale_space::Error::NewerFormat { found: 9, supported: 3 }),
                ErrorKind::NewerFormat,
            ),
            (Error::Space(shale_space::Error::Foreign { why: s() }), ErrorKind::NotAStore),
            (Error::Space(shale_space::Error::Io(eio())), ErrorKind::Io),
            (Error::InUse(s()), ErrorKind::InUse),
            (Error::ReadOnly(s()), ErrorKind::ReadOnly),
            (Error::NotLsmStore(s()), ErrorKind::NotAStore),
        ];
        // Fails to compile when a variant is added, and the count below when no case has it.
        let variant = |e: &Error| match e {
            Error::Io(_) => 0,
            Error::Corruption { .. } => 1,
            Error::InvalidArgument(_) => 2,
            Error::NoSpace(_) => 3,
            Error::Busy => 4,
            Error::Stopped(_) => 5,
            Error::Space(_) => 6,
            Error::InUse(_) => 7,
            Error::ReadOnly(_) => 8,
            Error::NotLsmStore(_) => 9,
        };
        let covered: std::collections::BTreeSet<_> = cases.iter().map(|(e, _)| variant(e)).collect();
        assert_eq!(covered.len(), 10, "a variant has no case");
        for (e, kind) in &cases {
            assert_eq!(e.kind(), *kind, "{e:?}");
        }
        // The conversions from the lower layers keep the kind each had there.
        for e in [
            shale_space::Error::Stopped(s()),
            shale_space::Error::OtherEngine {
                found: shale_space::EngineKind::Table,
                expected: shale_space::EngineKind::Lsm,
            },
            shale_space::Error::Io(shale_io::Error::Busy),
            shale_space::Error::Tiers(s()),
        ] {
            let kind = e.kind();
            assert_eq!(Error::from(e).kind(), kind);
        }
    }
}
