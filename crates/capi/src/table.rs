//! The table engine's API (`shale_table::TableStore`, after LATTE's Table II): tables under
//! a schema, rows inserted, updated a cell at a time, erased and read by primary key,
//! scanned by key range in batches of 100, in transactions of three isolation levels.
//!
//! Rows cross the boundary as arrays of cells (a pointer and a length per column, the
//! primary key first); rows read come back in a `shale_table_rows` the caller frees. Every
//! row operation takes an optional transaction: NULL runs it alone, committed when it
//! returns (read committed).

use std::ffi::{CStr, c_char, c_int};

use shale_table::{
    Column, Declared, Isolation, Row, Scan, Schema, TableId, TableOptions, TableStore, UndoLogPlace,
};

use crate::error::{Failure, Outcome, boundary, guard, shale_error};
use crate::mem::{bytes, optional_bytes, path_arg, set, to_caller};

/// How to open a table store. Start from `shale_table_options_default()` and change fields.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct shale_table_options {
    /// Make a new store where the path holds none (default true).
    pub create_if_missing: bool,
    /// Blocks (4 KiB each) the block cache holds (default 4096).
    pub cache_blocks: usize,
    /// Bytes of the undo log's persistent memory file (`undo.pmem` in the store's
    /// directory), used only where DAX persistent memory is found there; elsewhere the undo
    /// log is on the volume, in a ring of `undo_spill_bytes` (of these bytes when that is 0)
    /// (default 64 MiB).
    pub undo_log_bytes: u64,
    /// Bytes of the undo log's spill area on the volume, used when the persistent memory
    /// is full (default 16 MiB; 0: no spilling).
    pub undo_spill_bytes: u64,
    /// Index entries each table keeps in memory before the rest go to index pages on the
    /// volume (0, the default: all in memory).
    pub index_memory_entries: usize,
    /// Milliseconds a transaction waits for a lock before `SHALE_LOCK_TIMEOUT` (default
    /// 1000).
    pub lock_timeout_ms: u64,
    /// Where the undo log is: 0 (the default) its own file where the store has one or DAX
    /// persistent memory is found, else on the volume; 1 on the volume; 2 in the file
    /// `undo.pmem` in the store's directory, DAX or not (emulated persistent memory: a store
    /// whose file a reboot took refuses to open, naming it). Another value is
    /// `SHALE_INVALID_ARGUMENT`.
    pub undo_log: u32,
}

/// One column of a schema: its name (a NUL-terminated string), and either exactly `len`
/// bytes (`variable` false) or up to `len` bytes (`variable` true). Column 0 is the
/// primary key.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct shale_table_column {
    /// The column's name (1 to 255 bytes).
    pub name: *const c_char,
    /// Whether the column holds up to `len` bytes rather than exactly `len`.
    pub variable: bool,
    /// Bytes of the column (fixed), or the most it holds (variable).
    pub len: u32,
}

/// The isolation level of a transaction, as the paper defines them.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum shale_table_isolation {
    /// Writes lock their rows to the end; reads wait for writers and see only committed
    /// rows, a later read perhaps a later commit.
    SHALE_TABLE_READ_COMMITTED = 0,
    /// Rows read stay locked shared to the end: a second read sees the same row.
    SHALE_TABLE_REPEATABLE_READ = 1,
    /// Table locks: one writer or many readers per table.
    SHALE_TABLE_SERIALIZABLE = 2,
}

/// A row a transaction declares when it begins (`shale_table_begin_declared`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct shale_table_declared_row {
    /// The table's id.
    pub table: u32,
    /// The row's primary key, `key_len` bytes.
    pub key: *const u8,
    /// Bytes of the key.
    pub key_len: usize,
    /// Whether the transaction writes the row (locked exclusive) or only reads it (shared).
    pub write: bool,
}

/// An open table store. Close it with `shale_table_close`.
pub struct shale_table_store {
    store: TableStore,
}

/// An open transaction. End it with `shale_table_commit` or `shale_table_abort`, which
/// free it.
pub struct shale_table_txn {
    txn: shale_table::Transaction,
}

/// A scan of a table's rows by primary key range, in batches. Destroy it with
/// `shale_table_scan_destroy`.
pub struct shale_table_scan {
    scan: Scan<'static>,
}

/// Rows read (one from a select, up to 100 from a scan). Free them with
/// `shale_table_rows_free`.
pub struct shale_table_rows {
    rows: Vec<Row>,
}

