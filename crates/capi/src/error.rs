//! Status codes, error objects and the boundary every entry point goes through: arguments
//! checked, panics caught, engine errors turned into a status and an error object.

use std::ffi::{CStr, CString, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

use shale_io::ErrorKind;

/// Why a call failed; `SHALE_OK` when it did not. Every fallible call returns one as an `int`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum shale_status {
    /// Success.
    SHALE_OK = 0,
    /// A required pointer was NULL, an option or argument is out of range, or an engine
    /// refused its input (an lsm key or value too large, an empty range, a snapshot of
    /// another store).
    SHALE_INVALID_ARGUMENT = 1,
    /// kvs: a key shorter than 4 or longer than 255 bytes.
    SHALE_KEY_LENGTH = 2,
    /// kvs: a value longer than 2 MiB.
    SHALE_VALUE_TOO_LARGE = 3,
    /// The caller's buffer cannot hold the answer; nothing was copied. Where the call has a
    /// length out-parameter it holds the size needed.
    SHALE_BUFFER_TOO_SMALL = 4,
    /// kvs: the submission queue is full (`queue_depth` requests outstanding); nothing was
    /// queued and no completion will come: reap some and submit again.
    SHALE_BUSY = 5,
    /// kvs: a store with `SHALE_KVS_STORE_NO_OVERWRITE` found the key present; table: an
    /// insert of a primary key that is present.
    SHALE_KEY_EXISTS = 6,
    /// kvs: the key is absent (a retrieve, or a store with `SHALE_KVS_STORE_UPDATE_ONLY`);
    /// table: an update or erase of a primary key that is absent.
    SHALE_KEY_NOT_FOUND = 7,
    /// Persisted bytes are damaged; never a wrong value instead.
    SHALE_CORRUPTION = 8,
    /// The device or the file system failed a request.
    SHALE_IO = 9,
    /// No room left on the volume or the device.
    SHALE_NO_SPACE = 10,
    /// A write failed earlier and the store accepts no more writes: close and reopen it.
    SHALE_STOPPED = 11,
    /// The store is open already, in this process or another.
    SHALE_IN_USE = 12,
    /// A write to a store that is read-only (a read-only file system).
    SHALE_READ_ONLY = 13,
    /// The path or device holds something that is not a store of this engine (or is of a
    /// newer format), or holds nothing while `create_if_missing` is false; it was left
    /// untouched.
    SHALE_NOT_A_STORE = 14,
    /// A bug inside the library (a panic caught at the boundary), or an error this version
    /// of the ABI has no code for; the message says which.
    SHALE_INTERNAL = 15,
    /// The most iterators a kvs store allows are open; close one first.
    SHALE_TOO_MANY_ITERATORS = 16,
    /// table: no table of that name or id.
    SHALE_NO_SUCH_TABLE = 17,
    /// table: a table of that name exists already.
    SHALE_TABLE_EXISTS = 18,
    /// table: the table's schema has no column of that name.
    SHALE_NO_SUCH_COLUMN = 19,
    /// table: a cell of the wrong size for its column, or a row of the wrong number of
    /// cells.
    SHALE_WRONG_SIZE = 20,
    /// table: a lock was not granted in time (another transaction holds it, or a
    /// deadlock); the transaction is still open: abort it or retry.
    SHALE_LOCK_TIMEOUT = 21,
    /// table: the undo log has no room for a before-image, in persistent memory or in its
    /// spill area; the transaction is still open.
    SHALE_LOG_FULL = 22,
}

use shale_status::*;

/// An error: its status and a message. Owned by the caller once returned through an
/// `err` out-parameter or a `shale_kvs_event`: free it with `shale_error_free`.
pub struct shale_error {
    status: shale_status,
    message: CString,
}

/// A failure on the Rust side of the boundary: the status and its message.
#[derive(Debug)]
pub(crate) struct Failure {
    pub status: shale_status,
    pub message: String,
}

