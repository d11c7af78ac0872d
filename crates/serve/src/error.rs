//! The crate's error type.

use std::fmt;

use shale_io::ErrorKind;

/// What went wrong in the server: starting it, a stored value, or the engine.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The engine's error.
    Store(shale_lsm::Error),
    /// A socket or runtime error, with what was being done.
    Io {
        /// What was being done ("binding 127.0.0.1:6379", ...).
        op: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A stored value or key that `shale serve` did not write.
    Corruption(String),
    /// A store that is not `shale serve`'s (marker.rs): its data was written by another
    /// program, or by a newer serve. Nothing in it was changed.
    NotServeStore(String),
    /// Bad configuration, naming the setting and its limit.
    InvalidArgument(String),
    /// The engine's request queue stayed full for every retry.
    Busy,
}

/// The crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An I/O error naming what was being done.
    pub fn io(op: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io { op: op.into(), source }
    }

    /// What kind of error this is ([`ErrorKind`], shared with the engine's errors): what a
    /// caller can do about it. An [`Error::Store`] has the engine error's own kind.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Store(e) => e.kind(),
            Error::Io { .. } => ErrorKind::Io,
            Error::Corruption(_) => ErrorKind::Corruption,
            Error::NotServeStore(_) => ErrorKind::NotAStore,
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::Busy => ErrorKind::Busy,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // What failed, once: the engine's error shows its own layer here and its cause
            // through source(), the OS error of `Io` only through source() (`shale_io::Chain`
            // prints a whole chain).
            Error::Store(e) => write!(f, "store: {e}"),
            Error::Io { op, .. } => f.write_str(op),
            Error::Corruption(s) => write!(f, "corruption: {s}"),
            Error::NotServeStore(why) => write!(
                f,
                "not a store of shale serve: {why}. It was left untouched: serve opens the \
                 stores it made and empty ones; give a new or empty --db"
            ),
            Error::InvalidArgument(s) => write!(f, "invalid argument: {s}"),
            Error::Busy => f.write_str("the store's request queue stayed full; try again"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // The engine's message is in this Display already: its cause comes next.
            Error::Store(e) => std::error::Error::source(e),
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<shale_lsm::Error> for Error {
    fn from(e: shale_lsm::Error) -> Error {
        match e {
            shale_lsm::Error::Busy => Error::Busy,
            e => Error::Store(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant has its kind; the engine's error has its own.
    #[test]
    fn every_variant_has_its_kind() {
        let s = || "why".to_string();
        let cases = [
            (Error::Store(shale_lsm::Error::Stopped(s())), ErrorKind::Stopped),
            (Error::Store(shale_lsm::Error::NotLsmStore(s())), ErrorKind::NotAStore),
            (Error::io("binding", std::io::Error::other("refused")), ErrorKind::Io),
            (Error::Corruption(s()), ErrorKind::Corruption),
            (Error::NotServeStore(s()), ErrorKind::NotAStore),
            (Error::InvalidArgument(s()), ErrorKind::InvalidArgument),
            (Error::from(shale_lsm::Error::Busy), ErrorKind::Busy),
        ];
        // Fails to compile when a variant is added, and the count below when no case has it.
        let variant = |e: &Error| match e {
            Error::Store(_) => 0,
            Error::Io { .. } => 1,
            Error::Corruption(_) => 2,
            Error::NotServeStore(_) => 3,
            Error::InvalidArgument(_) => 4,
            Error::Busy => 5,
        };
        let covered: std::collections::BTreeSet<_> =
            cases.iter().map(|(e, _)| variant(e)).collect();
        assert_eq!(covered.len(), 6, "a variant has no case");
        for (e, kind) in &cases {
            assert_eq!(e.kind(), *kind, "{e:?}");
        }
    }
}
