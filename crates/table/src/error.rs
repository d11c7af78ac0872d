//! The table engine's errors: one enum, each variant a thing a caller can act on.

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
    /// Persisted bytes are damaged where they were known complete: a block whose checksum
    /// fails, an undo record that fails its checksum with a later record after it, a row
    /// record that does not parse.
    Corruption {
        /// What is damaged.
        what: String,
        /// Byte address on the volume (blocks) or offset in the persistent memory (undo
        /// records) where it was found.
        offset: u64,
    },
    /// No table of that name or id.
    NoSuchTable(String),
    /// A table of that name exists already.
    TableExists(String),
    /// The table's schema has no column of that name.
    NoSuchColumn(String),
    /// A value of the wrong size for its column: a fixed column takes exactly `expected`
    /// bytes, a variable one at most `expected`; a row of the wrong number of columns names
    /// the column count here too, with `column` "(row)".
    WrongSize {
        /// The column's name.
        column: String,
        /// Bytes the column takes (fixed) or takes at most (variable).
        expected: usize,
        /// Bytes given.
        got: usize,
    },
    /// An insert of a primary key that is present.
    DuplicateKey,
    /// An update or erase of a primary key that is absent.
    KeyNotFound,
    /// The volume holds something other than a table store (an lsm or hash-engine store);
    /// nothing was written to it.
    NotTableStore(String),
    /// Bad options or arguments.
    InvalidArgument(String),
    /// The store's undo log is in a persistent memory file (`TableOptions::undo_log`
    /// `Pmem`, or DAX) that is gone or empty: a reboot removes a file in `/dev/shm`. A
    /// transaction in flight at the crash cannot be rolled back without it, so the store is
    /// not opened (nothing was written).
    UndoLogMissing {
        /// The file the store's catalog names (or `pmem_path`).
        path: std::path::PathBuf,
    },
    /// This store is a copy (a new volume file: `cp -a`, a restore) of a store whose undo
    /// log is in a persistent memory file, and that file is the original's: the copy
    /// neither uses nor removes it, and is not opened (nothing was written).
    UndoLogOfOriginal {
        /// The original's file.
        path: std::path::PathBuf,
    },
    /// A write failed earlier; the store accepts no more writes until it is reopened (P5).
    Stopped(String),
    /// A lock was not granted within `lock_timeout`: another transaction holds it (or a
    /// deadlock). The transaction is still open; abort it (or retry the operation).
    LockTimeout,
    /// The undo log has no room for a before-image: neither persistent memory nor the
    /// spill area on the volume (`TableOptions::undo_spill_bytes`; none when 0) has room
    /// behind the oldest record of a transaction still open. The transaction stays open.
    LogFull {
        /// Bytes the record needs.
        needed: u64,
        /// Bytes of the log's data area.
        capacity: u64,
    },
}

/// The table engine's result.
pub type Result<T> = std::result::Result<T, Error>;

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // The space layer's error as it is (transparent): it says what failed, its source
            // the cause, so a chain printed whole (`shale_io::Chain`) names it once.
            Error::Space(e) => std::fmt::Display::fmt(e, f),
            Error::Corruption { what, offset } => write!(f, "corruption: {what} at byte {offset}"),
            Error::NoSuchTable(t) => write!(f, "no such table: {t}"),
            Error::TableExists(t) => write!(f, "table exists: {t}"),
            Error::NoSuchColumn(c) => write!(f, "no such column: {c}"),
            Error::WrongSize { column, expected, got } => {
                write!(f, "column {column}: {got} bytes given, {expected} expected")
            }
            Error::DuplicateKey => write!(f, "duplicate primary key"),
            Error::KeyNotFound => write!(f, "primary key not found"),
            Error::NotTableStore(why) => write!(f, "not a table store: {why}"),
            Error::InvalidArgument(why) => write!(f, "invalid argument: {why}"),
            Error::UndoLogMissing { path } => write!(
                f,
                "the store's undo log {} is missing (a reboot empties /dev/shm): a transaction \
                 in flight at the last crash could not be rolled back; restore the file, or, \
                 if the store was closed cleanly, open it accepting the lost log \
                 (accept_lost_undo_log)",
                path.display()
            ),
            Error::UndoLogOfOriginal { path } => write!(
                f,
                "this store is a copy, and its undo log {} belongs to the original: the copy \
                 does not use it; copy the log with the store and give the copy's file as \
                 pmem_path, or, if the original was closed cleanly when it was copied, open \
                 the copy accepting the lost log (accept_lost_undo_log)",
                path.display()
            ),
            Error::Stopped(why) => write!(f, "store stopped after a failed write: {why}"),
            Error::LockTimeout => write!(f, "lock wait timed out"),
            Error::LogFull { needed, capacity } => write!(
                f,
                "undo log full: a record of {needed} bytes does not fit in {capacity} bytes \
                 behind the oldest open transaction"
            ),
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
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Space(e) => e.kind(),
            Error::Corruption { .. } => ErrorKind::Corruption,
            Error::NoSuchTable(_) | Error::NoSuchColumn(_) => ErrorKind::NotFound,
            Error::KeyNotFound => ErrorKind::NotFound,
            Error::TableExists(_) | Error::DuplicateKey => ErrorKind::AlreadyExists,
            Error::WrongSize { .. } | Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::NotTableStore(_) => ErrorKind::NotAStore,
            Error::UndoLogMissing { .. } | Error::UndoLogOfOriginal { .. } => ErrorKind::LogMissing,
            Error::Stopped(_) => ErrorKind::Stopped,
            Error::LockTimeout => ErrorKind::Timeout,
            // No room, as a full device is: the fix is room (commit or abort the open
            // transaction, or a larger log), and the store does not stop.
            Error::LogFull { .. } => ErrorKind::NoSpace,
        }
    }
}