impl Failure {
    pub fn new(status: shale_status, message: impl Into<String>) -> Failure {
        Failure { status, message: message.into() }
    }

    /// An argument refused here, worded as the engines word theirs.
    pub fn invalid(message: impl std::fmt::Display) -> Failure {
        Failure::new(SHALE_INVALID_ARGUMENT, format!("invalid argument: {message}"))
    }

    /// A required pointer argument that was NULL.
    pub fn null(what: &str) -> Failure {
        Failure::invalid(format!("{what} is NULL"))
    }

    /// The error object handed to the caller.
    pub fn into_error(self) -> Box<shale_error> {
        // A message never holds a NUL byte that we put there, but an engine's message may
        // quote user input: keep what comes before it.
        let bytes: Vec<u8> =
            self.message.into_bytes().into_iter().take_while(|&b| b != 0).collect();
        let message = CString::new(bytes).expect("NUL bytes were cut");
        Box::new(shale_error { status: self.status, message })
    }
}

pub(crate) type Outcome<T> = std::result::Result<T, Failure>;

// Each engine's error becomes a status in two steps: the variants that have a code finer than
// their kind (a key too long is an invalid argument with a code of its own) are picked first,
// and every other error, a wrapped space or io error included, gets its kind's code
// (`kind_status`), so the codes the engines share are mapped in one place.

impl From<shale_hash::Error> for Failure {
    fn from(e: shale_hash::Error) -> Failure {
        use shale_hash::Error as E;
        let status = match &e {
            E::KeyLength { .. } => SHALE_KEY_LENGTH,
            E::ValueTooLarge { .. } => SHALE_VALUE_TOO_LARGE,
            E::TooManyIterators { .. } => SHALE_TOO_MANY_ITERATORS,
            _ => kind_status(e.kind()),
        };
        Failure::new(status, shale_io::Chain(&e).to_string())
    }
}

impl From<shale_lsm::Error> for Failure {
    fn from(e: shale_lsm::Error) -> Failure {
        Failure::new(kind_status(e.kind()), shale_io::Chain(&e).to_string())
    }
}

impl From<shale_table::Error> for Failure {
    fn from(e: shale_table::Error) -> Failure {
        use shale_table::Error as E;
        let status = match &e {
            E::NoSuchTable(_) => SHALE_NO_SUCH_TABLE,
            E::TableExists(_) => SHALE_TABLE_EXISTS,
            E::NoSuchColumn(_) => SHALE_NO_SUCH_COLUMN,
            E::WrongSize { .. } => SHALE_WRONG_SIZE,
            E::LogFull { .. } => SHALE_LOG_FULL,
            _ => kind_status(e.kind()),
        };
        Failure::new(status, shale_io::Chain(&e).to_string())
    }
}

/// The status of an error of this kind, for the errors whose variant has no finer code.
fn kind_status(kind: ErrorKind) -> shale_status {
    match kind {
        // The backend cannot do what was asked: the device's failure, as it always was here.
        ErrorKind::Io | ErrorKind::Unsupported => SHALE_IO,
        ErrorKind::Corruption => SHALE_CORRUPTION,
        ErrorKind::NotAStore | ErrorKind::NewerFormat => SHALE_NOT_A_STORE,
        ErrorKind::InvalidArgument => SHALE_INVALID_ARGUMENT,
        ErrorKind::NoSpace => SHALE_NO_SPACE,
        ErrorKind::Stopped => SHALE_STOPPED,
        ErrorKind::ReadOnly => SHALE_READ_ONLY,
        ErrorKind::InUse => SHALE_IN_USE,
        ErrorKind::Busy => SHALE_BUSY,
        // Only a table lock's wait is bounded.
        ErrorKind::Timeout => SHALE_LOCK_TIMEOUT,
        ErrorKind::NotFound => SHALE_KEY_NOT_FOUND,
        ErrorKind::AlreadyExists => SHALE_KEY_EXISTS,
        ErrorKind::BufferTooSmall => SHALE_BUFFER_TOO_SMALL,
        // No code of this version of the ABI says these (a table store's missing undo log;
        // a limit other than the kvs iterators, which have their own code): the message
        // says which.
        ErrorKind::LimitReached | ErrorKind::LogMissing => SHALE_INTERNAL,
        _ => SHALE_INTERNAL,
    }
}

