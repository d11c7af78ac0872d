//! The data of a store: tables of row records in blocks on the volume's slots, their
//! indexes, the block cache and the undo log, behind one lock (`Shared::storage`).
//!
//! A change of a transaction goes through these stages (the caller holds the locks of
//! stage 1, `txn.rs`):
//! 1. Lock: the row exclusively (and the table in intention or exclusive mode).
//! 2. Locate: find the row by its key's hash, confirming the full key from its block.
//! 3. Room: an insert goes at the table's end; a segment it needs is allocated and named in
//!    the version log *before* a byte is written to it, so recovery knows every block.
//! 4. Undo: the before-image (or, for an insert, the fact that the bytes were free) is
//!    appended to the undo log and persisted (write-back of its lines and a fence); in the
//!    spill area's page log it is packed and written before the next block write
//!    (`volume_undo.rs`, `sync_spill`).
//! 5. In place: the blocks the change touches are changed in the cache, each resealed
//!    (self-describing and checksummed), and left dirty (write-behind, `cache.rs`).
//! 6. Index: the key points at its row, or no longer does (the hash index and the
//!    ordered one).
//!
//! Commit: (1) write every dirty block, each once, whoever changed it, then flush the
//! device, making every block written so far durable (the group flush's write rounds and
//! device flushes, each led by one commit for every commit waiting, `group_flush.rs`,
//! outside this mutex); (2) mark the
//! transaction's undo records expired, persisted (in the spill area's page log, the expiry
//! packed and written by a group's write before the commit returns); (3) the caller
//! releases the locks. Abort: (1) write each before-image back, newest first, fixing the
//! index; (2) write the dirty blocks and flush the device (outside this mutex); (3) expire
//! the records; (4) release the locks. Stage 4 before any write of
//! stage 5's blocks, and commit's 1 before 2, are the whole of crash safety: every block
//! write that may not be durable is covered by an active undo record, and recovery
//! (`recover`) rolls every active record back. A dirty block's write may carry the changes
//! of transactions still open: their records are active, as when each change wrote its
//! block at once.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use shale_io::{AlignedBuf, QueueOptions, QueuePairs};
use shale_space::{Edit, Extent, IoClass, Volume, VolumeQueue};

use crate::batch_io::{self, BlockQueue, ReadQueues};
use crate::block::{self, BLOCK_BYTES, BlockState, HEADER_BYTES, NO_ROW, PAYLOAD_BYTES, Pos};
use crate::cache::BlockCache;
use crate::catalog::{self, Catalog, TableMeta};
use crate::error::{Error, Result};
use crate::free_space::FreeSpace;
use crate::index::{Index, PageIo};
use crate::options::TableOptions;
use crate::ordered_index::OrderedIndex;
use crate::row::{self, RowHeader, RowState};
use crate::schema::{Row, Schema};
use crate::spill::{SpillArea, SpillLog};
use crate::store::TableStats;
use crate::undo::{Before, UndoRecord};
use crate::undo_log::{ReclaimPolicy, Ring, UndoHandle, UndoLog, Walked};
use crate::volume_undo::VolumeUndoLog;

/// A change made by a transaction: its undo record, kept to roll it back.
pub type Change = (UndoHandle, UndoRecord);

/// The spill area's log behind the undo log latch (`None` until the area is made). Order:
/// the block writer's latch, the store's mutex, then this latch; never the mutex while
/// holding this latch.
pub(crate) type SpillLatch = Arc<parking_lot::Mutex<Option<SpillLog>>>;

/// The contention profile's site of the undo log latch.
static UNDO_LATCH: shale_space::contention::Site =
    shale_space::contention::Site::new("table: undo log latch");

/// Takes the undo log latch through its contention site.
pub(crate) fn lock_spill(
    latch: &SpillLatch,
) -> shale_space::contention::Held<'_, Option<SpillLog>> {
    UNDO_LATCH.lock(latch)
}

/// The undo log's region and place for [`Storage::recover`] (`undo_file.rs` decides them).
pub(crate) struct UndoSetup {
    /// The persistent memory region: the store's file, a caller's region, or one in memory
    /// standing in for it while the log is on the volume.
    pub pmem: Box<dyn crate::pmem::PmemLog>,
    /// The store instance written into the region's headers (zero: none).
    pub binding: [u8; 16],
    /// New records go to the log's ring on the volume.
    pub on_volume: bool,
    /// The region is read at the open only: once its records are rolled back, one in
    /// memory replaces it (the caller then removes its file).
    pub retire: bool,
    /// The catalog's new entry for the log's file (`Some(None)`: none).
    pub record: Option<Option<crate::undo_file::UndoFile>>,
    /// Nothing may be written (the store checker's in-memory recovery): a spill area of the
    /// ring format is read and left as it is.
    pub read_only: bool,
}

pub(crate) struct Table {
    pub meta: TableMeta,
    /// Where the next record may go.
    end: Pos,
    index: Index,
    /// The same keys in order, for scans (`ordered_index.rs`).
    order: OrderedIndex,
    /// Dead records whose slots a new record may take.
    free: FreeSpace,
}

/// The share of the cache that may be dirty: past `capacity / DIRTY_BLOCKS_MAX_DIVISOR`
/// dirty blocks, a change writes them all.
pub const DIRTY_BLOCKS_MAX_DIVISOR: usize = 2;

/// A scan's batch (`Storage::scan_batch`): keys in order with their records' positions,
/// and whether the range has no key past them.
pub(crate) struct ScanBatch {
    pub entries: Vec<(Vec<u8>, Pos)>,
    pub ended: bool,
}

/// A round's block writes, taken under the store's mutex and made outside it
/// ([`Storage::begin_write_dirty`]).
pub(crate) struct DirtyWrite {
    /// The blocks, in block order, pinned until [`Storage::end_write_dirty`].
    pub keys: Vec<(u32, u64)>,
    /// Their addresses and copies.
    pub blocks: Vec<(u64, AlignedBuf)>,
}

/// A point read's step (`Storage::select_or_read`).
#[derive(Debug)]
pub(crate) enum PointRead {
    /// The row of the key, or none.
    Row(Option<Row>),
    /// Blocks to read outside the mutex first: (block number, address), registered.
    Read(Vec<(u64, u64)>),
}

/// How [`Storage::commit_flushed`] ended.
#[derive(Debug)]
pub(crate) enum CommitEnd {
    /// Committed; its last expiry is packed in the spill area's page log, to be written
    /// (`Shared::sync_spill_log`) before the commit returns, when `expiry_packed`.
    Committed { expiry_packed: bool },
    /// The undo log has no room for the commit mark of a transaction of several changes:
    /// it cannot commit, and the caller rolls it back, so that what readers see agrees
    /// with what a reopen would find.
    MarkRefused(Error),
}

/// A row found by its key.
pub(crate) struct Found {
    pub pos: Pos,
    pub header: RowHeader,
    pub row: Vec<u8>,
}

pub(crate) struct Storage {
    volume: Volume,
    /// The writer's block queue (the store's mutex holder's).
    queue: BlockQueue,
    /// The queue pairs every block queue shares, with `TableOptions::queue_pairs`.
    pairs: Option<Arc<QueuePairs>>,
    tables: BTreeMap<u32, Table>,
    next_table_id: u32,
    cache: BlockCache,
    undo: UndoLog,
    /// The undo log's spill area on the volume, once it has been needed (`spill.rs`).
    spill_area: Option<Extent>,
    /// Its log, behind a latch of its own (the undo log latch, `SpillLatch`): taken under
    /// this mutex to append and expire, and without it by the writes the group flush's
    /// rounds make (`Shared::write_dirty`, `Shared::sync_spill_log`).
    spill: SpillLatch,
    /// Bytes the spill area gets when it is made; 0: none is made.
    spill_bytes: u64,
    /// Every record goes to the spill area (`TableOptions::undo_log`).
    undo_on_volume: bool,
    /// The persistent memory file the catalog names, if any.
    undo_file: Option<crate::undo_file::UndoFile>,
    /// Open transactions that have spilled: every later record of theirs spills too, so
    /// that a transaction's records in persistent memory all precede those in the spill
    /// area, and recovery knows the order to roll them back in.
    spilling: HashSet<u64>,
    /// Row records that an open transaction has an undo record on, by (table, position),
    /// with how many: the reclaiming pass leaves them alone.
    pending: HashMap<(u32, Pos), usize>,
    /// Row records made dead since the open (erased, moved by an update, or an insert
    /// rolled back) that the background reclaiming pass has not looked at yet. The pass
    /// looks at these alone: walking every record of every table each interval read every
    /// block of a table larger than the cache, for nothing (a 1M-row load of inserts read
    /// 25 GB so with a 64 MiB cache). Records dead at the open are found by the open.
    dead: VecDeque<(u32, Pos)>,
    /// Records placed into reclaimed space since the open.
    reused: u64,
    /// Block writes since the open (a dirty block written once however many changes it
    /// took).
    block_writes: u64,
    blocks_per_segment: u64,
    hash_bits: u32,
    /// Entries each table's index keeps in memory before it spills to index pages.
    index_memory_entries: Option<usize>,
    /// The queue index pages are read and written through.
    index_queue: VolumeQueue,
    stopped: Option<String>,
    /// The largest transaction id the undo log held at the open.
    pub max_txn: u64,
    /// The images a running checkpoint still needs (`frozen.rs`), while one runs.
    pub frozen: Option<crate::frozen::Frozen>,
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Storage").field("tables", &self.tables.len()).finish()
    }
}