/// The default options.
#[unsafe(no_mangle)]
pub extern "C" fn shale_table_options_default() -> shale_table_options {
    let d = TableOptions::default();
    shale_table_options {
        create_if_missing: d.create_if_missing,
        cache_blocks: d.cache_blocks,
        undo_log_bytes: d.undo_log_bytes,
        undo_spill_bytes: d.undo_spill_bytes,
        index_memory_entries: d.index_memory_entries.unwrap_or(0),
        lock_timeout_ms: d.lock_timeout.as_millis() as u64,
        undo_log: undo_log_code(d.undo_log),
    }
}

/// The C code of an undo log place (`shale_table_options::undo_log`).
fn undo_log_code(place: UndoLogPlace) -> u32 {
    match place {
        UndoLogPlace::Auto => 0,
        UndoLogPlace::Volume => 1,
        UndoLogPlace::Pmem => 2,
    }
}

/// The undo log place of a C code, refused by name when unknown.
fn undo_log_place(code: u32) -> Outcome<UndoLogPlace> {
    [UndoLogPlace::Auto, UndoLogPlace::Volume, UndoLogPlace::Pmem]
        .into_iter()
        .find(|p| undo_log_code(*p) == code)
        .ok_or_else(|| {
            Failure::invalid(format!(
                "undo_log {code}: 0 (auto), 1 (on the volume) or 2 (a persistent memory file)"
            ))
        })
}

/// # Safety
/// `store` is NULL or a live handle.
unsafe fn store_ref<'a>(store: *const shale_table_store) -> Outcome<&'a TableStore> {
    // SAFETY: the caller promises NULL or a live handle.
    unsafe { store.as_ref() }.map(|s| &s.store).ok_or_else(|| Failure::null("store"))
}

/// # Safety
/// `txn` is NULL or a live transaction used by this thread only.
unsafe fn txn_mut<'a>(txn: *mut shale_table_txn) -> Option<&'a mut shale_table::Transaction> {
    // SAFETY: the caller promises NULL or a live transaction no other thread uses now.
    unsafe { txn.as_mut() }.map(|t| &mut t.txn)
}

/// A NUL-terminated name.
///
/// # Safety
/// A non-NULL `name` points at a NUL-terminated string.
unsafe fn name_arg<'a>(name: *const c_char, what: &str) -> Outcome<&'a str> {
    if name.is_null() {
        return Err(Failure::null(what));
    }
    // SAFETY: the caller promises a NUL-terminated string at the non-NULL `name`.
    let s = unsafe { CStr::from_ptr(name) };
    s.to_str().map_err(|_| Failure::invalid(format!("{what} is not UTF-8")))
}

/// The range `[start, end)` of a scan, a NULL side open.
///
/// # Safety
/// `start` and `end` are NULL or readable for their lengths.
unsafe fn half_open(
    start: *const u8,
    start_len: usize,
    end: *const u8,
    end_len: usize,
) -> (std::ops::Bound<Vec<u8>>, std::ops::Bound<Vec<u8>>) {
    use std::ops::Bound;
    // SAFETY: as the caller promises.
    let (lo, hi) = unsafe { (optional_bytes(start, start_len), optional_bytes(end, end_len)) };
    (
        lo.map_or(Bound::Unbounded, |k| Bound::Included(k.to_vec())),
        hi.map_or(Bound::Unbounded, |k| Bound::Excluded(k.to_vec())),
    )
}

/// The isolation level a `shale_table_isolation` value names, if any.
fn isolation_arg(isolation: c_int) -> Option<Isolation> {
    match isolation {
        0 => Some(Isolation::ReadCommitted),
        1 => Some(Isolation::RepeatableRead),
        2 => Some(Isolation::Serializable),
        _ => None,
    }
}

/// The cells of a row: `n` (pointer, length) pairs.
///
/// # Safety
/// `cells` and `lens` are readable for `n` entries, each cell readable for its length.
unsafe fn row_arg(cells: *const *const u8, lens: *const usize, n: usize) -> Outcome<Row> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if cells.is_null() || lens.is_null() {
        return Err(Failure::null("cells"));
    }
    // SAFETY: the caller promises `n` readable entries in both arrays.
    let (cells, lens) =
        unsafe { (std::slice::from_raw_parts(cells, n), std::slice::from_raw_parts(lens, n)) };
    cells
        .iter()
        .zip(lens)
        // SAFETY: the caller promises each cell readable for its length.
        .map(|(&p, &len)| unsafe { bytes(p, len, "cell") }.map(<[u8]>::to_vec))
        .collect()
}

