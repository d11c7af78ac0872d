//! The undo log on the volume: undo records (`undo.rs`) on the shared page log
//! (`shale_space::page_log`, pages of `shale_space::log_page`), in the spill area's extent
//! (the log's second home when persistent memory is full, and its only one with
//! `UndoLogPlace::Volume`).
//!
//! Persistent memory keeps its own ring (`undo_log.rs`): a byte-addressable medium whose
//! unit of persistence is a 64-byte line, where a record is expired by one store to its
//! state byte in place. The page log's pages carry one checksum over 4 KiB, so a byte of a
//! written page can never be changed alone: that does not fit persistent memory's in-place
//! expiry (nor its line-sized persistence). On the volume, where the unit of a write is a
//! 4 KiB block anyway, the log is written as pages that are never rewritten, and a record
//! is expired by appending an *expiry record* that names it.
//!
//! ```text
//! spill area (one extent, E bytes; addresses from its first byte)
//!   segment 0 | segment 1 | ... | segment N-1        N = E / S segments of S bytes
//!   (S: E/16 rounded down to whole pages, clamped to 8..=64 pages, fewer when that leaves
//!    fewer than 4 segments; see `Geometry`. A new area is at least 512 KiB.)
//! segment: pages 0, 1, ... of the page log format (`log_page.rs`, 4 KiB: generation,
//!   crc32c, index, synced-through, previous page's crc32c, fragments). Every page of a
//!   segment carries its generation, a number never used twice in the area (1 + the
//!   largest generation any valid page of the area carries when the segment begins), so
//!   the pages a reused segment keeps from an earlier lap never pass as current
//!   ("colouring"). The last page of a segment is kept for a retire record (below).
//! records (packed with `PageCursor`; each begins with its magic):
//!   segment head  "SHVS" | volume id (16) | previous segment's generation (u64 LE; 0: none)
//!                 | its pages (u32 LE) | the next LSN when this segment began (u64 LE)
//!                 (40 bytes, always the first record of page 0)
//!   undo record   "SHUR" ... as `undo.rs` encodes it (state byte ACTIVE, never changed)
//!   expiry        "SHVX" | count (u32 LE) | count LSNs (u64 LE): those records expired
//!   retire        "SHVR" | generation (u64 LE) of the segment about to be overwritten
//! ```
//!
//! **Writes: pages never rewritten.** Records are packed into the current segment's pages
//! in memory and written by the next *write*: a [`VolumeUndoLog::sync`], which the store
//! makes before every block write (`Storage::write_dirty`, `write_block`) and before
//! expiring records in persistent memory, or an expiry, which writes them with the expiry
//! record. A write takes every page packed since the last one, the partial last page sealed
//! as it is (`seal_partial`), with one FUA write; the next write starts on the next page
//! (`close_written`). A page that holds acknowledged records is so never written again: a
//! torn rewrite would destroy them (the checksum covers the whole page). Each page of a
//! write claims the pages before the write durable (`synced_through`), so an invalid page
//! below a later valid one is damage, not a torn tail (the page log's scan rules).
//!
//! Why records wait for the next block write rather than being durable when appended (as
//! in persistent memory, and as the first design of this log had it): LATTE needs an undo
//! record durable before the change it undoes can reach the device, and a change reaches
//! the device only by a block write; a write per append cost a 4 KiB page per record (a
//! 56-byte insert record included), so a transaction of 3,000 inserts needed 12 MiB of log
//! and more FUA writes than the block writes it guarded. Packed, records take about their
//! own bytes, and a write per block-write round (a commit's group flush, an abort's flush,
//! a write-behind) plus one per expiry remain. What a crash loses of them is of changes that
//! never reached the device.
//!
//! **Expiry and recovery.** An expiry record is written (durable) before `expire` returns.
//! Recovery scans every segment of the log in generation order (`page_log::scan`, each
//! segment but the newest with the sealed end its successor's head names) and takes as
//! active every undo record no later expiry record names. (Records of a transaction whose
//! commit mark is in the log are committed, as in persistent memory: the store filters
//! them.) A crash keeps a prefix of a write (a later page is read only after every page
//! before it), and an expiry is the last record of its write: the records before it in the
//! write, and the LSNs it names in the order given, keep their order (the store names a
//! transaction's records newest first when it expires written-back ones, and a commit's
//! records before its mark). A write torn inside a record is written over from where it
//! began (its pages zeroed first): it never returned, so nothing in it was acknowledged.
//! **Reclaim: segments in FIFO order.** Segments are used in ring order, 0, 1, ..., N-1, 0,
//! and a segment is overwritten only once every undo record in it is expired. An expiry
//! record is appended after the record it names, so it always lies in the same segment or a
//! newer one; segments being reused oldest first, the segment of an expiry record is
//! overwritten only after the segment of every record it names. So what a reused segment
//! loses (its undo records, all expired, and its expiry records, naming only records of
//! segments already gone or going with it) is never needed again, and no durable head
//! pointer is needed: the log is the chain of segments from the newest back through each
//! head's "previous segment".
//!
//! **Telling a reused segment from a damaged one.** Before the first page of a segment that
//! still holds a segment of the chain is overwritten, a retire record naming it is appended
//! (durably) to the current segment, in the page each segment keeps for it. A power cut in
//! the new segment's first write can leave neither the old segment's first page nor the new
//! one's; recovery then accepts the gap only where the newest segment retired that segment.
//! Any other segment of the chain missing is Corruption.
//!
//! **Full.** An undo record is refused with [`Error::LogFull`] when, once it is appended,
//! the free pages (the rest of the current segment and the segments holding no active
//! record) would not hold the expiries every open transaction still needs (the pages of one
//! expiry record naming all its records, twice over for the pages a record that does not
//! fit the rest of a segment leaves behind), so that ending a transaction never finds the
//! log full. The store expires a transaction's spilled records with one expiry (its commit
//! mark with them), so one record per transaction is what it needs.

use std::collections::{HashMap, HashSet, VecDeque};
use std::ops::ControlFlow;

use shale_space::log_page::{self, PAGE_BYTES};
use shale_space::page_log::{PageCursor, ScanError, scan::scan};

use crate::error::{Error, Result};
use crate::pmem::PmemLog;
use crate::undo::{ACTIVE, Before, UndoRecord};
use crate::undo_log::{Ring, UndoHandle, UndoStats, Walked};

