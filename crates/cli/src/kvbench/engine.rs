//! The hash and lsm engines behind KVSB's [`Instance`] trait, one per volume.
//!
//! Device bytes come from the kernel when the path is a block device or sits on a loop
//! device of its own (`/sys/block/<dev>/stat`, sectors written), else from the volume's own
//! I/O counters (every class: header, version log, WAL area, slots) for the hash engine, and
//! for the lsm engine its own counts of WAL, SST and version-log bytes (its SSTs may be
//! written through the page cache, which the volume's counters do not see).

use std::convert::Infallible;

use shale_hash::{Error as HashError, HashStore, HashTicket, StoreMode};
use shale_lsm::{Db, WriteBatch, WriteOptions};
use shale_space::{IoClass, Volume};
use ycsb::EngineResult;
use ycsb::kvsb::process::BlockStat;
use ycsb::kvsb::{Instance, Op, Submitted, Written};

/// Bytes the volume's counters saw written, every class.
fn volume_write_bytes(v: &Volume) -> u64 {
    IoClass::ALL.iter().map(|&c| v.io(c).write_bytes).sum()
}

fn source(stat: &Option<BlockStat>) -> String {
    match stat {
        Some(s) => s.source(),
        None => "volume I/O counters, every class".into(),
    }
}

/// A hash store on one volume. With a queue depth of 1 it is driven by the synchronous calls;
/// deeper, by the asynchronous ones, tickets kept in flight by the driver.
pub struct HashInstance {
    pub store: HashStore,
    pub asynchronous: bool,
    pub stat: Option<BlockStat>,
}

/// A hash store's ticket in flight.
pub enum HashPending {
    Store(HashTicket<()>),
    Retrieve(HashTicket<Option<Vec<u8>>>),
}

impl Instance for HashInstance {
    type Pending = HashPending;

    fn submit(&self, op: Op<'_>) -> EngineResult<Submitted<HashPending>> {
        let submitted = match (op, self.asynchronous) {
            (Op::Put { key, value }, false) => {
                self.store.store(key, value, StoreMode::Overwrite)?;
                return Ok(Submitted::Done(true));
            }
            (Op::Get { key }, false) => {
                return Ok(Submitted::Done(self.store.retrieve(key)?.is_some()));
            }
            (Op::Put { key, value }, true) => {
                self.store.submit_store(key, value, StoreMode::Overwrite).map(HashPending::Store)
            }
            (Op::Get { key }, true) => self.store.submit_retrieve(key).map(HashPending::Retrieve),
        };
        match submitted {
            Ok(p) => Ok(Submitted::Pending(p)),
            Err(HashError::Busy) => Ok(Submitted::Busy),
            Err(e) => Err(e.into()),
        }
    }

    fn poll(&self, pending: &mut HashPending) -> Option<EngineResult<bool>> {
        match pending {
            HashPending::Store(t) => t.try_take().map(|r| r.map(|()| true).map_err(Into::into)),
            HashPending::Retrieve(t) => {
                t.try_take().map(|r| r.map(|v| v.is_some()).map_err(Into::into))
            }
        }
    }

    fn wait(&self, pending: HashPending) -> EngineResult<bool> {
        match pending {
            HashPending::Store(t) => Ok(t.wait().map(|()| true)?),
            HashPending::Retrieve(t) => Ok(t.wait()?.is_some()),
        }
    }

    fn written(&self) -> Written {
        let device_bytes = match &self.stat {
            Some(s) => s.write_bytes(),
            None => volume_write_bytes(self.store.volume()),
        };
        // The engine's garbage collection counts its own log writes (docs/hash.md); they are
        // among the device's bytes too.
        Written { device_bytes, gc_bytes: self.store.stats().gc_bytes_written }
    }

    fn written_source(&self) -> String {
        source(&self.stat)
    }

    fn gc_note(&self) -> &'static str {
        "included in the device bytes"
    }
}

/// An lsm store on one volume, driven by its synchronous calls.
pub struct LsmInstance {
    pub db: Db,
    pub write: WriteOptions,
    pub stat: Option<BlockStat>,
}

impl Instance for LsmInstance {
    type Pending = Infallible;

    fn submit(&self, op: Op<'_>) -> EngineResult<Submitted<Infallible>> {
        match op {
            Op::Put { key, value } => {
                let mut batch = WriteBatch::new();
                batch.put(key, value);
                self.db.write(&batch, &self.write)?;
                Ok(Submitted::Done(true))
            }
            Op::Get { key } => Ok(Submitted::Done(self.db.get(key)?.is_some())),
        }
    }

    fn poll(&self, pending: &mut Infallible) -> Option<EngineResult<bool>> {
        match *pending {}
    }

    fn wait(&self, pending: Infallible) -> EngineResult<bool> {
        match pending {}
    }

    fn written(&self) -> Written {
        let device_bytes = match &self.stat {
            Some(s) => s.write_bytes(),
            None => {
                // SSTs written through the page cache bypass the volume's counters: the
                // engine's own counts of what it wrote cover every path.
                let st = self.db.stats();
                st.wal_bytes_written + st.sst_bytes_written + st.version_log_bytes_written
            }
        };
        Written { device_bytes, gc_bytes: 0 }
    }

    fn written_source(&self) -> String {
        match &self.stat {
            Some(s) => s.source(),
            None => "lsm stats: WAL + SST + version log bytes".into(),
        }
    }

    fn gc_note(&self) -> &'static str {
        "compaction counted in device bytes"
    }

    /// Writes out the memtable and waits for the compactions it makes due: the engine keeps a
    /// workload's recent writes in its memtable and their records in the WAL tail in
    /// `/dev/shm`, so a workload that fills less than a memtable wrote nothing to the device
    /// yet, and its write amplification read 0.0000.
    fn settle(&self) -> EngineResult<()> {
        self.db.flush()?;
        self.db.wait_for_compaction()?;
        Ok(())
    }
}