/// Opens (or creates) the table store in the directory `path` (its volume and its undo
/// log's persistent memory file side by side), rolling back every transaction a crash
/// left uncommitted. On success `*out` is its handle.
///
/// `options` may be NULL for the defaults.
///
/// Returns `SHALE_OK`; `SHALE_INVALID_ARGUMENT` for bad options or a path that is not a
/// directory; `SHALE_IN_USE`; `SHALE_NOT_A_STORE` for another engine's volume;
/// `SHALE_CORRUPTION`; `SHALE_IO`.
///
/// # Safety
/// `path` is a NUL-terminated string; `options` is NULL or valid; `out` is valid for a
/// write; `err` is NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_table_open(
    path: *const c_char,
    options: *const shale_table_options,
    out: *mut *mut shale_table_store,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            if out.is_null() {
                return Err(Failure::null("out"));
            }
            let path = path_arg(path)?;
            let given = options.as_ref().copied().unwrap_or_else(|| shale_table_options_default());
            let opts = TableOptions {
                create_if_missing: given.create_if_missing,
                cache_blocks: given.cache_blocks,
                undo_log_bytes: given.undo_log_bytes,
                undo_spill_bytes: given.undo_spill_bytes,
                index_memory_entries: (given.index_memory_entries > 0)
                    .then_some(given.index_memory_entries),
                lock_timeout: std::time::Duration::from_millis(given.lock_timeout_ms),
                undo_log: undo_log_place(given.undo_log)?,
                ..TableOptions::default()
            };
            if !given.create_if_missing && !path.exists() {
                return Err(Failure::new(
                    crate::error::shale_status::SHALE_NOT_A_STORE,
                    format!("{} does not exist and create_if_missing is false", path.display()),
                ));
            }
            let store = TableStore::open(&path, opts)?;
            out.write(Box::into_raw(Box::new(shale_table_store { store })));
            Ok(())
        })
    }
}

/// Closes a store and frees the handle. Commit or abort its transactions and destroy its
/// scans first: one still open when the store closes is rolled back at the next open.
/// NULL is ignored.
///
/// # Safety
/// `store` is NULL or a live handle, closed once, with no other call on it running or
/// following.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_table_close(store: *mut shale_table_store) {
    if !store.is_null() {
        // SAFETY: the caller gives the handle back, once; it came from `Box::into_raw`.
        guard((), || drop(unsafe { Box::from_raw(store) }));
    }
}

/// Makes a checkpoint of the store at `path`: a new store, in a new directory, holding its
/// committed rows at one instant (every transaction committed before the call, no part of
/// an uncommitted one), with the tables' names and schemas. Writers wait only for the
/// transactions in flight at its instant to end (it takes every table's shared lock for that
/// instant; a writer whose lock timeout passes meanwhile gets `SHALE_LOCK_TIMEOUT`), then go
/// on while it copies; readers go on. A logical copy: the rows are read and inserted
/// again. It is built under a temporary name in `path`'s parent and renamed to `path` once
/// durable, so a crash midway leaves nothing at `path`. `*rows_out` (if not NULL) is set to
/// the rows copied.
///
/// Returns `SHALE_OK`; `SHALE_INVALID_ARGUMENT` when `path` exists and is not an empty
/// directory (nothing there is changed); `SHALE_LOCK_TIMEOUT` when the tables' locks could
/// not be had; `SHALE_CORRUPTION`; `SHALE_NO_SPACE`; `SHALE_IO`.
///
/// # Safety
/// `store` is a live handle; `path` is a NUL-terminated string; `rows_out` and `err` are
/// NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_table_checkpoint(
    store: *const shale_table_store,
    path: *const c_char,
    rows_out: *mut u64,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let s = store_ref(store)?;
            let path = path_arg(path)?;
            let rows = s.checkpoint(&path)?;
            set(rows_out, rows);
            Ok(())
        })
    }
}

