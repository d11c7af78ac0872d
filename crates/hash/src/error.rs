//! The hash engine's errors: one enum, each variant a thing a caller can act on.

/// What went wrong.
///
/// `Display` says what failed and `source()` gives its cause (an OS error), each printed once;
/// `shale_io::Chain` prints an error with its causes on one line.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The space layer or the device failed: shown as that error shows itself, its cause
    /// (an OS error) as the source.
    Space(shale_space::Error),
    /// Persisted bytes are damaged where they were known complete: a record the index points
    /// at fails its page checksum, or a durable page of a segment is invalid.
    Corruption {
        /// What is damaged.
        what: String,
        /// Byte address on the volume where it was found.
        offset: u64,
    },
    /// A key shorter or longer than the API allows.
    KeyLength {
        /// The key's length.
        len: usize,
        /// Shortest key accepted.
        min: usize,
        /// Longest key accepted.
        max: usize,
    },
    /// A value longer than the API allows.
    ValueTooLarge {
        /// The value's length.
        len: usize,
        /// Longest value accepted.
        max: usize,
    },
    /// The caller's buffer cannot hold what was asked for; nothing was copied.
    BufferTooSmall {
        /// Bytes the buffer must hold.
        needed: usize,
    },
    /// A store with [`crate::StoreMode::NoOverwrite`] found the key present.
    KeyExists,
    /// A store with [`crate::StoreMode::UpdateOnly`] found the key absent.
    KeyNotFound,
    /// The volume holds something other than a hash-engine store (an lsm store, say);
    /// nothing was written to it.
    NotHashStore(String),
    /// Bad options or arguments.
    InvalidArgument(String),
    /// A write failed earlier; the store accepts no more writes until it is reopened (P5).
    Stopped(String),
    /// The submission queue is full (`queue_depth` requests outstanding); nothing was
    /// queued: submit again once some complete.
    Busy,
    /// `max_iterators` iterators are open already; close one first.
    TooManyIterators {
        /// The bound.
        max: usize,
    },
}

/// The hash engine's result.
pub type Result<T> = std::result::Result<T, Error>;

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // The space layer's error as it is (transparent): it says what failed, its source
            // the cause, so a chain printed whole (`shale_io::Chain`) names it once.
            Error::Space(e) => std::fmt::Display::fmt(e, f),
            Error::Corruption { what, offset } => write!(f, "corruption: {what} at byte {offset}"),
            Error::KeyLength { len, min, max } => {
                write!(f, "key of {len} bytes: keys are {min} to {max} bytes")
            }
            Error::ValueTooLarge { len, max } => {
                write!(f, "value of {len} bytes: values are at most {max} bytes")
            }
            Error::BufferTooSmall { needed } => {
                write!(f, "buffer too small: {needed} bytes needed")
            }
            Error::KeyExists => write!(f, "key exists (store without overwrite)"),
            Error::KeyNotFound => write!(f, "key not found (update-only store)"),
            Error::NotHashStore(why) => write!(f, "not a hash-engine store: {why}"),
            Error::InvalidArgument(why) => write!(f, "invalid argument: {why}"),
            Error::Stopped(why) => write!(f, "store stopped after a failed write: {why}"),
            Error::Busy => write!(f, "busy: the submission queue is full"),
            Error::TooManyIterators { max } => {
                write!(f, "too many iterators: {max} are open, the most allowed")
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Space(e) => std::error::Error::source(e),
            _ => None,
        }
    }
}

impl From<shale_space::Error> for Error {
    fn from(e: shale_space::Error) -> Error {
        match e {
            shale_space::Error::OtherEngine { found, .. } => Error::NotHashStore(format!(
                "this is {}; nothing was written to it",
                found.a_store()
            )),
            other => Error::Space(other),
        }
    }
}

impl From<shale_io::Error> for Error {
    fn from(e: shale_io::Error) -> Error {
        Error::Space(e.into())
    }
}
