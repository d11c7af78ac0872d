//! The kvs API of the hash engine (`shale_hash::HashStore`), after the SNIA KV API: tuples
//! stored, retrieved, deleted and tested for existence synchronously, or submitted with a
//! tag and reaped from the store's completion queue, whose eventfd a caller polls.
//!
//! A submission is given an id of the store's own as its engine tag, and the caller's tag
//! and the operation are kept beside it until the completion is reaped: a failed completion
//! says which operation failed, and the caller's tags need not be unique.

use std::collections::HashMap;
use std::ffi::{c_char, c_int};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use shale_hash::{
    Completion, HashOptions, HashStore, IndexMode, IterKind, KvIterator, KvRequest, Output,
    StoreMode,
};

use crate::error::{Failure, Outcome, boundary, guard, shale_error, shale_status};
use crate::mem::{buffer, bytes, path_arg, set, to_caller};

/// How to open a kvs store. Start from `shale_kvs_options_default()` and change fields.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct shale_kvs_options {
    /// Requests submitted and not yet completed, at most (1 to 65536; default 64): a
    /// submission beyond it returns `SHALE_BUSY`. The synchronous calls wait for room.
    pub queue_depth: usize,
    /// Bytes of a segment of the record log (the volume's slot) of a new store: a multiple
    /// of 4096 from 4 MiB (default 8 MiB). An existing store keeps its own.
    pub segment_bytes: u64,
    /// Make a new store where the path holds none (default true).
    pub create_if_missing: bool,
    /// Where the index lives, a `shale_kvs_index_mode` (default in memory). Fixed when the
    /// store is made: opening it in the other mode is `SHALE_INVALID_ARGUMENT`.
    pub index_mode: c_int,
    /// Bytes of index pages cached in memory, with `SHALE_KVS_INDEX_BOUNDED` (at least
    /// 16384, four pages; default 16 MiB); ignored with the index in memory.
    pub index_cache_bytes: u64,
    /// Bytes of values stored and read kept in memory for the next reads of their keys
    /// (default 32 MiB; 0 turns the cache off). A read of a cached value is answered on
    /// the caller's thread.
    pub value_cache_bytes: usize,
}

/// Where a kvs store keeps its index.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum shale_kvs_index_mode {
    /// A table in memory: about 20 bytes a key, no index reads.
    SHALE_KVS_INDEX_IN_MEMORY = 0,
    /// Pages on the volume behind a cache of `index_cache_bytes`: memory stays flat as keys
    /// grow; a lookup whose page is not cached costs a page read.
    SHALE_KVS_INDEX_BOUNDED = 1,
}

/// The bounded index's page cache when the options do not say (16 MiB).
const INDEX_CACHE_BYTES_DEFAULT: u64 = 16 << 20;

/// What a store does when the key is (or is not) present.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum shale_kvs_store_mode {
    /// Store whether or not the key exists.
    SHALE_KVS_STORE_OVERWRITE = 0,
    /// Store only if the key is absent, else `SHALE_KEY_EXISTS`.
    SHALE_KVS_STORE_NO_OVERWRITE = 1,
    /// Store only if the key is present, else `SHALE_KEY_NOT_FOUND`.
    SHALE_KVS_STORE_UPDATE_ONLY = 2,
}

/// Which request a completion answers.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum shale_kvs_op {
    /// `shale_kvs_submit_store`.
    SHALE_KVS_OP_STORE = 0,
    /// `shale_kvs_submit_retrieve`.
    SHALE_KVS_OP_RETRIEVE = 1,
    /// `shale_kvs_submit_delete`.
    SHALE_KVS_OP_DELETE = 2,
    /// `shale_kvs_submit_exist`.
    SHALE_KVS_OP_EXIST = 3,
}

/// One completion, filled by `shale_kvs_get_ioevents`.
#[repr(C)]
#[derive(Debug)]
pub struct shale_kvs_event {
    /// The tag the request was submitted with.
    pub tag: u64,
    /// Its status: `SHALE_OK`, or why it failed (`SHALE_KEY_NOT_FOUND` for a retrieve of an
    /// absent key, `SHALE_KEY_EXISTS` for a store without overwrite of a present one, ...).
    pub status: c_int,
    /// Which request it was.
    pub op: shale_kvs_op,
    /// A retrieve's value, or an exist's bitmap (bit `i % 8` of byte `i / 8` set when
    /// `keys[i]` is present); NULL otherwise. The caller's: free it with
    /// `shale_kvs_free_value`.
    pub value: *mut u8,
    /// Bytes at `value`.
    pub value_len: usize,
    /// A delete: whether the key was present.
    pub existed: bool,
    /// Why it failed, when `status` is not `SHALE_OK`; NULL otherwise. The caller's: free
    /// it with `shale_error_free`.
    pub error: *mut shale_error,
}