/// Runs an entry point's body: a panic becomes `SHALE_INTERNAL` instead of unwinding into C,
/// and a failure is reported through `err` (when not NULL) as well as returned.
///
/// # Safety
/// `err` is NULL or valid for a write of one pointer.
pub(crate) unsafe fn boundary(
    err: *mut *mut shale_error,
    body: impl FnOnce() -> Outcome<()>,
) -> c_int {
    let failure = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => return SHALE_OK as c_int,
        Ok(Err(f)) => f,
        Err(panic) => Failure::new(SHALE_INTERNAL, panic_message(&panic)),
    };
    let status = failure.status;
    if !err.is_null() {
        // SAFETY: the caller promises a non-NULL `err` is writable; the box is the caller's.
        unsafe { err.write(Box::into_raw(failure.into_error())) };
    }
    status as c_int
}

/// Runs an entry point that cannot report an error (a destructor, a move of an iterator):
/// a panic is caught and dropped, and `fallback` returned instead.
pub(crate) fn guard<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(fallback)
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into());
    format!("internal error (a bug in shale, please report it): {what}")
}

/// The message of `err`: a NUL-terminated string owned by the error, valid until
/// `shale_error_free(err)`. An empty string for a NULL `err`.
///
/// # Safety
/// `err` is NULL or an error the library returned and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_error_message(err: *const shale_error) -> *const c_char {
    // SAFETY: the caller promises `err` is NULL or a live error.
    match unsafe { err.as_ref() } {
        Some(e) => e.message.as_ptr(),
        None => c"".as_ptr(),
    }
}

/// The status of `err` (a `shale_status`); `SHALE_OK` for a NULL `err`.
///
/// # Safety
/// `err` is NULL or an error the library returned and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_error_status(err: *const shale_error) -> c_int {
    // SAFETY: the caller promises `err` is NULL or a live error.
    match unsafe { err.as_ref() } {
        Some(e) => e.status as c_int,
        None => SHALE_OK as c_int,
    }
}

/// Frees an error. NULL is ignored.
///
/// # Safety
/// `err` is NULL or an error the library returned, freed once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_error_free(err: *mut shale_error) {
    if !err.is_null() {
        // SAFETY: the caller promises `err` came from `Box::into_raw` here and is freed once.
        guard((), || drop(unsafe { Box::from_raw(err) }));
    }
}

