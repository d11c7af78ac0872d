//! The lsm engine's API (`shale_lsm::Db`): put, get, delete, atomic write batches,
//! snapshots and iterators.
//!
//! A `shale_db` holds its `Db` in an `Arc`, and every snapshot and iterator holds a clone:
//! a snapshot or iterator used after `shale_db_close` still reads a live store, never freed
//! memory. The store closes when the last of them goes.

use std::ffi::{c_char, c_int};
use std::sync::Arc;

use shale_lsm::{Db, DbIterator, Options, ReadOptions, Snapshot, WriteBatch, WriteOptions};

use crate::error::{Failure, Outcome, boundary, guard, shale_error};
use crate::mem::{bytes, optional_bytes, path_arg, set, to_caller};

/// How to open an lsm store. Start from `shale_db_options_default()` and change fields.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct shale_db_options {
    /// Make a new store where the path holds none (default true).
    pub create_if_missing: bool,
    /// Bytes a memtable holds before it is flushed (RocksDB's `write_buffer_size`; default
    /// 64 MiB). A new store's WAL area is sized from it.
    pub write_buffer_size: usize,
    /// Byte budget of the block cache (default 32 MiB).
    pub block_cache_size: usize,
}

/// An open lsm store. Close it with `shale_db_close`.
pub struct shale_db {
    db: Arc<Db>,
}

/// A consistent view of a store as of its creation; reads through it see exactly the
/// writes before it. Release it with `shale_db_snapshot_release`.
pub struct shale_snapshot {
    shared: Arc<SnapshotShared>,
}

/// A snapshot and the store it belongs to, shared with the iterators reading through it.
struct SnapshotShared {
    db: Arc<Db>,
    snapshot: Snapshot,
}

/// An ordered iterator over a store (as of a snapshot, within bounds). Destroy it with
/// `shale_db_iter_destroy`.
pub struct shale_iterator {
    iter: DbIterator,
    /// Keeps the store, and the snapshot read through, alive while the iterator is.
    _db: Arc<Db>,
    _snapshot: Option<Arc<SnapshotShared>>,
}

/// A batch of puts and deletes, applied atomically by `shale_db_write`. Destroy it with
/// `shale_writebatch_destroy`.
pub struct shale_writebatch {
    batch: WriteBatch,
}

/// The default options.
#[unsafe(no_mangle)]
pub extern "C" fn shale_db_options_default() -> shale_db_options {
    let d = Options::default();
    shale_db_options {
        create_if_missing: d.volume.create_if_blank,
        write_buffer_size: d.write_buffer_bytes,
        block_cache_size: d.block_cache_bytes,
    }
}

/// # Safety
/// `db` is NULL or a live handle.
unsafe fn db_ref<'a>(db: *const shale_db) -> Outcome<&'a shale_db> {
    // SAFETY: the caller promises NULL or a live handle.
    unsafe { db.as_ref() }.ok_or_else(|| Failure::null("db"))
}

/// The read options of a read through `snapshot` (NULL: the latest state), checking that
/// the snapshot belongs to `db`.
///
/// # Safety
/// `snapshot` is NULL or a snapshot that stays alive for `'a` (the options borrow it).
unsafe fn read_options<'a>(
    db: &shale_db,
    snapshot: *const shale_snapshot,
) -> Outcome<(ReadOptions<'a>, Option<Arc<SnapshotShared>>)> {
    // SAFETY: the caller promises NULL or a snapshot alive for 'a.
    let Some(snap) = (unsafe { snapshot.as_ref() }) else {
        return Ok((ReadOptions::default(), None));
    };
    if !Arc::ptr_eq(&snap.shared.db, &db.db) {
        return Err(Failure::invalid("the snapshot belongs to another store"));
    }
    let opts = ReadOptions { snapshot: Some(&snap.shared.snapshot), ..ReadOptions::default() };
    Ok((opts, Some(snap.shared.clone())))
}

