//! Bytes across the boundary: borrowing the caller's (pointer, length) pairs, and handing
//! values to the caller in memory it frees with `shale_free`.

use std::ffi::{c_char, c_void};
use std::path::PathBuf;

use crate::error::{Failure, Outcome};

/// The caller's bytes at `ptr`, `len` long; `ptr` may be NULL only when `len` is 0.
///
/// # Safety
/// A non-NULL `ptr` is valid for reads of `len` bytes for `'a`.
pub(crate) unsafe fn bytes<'a>(ptr: *const u8, len: usize, what: &str) -> Outcome<&'a [u8]> {
    if ptr.is_null() {
        return if len == 0 { Ok(&[]) } else { Err(Failure::null(what)) };
    }
    // SAFETY: the caller promises `len` readable bytes at the non-NULL `ptr`.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Like [`bytes`], but NULL means "none" (an absent bound) whatever `len` is.
///
/// # Safety
/// As [`bytes`].
pub(crate) unsafe fn optional_bytes<'a>(ptr: *const u8, len: usize) -> Option<&'a [u8]> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: the caller promises `len` readable bytes at the non-NULL `ptr`.
    Some(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// The caller's buffer at `ptr`, `len` long; `ptr` may be NULL only when `len` is 0.
///
/// # Safety
/// A non-NULL `ptr` is valid for writes of `len` bytes for `'a`, and nothing else reads or
/// writes them meanwhile.
pub(crate) unsafe fn buffer<'a>(ptr: *mut u8, len: usize, what: &str) -> Outcome<&'a mut [u8]> {
    if ptr.is_null() {
        return if len == 0 { Ok(&mut []) } else { Err(Failure::null(what)) };
    }
    // SAFETY: the caller promises `len` writable bytes at the non-NULL `ptr`, unaliased.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
}

/// A path from a NUL-terminated string (any bytes, as Unix paths are).
///
/// # Safety
/// A non-NULL `path` points at a NUL-terminated string.
pub(crate) unsafe fn path_arg(path: *const c_char) -> Outcome<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    if path.is_null() {
        return Err(Failure::null("path"));
    }
    // SAFETY: the caller promises a NUL-terminated string at the non-NULL `path`.
    let bytes = unsafe { std::ffi::CStr::from_ptr(path) }.to_bytes();
    if bytes.is_empty() {
        return Err(Failure::invalid("path is empty"));
    }
    Ok(PathBuf::from(std::ffi::OsStr::from_bytes(bytes)))
}

/// A copy of `value` in memory from malloc(3), for the caller to free with `shale_free`.
/// Never NULL for a value, even an empty one, so NULL can mean "absent".
pub(crate) fn to_caller(value: &[u8]) -> Outcome<*mut u8> {
    // SAFETY: malloc takes no pointers; at least one byte, so an empty value is not NULL.
    let p = unsafe { libc::malloc(value.len().max(1)) }.cast::<u8>();
    if p.is_null() {
        return Err(Failure::new(
            crate::error::shale_status::SHALE_INTERNAL,
            format!("out of memory for a value of {} bytes", value.len()),
        ));
    }
    // SAFETY: `p` is a new allocation of at least `value.len()` bytes that nothing else
    // holds, and cannot overlap `value`.
    unsafe { std::ptr::copy_nonoverlapping(value.as_ptr(), p, value.len()) };
    Ok(p)
}

/// Frees a value the library allocated (`shale_db_get`'s, or a `shale_kvs_event`'s).
/// NULL is ignored.
///
/// # Safety
/// `ptr` is NULL or a value the library returned, freed once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_free(ptr: *mut c_void) {
    // SAFETY: the caller promises `ptr` is NULL or came from `to_caller`'s malloc, once.
    unsafe { libc::free(ptr) };
}

/// Writes `value` through `out` when `out` is not NULL.
///
/// # Safety
/// `out` is NULL or valid for a write of one `T`.
pub(crate) unsafe fn set<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: the caller promises a non-NULL `out` is writable.
        unsafe { out.write(value) };
    }
}
