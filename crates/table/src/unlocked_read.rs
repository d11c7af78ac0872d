//! Reads of blocks outside the store's mutex, so that one transaction's device reads do
//! not hold up the others (a scan's batch, a point read of a block not cached).
//!
//! 1. Under the mutex: the blocks the records at known positions begin in that the cache
//!    lacks are registered in the cache (`Storage::begin_read_ahead`).
//! 2. Without it: they are read together, in block order, up to 32 in flight
//!    (`batch_io.rs`), on a queue checked out of the volume's pool (opened when none is
//!    idle: at most one per thread reading at once), or on the store's queue pairs.
//! 3. Under the mutex again: each block read is checked and cached unless anything put it
//!    in the cache meanwhile (`cache.rs`: the read may be older than a change made during
//!    it), or its table was dropped.
//! 4. The same for the blocks the records run on into, their lengths being in the headers
//!    now cached.
//!
//! This only warms the cache: the caller then reads the rows under the mutex and its locks
//! as it would have, and a block evicted in between is read again there.

use crate::batch_io::{self, BlockQueue};
use crate::block::Pos;
use crate::error::Result;
use crate::store::Shared;
use shale_io::AlignedBuf;

/// The blocks of the records at `positions` of `table`, read ahead into the cache.
///
/// # Errors
/// A device error, or [`crate::Error::Corruption`] of a block read.
pub(crate) fn read_records_ahead(shared: &Shared, table: u32, positions: &[Pos]) -> Result<()> {
    let mut firsts: Vec<u64> = positions.iter().map(|p| p.block).collect();
    firsts.sort_unstable();
    firsts.dedup();
    read_ahead(shared, table, &firsts)?;
    let rest = shared.storage_at(&crate::store::mutex_site::READ).continuations(table, positions);
    read_ahead(shared, table, &rest)
}

/// Reads the blocks `numbers` of `table` that the cache lacks, outside the store's mutex,
/// and caches those that nothing changed meanwhile.
fn read_ahead(shared: &Shared, table: u32, numbers: &[u64]) -> Result<()> {
    let wanted =
        shared.storage_at(&crate::store::mutex_site::READ).begin_read_ahead(table, numbers);
    if wanted.is_empty() {
        return Ok(());
    }
    let read = read_registered(shared, &wanted);
    shared.storage_at(&crate::store::mutex_site::READ).end_read_ahead(table, &wanted, read)
}

/// Reads the blocks `wanted` (block numbers and addresses, registered by
/// `Storage::begin_read_ahead`) outside the store's mutex, together, on a queue of the
/// read pool; the caller ends the reads under the mutex (`Storage::end_read_ahead`).
///
/// # Errors
/// A device error.
pub(crate) fn read_registered(shared: &Shared, wanted: &[(u64, u64)]) -> Result<Vec<AlignedBuf>> {
    match shared.read_queues.take() {
        Ok(mut q) => {
            let addresses: Vec<u64> = wanted.iter().map(|w| w.1).collect();
            let read = batch_io::read_blocks(&mut q, &addresses);
            // A queue whose reads failed may be broken: it is closed, not given back.
            if let (Err(_), BlockQueue::Pooled(q)) = (&read, q) {
                q.discard();
            }
            read
        }
        Err(e) => Err(e),
    }
}