/// The least bytes of a new spill area: its page log spends a page on every append, so an
/// area of the ring format's least (64 KiB) would hold a handful of transactions.
pub const MIN_AREA_BYTES: u64 = 512 << 10;

const HEAD: &[u8; 4] = b"SHVS";
const EXPIRY: &[u8; 4] = b"SHVX";
const RETIRE: &[u8; 4] = b"SHVR";
const UNDO: &[u8; 4] = b"SHUR";
const HEAD_BYTES: usize = 40;

/// Pages to keep for the expiry of a transaction's `n` records: those of one expiry record
/// naming them (and a segment head), twice over for the pages a record that does not fit
/// the rest of a segment leaves behind.
fn expiry_pages(n: u64) -> u64 {
    2 * (8 * n + 8 + HEAD_BYTES as u64 + 6).div_ceil(log_page::PAGE_PAYLOAD_BYTES as u64) - 1
}

/// How the area is divided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Segments in the area.
    pub segments: u32,
    /// Pages of a segment.
    pub pages: u32,
}

impl Geometry {
    /// The division of an area of `bytes`: segments of a sixteenth of it, 8 to 64 pages
    /// (32 to 256 KiB), at least 4 of them; `None` for an area too small for 4 segments of
    /// 4 pages (64 KiB).
    pub fn of(bytes: usize) -> Option<Geometry> {
        let total = (bytes / PAGE_BYTES) as u32;
        let mut pages = (total / 16).clamp(8, 64);
        if total / pages < 4 {
            pages = total / 4;
        }
        (pages >= 4).then_some(Geometry { segments: total / pages, pages })
    }

    fn segment_bytes(self) -> usize {
        self.pages as usize * PAGE_BYTES
    }
}

/// A segment head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Head {
    volume_id: [u8; 16],
    prev_gen: u64,
    prev_pages: u32,
    first_lsn: u64,
}

impl Head {
    fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(HEAD_BYTES);
        b.extend_from_slice(HEAD);
        b.extend_from_slice(&self.volume_id);
        b.extend_from_slice(&self.prev_gen.to_le_bytes());
        b.extend_from_slice(&self.prev_pages.to_le_bytes());
        b.extend_from_slice(&self.first_lsn.to_le_bytes());
        b
    }

    fn decode(b: &[u8]) -> Option<Head> {
        if b.len() != HEAD_BYTES || &b[..4] != HEAD {
            return None;
        }
        Some(Head {
            volume_id: b[4..20].try_into().unwrap(),
            prev_gen: u64::from_le_bytes(b[20..28].try_into().unwrap()),
            prev_pages: u32::from_le_bytes(b[28..32].try_into().unwrap()),
            first_lsn: u64::from_le_bytes(b[32..40].try_into().unwrap()),
        })
    }
}

fn encode_expiry(lsns: &[u64]) -> Vec<u8> {
    let mut b = Vec::with_capacity(8 + 8 * lsns.len());
    b.extend_from_slice(EXPIRY);
    b.extend_from_slice(&(lsns.len() as u32).to_le_bytes());
    for l in lsns {
        b.extend_from_slice(&l.to_le_bytes());
    }
    b
}

fn encode_retire(generation: u64) -> Vec<u8> {
    let mut b = RETIRE.to_vec();
    b.extend_from_slice(&generation.to_le_bytes());
    b
}

/// A record of the log, decoded.
enum Rec {
    Head,
    Undo(UndoRecord),
    Expiry(Vec<u64>),
    Retire(u64),
}

fn decode_rec(b: &[u8]) -> std::result::Result<Rec, String> {
    match b.get(..4) {
        Some(m) if m == HEAD => {
            Head::decode(b).map(|_| Rec::Head).ok_or("a bad segment head".into())
        }
        Some(m) if m == UNDO => match UndoRecord::decode(b) {
            Ok((r, ACTIVE)) => Ok(Rec::Undo(r)),
            Ok(_) => Err("an undo record not written active".into()),
            Err(e) => Err(format!("an undo record: {e:?}")),
        },
        Some(m) if m == EXPIRY && b.len() >= 8 => {
            let n = u32::from_le_bytes(b[4..8].try_into().unwrap()) as usize;
            if b.len() != 8 + 8 * n {
                return Err("an expiry record of a wrong length".into());
            }
            let lsns = b[8..].chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap()));
            Ok(Rec::Expiry(lsns.collect()))
        }
        Some(m) if m == RETIRE && b.len() == 12 => {
            Ok(Rec::Retire(u64::from_le_bytes(b[4..12].try_into().unwrap())))
        }
        _ => Err("a record of no known kind".into()),
    }
}

/// A segment of the log in memory.
#[derive(Debug)]
struct Seg {
    slot: u32,
    generation: u64,
    /// Its undo records not expired: LSN to transaction.
    active: HashMap<u64, u64>,
    /// Undo records appended to it.
    records: u64,
}

/// The undo log on the volume.
pub struct VolumeUndoLog {
    area: Box<dyn PmemLog>,
    volume_id: [u8; 16],
    geo: Geometry,
    /// The segments from the oldest holding an active record to the current one (the
    /// back), a run of consecutive slots.
    segs: VecDeque<Seg>,
    /// The write position in the current segment (fresh page: every write closes its
    /// partial page).
    cursor: Option<PageCursor>,
    /// The generation of the chain's segment each slot holds, if any (what a reuse retires).
    on_disk: Vec<Option<u64>>,
    /// Where the first segment goes while there is none.
    first_slot: u32,
    /// The generation the current segment retired last, if any: a crash between a retire
    /// record and the new segment's first write leaves it retired already (and the
    /// segment's last page used).
    retired: Option<u64>,
    next_gen: u64,
    next_lsn: u64,
    /// Active undo records per transaction.
    txns: HashMap<u64, u64>,
    /// Pages the cursor sealed since the last write, not written yet (the cursor's partial
    /// page is not among them).
    pending: Vec<u8>,
    /// The first page of the current segment not written yet: every page before it is
    /// durable, and the next write begins there.
    write_start: u32,
    /// Pages of the current segment, from where the next write goes, that a torn write
    /// left and the next write zeroes first.
    scrub: Option<(u32, u32)>,
    stats: UndoStats,
}