impl Storage {
    /// Opens the store's data over a recovered volume and the undo log's persistent memory,
    /// rolling back every change not committed before the last close or crash.
    ///
    /// Recovery's stages:
    /// 1. Read the catalog from the version log (refusing another engine's volume); mark a
    ///    new volume as this engine's.
    /// 2. Walk the undo log from its head, and the spill area's log from its head, and
    ///    collect the active records, less those of transactions whose commit mark is in
    ///    either log; persistent memory's oldest first, then the spill area's.
    /// 3. Newest first, write each active record's before-image into its blocks as read
    ///    from the device, unchecked: such blocks may be torn by the crash, and after the
    ///    rollback hold exactly their committed rows.
    /// 4. Scan every table's row stream from block 0, rebuilding the indexes (hash and
    ///    ordered) and the end, and checking every block not rolled back (checksum,
    ///    identity, occupancy); compute the occupancy of the rolled-back ones.
    /// 5. Seal and write the rolled-back blocks, flush the device.
    /// 6. Expire every active record (the log then reclaims them).
    pub fn recover(
        volume: Volume,
        versions: &shale_space::Versions,
        setup: UndoSetup,
        opts: &TableOptions,
    ) -> Result<Storage> {
        let cat = catalog::decode(versions)?;
        let UndoSetup { pmem, binding, on_volume, retire, record, read_only } = setup;
        let policy = ReclaimPolicy {
            batch: opts.reclaim_batch,
            percent: opts.reclaim_percent,
            wrap_after: opts.undo_wrap_bytes,
        };
        let volume_id = volume.header().volume_id;
        let (undo, mut walked) = UndoLog::open_bound(pmem, volume_id, binding, policy)?;
        let spill = match cat.spill {
            Some(e) => {
                let area = Box::new(SpillArea::open(&volume, e)?);
                let (log, w) = if cat.spill_paged {
                    let (log, w) = VolumeUndoLog::open(area, volume_id)?;
                    (SpillLog::Paged(log), w)
                } else {
                    let (log, w) = UndoLog::open_ring(Ring::Spill, area, volume_id, policy)?;
                    (SpillLog::Ring(log), w)
                };
                merge_walks(&mut walked, w);
                Some(log)
            }
            None => None,
        };
        let (active, committed) = (&walked.active, &walked.committed);
        // Records of a transaction whose commit mark persisted are committed, whatever
        // their own state bytes say; commit marks themselves roll nothing back. A
        // transaction's records in persistent memory precede its spilled ones (it spills
        // to its end once it has spilled), and the records of different open transactions
        // cover different bytes, so rolling back this list newest first undoes each
        // transaction in the reverse order of its changes.
        let undone: Vec<Change> = active
            .iter()
            .filter(|(_, r)| r.before != Before::Commit && !committed.contains(&r.txn))
            .cloned()
            .collect();
        let queues = volume.queues();
        let pairs = match &opts.queue_pairs {
            Some(p) => Some(Arc::new(queues.pairs(IoClass::Slot, p)?)),
            None => None,
        };
        let queue = match &pairs {
            Some(p) => BlockQueue::Pairs(p.clone()),
            None => BlockQueue::Own(queues.open(IoClass::Slot, &QueueOptions::default())?),
        };
        let index_queue = queues.open(IoClass::Slot, &QueueOptions::default())?;
        let blocks_per_segment = volume.layout().slot_bytes / BLOCK_BYTES as u64;
        let tables = cat
            .tables
            .iter()
            .map(|m| {
                let t = Table {
                    meta: m.clone(),
                    end: Pos::default(),
                    index: Index::new(m.id, opts.hash_bits, opts.index_memory_entries),
                    order: OrderedIndex::new(m.schema.fixed_key_len()),
                    free: FreeSpace::default(),
                };
                (m.id, t)
            })
            .collect();
        let mut s = Storage {
            volume,
            queue,
            pairs,
            tables,
            next_table_id: cat.next_id,
            cache: BlockCache::new(opts.cache_blocks),
            undo,
            spill_area: cat.spill,
            spill: Arc::new(parking_lot::Mutex::new(spill)),
            spill_bytes: if on_volume { opts.volume_ring_bytes() } else { opts.undo_spill_bytes },
            undo_on_volume: on_volume,
            undo_file: cat.undo_file.clone(),
            spilling: HashSet::new(),
            pending: HashMap::new(),
            dead: VecDeque::new(),
            reused: 0,
            block_writes: 0,
            blocks_per_segment,
            hash_bits: opts.hash_bits,
            index_memory_entries: opts.index_memory_entries,
            index_queue,
            stopped: None,
            max_txn: walked.max_txn,
            frozen: None,
        };
        if !cat.marked {
            let edit = Edit { engine: catalog::encode_created(), ..Edit::default() };
            let marked = Catalog { marked: true, ..cat.clone() };
            s.volume.commit(&edit, &mut || catalog::encode_base(&marked))?;
        }
        // A new file's entry goes in before any record is appended to it: the file exists
        // and names this instance already (its open above wrote its headers).
        if let Some(Some(f)) = &record {
            s.set_undo_file(Some(f.clone()))?;
        }
        let mut patched = s.roll_back_raw(&undone)?;
        let ids: Vec<u32> = s.tables.keys().copied().collect();
        let mut occupancy = HashMap::new();
        for id in ids {
            s.scan_table(id, &patched, &mut occupancy)?;
        }
        for (&(table, number), bytes) in &mut patched {
            let Some(&(used, first_row)) = occupancy.get(&(table, number)) else { continue };
            block::seal(bytes, used, first_row);
            s.cache.put((table, number), bytes.clone());
            s.write_block(table, number)?;
        }
        if !active.is_empty() {
            s.flush()?;
            let handles: Vec<UndoHandle> = active.iter().map(|(h, _)| *h).collect();
            s.expire_written_back(&handles)?;
            s.undo.reclaim()?;
            if let Some(log) = lock_spill(&s.spill).as_mut() {
                log.reclaim()?;
            }
        }
        let ring = matches!(*lock_spill(&s.spill), Some(SpillLog::Ring(_)));
        if let (false, true, Some(e)) = (read_only, ring, s.spill_area) {
            s.rewrite_spill(e)?;
        }
        if retire {
            let region =
                Box::new(crate::pmem::SimPmem::new(crate::undo_log::RING_OFFSET + (64 << 10)));
            s.undo = UndoLog::open(region, volume_id, policy)?.0;
        }
        if let Some(None) = record {
            s.set_undo_file(None)?;
        }
        Ok(s)
    }

    /// Rewrites spill area `e`, a ring of the format written before the page log's with no
    /// active record left (recovery expired them), in the page log format: zeroed durably
    /// (what a crash leaves before the catalog's entry, the ring's open formats as an empty
    /// ring), then named so in the catalog (after it, the page log's open finds an empty
    /// log).
    fn rewrite_spill(&mut self, e: Extent) -> Result<()> {
        SpillArea::zero(&self.volume, e)?;
        let after = Catalog { spill_paged: true, ..self.catalog() };
        let edit = Edit { engine: catalog::encode_spill_paged(), ..Edit::default() };
        self.volume.commit(&edit, &mut || catalog::encode_base(&after))?;
        let area = Box::new(SpillArea::open(&self.volume, e)?);
        let (log, walked) = VolumeUndoLog::open(area, self.volume.header().volume_id)?;
        assert!(walked.active.is_empty(), "a zeroed spill area holds no record");
        *lock_spill(&self.spill) = Some(SpillLog::Paged(log));
        Ok(())
    }

    /// Names the undo log's file in the catalog (or no file), durably.
    fn set_undo_file(&mut self, f: Option<crate::undo_file::UndoFile>) -> Result<()> {
        let engine = match &f {
            Some(f) => catalog::encode_undo_file_bound(f),
            None => catalog::encode_undo_file_unbound(),
        };
        self.undo_file = f;
        let after = self.catalog();
        self.volume
            .commit(&Edit { engine, ..Edit::default() }, &mut || catalog::encode_base(&after))?;
        Ok(())
    }

    /// Recovery stage 3: the before-images of `active`, newest first, in raw blocks.
    fn roll_back_raw(&mut self, active: &[Change]) -> Result<BTreeMap<(u32, u64), Vec<u8>>> {
        let mut patched: BTreeMap<(u32, u64), Vec<u8>> = BTreeMap::new();
        for (h, rec) in active.iter().rev() {
            if !self.tables.contains_key(&rec.table) {
                return Err(Error::Corruption {
                    what: format!(
                        "active undo record {} names table {}, which does not exist",
                        rec.lsn, rec.table
                    ),
                    offset: h.offset,
                });
            }
            let bytes = rollback_bytes(&rec.before);
            let span = rec.before.span() as usize;
            for n in rec.pos.blocks(span) {
                if let std::collections::btree_map::Entry::Vacant(v) = patched.entry((rec.table, n))
                {
                    let address = self.address(rec.table, n).ok_or_else(|| Error::Corruption {
                        what: format!(
                            "undo record {} names block {n} past table {}'s segments",
                            rec.lsn, rec.table
                        ),
                        offset: h.offset,
                    })?;
                    let raw = self.queue.read_at(address, BLOCK_BYTES)?;
                    let mut b = raw.to_vec();
                    block::set_identity(&mut b, rec.table, n);
                    v.insert(b);
                }
            }
            copy_into_blocks(rec.pos, &bytes, &mut patched, rec.table);
        }
        Ok(patched)
    }