/// Creates the table `name` with the `n` columns of `columns` (column 0 the primary key)
/// and sets `*id_out` to its id.
///
/// Returns `SHALE_OK`; `SHALE_TABLE_EXISTS`; `SHALE_INVALID_ARGUMENT` for a bad name or
/// schema; `SHALE_NO_SPACE`; `SHALE_IO`.
///
/// # Safety
/// `store` is a live handle; `name` is a NUL-terminated string; `columns` is readable for
/// `n` entries, each name NUL-terminated; `id_out` is valid for a write; `err` is NULL or
/// valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_table_create(
    store: *const shale_table_store,
    name: *const c_char,
    columns: *const shale_table_column,
    n: usize,
    id_out: *mut u32,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let s = store_ref(store)?;
            let name = name_arg(name, "name")?;
            if id_out.is_null() {
                return Err(Failure::null("id_out"));
            }
            if columns.is_null() && n > 0 {
                return Err(Failure::null("columns"));
            }
            let given = if n == 0 { &[][..] } else { std::slice::from_raw_parts(columns, n) };
            let mut cols = Vec::with_capacity(n);
            for c in given {
                let cname = name_arg(c.name, "column name")?;
                cols.push(if c.variable {
                    Column::var(cname, c.len)
                } else {
                    Column::fixed(cname, c.len)
                });
            }
            let id = s.create_table(name, Schema::new(cols)?)?;
            id_out.write(id.0);
            Ok(())
        })
    }
}

/// Drops the table `name` and frees its space, once no transaction holds a lock on it.
///
/// Returns `SHALE_OK`; `SHALE_NO_SUCH_TABLE`; `SHALE_LOCK_TIMEOUT`; `SHALE_IO`.
///
/// # Safety
/// `store` is a live handle; `name` is a NUL-terminated string; `err` is NULL or valid for
/// a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_table_drop(
    store: *const shale_table_store,
    name: *const c_char,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe { boundary(err, || Ok(store_ref(store)?.drop_table(name_arg(name, "name")?)?)) }
}

/// Sets `*id_out` to the id of the table `name`.
///
/// Returns `SHALE_OK` or `SHALE_NO_SUCH_TABLE`.
///
/// # Safety
/// `store` is a live handle; `name` is a NUL-terminated string; `id_out` is valid for a
/// write; `err` is NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_table_id(
    store: *const shale_table_store,
    name: *const c_char,
    id_out: *mut u32,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let name = name_arg(name, "name")?;
            let id = store_ref(store)?
                .table_id(name)
                .ok_or_else(|| Failure::from(shale_table::Error::NoSuchTable(name.into())))?;
            set(id_out, id.0);
            Ok(())
        })
    }
}

/// Begins a transaction at `isolation` (a `shale_table_isolation`). Never NULL for a live
/// store; NULL for a NULL store or an isolation that is none of the three.
///
/// # Safety
/// `store` is NULL or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_table_begin(
    store: *const shale_table_store,
    isolation: c_int,
) -> *mut shale_table_txn {
    let Some(isolation) = isolation_arg(isolation) else { return std::ptr::null_mut() };
    // SAFETY: the caller promises NULL or a live handle.
    let Ok(s) = (unsafe { store_ref(store) }) else { return std::ptr::null_mut() };
    guard(std::ptr::null_mut(), || {
        Box::into_raw(Box::new(shale_table_txn { txn: s.begin(isolation) }))
    })
}

/// Begins a transaction at `isolation` that first locks the `n` rows of `rows`, all of them
/// and in one order for every transaction (the paper's repeatable read: declared rows
/// locked up front), so transactions that declare the rows they touch never deadlock on
/// them. A row read stays as read; a declared key that is absent stays absent for others.
/// On success `*txn_out` is the transaction.
///
/// Returns `SHALE_OK`; `SHALE_INVALID_ARGUMENT` for an isolation that is none of the three
/// or a NULL array with `n` > 0; `SHALE_NO_SUCH_TABLE`; `SHALE_LOCK_TIMEOUT` when a row
/// stays locked by another past the store's lock timeout (the locks taken are released, no
/// transaction is made).
///
/// # Safety
/// `store` is NULL or a live handle; `rows` is readable for `n` entries, each key readable
/// for its length; `txn_out` is valid for a write; `err` is NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_table_begin_declared(
    store: *const shale_table_store,
    isolation: c_int,
    rows: *const shale_table_declared_row,
    n: usize,
    txn_out: *mut *mut shale_table_txn,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let isolation = isolation_arg(isolation).ok_or_else(|| {
                Failure::invalid(format!("isolation {isolation} is none of 0, 1, 2"))
            })?;
            let store = store_ref(store)?;
            let rows: &[shale_table_declared_row] = match n {
                0 => &[],
                _ if rows.is_null() => return Err(Failure::null("rows")),
                _ => std::slice::from_raw_parts(rows, n),
            };
            let mut declared = Declared::new();
            for r in rows {
                let key = bytes(r.key, r.key_len, "key")?;
                declared = if r.write {
                    declared.write(TableId(r.table), key)
                } else {
                    declared.read(TableId(r.table), key)
                };
            }
            let txn = store.begin_declared(isolation, &declared)?;
            set(txn_out, Box::into_raw(Box::new(shale_table_txn { txn })));
            Ok(())
        })
    }
}

