//! The hash engine's errors: one enum, each variant a thing a caller can act on.

use shale_io::ErrorKind;

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

impl Error {
    /// What kind of error this is ([`ErrorKind`]): what a caller can do about it. An
    /// [`Error::Space`] has the space error's own kind.
    ///
    /// ```
    /// use shale_hash::{ErrorKind, HashOptions, HashStore, SEGMENT_BYTES_MIN, StoreMode};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = HashStore::open(dir.path(), HashOptions { segment_bytes: SEGMENT_BYTES_MIN, ..Default::default() })?;
    /// let err = store.store(b"abc", b"v", StoreMode::Overwrite).unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::InvalidArgument); // keys are at least 4 bytes
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Space(e) => e.kind(),
            Error::Corruption { .. } => ErrorKind::Corruption,
            Error::KeyLength { .. } | Error::ValueTooLarge { .. } => ErrorKind::InvalidArgument,
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::BufferTooSmall { .. } => ErrorKind::BufferTooSmall,
            Error::KeyExists => ErrorKind::AlreadyExists,
            Error::KeyNotFound => ErrorKind::NotFound,
            Error::NotHashStore(_) => ErrorKind::NotAStore,
            Error::Stopped(_) => ErrorKind::Stopped,
            Error::Busy => ErrorKind::Busy,
            Error::TooManyIterators { .. } => ErrorKind::LimitReached,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant has its kind; a wrapped space error has its own.
    #[test]
    fn every_variant_has_its_kind() {
        let s = || "why".to_string();
        let cases = [
            (Error::Space(shale_space::Error::InUse(s())), ErrorKind::InUse),
            (Error::Space(shale_space::Error::NoSpace(s())), ErrorKind::NoSpace),
            (Error::from(shale_io::Error::Busy), ErrorKind::Busy),
            (Error::Corruption { what: s(), offset: 0 }, ErrorKind::Corruption),
            (Error::KeyLength { len: 3, min: 4, max: 255 }, ErrorKind::InvalidArgument),
            (Error::ValueTooLarge { len: 3 << 20, max: 2 << 20 }, ErrorKind::InvalidArgument),
            (Error::BufferTooSmall { needed: 10 }, ErrorKind::BufferTooSmall),
            (Error::KeyExists, ErrorKind::AlreadyExists),
            (Error::KeyNotFound, ErrorKind::NotFound),
            (Error::NotHashStore(s()), ErrorKind::NotAStore),
            (Error::InvalidArgument(s()), ErrorKind::InvalidArgument),
            (Error::Stopped(s()), ErrorKind::Stopped),
            (Error::Busy, ErrorKind::Busy),
            (Error::TooManyIterators { max: 16 }, ErrorKind::LimitReached),
        ];
        // Fails to compile when a variant is added, and the count below when no case has it.
        let variant = |e: &Error| match e {
            Error::Space(_) => 0,
            Error::Corruption { .. } => 1,
            Error::KeyLength { .. } => 2,
            Error::ValueTooLarge { .. } => 3,
            Error::BufferTooSmall { .. } => 4,
            Error::KeyExists => 5,
            Error::KeyNotFound => 6,
            Error::NotHashStore(_) => 7,
            Error::InvalidArgument(_) => 8,
            Error::Stopped(_) => 9,
            Error::Busy => 10,
            Error::TooManyIterators { .. } => 11,
        };
        let covered: std::collections::BTreeSet<_> =
            cases.iter().map(|(e, _)| variant(e)).collect();
        assert_eq!(covered.len(), 12, "a variant has no case");
        for (e, kind) in &cases {
            assert_eq!(e.kind(), *kind, "{e:?}");
        }
        // Another engine's store, as the space layer reports it, is not a hash store.
        let other = shale_space::Error::OtherEngine {
            found: shale_space::EngineKind::Lsm,
            expected: shale_space::EngineKind::Hash,
        };
        assert_eq!(Error::from(other).kind(), ErrorKind::NotAStore);
    }
}
