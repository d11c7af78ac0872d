//! MariaDB behind `ycsb::Engine`, in LATTE's row layout: the latte suite's InnoDB and MyRocks.
//!
//! The server is bench/latte.sh's private `mariadbd` (its own data directory and unix socket,
//! no networking); this module connects to it and drives one table, `ycsb.usertable`, of a
//! `BINARY(255)` primary key and five `BINARY(50)` columns, the row the table engine stores
//! (`ycsb::table`: the key zero-padded to 255 bytes, as `BINARY` pads it itself).
//!
//! - One connection per client thread, made at its first operation; statements are prepared
//!   once per connection (the `mysql` crate's statement cache) and executed with bound
//!   parameters, the binary protocol.
//! - Autocommit: every statement is a transaction of its own, durable when it returns under
//!   the server's `innodb_flush_log_at_trx_commit=1` / `rocksdb_flush_log_at_trx_commit=1`.
//! - An update sets all five columns from the record the driver composed (the driver read the
//!   row and replaced one field): one statement, no second read. InnoDB logs only the columns
//!   that differ (its update vector is built by comparing the rows); MyRocks writes a whole
//!   new row version whatever changed.
//! - A scan is `WHERE ycsb_key >= ? ORDER BY ycsb_key LIMIT ?`, each row fetched whole.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use mysql::prelude::Queryable;
use mysql::{Conn, OptsBuilder, Value};
use ycsb::table::{FIELD_COUNT, columns_to_record, pad_key, record_to_columns};
use ycsb::{Engine, EngineResult};

/// The storage engines the suite runs inside MariaDB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    InnoDb,
    MyRocks,
}

impl Storage {
    /// The suite's name for it (`innodb`, `myrocks`).
    pub fn from_name(name: &str) -> Option<Storage> {
        match name {
            "innodb" => Some(Storage::InnoDb),
            "myrocks" => Some(Storage::MyRocks),
            _ => None,
        }
    }

    /// The name `ENGINE=` takes.
    pub fn sql_name(self) -> &'static str {
        match self {
            Storage::InnoDb => "InnoDB",
            Storage::MyRocks => "ROCKSDB",
        }
    }
}

/// The table's DDL for `storage`.
pub fn create_table_sql(storage: Storage) -> String {
    let fields: Vec<String> =
        (0..FIELD_COUNT).map(|i| format!("field{i} BINARY(50) NOT NULL")).collect();
    format!(
        "CREATE TABLE usertable (ycsb_key BINARY(255) NOT NULL PRIMARY KEY, {}) ENGINE={}",
        fields.join(", "),
        storage.sql_name()
    )
}

const INSERT: &str = "INSERT INTO usertable VALUES (?, ?, ?, ?, ?, ?)";
const SELECT: &str =
    "SELECT field0, field1, field2, field3, field4 FROM usertable WHERE ycsb_key = ?";
const UPDATE: &str = "UPDATE usertable SET field0 = ?, field1 = ?, field2 = ?, field3 = ?, \
                      field4 = ? WHERE ycsb_key = ?";
const SCAN: &str = "SELECT ycsb_key, field0, field1, field2, field3, field4 FROM usertable \
                    WHERE ycsb_key >= ? ORDER BY ycsb_key LIMIT ?";

/// One MariaDB server, one table.
pub struct Mariadb {
    name: &'static str,
    socket: String,
    /// Each client thread's connection.
    conns: Mutex<HashMap<ThreadId, Arc<Mutex<Conn>>>>,
}

type Columns = (Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>);

impl Mariadb {
    /// Connects to the server on `socket` as root and makes `ycsb.usertable` in `storage`
    /// (dropping one left there).
    ///
    /// # Errors
    /// The server's or the connection's error.
    pub fn open(socket: &Path, storage: Storage) -> Result<Mariadb, crate::Error> {
        let db = Mariadb {
            name: match storage {
                Storage::InnoDb => "innodb",
                Storage::MyRocks => "myrocks",
            },
            socket: socket.to_string_lossy().into_owned(),
            conns: Mutex::new(HashMap::new()),
        };
        let mut c = db.connect(None)?;
        c.query_drop("CREATE DATABASE IF NOT EXISTS ycsb")?;
        c.query_drop("USE ycsb")?;
        c.query_drop("DROP TABLE IF EXISTS usertable")?;
        c.query_drop(create_table_sql(storage))?;
        Ok(db)
    }