/// An open kvs store (one shard of the hash engine). Close it with `shale_kvs_close`.
pub struct shale_kvs_store {
    store: HashStore,
    /// Submissions not yet reaped: the engine tag given to each, and the caller's tag and
    /// the operation it answers to.
    pending: Mutex<HashMap<u64, (u64, shale_kvs_op)>>,
    next_id: AtomicU64,
}

/// The default options.
#[unsafe(no_mangle)]
pub extern "C" fn shale_kvs_options_default() -> shale_kvs_options {
    let d = HashOptions::default();
    shale_kvs_options {
        queue_depth: d.queue_depth,
        segment_bytes: d.segment_bytes,
        create_if_missing: d.create_if_missing,
        index_mode: shale_kvs_index_mode::SHALE_KVS_INDEX_IN_MEMORY as c_int,
        index_cache_bytes: INDEX_CACHE_BYTES_DEFAULT,
        value_cache_bytes: d.value_cache_bytes,
    }
}

/// The store behind a handle, or `INVALID_ARGUMENT` for NULL.
///
/// # Safety
/// `store` is NULL or a live handle.
unsafe fn handle<'a>(store: *const shale_kvs_store) -> Outcome<&'a shale_kvs_store> {
    // SAFETY: the caller promises NULL or a live handle.
    unsafe { store.as_ref() }.ok_or_else(|| Failure::null("store"))
}

pub(crate) fn store_mode(mode: c_int) -> Outcome<StoreMode> {
    match mode {
        0 => Ok(StoreMode::Overwrite),
        1 => Ok(StoreMode::NoOverwrite),
        2 => Ok(StoreMode::UpdateOnly),
        _ => Err(Failure::invalid(format!("store mode {mode} is none of 0, 1, 2"))),
    }
}

/// Opens (or creates) the kvs store at `path`: a directory, which gets a volume file inside
/// it, a volume file or a block device. On success `*out` is the store's handle.
///
/// `options` may be NULL for the defaults.
///
/// Returns `SHALE_OK`; `SHALE_INVALID_ARGUMENT` for bad options; `SHALE_NOT_A_STORE` for a
/// volume of another engine or nothing there without `create_if_missing`;
/// `SHALE_CORRUPTION`; `SHALE_IO`.
///
/// # Safety
/// `path` is a NUL-terminated string; `options` is NULL or valid; `out` is valid for a
/// write; `err` is NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_kvs_open(
    path: *const c_char,
    options: *const shale_kvs_options,
    out: *mut *mut shale_kvs_store,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: `err` is as the caller promises; so are the pointers the body reads.
    unsafe {
        boundary(err, || {
            if out.is_null() {
                return Err(Failure::null("out"));
            }
            let path = path_arg(path)?;
            let opts = hash_options(options)?;
            if !opts.create_if_missing && !path.exists() {
                return Err(Failure::new(
                    shale_status::SHALE_NOT_A_STORE,
                    format!("{} does not exist and create_if_missing is false", path.display()),
                ));
            }
            let store = HashStore::open(&path, opts)?;
            let handle = shale_kvs_store {
                store,
                pending: Mutex::new(HashMap::new()),
                next_id: AtomicU64::new(0),
            };
            out.write(Box::into_raw(Box::new(handle)));
            Ok(())
        })
    }
}

/// Closes a store: completes every request still outstanding, stops its worker and frees
/// the handle (completions not yet reaped are dropped with their values). NULL is ignored.
///
/// # Safety
/// `store` is NULL or a live handle, closed once, with no other call on it running or
/// following.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_kvs_close(store: *mut shale_kvs_store) {
    if store.is_null() {
        return;
    }
    // SAFETY: the caller gives the handle back, once; it came from `Box::into_raw`.
    let handle = unsafe { Box::from_raw(store) };
    guard((), move || handle.store.close());
}

