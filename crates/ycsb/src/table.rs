//! LATTE's row layout for YCSB, and the table engine (`shale-table`) behind [`Engine`].
//!
//! LATTE's YCSB runs use 505-byte rows: a 255-byte primary key and five 50-byte columns. The
//! driver speaks key-value (a `user...` key, a record of encoded fields, [`crate::record`]),
//! so this module maps one to the other, for the table engine here and for any SQL engine
//! given the same table (the comparison harness's MariaDB):
//!
//! ```text
//! column     type        bytes   from the driver
//! ycsb_key   fixed 255   255     the YCSB key ("user" + digits, 6 to 24 bytes), right-padded
//!                                with zero bytes to 255 (see pad_key)
//! field0..4  fixed 50    5 x 50  the record's five fields, in order, values only: the names
//!                                ("field0"...) are the columns', not stored
//! ```
//!
//! The key padding: YCSB's keys are shorter than the column, so each is padded with zero
//! bytes. Zero sorts below every byte, so padded keys sort as the keys do ("user1" before
//! "user12" before "user2") and a scan from a padded start key sees the rows the driver
//! meant; a key over 255 bytes is refused (the driver never makes one). LATTE's paper fixes
//! the key at 255 bytes and says no more; zero padding is what MariaDB's `BINARY(255)` does
//! itself, so the two engines store the same bytes.
//!
//! Operations, each a transaction of its own, committed (durable) when the call returns:
//! - insert: `insert` of the row;
//! - read: `select` of the row, re-encoded into the record the driver expects;
//! - update: the driver hands over the whole record it composed (it read the record and
//!   replaced one field, or made a new one with `writeallfields`), so the adapter reads the
//!   stored row and updates, in one transaction, only the columns that differ: one column
//!   for YCSB's default update, all five for a whole-record write;
//! - scan: the engine's `scan` from the padded start key, served by its ordered primary
//!   index (see [`TableEngine::scan`]).

use std::ops::Bound;
use std::path::Path;

use shale_table::{Column, Isolation, Schema, TableId, TableOptions, TableStore};

use crate::engine::{Engine, EngineResult};
use crate::record::{MalformedRecord, RecordLayout, decode_fields, encode_field};

/// Bytes of the primary key column.
pub const KEY_BYTES: usize = 255;
/// Columns past the key.
pub const FIELD_COUNT: usize = 5;
/// Bytes of each of them.
pub const FIELD_BYTES: usize = 50;
/// Bytes of a row: 255 + 5 x 50 = 505.
pub const ROW_BYTES: usize = KEY_BYTES + FIELD_COUNT * FIELD_BYTES;
/// The table's name, YCSB's.
pub const TABLE_NAME: &str = "usertable";

/// The record layout the driver must use for this row layout: five fields of 50 bytes.
pub const LAYOUT: RecordLayout =
    RecordLayout { field_count: FIELD_COUNT, field_length: FIELD_BYTES };

/// The names of the value columns, YCSB's field names.
pub fn field_names() -> [String; FIELD_COUNT] {
    std::array::from_fn(RecordLayout::field_name)
}

/// The table's schema: `ycsb_key` fixed 255, `field0`..`field4` fixed 50.
pub fn schema() -> Schema {
    let mut columns = vec![Column::fixed("ycsb_key", KEY_BYTES as u32)];
    columns.extend(field_names().iter().map(|n| Column::fixed(n, FIELD_BYTES as u32)));
    Schema::new(columns).expect("the YCSB schema is valid")
}

/// A row that does not fit LATTE's layout: a key over 255 bytes, or a record that is not
/// five fields of 50 bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutError(pub String);

impl std::fmt::Display for LayoutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "not LATTE's row layout: {}", self.0)
    }
}

impl std::error::Error for LayoutError {}

impl From<MalformedRecord> for LayoutError {
    fn from(e: MalformedRecord) -> LayoutError {
        LayoutError(e.to_string())
    }
}