impl std::fmt::Debug for VolumeUndoLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VolumeUndoLog")
            .field("geometry", &self.geo)
            .field("segments", &self.segs.len())
            .field("next_lsn", &self.next_lsn)
            .finish()
    }
}

fn corruption(what: String, offset: u64) -> Error {
    Error::Corruption { what: format!("spill area undo log: {what}"), offset }
}

impl VolumeUndoLog {
    /// Opens the log in `area` (zeros: an empty log) for the store whose volume id is
    /// `volume_id`, and returns it with what the scan found (`Walked`, as the ring's walk).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an area too small, or holding another store's log;
    /// [`Error::Corruption`] for damage the page log's rules find (a page below a later
    /// page's synced-through claim or a segment's sealed end), a segment of the chain
    /// missing, records out of sequence.
    pub fn open(area: Box<dyn PmemLog>, volume_id: [u8; 16]) -> Result<(VolumeUndoLog, Walked)> {
        let len = area.len();
        let geo = Geometry::of(len).ok_or_else(|| {
            Error::InvalidArgument(format!("a spill area of {len} bytes: at least 64 KiB"))
        })?;
        let mut image = vec![0u8; geo.segments as usize * geo.segment_bytes()];
        area.read(0, &mut image);
        let seg_bytes = geo.segment_bytes();
        let n = geo.segments;
        let slot_image = |slot: u32| &image[slot as usize * seg_bytes..][..seg_bytes];

        // Every valid page's generation, and each slot's head.
        let mut max_gen = 0u64;
        let mut heads: Vec<Option<(u64, Head)>> = vec![None; n as usize];
        for slot in 0..n {
            let pages = slot_image(slot);
            for (i, page) in pages.chunks_exact(PAGE_BYTES).enumerate() {
                if let Some((g, index, _)) = log_page::claimed(page) {
                    if index as usize == i {
                        max_gen = max_gen.max(g);
                    }
                }
            }
            let page0 = &pages[..PAGE_BYTES];
            let Some((g, 0, _)) = log_page::claimed(page0) else { continue };
            let at = slot as u64 * seg_bytes as u64;
            let page = log_page::decode(page0, g, 0)
                .map_err(|e| corruption(format!("segment {g}'s first page: {e:?}"), at))?;
            let head = match page.fragments.first() {
                Some(f) if f.kind == log_page::FragmentType::Full && page.prev_crc == 0 => {
                    Head::decode(f.data)
                }
                _ => None,
            };
            let head =
                head.ok_or_else(|| corruption(format!("segment {g} begins with no head"), at))?;
            if head.volume_id != volume_id {
                return Err(Error::InvalidArgument(
                    "the spill area holds the undo log of another store".into(),
                ));
            }
            heads[slot as usize] = Some((g, head));
        }

        // The chain: from the newest segment back through each head's predecessor, which
        // lies in the slot before it. A gap is allowed only in the slot after the newest
        // (the one the next segment takes), and only where the newest retired it (checked
        // once the segments are read).
        let newest = (0..n).filter_map(|s| heads[s as usize].map(|(g, _)| (g, s))).max();
        let mut chain: Vec<(u32, u64, Head)> = Vec::new();
        let mut gap: Option<u64> = None;
        if let Some((g, s)) = newest {
            chain.push((s, g, heads[s as usize].unwrap().1));
            for k in 1..n {
                let want = chain.last().unwrap().2.prev_gen;
                if want == 0 {
                    break;
                }
                let slot = (s + n - k) % n;
                match heads[slot as usize] {
                    Some((g, h)) if g == want => chain.push((slot, g, h)),
                    _ if k == n - 1 => {
                        gap = Some(want);
                        break;
                    }
                    _ => {
                        return Err(corruption(
                            format!(
                                "segment {} names segment {want} before it, which slot {slot} \
                                 does not hold",
                                chain.last().unwrap().1
                            ),
                            slot as u64 * seg_bytes as u64,
                        ));
                    }
                }
            }
            chain.reverse();
        }
        // The slot the next segment takes: pages of a generation newer than the newest
        // segment are a first write that a power cut tore; one that claims its first page
        // durable says that page was damaged, not torn.
        let next_slot = newest.map_or(0, |(_, s)| (s + 1) % n);
        let newest_gen = newest.map_or(0, |(g, _)| g);
        let mut later: Vec<u64> = slot_image(next_slot)
            .chunks_exact(PAGE_BYTES)
            .enumerate()
            .filter_map(|(i, p)| log_page::claimed(p).filter(|c| c.1 as usize == i).map(|c| c.0))
            .filter(|&g| g > newest_gen)
            .collect();
        later.sort_unstable();
        later.dedup();
        for g in later {
            let mut pages = slot_image(next_slot);
            if let Err(ScanError::DurableInvalid { page, why }) =
                scan(&mut pages, g, None, |_| ControlFlow::Continue(()))
            {
                return Err(corruption(
                    format!("segment {g}, page {page}: {why}"),
                    next_slot as u64 * seg_bytes as u64 + page as u64 * PAGE_BYTES as u64,
                ));
            }
        }

        // Read the chain's segments, oldest first.
        let mut walked = Walked::default();
        let mut active: Vec<(u64, u64, UndoRecord)> = Vec::new(); // (lsn, generation, record)
        let mut expired: HashSet<u64> = HashSet::new();
        let mut retired: HashSet<u64> = HashSet::new();
        // The last retire record read, and the segment holding it.
        let mut last_retired = (0u64, 0u64);
        let mut segs = VecDeque::new();
        let mut next_lsn = chain.first().map_or(1, |c| c.2.first_lsn);
        let mut max_named = 0u64;
        let mut cursor = None;
        let mut scrub = None;
        let mut write_start = 0;
        for (i, &(slot, g, head)) in chain.iter().enumerate() {
            let at = slot as u64 * seg_bytes as u64;
            if head.first_lsn < next_lsn {
                return Err(corruption(
                    format!("segment {g} begins at LSN {}, below {next_lsn}", head.first_lsn),
                    at,
                ));
            }
            let sealed = chain.get(i + 1).map(|c| c.2.prev_pages);
            let mut seg = Seg { slot, generation: g, active: HashMap::new(), records: 0 };
            let mut bad: Option<String> = None;
            let mut first = true;
            next_lsn = head.first_lsn;
            let mut pages = slot_image(slot);
            let end = scan(&mut pages, g, sealed, |r| {
                let rec = match decode_rec(&r.bytes) {
                    Ok(rec) => rec,
                    Err(why) => {
                        bad = Some(format!("page {}: {why}", r.page));
                        return ControlFlow::Break(());
                    }
                };
                match (rec, std::mem::take(&mut first)) {
                    (Rec::Head, true) => {}
                    (Rec::Head, false) | (_, true) => {
                        bad = Some(format!("page {}: a segment head out of place", r.page));
                        return ControlFlow::Break(());
                    }
                    (Rec::Undo(u), false) => {
                        // LSNs rise; a torn write's records, zeroed after the open that
                        // saw them, leave a gap.
                        if u.lsn < next_lsn {
                            bad = Some(format!("undo record {} after {next_lsn}", u.lsn));
                            return ControlFlow::Break(());
                        }
                        next_lsn = u.lsn + 1;
                        seg.records += 1;
                        if u.before == Before::Commit {
                            walked.committed.insert(u.txn);
                        }
                        walked.max_txn = walked.max_txn.max(u.txn);
                        active.push((u.lsn, g, u));
                    }
                    (Rec::Expiry(lsns), false) => {
                        for l in lsns {
                            max_named = max_named.max(l);
                            expired.insert(l);
                        }
                    }
                    (Rec::Retire(r), false) => {
                        retired.insert(r);
                        last_retired = (g, r);
                    }
                }
                ControlFlow::Continue(())
            })
            .map_err(|e| match e {
                ScanError::Source(never) => match never {},
                ScanError::OutOfOrder { page, kind } => corruption(
                    format!("segment {g}, page {page}: fragment {kind:?} out of order"),
                    at + page as u64 * PAGE_BYTES as u64,
                ),
                ScanError::DurableInvalid { page, why } => corruption(
                    format!("segment {g}, page {page} was durable and is invalid: {why}"),
                    at + page as u64 * PAGE_BYTES as u64,
                ),
            })?;
            if let Some(why) = bad {
                return Err(corruption(format!("segment {g}: {why}"), at));
            }
            if let Some(sealed) = sealed.filter(|&e| end.pages != e || end.cut_record) {
                return Err(corruption(
                    format!(
                        "segment {g} ends at page {} where its successor says {sealed}",
                        end.pages
                    ),
                    at,
                ));
            }
            if i + 1 == chain.len() {
                // The next write goes where the log ends: past its last valid page, or,
                // when a torn write cut a record, where that write began (every write
                // begins on a fresh page, and its pages claim the pages before it durable:
                // the last valid page's claim names it). The torn write never returned, so
                // nothing in it was acknowledged (an expiry is the last record of its write:
                // complete, nothing after it was cut). What lies from there to the
                // segment's end is zeroed before the next write, so that no stale page of
                // this generation ever follows a page written after it.
                let seg_image = slot_image(slot);
                let resume = match end.cut_record {
                    false => end.pages,
                    true => {
                        let last =
                            &seg_image[(end.pages as usize - 1) * PAGE_BYTES..][..PAGE_BYTES];
                        log_page::claimed(last).expect("a valid page").2
                    }
                };
                let dirty_end = (resume..geo.pages)
                    .rev()
                    .find(|&p| {
                        seg_image[p as usize * PAGE_BYTES..][..PAGE_BYTES].iter().any(|&b| b != 0)
                    })
                    .map(|p| p + 1);
                scrub = dirty_end.map(|e| (resume, e));
                let crc = match resume {
                    0 => 0,
                    r => {
                        let last = &seg_image[(r as usize - 1) * PAGE_BYTES..];
                        u32::from_le_bytes(last[8..12].try_into().unwrap())
                    }
                };
                let mut c = PageCursor::new(g, resume, crc);
                if resume == 0 {
                    // The segment's first write is written again, its head first.
                    c.add(&head.encode(), 0, |_| unreachable!("a head fills no page"));
                }
                cursor = Some(c);
                write_start = resume;
            }
            segs.push_back(seg);
        }
        if let Some(g) = gap {
            if !retired.contains(&g) {
                let slot = next_slot;
                return Err(corruption(
                    format!("segment {g} (slot {slot}) is missing and was never retired"),
                    slot as u64 * seg_bytes as u64,
                ));
            }
        }
        let mut txns: HashMap<u64, u64> = HashMap::new();
        for (lsn, g, rec) in active {
            if expired.contains(&lsn) {
                continue;
            }
            let seg = segs.iter_mut().find(|s| s.generation == g).expect("a chain segment");
            seg.active.insert(lsn, rec.txn);
            *txns.entry(rec.txn).or_insert(0) += 1;
            walked.active.push((UndoHandle { lsn, offset: g, ring: Ring::Spill }, rec));
        }
        let mut on_disk = vec![None; n as usize];
        for s in &segs {
            on_disk[s.slot as usize] = Some(s.generation);
        }
        let mut log = VolumeUndoLog {
            area,
            volume_id,
            geo,
            segs,
            cursor,
            on_disk,
            first_slot: next_slot,
            retired: (last_retired.0 == newest_gen && newest_gen != 0).then_some(last_retired.1),
            next_gen: max_gen + 1,
            next_lsn: next_lsn.max(max_named + 1),
            txns,
            pending: Vec::new(),
            write_start,
            scrub,
            stats: UndoStats { ring_bytes: len as u64, ..UndoStats::default() },
        };
        log.pop_expired();
        Ok((log, walked))
    }

