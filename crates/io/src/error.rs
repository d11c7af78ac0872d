//! The io layer's error type.

use std::fmt;
use std::path::PathBuf;

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
    /// An operation on a named file, directory or device failed before or outside any
    /// request on it (open, create, pre-allocate, grow, lock, map): which operation on which
    /// path, with the operating system's error as the source. Requests at byte offsets on an
    /// open device fail as [`Error::Io`] instead.
    Path {
        /// What was being done.
        op: PathOp,
        /// The path it was done to.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
}

/// The operation of an [`Error::Path`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PathOp {
    /// Open an existing file, directory or device.
    Open,
    /// Create a file.
    Create,
    /// Create a directory (and its missing parents).
    CreateDir,
    /// Read a file's metadata (type, size).
    Stat,
    /// Pre-allocate a new file of this many bytes.
    Allocate {
        /// Bytes wanted.
        bytes: u64,
    },
    /// Grow a file from one size to another.
    Grow {
        /// Size before, in bytes.
        from: u64,
        /// Size wanted, in bytes.
        to: u64,
    },
    /// Make a file's data and metadata durable.
    Sync,
    /// Take or test a lock on it.
    Lock,
    /// Map it into memory.
    Map,
    /// Remove it.
    Remove,
    /// Rename it (into place, for a checkpoint made under a temporary name).
    Rename,
    /// List a directory's entries.
    ReadDir,
}

impl fmt::Display for PathOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathOp::Open => f.write_str("open"),
            PathOp::Create => f.write_str("create"),
            PathOp::CreateDir => f.write_str("create the directory"),
            PathOp::Stat => f.write_str("read the metadata of"),
            PathOp::Allocate { bytes } => write!(f, "pre-allocate {bytes} bytes for"),
            PathOp::Grow { from, to } => {
                write!(f, "grow from {from} to {to} bytes ({} more)", to.saturating_sub(*from))
            }
            PathOp::Sync => f.write_str("sync"),
            PathOp::Lock => f.write_str("lock"),
            PathOp::Map => f.write_str("map"),
            PathOp::Remove => f.write_str("remove"),
            PathOp::Rename => f.write_str("rename"),
            PathOp::ReadDir => f.write_str("list the entries of"),
        }
    }
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
            Error::Path { op: PathOp::Grow { from, to }, path, source } => write!(
                f,
                "cannot grow {} from {from} to {to} bytes ({} more): {source}",
                path.display(),
                to.saturating_sub(*from)
            ),
            // Creating something that is missing: a directory on its path is missing (was
            // "... does not exist (cannot create the directory it: ...)").
            Error::Path { op: op @ (PathOp::Create | PathOp::CreateDir), path, source }
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                write!(
                    f,
                    "cannot {op} {}: a directory on its path does not exist ({source})",
                    path.display()
                )
            }
            Error::Path { op, path, source } if source.kind() == std::io::ErrorKind::NotFound => {
                write!(f, "{} does not exist (cannot {op} it: {source})", path.display())
            }
            Error::Path { op, path, source } => {
                write!(f, "cannot {op} {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } | Error::Path { source, .. } => Some(source),
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
            Error::Path { op, path, source } => Error::Path {
                op: *op,
                path: path.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
        }
    }

    /// An operation on `path` failed with `source`.
    pub fn at_path(op: PathOp, path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Path { op, path: path.into(), source }
    }

    /// Whether the device or the file system holding it is full: [`Error::NoSpace`], or an
    /// [`Error::Path`] that failed with ENOSPC (a file that could not be made or grown).
    pub fn is_no_space(&self) -> bool {
        match self {
            Error::NoSpace { .. } => true,
            Error::Path { source, .. } => source.raw_os_error() == Some(libc::ENOSPC),
            _ => false,
        }
    }

    /// Whether the operating system refused because the file system is mounted read-only.
    pub fn is_read_only_fs(&self) -> bool {
        match self {
            Error::Io { source, .. } | Error::Path { source, .. } => {
                source.raw_os_error() == Some(libc::EROFS)
            }
            _ => false,
        }
    }
}

/// The io layer's result alias.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    /// Was "X does not exist (cannot create the directory it: ...)", a sentence with a hole
    /// (Python's `shale.open` showed it): a path being created names itself and what is
    /// missing.
    #[test]
    fn a_missing_parent_reads_as_a_sentence_naming_the_path() {
        let missing = || std::io::Error::from(std::io::ErrorKind::NotFound);
        let e = Error::Path { op: PathOp::CreateDir, path: "/a/b".into(), source: missing() };
        let msg = e.to_string();
        assert!(
            msg.starts_with("cannot create the directory /a/b: a directory on its path"),
            "{msg}"
        );
        assert!(!msg.contains(" it:"), "{msg}");
        let e = Error::Path { op: PathOp::Open, path: "/a/b".into(), source: missing() };
        assert!(e.to_string().starts_with("/a/b does not exist (cannot open it: "), "{e}");
    }
}