/// Makes a checkpoint of the store at `path`: a new store, in a new directory, holding the
/// state of this store at one instant (every store and delete acknowledged before the call,
/// none submitted after it returns), while other threads go on writing. A logical copy:
/// the live records are read and stored again. It is built under a temporary name in
/// `path`'s parent and renamed to `path` once durable, so a crash midway leaves nothing at
/// `path`. `*keys_out` (if not NULL) is set to the keys copied.
///
/// Returns `SHALE_OK`; `SHALE_INVALID_ARGUMENT` when `path` exists and is not an empty
/// directory (nothing there is changed); `SHALE_CORRUPTION`; `SHALE_NO_SPACE`; `SHALE_IO`.
///
/// # Safety
/// `store` is a live handle; `path` is a NUL-terminated string; `keys_out` and `err` are
/// NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_kvs_checkpoint(
    store: *const shale_kvs_store,
    path: *const c_char,
    keys_out: *mut u64,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let s = handle(store)?;
            let path = path_arg(path)?;
            let keys = s.store.checkpoint(&path)?;
            set(keys_out, keys);
            Ok(())
        })
    }
}

/// Stores `value` under `key`, durably: once this returns `SHALE_OK` the pair survives a
/// crash or a power loss. `mode` is a `shale_kvs_store_mode`.
///
/// Returns `SHALE_OK`; `SHALE_KEY_LENGTH`; `SHALE_VALUE_TOO_LARGE`; `SHALE_KEY_EXISTS` or
/// `SHALE_KEY_NOT_FOUND` by `mode`; `SHALE_INVALID_ARGUMENT` for an unknown mode;
/// `SHALE_STOPPED` after an earlier failed write; `SHALE_IO`.
///
/// # Safety
/// `store` is a live handle; `key` and `value` are readable for their lengths; `err` is
/// NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_kvs_store_tuple(
    store: *const shale_kvs_store,
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
            let s = handle(store)?;
            let key = bytes(key, key_len, "key")?;
            let value = bytes(value, value_len, "value")?;
            s.store.store(key, value, store_mode(mode)?)?;
            Ok(())
        })
    }
}

/// Copies the value of `key` from byte `offset` on into `buf` (`buf_len` bytes) and sets
/// `*value_len_out` to the bytes copied (the value's length less `offset`).
///
/// Returns `SHALE_OK`; `SHALE_KEY_NOT_FOUND` for an absent key; `SHALE_BUFFER_TOO_SMALL`
/// when `buf_len` is less than the bytes to copy, with that size in `*value_len_out` and
/// nothing copied (so `buf = NULL, buf_len = 0` asks for the size);
/// `SHALE_INVALID_ARGUMENT` for an `offset` past the value's end; `SHALE_KEY_LENGTH`;
/// `SHALE_CORRUPTION`; `SHALE_IO`. `value_len_out` may be NULL.
///
/// # Safety
/// `store` is a live handle; `key` is readable and `buf` writable for their lengths;
/// `value_len_out` and `err` are NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_kvs_retrieve_tuple(
    store: *const shale_kvs_store,
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
            let s = handle(store)?;
            retrieve_into(
                &s.store,
                bytes(key, key_len, "key")?,
                offset,
                buf,
                buf_len,
                value_len_out,
            )
        })
    }
}

/// The engine options of a C caller's options (NULL: the defaults); an unknown index mode
/// is `INVALID_ARGUMENT` (the engine checks the sizes when it opens).
///
/// # Safety
/// `options` is NULL or valid.
pub(crate) unsafe fn hash_options(options: *const shale_kvs_options) -> Outcome<HashOptions> {
    // SAFETY: the caller promises NULL or valid.
    let given = unsafe { options.as_ref() }.copied().unwrap_or_else(|| shale_kvs_options_default());
    let index = match given.index_mode {
        0 => IndexMode::InMemory,
        1 => IndexMode::Bounded { cache_bytes: given.index_cache_bytes },
        m => return Err(Failure::invalid(format!("index_mode {m} is none of 0, 1"))),
    };
    Ok(HashOptions {
        queue_depth: given.queue_depth,
        segment_bytes: given.segment_bytes,
        create_if_missing: given.create_if_missing,
        index,
        value_cache_bytes: given.value_cache_bytes,
        ..HashOptions::default()
    })
}