    /// The division of the area.
    #[cfg(test)]
    pub fn geometry(&self) -> Geometry {
        self.geo
    }

    /// Appends `rec` (its `lsn` is set here), durable at the next [`VolumeUndoLog::sync`]
    /// (or write of the log: an expiry, a new segment), which the store makes before any
    /// block write (`Storage::write_dirty`): the write-ahead rule of LATTE's undo log, whose
    /// record must be durable before the change it undoes can reach the device.
    ///
    /// # Errors
    /// [`Error::LogFull`] when the record, and the expiries the open transactions still
    /// need, find no room; the device's error.
    pub fn append(&mut self, rec: &mut UndoRecord) -> Result<UndoHandle> {
        rec.lsn = self.next_lsn;
        let bytes = rec.encode();
        let full = || Error::LogFull {
            needed: bytes.len() as u64,
            capacity: self.geo.segments as u64 * self.geo.segment_bytes() as u64,
        };
        // Room left for records in a segment: its last page is kept for a retire record.
        let limit = self.geo.pages - 1;
        let here = self.cursor.as_ref().and_then(|c| c.packed_end([bytes.len()], limit));
        let (end, new_segment) = match here {
            Some(end) => (end, false),
            None => {
                let fresh = PageCursor::new(0, 0, 0);
                let end = fresh.packed_end([HEAD_BYTES, bytes.len()], limit).ok_or_else(full)?;
                if !self.next_slot_free() {
                    return Err(full());
                }
                (end, true)
            }
        };
        // The free pages once it is written, and what the open transactions' expiries need.
        let used = end.0 + u32::from(end.1 < log_page::PAGE_PAYLOAD_BYTES);
        let segs_after = self.segs.len() as u32 + u32::from(new_segment || self.segs.is_empty());
        let free = u64::from(limit.saturating_sub(used))
            + u64::from(self.geo.segments - segs_after) * u64::from(limit);
        let mut need = 1u64;
        let mut counted = false;
        for (&txn, &count) in &self.txns {
            counted |= txn == rec.txn;
            need += expiry_pages(count + u64::from(txn == rec.txn));
        }
        if !counted {
            need += expiry_pages(1);
        }
        if free < need {
            return Err(full());
        }
        if new_segment {
            self.start_segment()?;
        }
        self.add(&bytes);
        let seg = self.segs.back_mut().expect("a current segment");
        seg.active.insert(rec.lsn, rec.txn);
        seg.records += 1;
        *self.txns.entry(rec.txn).or_insert(0) += 1;
        self.next_lsn += 1;
        self.stats.appended += 1;
        Ok(UndoHandle { lsn: rec.lsn, offset: seg.generation, ring: Ring::Spill })
    }

