//! Read-only opens (RocksDB's `OpenForReadOnly`): a store read without one byte written.
//!
//! 1. The store lock is taken shared (`shale_space::store_lock`): other read-only handles may hold it,
//!    a read-write one may not, so what is read does not change underneath.
//! 2. The volume is opened O_RDONLY and refuses allocations and commits
//!    ([`shale_space::Volume::open_path_read_only`]); recovery of the version log only reads.
//! 3. The WAL is read as a read-write open reads it (`recovery.rs`, stages 1 and 2); the WAL
//!    tail is read where it lies, never created, formatted, trimmed or removed, so a later
//!    read-write open finds it as the crash left it.
//! 4. The replayed records stay in memtables, sealed as they fill, and are read from there:
//!    nothing is flushed, no WAL group starts and no background thread runs.
//!
//! Every call that would write (`write` and its forms, `flush`, `compact_range`, the `set_*`
//! knobs) answers [`Error::ReadOnly`]; `close` and drop write nothing.
//!
//! Why this matters beyond tools: a read-write open writes as it recovers (the replayed WAL
//! becomes an L0 SST, the WAL tail is cleared), which fails on a read-only mount or a full
//! file system, and which `shale check` must never do to a store it only verifies.

use std::sync::Arc;
use std::time::Instant;

use shale_space::Opened;

use crate::error::{Error, Result};
use crate::memtable::Memtable;
use crate::options::Options;
use crate::sst::PageCacheFiles;

use super::recovery::Recovered;
use super::{AsyncApi, Db, Inner};

impl Db {
    /// Stages 3 and 4 on a read-only volume.
    pub(super) fn open_volume_read_only(
        opened: Opened,
        opts: Options,
        files: [PageCacheFiles; 2],
    ) -> Result<Db> {
        assert!(opened.volume.is_read_only(), "a read-only open needs a read-only volume");
        let started = Instant::now();
        let Recovered { inner, groups, tail_records } = Db::recover(opened, opts, files)?;
        let mut sealed: Vec<Arc<Memtable>> = Vec::new();
        let (last_seq, from_tail) = inner.replay_records(&groups, &tail_records, &mut |mem| {
            sealed.push(mem);
            Ok(())
        })?;
        {
            let mut st = inner.state.lock();
            inner.publish_last_seq(&mut st, last_seq);
            // Oldest first, as the read path expects; they are never flushed, so their WAL
            // generation is not needed.
            st.imm = sealed.into_iter().map(|m| (m, 0)).collect();
            inner.publish_view(&st);
        }
        log::info!(
            "opened store read-only: {} WAL records from {} groups and {} from the WAL tail kept \
             in memory, last sequence {last_seq}, {:?}",
            groups.iter().map(|g| g.records.len()).sum::<usize>(),
            groups.len(),
            from_tail,
            started.elapsed()
        );
        let async_api = AsyncApi::new(inner.opts.async_queue_depth, inner.opts.async_workers);
        Ok(Db { inner, async_api, _locks: Vec::new() })
    }
}

impl Inner {
    /// [`Error::ReadOnly`] naming `what` on a read-only store.
    pub(super) fn refuse_if_read_only(&self, what: &str) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly(format!(
                "{what} refused: the store was opened with Db::open_read_only"
            )));
        }
        Ok(())
    }
}