/// Commits a transaction, making every change durable, and frees it (whatever the result).
///
/// Returns `SHALE_OK`; `SHALE_STOPPED` or `SHALE_IO` (the store stopped: the changes are
/// rolled back at the next open); `SHALE_LOG_FULL` (no room for the commit's mark: the
/// changes were rolled back).
///
/// # Safety
/// `txn` is a live transaction, ended once, used by no other thread; `err` is NULL or
/// valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_table_commit(
    txn: *mut shale_table_txn,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            if txn.is_null() {
                return Err(Failure::null("txn"));
            }
            Ok(Box::from_raw(txn).txn.commit()?)
        })
    }
}

/// Aborts a transaction, writing back every change, and frees it (whatever the result).
///
/// Returns `SHALE_OK`, or as `shale_table_commit`.
///
/// # Safety
/// As `shale_table_commit`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_table_abort(
    txn: *mut shale_table_txn,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            if txn.is_null() {
                return Err(Failure::null("txn"));
            }
            Ok(Box::from_raw(txn).txn.abort()?)
        })
    }
}

/// Inserts a row of `n` cells (`cells[i]` of `lens[i]` bytes, column 0 the primary key), in
/// `txn`, or alone and committed when `txn` is NULL.
///
/// Returns `SHALE_OK`; `SHALE_KEY_EXISTS` for a present key; `SHALE_WRONG_SIZE` for a cell
/// of the wrong size or a wrong number of cells; `SHALE_NO_SUCH_TABLE`;
/// `SHALE_LOCK_TIMEOUT`; `SHALE_LOG_FULL`; `SHALE_STOPPED`; `SHALE_NO_SPACE`; `SHALE_IO`.
/// A failed operation in a transaction leaves the transaction open.
///
/// # Safety
/// `store` is a live handle; `txn` is NULL or a live transaction of it used by this
/// thread only; `cells` and `lens` are readable for `n` entries, each cell for its length;
/// `err` is NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_table_insert(
    store: *const shale_table_store,
    txn: *mut shale_table_txn,
    table: u32,
    cells: *const *const u8,
    lens: *const usize,
    n: usize,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let s = store_ref(store)?;
            let row = row_arg(cells, lens, n)?;
            match txn_mut(txn) {
                Some(t) => Ok(t.insert(TableId(table), &row)?),
                None => Ok(s.insert(TableId(table), &row)?),
            }
        })
    }
}

/// Sets the cell `column` (a NUL-terminated name) of the row of `key` to `value`, in place
/// where it fits, in `txn` or alone.
///
/// Returns `SHALE_OK`; `SHALE_KEY_NOT_FOUND`; `SHALE_NO_SUCH_COLUMN`; `SHALE_WRONG_SIZE`;
/// `SHALE_INVALID_ARGUMENT` for the primary key's column; and as `shale_table_insert`.
///
/// # Safety
/// As `shale_table_insert`; `key` and `value` are readable for their lengths; `column` is
/// a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_table_update(
    store: *const shale_table_store,
    txn: *mut shale_table_txn,
    table: u32,
    key: *const u8,
    key_len: usize,
    column: *const c_char,
    value: *const u8,
    value_len: usize,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let s = store_ref(store)?;
            let key = bytes(key, key_len, "key")?;
            let column = name_arg(column, "column")?;
            let value = bytes(value, value_len, "value")?;
            match txn_mut(txn) {
                Some(t) => Ok(t.update(TableId(table), key, column, value)?),
                None => Ok(s.update(TableId(table), key, column, value)?),
            }
        })
    }
}