/// `shale_kvs_retrieve_tuple`'s body over `store`: copies the value of `key` from `offset`
/// into the caller's buffer, the size needed in `*value_len_out` when it is too small.
///
/// # Safety
/// `buf` is writable for `buf_len`; `value_len_out` is NULL or valid for a write.
pub(crate) unsafe fn retrieve_into(
    store: &HashStore,
    key: &[u8],
    offset: usize,
    buf: *mut u8,
    buf_len: usize,
    value_len_out: *mut usize,
) -> Outcome<()> {
    // SAFETY: as the caller promises.
    let buf = unsafe { buffer(buf, buf_len, "buf")? };
    match store.retrieve_into(key, offset, buf) {
        Ok(Some(copied)) => {
            // SAFETY: as the caller promises.
            unsafe { set(value_len_out, copied) };
            Ok(())
        }
        Ok(None) => Err(not_found()),
        Err(shale_hash::Error::BufferTooSmall { needed }) => {
            // SAFETY: as the caller promises.
            unsafe { set(value_len_out, needed) };
            Err(shale_hash::Error::BufferTooSmall { needed }.into())
        }
        Err(e) => Err(e.into()),
    }
}

/// `shale_kvs_exist_tuples`'s body: `exist(keys)`'s bitmap into the caller's `bits_out`.
///
/// # Safety
/// `bits_out` is writable for `bits_len` bytes.
pub(crate) unsafe fn exist_into(
    keys: Vec<&[u8]>,
    bits_out: *mut u8,
    bits_len: usize,
    exist: impl FnOnce(&[&[u8]]) -> shale_hash::Result<Vec<u8>>,
) -> Outcome<()> {
    // SAFETY: as the caller promises.
    let out = unsafe { buffer(bits_out, bits_len, "bits_out")? };
    let n = keys.len();
    let needed = n.div_ceil(8);
    if out.len() < needed {
        return Err(Failure::new(
            shale_status::SHALE_BUFFER_TOO_SMALL,
            format!("bits_out holds {} bytes: {needed} needed for {n} keys", out.len()),
        ));
    }
    let bits = exist(&keys)?;
    assert_eq!(bits.len(), needed, "one bit a key");
    out[..needed].copy_from_slice(&bits);
    Ok(())
}

pub(crate) fn not_found() -> Failure {
    Failure::new(shale_status::SHALE_KEY_NOT_FOUND, "key not found")
}

/// Deletes `key`, durably. Sets `*existed_out` (when not NULL) to whether it was present;
/// deleting an absent key is not an error.
///
/// Returns `SHALE_OK`; `SHALE_KEY_LENGTH`; `SHALE_STOPPED`; `SHALE_IO`.
///
/// # Safety
/// `store` is a live handle; `key` is readable for `key_len`; `existed_out` and `err` are
/// NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_kvs_delete_tuple(
    store: *const shale_kvs_store,
    key: *const u8,
    key_len: usize,
    existed_out: *mut bool,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let s = handle(store)?;
            let existed = s.store.delete(bytes(key, key_len, "key")?)?;
            set(existed_out, existed);
            Ok(())
        })
    }
}

/// The `n` keys `keys[i]` (`key_lens[i]` bytes each), borrowed.
///
/// # Safety
/// `keys` and `key_lens` are readable for `n` entries each, and each key for its length.
pub(crate) unsafe fn key_list<'a>(
    keys: *const *const u8,
    key_lens: *const usize,
    n: usize,
) -> Outcome<Vec<&'a [u8]>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if keys.is_null() {
        return Err(Failure::null("keys"));
    }
    if key_lens.is_null() {
        return Err(Failure::null("key_lens"));
    }
    // SAFETY: the caller promises `n` entries in each array.
    let (ptrs, lens) =
        unsafe { (std::slice::from_raw_parts(keys, n), std::slice::from_raw_parts(key_lens, n)) };
    ptrs.iter()
        .zip(lens)
        // SAFETY: the caller promises each key readable for its length.
        .map(|(&p, &len)| unsafe { bytes(p, len, "a key") })
        .collect()
}

