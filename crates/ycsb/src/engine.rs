//! The one interface the driver needs from a key-value engine.

/// An engine's error, as the driver keeps and reports it.
pub type EngineError = Box<dyn std::error::Error + Send + Sync>;

/// A result of an [`Engine`] call.
pub type EngineResult<T> = Result<T, EngineError>;

/// A key-value engine under test: four primitive calls, shared by every client thread.
///
/// The driver composes YCSB's operations from these calls the same way for every engine
/// (see [`Config::write_all_fields`](crate::Config) for updates), so two engines are always
/// asked for the same work. Keys are YCSB's `user...` strings as bytes; values are encoded
/// records ([`record`](crate::record)). An error is counted as `Return=ERROR` for its
/// operation and kept in the [`Report`](crate::Report); the run goes on, as YCSB's does.
pub trait Engine: Send + Sync {
    /// A short name for reports ("shale", "rocksdb", ...).
    fn name(&self) -> &str;

    /// Stores a new record under `key`.
    fn insert(&self, key: &[u8], value: &[u8]) -> EngineResult<()>;

    /// The record under `key`, or `None` when there is none.
    fn read(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>>;

    /// Replaces the whole record under `key` with `value` (a blind write: the driver has
    /// already read the record when the update changes only some fields).
    fn update(&self, key: &[u8], value: &[u8]) -> EngineResult<()>;

    /// Reads up to `count` records in key order, starting at the first key at or after
    /// `start_key`, and returns how many it read. Each record's value must actually be read
    /// (copied out of the engine), as YCSB's bindings deserialise every record they scan.
    fn scan(&self, start_key: &[u8], count: usize) -> EngineResult<usize>;
}

impl<E: Engine + ?Sized> Engine for &E {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn insert(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        (**self).insert(key, value)
    }
    fn read(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>> {
        (**self).read(key)
    }
    fn update(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        (**self).update(key, value)
    }
    fn scan(&self, start_key: &[u8], count: usize) -> EngineResult<usize> {
        (**self).scan(start_key, count)
    }
}

impl<E: Engine + ?Sized> Engine for Box<E> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn insert(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        (**self).insert(key, value)
    }
    fn read(&self, key: &[u8]) -> EngineResult<Option<Vec<u8>>> {
        (**self).read(key)
    }
    fn update(&self, key: &[u8], value: &[u8]) -> EngineResult<()> {
        (**self).update(key, value)
    }
    fn scan(&self, start_key: &[u8], count: usize) -> EngineResult<usize> {
        (**self).scan(start_key, count)
    }
}
