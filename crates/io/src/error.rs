//! The io layer's error type.

use std::fmt;
use std::path::PathBuf;

use crate::ErrorKind;

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

// Display says what failed at this layer and source() gives the operating system's error, so
// a chain printed whole ([`Chain`]) names each cause once.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { op, offset, .. } => write!(f, "device {op} failed at byte offset {offset}"),
            Error::NoSpace { offset } => write!(f, "no space left on device (write at {offset})"),
            Error::Busy => f.write_str("queue is full; reap completions and resubmit"),
            Error::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            Error::Unsupported(what) => write!(f, "unsupported: {what}"),
            Error::Path { op: PathOp::Grow { from, to }, path, .. } => write!(
                f,
                "cannot grow {} from {from} to {to} bytes ({} more)",
                path.display(),
                to.saturating_sub(*from)
            ),
            // Creating something that is missing: a directory on its path is missing (was
            // "... does not exist (cannot create the directory it: ...)").
            Error::Path { op: op @ (PathOp::Create | PathOp::CreateDir), path, source }
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                write!(f, "cannot {op} {}: a directory on its path does not exist", path.display())
            }
            Error::Path { op, path, source } if source.kind() == std::io::ErrorKind::NotFound => {
                write!(f, "{} does not exist (cannot {op} it)", path.display())
            }
            Error::Path { op, path, .. } => write!(f, "cannot {op} {}", path.display()),
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
    /// so the OS error's code is kept (or, for an error without one, its kind and message)
    /// and the original source is dropped; the copy has the same [`Error::kind`].
    pub fn duplicate(&self) -> Error {
        match self {
            Error::Io { op, offset, source } => {
                Error::Io { op: *op, offset: *offset, source: copy_os_error(source) }
            }
            Error::NoSpace { offset } => Error::NoSpace { offset: *offset },
            Error::Busy => Error::Busy,
            Error::InvalidArgument(s) => Error::InvalidArgument(s.clone()),
            Error::Unsupported(s) => Error::Unsupported(s.clone()),
            Error::Path { op, path, source } => {
                Error::Path { op: *op, path: path.clone(), source: copy_os_error(source) }
            }
        }
    }

    /// What kind of error this is ([`ErrorKind`]): what a caller can do about it.
    ///
    /// A full device or file system is [`ErrorKind::NoSpace`] and a read-only file system
    /// [`ErrorKind::ReadOnly`], whichever variant carries them; other failures of the
    /// operating system are [`ErrorKind::Io`].
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::NoSpace { .. } => ErrorKind::NoSpace,
            Error::Busy => ErrorKind::Busy,
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::Unsupported(_) => ErrorKind::Unsupported,
            Error::Io { source, .. } | Error::Path { source, .. } => match source.raw_os_error() {
                Some(libc::ENOSPC) => ErrorKind::NoSpace,
                Some(libc::EROFS) => ErrorKind::ReadOnly,
                _ => ErrorKind::Io,
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

/// A copy of an operating-system error for [`Error::duplicate`]: the same code where it has
/// one (so the copy has the same [`Error::kind`] and message), else its kind and message.
fn copy_os_error(source: &std::io::Error) -> std::io::Error {
    match source.raw_os_error() {
        Some(code) => std::io::Error::from_raw_os_error(code),
        None => std::io::Error::new(source.kind(), source.to_string()),
    }
}

/// The io layer's result alias.
pub type Result<T> = std::result::Result<T, Error>;

/// An error and its causes, printed as one line: "what failed: its cause: the root cause".
///
/// shale's error types follow one rule (the Rust API guidelines'): `Display` says what
/// failed at its own layer and `source()` gives the cause, so each cause is printed once. A
/// tool that shows an error to a person prints the whole chain with this; a plain `{e}`
/// shows only the outermost layer. A cause whose text the line ends with already (an error
/// type of another crate that prints its source itself) is not printed twice.
///
/// ```
/// use shale_io::{Chain, Error, PathOp};
///
/// let os = std::io::Error::from_raw_os_error(13);
/// let e = Error::at_path(PathOp::Open, "/srv/db/volume", os);
/// assert_eq!(e.to_string(), "cannot open /srv/db/volume");
/// assert!(Chain(&e).to_string().starts_with("cannot open /srv/db/volume: Permission denied"));
/// ```
#[derive(Clone, Copy)]
pub struct Chain<'a>(pub &'a (dyn std::error::Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut line = self.0.to_string();
        let mut cause = self.0.source();
        while let Some(e) = cause {
            let text = e.to_string();
            if !text.is_empty() && !line.ends_with(&text) {
                line.push_str(": ");
                line.push_str(&text);
            }
            cause = e.source();
        }
        f.write_str(&line)
    }
}