/// Opens (or creates) the lsm store at `path` (a directory, created if missing, or a volume
/// file or block device), recovering it after a crash. On success `*out` is its handle.
///
/// `options` may be NULL for the defaults.
///
/// Returns `SHALE_OK`; `SHALE_INVALID_ARGUMENT` for bad options; `SHALE_IN_USE` when the
/// store is open already; `SHALE_NOT_A_STORE` for a volume of another engine or a newer
/// format; `SHALE_CORRUPTION`; `SHALE_IO`.
///
/// # Safety
/// `path` is a NUL-terminated string; `options` is NULL or valid; `out` is valid for a
/// write; `err` is NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_db_open(
    path: *const c_char,
    options: *const shale_db_options,
    out: *mut *mut shale_db,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            if out.is_null() {
                return Err(Failure::null("out"));
            }
            let path = path_arg(path)?;
            let given = options.as_ref().copied().unwrap_or_else(|| shale_db_options_default());
            let mut opts = Options {
                write_buffer_bytes: given.write_buffer_size,
                block_cache_bytes: given.block_cache_size,
                ..Options::default()
            };
            opts.volume.create_if_blank = given.create_if_missing;
            if !given.create_if_missing && !path.exists() {
                return Err(Failure::new(
                    crate::error::shale_status::SHALE_NOT_A_STORE,
                    format!("{} does not exist and create_if_missing is false", path.display()),
                ));
            }
            let db = Db::open(&path, opts)?;
            out.write(Box::into_raw(Box::new(shale_db { db: Arc::new(db) })));
            Ok(())
        })
    }
}

/// Closes a store and frees the handle: flushes its memtables and stops its background
/// work. If snapshots or iterators of it are still alive, the handle is freed but the store
/// stays open until the last of them is released (then it closes as after a crash-safe
/// drop: nothing acknowledged is lost, and SHALE_OK is returned now). NULL is ignored.
///
/// Returns `SHALE_OK`, or the flush's error (the handle is freed either way).
///
/// # Safety
/// `db` is NULL or a live handle, closed once, with no other call on it running or
/// following; `err` is NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_db_close(db: *mut shale_db, err: *mut *mut shale_error) -> c_int {
    if db.is_null() {
        return crate::error::shale_status::SHALE_OK as c_int;
    }
    // SAFETY: the caller gives the handle back, once; it came from `Box::into_raw`.
    let handle = unsafe { Box::from_raw(db) };
    // SAFETY: `err` is as the caller promises.
    unsafe {
        boundary(err, move || match Arc::try_unwrap(handle.db) {
            Ok(db) => Ok(db.close()?),
            // Snapshots or iterators hold it: the last of them drops it.
            Err(_shared) => Ok(()),
        })
    }
}

/// Makes a checkpoint of the store at `path`: a new store, in a new directory, holding the
/// state of this store at one snapshot (every write acknowledged before the call, every
/// batch whole), while other threads go on writing (RocksDB's `CreateCheckpoint`). A
/// logical copy: the data is read and written again. It is built under a temporary name in
/// `path`'s parent and renamed to `path` once durable, so a crash midway leaves nothing at
/// `path`. `*entries_out` (if not NULL) is set to the entries copied.
///
/// Returns `SHALE_OK`; `SHALE_INVALID_ARGUMENT` when `path` exists and is not an empty
/// directory (nothing there is changed); `SHALE_CORRUPTION`; `SHALE_NO_SPACE`; `SHALE_IO`.
///
/// # Safety
/// `db` is a live handle; `path` is a NUL-terminated string; `entries_out` and `err` are
/// NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_db_checkpoint(
    db: *const shale_db,
    path: *const c_char,
    entries_out: *mut u64,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let d = db_ref(db)?;
            let path = path_arg(path)?;
            let entries = d.db.checkpoint(&path)?;
            set(entries_out, entries);
            Ok(())
        })
    }
}

/// Sets `key` to `value`. With `sync` the call returns once the write is durable (it
/// survives power loss); without, once it survives a crash of the process.
///
/// Returns `SHALE_OK`; `SHALE_INVALID_ARGUMENT` for an oversized key or value;
/// `SHALE_STOPPED` after an earlier failed write; `SHALE_NO_SPACE`; `SHALE_IO`.
///
/// # Safety
/// `db` is a live handle; `key` and `value` are readable for their lengths; `err` is NULL
/// or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_db_put(
    db: *const shale_db,
    key: *const u8,
    key_len: usize,
    value: *const u8,
    value_len: usize,
    sync: bool,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let d = db_ref(db)?;
            let mut batch = WriteBatch::new();
            batch.put(bytes(key, key_len, "key")?, bytes(value, value_len, "value")?);
            Ok(d.db.write(&batch, &WriteOptions { sync })?)
        })
    }
}