    /// Expires the records of `handles`, durably, with one write where one segment holds
    /// the expiry records (a write per segment otherwise, in order): a power cut keeps the
    /// expiries of a prefix of `handles`.
    ///
    /// # Panics
    /// If a handle names no active record of this log (a bug).
    ///
    /// # Errors
    /// The device's error; [`Error::LogFull`] only if the reserve for expiries was
    /// miscounted (a bug).
    pub fn expire(&mut self, handles: &[UndoHandle]) -> Result<()> {
        self.expire_with(handles, true)
    }

    /// Expires the records of `handles` as [`VolumeUndoLog::expire`] does, but leaves the
    /// expiry record packed, to be written by the next write of the log (a
    /// [`VolumeUndoLog::sync`], a block write's, another expiry): a commit's group of
    /// expiries then costs one write for every commit in it, not one each
    /// (`GroupFlush::sync_log`). Until that write the records are active after a crash, as
    /// if the commit had not happened; no write of the log or of a block can come first,
    /// since every write of the log takes what is packed in order, and every block write
    /// is preceded by one.
    ///
    /// # Panics
    /// As [`VolumeUndoLog::expire`].
    ///
    /// # Errors
    /// As [`VolumeUndoLog::expire`] (a segment begun for the record writes the one before).
    pub fn expire_packed(&mut self, handles: &[UndoHandle]) -> Result<()> {
        self.expire_with(handles, false)
    }

    /// Expires `handles`, writing the expiry records at once when `durable`.
    fn expire_with(&mut self, handles: &[UndoHandle], durable: bool) -> Result<()> {
        if handles.is_empty() {
            return Ok(());
        }
        let lsns: Vec<u64> = handles.iter().map(|h| h.lsn).collect();
        // One record per write (so a torn write cuts at most its own record, `open`), as
        // many LSNs as a segment holds.
        let per_record = (self.geo.pages as usize - 2) * (log_page::PAGE_PAYLOAD_BYTES - 3) / 8 - 8;
        for chunk in lsns.chunks(per_record) {
            let rec = encode_expiry(chunk);
            let fits = self
                .cursor
                .as_ref()
                .is_some_and(|c| c.packed_end([rec.len()], self.geo.pages - 1).is_some());
            if !fits {
                if !self.next_slot_free() {
                    return Err(Error::LogFull {
                        needed: rec.len() as u64,
                        capacity: self.geo.segments as u64 * self.geo.segment_bytes() as u64,
                    });
                }
                self.start_segment()?;
            }
            if durable {
                self.write(&[rec])?;
            } else {
                self.add(&rec);
            }
        }
        for h in handles {
            assert_eq!(h.ring, Ring::Spill, "a handle of the other log");
            let seg = self
                .segs
                .iter_mut()
                .find(|s| s.generation == h.offset)
                .expect("an undo handle names a live segment");
            let txn = seg.active.remove(&h.lsn).expect("an undo handle names an active record");
            let n = self.txns.get_mut(&txn).expect("its transaction");
            *n -= 1;
            if *n == 0 {
                self.txns.remove(&txn);
            }
        }
        self.pop_expired();
        Ok(())
    }

    /// Nothing to do: a segment is reused once all its records are expired, when the log
    /// needs it (kept so the store treats both logs alike).
    ///
    /// # Errors
    /// None.
    pub fn reclaim(&mut self) -> Result<()> {
        Ok(())
    }

    /// Counters now: `ring_bytes_used` counts the pages written in the segments not yet free.
    pub fn stats(&self) -> UndoStats {
        let pages = self.segs.len().saturating_sub(1) as u64 * u64::from(self.geo.pages)
            + self.cursor.as_ref().map_or(0, |c| u64::from(c.index()));
        UndoStats { ring_bytes_used: pages * PAGE_BYTES as u64, ..self.stats }
    }

    /// Drops the oldest segments with no active record (the current one stays).
    fn pop_expired(&mut self) {
        while self.segs.len() > 1 && self.segs.front().is_some_and(|s| s.active.is_empty()) {
            let s = self.segs.pop_front().expect("checked");
            self.stats.reclaimed += s.records;
        }
    }

    /// Whether the slot after the current segment holds no active record.
    fn next_slot_free(&self) -> bool {
        (self.segs.len() as u32) < self.geo.segments
    }