/// Erases the row of `key`, in `txn` or alone.
///
/// Returns `SHALE_OK`; `SHALE_KEY_NOT_FOUND`; and as `shale_table_insert`.
///
/// # Safety
/// As `shale_table_insert`; `key` is readable for `key_len`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_table_erase(
    store: *const shale_table_store,
    txn: *mut shale_table_txn,
    table: u32,
    key: *const u8,
    key_len: usize,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let s = store_ref(store)?;
            let key = bytes(key, key_len, "key")?;
            match txn_mut(txn) {
                Some(t) => Ok(t.erase(TableId(table), key)?),
                None => Ok(s.erase(TableId(table), key)?),
            }
        })
    }
}

/// Reads the row of `key`, in `txn` or alone: `*rows_out` is a new `shale_table_rows`
/// holding it (free it with `shale_table_rows_free`), or NULL when there is no such row
/// (still `SHALE_OK`).
///
/// Returns `SHALE_OK`; `SHALE_WRONG_SIZE` for a key of the wrong size;
/// `SHALE_NO_SUCH_TABLE`; `SHALE_LOCK_TIMEOUT`; `SHALE_CORRUPTION`; `SHALE_IO`.
///
/// # Safety
/// As `shale_table_erase`; `rows_out` is valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_table_select(
    store: *const shale_table_store,
    txn: *mut shale_table_txn,
    table: u32,
    key: *const u8,
    key_len: usize,
    rows_out: *mut *mut shale_table_rows,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let s = store_ref(store)?;
            if rows_out.is_null() {
                return Err(Failure::null("rows_out"));
            }
            let key = bytes(key, key_len, "key")?;
            let row = match txn_mut(txn) {
                Some(t) => t.select(TableId(table), key)?,
                None => s.select(TableId(table), key)?,
            };
            let out = row.map_or(std::ptr::null_mut(), |r| {
                Box::into_raw(Box::new(shale_table_rows { rows: vec![r] }))
            });
            rows_out.write(out);
            Ok(())
        })
    }
}

/// Reads one cell of the row of `key`, in `txn` or alone: `*value_out` is a copy (the
/// caller's: free it with `shale_free`; never NULL, even for an empty cell) and
/// `*value_len_out` its length; NULL and 0 when there is no such row (still `SHALE_OK`).
///
/// Returns `SHALE_OK`; `SHALE_NO_SUCH_COLUMN`; and as `shale_table_select`.
///
/// # Safety
/// As `shale_table_select`; `column` is a NUL-terminated string; `value_out` and
/// `value_len_out` are valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_table_select_cell(
    store: *const shale_table_store,
    txn: *mut shale_table_txn,
    table: u32,
    key: *const u8,
    key_len: usize,
    column: *const c_char,
    value_out: *mut *mut u8,
    value_len_out: *mut usize,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let s = store_ref(store)?;
            if value_out.is_null() || value_len_out.is_null() {
                return Err(Failure::null("value_out"));
            }
            let key = bytes(key, key_len, "key")?;
            let column = name_arg(column, "column")?;
            let cell = match txn_mut(txn) {
                Some(t) => t.select_cell(TableId(table), key, column)?,
                None => s.select_cell(TableId(table), key, column)?,
            };
            let (ptr, len) = match cell {
                Some(v) => (to_caller(&v)?, v.len()),
                None => (std::ptr::null_mut(), 0),
            };
            value_out.write(ptr);
            value_len_out.write(len);
            Ok(())
        })
    }
}

/// Starts a scan of the rows of `table` whose primary keys are in `[start, end)`, in key
/// order, each batch read committed; a NULL `start` or `end` leaves that side open. On
/// success `*out` is the scan (destroy it with `shale_table_scan_destroy`).
///
/// Returns `SHALE_OK`; `SHALE_NO_SUCH_TABLE`; `SHALE_CORRUPTION`; `SHALE_IO`.
///
/// # Safety
/// `store` is a live handle that outlives the scan; `start` and `end` are NULL or readable
/// for their lengths; `out` is valid for a write; `err` is NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_table_scan_create(
    store: *const shale_table_store,
    table: u32,
    start: *const u8,
    start_len: usize,
    end: *const u8,
    end_len: usize,
    out: *mut *mut shale_table_scan,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let s = store_ref(store)?;
            if out.is_null() {
                return Err(Failure::null("out"));
            }
            let range = half_open(start, start_len, end, end_len);
            let scan = s.scan(TableId(table), range)?;
            out.write(Box::into_raw(Box::new(shale_table_scan { scan })));
            Ok(())
        })
    }
}