/// Which of the `n` keys `keys[i]` (`key_lens[i]` bytes each) are present: bit `i % 8` of
/// `bits_out[i / 8]` is set when `keys[i]` is. `bits_len` must be at least `(n + 7) / 8`.
///
/// Returns `SHALE_OK`; `SHALE_BUFFER_TOO_SMALL` for a short `bits_out` (nothing written);
/// `SHALE_KEY_LENGTH` for the first bad key; `SHALE_CORRUPTION`; `SHALE_IO`.
///
/// # Safety
/// `store` is a live handle; `keys` and `key_lens` hold `n` entries, each key readable for
/// its length; `bits_out` is writable for `bits_len` bytes; `err` is NULL or valid for a
/// write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_kvs_exist_tuples(
    store: *const shale_kvs_store,
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
            let s = handle(store)?;
            exist_into(key_list(keys, key_lens, n)?, bits_out, bits_len, |keys| s.store.exist(keys))
        })
    }
}

impl shale_kvs_store {
    /// Submits `req` under a new engine tag that remembers `tag` and `op`.
    fn submit(&self, req: KvRequest<'_>, tag: u64, op: shale_kvs_op) -> Outcome<()> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        // In the table before the request can complete, and out again if it is refused.
        self.pending.lock().expect("not poisoned").insert(id, (tag, op));
        self.store.submit_tagged(req, id).map_err(|e| {
            self.pending.lock().expect("not poisoned").remove(&id);
            Failure::from(e)
        })
    }

    /// The caller's event for an engine completion.
    fn event(&self, c: Completion) -> shale_kvs_event {
        let (tag, op) = self
            .pending
            .lock()
            .expect("not poisoned")
            .remove(&c.tag)
            .expect("every completion answers a submission of this store");
        let mut ev = shale_kvs_event {
            tag,
            status: shale_status::SHALE_OK as c_int,
            op,
            value: std::ptr::null_mut(),
            value_len: 0,
            existed: false,
            error: std::ptr::null_mut(),
        };
        let filled = match c.result {
            Ok(Output::Stored) => Ok(()),
            Ok(Output::Deleted(existed)) => {
                ev.existed = existed;
                Ok(())
            }
            Ok(Output::Retrieved(None)) => Err(not_found()),
            Ok(Output::Retrieved(Some(v)) | Output::Exist(v)) => to_caller(&v).map(|p| {
                ev.value = p;
                ev.value_len = v.len();
            }),
            Err(e) => Err(Failure::from(e)),
        };
        if let Err(f) = filled {
            ev.status = f.status as c_int;
            ev.error = Box::into_raw(f.into_error());
        }
        ev
    }
}

/// Submits a store of `value` under `key` with `mode` (a `shale_kvs_store_mode`); its
/// completion, with `tag`, comes through `shale_kvs_get_ioevents` once the pair is durable
/// (or with its error). Returns at once.
///
/// Returns `SHALE_OK` (submitted: exactly one completion will come); `SHALE_BUSY` when
/// `queue_depth` requests are outstanding, and `SHALE_KEY_LENGTH`,
/// `SHALE_VALUE_TOO_LARGE` or `SHALE_INVALID_ARGUMENT`: nothing was submitted and no
/// completion will come.
///
/// # Safety
/// As `shale_kvs_store_tuple`. The key and value are copied: the caller may reuse them at
/// once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_kvs_submit_store(
    store: *const shale_kvs_store,
    key: *const u8,
    key_len: usize,
    value: *const u8,
    value_len: usize,
    mode: c_int,
    tag: u64,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let s = handle(store)?;
            let key = bytes(key, key_len, "key")?;
            let value = bytes(value, value_len, "value")?;
            let req = KvRequest::Store { key, value, mode: store_mode(mode)? };
            s.submit(req, tag, shale_kvs_op::SHALE_KVS_OP_STORE)
        })
    }
}

/// Submits a retrieve of `key`'s whole value; its completion carries the value (the
/// caller's, freed with `shale_kvs_free_value`) or `SHALE_KEY_NOT_FOUND`.
///
/// Returns as `shale_kvs_submit_store`.
///
/// # Safety
/// `store` is a live handle; `key` is readable for `key_len`; `err` is NULL or valid for a
/// write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_kvs_submit_retrieve(
    store: *const shale_kvs_store,
    key: *const u8,
    key_len: usize,
    tag: u64,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let s = handle(store)?;
            let req = KvRequest::Retrieve { key: bytes(key, key_len, "key")? };
            s.submit(req, tag, shale_kvs_op::SHALE_KVS_OP_RETRIEVE)
        })
    }
}