    /// Recovery stage 4 for one table.
    fn scan_table(
        &mut self,
        id: u32,
        patched: &BTreeMap<(u32, u64), Vec<u8>>,
        occupancy: &mut HashMap<(u32, u64), (u16, u16)>,
    ) -> Result<()> {
        let schema = self.tables[&id].meta.schema.clone();
        let mut index = Index::new(id, self.hash_bits, self.index_memory_entries);
        let mut order = OrderedIndex::new(schema.fixed_key_len());
        let mut free = FreeSpace::default();
        let mut keys = std::collections::HashSet::new();
        // Occupancy as the rows show it, and as the checked blocks claim it.
        let mut seen: HashMap<u64, (u16, u16)> = HashMap::new();
        let mut claimed: HashMap<u64, (u16, u16)> = HashMap::new();
        let mut pos = Pos::default();
        loop {
            pos = row::record_start(pos);
            let Some(first) = self.scan_block(id, pos.block, patched, &mut claimed)? else {
                break;
            };
            let at = HEADER_BYTES + pos.offset as usize;
            let address = self.address(id, pos.block).unwrap_or(0) + at as u64;
            let corrupt = |what: &str| Error::Corruption {
                what: format!("table {id}, block {}: {what}", pos.block),
                offset: address,
            };
            let header = RowHeader::decode(&first[at..at + row::HEADER_BYTES])
                .ok_or_else(|| corrupt("a row record header that does not parse"))?;
            if header.state == RowState::Free {
                if first[at..].iter().any(|&b| b != 0) {
                    return Err(corrupt("bytes past the end of the rows"));
                }
                break;
            }
            let len = header.record_len();
            let mut bytes = Vec::with_capacity(len);
            for n in pos.blocks(len) {
                let b = match n == pos.block {
                    true => first.clone(),
                    false => self
                        .scan_block(id, n, patched, &mut claimed)?
                        .ok_or_else(|| corrupt("a row record running into a blank block"))?,
                };
                let from = if n == pos.block { at } else { HEADER_BYTES };
                let take = (len - bytes.len()).min(BLOCK_BYTES - from);
                bytes.extend_from_slice(&b[from..from + take]);
                let used = (from - HEADER_BYTES + take) as u16;
                let e = seen.entry(n).or_insert((0, NO_ROW));
                e.0 = e.0.max(used);
                if n == pos.block {
                    e.1 = e.1.min(pos.offset as u16);
                }
            }
            if header.state == RowState::Live {
                let row = &bytes[row::HEADER_BYTES..row::HEADER_BYTES + header.row_len as usize];
                let key = schema.key_of(row).filter(|_| schema.decode_row(row).is_some());
                let key = key.ok_or_else(|| corrupt("a row that does not follow the schema"))?;
                if !keys.insert(key.to_vec()) {
                    return Err(corrupt("two live rows of one key"));
                }
                let io = &mut PageIo { volume: &self.volume, queue: &mut self.index_queue };
                index.insert(key, pos, io)?;
                order.insert(key, pos);
            } else {
                // No transaction is open at the open: every dead record is free.
                free.add(pos, header.slot_len);
            }
            pos = pos.advance(len);
        }
        for (n, fields) in seen {
            match claimed.get(&n) {
                None => {
                    occupancy.insert((id, n), fields);
                }
                Some(&c) if c == fields => {}
                Some(&c) => {
                    return Err(Error::Corruption {
                        what: format!(
                            "table {id}, block {n}: occupancy {c:?} where its rows say {fields:?}"
                        ),
                        offset: self.address(id, n).unwrap_or(0),
                    });
                }
            }
        }
        self.check_blank_past(id, pos)?;
        let t = self.tables.get_mut(&id).unwrap();
        t.index = index;
        t.order = order;
        t.free = free;
        t.end = pos;
        Ok(())
    }

    /// Every block of `table` past `end` must be blank (new segments are zeroed before they
    /// are named): one that is not means the scan stopped early at damage (a block zeroed
    /// whole, say), and rows after it would be lost silently.
    fn check_blank_past(&mut self, table: u32, end: Pos) -> Result<()> {
        let blocks = self.tables[&table].meta.segments.len() as u64 * self.blocks_per_segment;
        let first = if end.offset == 0 { end.block } else { end.block + 1 };
        for n in first..blocks {
            let address = self.address(table, n).unwrap();
            let raw = self.queue.read_at(address, BLOCK_BYTES)?;
            if raw.iter().any(|&b| b != 0) {
                return Err(Error::Corruption {
                    what: format!("table {table}: block {n} holds data past the end of the rows"),
                    offset: address,
                });
            }
        }
        Ok(())
    }

    /// Zeroes a new segment, durably, before a commit names it: on a block device a freed
    /// slot keeps its old bytes, and recovery reads every block past a table's end as
    /// blank.
    fn zero_segment(&mut self, e: shale_space::Extent) -> Result<()> {
        let range = self.volume.extent_range(e);
        let zeros = AlignedBuf::zeroed((range.end - range.start) as usize);
        self.queue.write_at(range.start, zeros, true).map(|_| ()).map_err(|err| {
            self.volume.release(e);
            err.into()
        })
    }

    /// A block for the scan: rolled back, or checked from the cache or device (its
    /// occupancy fields noted in `claimed`); `None` when it is blank or past the table's
    /// segments.
    fn scan_block(
        &mut self,
        table: u32,
        n: u64,
        patched: &BTreeMap<(u32, u64), Vec<u8>>,
        claimed: &mut HashMap<u64, (u16, u16)>,
    ) -> Result<Option<Vec<u8>>> {
        if let Some(b) = patched.get(&(table, n)) {
            return Ok(Some(b.clone()));
        }
        if self.address(table, n).is_none() || !self.load(table, n)? {
            return Ok(None);
        }
        let b = self.cache.get_shared((table, n)).unwrap().clone();
        let h = block::header(&b);
        claimed.insert(n, (h.used, h.first_row));
        Ok(Some(b))
    }

    /// Reads block `n` of `table` into the cache if it is not there, checked. Returns false
    /// for a blank block (not cached).
    fn load(&mut self, table: u32, n: u64) -> Result<bool> {
        if self.cache.get_shared((table, n)).is_some() {
            return Ok(true);
        }
        let address = self.address(table, n).ok_or_else(|| Error::Corruption {
            what: format!("block {n} past table {table}'s segments"),
            offset: 0,
        })?;
        let raw = self.queue.read_at(address, BLOCK_BYTES)?;
        match block::check(&raw, table, n, address)? {
            BlockState::Blank => Ok(false),
            BlockState::Valid(_) => {
                self.cache.put((table, n), raw.to_vec());
                Ok(true)
            }
        }
    }

    /// Block `n` of `table` for writing: cached, read, or new.
    fn block_for_write(&mut self, table: u32, n: u64) -> Result<&mut Vec<u8>> {
        if !self.load(table, n)? {
            self.cache.put((table, n), block::new_block(table, n));
        }
        Ok(self.cache.get((table, n)).unwrap())
    }

    /// Device address of block `n` of `table`, if its segment exists.
    fn address(&self, table: u32, n: u64) -> Option<u64> {
        let t = self.tables.get(&table)?;
        let seg = t.meta.segments.get((n / self.blocks_per_segment) as usize)?;
        let start = self.volume.extent_range(*seg).start;
        Some(start + (n % self.blocks_per_segment) * BLOCK_BYTES as u64)
    }