/// Starts a scan of the rows of `table` whose value of `column` is in `[start, end)`,
/// compared as bytes, in primary-key order, each batch read committed; a NULL `start` or
/// `end` leaves that side open. By the primary key's column this is
/// `shale_table_scan_create`; by any other column the scan reads the whole table to keep the
/// rows in range (there is no index of other columns). On success `*out` is the scan
/// (destroy it with `shale_table_scan_destroy`).
///
/// Returns `SHALE_OK`; `SHALE_NO_SUCH_TABLE`; `SHALE_NO_SUCH_COLUMN`; `SHALE_CORRUPTION`;
/// `SHALE_IO`.
///
/// # Safety
/// As `shale_table_scan_create`; `column` is a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_table_scan_column_create(
    store: *const shale_table_store,
    table: u32,
    column: *const c_char,
    start: *const u8,
    start_len: usize,
    end: *const u8,
    end_len: usize,
    out: *mut *mut shale_table_scan,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let s = store_ref(store)?;
            if out.is_null() {
                return Err(Failure::null("out"));
            }
            let column = name_arg(column, "column")?;
            let range = half_open(start, start_len, end, end_len);
            let scan = s.scan_column(TableId(table), column, range)?;
            out.write(Box::into_raw(Box::new(shale_table_scan { scan })));
            Ok(())
        })
    }
}

/// The scan's next batch of up to 100 rows: `*rows_out` is a new `shale_table_rows` (free
/// it with `shale_table_rows_free`), or NULL once the scan is over.
///
/// Returns `SHALE_OK`; `SHALE_LOCK_TIMEOUT`; `SHALE_CORRUPTION`; `SHALE_IO`.
///
/// # Safety
/// `scan` is a live scan used by this thread only; `rows_out` is valid for a write; `err`
/// is NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_table_scan_next(
    scan: *mut shale_table_scan,
    rows_out: *mut *mut shale_table_rows,
    err: *mut *mut shale_error,
) -> c_int {
    // SAFETY: as the caller promises.
    unsafe {
        boundary(err, || {
            let sc = scan.as_mut().ok_or_else(|| Failure::null("scan"))?;
            if rows_out.is_null() {
                return Err(Failure::null("rows_out"));
            }
            let out = match sc.scan.next()? {
                Some(rows) => Box::into_raw(Box::new(shale_table_rows { rows })),
                None => std::ptr::null_mut(),
            };
            rows_out.write(out);
            Ok(())
        })
    }
}

/// Destroys a scan. NULL is ignored.
///
/// # Safety
/// `scan` is NULL or a live scan, destroyed once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_table_scan_destroy(scan: *mut shale_table_scan) {
    if !scan.is_null() {
        // SAFETY: the caller gives the scan back, once; it came from `Box::into_raw`.
        guard((), || drop(unsafe { Box::from_raw(scan) }));
    }
}

/// How many rows `rows` holds (0 for NULL).
///
/// # Safety
/// `rows` is NULL or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_table_rows_count(rows: *const shale_table_rows) -> usize {
    // SAFETY: the caller promises NULL or live rows.
    unsafe { rows.as_ref() }.map_or(0, |r| r.rows.len())
}

/// Cell `column` of row `row` of `rows`: a pointer to its bytes, owned by `rows` and valid
/// until they are freed, with `*len_out` set to its length; NULL (and 0) for a row or
/// column out of range.
///
/// # Safety
/// `rows` is NULL or live; `len_out` is NULL or valid for a write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_table_rows_cell(
    rows: *const shale_table_rows,
    row: usize,
    column: usize,
    len_out: *mut usize,
) -> *const u8 {
    // SAFETY: the caller promises NULL or live rows, and a writable or NULL `len_out`.
    unsafe {
        let cell = rows.as_ref().and_then(|r| r.rows.get(row)).and_then(|r| r.get(column));
        set(len_out, cell.map_or(0, Vec::len));
        cell.map_or(std::ptr::null(), |c| c.as_ptr())
    }
}

/// Frees rows. NULL is ignored.
///
/// # Safety
/// `rows` is NULL or live, freed once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn shale_table_rows_free(rows: *mut shale_table_rows) {
    if !rows.is_null() {
        // SAFETY: the caller gives the rows back, once; they came from `Box::into_raw`.
        guard((), || drop(unsafe { Box::from_raw(rows) }));
    }
}