/// The name of a status code ("SHALE_OK", "SHALE_BUSY", ...), a static string; "SHALE_?"
/// for a number that is no status.
#[unsafe(no_mangle)]
pub extern "C" fn shale_status_name(status: c_int) -> *const c_char {
    let name: &'static CStr = match status {
        0 => c"SHALE_OK",
        1 => c"SHALE_INVALID_ARGUMENT",
        2 => c"SHALE_KEY_LENGTH",
        3 => c"SHALE_VALUE_TOO_LARGE",
        4 => c"SHALE_BUFFER_TOO_SMALL",
        5 => c"SHALE_BUSY",
        6 => c"SHALE_KEY_EXISTS",
        7 => c"SHALE_KEY_NOT_FOUND",
        8 => c"SHALE_CORRUPTION",
        9 => c"SHALE_IO",
        10 => c"SHALE_NO_SPACE",
        11 => c"SHALE_STOPPED",
        12 => c"SHALE_IN_USE",
        13 => c"SHALE_READ_ONLY",
        14 => c"SHALE_NOT_A_STORE",
        15 => c"SHALE_INTERNAL",
        16 => c"SHALE_TOO_MANY_ITERATORS",
        17 => c"SHALE_NO_SUCH_TABLE",
        18 => c"SHALE_TABLE_EXISTS",
        19 => c"SHALE_NO_SUCH_COLUMN",
        20 => c"SHALE_WRONG_SIZE",
        21 => c"SHALE_LOCK_TIMEOUT",
        22 => c"SHALE_LOG_FULL",
        _ => c"SHALE_?",
    };
    name.as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_an_internal_error_not_an_unwind() {
        let mut err: *mut shale_error = std::ptr::null_mut();
        // SAFETY: `err` is a live out-parameter.
        let rc = unsafe { boundary(&mut err, || panic!("the invariant broke")) };
        assert_eq!(rc, SHALE_INTERNAL as c_int);
        // SAFETY: the error just returned, freed once.
        unsafe {
            assert_eq!(shale_error_status(err), rc);
            let msg = CStr::from_ptr(shale_error_message(err)).to_str().unwrap();
            assert!(msg.contains("a bug in shale") && msg.contains("the invariant broke"), "{msg}");
            shale_error_free(err);
        }
        assert_eq!(guard(7, || panic!("in a destructor")), 7);
    }

    fn why() -> String {
        "why".to_string()
    }

    fn eio() -> shale_io::Error {
        shale_io::Error::Io {
            op: shale_io::OpKind::Write,
            offset: 0,
            source: std::io::Error::from_raw_os_error(libc::EIO),
        }
    }

    fn full() -> shale_io::Error {
        let enospc = std::io::Error::from_raw_os_error(libc::ENOSPC);
        shale_io::Error::at_path(shale_io::PathOp::Create, "/a", enospc)
    }

    fn read_only_fs() -> shale_io::Error {
        let erofs = std::io::Error::from_raw_os_error(libc::EROFS);
        shale_io::Error::at_path(shale_io::PathOp::Create, "/a", erofs)
    }

    /// Every variant of the space layer's error with its status, as any engine wraps it.
    fn space_errors() -> Vec<(shale_space::Error, shale_status)> {
        use shale_io::Error as I;
        use shale_space::Error as S;
        vec![
            (S::Io(eio()), SHALE_IO),
            (S::Io(full()), SHALE_NO_SPACE),
            (S::Io(I::Busy), SHALE_BUSY),
            (S::Io(I::Unsupported(why())), SHALE_IO),
            (S::Io(I::InvalidArgument(why())), SHALE_INVALID_ARGUMENT),
            (S::Corruption { what: why(), offset: 0 }, SHALE_CORRUPTION),
            (S::Foreign { why: why() }, SHALE_NOT_A_STORE),
            (S::NewerFormat { found: 9, supported: 3 }, SHALE_NOT_A_STORE),
            (S::Tiers(why()), SHALE_NOT_A_STORE),
            (
                S::OtherEngine {
                    found: shale_space::EngineKind::Lsm,
                    expected: shale_space::EngineKind::Table,
                },
                SHALE_NOT_A_STORE,
            ),
            (S::Io(read_only_fs()), SHALE_READ_ONLY),
            (S::InvalidArgument(why()), SHALE_INVALID_ARGUMENT),
            (S::NoSpace(why()), SHALE_NO_SPACE),
            (S::Stopped(why()), SHALE_STOPPED),
            (S::ReadOnly(why()), SHALE_READ_ONLY),
            (S::InUse(why()), SHALE_IN_USE),
        ]
    }

    /// The status of every engine's variants: the codes are the ABI's contract, so moving
    /// the mapping onto the error kinds must not have changed one.
    #[test]
    fn every_engine_error_keeps_its_status() {
        let s = why;
        for (e, status) in space_errors() {
            let msg = e.to_string();
            assert_eq!(Failure::from(shale_hash::Error::Space(e)).status, status, "hash: {msg}");
        }
        for (e, status) in space_errors() {
            let msg = e.to_string();
            assert_eq!(Failure::from(shale_lsm::Error::Space(e)).status, status, "lsm: {msg}");
        }
        for (e, status) in space_errors() {
            let msg = e.to_string();
            assert_eq!(Failure::from(shale_table::Error::Space(e)).status, status, "table: {msg}");
        }
        use shale_hash::Error as H;
        for (e, status) in [
            (H::Corruption { what: s(), offset: 0 }, SHALE_CORRUPTION),
            (H::KeyLength { len: 3, min: 4, max: 255 }, SHALE_KEY_LENGTH),
            (H::ValueTooLarge { len: 3, max: 2 }, SHALE_VALUE_TOO_LARGE),
            (H::BufferTooSmall { needed: 9 }, SHALE_BUFFER_TOO_SMALL),
            (H::KeyExists, SHALE_KEY_EXISTS),
            (H::KeyNotFound, SHALE_KEY_NOT_FOUND),
            (H::NotHashStore(s()), SHALE_NOT_A_STORE),
            (H::InvalidArgument(s()), SHALE_INVALID_ARGUMENT),
            (H::Stopped(s()), SHALE_STOPPED),
            (H::Busy, SHALE_BUSY),
            (H::TooManyIterators { max: 16 }, SHALE_TOO_MANY_ITERATORS),
        ] {
            let msg = e.to_string();
            assert_eq!(Failure::from(e).status, status, "hash: {msg}");
        }
        use shale_lsm::Error as L;
        for (e, status) in [
            (L::Io(eio()), SHALE_IO),
            (L::Io(full()), SHALE_NO_SPACE),
            (L::Corruption { what: s(), offset: 0 }, SHALE_CORRUPTION),
            (L::InvalidArgument(s()), SHALE_INVALID_ARGUMENT),
            (L::NoSpace(s()), SHALE_NO_SPACE),
            (L::Busy, SHALE_BUSY),
            (L::Stopped(s()), SHALE_STOPPED),
            (L::Space(shale_space::Error::Foreign { why: s() }), SHALE_NOT_A_STORE),
            (L::Space(shale_space::Error::Tiers(s())), SHALE_NOT_A_STORE),
            (L::InUse(s()), SHALE_IN_USE),
            (L::ReadOnly(s()), SHALE_READ_ONLY),
            (L::NotLsmStore(s()), SHALE_NOT_A_STORE),
        ] {
            let msg = e.to_string();
            assert_eq!(Failure::from(e).status, status, "lsm: {msg}");
        }
        use shale_table::Error as T;
        for (e, status) in [
            (T::Space(shale_space::Error::InUse(s())), SHALE_IN_USE),
            (T::Corruption { what: s(), offset: 0 }, SHALE_CORRUPTION),
            (T::NoSuchTable(s()), SHALE_NO_SUCH_TABLE),
            (T::TableExists(s()), SHALE_TABLE_EXISTS),
            (T::NoSuchColumn(s()), SHALE_NO_SUCH_COLUMN),
            (T::WrongSize { column: s(), expected: 4, got: 5 }, SHALE_WRONG_SIZE),
            (T::DuplicateKey, SHALE_KEY_EXISTS),
            (T::KeyNotFound, SHALE_KEY_NOT_FOUND),
            (T::NotTableStore(s()), SHALE_NOT_A_STORE),
            (T::InvalidArgument(s()), SHALE_INVALID_ARGUMENT),
            (T::UndoLogMissing { path: "/dev/shm/x".into() }, SHALE_INTERNAL),
            (T::UndoLogOfOriginal { path: "/dev/shm/x".into() }, SHALE_INTERNAL),
            (T::Stopped(s()), SHALE_STOPPED),
            (T::LockTimeout, SHALE_LOCK_TIMEOUT),
            (T::LogFull { needed: 9, capacity: 8 }, SHALE_LOG_FULL),
        ] {
            let msg = e.to_string();
            assert_eq!(Failure::from(e).status, status, "table: {msg}");
        }
    }

    #[test]
    fn a_message_is_cut_at_a_nul_byte() {
        let e = Failure::invalid("key \"a\0b\"").into_error();
        assert_eq!(e.message.to_str().unwrap(), "invalid argument: key \"a");
    }
}