/// Submits a delete of `key`; its completion's `existed` says whether it was present.
///
/// Returns as `shale_kvs_submit_store`.
///
/// # Safety
/// As `shale_kvs_submit_retrieve`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_kvs_submit_delete(
    store: *const shale_kvs_store,
    key: *const u8,
    key_len: usize,
    tag: u64,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let s = handle(store)?;
            let req = KvRequest::Delete { key: bytes(key, key_len, "key")? };
            s.submit(req, tag, shale_kvs_op::SHALE_KVS_OP_DELETE)
        })
    }
}

/// Submits an exist of `n` keys (as `shale_kvs_exist_tuples`); its completion carries the
/// bitmap in `value` (`(n + 7) / 8` bytes, the caller's).
///
/// Returns as `shale_kvs_submit_store`.
///
/// # Safety
/// `store` is a live handle; `keys` and `key_lens` hold `n` entries, each key readable for
/// its length; `err` is NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_kvs_submit_exist(
    store: *const shale_kvs_store,
    keys: *const *const u8,
    key_lens: *const usize,
    n: usize,
    tag: u64,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let s = handle(store)?;
            let keys = key_list(keys, key_lens, n)?;
            s.submit(KvRequest::Exist { keys: &keys }, tag, shale_kvs_op::SHALE_KVS_OP_EXIST)
        })
    }
}

/// Fills up to `max` entries of `events` with completions, oldest first, and returns how
/// many it filled (0 when none wait, or for a NULL `store` or `events`). Never blocks: wait
/// for `shale_kvs_completion_fd` to be readable between calls. Each event's `value` and
/// `error` become the caller's.
///
/// # Safety
/// `store` is NULL or a live handle; `events` is NULL or writable for `max` entries.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_kvs_get_ioevents(
    store: *const shale_kvs_store,
    events: *mut shale_kvs_event,
    max: usize,
) -> usize {
    if events.is_null() {
        return 0;
    }
    // SAFETY: the caller promises NULL or a live handle.
    let Some(s) = (unsafe { store.as_ref() }) else {
        return 0;
    };
    guard(0, || {
        let mut done = Vec::new();
        let n = s.store.poll_completions(&mut done, max);
        for (i, c) in done.into_iter().enumerate() {
            // SAFETY: `i < n <= max`, and the caller promises `max` writable entries.
            unsafe { events.add(i).write(s.event(c)) };
        }
        n
    })
}

/// An eventfd that is readable while completions wait: put it in epoll(7) or poll(2), and
/// call `shale_kvs_get_ioevents` when it fires. Owned by the store, valid until
/// `shale_kvs_close`: do not close or read it. -1 for a NULL `store`.
///
/// # Safety
/// `store` is NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_kvs_completion_fd(store: *const shale_kvs_store) -> c_int {
    // SAFETY: the caller promises NULL or a live handle.
    match unsafe { store.as_ref() } {
        Some(s) => s.store.completion_fd(),
        None => -1,
    }
}

/// Frees an event's value (a retrieve's value or an exist's bitmap). NULL is ignored.
///
/// # Safety
/// `value` is NULL or a `shale_kvs_event`'s value, freed once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_kvs_free_value(value: *mut u8) {
    // SAFETY: as the caller promises; event values come from the same allocator.
    unsafe { crate::mem::shale_free(value.cast()) };
}

/// An open iterator over a kvs store's keys (`shale_kvs_open_iterator`); used from one thread
/// at a time, closed with `shale_kvs_iterator_close`.
pub struct shale_kvs_iterator {
    pub(crate) it: Iter,
}

/// The engine iterator behind a handle: over one store, or over every store of a set.
pub(crate) enum Iter {
    One(KvIterator),
    Set(shale_hash::ShardsIterator),
}

impl Iter {
    fn next_batch(&mut self, max: usize) -> shale_hash::Result<Vec<shale_hash::IterEntry>> {
        match self {
            Iter::One(it) => it.next_batch(max),
            Iter::Set(it) => it.next_batch(max),
        }
    }
}

/// One entry of an iterator batch: a key and, for an iterator opened `with_values`, its
/// value. Both are the library's memory, freed by `shale_kvs_free_entries`.
#[repr(C)]
#[derive(Debug)]
pub struct shale_kvs_entry {
    /// The key.
    pub key: *mut u8,
    /// Its length.
    pub key_len: usize,
    /// The value, or NULL for a keys-only iterator.
    pub value: *mut u8,
    /// Its length (0 for a keys-only iterator).
    pub value_len: usize,
}