/// Deletes `key` (deleting an absent key is not an error). `sync` as `shale_db_put`.
///
/// Returns as `shale_db_put`.
///
/// # Safety
/// `db` is a live handle; `key` is readable for `key_len`; `err` is NULL or valid for a
/// write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_db_delete(
    db: *const shale_db,
    key: *const u8,
    key_len: usize,
    sync: bool,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let d = db_ref(db)?;
            let mut batch = WriteBatch::new();
            batch.delete(bytes(key, key_len, "key")?);
            Ok(d.db.write(&batch, &WriteOptions { sync })?)
        })
    }
}

/// Reads `key`, as of `snapshot` (NULL: the latest state). A present key sets `*value_out`
/// to a copy of its value (the caller's: free it with `shale_free`; never NULL, even for an
/// empty value) and `*value_len_out` to its length; an absent key sets `*value_out` to NULL
/// and `*value_len_out` to 0 and returns `SHALE_OK`.
///
/// Returns `SHALE_OK`; `SHALE_INVALID_ARGUMENT` (a snapshot of another store);
/// `SHALE_CORRUPTION`; `SHALE_IO`.
///
/// # Safety
/// `db` is a live handle; `snapshot` is NULL or a live snapshot; `key` is readable for
/// `key_len`; `value_out` and `value_len_out` are valid for a write; `err` is NULL or valid
/// for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_db_get(
    db: *const shale_db,
    snapshot: *const shale_snapshot,
    key: *const u8,
    key_len: usize,
    value_out: *mut *mut u8,
    value_len_out: *mut usize,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let d = db_ref(db)?;
            if value_out.is_null() {
                return Err(Failure::null("value_out"));
            }
            if value_len_out.is_null() {
                return Err(Failure::null("value_len_out"));
            }
            let key = bytes(key, key_len, "key")?;
            let (opts, _snapshot) = read_options(d, snapshot)?;
            let (ptr, len) = match d.db.get_opt(key, &opts)? {
                Some(v) => (to_caller(&v)?, v.len()),
                None => (std::ptr::null_mut(), 0),
            };
            value_out.write(ptr);
            value_len_out.write(len);
            Ok(())
        })
    }
}

/// A new, empty write batch (never NULL).
#[unsafe(no_mangle)]
pub extern "C" fn shale_writebatch_create() -> *mut shale_writebatch {
    Box::into_raw(Box::new(shale_writebatch { batch: WriteBatch::new() }))
}

/// # Safety
/// `batch` is NULL or a live batch, used by this thread only.
unsafe fn batch_mut<'a>(batch: *mut shale_writebatch) -> Outcome<&'a mut shale_writebatch> {
    // SAFETY: the caller promises NULL or a live batch that no other thread uses now.
    unsafe { batch.as_mut() }.ok_or_else(|| Failure::null("batch"))
}

/// Adds a put of `value` under `key` to the batch (copied: the caller may reuse them).
///
/// Returns `SHALE_OK` or `SHALE_INVALID_ARGUMENT` for a NULL pointer. Key and value sizes
/// are checked by `shale_db_write`.
///
/// # Safety
/// `batch` is a live batch used by one thread at a time; `key` and `value` are readable for
/// their lengths; `err` is NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_writebatch_put(
    batch: *mut shale_writebatch,
    key: *const u8,
    key_len: usize,
    value: *const u8,
    value_len: usize,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let b = batch_mut(batch)?;
            b.batch.put(bytes(key, key_len, "key")?, bytes(value, value_len, "value")?);
            Ok(())
        })
    }
}

/// Adds a delete of `key` to the batch.
///
/// Returns as `shale_writebatch_put`.
///
/// # Safety
/// `batch` is a live batch used by one thread at a time; `key` is readable for `key_len`;
/// `err` is NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_writebatch_delete(
    batch: *mut shale_writebatch,
    key: *const u8,
    key_len: usize,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let b = batch_mut(batch)?;
            b.batch.delete(bytes(key, key_len, "key")?);
            Ok(())
        })
    }
}

/// Operations in the batch (0 for NULL).
///
/// # Safety
/// `batch` is NULL or a live batch used by one thread at a time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_writebatch_count(batch: *const shale_writebatch) -> usize {
    // SAFETY: the caller promises NULL or a live batch.
    unsafe { batch.as_ref() }.map_or(0, |b| b.batch.len())
}

/// Empties the batch, to fill it again. NULL is ignored.
///
/// # Safety
/// `batch` is NULL or a live batch used by one thread at a time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_writebatch_clear(batch: *mut shale_writebatch) {
    // SAFETY: the caller promises NULL or a live batch that no other thread uses now.
    if let Some(b) = unsafe { batch.as_mut() } {
        b.batch = WriteBatch::new();
    }
}

