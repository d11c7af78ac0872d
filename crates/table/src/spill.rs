//! The undo log's spill area: a second undo log, on the volume, for the before-images that
//! find no room in persistent memory (a transaction larger than the ring, or many open at
//! once), and the whole undo log with `UndoLogPlace::Volume`.
//!
//! The spill area is one extent of contiguous slots, allocated at the first spill and named
//! in the catalog (`catalog.rs`) before a byte of it is written; it stays with the store.
//! [`SpillArea`] gives its bytes as a [`PmemLog`] (read from a mirror, written with FUA
//! block writes). Today's areas hold the page log of `volume_undo.rs` ([`SpillLog::Paged`]).
//! A store written before it has an area in the ring format of persistent memory
//! (`undo_log.rs`; the catalog's spill kinds 5, 6 and 9 say so), which recovery walks with
//! the ring's code ([`SpillLog::Ring`]) and then rewrites in the page log format
//! (`Storage::recover`). That older format, laid on the extent's bytes:
//!
//! ```text
//! spill area (one extent; addresses relative to its first byte; 4 KiB device blocks)
//! offset  size   field
//!   0      64    undo log header copy A   (the layout of `undo_log.rs`: magic b"SHPM",
//!  64      64    undo log header copy B    crc32c, volume id, sequence, head, head lsn)
//! 128   len-128  the ring: undo records (`undo.rs`), 8-aligned, head to tail
//! ```
//!
//! The page log writes whole 4 KiB pages at multiples of 4 KiB, each write persisted at
//! once, so `persist` below writes exactly its pages.
//!
//! [`SpillArea`] is a [`PmemLog`] over that extent, so the ring code is the persistent
//! memory's, walk, reclaim and corruption checks included. Its model differs in one way:
//! `persist` writes every 4 KiB block the range touches, whole, with FUA (durable when it
//! returns), from a mirror of the extent kept in memory. That is safe because the log never
//! leaves a write unpersisted (each `write` is followed by the `persist` of its range), so
//! the mirror's bytes outside the range are the durable bytes: a block write torn by a power
//! cut leaves each 512-byte sector old or new, and an old sector holds exactly what was
//! there. The state byte of an expired record, a header copy (64 bytes, inside one
//! sector), a record being appended (the newest; torn, it fails its checksum and ends the
//! walk as a torn append does in persistent memory) are the only bytes that differ.

use shale_io::{AlignedBuf, QueueExt, QueueOptions};
use shale_space::{Extent, IoClass, Volume, VolumeQueue};

use crate::block::BLOCK_BYTES;
use crate::error::{Error, Result};
use crate::pmem::PmemLog;

/// The spill area's bytes as a [`PmemLog`].
pub struct SpillArea {
    queue: VolumeQueue,
    /// Device address of the extent's first byte.
    start: u64,
    /// The extent's bytes: what was read at the open, then every write.
    mirror: Vec<u8>,
    /// Block writes sent (each with FUA).
    writes: u64,
}

impl std::fmt::Debug for SpillArea {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpillArea")
            .field("start", &self.start)
            .field("len", &self.mirror.len())
            .field("writes", &self.writes)
            .finish()
    }
}

impl SpillArea {
    /// Opens the spill area in extent `e` of `volume`, reading it whole.
    ///
    /// # Errors
    /// The device's error for the read.
    pub fn open(volume: &Volume, e: Extent) -> Result<SpillArea> {
        let range = volume.extent_range(e);
        let mut queue = volume.queues().open(IoClass::Slot, &QueueOptions::default())?;
        let mirror = queue.read_at(range.start, (range.end - range.start) as usize)?.to_vec();
        Ok(SpillArea { queue, start: range.start, mirror, writes: 0 })
    }

    /// Zeroes extent `e` durably: a new spill area (on a block device, reused slots hold
    /// old bytes, and a stale record must never be taken for one of this log).
    ///
    /// # Errors
    /// The device's error.
    pub fn zero(volume: &Volume, e: Extent) -> Result<()> {
        let range = volume.extent_range(e);
        let mut queue = volume.queues().checkout(crate::batch_io::BLOCK_QUEUES)?;
        let zeros = AlignedBuf::zeroed((range.end - range.start) as usize);
        queue.write_at(range.start, zeros, true)?;
        Ok(())
    }
}

