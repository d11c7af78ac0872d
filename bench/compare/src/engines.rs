//! The engines YCSB drives, behind `ycsb::Engine`: shale, RocksDB (11.8.1 through the `rocksdb`
//! crate 0.25, linked to the release build of `build_rocksdb.sh`) and fjall, opened with the same
//! settings in spirit:
//!
//! | setting | shale | RocksDB | fjall |
//! |---|---|---|---|
//! | block cache | `block_cache_bytes` | LRU cache of `BlockBasedOptions` | `cache_size` |
//! | memtable | `write_buffer_bytes` | `write_buffer_size` | `max_memtable_size` |
//! | compression | none | none | none (built without lz4) |
//! | bloom filter | 10 bits per key | 10 bits per key (full filter) | 10 bits per key, every level |
//! | WAL | on, plain writes not synced | on, `sync=false` | journal on, flushed to the OS per write, not synced |
//!
//! What a plain write promises differs, and the table in the report says so: shale returns
//! once the write's WAL page has reached the device (O_DIRECT; it survives a killed process),
//! RocksDB and fjall once it is in the OS page cache (it survives a killed process too, not a
//! power cut). RocksDB uses the page cache for reads unless `--rocksdb-mode direct`.

use std::path::Path;

use ycsb::{Engine, EngineResult};

/// Settings every engine gets.
#[derive(Clone, Debug)]
pub struct Settings {
    pub cache_bytes: u64,
    pub write_buffer_bytes: u64,
    /// RocksDB only: O_DIRECT reads, flushes and compactions.
    pub rocksdb_direct: bool,
    /// shale only: compactions read in the idle I/O class while the store is not behind
    /// (`Options::idle_compaction_io`, off by default).
    pub shale_idle_compaction_io: bool,
}

/// Opens engine `name` (shale, rocksdb or fjall) on a new store in `dir`.
///
/// # Errors
/// An unknown name, or the engine's own error.
pub fn open(name: &str, dir: &Path, s: &Settings) -> Result<Box<dyn Engine>, crate::Error> {
    Ok(match name {
        "shale" => Box::new(Shale::open(dir, s)?),
        "rocksdb" => Box::new(Rocks::open(dir, s)?),
        "fjall" => Box::new(Fjall::open(dir, s)?),
        other => return Err(format!("unknown engine {other:?} (shale, rocksdb, fjall)").into()),
    })
}

/// The version of engine `name` that this harness runs, for the report: RocksDB's from the
/// OPTIONS file it wrote into `store` (the library linked, whatever the crate says), fjall's
/// from this harness's Cargo.lock; `None` for shale (the report names its commit) and where
/// it cannot be read.
pub fn version(name: &str, store: &Path) -> Option<String> {
    match name {
        "rocksdb" => std::fs::read_dir(store)
            .ok()?
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("OPTIONS-"))
            .find_map(|e| {
                let text = std::fs::read_to_string(e.path()).ok()?;
                text.lines().find_map(|l| {
                    l.trim().strip_prefix("rocksdb_version=").map(|v| v.trim().to_string())
                })
            }),
        "fjall" => locked_version(include_str!("../Cargo.lock"), "fjall"),
        _ => None,
    }
}

/// The version of package `name` in a Cargo.lock's text.
fn locked_version(lock: &str, name: &str) -> Option<String> {
    let mut lines = lock.lines();
    while let Some(l) = lines.next() {
        if l.trim() == format!("name = \"{name}\"") {
            let v = lines.next()?.trim().strip_prefix("version = \"")?.strip_suffix('"')?;
            return Some(v.to_string());
        }
    }
    None
}

/// The engines, in the order a repeat runs them.
pub const ALL: [&str; 3] = ["rocksdb", "shale", "fjall"];

/// shale's lsm engine.
pub struct Shale {
    db: Option<shale::Db>,
}