    /// Reads `len` bytes of `table`'s row stream at `pos`.
    fn read_stream(&mut self, table: u32, pos: Pos, len: usize) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(len);
        for n in pos.blocks(len) {
            if !self.load(table, n)? {
                return Err(Error::Corruption {
                    what: format!("table {table}: a row runs into blank block {n}"),
                    offset: self.address(table, n).unwrap_or(0),
                });
            }
            let b = self.cache.get_shared((table, n)).unwrap();
            let from =
                if n == pos.block { HEADER_BYTES + pos.offset as usize } else { HEADER_BYTES };
            let take = (len - out.len()).min(BLOCK_BYTES - from);
            out.extend_from_slice(&b[from..from + take]);
        }
        Ok(out)
    }

    /// Stage 5: writes `bytes` into `table`'s row stream at `pos` (a record's start),
    /// updating each block's occupancy, in the cache: the blocks are dirty until the next
    /// commit's flush (or an abort's) writes them (`write_dirty`), or until more than a
    /// [`DIRTY_BLOCKS_MAX_DIVISOR`]th of the cache is dirty, when they are written at once.
    fn write_stream(&mut self, table: u32, pos: Pos, bytes: &[u8]) -> Result<()> {
        let blocks: Vec<u64> = pos.blocks(bytes.len()).collect();
        // Every block is loaded before any is changed, so a failed read leaves the stream as
        // it was; each is pinned meanwhile, as loading the next one may evict a clean block
        // (the cache's clock passes every entry once it is full of used ones).
        let mut pinned = Vec::with_capacity(blocks.len());
        let loaded = blocks.iter().try_for_each(|&n| {
            self.block_for_write(table, n)?;
            assert!(self.cache.pin((table, n)), "a block just loaded is cached");
            pinned.push(n);
            Ok(())
        });
        if let Err(e) = loaded {
            for &n in &pinned {
                self.cache.unpin((table, n));
            }
            return Err(e);
        }
        let mut done = 0;
        for &n in &blocks {
            let b = self.cache.get((table, n)).unwrap();
            let from = if n == pos.block { pos.offset as usize } else { 0 };
            let take = (bytes.len() - done).min(PAYLOAD_BYTES - from);
            b[HEADER_BYTES + from..HEADER_BYTES + from + take]
                .copy_from_slice(&bytes[done..done + take]);
            done += take;
            let h = block::header(b);
            let used = h.used.max((from + take) as u16);
            let first_row = if n == pos.block { h.first_row.min(from as u16) } else { h.first_row };
            block::seal(b, used, first_row);
        }
        for n in blocks {
            self.cache.mark_dirty((table, n));
            self.cache.unpin((table, n));
        }
        Ok(())
    }

    /// Dirty blocks past which a change writes them all at once: half the cache, so that
    /// clean blocks are left to evict.
    fn dirty_blocks_max(&self) -> usize {
        (self.cache.capacity() / DIRTY_BLOCKS_MAX_DIVISOR).max(1)
    }

    /// Whether more than a [`DIRTY_BLOCKS_MAX_DIVISOR`]th of the cache is dirty: the
    /// transaction that made the change then writes every dirty block at once, outside
    /// this mutex, through a round of the group flush (`Shared::flush_round`).
    pub fn write_behind_due(&self) -> bool {
        self.cache.dirty_blocks() > self.dirty_blocks_max()
    }

    /// Takes a round's writes (`Shared::write_dirty`, holding the block writer's latch):
    /// every dirty block copied, marked clean and pinned, to be written outside this mutex
    /// once the caller has made the undo records appended so far durable (the undo log
    /// latch's sync, also outside: a block write never reaches the device before the
    /// records that can roll it back, and every record of a change in these copies was
    /// appended before them), and ended by [`Storage::end_write_dirty`]. Pinned, a block stays
    /// cached while its write is in flight, so no read meets the older copy on the device;
    /// changed meanwhile, it is dirty again and the next round writes it. `None` when no
    /// block is dirty.
    ///
    /// # Errors
    /// [`Error::Stopped`] after an earlier failure.
    pub fn begin_write_dirty(&mut self) -> Result<Option<DirtyWrite>> {
        self.check_running()?;
        let keys = self.cache.take_dirty();
        if keys.is_empty() {
            return Ok(None);
        }
        let mut blocks = Vec::with_capacity(keys.len());
        for &(table, n) in &keys {
            let address = self.address(table, n).expect("a dirty block has a segment");
            let b = self.cache.peek((table, n)).expect("a dirty block is cached");
            blocks.push((address, AlignedBuf::padded_copy(b, BLOCK_BYTES)));
            assert!(self.cache.pin((table, n)), "a dirty block is cached");
        }
        self.block_writes += blocks.len() as u64;
        Ok(Some(DirtyWrite { keys, blocks }))
    }

    /// Ends a round's writes begun by [`Storage::begin_write_dirty`]: the blocks unpinned,
    /// and after a failed write marked dirty again (the device may lack any of them, and a
    /// dirty block is never evicted, so no read of the stopped store meets an older copy)
    /// and the store stopped.
    ///
    /// # Errors
    /// The write's error.
    pub fn end_write_dirty(&mut self, keys: &[(u32, u64)], written: Result<()>) -> Result<()> {
        for &key in keys {
            if written.is_err() {
                self.cache.mark_dirty(key);
            }
            self.cache.unpin(key);
        }
        written.map_err(|e| self.stop(e))
    }

    /// Writes every dirty block, each once, in block order, several in flight, under this
    /// mutex; a failure stops the store. Recovery's alone (no other thread runs then): a
    /// running store writes its blocks through rounds of the group flush, outside the
    /// mutex ([`Storage::begin_write_dirty`]).
    ///
    /// # Errors
    /// [`Error::Stopped`] after an earlier failure, the device's error.
    fn write_dirty(&mut self) -> Result<()> {
        self.check_running()?;
        let keys = self.cache.take_dirty();
        if keys.is_empty() {
            return Ok(());
        }
        if let Err(e) = self.sync_spill() {
            for key in keys {
                self.cache.mark_dirty(key);
            }
            return Err(e);
        }
        let mut blocks = Vec::with_capacity(keys.len());
        for &(table, n) in &keys {
            let address = self.address(table, n).expect("a dirty block has a segment");
            let b = self.cache.peek((table, n)).expect("a dirty block is cached");
            blocks.push((address, AlignedBuf::padded_copy(b, BLOCK_BYTES)));
        }
        self.block_writes += blocks.len() as u64;
        batch_io::write_blocks(&mut self.queue, blocks).map_err(|e| {
            // The device may lack any of them: they stay dirty (never evicted), so no
            // read of the stopped store meets an older copy on the device.
            for key in keys {
                self.cache.mark_dirty(key);
            }
            self.stop(e)
        })
    }

    /// Sends the cached block to the device now (not durable); a failure stops the store.
    fn write_block(&mut self, table: u32, n: u64) -> Result<()> {
        self.sync_spill()?;
        self.block_writes += 1;
        let address = self.address(table, n).expect("a written block has a segment");
        let b = self.cache.get_shared((table, n)).expect("a written block is cached");
        let buf = AlignedBuf::padded_copy(b, BLOCK_BYTES);
        self.queue.write_at(address, buf, false).map(|_| ()).map_err(|e| self.stop(e.into()))
    }

    /// Makes the spill area's undo records durable before a block write: its page log
    /// packs records until then (`volume_undo.rs`), and a change may reach the device only
    /// once the record that undoes it is durable. A failure stops the store.
    fn sync_spill(&mut self) -> Result<()> {
        let synced = lock_spill(&self.spill).as_mut().map_or(Ok(()), SpillLog::sync);
        synced.map_err(|e| self.stop(e))
    }

    /// The undo log latch, for the writes the group flush's rounds make outside this
    /// mutex.
    pub fn spill_latch(&self) -> SpillLatch {
        self.spill.clone()
    }

    /// Whether the spill area's log is the page log (whose expiries are appended records).
    fn spill_paged(&self) -> bool {
        matches!(*lock_spill(&self.spill), Some(SpillLog::Paged(_)))
    }

    /// Writes the dirty blocks, then flushes the device (an abort's, a recovery's).
    fn flush(&mut self) -> Result<()> {
        self.write_dirty()?;
        self.queue.flush().map_err(|e| self.stop(e.into()))
    }

    /// Where the volume's areas lie (a checkpoint makes its copy with the same slots).
    pub fn layout(&self) -> shale_space::Layout {
        self.volume.layout()
    }

    /// A queue of its own for the store's shared flusher.
    pub fn flush_queue(&self) -> Result<VolumeQueue> {
        Ok(self.volume.queues().open(IoClass::Slot, &QueueOptions::default())?)
    }

    /// A block queue of its own for the rounds' block writes, made outside this mutex (the
    /// store's queue pairs, with `TableOptions::queue_pairs`).
    pub fn writer_queue(&self) -> Result<BlockQueue> {
        Ok(match &self.pairs {
            Some(p) => BlockQueue::Pairs(p.clone()),
            None => {
                BlockQueue::Own(self.volume.queues().open(IoClass::Slot, &QueueOptions::default())?)
            }
        })
    }

    /// Stops the store after a failed write (P5) and returns the error.
    pub fn stop(&mut self, e: Error) -> Error {
        if self.stopped.is_none() {
            self.stopped = Some(shale_io::Chain(&e).to_string());
        }
        e
    }

    /// [`Error::Stopped`] if a write failed earlier.
    pub fn check_running(&self) -> Result<()> {
        match &self.stopped {
            Some(why) => Err(Error::Stopped(why.clone())),
            None => Ok(()),
        }
    }

    /// The record at `pos`: its header and its row's bytes.
    fn read_record(
        &mut self,
        table: u32,
        pos: Pos,
        _schema: &Schema,
    ) -> Result<(RowHeader, Vec<u8>)> {
        let hb = self.read_stream(table, pos, row::HEADER_BYTES)?;
        let header = RowHeader::decode(&hb).ok_or_else(|| Error::Corruption {
            what: format!("table {table}: a row record header that does not parse at {pos:?}"),
            offset: self.address(table, pos.block).unwrap_or(0),
        })?;
        let row =
            self.read_stream(table, pos.advance(row::HEADER_BYTES), header.row_len as usize)?;
        Ok((header, row))
    }

    /// The table's metadata.
    ///
    /// # Errors
    /// [`Error::NoSuchTable`].
    pub fn table(&self, id: u32) -> Result<&TableMeta> {
        self.tables.get(&id).map(|t| &t.meta).ok_or_else(|| Error::NoSuchTable(format!("id {id}")))
    }

    /// The id of the table named `name`.
    pub fn table_id(&self, name: &str) -> Option<u32> {
        self.tables.values().find(|t| t.meta.name == name).map(|t| t.meta.id)
    }

    /// Stage 2: the live row of `key`, its full key confirmed.
    pub fn find(&mut self, table: u32, key: &[u8]) -> Result<Option<Found>> {
        let t = self.tables.get(&table).ok_or_else(|| Error::NoSuchTable(format!("id {table}")))?;
        let schema = t.meta.schema.clone();
        let io = &mut PageIo { volume: &self.volume, queue: &mut self.index_queue };
        for pos in t.index.candidates(key, io)? {
            let (header, row) = self.read_record(table, pos, &schema)?;
            if header.state == RowState::Live && schema.key_of(&row) == Some(key) {
                return Ok(Some(Found { pos, header, row }));
            }
        }
        Ok(None)
    }

    /// Where the ordered index puts the live record of `key`, if anywhere.
    ///
    /// # Errors
    /// [`Error::NoSuchTable`].
    pub fn ordered_position(&self, table: u32, key: &[u8]) -> Result<Option<Pos>> {
        let t = self.tables.get(&table).ok_or_else(|| Error::NoSuchTable(format!("id {table}")))?;
        Ok(t.order.get(key))
    }

    /// A point read's first step with the store's lock shared (`Shared::select_cached`),
    /// where the ordered index places the record of `key`: the decoded row when every block
    /// of the record is cached and it is the live one of `key`; else the blocks of it the
    /// cache lacks, registered for a read outside the lock as [`Storage::select_or_read`]
    /// registers them. `None` for the rest (a key the ordered index does not know, a
    /// record not the key's, damage to report): the caller reads with the lock exclusive.
    /// Reads `tables`' metadata and ordered indexes, `cache` and the volume's layout, and
    /// registers reads in the cache's own mutex, nothing else of `self`: other threads may
    /// be here at once (`StorageLock`'s safety).
    pub fn select_cached(&self, table: u32, key: &[u8]) -> Option<PointRead> {
        let t = self.tables.get(&table)?;
        let pos = t.order.get(key)?;
        let missing = self.missing_blocks(table, pos);
        if !missing.is_empty() {
            let wanted = self.begin_read_ahead(table, &missing);
            return (!wanted.is_empty()).then_some(PointRead::Read(wanted));
        }
        self.live_row_in(table, key, |n| self.cache.get_shared((table, n)).map(|b| &b[..]))
            .map(|r| PointRead::Row(Some(r)))
    }

    /// The blocks of the record at `pos` of `table` that the cache lacks: its first, or,
    /// that one cached, those its header says it runs on into.
    fn missing_blocks(&self, table: u32, pos: Pos) -> Vec<u64> {
        match self.cache.peek((table, pos.block)) {
            None => vec![pos.block],
            Some(_) => self
                .continuations(table, &[pos])
                .into_iter()
                .filter(|&n| self.cache.peek((table, n)).is_none())
                .collect(),
        }
    }

    /// The decoded live row of `key` where the ordered index places its record, read from
    /// the blocks `block` gives (by block number); `None` where a block is missing or the
    /// record is not the key's live one. For the reads with the lock shared: it reads the
    /// tables' metadata and ordered indexes, and whatever `block` reads.
    fn live_row_in<'b>(
        &self,
        table: u32,
        key: &[u8],
        block: impl Fn(u64) -> Option<&'b [u8]>,
    ) -> Option<Row> {
        let t = self.tables.get(&table)?;
        let pos = t.order.get(key)?;
        let stream = |pos: Pos, len: usize| {
            let mut out = Vec::with_capacity(len);
            for n in pos.blocks(len) {
                let b = block(n)?;
                let from =
                    if n == pos.block { HEADER_BYTES + pos.offset as usize } else { HEADER_BYTES };
                let take = (len - out.len()).min(BLOCK_BYTES - from);
                out.extend_from_slice(b.get(from..from + take)?);
            }
            Some(out)
        };
        let header = RowHeader::decode(&stream(pos, row::HEADER_BYTES)?)?;
        if header.state != RowState::Live {
            return None;
        }
        let row = stream(pos.advance(row::HEADER_BYTES), header.row_len as usize)?;
        let schema = &t.meta.schema;
        if schema.key_of(&row) != Some(key) {
            return None;
        }
        schema.decode_row(&row)
    }

    /// A point read's next step with the store's lock shared, after the blocks `wanted`
    /// that [`Storage::select_cached`] (or this call, a step before) registered were read.
    /// Each block read that is fresh (no put since its read was registered) and valid
    /// joins `held`, the blocks the read's earlier steps read, whose reads stay registered
    /// meanwhile and must all still be fresh. Then: the row of `key`, put together from
    /// cached blocks and `held`; or, where the record runs on into blocks neither holds
    /// (its length is in its header, now read), those registered for a next step (only with
    /// `more`). `None` for anything else (a failed read, a stale or damaged block, a record
    /// moved or no longer the key's, a next step needed without `more`): the caller reads
    /// with the lock exclusive, which reports what is wrong. Once the read ends here (a
    /// row or `None`), `held`'s blocks are deferred to the cache's next exclusive holder
    /// (`BlockCache::defer`). Touches what `select_cached` touches, and the cache's own
    /// mutexes (`StorageLock`'s safety).
    pub fn end_read_shared(
        &self,
        table: u32,
        key: &[u8],
        wanted: &[(u64, u64)],
        read: Result<Vec<AlignedBuf>>,
        held: &mut Vec<(u64, Vec<u8>)>,
        more: bool,
    ) -> Option<PointRead> {
        let exists = self.tables.contains_key(&table);
        let read = read.unwrap_or_default();
        let mut failed = false;
        for (i, &(n, address)) in wanted.iter().enumerate() {
            let k = (table, n);
            let valid =
                read.get(i).filter(|_| exists && self.cache.read_is_fresh(k)).filter(|raw| {
                    matches!(block::check(raw, table, n, address), Ok(BlockState::Valid(_)))
                });
            match valid {
                Some(raw) => held.push((n, raw.to_vec())),
                None => {
                    self.cache.forget_read(k);
                    failed = true;
                }
            }
        }
        // A block an earlier step read may have been put since (its read went stale).
        failed |= held.iter().any(|&(n, _)| !self.cache.read_is_fresh((table, n)));
        let step = if failed { None } else { self.shared_step(table, key, held, more) };
        if !matches!(step, Some(PointRead::Read(_))) {
            for (n, bytes) in held.drain(..) {
                self.cache.defer((table, n), bytes);
            }
        }
        step
    }

    /// [`Storage::end_read_shared`]'s step once `held` is checked: the row from the cache
    /// and `held`, or the record's blocks that both lack, registered (with `more`).
    fn shared_step(
        &self,
        table: u32,
        key: &[u8],
        held: &[(u64, Vec<u8>)],
        more: bool,
    ) -> Option<PointRead> {
        let t = self.tables.get(&table)?;
        let pos = t.order.get(key)?;
        let block = |n: u64| match self.cache.get_shared((table, n)) {
            Some(b) => Some(&b[..]),
            None => held.iter().find(|h| h.0 == n).map(|h| &h.1[..]),
        };
        let missing = match block(pos.block) {
            None => vec![pos.block],
            Some(first) => {
                let at = HEADER_BYTES + pos.offset as usize;
                let header = RowHeader::decode(first.get(at..at + row::HEADER_BYTES)?)?;
                pos.blocks(header.record_len()).skip(1).filter(|&n| block(n).is_none()).collect()
            }
        };
        if missing.is_empty() {
            return self.live_row_in(table, key, block).map(|r| PointRead::Row(Some(r)));
        }
        if !more {
            return None;
        }
        let wanted = self.begin_read_ahead(table, &missing);
        if wanted.len() == missing.len() {
            return Some(PointRead::Read(wanted));
        }
        // A block past the table's segments (damage the exclusive read reports).
        for &(n, _) in &wanted {
            self.cache.forget_read((table, n));
        }
        None
    }

    /// Blocks point reads deferred, waiting to be cached (`BlockCache::defer`).
    pub fn deferred_blocks(&self) -> usize {
        self.cache.deferred_blocks()
    }

    /// Caches the blocks point reads deferred (`BlockCache::defer`), those a put made
    /// stale meanwhile or whose table is gone excepted.
    pub fn cache_deferred(&mut self) {
        for (k, block) in self.cache.take_deferred() {
            let keep = self.tables.contains_key(&k.0);
            self.cache.end_read(k, keep.then_some(block));
        }
    }

    /// A point read's step under the mutex: the decoded row of `key` (or `None`) when every
    /// block its record lies in is cached, or the ordered index does not know the key;
    /// otherwise the blocks of the record the cache lacks, registered for a read outside
    /// the mutex (`begin_read_ahead`), which [`Storage::end_read_and_select`] ends. A point
    /// read that misses the cache so takes the mutex twice (here, and to end the read and
    /// read the row), not seven times (a hold per step of the read-ahead).
    pub fn select_or_read(&mut self, table: u32, key: &[u8]) -> Result<PointRead> {
        self.cache_deferred();
        let Some(pos) = self.ordered_position(table, key)? else {
            return self.select(table, key).map(PointRead::Row);
        };
        let missing = self.missing_blocks(table, pos);
        if missing.is_empty() {
            return self.select(table, key).map(PointRead::Row);
        }
        let wanted = self.begin_read_ahead(table, &missing);
        if wanted.is_empty() {
            // Past the table's segments (damage the read reports): read here, as a read
            // under the mutex always did.
            return self.select(table, key).map(PointRead::Row);
        }
        Ok(PointRead::Read(wanted))
    }

    /// Ends the reads `wanted` of [`Storage::select_or_read`] (as `end_read_ahead`), then
    /// takes the next step of the point read of `key` in the same hold: the row, or the
    /// blocks its record runs on into, now known from its header. With `last`, the row is
    /// read here whatever is missing (loaded under the mutex), so a read raced by evictions
    /// still ends.
    ///
    /// # Errors
    /// The reads' error, [`Error::Corruption`], [`Error::NoSuchTable`].
    pub fn end_read_and_select(
        &mut self,
        table: u32,
        key: &[u8],
        wanted: &[(u64, u64)],
        read: Result<Vec<AlignedBuf>>,
        last: bool,
    ) -> Result<PointRead> {
        self.end_read_ahead(table, wanted, read)?;
        if last {
            return self.select(table, key).map(PointRead::Row);
        }
        self.select_or_read(table, key)
    }

    /// The decoded row of `key`.
    pub fn select(&mut self, table: u32, key: &[u8]) -> Result<Option<Row>> {
        let Some(f) = self.find(table, key)? else { return Ok(None) };
        let schema = &self.tables[&table].meta.schema;
        schema.decode_row(&f.row).map(Some).ok_or_else(|| Error::Corruption {
            what: format!("table {table}: a row that does not follow the schema at {:?}", f.pos),
            offset: 0,
        })
    }

    /// A scan's next batch: up to `limit` keys of `table` in `range` with a live record
    /// (committed or not), in key order, with their positions (nothing is read); and
    /// whether the range has no key past them. A batch whose rows begin in more than a
    /// quarter of the cache's blocks is cut short there (and the range goes on), so that
    /// what is read ahead for it, continuations included, stays cached until its rows are
    /// read. See `scan.rs` for the read path of a batch.
    ///
    /// # Errors
    /// [`Error::NoSuchTable`].
    pub fn scan_batch(
        &mut self,
        table: u32,
        range: &(Bound<Vec<u8>>, Bound<Vec<u8>>),
        limit: usize,
    ) -> Result<ScanBatch> {
        let t = self.tables.get(&table).ok_or_else(|| Error::NoSuchTable(format!("id {table}")))?;
        let mut entries = t.order.range(range, limit);
        let mut ended = entries.len() < limit;
        let blocks_max = (self.cache.capacity() / 4).max(1);
        let mut blocks = HashSet::new();
        if let Some(cut) = entries.iter().position(|(_, p)| {
            blocks.insert(p.block);
            blocks.len() > blocks_max
        }) {
            entries.truncate(cut);
            ended = false;
        }
        Ok(ScanBatch { entries, ended })
    }

    /// The blocks the records at `positions` run on into past their first, as far as the
    /// cache holds their first blocks (a record's header never straddles blocks), sorted.
    pub fn continuations(&self, table: u32, positions: &[Pos]) -> Vec<u64> {
        let mut rest = Vec::new();
        for pos in positions {
            let Some(b) = self.cache.peek((table, pos.block)) else { continue };
            let at = HEADER_BYTES + pos.offset as usize;
            if let Some(h) = RowHeader::decode(&b[at..at + row::HEADER_BYTES]) {
                rest.extend(pos.blocks(h.record_len()).skip(1));
            }
        }
        rest.sort_unstable();
        rest.dedup();
        rest
    }

    /// Registers reads of the blocks `numbers` of `table` that the cache lacks, to be made
    /// outside the store's mutex; returns them with their device addresses.
    pub fn begin_read_ahead(&self, table: u32, numbers: &[u64]) -> Vec<(u64, u64)> {
        let mut wanted = Vec::new();
        for &n in numbers {
            if let Some(address) = self.address(table, n) {
                if self.cache.begin_read((table, n)) {
                    wanted.push((n, address));
                }
            }
        }
        wanted
    }

    /// Ends the reads `wanted` registered by `begin_read_ahead`: each block read is checked
    /// and cached unless a change or another read put it meanwhile (its bytes may be old),
    /// or its table was dropped meanwhile.
    ///
    /// # Errors
    /// The reads' error, [`Error::Corruption`] of a block read fresh.
    pub fn end_read_ahead(
        &mut self,
        table: u32,
        wanted: &[(u64, u64)],
        read: Result<Vec<AlignedBuf>>,
    ) -> Result<()> {
        let (blocks, mut result) = match read {
            Ok(b) => (b, Ok(())),
            Err(e) => (Vec::new(), Err(e)),
        };
        let mut blocks = blocks.into_iter();
        let exists = self.tables.contains_key(&table);
        for &(n, address) in wanted {
            let raw = blocks.next();
            let key = (table, n);
            let fresh = exists && result.is_ok() && self.cache.read_is_fresh(key);
            let block =
                match raw.filter(|_| fresh).map(|raw| (block::check(&raw, table, n, address), raw))
                {
                    Some((Ok(BlockState::Valid(_)), raw)) => Some(raw.to_vec()),
                    Some((Err(e), _)) => {
                        result = Err(e);
                        None
                    }
                    _ => None,
                };
            self.cache.end_read(key, block);
        }
        result
    }

    /// Where reads made outside the store's mutex get their queues: the volume's pool, or
    /// the store's queue pairs.
    pub fn read_queues(&self) -> ReadQueues {
        match &self.pairs {
            Some(p) => ReadQueues::Pairs(p.clone()),
            None => ReadQueues::Pool(self.volume.queues().clone()),
        }
    }

    /// The decoded row of `key` for a scan, found by the ordered index.
    ///
    /// # Errors
    /// [`Error::NoSuchTable`], [`Error::Corruption`], a device error.
    pub fn select_scanned(&mut self, table: u32, key: &[u8]) -> Result<Option<Row>> {
        let t = self.tables.get(&table).ok_or_else(|| Error::NoSuchTable(format!("id {table}")))?;
        let Some(pos) = t.order.get(key) else { return Ok(None) };
        let schema = t.meta.schema.clone();
        let (header, row) = self.read_record(table, pos, &schema)?;
        let corrupt = |what: &str| Error::Corruption {
            what: format!("table {table}: {what} at {pos:?}, where the ordered index points"),
            offset: 0,
        };
        if header.state != RowState::Live || schema.key_of(&row) != Some(key) {
            return Err(corrupt("no live row of the key"));
        }
        schema
            .decode_row(&row)
            .map(Some)
            .ok_or_else(|| corrupt("a row that does not follow the schema"))
    }

    /// Inserts the encoded row `row` whose key is `key` (stages 2 to 6).
    ///
    /// # Errors
    /// [`Error::DuplicateKey`]; [`Error::LogFull`]; the space layer's error for a segment
    /// that cannot be had; a device error (which stops the store).
    pub fn insert(&mut self, txn: u64, table: u32, key: &[u8], row: &[u8]) -> Result<Change> {
        self.check_running()?;
        if self.find(table, key)?.is_some() {
            return Err(Error::DuplicateKey);
        }
        self.keep_for_checkpoint(table, key)?;
        self.append(txn, table, key, row)
    }

    /// Before the row of `key` in `table` changes: its image as it is now, for a running
    /// checkpoint that still needs it (`frozen.rs`).
    fn keep_for_checkpoint(&mut self, table: u32, key: &[u8]) -> Result<()> {
        if self.frozen.as_ref().is_some_and(|f| f.needs(table, key)) {
            let image = self.select(table, key)?;
            self.frozen.as_mut().expect("checked above").keep(table, key, image);
        }
        Ok(())
    }

    /// A checkpoint's batch (`checkpoint.rs`): the rows at the checkpoint's instant of the
    /// keys `entries` (a batch of [`Storage::scan_batch`], read ahead since) as they are
    /// now, each replaced by its image where it changed since, with the images of the rows
    /// erased since in the span up to `through` (`None`: the rest of the table).
    ///
    /// # Errors
    /// [`Error::NoSuchTable`], [`Error::Corruption`], a device error.
    pub fn checkpoint_rows(
        &mut self,
        table: u32,
        entries: &[(Vec<u8>, Pos)],
        through: Option<Vec<u8>>,
    ) -> Result<Vec<Row>> {
        let mut rows = Vec::with_capacity(entries.len());
        for (key, _) in entries {
            if let Some(row) = self.select_scanned(table, key)? {
                rows.push((key.clone(), row));
            }
        }
        let frozen = self.frozen.as_mut().expect("a checkpoint runs");
        Ok(frozen.settle(table, rows, through))
    }

    fn append(&mut self, txn: u64, table: u32, key: &[u8], row: &[u8]) -> Result<Change> {
        if let Some(change) = self.reuse(txn, table, key, row)? {
            return Ok(change);
        }
        let header = RowHeader {
            state: RowState::Live,
            slot_len: row.len() as u32,
            row_len: row.len() as u32,
        };
        let len = header.record_len();
        let pos = row::record_start(self.tables[&table].end);
        self.ensure_segments(table, pos.advance(len - 1).block)?;
        let change = self.log_undo(txn, table, pos, Before::Free { span: len as u32 })?;
        let mut bytes = header.encode().to_vec();
        bytes.extend_from_slice(row);
        self.write_stream(table, pos, &bytes)?;
        self.tables.get_mut(&table).unwrap().end = pos.advance(len);
        self.index_update(table, key, pos, true)?;
        Ok(change)
    }

    /// Stages 3 to 6 of an insert into a free slot, if the table has one that fits: the
    /// whole dead record is the before-image (the new row covers its bytes), so rolling
    /// back, or recovering, gives the dead record back as it was.
    fn reuse(&mut self, txn: u64, table: u32, key: &[u8], row: &[u8]) -> Result<Option<Change>> {
        let t = self.tables.get_mut(&table).unwrap();
        let Some((pos, slot_len)) = t.free.take(row.len() as u32) else { return Ok(None) };
        let schema = t.meta.schema.clone();
        let (old, _) = self.read_record(table, pos, &schema)?;
        assert!(
            matches!(old.state, RowState::Erased | RowState::Void) && old.slot_len == slot_len,
            "a free slot holds the dead record it was found with: {old:?} at {pos:?}"
        );
        let len = old.record_len();
        let before = self.read_stream(table, pos, len)?;
        let change = match self.log_undo(txn, table, pos, Before::Image(before)) {
            Ok(c) => c,
            Err(e) => {
                self.tables.get_mut(&table).unwrap().free.add(pos, slot_len);
                return Err(e);
            }
        };
        let header = RowHeader { state: RowState::Live, slot_len, row_len: row.len() as u32 };
        let mut bytes = header.encode().to_vec();
        bytes.extend_from_slice(row);
        bytes.resize(len, 0);
        self.write_stream(table, pos, &bytes)?;
        self.index_update(table, key, pos, true)?;
        self.reused += 1;
        Ok(Some(change))
    }

    /// One step of the reclaiming pass: walks up to `records` row records from `cursor` (a
    /// table id and a position in its row stream; `(0, Pos::default())` starts a pass),
    /// noting each dead one that no open transaction has an undo record on as free space,
    /// and moves the cursor on. Returns whether the pass has gone past every table. Each
    /// pass has a cursor of its own, so two at once (the thread's and a caller's) each
    /// walk everything. It only reads: a crash during it changes nothing.
    ///
    /// # Errors
    /// A device error or [`Error::Corruption`] of a block read.
    pub fn reclaim_step(&mut self, cursor: &mut (u32, Pos), records: usize) -> Result<bool> {
        let mut budget = records;
        loop {
            let (id, at) = *cursor;
            let Some((&next, t)) = self.tables.range(id..).next() else {
                return Ok(true);
            };
            let pos = row::record_start(if next == id { at } else { Pos::default() });
            if pos >= t.end {
                *cursor = (next + 1, Pos::default());
                continue;
            }
            if budget == 0 {
                *cursor = (next, pos);
                return Ok(false);
            }
            budget -= 1;
            let hb = self.read_stream(next, pos, row::HEADER_BYTES)?;
            let header = RowHeader::decode(&hb).ok_or_else(|| Error::Corruption {
                what: format!("table {next}: a row record header that does not parse at {pos:?}"),
                offset: self.address(next, pos.block).unwrap_or(0),
            })?;
            let dead = matches!(header.state, RowState::Erased | RowState::Void);
            if dead && !self.pending.contains_key(&(next, pos)) {
                self.tables.get_mut(&next).unwrap().free.add(pos, header.slot_len);
            }
            *cursor = (next, pos.advance(header.record_len()));
        }
    }

    /// Dead records recorded since the open and not yet looked at ([`Storage::reclaim_dead`]).
    pub fn dead_recorded(&self) -> usize {
        self.dead.len()
    }

    /// Looks at up to `records` of the dead records recorded since the open, oldest first:
    /// one whose transaction has ended and that is still dead (not reused meanwhile) gives
    /// its slot to new rows; one a transaction still holds goes to the back, for a later
    /// pass. Returns how many it looked at.
    ///
    /// # Errors
    /// A device error or a header that does not parse; the record stays recorded.
    pub fn reclaim_dead(&mut self, records: usize) -> Result<usize> {
        let mut looked = 0;
        while looked < records {
            let Some((table, pos)) = self.dead.pop_front() else { break };
            looked += 1;
            if !self.tables.contains_key(&table) {
                continue; // dropped since
            }
            if self.pending.contains_key(&(table, pos)) {
                self.dead.push_back((table, pos));
                continue;
            }
            let header = match self.read_stream(table, pos, row::HEADER_BYTES) {
                Ok(hb) => RowHeader::decode(&hb).ok_or_else(|| Error::Corruption {
                    what: format!(
                        "table {table}: a row record header that does not parse at {pos:?}"
                    ),
                    offset: self.address(table, pos.block).unwrap_or(0),
                }),
                Err(e) => Err(e),
            };
            let header = match header {
                Ok(h) => h,
                Err(e) => {
                    self.dead.push_front((table, pos));
                    return Err(e);
                }
            };
            if matches!(header.state, RowState::Erased | RowState::Void) {
                self.tables.get_mut(&table).unwrap().free.add(pos, header.slot_len);
            }
        }
        Ok(looked)
    }

    /// Replaces the row of `key` by the encoded `row`: in place when it fits the record's
    /// slot, else the record is erased and the row appended (a move).
    pub fn update(&mut self, txn: u64, table: u32, key: &[u8], row: &[u8]) -> Result<Vec<Change>> {
        self.check_running()?;
        self.keep_for_checkpoint(table, key)?;
        let f = self.find(table, key)?.ok_or(Error::KeyNotFound)?;
        if row.len() <= f.header.slot_len as usize {
            let before = self.read_stream(table, f.pos, f.header.record_len())?;
            let change = self.log_undo(txn, table, f.pos, Before::Image(before))?;
            let header = RowHeader { row_len: row.len() as u32, ..f.header };
            let mut bytes = header.encode().to_vec();
            bytes.extend_from_slice(row);
            bytes.resize(f.header.record_len(), 0);
            self.write_stream(table, f.pos, &bytes)?;
            return Ok(vec![change]);
        }
        let erased = self.erase_found(txn, table, key, &f)?;
        let appended = self.append(txn, table, key, row)?;
        Ok(vec![erased, appended])
    }

    /// Erases the row of `key`.
    pub fn erase(&mut self, txn: u64, table: u32, key: &[u8]) -> Result<Change> {
        self.check_running()?;
        self.keep_for_checkpoint(table, key)?;
        let f = self.find(table, key)?.ok_or(Error::KeyNotFound)?;
        self.erase_found(txn, table, key, &f)
    }

    fn erase_found(&mut self, txn: u64, table: u32, key: &[u8], f: &Found) -> Result<Change> {
        let change = self.log_undo(txn, table, f.pos, Before::Image(f.header.encode().to_vec()))?;
        let header = RowHeader { state: RowState::Erased, ..f.header };
        self.write_stream(table, f.pos, &header.encode())?;
        self.index_update(table, key, f.pos, false)?;
        self.dead.push_back((table, f.pos));
        Ok(change)
    }

    /// Stage 4: the record goes to persistent memory, or, when that is full (or the
    /// transaction has spilled before, or the log is on the volume), to the spill area on
    /// the volume, durable there before any block write (`sync_spill`).
    fn log_undo(&mut self, txn: u64, table: u32, pos: Pos, before: Before) -> Result<Change> {
        let mut rec = UndoRecord { lsn: 0, txn, table, pos, before };
        let appended = match self.undo_on_volume || self.spilling.contains(&txn) {
            true => self.append_spill(&mut rec),
            false => match self.undo.append(&mut rec) {
                Err(Error::LogFull { .. }) if self.spill_bytes > 0 => {
                    self.spilling.insert(txn);
                    self.append_spill(&mut rec)
                }
                r => r,
            },
        };
        let handle = appended.map_err(|e| match e {
            Error::LogFull { .. } | Error::Space(shale_space::Error::NoSpace(_)) => e,
            e => self.stop(e),
        })?;
        if rec.before != Before::Commit {
            *self.pending.entry((table, pos)).or_insert(0) += 1;
        }
        Ok((handle, rec))
    }

    /// Commit stage 3 of a transaction whose records' expiry is appended already
    /// (`Shared::commit_flushed`): it no longer spills, and its records' rows are no
    /// longer pending.
    pub fn settle_commit(&mut self, txn: u64, changes: &[Change]) {
        self.spilling.remove(&txn);
        self.settle(changes);
    }

    /// The transaction of `changes` has ended: its records no longer hold their rows.
    fn settle(&mut self, changes: &[Change]) {
        for (_, rec) in changes {
            if rec.before == Before::Commit {
                continue;
            }
            let key = (rec.table, rec.pos);
            let n = self.pending.get_mut(&key).expect("a change's record is pending");
            *n -= 1;
            if *n == 0 {
                self.pending.remove(&key);
            }
        }
    }

    fn append_spill(&mut self, rec: &mut UndoRecord) -> Result<UndoHandle> {
        if self.spill_area.is_none() {
            let (e, log) = self.create_spill()?;
            *lock_spill(&self.spill) = Some(log);
            self.spill_area = Some(e);
        }
        lock_spill(&self.spill).as_mut().expect("made above").append(rec)
    }

    /// Makes the spill area: slots allocated, zeroed durably, named in the version log,
    /// and only then formatted as a log (a crash before the name forgets the slots; one
    /// after it finds zeros, which the open formats).
    fn create_spill(&mut self) -> Result<(Extent, SpillLog)> {
        let slot = self.volume.layout().slot_bytes;
        let least = crate::volume_undo::MIN_AREA_BYTES;
        let slots = self.spill_bytes.max(least).div_ceil(slot) as u32;
        let e = self.volume.allocate(slots)?;
        if let Err(err) = SpillArea::zero(&self.volume, e) {
            self.volume.release(e);
            return Err(err);
        }
        let after = Catalog { spill: Some(e), spill_paged: true, ..self.catalog() };
        let edit =
            Edit { added: vec![e], engine: catalog::encode_spill_added(), ..Edit::default() };
        if let Err(err) = self.volume.commit(&edit, &mut || catalog::encode_base(&after)) {
            self.volume.release(e);
            return Err(err.into());
        }
        let area = Box::new(SpillArea::open(&self.volume, e)?);
        let id = self.volume.header().volume_id;
        let (log, walked) = VolumeUndoLog::open(area, id)?;
        assert!(walked.active.is_empty(), "a new spill area holds no record");
        Ok((e, SpillLog::Paged(log)))
    }

    /// Expires the records of changes whose before-images were written back and made
    /// durable (an abort, a recovery): newest first, one at a time, each persisted before
    /// the next. A crash part way then leaves the *oldest* records of each transaction
    /// active, and writing those back again gives the same bytes; expired in one batch, a
    /// crash could keep a newer record of a row without an older one (an erase's header
    /// after an update), and writing that back alone would put the newer header over the
    /// older row (the crash enumeration over log spill found it).
    ///
    /// The spill area's page log expires the records it holds with one append, newest first
    /// in it (`volume_undo.rs`: a crash keeps the expiries of a prefix of them, so the same
    /// rule holds at the cost of one write); a transaction's records there are newer than
    /// those in persistent memory, so they go first.
    fn expire_written_back(&mut self, handles: &[UndoHandle]) -> Result<()> {
        let paged = self.spill_paged();
        let (spilled, one_by_one): (Vec<UndoHandle>, Vec<UndoHandle>) =
            handles.iter().rev().copied().partition(|h| h.ring == Ring::Spill && paged);
        self.expire(&spilled)?;
        for h in &one_by_one {
            self.expire(std::slice::from_ref(h))?;
        }
        Ok(())
    }

    /// Expires records of either log: persistent memory's, then the spill area's.
    fn expire(&mut self, handles: &[UndoHandle]) -> Result<()> {
        let (spilled, pmem): (Vec<UndoHandle>, Vec<UndoHandle>) =
            handles.iter().partition(|h| h.ring == Ring::Spill);
        if !pmem.is_empty() {
            // A commit mark appended to the spill area (pending there) must be durable
            // before the records it commits are expired anywhere.
            self.sync_spill()?;
            self.undo.expire(&pmem).map_err(|e| self.stop(e))?;
        }
        if !spilled.is_empty() {
            let expired = lock_spill(&self.spill)
                .as_mut()
                .expect("a spilled record has a spill area")
                .expire(&spilled);
            expired.map_err(|e| self.stop(e))?;
        }
        Ok(())
    }

    /// As [`Storage::expire`], but the spill area's page log packs its expiry record for its
    /// next write instead of writing it now (`VolumeUndoLog::expire_packed`). Returns
    /// whether it did: the expiry is then durable only once the next write of that log
    /// (`Shared::sync_spill_log`, or any other) has run.
    fn expire_packed(&mut self, handles: &[UndoHandle]) -> Result<bool> {
        let (spilled, pmem): (Vec<UndoHandle>, Vec<UndoHandle>) =
            handles.iter().partition(|h| h.ring == Ring::Spill);
        if !pmem.is_empty() {
            self.sync_spill()?;
            self.undo.expire(&pmem).map_err(|e| self.stop(e))?;
        }
        if spilled.is_empty() {
            return Ok(false);
        }
        let expired = lock_spill(&self.spill)
            .as_mut()
            .expect("a spilled record has a spill area")
            .expire_packed(&spilled);
        expired.map_err(|e| self.stop(e))
    }

    /// Commit stages 2 and 3, once a device flush that began after every change's block
    /// write completed has completed ([`crate::group_flush::GroupFlush`], outside this
    /// mutex). One change is committed by expiring its record (one store of one byte in
    /// persistent memory); several by a commit mark persisted after the flush, then their
    /// records and the mark expired, the mark last. Returns whether the last expiry is
    /// packed in the spill area's page log, not yet written: the caller makes it durable
    /// with the next round of [`crate::group_flush::GroupFlush::sync_log`] before the
    /// commit returns (one write for the commits of a round, not one each).
    pub fn commit_flushed(&mut self, txn: u64, changes: &[Change]) -> Result<CommitEnd> {
        let done = |expiry_packed| Ok(CommitEnd::Committed { expiry_packed });
        if changes.is_empty() {
            return done(false);
        }
        self.check_running()?;
        let handles: Vec<UndoHandle> = changes.iter().map(|c| c.0).collect();
        if changes.len() == 1 {
            self.spilling.remove(&txn);
            let packed = self.expire_packed(&handles)?;
            self.settle(changes);
            return done(packed);
        }
        let mark = match self.log_undo(txn, 0, Pos::default(), Before::Commit) {
            Ok(mark) => mark,
            Err(e @ Error::LogFull { .. }) => return Ok(CommitEnd::MarkRefused(e)),
            Err(e) => return Err(e),
        };
        self.spilling.remove(&txn);
        if mark.0.ring == Ring::Spill && self.spill_paged() {
            // One append expires the spilled records and the mark, the mark last in it: a
            // crash keeps a prefix of its expiries (`volume_undo.rs`), so never the mark's
            // without the records'. The records in persistent memory go before it.
            let mut all = handles;
            all.push(mark.0);
            let packed = self.expire_packed(&all)?;
            self.settle(changes);
            return done(packed);
        }
        self.expire(&handles)?;
        let packed = self.expire_packed(&[mark.0])?;
        self.settle(changes);
        done(packed)
    }

    /// Abort stage 1: each change's before-image written back in the cache, newest first,
    /// fixing the index. Stage 2 (the dirty blocks written, the device flushed) is a round
    /// of the group flush, outside this mutex (`Transaction::abort`); then stage 3,
    /// [`Storage::expire_rolled_back`].
    pub fn roll_back_changes(&mut self, changes: &[Change]) -> Result<()> {
        self.check_running()?;
        for (_, rec) in changes.iter().rev() {
            self.roll_back(rec)?;
        }
        Ok(())
    }

    /// Abort stage 3, once the rolled-back blocks are durable: the records expired, newest
    /// first.
    pub fn expire_rolled_back(&mut self, changes: &[Change]) -> Result<()> {
        let Some(first) = changes.first() else { return Ok(()) };
        self.check_running()?;
        self.spilling.remove(&first.1.txn);
        let handles: Vec<UndoHandle> = changes.iter().map(|c| c.0).collect();
        self.expire_written_back(&handles)?;
        self.settle(changes);
        Ok(())
    }

    /// Stage 6: points `key` at `pos` (`insert`), or no longer, in the hash index and the
    /// ordered one. A failed index page write stops the store: the index would no longer
    /// find every row.
    fn index_update(&mut self, table: u32, key: &[u8], pos: Pos, insert: bool) -> Result<()> {
        let t = self.tables.get_mut(&table).expect("a table changed exists");
        let io = &mut PageIo { volume: &self.volume, queue: &mut self.index_queue };
        let r = match insert {
            true => {
                t.order.insert(key, pos);
                t.index.insert(key, pos, io)
            }
            false => {
                t.order.remove(key, pos);
                t.index.remove(key, pos, io)
            }
        };
        debug_assert!(
            r.is_err() || t.order.len() == t.index.entries(),
            "the ordered index and the hash index hold the same keys"
        );
        r.map_err(|e| self.stop(e))
    }

    /// Writes one record's before-image back and fixes the index.
    fn roll_back(&mut self, rec: &UndoRecord) -> Result<()> {
        let schema = self.tables[&rec.table].meta.schema.clone();
        let (_, row) = self.read_record(rec.table, rec.pos, &schema)?;
        let key = schema.key_of(&row).map(<[u8]>::to_vec);
        self.write_stream(rec.table, rec.pos, &rollback_bytes(&rec.before))?;
        if matches!(rec.before, Before::Free { .. }) {
            self.dead.push_back((rec.table, rec.pos)); // an insert rolled back: now void
        }
        let (header, _) = self.read_record(rec.table, rec.pos, &schema)?;
        if let Some(key) = key {
            self.index_update(rec.table, &key, rec.pos, header.state == RowState::Live)?;
        }
        Ok(())
    }

    /// Stage 3: allocates segments until block `last` of `table` has one, naming each in
    /// the version log before it is written.
    fn ensure_segments(&mut self, table: u32, last: u64) -> Result<()> {
        while self.tables[&table].meta.segments.len() as u64 * self.blocks_per_segment <= last {
            let e = self.volume.allocate(1)?;
            self.zero_segment(e)?;
            let mut after = self.catalog();
            after.tables.iter_mut().find(|t| t.id == table).unwrap().segments.push(e);
            let edit = Edit {
                added: vec![e],
                engine: catalog::encode_segment_added(table),
                ..Edit::default()
            };
            if let Err(err) = self.volume.commit(&edit, &mut || catalog::encode_base(&after)) {
                self.volume.release(e);
                return Err(err.into());
            }
            self.tables.get_mut(&table).unwrap().meta.segments.push(e);
        }
        Ok(())
    }

    fn catalog(&self) -> Catalog {
        Catalog {
            tables: self.tables.values().map(|t| t.meta.clone()).collect(),
            next_id: self.next_table_id,
            marked: true,
            spill: self.spill_area,
            spill_paged: self.spill_paged(),
            undo_file: self.undo_file.clone(),
        }
    }

    /// Creates a table with one segment.
    pub fn create_table(&mut self, name: &str, schema: Schema) -> Result<u32> {
        self.check_running()?;
        if name.is_empty() || name.len() > crate::schema::NAME_BYTES_MAX {
            return Err(Error::InvalidArgument(format!("table name {name:?}: 1 to 255 bytes")));
        }
        if self.table_id(name).is_some() {
            return Err(Error::TableExists(name.to_string()));
        }
        let id = self.next_table_id;
        let e = self.volume.allocate(1)?;
        self.zero_segment(e)?;
        let meta = TableMeta { id, name: name.to_string(), schema, segments: vec![e] };
        let mut after = self.catalog();
        after.tables.push(meta.clone());
        after.next_id = id + 1;
        let engine = catalog::encode_table_created(id, name, &meta.schema);
        let edit = Edit { added: vec![e], engine, ..Edit::default() };
        if let Err(err) = self.volume.commit(&edit, &mut || catalog::encode_base(&after)) {
            self.volume.release(e);
            return Err(err.into());
        }
        self.next_table_id = id + 1;
        let index = Index::new(id, self.hash_bits, self.index_memory_entries);
        let order = OrderedIndex::new(meta.schema.fixed_key_len());
        let free = FreeSpace::default();
        self.tables.insert(id, Table { meta, end: Pos::default(), index, order, free });
        Ok(id)
    }

    /// Drops a table, freeing its segments. The caller holds the table exclusively, so no
    /// transaction has an active change in it.
    pub fn drop_table(&mut self, id: u32) -> Result<()> {
        self.check_running()?;
        let segments = self.table(id)?.segments.clone();
        let mut after = self.catalog();
        after.tables.retain(|t| t.id != id);
        let edit = Edit {
            removed: segments,
            engine: catalog::encode_table_dropped(id),
            ..Edit::default()
        };
        self.volume.commit(&edit, &mut || catalog::encode_base(&after))?;
        if let Some(mut t) = self.tables.remove(&id) {
            t.index.release(&self.volume);
        }
        self.cache.drop_table(id);
        Ok(())
    }

    /// Names and ids of the tables.
    pub fn tables(&self) -> Vec<(String, u32)> {
        self.tables.values().map(|t| (t.meta.name.clone(), t.meta.id)).collect()
    }

    /// Counters now.
    pub fn stats(&self) -> TableStats {
        TableStats {
            tables: self.tables.len(),
            rows: self.tables.values().map(|t| t.index.entries()).sum(),
            segments: self.tables.values().map(|t| t.meta.segments.len()).sum(),
            free_bytes: self.tables.values().map(|t| t.free.bytes()).sum(),
            index_paged_entries: self.tables.values().map(|t| t.index.paged_entries()).sum(),
            reused: self.reused,
            block_writes: self.block_writes,
            cached_blocks: self.cache.blocks(),
            undo: self.undo.stats(),
            spill: lock_spill(&self.spill).as_ref().map(SpillLog::stats).unwrap_or_default(),
            // The shared flusher's, filled in by `TableStore::stats`.
            commit_flushes: 0,
            flushed_commits: 0,
        }
    }

    /// What each table holds, and every live row checked against the primary index: found
    /// through it by its key (its full key confirmed from its block), at the position the
    /// rows put it (`check.rs`).
    ///
    /// # Errors
    /// [`Error::Corruption`] for a row the index does not find where it lies; a block's
    /// error.
    pub fn table_reports(&mut self) -> Result<Vec<crate::check::TableReport>> {
        let ids: Vec<u32> = self.tables.keys().copied().collect();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let rows = {
                let t = &self.tables[&id];
                t.order.range(&(Bound::Unbounded, Bound::Unbounded), usize::MAX)
            };
            for (key, pos) in &rows {
                let found = self.find(id, key)?.map(|f| f.pos);
                if found != Some(*pos) {
                    return Err(Error::Corruption {
                        what: format!(
                            "table {id}: the primary index finds a row's key at {found:?}, where \
                             the row lies at {pos:?}"
                        ),
                        offset: self.address(id, pos.block).unwrap_or(0),
                    });
                }
            }
            let t = &self.tables[&id];
            out.push(crate::check::TableReport {
                id,
                name: t.meta.name.clone(),
                schema: t.meta.schema.clone(),
                segments: t.meta.segments.len(),
                blocks: t.meta.segments.len() as u64 * self.blocks_per_segment,
                blocks_used: t.end.block + u64::from(t.end.offset > 0),
                rows: rows.len() as u64,
                dead_rows: t.free.records() as u64,
                dead_bytes: t.free.total_bytes(),
            });
        }
        Ok(out)
    }

    /// Each queue pair's counters and placement (empty without queue pairs).
    pub fn queue_pair_stats(&self) -> Vec<shale_io::PairStats> {
        self.pairs.as_ref().map(|p| p.stats()).unwrap_or_default()
    }

    /// The device address of index page `n` of `table`, if its index has pages.
    pub fn index_page_address(&self, table: u32, n: u64) -> Option<u64> {
        self.tables.get(&table)?.index.page_address(n)
    }

    /// The device addresses of the spill area, if there is one.
    pub fn spill_address(&self) -> Option<std::ops::Range<u64>> {
        self.spill_area.map(|e| self.volume.extent_range(e))
    }

    /// The device address of block `n` of `table` (for tests that damage blocks).
    pub fn block_address(&self, table: u32, n: u64) -> Option<u64> {
        self.address(table, n)
    }
}

