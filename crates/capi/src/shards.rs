//! A set of kvs stores, one per volume, used as one store (`shale_hash::Shards`): each key
//! goes to the store its hash picks, each store has its own worker and queues and shares
//! nothing with the others. The calls mirror the one-store calls of `kvs.rs`; iterators are
//! the same `shale_kvs_iterator`, walking every store in turn.

use std::ffi::{c_char, c_int};

use shale_hash::{IterKind, Shards};

use crate::error::{Failure, Outcome, boundary, guard, shale_error};
use crate::kvs::{
    Iter, exist_into, hash_options, key_list, retrieve_into, shale_kvs_iterator, shale_kvs_options,
    store_mode,
};
use crate::mem::{bytes, path_arg, set};

/// An open set of kvs stores. Close it with `shale_kvs_shards_close`.
pub struct shale_kvs_shards {
    shards: Shards,
}

/// The set behind a handle, or `INVALID_ARGUMENT` for NULL.
///
/// # Safety
/// `shards` is NULL or a live handle.
unsafe fn handle<'a>(shards: *const shale_kvs_shards) -> Outcome<&'a shale_kvs_shards> {
    // SAFETY: the caller promises NULL or a live handle.
    unsafe { shards.as_ref() }.ok_or_else(|| Failure::null("shards"))
}

/// Opens (or creates) a set over the `n` paths `paths[i]` (directories, volume files or
/// block devices), one store each, in that order: a set is opened again with its paths in
/// the same order (the set's membership is recorded in every volume, and a path missing,
/// swapped or from another set is refused). On success `*out` is the set's handle.
///
/// `options` (NULL for the defaults) apply to every store.
///
/// Returns `SHALE_OK`; `SHALE_INVALID_ARGUMENT` for no paths, bad options or paths that do
/// not form the recorded set; `SHALE_NOT_A_STORE`; `SHALE_CORRUPTION`; `SHALE_IO`.
///
/// # Safety
/// `paths` holds `n` NUL-terminated strings; `options` is NULL or valid; `out` is valid for
/// a write; `err` is NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_kvs_shards_open(
    paths: *const *const c_char,
    n: usize,
    options: *const shale_kvs_options,
    out: *mut *mut shale_kvs_shards,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: `err` is as the caller promises; so are the pointers the body reads.
    unsafe {
        boundary(err, || {
            if out.is_null() {
                return Err(Failure::null("out"));
            }
            if paths.is_null() || n == 0 {
                return Err(Failure::invalid("a set needs at least one path"));
            }
            let paths = (0..n).map(|i| path_arg(*paths.add(i))).collect::<Outcome<Vec<_>>>()?;
            let shards = Shards::open(&paths, hash_options(options)?)?;
            out.write(Box::into_raw(Box::new(shale_kvs_shards { shards })));
            Ok(())
        })
    }
}

/// Closes every store of the set and frees the handle. NULL is ignored.
///
/// # Safety
/// `shards` is NULL or a live handle, closed once, with no other call on it running or
/// following.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_kvs_shards_close(shards: *mut shale_kvs_shards) {
    if shards.is_null() {
        return;
    }
    // SAFETY: the caller gives the handle back, once; it came from `Box::into_raw`.
    let handle = unsafe { Box::from_raw(shards) };
    guard((), move || drop(handle));
}

/// Makes a checkpoint of the set: a new set of as many stores, store `i` at `paths[i]`
/// (`n` must be the set's count; each path must not exist, or be an empty directory),
/// opened again with `shale_kvs_shards_open` on the same paths in the same order. It holds
/// one instant of the whole set (every store and delete acknowledged before the call, on any
/// store, none submitted after it returns), while other threads go on writing; the copies
/// form a set of their own, never opened together with the original's stores. Each copy is
/// built under a temporary name beside its path; the paths are named once every copy is
/// durable. `*keys_out` (if not NULL) is set to the keys copied.
///
/// Returns `SHALE_OK`; `SHALE_INVALID_ARGUMENT` for a count other than the set's, a path
/// named twice, or one that exists and is not an empty directory (nothing there is
/// changed); `SHALE_CORRUPTION`; `SHALE_NO_SPACE`; `SHALE_IO`.
///
/// # Safety
/// `shards` is a live handle; `paths` holds `n` NUL-terminated strings; `keys_out` and
/// `err` are NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_kvs_shards_checkpoint(
    shards: *const shale_kvs_shards,
    paths: *const *const c_char,
    n: usize,
    keys_out: *mut u64,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let s = handle(shards)?;
            if paths.is_null() {
                return Err(Failure::null("paths"));
            }
            let paths = (0..n).map(|i| path_arg(*paths.add(i))).collect::<Outcome<Vec<_>>>()?;
            let keys = s.shards.checkpoint(&paths)?;
            set(keys_out, keys);
            Ok(())
        })
    }
}