impl PmemLog for SpillArea {
    fn len(&self) -> usize {
        self.mirror.len()
    }

    fn read(&self, offset: usize, out: &mut [u8]) {
        out.copy_from_slice(&self.mirror[offset..offset + out.len()]);
    }

    fn write(&mut self, offset: usize, data: &[u8]) {
        self.mirror[offset..offset + data.len()].copy_from_slice(data);
    }

    fn persist(&mut self, offset: usize, len: usize) -> Result<()> {
        assert!(offset + len <= self.mirror.len(), "persist past the spill area's end");
        if len == 0 {
            return Ok(());
        }
        let first = offset / BLOCK_BYTES * BLOCK_BYTES;
        let end = (offset + len).next_multiple_of(BLOCK_BYTES).min(self.mirror.len());
        let buf = AlignedBuf::padded_copy(&self.mirror[first..end], BLOCK_BYTES);
        self.writes += 1;
        self.queue.write_at(self.start + first as u64, buf, true).map_err(Error::from)?;
        Ok(())
    }
}

/// The undo log in the spill area: in the page log format (`volume_undo.rs`), or, in a
/// store written before it, the ring format of persistent memory, read by recovery and then
/// rewritten in the page log format (`Storage::recover`).
#[derive(Debug)]
pub enum SpillLog {
    /// The `SHPM` ring (`undo_log.rs`) of a store written before the page log format.
    Ring(crate::undo_log::UndoLog),
    /// The page log (`volume_undo.rs`).
    Paged(crate::volume_undo::VolumeUndoLog),
}

impl SpillLog {
    /// Appends `rec`, durable before this returns.
    ///
    /// # Errors
    /// As the log's `append`.
    pub fn append(
        &mut self,
        rec: &mut crate::undo::UndoRecord,
    ) -> Result<crate::undo_log::UndoHandle> {
        match self {
            SpillLog::Ring(l) => l.append(rec),
            SpillLog::Paged(l) => l.append(rec),
        }
    }

    /// Expires records, durably.
    ///
    /// # Errors
    /// As the log's `expire`.
    pub fn expire(&mut self, handles: &[crate::undo_log::UndoHandle]) -> Result<()> {
        match self {
            SpillLog::Ring(l) => l.expire(handles),
            SpillLog::Paged(l) => l.expire(handles),
        }
    }

    /// Expires records, durably in the ring; in the page log with the expiry record packed
    /// for the log's next write (`VolumeUndoLog::expire_packed`). Returns whether a write
    /// ([`SpillLog::sync`]) is still needed to make the expiry durable.
    ///
    /// # Errors
    /// As the log's `expire`.
    pub fn expire_packed(&mut self, handles: &[crate::undo_log::UndoHandle]) -> Result<bool> {
        match self {
            SpillLog::Ring(l) => l.expire(handles).map(|()| false),
            SpillLog::Paged(l) => l.expire_packed(handles).map(|()| !handles.is_empty()),
        }
    }

    /// Makes every record appended so far durable (the ring's are durable once appended).
    ///
    /// # Errors
    /// The device's error.
    pub fn sync(&mut self) -> Result<()> {
        match self {
            SpillLog::Ring(_) => Ok(()),
            SpillLog::Paged(l) => l.sync(),
        }
    }

    /// Reclaims what is expired.
    ///
    /// # Errors
    /// As the log's `reclaim`.
    pub fn reclaim(&mut self) -> Result<()> {
        match self {
            SpillLog::Ring(l) => l.reclaim(),
            SpillLog::Paged(l) => l.reclaim(),
        }
    }

    /// Counters now.
    pub fn stats(&self) -> crate::undo_log::UndoStats {
        match self {
            SpillLog::Ring(l) => l.stats(),
            SpillLog::Paged(l) => l.stats(),
        }
    }
}