    /// Starts a segment in the next slot: the segment the slot holds retired first (a
    /// retire record in the current segment, durable), then the new segment's first page
    /// written with its head alone (the caller's records follow it in the same page when
    /// they are written).
    fn start_segment(&mut self) -> Result<()> {
        self.scrub_now()?;
        let slot = match self.segs.back() {
            Some(s) => (s.slot + 1) % self.geo.segments,
            None => self.first_slot,
        };
        // The current segment's pending records, and the retire record, go first.
        match self.on_disk[slot as usize] {
            Some(old) if self.retired != Some(old) => self.write(&[encode_retire(old)])?,
            _ => self.sync()?,
        }
        self.retired = None;
        let (prev_gen, prev_pages) = match (self.segs.back(), &self.cursor) {
            (Some(s), Some(c)) => (s.generation, c.index()),
            _ => (0, 0),
        };
        let generation = self.next_gen;
        self.next_gen += 1;
        let head =
            Head { volume_id: self.volume_id, prev_gen, prev_pages, first_lsn: self.next_lsn };
        self.segs.push_back(Seg { slot, generation, active: HashMap::new(), records: 0 });
        self.on_disk[slot as usize] = Some(generation);
        self.cursor = Some(PageCursor::new(generation, 0, 0));
        self.write_start = 0;
        self.add(&head.encode());
        Ok(())
    }

    /// Zeroes what a torn write left past the end of the current segment's log (found at
    /// the open), durably, before anything is written after it.
    fn scrub_now(&mut self) -> Result<()> {
        let (Some((from, to)), Some(seg)) = (self.scrub, self.segs.back()) else {
            return Ok(());
        };
        let at = seg.slot as usize * self.geo.segment_bytes() + from as usize * PAGE_BYTES;
        let len = (to - from) as usize * PAGE_BYTES;
        self.area.write(at, &vec![0u8; len]);
        self.stats.persists += 1;
        self.area.persist(at, len)?;
        self.scrub = None;
        Ok(())
    }

    /// Writes the records packed since the last write, then `recs`, from the current
    /// segment's first page not written yet, the partial last page sealed as it is and never
    /// written again, with one FUA write.
    fn write(&mut self, recs: &[Vec<u8>]) -> Result<()> {
        self.scrub_now()?;
        for r in recs {
            self.add(r);
        }
        let cursor = self.cursor.as_mut().expect("a current segment");
        if !cursor.is_empty() {
            let (image, crc) = cursor.seal_partial(self.write_start);
            self.pending.extend_from_slice(image);
            cursor.close_written(crc);
        }
        if self.pending.is_empty() {
            return Ok(());
        }
        assert!(cursor.index() <= self.geo.pages, "a write past its segment");
        let slot = self.segs.back().expect("a current segment").slot;
        let at = slot as usize * self.geo.segment_bytes() + self.write_start as usize * PAGE_BYTES;
        let out = std::mem::take(&mut self.pending);
        self.write_start = cursor.index();
        self.area.write(at, &out);
        self.stats.persists += 1;
        self.area.persist(at, out.len())
    }

    /// Packs `rec` into the current segment's pages, to be written by the next write.
    fn add(&mut self, rec: &[u8]) {
        let cursor = self.cursor.as_mut().expect("a current segment");
        let pending = &mut self.pending;
        cursor.add(rec, self.write_start, |p| pending.extend_from_slice(p));
    }

