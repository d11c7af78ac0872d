//! The kinds of error every layer's error type falls into: one core under the io, space, lsm,
//! hash and table error enums.
//!
//! Each layer keeps its own `#[non_exhaustive]` error enum, whose variants carry what that
//! layer knows (a path, a byte offset, a column's name). A caller that handles errors of
//! several engines the same way (the C ABI, the Python binding, a server) asks each error
//! its [`ErrorKind`] instead of matching every engine's variants one by one; an error that
//! wraps a lower layer's (`shale_space::Error::Io`, `shale_lsm::Error::Space`, ...) has the
//! wrapped error's kind. Each kind is what a caller can act on, and its documentation says
//! how.

use std::fmt;

/// What kind of error an error of any shale layer is, and so what its caller can do about it.
///
/// Every error type of the io, space, lsm, hash and table crates has a `kind()` method that
/// returns one, total over its variants. The kinds are those the variants need, no more: a
/// kind is added only with an error that has it, which is why the enum is
/// `#[non_exhaustive]` (match it with a `_` arm that treats an unknown kind as
/// [`ErrorKind::Io`] would be treated: do not retry blindly, report it).
///
/// ```
/// use shale_io::{Error, ErrorKind, PathOp};
///
/// let full = Error::at_path(PathOp::Create, "/srv/db", std::io::Error::from_raw_os_error(28));
/// assert_eq!(full.kind(), ErrorKind::NoSpace);
/// assert_eq!(full.kind().as_str(), "no_space");
/// assert_eq!(Error::Busy.kind(), ErrorKind::Busy);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The device or the file system failed a request (EIO, a permission, a missing file
    /// where one was expected). After a failed write or sync the store stops
    /// ([`ErrorKind::Stopped`]); a failed read may succeed again, but is never a wrong
    /// value. What to do: look at the device and the message's path; reopen the store once
    /// it is fixed.
    Io,
    /// Persisted bytes are damaged: a checksum or structure check failed where the data was
    /// known to be complete (promise P4); never a wrong value instead. What to do: do not
    /// retry; run `shale check`, restore the store from a checkpoint or a copy.
    Corruption,
    /// The path or device holds something that is not a store of the engine that opened it:
    /// foreign bytes, another engine's store, or volumes that do not form one tiered store.
    /// Nothing was written to it. What to do: fix the path, or open it with the engine it
    /// belongs to (its message says which).
    NotAStore,
    /// The store was written by a newer shale whose format this build cannot read; nothing
    /// was written to it. What to do: open it with that newer build.
    NewerFormat,
    /// Bad options or input: an oversized key or value, an option out of range, an
    /// unaligned request, a row of the wrong shape, a column the schema does not have.
    /// Nothing was changed. What to do: fix the input; retrying it unchanged fails again.
    InvalidArgument,
    /// The backend or the machine cannot do what the options ask (no io_uring, no
    /// O_DIRECT, a device that cannot grow). What to do: choose another backend or option.
    Unsupported,
    /// No room: the device or file system is full, the volume has no free extent, or a
    /// table store's undo log has no room for an open transaction's before-images. What to
    /// do: free space (or move the store to a larger volume) and reopen the store if it
    /// stopped; for a full undo log, commit or abort the open transaction, or give the log
    /// more room.
    NoSpace,
    /// An earlier write or sync failed, so the store accepts no more writes until it is
    /// reopened (promise P5: a failed sync is never retried and trusted). Reads still work.
    /// What to do: close the store, fix the cause (often a full device), reopen it.
    Stopped,
    /// A write to a store opened read-only, or a store on a read-only file system. What to
    /// do: open it read-write (on a writable file system).
    ReadOnly,
    /// Another handle holds the store, in this process or another (the store lock), or its
    /// persistent-memory undo log. What to do: close the other handle, or wait for it.
    InUse,
    /// A queue is full (`queue_depth` requests outstanding); nothing was queued. What to do:
    /// reap some completions (or wait briefly) and submit again.
    Busy,
    /// A bound on how many of something may be open at once is reached (`max_iterators`).
    /// What to do: close one first; waiting alone does not help.
    LimitReached,
    /// A wait had a bound and reached it: a table lock not granted within `lock_timeout`
    /// (another transaction holds it, or a deadlock). The transaction is still open. What
    /// to do: abort it and run it again.
    Timeout,
    /// A key, table or column that the request needs present is absent (a retrieve of an
    /// absent key, an update-only store, an update or erase of an absent row). What to do:
    /// check the name or create it first. A plain get of an absent key is `Ok(None)`, not
    /// an error.
    NotFound,
    /// A key or table that the request needs absent is present (a store without
    /// overwrite, an insert of a present primary key, a table created twice). What to do:
    /// update it instead, or pick another name.
    AlreadyExists,
    /// The caller's buffer cannot hold the answer; nothing was copied (the error says how
    /// many bytes are needed). What to do: call again with a buffer that large.
    BufferTooSmall,
    /// State the store keeps outside its directory is not there: a table store's undo log
    /// in persistent memory (`/dev/shm`) is missing (a reboot empties it), or this store is
    /// a copy and the log it names is the original's. The store was not opened and nothing
    /// was written (promise P7). What to do: restore the file, or, if the store was closed
    /// cleanly, open it accepting the lost log (`accept_lost_undo_log`).
    LogMissing,
}

