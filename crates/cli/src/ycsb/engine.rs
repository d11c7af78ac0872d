//! The lsm engine behind YCSB's [`Engine`] trait.

use ::ycsb::{Engine, EngineResult};
use shale_lsm::{Db, ReadOptions, WriteBatch, WriteOptions};

/// A store driven by YCSB: inserts and updates are single-put batches with `write` (unsynced
/// by default, as YCSB's RocksDB binding writes), reads are point lookups, scans an iterator
/// from the start key.
pub struct ShaleEngine {
    db: Db,
    write: WriteOptions,
}

impl ShaleEngine {
    /// Drives `db`, writing with `write`.
    pub fn new(db: Db, write: WriteOptions) -> ShaleEngine {
        ShaleEngine { db, write }
    }

    /// The store, to close it.
    pub fn into_db(self) -> Db {
        self.db
    }

    fn put(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        let mut batch = WriteBatch::new();
        batch.put(key, value);
        Ok(self.db.write(&batch, &self.write)?)
    }
}

impl Engine for ShaleEngine {
    fn name(&self) -> &str {
        "shale"
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        self.put(key, value)
    }

    fn read(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>> {
        Ok(self.db.get(key)?)
    }

    fn update(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        self.put(key, value)
    }

    fn scan(&self, start_key: &[u8], count: usize) -> EngineResult<usize> {
        let opts = ReadOptions { lower_bound: Some(start_key.to_vec()), ..Default::default() };
        let mut it = self.db.iter(&opts);
        it.seek_to_first();
        // Each value is copied out, as YCSB's bindings deserialise each scanned record.
        let mut value = Vec::new();
        let mut n = 0;
        while n < count && it.valid() {
            value.clear();
            value.extend_from_slice(it.value());
            n += 1;
            it.next();
        }
        it.status()?;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shale_lsm::Options;

    #[test]
    fn the_store_does_what_ycsb_asks() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::small_for_tests()).unwrap();
        let e = ShaleEngine::new(db, WriteOptions::default());
        for k in [b"user3", b"user1", b"user2"] {
            e.insert(k, b"v").unwrap();
        }
        e.update(b"user2", b"w").unwrap();
        assert_eq!(e.read(b"user2").unwrap(), Some(b"w".to_vec()));
        assert_eq!(e.read(b"user9").unwrap(), None);
        assert_eq!(e.scan(b"user2", 10).unwrap(), 2);
        assert_eq!(e.scan(b"user", 2).unwrap(), 2);
        assert_eq!(e.scan(b"user4", 5).unwrap(), 0);
        e.into_db().close().unwrap();
    }
}