/// Adds the walk of the spill area to that of persistent memory.
fn merge_walks(pmem: &mut Walked, spill: Walked) {
    pmem.active.extend(spill.active);
    pmem.committed.extend(spill.committed);
    pmem.max_txn = pmem.max_txn.max(spill.max_txn);
}

/// What rolling a record back writes at its position.
fn rollback_bytes(before: &Before) -> Vec<u8> {
    match before {
        Before::Free { span } => RowHeader {
            state: RowState::Void,
            slot_len: span - row::HEADER_BYTES as u32,
            row_len: 0,
        }
        .encode()
        .to_vec(),
        Before::Image(b) => b.clone(),
        Before::Commit => unreachable!("a commit mark is never rolled back"),
    }
}

/// Copies `bytes` into the payloads of consecutive blocks from `pos`.
fn copy_into_blocks(
    pos: Pos,
    bytes: &[u8],
    blocks: &mut BTreeMap<(u32, u64), Vec<u8>>,
    table: u32,
) {
    let mut done = 0;
    for n in pos.blocks(bytes.len()) {
        let b = blocks.get_mut(&(table, n)).expect("every block of the span is loaded");
        let from = if n == pos.block { pos.offset as usize } else { 0 };
        let take = (bytes.len() - done).min(PAYLOAD_BYTES - from);
        b[HEADER_BYTES + from..HEADER_BYTES + from + take]
            .copy_from_slice(&bytes[done..done + take]);
        done += take;
    }
}