/// Frees a batch. NULL is ignored.
///
/// # Safety
/// `batch` is NULL or a live batch, destroyed once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_writebatch_destroy(batch: *mut shale_writebatch) {
    if !batch.is_null() {
        // SAFETY: the caller gives the batch back, once; it came from `Box::into_raw`.
        guard((), || drop(unsafe { Box::from_raw(batch) }));
    }
}

/// Applies every operation of `batch` atomically, in order (the batch is left as it was).
/// `sync` as `shale_db_put`.
///
/// Returns as `shale_db_put`.
///
/// # Safety
/// `db` is a live handle; `batch` is a live batch that no other thread changes meanwhile;
/// `err` is NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_db_write(
    db: *const shale_db,
    batch: *const shale_writebatch,
    sync: bool,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let d = db_ref(db)?;
            let b = batch.as_ref().ok_or_else(|| Failure::null("batch"))?;
            Ok(d.db.write(&b.batch, &WriteOptions { sync })?)
        })
    }
}

/// A snapshot of the store's current state, or NULL for a NULL `db`. Release it with
/// `shale_db_snapshot_release`, before closing the store: a snapshot keeps its store open.
///
/// # Safety
/// `db` is NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_db_snapshot_create(db: *const shale_db) -> *mut shale_snapshot {
    // SAFETY: the caller promises NULL or a live handle.
    let Some(d) = (unsafe { db.as_ref() }) else {
        return std::ptr::null_mut();
    };
    guard(std::ptr::null_mut(), || {
        let shared = SnapshotShared { db: d.db.clone(), snapshot: d.db.snapshot() };
        Box::into_raw(Box::new(shale_snapshot { shared: Arc::new(shared) }))
    })
}

/// Releases a snapshot (iterators made through it keep reading it). NULL is ignored.
///
/// # Safety
/// `snapshot` is NULL or a live snapshot, released once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_db_snapshot_release(snapshot: *mut shale_snapshot) {
    if !snapshot.is_null() {
        // SAFETY: the caller gives the snapshot back, once; it came from `Box::into_raw`.
        guard((), || drop(unsafe { Box::from_raw(snapshot) }));
    }
}

/// A new iterator over the store as of `snapshot` (NULL: as of now), over the keys `k` with
/// `lower <= k < upper` bytewise; a NULL `lower` or `upper` leaves that side open. It is
/// not positioned: call a seek first. On success `*out` is the iterator.
///
/// Returns `SHALE_OK`; `SHALE_INVALID_ARGUMENT` for a NULL `db` or `out`, or a snapshot of
/// another store.
///
/// # Safety
/// `db` is a live handle; `snapshot` is NULL or a live snapshot; `lower` and `upper` are
/// NULL or readable for their lengths; `out` is valid for a write; `err` is NULL or valid
/// for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_db_iter_create(
    db: *const shale_db,
    snapshot: *const shale_snapshot,
    lower: *const u8,
    lower_len: usize,
    upper: *const u8,
    upper_len: usize,
    out: *mut *mut shale_iterator,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let d = db_ref(db)?;
            if out.is_null() {
                return Err(Failure::null("out"));
            }
            let (mut opts, snap) = read_options(d, snapshot)?;
            opts.lower_bound = optional_bytes(lower, lower_len).map(<[u8]>::to_vec);
            opts.upper_bound = optional_bytes(upper, upper_len).map(<[u8]>::to_vec);
            let iter = d.db.iter(&opts);
            let it = shale_iterator { iter, _db: d.db.clone(), _snapshot: snap };
            out.write(Box::into_raw(Box::new(it)));
            Ok(())
        })
    }
}

/// Runs a move of a live iterator; NULL is ignored. A panic leaves the iterator invalid.
///
/// # Safety
/// `it` is NULL or a live iterator used by this thread only.
unsafe fn move_iter(it: *mut shale_iterator, step: impl FnOnce(&mut DbIterator)) {
    // SAFETY: the caller promises NULL or a live iterator that no other thread uses now.
    if let Some(it) = unsafe { it.as_mut() } {
        guard((), || step(&mut it.iter));
    }
}

/// Moves to the first key. NULL is ignored.
///
/// # Safety
/// `it` is NULL or a live iterator used by one thread at a time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_db_iter_seek_to_first(it: *mut shale_iterator) {
    // SAFETY: as the caller promises.
    unsafe { move_iter(it, DbIterator::seek_to_first) }
}