    /// Makes every record appended so far durable: their pages written with one FUA write,
    /// the partial last page sealed as it is and never written again.
    ///
    /// # Errors
    /// The device's error.
    pub fn sync(&mut self) -> Result<()> {
        if self.cursor.as_ref().is_some_and(|c| !c.is_empty()) || !self.pending.is_empty() {
            self.write(&[])?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmem::SimPmem;

    const ID: [u8; 16] = [7; 16];
    /// Four segments of eight pages.
    const AREA: usize = 128 << 10;

    use crate::undo::test_record as rec;

    fn open(pmem: &SimPmem) -> Result<(VolumeUndoLog, Walked)> {
        VolumeUndoLog::open(pmem.boxed(), ID)
    }

    /// Appends `r` and makes it durable.
    fn put(log: &mut VolumeUndoLog, r: &mut UndoRecord) -> UndoHandle {
        let h = log.append(r).unwrap();
        log.sync().unwrap();
        h
    }

    fn lsns(w: &Walked) -> Vec<u64> {
        w.active.iter().map(|a| a.0.lsn).collect()
    }

    /// Appends pack into shared pages until a sync (or an expiry) writes them, once: what
    /// was appended and not synced is not in the log after a crash.
    #[test]
    fn appends_share_pages_until_a_sync_writes_them() {
        let pmem = SimPmem::new(AREA);
        let (mut log, _) = open(&pmem).unwrap();
        let first: Vec<UndoHandle> =
            (0..20).map(|i| log.append(&mut rec(i, 40)).unwrap()).collect();
        assert_eq!(log.stats().persists, 0);
        let (_, pages) = written(&pmem, || log.sync().unwrap());
        assert_eq!((pages.len(), log.stats().persists), (1, 1), "{pages:?}");
        log.append(&mut rec(20, 40)).unwrap();
        drop(log);
        let (mut log, w) = open(&pmem).unwrap();
        assert_eq!(w.active.iter().map(|a| a.0).collect::<Vec<_>>(), first);
        // An expiry writes what is pending with it.
        let h = log.append(&mut rec(21, 40)).unwrap();
        log.expire(&first).unwrap();
        drop(log);
        let (_, w) = open(&pmem).unwrap();
        assert_eq!(w.active.iter().map(|a| a.0).collect::<Vec<_>>(), vec![h]);
    }

    #[test]
    fn geometry_is_derived_from_the_area() {
        let g = |kib: usize| Geometry::of(kib << 10).map(|g| (g.segments, g.pages));
        assert_eq!(g(128), Some((4, 8)));
        assert_eq!(g(1024), Some((16, 16)));
        assert_eq!(g(16 << 10), Some((64, 64)));
        assert_eq!(g(64), Some((4, 4)));
        assert_eq!(g(60), None);
    }

    /// Appends 600 records of 100 bytes to 6 KiB, keeping the newest three active and
    /// expiring the others one at a time, reopening after every 23rd: each reopen finds
    /// exactly the active ones, across many laps of the four segments.
    #[test]
    fn records_survive_reopens_across_many_laps_and_expired_ones_do_not() {
        let pmem = SimPmem::new(AREA);
        let (mut log, w) = open(&pmem).unwrap();
        assert!(w.active.is_empty());
        assert_eq!(log.geometry(), Geometry { segments: 4, pages: 8 });
        let mut open_ones: Vec<UndoHandle> = Vec::new();
        let mut generations = HashSet::new();
        for i in 0..600u64 {
            let mut r = rec(i, 100 + (i as usize * 997) % 6000);
            let h = put(&mut log, &mut r);
            generations.insert(h.offset);
            open_ones.push(h);
            if open_ones.len() > 3 {
                let old = open_ones.remove(0);
                log.expire(&[old]).unwrap();
            }
            if i % 23 == 0 {
                drop(log);
                let (l, w) = open(&pmem).unwrap();
                log = l;
                let want: Vec<u64> = open_ones.iter().map(|h| h.lsn).collect();
                assert_eq!(lsns(&w), want, "at {i}");
                assert_eq!(w.max_txn, i);
                let handles: Vec<UndoHandle> = w.active.iter().map(|a| a.0).collect();
                assert_eq!(handles, open_ones, "at {i}");
            }
        }
        assert!(generations.len() > 40, "{} segments used", generations.len());
        // Another store's volume id is refused.
        assert!(matches!(
            VolumeUndoLog::open(pmem.boxed(), [8; 16]),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn a_full_log_is_log_full_and_still_expires_what_it_holds() {
        let pmem = SimPmem::new(AREA);
        let (mut log, _) = open(&pmem).unwrap();
        let mut held = Vec::new();
        let full = loop {
            match log.append(&mut rec(held.len() as u64 % 3, 3000)) {
                Ok(h) => held.push(h),
                Err(e) => break e,
            }
            assert!(held.len() < 100, "never full");
        };
        assert!(matches!(full, Error::LogFull { .. }), "{full:?}");
        assert!(held.len() > 10, "{}", held.len());
        // Every transaction's records can still be expired (the reserve), one transaction
        // at a time; then the log takes records again.
        for txn in 0..3 {
            let of: Vec<UndoHandle> =
                held.iter().copied().filter(|h| h.lsn % 3 == (txn + 1) % 3).collect();
            log.expire(&of).unwrap();
        }
        drop(log);
        let (mut log, w) = open(&pmem).unwrap();
        assert!(w.active.is_empty(), "{:?}", lsns(&w));
        for i in 0..30 {
            let h = put(&mut log, &mut rec(i, 3000));
            log.expire(&[h]).unwrap();
        }
    }

    /// The image before and after `f` ran, and the pages `f` wrote.
    fn written(pmem: &SimPmem, f: impl FnOnce()) -> (Vec<u8>, Vec<usize>) {
        let before = pmem.current_image();
        f();
        let after = pmem.current_image();
        let pages = (0..after.len() / PAGE_BYTES)
            .filter(|p| {
                before[p * PAGE_BYTES..][..PAGE_BYTES] != after[p * PAGE_BYTES..][..PAGE_BYTES]
            })
            .collect();
        (before, pages)
    }

    /// Puts the first sector of `page` back as `before` had it: a write torn by a power cut.
    fn tear(pmem: &SimPmem, before: &[u8], page: usize) {
        let at = page * PAGE_BYTES;
        let image = pmem.current_image();
        for o in at..at + 512 {
            if image[o] != before[o] {
                pmem.corrupt(o, image[o] ^ before[o]);
            }
        }
    }

    #[test]
    fn a_torn_last_write_ends_the_log_and_the_next_append_goes_on() {
        let pmem = SimPmem::new(AREA);
        let (mut log, _) = open(&pmem).unwrap();
        let a = put(&mut log, &mut rec(1, 100));
        let (before, pages) = written(&pmem, || {
            put(&mut log, &mut rec(2, 6000));
        });
        assert_eq!(pages.len(), 2, "{pages:?}");
        drop(log);
        tear(&pmem, &before, pages[1]);
        let (mut log, w) = open(&pmem).unwrap();
        assert_eq!(lsns(&w), vec![a.lsn]);
        let c = put(&mut log, &mut rec(3, 100));
        drop(log);
        let (_, w) = open(&pmem).unwrap();
        assert_eq!(lsns(&w), vec![a.lsn, c.lsn]);
    }

    /// A write of several records torn after its first page: the records it completed are
    /// read once (recovery rolls them back and expires them; the write never returned), and
    /// the next write goes where the torn one began, its pages zeroed first, so that the log
    /// reads on past it.
    #[test]
    fn a_torn_batch_is_read_once_and_written_over_from_where_it_began() {
        let pmem = SimPmem::new(AREA);
        let (mut log, _) = open(&pmem).unwrap();
        let a = put(&mut log, &mut rec(1, 100));
        let batch: Vec<UndoHandle> =
            (2..6).map(|i| log.append(&mut rec(i, 1500)).unwrap()).collect();
        let (before, pages) = written(&pmem, || log.sync().unwrap());
        assert_eq!(pages.len(), 2, "{pages:?}");
        drop(log);
        tear(&pmem, &before, pages[1]);
        let (mut log, w) = open(&pmem).unwrap();
        // Records 2 and 3 lie whole on the first page; 4 is cut, 5 lost.
        assert_eq!(lsns(&w), vec![a.lsn, batch[0].lsn, batch[1].lsn]);
        let handles: Vec<UndoHandle> = w.active.iter().skip(1).map(|x| x.0).collect();
        log.expire(&handles).unwrap();
        let c = put(&mut log, &mut rec(9, 100));
        drop(log);
        let (_, w) = open(&pmem).unwrap();
        assert_eq!(lsns(&w), vec![a.lsn, c.lsn]);
        assert!(c.lsn > batch[1].lsn);
    }

    #[test]
    fn damage_below_a_later_pages_claim_or_a_sealed_end_is_corruption() {
        let pmem = SimPmem::new(AREA);
        let (mut log, _) = open(&pmem).unwrap();
        let (_, first) = written(&pmem, || {
            put(&mut log, &mut rec(1, 100));
        });
        put(&mut log, &mut rec(2, 100));
        let image = pmem.current_image();
        pmem.corrupt(first[0] * PAGE_BYTES + 300, 0x10);
        assert!(matches!(open(&pmem), Err(Error::Corruption { .. })));
        // A page of an older segment: its successor's head names its end.
        let pmem = SimPmem::from_image(image, None);
        let (mut log, _) = open(&pmem).unwrap();
        let (_, second) = written(&pmem, || {
            put(&mut log, &mut rec(3, 100));
        });
        for i in 0..4 {
            let h = put(&mut log, &mut rec(4 + i, 3000));
            log.expire(&[h]).unwrap();
        }
        assert!(second[0] < 8, "in segment 0: {second:?}");
        drop(log);
        assert!(open(&pmem).is_ok());
        pmem.corrupt(second[0] * PAGE_BYTES + 300, 0x10);
        assert!(matches!(open(&pmem), Err(Error::Corruption { .. })), "{:?}", open(&pmem));
    }

    /// An expiry whose write was torn was never acknowledged: its record is active again,
    /// which is what recovery must then roll back. An expiry acknowledged (a later append
    /// follows it) and damaged is Corruption, never its record come back.
    #[test]
    fn a_lost_expiry_makes_its_record_active_only_if_it_was_never_acknowledged() {
        let pmem = SimPmem::new(AREA);
        let (mut log, _) = open(&pmem).unwrap();
        let a = put(&mut log, &mut rec(1, 100));
        let (before, pages) = written(&pmem, || log.expire(&[a]).unwrap());
        assert_eq!(pages.len(), 1);
        let expired = pmem.current_image();
        drop(log);
        tear(&pmem, &before, pages[0]);
        let (_, w) = open(&pmem).unwrap();
        assert_eq!(lsns(&w), vec![a.lsn]);

        let pmem = SimPmem::from_image(expired, None);
        let (mut log, w) = open(&pmem).unwrap();
        assert!(w.active.is_empty());
        put(&mut log, &mut rec(2, 100));
        drop(log);
        pmem.corrupt(pages[0] * PAGE_BYTES + 100, 0x01);
        assert!(matches!(open(&pmem), Err(Error::Corruption { .. })));
    }

    /// Appends and expires records until one starts a segment in a slot used before,
    /// keeping the record before it active; returns that record, the image before the
    /// append that started the segment, and the slot.
    fn wrapped(pmem: &SimPmem) -> (UndoHandle, Vec<u8>, usize) {
        let (mut log, _) = open(pmem).unwrap();
        let mut prev: Option<UndoHandle> = None;
        for i in 0..1000 {
            let mut h = None;
            let (before, pages) = written(pmem, || h = Some(put(&mut log, &mut rec(i, 3000))));
            let h = h.unwrap();
            if let Some(p) = prev {
                let first = pages.iter().find(|&&p| p % 8 == 0);
                if let (true, Some(first)) = (h.offset > 4 && p.offset != h.offset, first) {
                    // The new segment's first page (the retire record lies past the first
                    // page of the segment before it).
                    return (p, before, first / 8);
                }
                log.expire(&[p]).unwrap();
            }
            prev = Some(h);
        }
        unreachable!("no segment reused")
    }

    #[test]
    fn a_reused_segment_torn_at_its_first_page_is_accepted_and_other_gaps_are_corruption() {
        let pmem = SimPmem::new(AREA);
        let (keep, before, slot) = wrapped(&pmem);
        let keep = vec![keep];
        // The append that reused the slot wrote a retire record in the segment before it,
        // then the new segment's first page: tear that.
        tear(&pmem, &before, slot * 8);
        let torn = pmem.current_image();
        let (mut log, w) = open(&pmem).unwrap();
        assert_eq!(w.active.iter().map(|a| a.0).collect::<Vec<_>>(), keep);
        for i in 0..4 {
            let h = put(&mut log, &mut rec(i, 3000));
            log.expire(&[h]).unwrap();
        }
        drop(log);
        let (_, w) = open(&pmem).unwrap();
        assert_eq!(w.active.iter().map(|a| a.0).collect::<Vec<_>>(), keep);
        // Without the retire record the same gap is Corruption.
        let retire_page = (0..AREA / PAGE_BYTES)
            .find(|&p| {
                p / 8 != slot
                    && before[p * PAGE_BYTES..][..PAGE_BYTES]
                        != torn[p * PAGE_BYTES..][..PAGE_BYTES]
            })
            .expect("the retire record's page");
        let mut unretired = torn.clone();
        unretired[retire_page * PAGE_BYTES..][..PAGE_BYTES]
            .copy_from_slice(&before[retire_page * PAGE_BYTES..][..PAGE_BYTES]);
        let r = open(&SimPmem::from_image(unretired, None));
        assert!(matches!(r, Err(Error::Corruption { .. })), "{r:?}");
        // A crash between the retire record and the new segment's first write: the old
        // segment is still there, retired; the log goes on into its slot, once.
        let mut retired_only = before.clone();
        retired_only[retire_page * PAGE_BYTES..][..PAGE_BYTES]
            .copy_from_slice(&torn[retire_page * PAGE_BYTES..][..PAGE_BYTES]);
        let retired = SimPmem::from_image(retired_only, None);
        let (mut log, w) = open(&retired).unwrap();
        assert_eq!(w.active.iter().map(|a| a.0).collect::<Vec<_>>(), keep);
        let h = put(&mut log, &mut rec(50, 3000));
        log.expire(&[h]).unwrap();
        drop(log);
        let (_, w) = open(&retired).unwrap();
        assert_eq!(w.active.iter().map(|a| a.0).collect::<Vec<_>>(), keep);
        assert!(open(&SimPmem::from_image(torn, None)).is_ok());
        // A segment of the chain whose first page is damaged, not retired: Corruption.
        let image = pmem.current_image();
        let newest = (0..4).max_by_key(|s| {
            log_page::claimed(&image[s * 8 * PAGE_BYTES..][..PAGE_BYTES]).map_or(0, |c| c.0)
        });
        let before_newest = (newest.unwrap() + 3) % 4;
        pmem.corrupt(before_newest * 8 * PAGE_BYTES + 40, 0x01);
        assert!(matches!(open(&pmem), Err(Error::Corruption { .. })));
    }
}