    fn connect(&self, db: Option<&str>) -> Result<Conn, mysql::Error> {
        let opts = OptsBuilder::new()
            .socket(Some(self.socket.clone()))
            .user(Some("root"))
            .db_name(db)
            .prefer_socket(true)
            .stmt_cache_size(Some(16))
            // Affected rows count the rows matched, so an update that changes nothing (a
            // field replaced by its own value) is not taken for a missing key.
            .additional_capabilities(mysql::consts::CapabilityFlags::CLIENT_FOUND_ROWS);
        Conn::new(opts)
    }

    /// The calling thread's connection, made at its first call.
    fn conn(&self) -> EngineResult<Arc<Mutex<Conn>>> {
        let id = std::thread::current().id();
        if let Some(c) = self.conns.lock().expect("no panic holding the map").get(&id) {
            return Ok(c.clone());
        }
        let c = Arc::new(Mutex::new(self.connect(Some("ycsb"))?));
        self.conns.lock().expect("no panic holding the map").insert(id, c.clone());
        Ok(c)
    }

    fn with_conn<T>(&self, f: impl FnOnce(&mut Conn) -> mysql::Result<T>) -> EngineResult<T> {
        let c = self.conn()?;
        let mut c = c.lock().expect("one thread per connection");
        Ok(f(&mut c)?)
    }
}

fn bytes(v: &[u8]) -> Value {
    Value::Bytes(v.to_vec())
}

impl Engine for Mariadb {
    fn name(&self) -> &str {
        self.name
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        let mut params = vec![Value::Bytes(pad_key(key)?)];
        params.extend(record_to_columns(value)?.iter().map(|c| bytes(c)));
        self.with_conn(|c| c.exec_drop(INSERT, params))
    }

    fn read(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>> {
        let key = pad_key(key)?;
        let row: Option<Columns> = self.with_conn(|c| c.exec_first(SELECT, (key,)))?;
        Ok(row.map(|(a, b, c, d, e)| columns_to_record(&[a, b, c, d, e])))
    }

    fn update(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        let mut params: Vec<Value> = record_to_columns(value)?.iter().map(|c| bytes(c)).collect();
        params.push(Value::Bytes(pad_key(key)?));
        let changed = self.with_conn(|c| {
            c.exec_drop(UPDATE, params)?;
            Ok(c.affected_rows())
        })?;
        // 0 rows matched: no such key.
        if changed == 0 {
            return Err(format!("update: no row for {:?}", String::from_utf8_lossy(key)).into());
        }
        Ok(())
    }

    fn scan(&self, start_key: &[u8], count: usize) -> EngineResult<usize> {
        let key = pad_key(start_key)?;
        self.with_conn(|c| {
            let mut n = 0;
            for row in c.exec_iter(SCAN, (key, count as u64))? {
                let row = row?;
                std::hint::black_box(row.unwrap());
                n += 1;
            }
            Ok(n)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_lattes_row() {
        let sql = create_table_sql(Storage::MyRocks);
        assert!(
            sql.starts_with("CREATE TABLE usertable (ycsb_key BINARY(255) NOT NULL PRIMARY KEY")
        );
        assert_eq!(sql.matches("BINARY(50)").count(), 5);
        assert!(sql.ends_with("ENGINE=ROCKSDB"));
        assert!(create_table_sql(Storage::InnoDb).ends_with("ENGINE=InnoDB"));
        assert_eq!(Storage::from_name("innodb"), Some(Storage::InnoDb));
        assert_eq!(Storage::from_name("myrocks"), Some(Storage::MyRocks));
        assert_eq!(Storage::from_name("table"), None);
        for q in [INSERT, UPDATE] {
            assert_eq!(q.matches('?').count(), 6, "{q}");
        }
    }
}