/// Moves to the last key. NULL is ignored.
///
/// # Safety
/// `it` is NULL or a live iterator used by one thread at a time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_db_iter_seek_to_last(it: *mut shale_iterator) {
    // SAFETY: as the caller promises.
    unsafe { move_iter(it, DbIterator::seek_to_last) }
}

/// Moves to the first key at or after `target`. NULL `it` is ignored; a NULL `target`
/// with a length is treated as an empty target.
///
/// # Safety
/// `it` is NULL or a live iterator used by one thread at a time; `target` is NULL or
/// readable for `target_len`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_db_iter_seek(
    it: *mut shale_iterator,
    target: *const u8,
    target_len: usize,
) {
    // SAFETY: as the caller promises.
    let target = unsafe { optional_bytes(target, target_len) }.unwrap_or_default();
    // SAFETY: as the caller promises.
    unsafe { move_iter(it, |i| i.seek(target)) }
}

/// Moves to the next key; the iterator must be valid (else nothing happens).
///
/// # Safety
/// `it` is NULL or a live iterator used by one thread at a time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_db_iter_next(it: *mut shale_iterator) {
    // SAFETY: as the caller promises.
    unsafe {
        move_iter(it, |i| {
            if i.valid() {
                i.next();
            }
        })
    }
}

/// Moves to the previous key; the iterator must be valid (else nothing happens).
///
/// # Safety
/// `it` is NULL or a live iterator used by one thread at a time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_db_iter_prev(it: *mut shale_iterator) {
    // SAFETY: as the caller promises.
    unsafe {
        move_iter(it, |i| {
            if i.valid() {
                i.prev();
            }
        })
    }
}

/// Whether the iterator is on a key (false for NULL, past either end, or after an error:
/// see `shale_db_iter_status`).
///
/// # Safety
/// `it` is NULL or a live iterator used by one thread at a time.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_db_iter_valid(it: *const shale_iterator) -> bool {
    // SAFETY: the caller promises NULL or a live iterator.
    unsafe { it.as_ref() }.is_some_and(|i| i.iter.valid())
}

/// The current key, `*len_out` bytes (when `len_out` is not NULL), owned by the iterator:
/// valid until it next moves or is destroyed. NULL (and a length of 0) when the iterator
/// is NULL or not valid.
///
/// # Safety
/// `it` is NULL or a live iterator used by one thread at a time; `len_out` is NULL or valid
/// for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_db_iter_key(
    it: *const shale_iterator,
    len_out: *mut usize,
) -> *const u8 {
    // SAFETY: as the caller promises.
    unsafe { current(it, len_out, DbIterator::key) }
}

/// The current value, as `shale_db_iter_key`.
///
/// # Safety
/// As `shale_db_iter_key`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_db_iter_value(
    it: *const shale_iterator,
    len_out: *mut usize,
) -> *const u8 {
    // SAFETY: as the caller promises.
    unsafe { current(it, len_out, DbIterator::value) }
}

/// # Safety
/// As `shale_db_iter_key`.
unsafe fn current(
    it: *const shale_iterator,
    len_out: *mut usize,
    field: fn(&DbIterator) -> &[u8],
) -> *const u8 {
    // SAFETY: the caller promises NULL or a live iterator.
    let bytes = unsafe { it.as_ref() }.filter(|i| i.iter.valid()).map(|i| field(&i.iter));
    // SAFETY: the caller promises `len_out` NULL or writable.
    unsafe { set(len_out, bytes.map_or(0, <[u8]>::len)) };
    bytes.map_or(std::ptr::null(), <[u8]>::as_ptr)
}

/// The first error the iteration met (an I/O error or corruption that ended it early), or
/// `SHALE_OK`.
///
/// # Safety
/// `it` is a live iterator used by one thread at a time; `err` is NULL or valid for a
/// write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_db_iter_status(
    it: *const shale_iterator,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let i = it.as_ref().ok_or_else(|| Failure::null("iterator"))?;
            Ok(i.iter.status()?)
        })
    }
}

/// Frees an iterator. NULL is ignored.
///
/// # Safety
/// `it` is NULL or a live iterator, destroyed once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_db_iter_destroy(it: *mut shale_iterator) {
    if !it.is_null() {
        // SAFETY: the caller gives the iterator back, once; it came from `Box::into_raw`.
        guard((), || drop(unsafe { Box::from_raw(it) }));
    }
}
