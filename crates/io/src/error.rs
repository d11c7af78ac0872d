//! The io layer's error type.

use std::fmt;

/// What an I/O request was doing when it failed; carried in errors and counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// A read of device bytes.
    Read,
    /// A write of device bytes (durable or not).
    Write,
    /// A flush of the device's volatile write cache.
    Flush,
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OpKind::Read => "read",
            OpKind::Write => "write",
            OpKind::Flush => "flush",
        })
    }
}

/// Errors of the io layer.
///
/// Operating errors (a failed device, a full device, a full queue) are returned; misuse that
/// is a bug in the caller (reaping more completions than are in flight) panics instead.
#[non_exhaustive]
#[derive(Debug)]
pub enum Error {
    /// The device failed a request.
    Io {
        /// What the request was doing.
        op: OpKind,
        /// Byte offset of the request on the device (0 for a flush).
        offset: u64,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The device (or the file holding it) has no room left.
    NoSpace {
        /// Byte offset of the write that did not fit.
        offset: u64,
    },
    /// The queue already holds as many requests as its depth: reap completions and resubmit.
    Busy,
    /// A request that cannot be valid on this device: unaligned, out of range, bad options.
    InvalidArgument(String),
    /// The backend cannot do this here (no io_uring, no O_DIRECT, cannot grow).
    Unsupported(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { op, offset, source } => {
                write!(f, "device {op} failed at byte offset {offset}: {source}")
            }
            Error::NoSpace { offset } => write!(f, "no space left on device (write at {offset})"),
            Error::Busy => f.write_str("queue is full; reap completions and resubmit"),
            Error::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            Error::Unsupported(what) => write!(f, "unsupported: {what}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl Error {
    /// Maps an operating-system error of a request into the io layer's error, keeping ENOSPC
    /// apart because callers react to a full device differently from a failed one.
    pub fn from_os(op: OpKind, offset: u64, source: std::io::Error) -> Error {
        if source.raw_os_error() == Some(libc::ENOSPC) {
            Error::NoSpace { offset }
        } else {
            Error::Io { op, offset, source }
        }
    }

    /// An error to hand to a second observer of the same failure: io errors are not `Clone`,
    /// so the kind and message are kept and the original source is dropped.
    pub fn duplicate(&self) -> Error {
        match self {
            Error::Io { op, offset, source } => Error::Io {
                op: *op,
                offset: *offset,
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            Error::NoSpace { offset } => Error::NoSpace { offset: *offset },
            Error::Busy => Error::Busy,
            Error::InvalidArgument(s) => Error::InvalidArgument(s.clone()),
            Error::Unsupported(s) => Error::Unsupported(s.clone()),
        }
    }
}

/// The io layer's result alias.
pub type Result<T> = std::result::Result<T, Error>;