impl Shale {
    fn open(dir: &Path, s: &Settings) -> Result<Shale, crate::Error> {
        let mut o = shale::Options {
            block_cache_bytes: s.cache_bytes as usize,
            write_buffer_bytes: s.write_buffer_bytes as usize,
            idle_compaction_io: s.shale_idle_compaction_io,
            ..shale::Options::default()
        };
        o.sst.bloom_bits_per_key = 10;
        o.sst.compression = shale::lsm::Compression::None;
        // The WAL area is the engine's to size from the write buffer (as for `shale bench`).
        Ok(Shale { db: Some(shale::Db::open(dir, o)?) })
    }

    fn db(&self) -> &shale::Db {
        self.db.as_ref().expect("the store is open until dropped")
    }
}

impl Drop for Shale {
    fn drop(&mut self) {
        if let Some(db) = self.db.take()
            && let Err(e) = db.close()
        {
            eprintln!("shale-compare: closing shale: {e}");
        }
    }
}

impl Engine for Shale {
    fn name(&self) -> &str {
        "shale"
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        Ok(self.db().put(key, value)?)
    }

    fn read(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>> {
        Ok(self.db().get(key)?)
    }

    fn update(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        Ok(self.db().put(key, value)?)
    }

    fn scan(&self, start_key: &[u8], count: usize) -> EngineResult<usize> {
        let mut it = self.db().iter(&shale::ReadOptions::default());
        it.seek(start_key);
        let mut n = 0;
        while it.valid() && n < count {
            std::hint::black_box(it.value().to_vec());
            n += 1;
            it.next();
        }
        it.status()?;
        Ok(n)
    }
}

/// RocksDB through its C API.
pub struct Rocks {
    db: rocksdb::DB,
}

/// The options every YCSB run of RocksDB opens with (this suite's, `tiered-ycsb`'s and
/// `adoc-ycsb`'s): no compression, a memtable of `write_buffer_bytes`, `background_jobs`
/// background jobs, dynamic level sizing, an LRU block cache of `cache_bytes` and 10 bloom bits
/// per key. Callers add what their placement or configuration needs.
pub fn rocks_options(
    write_buffer_bytes: u64,
    cache_bytes: u64,
    background_jobs: i32,
) -> rocksdb::Options {
    let mut o = rocksdb::Options::default();
    o.set_compression_type(rocksdb::DBCompressionType::None);
    o.set_write_buffer_size(write_buffer_bytes as usize);
    o.set_max_background_jobs(background_jobs);
    // shale's default, and RocksDB's since 8.4.
    o.set_level_compaction_dynamic_level_bytes(true);
    let cache = rocksdb::Cache::new_lru_cache(cache_bytes as usize);
    let mut table = rocksdb::BlockBasedOptions::default();
    table.set_block_cache(&cache);
    table.set_bloom_filter(10.0, false);
    o.set_block_based_table_factory(&table);
    o
}

impl Rocks {
    fn open(dir: &Path, s: &Settings) -> Result<Rocks, crate::Error> {
        // Two background jobs: db_bench's default, so the two RocksDB suites run alike.
        let mut o = rocks_options(s.write_buffer_bytes, s.cache_bytes, 2);
        o.create_if_missing(true);
        if s.rocksdb_direct {
            o.set_use_direct_reads(true);
            o.set_use_direct_io_for_flush_and_compaction(true);
        }
        Ok(Rocks { db: rocksdb::DB::open(&o, dir)? })
    }

    /// RocksDB opened by its caller.
    pub fn from_db(db: rocksdb::DB) -> Rocks {
        Rocks { db }
    }
}

impl Engine for Rocks {
    fn name(&self) -> &str {
        "rocksdb"
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        Ok(self.db.put(key, value)?)
    }