/// Opens an iterator over the keys whose first four bytes match `prefix` under `bitmask`
/// (`key[i] & bitmask[i] == prefix[i] & bitmask[i]` for `i` in 0..4), returning keys, or
/// keys and values when `with_values`. Each key live at the open, and still live when
/// reached, comes back exactly once, with its value as it is then; no order is promised.
/// The store frees no space while an iterator is open: close iterators when done. An
/// iterator may outlive its store's handle, but should not.
///
/// Returns `SHALE_OK`; `SHALE_TOO_MANY_ITERATORS` when the store's limit (16) is open.
///
/// # Safety
/// `store` is a live handle; `prefix` and `bitmask` are readable for 4 bytes; `out` is
/// valid for a write; `err` is NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_kvs_open_iterator(
    store: *const shale_kvs_store,
    prefix: *const u8,
    bitmask: *const u8,
    with_values: bool,
    out: *mut *mut shale_kvs_iterator,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let s = handle(store)?;
            if out.is_null() {
                return Err(Failure::null("out"));
            }
            let prefix: [u8; 4] = bytes(prefix, 4, "prefix")?.try_into().expect("4 bytes");
            let mask: [u8; 4] = bytes(bitmask, 4, "bitmask")?.try_into().expect("4 bytes");
            let kind = if with_values { IterKind::KeysAndValues } else { IterKind::Keys };
            let it = s.store.open_iterator(prefix, mask, kind)?;
            out.write(Box::into_raw(Box::new(shale_kvs_iterator { it: Iter::One(it) })));
            Ok(())
        })
    }
}

/// Fills `entries` with up to `max` entries and sets `*count_out` to how many; 0 means the
/// iteration is over. Free the filled entries with `shale_kvs_free_entries`.
///
/// Returns `SHALE_OK`; `SHALE_CORRUPTION`; `SHALE_IO`.
///
/// # Safety
/// `iter` is a live iterator; `entries` is writable for `max` entries; `count_out` is valid
/// for a write; `err` is NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_kvs_iterator_next(
    iter: *mut shale_kvs_iterator,
    entries: *mut shale_kvs_entry,
    max: usize,
    count_out: *mut usize,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let it = iter.as_mut().ok_or_else(|| Failure::null("iter"))?;
            if count_out.is_null() || (entries.is_null() && max > 0) {
                return Err(Failure::null("entries or count_out"));
            }
            let batch = it.it.next_batch(max)?;
            let mut filled = 0;
            for (key, value) in &batch {
                let k = match to_caller(key) {
                    Ok(k) => k,
                    Err(e) => {
                        shale_kvs_free_entries(entries, filled);
                        return Err(e);
                    }
                };
                let (v, v_len) = match value.as_deref().map(to_caller).transpose() {
                    Ok(v) => {
                        (v.unwrap_or(std::ptr::null_mut()), value.as_ref().map_or(0, Vec::len))
                    }
                    Err(e) => {
                        libc::free(k.cast());
                        shale_kvs_free_entries(entries, filled);
                        return Err(e);
                    }
                };
                entries.add(filled).write(shale_kvs_entry {
                    key: k,
                    key_len: key.len(),
                    value: v,
                    value_len: v_len,
                });
                filled += 1;
            }
            count_out.write(filled);
            Ok(())
        })
    }
}

/// Frees the keys and values of `count` entries filled by `shale_kvs_iterator_next` (not
/// the array itself, which is the caller's).
///
/// # Safety
/// `entries` holds `count` entries filled by `shale_kvs_iterator_next` and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_kvs_free_entries(entries: *mut shale_kvs_entry, count: usize) {
    if entries.is_null() {
        return;
    }
    for i in 0..count {
        // SAFETY: the caller promises `count` filled entries whose pointers came from
        // `to_caller` (malloc) or are NULL, freed once.
        unsafe {
            let e = &mut *entries.add(i);
            libc::free(e.key.cast());
            libc::free(e.value.cast());
            e.key = std::ptr::null_mut();
            e.value = std::ptr::null_mut();
        }
    }
}

/// Closes an iterator. NULL is ignored.
///
/// # Safety
/// `iter` is NULL or a live iterator, closed once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_kvs_iterator_close(iter: *mut shale_kvs_iterator) {
    if !iter.is_null() {
        // SAFETY: the caller gives the iterator back, once; it came from `Box::into_raw`.
        guard((), || drop(unsafe { Box::from_raw(iter) }));
    }
}