impl fmt::Debug for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant has its kind, and a failed OS request is classed by its error code.
    #[test]
    fn every_variant_has_its_kind() {
        let os = std::io::Error::from_raw_os_error;
        let path = |source| Error::at_path(PathOp::Create, "/a", source);
        let io = |source| Error::Io { op: OpKind::Write, offset: 0, source };
        let cases = [
            (io(os(libc::EIO)), ErrorKind::Io),
            (io(os(libc::ENOSPC)), ErrorKind::NoSpace),
            (io(os(libc::EROFS)), ErrorKind::ReadOnly),
            (Error::NoSpace { offset: 4096 }, ErrorKind::NoSpace),
            (Error::Busy, ErrorKind::Busy),
            (Error::InvalidArgument("unaligned".into()), ErrorKind::InvalidArgument),
            (Error::Unsupported("no io_uring".into()), ErrorKind::Unsupported),
            (path(os(libc::EACCES)), ErrorKind::Io),
            (path(std::io::Error::from(std::io::ErrorKind::NotFound)), ErrorKind::Io),
            (path(os(libc::ENOSPC)), ErrorKind::NoSpace),
            (path(os(libc::EROFS)), ErrorKind::ReadOnly),
        ];
        // Fails to compile when a variant is added, and the count below when no case has it.
        let variant = |e: &Error| match e {
            Error::Io { .. } => 0,
            Error::NoSpace { .. } => 1,
            Error::Busy => 2,
            Error::InvalidArgument(_) => 3,
            Error::Unsupported(_) => 4,
            Error::Path { .. } => 5,
        };
        let covered: std::collections::BTreeSet<_> =
            cases.iter().map(|(e, _)| variant(e)).collect();
        assert_eq!(covered.len(), 6, "a variant has no case");
        for (e, kind) in &cases {
            assert_eq!(e.kind(), *kind, "{e:?}");
            assert_eq!(e.duplicate().kind(), *kind, "the duplicate of {e:?}");
        }
    }

    /// Was "X does not exist (cannot create the directory it: ...)", a sentence with a hole
    /// (Python's `shale.open` showed it): a path being created names itself and what is
    /// missing.
    #[test]
    fn a_missing_parent_reads_as_a_sentence_naming_the_path() {
        let missing = || std::io::Error::from(std::io::ErrorKind::NotFound);
        let e = Error::Path { op: PathOp::CreateDir, path: "/a/b".into(), source: missing() };
        let msg = Chain(&e).to_string();
        assert!(
            msg.starts_with("cannot create the directory /a/b: a directory on its path"),
            "{msg}"
        );
        assert!(!msg.contains(" it:"), "{msg}");
        let e = Error::Path { op: PathOp::Open, path: "/a/b".into(), source: missing() };
        assert_eq!(e.to_string(), "/a/b does not exist (cannot open it)");
        assert!(Chain(&e).to_string().starts_with("/a/b does not exist (cannot open it): "), "{e}");
    }

    /// Was "device read failed at byte offset 4096: Input/output error (os error 5)" as the
    /// Display and the same OS error again as the source: a chain printed whole named the
    /// cause twice.
    #[test]
    fn a_cause_is_printed_once_in_a_chain() {
        use std::error::Error as _;
        let e = Error::Io {
            op: OpKind::Read,
            offset: 4096,
            source: std::io::Error::from_raw_os_error(5),
        };
        assert_eq!(e.to_string(), "device read failed at byte offset 4096");
        let os = e.source().expect("the OS error is the source").to_string();
        assert_eq!(Chain(&e).to_string(), format!("device read failed at byte offset 4096: {os}"));
        // A foreign error that prints its cause itself is not repeated.
        #[derive(Debug)]
        struct Both(std::io::Error);
        impl fmt::Display for Both {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "outer: {}", self.0)
            }
        }
        impl std::error::Error for Both {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let both = Both(std::io::Error::other("root"));
        assert_eq!(Chain(&both).to_string(), "outer: root");
    }
}