impl ErrorKind {
    /// Every kind, in declaration order (for tables, tests and bindings that list them).
    pub const ALL: &'static [ErrorKind] = &[
        ErrorKind::Io,
        ErrorKind::Corruption,
        ErrorKind::NotAStore,
        ErrorKind::NewerFormat,
        ErrorKind::InvalidArgument,
        ErrorKind::Unsupported,
        ErrorKind::NoSpace,
        ErrorKind::Stopped,
        ErrorKind::ReadOnly,
        ErrorKind::InUse,
        ErrorKind::Busy,
        ErrorKind::LimitReached,
        ErrorKind::Timeout,
        ErrorKind::NotFound,
        ErrorKind::AlreadyExists,
        ErrorKind::BufferTooSmall,
        ErrorKind::LogMissing,
    ];

    /// The kind's stable name, in snake case ("no_space", "not_a_store"): for logs,
    /// metrics and bindings. A name never changes once released.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Io => "io",
            ErrorKind::Corruption => "corruption",
            ErrorKind::NotAStore => "not_a_store",
            ErrorKind::NewerFormat => "newer_format",
            ErrorKind::InvalidArgument => "invalid_argument",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::NoSpace => "no_space",
            ErrorKind::Stopped => "stopped",
            ErrorKind::ReadOnly => "read_only",
            ErrorKind::InUse => "in_use",
            ErrorKind::Busy => "busy",
            ErrorKind::LimitReached => "limit_reached",
            ErrorKind::Timeout => "timeout",
            ErrorKind::NotFound => "not_found",
            ErrorKind::AlreadyExists => "already_exists",
            ErrorKind::BufferTooSmall => "buffer_too_small",
            ErrorKind::LogMissing => "log_missing",
        }
    }
}

/// The stable name ([`ErrorKind::as_str`]).
impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// `ALL` lists every kind once: the match fails to compile when a kind is added, and
    /// the count fails when `ALL` misses it.
    #[test]
    fn all_lists_every_kind_once_with_a_distinct_name() {
        let position = |k: ErrorKind| match k {
            ErrorKind::Io => 0,
            ErrorKind::Corruption => 1,
            ErrorKind::NotAStore => 2,
            ErrorKind::NewerFormat => 3,
            ErrorKind::InvalidArgument => 4,
            ErrorKind::Unsupported => 5,
            ErrorKind::NoSpace => 6,
            ErrorKind::Stopped => 7,
            ErrorKind::ReadOnly => 8,
            ErrorKind::InUse => 9,
            ErrorKind::Busy => 10,
            ErrorKind::LimitReached => 11,
            ErrorKind::Timeout => 12,
            ErrorKind::NotFound => 13,
            ErrorKind::AlreadyExists => 14,
            ErrorKind::BufferTooSmall => 15,
            ErrorKind::LogMissing => 16,
        };
        let positions: Vec<usize> = ErrorKind::ALL.iter().map(|&k| position(k)).collect();
        assert_eq!(positions, (0..17).collect::<Vec<_>>());
        let names: HashSet<&str> = ErrorKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(names.len(), ErrorKind::ALL.len());
        for k in ErrorKind::ALL {
            assert_eq!(k.to_string(), k.as_str());
            let name = k.as_str();
            assert!(name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'), "{name}");
        }
    }
}