impl From<shale_space::Error> for Error {
    fn from(e: shale_space::Error) -> Error {
        match e {
            shale_space::Error::OtherEngine { found, .. } => Error::NotTableStore(format!(
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
            (Error::Space(shale_space::Error::ReadOnly(s())), ErrorKind::ReadOnly),
            (Error::Corruption { what: s(), offset: 0 }, ErrorKind::Corruption),
            (Error::NoSuchTable(s()), ErrorKind::NotFound),
            (Error::TableExists(s()), ErrorKind::AlreadyExists),
            (Error::NoSuchColumn(s()), ErrorKind::NotFound),
            (Error::WrongSize { column: s(), expected: 4, got: 5 }, ErrorKind::InvalidArgument),
            (Error::DuplicateKey, ErrorKind::AlreadyExists),
            (Error::KeyNotFound, ErrorKind::NotFound),
            (Error::NotTableStore(s()), ErrorKind::NotAStore),
            (Error::InvalidArgument(s()), ErrorKind::InvalidArgument),
            (Error::UndoLogMissing { path: "/dev/shm/x".into() }, ErrorKind::LogMissing),
            (Error::UndoLogOfOriginal { path: "/dev/shm/x".into() }, ErrorKind::LogMissing),
            (Error::Stopped(s()), ErrorKind::Stopped),
            (Error::LockTimeout, ErrorKind::Timeout),
            (Error::LogFull { needed: 100, capacity: 64 }, ErrorKind::NoSpace),
        ];
        // Fails to compile when a variant is added, and the count below when no case has it.
        let variant = |e: &Error| match e {
            Error::Space(_) => 0,
            Error::Corruption { .. } => 1,
            Error::NoSuchTable(_) => 2,
            Error::TableExists(_) => 3,
            Error::NoSuchColumn(_) => 4,
            Error::WrongSize { .. } => 5,
            Error::DuplicateKey => 6,
            Error::KeyNotFound => 7,
            Error::NotTableStore(_) => 8,
            Error::InvalidArgument(_) => 9,
            Error::UndoLogMissing { .. } => 10,
            Error::UndoLogOfOriginal { .. } => 11,
            Error::Stopped(_) => 12,
            Error::LockTimeout => 13,
            Error::LogFull { .. } => 14,
        };
        let covered: std::collections::BTreeSet<_> =
            cases.iter().map(|(e, _)| variant(e)).collect();
        assert_eq!(covered.len(), 15, "a variant has no case");
        for (e, kind) in &cases {
            assert_eq!(e.kind(), *kind, "{e:?}");
        }
        // Another engine's store, as the space layer reports it, is not a table store.
        let other = shale_space::Error::OtherEngine {
            found: shale_space::EngineKind::Hash,
            expected: shale_space::EngineKind::Table,
        };
        assert_eq!(Error::from(other).kind(), ErrorKind::NotAStore);
    }
}