/// The number of stores in the set.
///
/// # Safety
/// `shards` is a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_kvs_shards_count(shards: *const shale_kvs_shards) -> usize {
    // SAFETY: as the caller promises.
    unsafe { shards.as_ref() }.map_or(0, |s| s.shards.shards().len())
}

/// As `shale_kvs_store_tuple`, in the store the key's hash picks.
///
/// # Safety
/// As `shale_kvs_store_tuple`, with a live set handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_kvs_shards_store_tuple(
    shards: *const shale_kvs_shards,
    key: *const u8,
    key_len: usize,
    value: *const u8,
    value_len: usize,
    mode: c_int,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let s = handle(shards)?;
            let key = bytes(key, key_len, "key")?;
            let value = bytes(value, value_len, "value")?;
            s.shards.store(key, value, store_mode(mode)?)?;
            Ok(())
        })
    }
}

/// As `shale_kvs_retrieve_tuple`, from the store the key's hash picks.
///
/// # Safety
/// As `shale_kvs_retrieve_tuple`, with a live set handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_kvs_shards_retrieve_tuple(
    shards: *const shale_kvs_shards,
    key: *const u8,
    key_len: usize,
    offset: usize,
    buf: *mut u8,
    buf_len: usize,
    value_len_out: *mut usize,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let s = handle(shards)?;
            let key = bytes(key, key_len, "key")?;
            retrieve_into(s.shards.shard_of(key), key, offset, buf, buf_len, value_len_out)
        })
    }
}

/// As `shale_kvs_delete_tuple`, in the store the key's hash picks.
///
/// # Safety
/// As `shale_kvs_delete_tuple`, with a live set handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_kvs_shards_delete_tuple(
    shards: *const shale_kvs_shards,
    key: *const u8,
    key_len: usize,
    existed_out: *mut bool,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let s = handle(shards)?;
            let existed = s.shards.delete(bytes(key, key_len, "key")?)?;
            set(existed_out, existed);
            Ok(())
        })
    }
}

/// As `shale_kvs_exist_tuples`, each key asked of the store its hash picks.
///
/// # Safety
/// As `shale_kvs_exist_tuples`, with a live set handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_kvs_shards_exist_tuples(
    shards: *const shale_kvs_shards,
    keys: *const *const u8,
    key_lens: *const usize,
    n: usize,
    bits_out: *mut u8,
    bits_len: usize,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let s = handle(shards)?;
            exist_into(key_list(keys, key_lens, n)?, bits_out, bits_len, |keys| {
                s.shards.exist(keys)
            })
        })
    }
}

/// As `shale_kvs_open_iterator`, over every store of the set in turn (it holds an iterator
/// of each store while open, so each store's limit of 16 counts it). Read it with
/// `shale_kvs_iterator_next` and close it with `shale_kvs_iterator_close`.
///
/// # Safety
/// As `shale_kvs_open_iterator`, with a live set handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_kvs_shards_open_iterator(
    shards: *const shale_kvs_shards,
    prefix: *const u8,
    bitmask: *const u8,
    with_values: bool,
    out: *mut *mut shale_kvs_iterator,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let s = handle(shards)?;
            if out.is_null() {
                return Err(Failure::null("out"));
            }
            let prefix: [u8; 4] = bytes(prefix, 4, "prefix")?.try_into().expect("4 bytes");
            let mask: [u8; 4] = bytes(bitmask, 4, "bitmask")?.try_into().expect("4 bytes");
            let kind = if with_values { IterKind::KeysAndValues } else { IterKind::Keys };
            let it = s.shards.open_iterator(prefix, mask, kind)?;
            out.write(Box::into_raw(Box::new(shale_kvs_iterator { it: Iter::Set(it) })));
            Ok(())
        })
    }
}