/// `key` right-padded with zero bytes to [`KEY_BYTES`].
///
/// ```
/// let k = ycsb::table::pad_key(b"user12")?;
/// assert_eq!((k.len(), &k[..6], k[6]), (255, &b"user12"[..], 0));
/// assert!(ycsb::table::pad_key(b"user1")? < k);
/// # Ok::<(), ycsb::table::LayoutError>(())
/// ```
///
/// # Errors
/// [`LayoutError`] for a key over 255 bytes.
pub fn pad_key(key: &[u8]) -> Result<Vec<u8>, LayoutError> {
    if key.len() > KEY_BYTES {
        return Err(LayoutError(format!("a key of {} bytes (at most {KEY_BYTES})", key.len())));
    }
    let mut padded = vec![0; KEY_BYTES];
    padded[..key.len()].copy_from_slice(key);
    Ok(padded)
}

/// The key a padded key was made from (its zero bytes at the end taken off).
pub fn unpad_key(padded: &[u8]) -> &[u8] {
    let end = padded.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    &padded[..end]
}

/// The five column values of an encoded record, in order.
///
/// # Errors
/// [`LayoutError`] unless the record is exactly five fields of 50 bytes.
pub fn record_to_columns(record: &[u8]) -> Result<[&[u8]; FIELD_COUNT], LayoutError> {
    let fields = decode_fields(record)?;
    if fields.len() != FIELD_COUNT || fields.iter().any(|(_, v)| v.len() != FIELD_BYTES) {
        return Err(LayoutError(format!(
            "a record of {} fields, lengths {:?} ({FIELD_COUNT} of {FIELD_BYTES} bytes expected)",
            fields.len(),
            fields.iter().map(|(_, v)| v.len()).collect::<Vec<_>>()
        )));
    }
    Ok(std::array::from_fn(|i| fields[i].1))
}

/// The record the driver expects from the five column values.
pub fn columns_to_record<V: AsRef<[u8]>>(columns: &[V]) -> Vec<u8> {
    let mut out = Vec::with_capacity(LAYOUT.record_bytes());
    for (i, v) in columns.iter().enumerate() {
        encode_field(RecordLayout::field_name(i).as_bytes(), v.as_ref(), &mut out);
    }
    out
}

/// How to open the table engine for YCSB.
#[derive(Clone, Debug)]
pub struct TableEngineOptions {
    /// The store's options (cache, persistent memory file, ...).
    pub table: TableOptions,
}

/// The table engine with one table, `usertable`, in LATTE's row layout.
pub struct TableEngine {
    store: TableStore,
    table: TableId,
}

impl TableEngine {
    /// Opens the store in `dir` and its table `usertable`, creating either where missing.
    ///
    /// # Errors
    /// The store's error; a `usertable` of another schema.
    pub fn open(dir: &Path, opts: TableEngineOptions) -> EngineResult<TableEngine> {
        let store = TableStore::open(dir, opts.table)?;
        let table = match store.table_id(TABLE_NAME) {
            Some(t) => {
                if store.schema(t)? != schema() {
                    return Err(LayoutError(format!(
                        "{TABLE_NAME} in {} has another schema",
                        dir.display()
                    ))
                    .into());
                }
                t
            }
            None => store.create_table(TABLE_NAME, schema())?,
        };
        Ok(TableEngine { store, table })
    }

    /// The store, for its statistics.
    pub fn store(&self) -> &TableStore {
        &self.store
    }

    /// The row of `key`, as the five column values.
    fn columns(&self, key: &[u8]) -> EngineResult<Option<Vec<Vec<u8>>>> {
        let row = self.store.select(self.table, &pad_key(key)?)?;
        Ok(row.map(|mut r| r.split_off(1)))
    }
}

impl Engine for TableEngine {
    fn name(&self) -> &str {
        "shale-table"
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        let padded = pad_key(key)?;
        let columns = record_to_columns(value)?;
        let mut row: Vec<&[u8]> = Vec::with_capacity(1 + FIELD_COUNT);
        row.push(&padded);
        row.extend(columns);
        self.store.insert(self.table, &row)?;
        Ok(())
    }