    fn read(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>> {
        Ok(self.db.get(key)?)
    }

    fn update(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        Ok(self.db.put(key, value)?)
    }

    fn scan(&self, start_key: &[u8], count: usize) -> EngineResult<usize> {
        let mut it = self.db.raw_iterator();
        it.seek(start_key);
        let mut n = 0;
        while n < count {
            let Some(v) = it.value() else { break };
            std::hint::black_box(v.to_vec());
            n += 1;
            it.next();
        }
        it.status()?;
        Ok(n)
    }
}

/// fjall, one keyspace.
pub struct Fjall {
    // Dropped after the keyspace: fields drop in declaration order.
    keyspace: fjall::Keyspace,
    _db: fjall::Database,
}

impl Fjall {
    fn open(dir: &Path, s: &Settings) -> Result<Fjall, crate::Error> {
        use fjall::config::{
            BloomConstructionPolicy, CompressionPolicy, FilterPolicy, FilterPolicyEntry,
        };
        let db = fjall::Database::builder(dir).cache_size(s.cache_bytes).open()?;
        let memtable = s.write_buffer_bytes;
        let keyspace = db.keyspace("usertable", move || {
            fjall::KeyspaceCreateOptions::default()
                .max_memtable_size(memtable)
                .data_block_compression_policy(CompressionPolicy::all(fjall::CompressionType::None))
                .filter_policy(FilterPolicy::all(FilterPolicyEntry::Bloom(
                    BloomConstructionPolicy::BitsPerKey(10.0),
                )))
        })?;
        Ok(Fjall { keyspace, _db: db })
    }
}

impl Engine for Fjall {
    fn name(&self) -> &str {
        "fjall"
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        Ok(self.keyspace.insert(key, value)?)
    }

    fn read(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>> {
        Ok(self.keyspace.get(key)?.map(|v| v.to_vec()))
    }

    fn update(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        Ok(self.keyspace.insert(key, value)?)
    }

    fn scan(&self, start_key: &[u8], count: usize) -> EngineResult<usize> {
        let mut n = 0;
        for item in self.keyspace.range(start_key..).take(count) {
            let (_, v) = item.into_inner()?;
            std::hint::black_box(v.to_vec());
            n += 1;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every engine stores, reads, overwrites and scans in key order.
    #[test]
    fn engines_agree_on_a_small_store() {
        let s = Settings {
            cache_bytes: 1 << 20,
            write_buffer_bytes: 4 << 20,
            rocksdb_direct: false,
            shale_idle_compaction_io: false,
        };
        for name in ALL {
            let dir = std::env::temp_dir()
                .join(format!("shale-compare-engine-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            {
                let e = open(name, &dir, &s).unwrap();
                assert_eq!(e.name(), name);
                for i in 0..100u32 {
                    e.insert(format!("user{i:03}").as_bytes(), &i.to_le_bytes()).unwrap();
                }
                e.update(b"user007", b"seven").unwrap();
                assert_eq!(e.read(b"user007").unwrap().as_deref(), Some(&b"seven"[..]), "{name}");
                assert_eq!(e.read(b"user100").unwrap(), None, "{name}");
                assert_eq!(e.scan(b"user090", 20).unwrap(), 10, "{name}");
                assert_eq!(e.scan(b"user0", 5).unwrap(), 5, "{name}");
            }
            std::fs::remove_dir_all(&dir).unwrap();
        }
        assert!(open("leveldb", Path::new("/nonexistent"), &s).is_err());
    }

    /// The report names the RocksDB it ran from the store's own OPTIONS file.
    #[test]
    fn versions_come_from_the_store_and_the_lock_file() {
        let s = Settings {
            cache_bytes: 1 << 20,
            write_buffer_bytes: 4 << 20,
            rocksdb_direct: false,
            shale_idle_compaction_io: false,
        };
        let dir = tempfile_dir("version");
        drop(open("rocksdb", &dir, &s).unwrap());
        assert_eq!(version("rocksdb", &dir).as_deref(), Some("11.8.1"));
        std::fs::remove_dir_all(&dir).unwrap();
        let fjall = version("fjall", &dir).unwrap();
        assert!(fjall.starts_with("3."), "{fjall}");
        assert_eq!(version("shale", &dir), None);
        let lock = "[[package]]\nname = \"a\"\nversion = \"1.2.3\"\n";
        assert_eq!(locked_version(lock, "a").as_deref(), Some("1.2.3"));
        assert_eq!(locked_version(lock, "b"), None);
    }

    fn tempfile_dir(what: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir()
            .join(format!("shale-compare-engine-{what}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