    fn read(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>> {
        Ok(self.columns(key)?.map(|c| columns_to_record(&c)))
    }

    fn update(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        let padded = pad_key(key)?;
        let new = record_to_columns(value)?;
        let names = field_names();
        let mut txn = self.store.begin(Isolation::ReadCommitted);
        let Some(old) = txn.select(self.table, &padded)? else {
            return Err(Box::new(shale_table::Error::KeyNotFound));
        };
        for (i, value) in new.iter().enumerate() {
            if old[1 + i] != *value {
                txn.update(self.table, &padded, &names[i], value)?;
            }
        }
        txn.commit()?;
        Ok(())
    }

    /// Up to `count` rows from `start_key` on, in key order, each read whole: the engine's
    /// own scan over its ordered primary index, from the padded start key (padding keeps
    /// the order), in batches of at most `count` rows (so no row past them is read), each
    /// batch a read-committed transaction.
    fn scan(&self, start_key: &[u8], count: usize) -> EngineResult<usize> {
        let range = (Bound::Included(pad_key(start_key)?), Bound::Unbounded);
        let mut scan = self.store.scan(self.table, range)?;
        let mut n = 0;
        while n < count {
            let Some(rows) = scan.next_up_to(count - n)? else { break };
            n += rows.len();
            std::hint::black_box(rows);
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seed: u8) -> Vec<u8> {
        let cols: Vec<Vec<u8>> =
            (0..FIELD_COUNT as u8).map(|i| vec![b'a' + seed + i; 50]).collect();
        columns_to_record(&cols)
    }

    #[test]
    fn the_layout_is_lattes() {
        assert_eq!(ROW_BYTES, 505);
        assert_eq!(schema().columns().len(), 6);
        let rec = record(0);
        assert_eq!(rec.len(), LAYOUT.record_bytes());
        let cols = record_to_columns(&rec).unwrap();
        assert_eq!(columns_to_record(&cols), rec);
        assert!(record_to_columns(&rec[..rec.len() - 1]).is_err());
        let mut short = Vec::new();
        encode_field(b"field0", b"x", &mut short);
        assert!(record_to_columns(&short).unwrap_err().to_string().contains("5 of 50"));
        assert!(pad_key(&[b'k'; 256]).is_err());
        assert_eq!(unpad_key(&pad_key(b"user7").unwrap()), b"user7");
    }

    #[test]
    fn rows_round_trip_through_the_engine() {
        let dir = tempfile::tempdir().unwrap();
        let opts = || TableEngineOptions {
            table: TableOptions {
                pmem_path: Some(dir.path().join("log.pmem")),
                space_reclaim_interval: None,
                ..TableOptions::default()
            },
        };
        let store = dir.path().join("store");
        {
            let e = TableEngine::open(&store, opts()).unwrap();
            for i in 0..30u8 {
                e.insert(format!("user{i}").as_bytes(), &record(i % 7)).unwrap();
            }
            assert_eq!(e.read(b"user3").unwrap(), Some(record(3)));
            assert_eq!(e.read(b"user99").unwrap(), None);
            assert!(e.insert(b"user3", &record(1)).is_err(), "a duplicate key");
            // One field changed: one column updated; then a whole new record.
            let mut one = Vec::new();
            crate::record::replace_field(&record(3), b"field2", &[b'z'; 50], &mut one).unwrap();
            e.update(b"user3", &one).unwrap();
            assert_eq!(e.read(b"user3").unwrap(), Some(one));
            e.update(b"user4", &record(6)).unwrap();
            assert_eq!(e.read(b"user4").unwrap(), Some(record(6)));
            assert!(e.update(b"user99", &record(0)).is_err());
            // Keys in order: user0, user1, user10..user19, user2, user20..user29, user3, ...
            assert_eq!(e.scan(b"user2", 1000).unwrap(), 30 - 12);
            assert_eq!(e.scan(b"user", 5).unwrap(), 5);
            assert_eq!(e.scan(b"v", 5).unwrap(), 0);
        }
        // Reopened: the rows are back, and the ordered index rebuilt from them.
        let e = TableEngine::open(&store, opts()).unwrap();
        assert_eq!(e.read(b"user4").unwrap(), Some(record(6)));
        assert_eq!(e.scan(b"user", 100).unwrap(), 30);
    }
}
