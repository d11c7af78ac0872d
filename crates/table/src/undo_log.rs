//! The undo log: a ring of undo records (`undo.rs`) in persistent memory (`pmem.rs`), with
//! a head and a tail.
//!
//! ```text
//! persistent memory region
//!   0    64   header copy A      (one cache line each: a line is kept or lost whole)
//!  64    64   header copy B
//! 128   ...   the ring: records, 8-aligned, from the head to the tail
//! a header copy:
//!   0  4  magic b"SHPM"
//!   4  4  crc32c of bytes 8..64
//!   8 16  volume id of the store the log belongs to
//!  24  8  sequence number of this copy (u64 LE; the valid copy with the larger one holds)
//!  32  8  head: ring offset of the oldest record that may be live (u64 LE)
//!  40  8  head lsn: that record's LSN, or the next LSN when the log is empty (u64 LE)
//!  48 16  the store instance the log belongs to: the identity of its volume file
//!         (`undo_file.rs`: inode u64 LE, birth time or device u64 LE); zero for a log on
//!         a device opened directly, in the spill area, or written before the binding
//! ```
//! A record is appended at the tail, or at the ring's start when it does not fit before the
//! ring's end, or once both the tail and the head have passed the wrap mark
//! (`ReclaimPolicy::wrap_after`): the ring then cycles through its first bytes
//! and keeps the rest for bursts (long transactions, large before-images), so a log of short
//! transactions touches little of a large region (a file of persistent memory emulated on
//! tmpfs or disk allocates only what is touched). Each record is persisted before `append`
//! returns. Recovery walks from the head, taking
//! at each step the record that carries exactly the next LSN, here or at the ring's start:
//! a record of an earlier lap, or a torn one, is never that successor, so the walk ends at
//! the true tail. Records are expired in place (their state byte); expired records are
//! reclaimed from the head, in batches of `reclaim_batch` or when the ring is more than
//! `reclaim_percent` full, by writing the other header copy with the new head (so a torn
//! header write leaves the previous copy). A record that cannot find room behind the oldest
//! live one is [`Error::LogFull`]; the store then appends it to a second log of the same
//! format on the volume, the spill area (`spill.rs`), which says so in its handles
//! ([`Ring::Spill`]).

use std::collections::{HashSet, VecDeque};

use crate::error::{Error, Result};
use crate::pmem::{LINE_BYTES, PmemLog};
use crate::undo::{ACTIVE, ALIGN, Before, EXPIRED, UndoRecord};

const MAGIC: &[u8; 4] = b"SHPM";
const HEADER_COPY_BYTES: usize = LINE_BYTES;
/// Where the ring begins.
pub const RING_OFFSET: usize = 2 * HEADER_COPY_BYTES;
/// Bytes of the ring the open's search for a record past a damaged one reads at a time.
const SCAN_CHUNK_BYTES: usize = 1 << 20;

/// Which of the store's two undo logs a record is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ring {
    /// The ring in persistent memory.
    Pmem,
    /// The spill area on the volume (`spill.rs`).
    Spill,
}

/// Where a live record lies, for expiring it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UndoHandle {
    /// Its LSN (in its ring's sequence).
    pub lsn: u64,
    /// Its ring offset; in the spill area's page log (`volume_undo.rs`), the generation of
    /// the segment holding it.
    pub offset: u64,
    /// Its ring.
    pub ring: Ring,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    lsn: u64,
    offset: u64,
    /// Encoded length, padding included.
    len: u64,
    expired: bool,
}

/// Counters of the undo log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UndoStats {
    /// Records appended since the open.
    pub appended: u64,
    /// Records reclaimed since the open.
    pub reclaimed: u64,
    /// Persist calls (each a round of line write-backs and a fence).
    pub persists: u64,
    /// Bytes of the records between head and tail now (live, or expired and not yet
    /// reclaimed), padding included.
    pub ring_bytes_used: u64,
    /// Bytes of the ring.
    pub ring_bytes: u64,
}

/// The undo log.
#[derive(Debug)]
pub struct UndoLog {
    pmem: Box<dyn PmemLog>,
    kind: Ring,
    volume_id: [u8; 16],
    /// The store instance's identity, written into every header copy.
    binding: [u8; 16],
    ring: u64,
    live: VecDeque<Entry>,
    /// Bytes of the records in `live`.
    live_bytes: u64,
    /// Where the next record goes when the log is empty.
    empty_tail: u64,
    next_lsn: u64,
    header_seq: u64,
    reclaim_batch: usize,
    reclaim_percent: u64,
    wrap_after: u64,
    stats: UndoStats,
}

/// What the walk of an opened log found.
#[derive(Debug, Default)]
pub struct Walked {
    /// The active records, oldest first.
    pub active: Vec<(UndoHandle, UndoRecord)>,
    /// Transactions whose commit mark is in the log (active or expired).
    pub committed: HashSet<u64>,
    /// The largest transaction id in the log: new transactions are numbered past it, so
    /// none shares an id, and so a commit mark, with a transaction of an earlier open.
    pub max_txn: u64,
}

/// How the undo log reclaims.
#[derive(Clone, Copy, Debug)]
pub struct ReclaimPolicy {
    /// Reclaim once this many expired records lead the log.
    pub batch: usize,
    /// Reclaim when the ring is fuller than this percentage.
    pub percent: u64,
    /// Go back to the ring's start once the tail and the head are this many bytes into the
    /// ring (at the ring's end otherwise).
    pub wrap_after: u64,
}

impl Ring {
    /// Its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Ring::Pmem => "persistent memory",
            Ring::Spill => "spill area",
        }
    }
}

impl UndoLog {
    /// Opens the log in `pmem` for the store whose volume id is `volume_id`, formatting a
    /// zeroed region, and returns it with what the walk found.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a region too small or holding another store's log;
    /// [`Error::Corruption`] for damaged headers or a damaged record the walk cannot pass.
    pub fn open(
        pmem: Box<dyn PmemLog>,
        volume_id: [u8; 16],
        policy: ReclaimPolicy,
    ) -> Result<(UndoLog, Walked)> {
        UndoLog::open_ring(Ring::Pmem, pmem, volume_id, policy)
    }

    /// Opens the log in `pmem` as [`UndoLog::open`], bound to the store instance
    /// `binding` (`undo_file.rs`): a header naming another instance is rewritten to name
    /// this one, before anything else is written. The caller has decided that the log is
    /// this instance's (a copy of it made with the store, or one written before bindings).
    ///
    /// # Errors
    /// As [`UndoLog::open`].
    pub fn open_bound(
        pmem: Box<dyn PmemLog>,
        volume_id: [u8; 16],
        binding: [u8; 16],
        policy: ReclaimPolicy,
    ) -> Result<(UndoLog, Walked)> {
        UndoLog::open_inner(Ring::Pmem, pmem, volume_id, binding, policy)
    }

    /// Opens the log of `kind` in `pmem`, as [`UndoLog::open`]; its handles name `kind`.
    ///
    /// # Errors
    /// As [`UndoLog::open`].
    pub fn open_ring(
        kind: Ring,
        pmem: Box<dyn PmemLog>,
        volume_id: [u8; 16],
        policy: ReclaimPolicy,
    ) -> Result<(UndoLog, Walked)> {
        UndoLog::open_inner(kind, pmem, volume_id, [0; 16], policy)
    }

    /// Opens the log of `kind` in `pmem` bound to `binding`, as [`UndoLog::open_bound`].
    ///
    /// # Errors
    /// As [`UndoLog::open`].
    pub fn open_ring_bound(
        kind: Ring,
        pmem: Box<dyn PmemLog>,
        volume_id: [u8; 16],
        binding: [u8; 16],
        policy: ReclaimPolicy,
    ) -> Result<(UndoLog, Walked)> {
        UndoLog::open_inner(kind, pmem, volume_id, binding, policy)
    }

    fn open_inner(
        kind: Ring,
        mut pmem: Box<dyn PmemLog>,
        volume_id: [u8; 16],
        binding: [u8; 16],
        policy: ReclaimPolicy,
    ) -> Result<(UndoLog, Walked)> {
        let len = pmem.len();
        if len < RING_OFFSET + (64 << 10) || len % LINE_BYTES != 0 {
            return Err(Error::InvalidArgument(format!(
                "a persistent memory region of {len} bytes: at least {} and whole lines",
                RING_OFFSET + (64 << 10)
            )));
        }
        let ring = (len - RING_OFFSET) as u64;
        let copies = [read_header(&*pmem, 0), read_header(&*pmem, 1)];
        let best = copies.iter().flatten().max_by_key(|h| h.seq).copied();
        let mut header = match best {
            Some(h) => h,
            None => {
                let mut raw = vec![0u8; RING_OFFSET];
                pmem.read(0, &mut raw);
                if raw.iter().any(|&b| b != 0) {
                    return Err(Error::Corruption {
                        what: format!("both undo log headers of the {} are damaged", kind.name()),
                        offset: 0,
                    });
                }
                let h = Header { volume_id, binding, seq: 1, head: 0, head_lsn: 1 };
                write_header(&mut *pmem, &h)?;
                h
            }
        };
        if header.volume_id != volume_id {
            return Err(Error::InvalidArgument(
                "the persistent memory holds the undo log of another store".into(),
            ));
        }
        if header.binding != binding {
            header = Header { binding, seq: header.seq + 1, ..header };
            write_header(&mut *pmem, &header)?;
        }
        if header.head >= ring {
            return Err(Error::Corruption {
                what: format!("undo log head past the ring of the {}", kind.name()),
                offset: 0,
            });
        }
        let mut log = UndoLog {
            pmem,
            kind,
            volume_id,
            binding,
            ring,
            live: VecDeque::new(),
            live_bytes: 0,
            empty_tail: header.head,
            next_lsn: header.head_lsn,
            header_seq: header.seq,
            reclaim_batch: policy.batch.max(1),
            reclaim_percent: policy.percent.clamp(1, 100),
            wrap_after: policy.wrap_after,
            stats: UndoStats { ring_bytes: ring, ..UndoStats::default() },
        };
        let walked = log.walk(header.head)?;
        Ok((log, walked))
    }

    /// Walks the ring from `head`, filling `live`.
    fn walk(&mut self, head: u64) -> Result<Walked> {
        let mut at = head;
        let mut w = Walked::default();
        loop {
            let expected = self.next_lsn;
            let found = match self.record_at(at, expected)? {
                Some(r) => Some((at, r)),
                None if at != 0 => self.record_at(0, expected)?.map(|r| (0, r)),
                None => None,
            };
            let Some((offset, (rec, state, len))) = found else {
                self.check_no_successor(at, expected)?;
                break;
            };
            let padded = (len as u64).next_multiple_of(ALIGN as u64);
            self.live.push_back(Entry {
                lsn: rec.lsn,
                offset,
                len: padded,
                expired: state == EXPIRED,
            });
            self.live_bytes += padded;
            if rec.before == Before::Commit {
                w.committed.insert(rec.txn);
            }
            w.max_txn = w.max_txn.max(rec.txn);
            if state == ACTIVE {
                w.active.push((UndoHandle { lsn: rec.lsn, offset, ring: self.kind }, rec));
            }
            self.next_lsn += 1;
            at = offset + padded;
            if at >= self.ring {
                at = 0;
            }
            if self.live.len() as u64 > self.ring / ALIGN as u64 {
                return Err(Error::Corruption {
                    what: format!("the {} undo log's records run in a circle", self.kind.name()),
                    offset: RING_OFFSET as u64 + at,
                });
            }
        }
        self.empty_tail = at;
        Ok(w)
    }

    /// The record at ring offset `at` if it is a valid record with LSN `lsn`, with its state
    /// and length. A record of another LSN, or bytes that are no record, give `None`.
    fn record_at(&self, at: u64, lsn: u64) -> Result<Option<(UndoRecord, u8, usize)>> {
        let Some(bytes) = self.read_record_bytes(at) else { return Ok(None) };
        match UndoRecord::decode(&bytes) {
            Ok((rec, state)) if rec.lsn == lsn => Ok(Some((rec, state, bytes.len()))),
            // Another lap's record, a torn one, or damage: `check_no_successor` tells.
            Ok(_) | Err(_) => Ok(None),
        }
    }

    /// The bytes of the record that may begin at `at`, as long as its header says, or
    /// `None` when no record can begin there.
    fn read_record_bytes(&self, at: u64) -> Option<Vec<u8>> {
        let start = RING_OFFSET + at as usize;
        if at + crate::undo::HEADER_BYTES as u64 > self.ring {
            return None;
        }
        let mut head = [0u8; 16];
        self.pmem.read(start, &mut head);
        let len = UndoRecord::peek_len(&head)?;
        if len < crate::undo::HEADER_BYTES || at + len as u64 > self.ring {
            return None;
        }
        let mut b = vec![0u8; len];
        self.pmem.read(start, &mut b);
        Some(b)
    }

    /// At the end of the walk: a valid record with an LSN at or past the one the walk
    /// wanted means the walk stopped at a damaged record in the middle of the log (its
    /// successors were appended only once it was persisted), which is Corruption, not a
    /// torn tail. Every written part of the ring is searched (`PmemLog::written_ranges`),
    /// so damage to any byte of the record, its length and magic included, is found. (A
    /// damaged *last* record looks exactly like a torn append and is taken for one.)
    fn check_no_successor(&self, at: u64, expected: u64) -> Result<()> {
        let ring = self.ring as usize;
        let mut buf = Vec::new();
        // Only what the region says may be written: a record's header is never in a hole,
        // and reading a hole of a file mapping on tmpfs would allocate its pages.
        for range in self.pmem.written_ranges() {
            let end = range.end.min(RING_OFFSET + ring).saturating_sub(RING_OFFSET);
            let mut o = range.start.max(RING_OFFSET) - RING_OFFSET;
            o = o.next_multiple_of(ALIGN);
            while o < end && o + crate::undo::HEADER_BYTES <= ring {
                // A chunk of record starts, and the 16 bytes past it a length is read from.
                let base = o;
                let chunk_end = (base + SCAN_CHUNK_BYTES).min(end);
                buf.resize((chunk_end + 16).min(end) - base, 0);
                self.pmem.read(RING_OFFSET + base, &mut buf);
                while o < chunk_end && o + crate::undo::HEADER_BYTES <= ring {
                    if UndoRecord::peek_len(&buf[o - base..]).is_some() {
                        let record = self.read_record_bytes(o as u64);
                        if let Some(Ok((r, _))) = record.map(|b| UndoRecord::decode(&b)) {
                            if r.lsn >= expected {
                                return Err(Error::Corruption {
                                    what: format!(
                                        "{} undo record {expected} is damaged: record {} follows it",
                                        self.kind.name(),
                                        r.lsn
                                    ),
                                    offset: RING_OFFSET as u64 + at,
                                });
                            }
                        }
                    }
                    o += ALIGN;
                }
            }
        }
        Ok(())
    }

    /// Appends `rec` (its `lsn` is set here) and persists it before returning.
    ///
    /// # Errors
    /// [`Error::LogFull`] when no room can be found behind the oldest live record, even
    /// after reclaiming; the persistence error of the region.
    pub fn append(&mut self, rec: &mut UndoRecord) -> Result<UndoHandle> {
        rec.lsn = self.next_lsn;
        let len = rec.encoded_len() as u64;
        let offset = match self.place(len) {
            Some(o) => o,
            None => {
                self.reclaim()?;
                self.place(len).ok_or(Error::LogFull { needed: len, capacity: self.ring })?
            }
        };
        let bytes = rec.encode();
        let at = RING_OFFSET + offset as usize;
        self.pmem.write(at, &bytes);
        self.persist(at, bytes.len())?;
        self.live.push_back(Entry { lsn: rec.lsn, offset, len, expired: false });
        self.live_bytes += len;
        self.next_lsn += 1;
        self.stats.appended += 1;
        Ok(UndoHandle { lsn: rec.lsn, offset, ring: self.kind })
    }

    /// Where a record of `len` bytes fits, if anywhere: at the tail, or at the ring's start
    /// when the tail is past the wrap mark and so is the head, or the record does not fit
    /// before the ring's end. The head past the mark too means the log is short, and leaves
    /// a record that goes back early at least the mark's bytes before it meets the head: a
    /// long transaction begun just before the mark runs on to the ring's end instead, and
    /// one begun after an early wrap has that much before it spills.
    ///
    /// Going back to the start early needs nothing of recovery: its walk already looks for
    /// each next LSN at the ring's start when it is not where the previous record ended,
    /// and the records of earlier laps the early wrap leaves behind carry smaller LSNs.
    fn place(&self, len: u64) -> Option<u64> {
        let (Some(front), Some(back)) = (self.live.front(), self.live.back()) else {
            let t = self.empty_tail;
            return if t + len <= self.ring && t < self.wrap_after {
                Some(t)
            } else {
                (len <= self.ring).then_some(0)
            };
        };
        let head = front.offset;
        let tail = back.offset + back.len;
        if back.offset >= head {
            if tail >= self.wrap_after && head >= self.wrap_after && len <= head {
                Some(0)
            } else if tail + len <= self.ring {
                Some(tail)
            } else {
                (len <= head).then_some(0)
            }
        } else {
            (tail + len <= head).then_some(tail)
        }
    }

    /// Marks records expired, persistently, then reclaims if a batch is ready.
    ///
    /// # Panics
    /// If a handle names no live record (a bug).
    ///
    /// # Errors
    /// The persistence error of the region.
    pub fn expire(&mut self, handles: &[UndoHandle]) -> Result<()> {
        for h in handles {
            assert_eq!(h.ring, self.kind, "a handle of the other ring");
            let e = self
                .live
                .iter_mut()
                .find(|e| e.lsn == h.lsn)
                .expect("an undo handle names a live record");
            assert_eq!(e.offset, h.offset);
            e.expired = true;
            let at = RING_OFFSET + h.offset as usize + 4;
            self.pmem.write(at, &[EXPIRED]);
        }
        // One round of write-backs and one fence for the lot: each state byte is a store
        // of its own, and the commit waits for all of them together.
        if let (Some(lo), Some(hi)) =
            (handles.iter().map(|h| h.offset).min(), handles.iter().map(|h| h.offset).max())
        {
            let span = (hi - lo) as usize + 5;
            if span <= 64 * LINE_BYTES {
                self.persist(RING_OFFSET + lo as usize + 4, span - 4)?;
            } else {
                for h in handles {
                    self.persist(RING_OFFSET + h.offset as usize + 4, 1)?;
                }
            }
        }
        let leading = self.live.iter().take_while(|e| e.expired).count();
        if leading >= self.reclaim_batch || self.live_bytes * 100 > self.ring * self.reclaim_percent
        {
            self.reclaim()?;
        }
        Ok(())
    }

    /// Advances the head past the expired records that lead the log, persistently.
    ///
    /// # Errors
    /// The persistence error of the region.
    pub fn reclaim(&mut self) -> Result<()> {
        let leading = self.live.iter().take_while(|e| e.expired).count();
        if leading == 0 {
            return Ok(());
        }
        let last = self.live[leading - 1];
        let (head, head_lsn) = match self.live.get(leading) {
            Some(e) => (e.offset, e.lsn),
            None => {
                let mut t = last.offset + last.len;
                if t >= self.ring {
                    t = 0;
                }
                (t, self.next_lsn)
            }
        };
        self.header_seq += 1;
        let h = Header {
            volume_id: self.volume_id,
            binding: self.binding,
            seq: self.header_seq,
            head,
            head_lsn,
        };
        write_header(&mut *self.pmem, &h)?;
        self.stats.persists += 1;
        self.live_bytes -= self.live.drain(..leading).map(|e| e.len).sum::<u64>();
        if self.live.is_empty() {
            self.empty_tail = head;
        }
        self.stats.reclaimed += leading as u64;
        Ok(())
    }

    fn persist(&mut self, at: usize, len: usize) -> Result<()> {
        self.stats.persists += 1;
        self.pmem.persist(at, len)
    }

    /// Counters now.
    pub fn stats(&self) -> UndoStats {
        UndoStats { ring_bytes_used: self.live_bytes, ..self.stats }
    }
}

#[derive(Clone, Copy, Debug)]
struct Header {
    volume_id: [u8; 16],
    binding: [u8; 16],
    seq: u64,
    head: u64,
    head_lsn: u64,
}

/// Whose log a region's headers (its first [`RING_OFFSET`] bytes) say it is: the volume id
/// and the store instance binding of the newest valid copy; `None` when neither copy is
/// valid (a blank region, or both damaged).
pub(crate) fn owner_of(headers: &[u8]) -> Option<([u8; 16], [u8; 16])> {
    let copies = [0, 1].map(|c| {
        decode_header(headers[c * HEADER_COPY_BYTES..(c + 1) * HEADER_COPY_BYTES].try_into().ok()?)
    });
    let best = copies.iter().flatten().max_by_key(|h| h.seq)?;
    Some((best.volume_id, best.binding))
}

fn read_header(pmem: &dyn PmemLog, copy: usize) -> Option<Header> {
    let mut b = [0u8; HEADER_COPY_BYTES];
    pmem.read(copy * HEADER_COPY_BYTES, &mut b);
    decode_header(&b)
}

fn decode_header(b: &[u8; HEADER_COPY_BYTES]) -> Option<Header> {
    let crc = u32::from_le_bytes(b[4..8].try_into().unwrap());
    if &b[..4] != MAGIC || crc != crc32c::crc32c(&b[8..]) {
        return None;
    }
    let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    Some(Header {
        volume_id: b[8..24].try_into().unwrap(),
        binding: b[48..64].try_into().unwrap(),
        seq: u64_at(24),
        head: u64_at(32),
        head_lsn: u64_at(40),
    })
}

/// Writes the header copy its sequence number picks (odd A, even B), persisted.
fn write_header(pmem: &mut dyn PmemLog, h: &Header) -> Result<()> {
    let mut b = [0u8; HEADER_COPY_BYTES];
    b[..4].copy_from_slice(MAGIC);
    b[8..24].copy_from_slice(&h.volume_id);
    b[24..32].copy_from_slice(&h.seq.to_le_bytes());
    b[32..40].copy_from_slice(&h.head.to_le_bytes());
    b[40..48].copy_from_slice(&h.head_lsn.to_le_bytes());
    b[48..64].copy_from_slice(&h.binding);
    let crc = crc32c::crc32c(&b[8..]);
    b[4..8].copy_from_slice(&crc.to_le_bytes());
    let at = (1 - (h.seq % 2) as usize) * HEADER_COPY_BYTES;
    pmem.write(at, &b);
    pmem.persist(at, HEADER_COPY_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmem::SimPmem;

    const ID: [u8; 16] = [7; 16];
    const POLICY: ReclaimPolicy = ReclaimPolicy { batch: 4, percent: 60, wrap_after: u64::MAX };

    use crate::undo::test_record as rec;

    #[test]
    fn active_records_survive_reopen_and_expired_ones_do_not() {
        let pmem = SimPmem::new(RING_OFFSET + (64 << 10));
        let (mut log, w) = UndoLog::open(pmem.boxed(), ID, POLICY).unwrap();
        assert!(w.active.is_empty());
        let a = log.append(&mut rec(1, 100)).unwrap();
        let b = log.append(&mut rec(2, 3000)).unwrap();
        log.expire(&[a]).unwrap();
        drop(log);
        let (_, w) = UndoLog::open(pmem.boxed(), ID, POLICY).unwrap();
        let active = w.active;
        assert_eq!(w.max_txn, 2);
        assert_eq!(active.len(), 1);
        assert_eq!(active[0].0, b);
        assert_eq!(active[0].1.txn, 2);
        assert!(matches!(
            UndoLog::open(pmem.boxed(), [8; 16], POLICY),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn the_headers_name_the_store_instance_and_a_new_one_rebinds_them() {
        let pmem = SimPmem::new(RING_OFFSET + (64 << 10));
        let (mut log, _) = UndoLog::open_bound(pmem.boxed(), ID, [1; 16], POLICY).unwrap();
        let a = log.append(&mut rec(1, 100)).unwrap();
        drop(log);
        let headers = pmem.current_image()[..RING_OFFSET].to_vec();
        assert_eq!(owner_of(&headers), Some((ID, [1; 16])));
        // Another instance's open rebinds the headers and still finds the record.
        let (_, w) = UndoLog::open_bound(pmem.boxed(), ID, [2; 16], POLICY).unwrap();
        assert_eq!(w.active[0].0, a);
        assert_eq!(owner_of(&pmem.current_image()[..RING_OFFSET]), Some((ID, [2; 16])));
        assert_eq!(owner_of(&[0; RING_OFFSET]), None);
    }

    /// What [`cycle`] leaves: the log, its active records, the laps of the ring it made and
    /// the furthest ring offset a record reached.
    struct Cycled {
        log: UndoLog,
        open: Vec<UndoHandle>,
        wraps: usize,
        end: usize,
    }

    /// Appends 2,000 records of 700 to 2,700 bytes, keeping the newest three active and
    /// expiring the others, and reopens after every 97th: each reopen must find exactly the
    /// active ones.
    fn cycle(pmem: &SimPmem, policy: ReclaimPolicy) -> Cycled {
        let (mut log, _) = UndoLog::open(pmem.boxed(), ID, policy).unwrap();
        let mut open = Vec::new();
        let (mut wraps, mut last, mut end) = (0, 0, 0);
        for i in 0..2000u64 {
            let mut r = rec(i, 700 + (i as usize * 37) % 2000);
            let h = log.append(&mut r).unwrap();
            wraps += usize::from(h.offset < last);
            last = h.offset;
            end = end.max(h.offset as usize + r.encoded_len());
            open.push(h);
            if open.len() > 3 {
                let h = open.remove(0);
                log.expire(&[h]).unwrap();
            }
            if i % 97 == 0 {
                drop(log);
                let (l, w) = UndoLog::open(pmem.boxed(), ID, policy).unwrap();
                log = l;
                assert_eq!(w.active.iter().map(|a| a.0).collect::<Vec<_>>(), open, "at {i}");
            }
        }
        Cycled { log, open, wraps, end }
    }

    #[test]
    fn the_ring_wraps_many_times_and_a_full_log_is_an_error() {
        let pmem = SimPmem::new(RING_OFFSET + (64 << 10));
        let Cycled { mut log, wraps, .. } = cycle(&pmem, POLICY);
        assert!(wraps > 20, "{wraps} laps of the ring");
        assert!(log.stats().reclaimed > 0);
        // Nothing expires: the ring fills and says so.
        let full = (0..100).map(|i| log.append(&mut rec(i, 4000))).find_map(|r| r.err());
        assert!(matches!(full, Some(Error::LogFull { .. })), "{full:?}");
    }

    #[test]
    fn a_damaged_record_before_a_valid_one_is_corruption() {
        let pmem = SimPmem::new(RING_OFFSET + (64 << 10));
        let (mut log, _) = UndoLog::open(pmem.boxed(), ID, POLICY).unwrap();
        let a = log.append(&mut rec(1, 100)).unwrap();
        log.append(&mut rec(2, 100)).unwrap();
        drop(log);
        pmem.corrupt(RING_OFFSET + a.offset as usize + 70, 0x04);
        assert!(matches!(UndoLog::open(pmem.boxed(), ID, POLICY), Err(Error::Corruption { .. })));
    }

    #[test]
    fn past_the_wrap_mark_the_ring_goes_back_to_its_start() {
        let policy = ReclaimPolicy { wrap_after: 8 << 10, ..POLICY };
        let pmem = SimPmem::new(RING_OFFSET + (64 << 10));
        let Cycled { mut log, open, wraps, end } = cycle(&pmem, policy);
        // Past the 8 KiB mark the tail goes on only until the head passes it too: at most the
        // log's span (three active records and up to four expired ones awaiting their
        // reclaim, at most 2.8 KiB each) and a record beyond it.
        assert!(end <= 32 << 10, "records reached ring offset {end}");
        assert!(wraps > 100, "{wraps} laps of the ring");
        let written = pmem.written_ranges();
        assert!(written.last().unwrap().end <= RING_OFFSET + (36 << 10), "{written:?}");
        // A burst of live records (a long transaction) begun with the log empty has the
        // whole ring, its end included.
        log.expire(&open).unwrap();
        log.reclaim().unwrap();
        let burst: Vec<_> =
            (0..15).map(|i| log.append(&mut rec(5000 + i, 2500)).unwrap()).collect();
        assert!(burst.iter().any(|h| h.offset > 32 << 10), "{burst:?}");
        drop(log);
        let (_, w) = UndoLog::open(pmem.boxed(), ID, policy).unwrap();
        assert_eq!(w.active.iter().map(|a| a.0).collect::<Vec<_>>(), burst);
    }

    #[test]
    fn damage_is_found_past_a_search_chunk_and_past_holes() {
        // Records well past the first chunk the open's search reads, and a ring whose
        // written pages are few: a damaged first record is still Corruption.
        let pmem = SimPmem::new(RING_OFFSET + (3 << 20));
        let (mut log, _) = UndoLog::open(pmem.boxed(), ID, POLICY).unwrap();
        let first = log.append(&mut rec(1, 100)).unwrap();
        let mut last = first;
        for i in 2..450 {
            last = log.append(&mut rec(i, 4000)).unwrap();
        }
        assert!(last.offset > SCAN_CHUNK_BYTES as u64, "{}", last.offset);
        drop(log);
        assert!(UndoLog::open(pmem.boxed(), ID, POLICY).is_ok());
        pmem.corrupt(RING_OFFSET + first.offset as usize + 70, 0x04);
        assert!(matches!(UndoLog::open(pmem.boxed(), ID, POLICY), Err(Error::Corruption { .. })));

        // A log of two records far apart, with holes between: only the second's damage
        // makes it a torn tail, the first's is Corruption.
        let pmem = SimPmem::new(RING_OFFSET + (3 << 20));
        let (mut log, _) = UndoLog::open(pmem.boxed(), ID, POLICY).unwrap();
        let a = log.append(&mut rec(1, 100)).unwrap();
        let filler: Vec<_> = (2..400).map(|i| log.append(&mut rec(i, 4000)).unwrap()).collect();
        log.expire(&filler).unwrap();
        drop(log);
        // Zero the filler records: the ring has holes between the first record and the last.
        let gap_start = RING_OFFSET + filler[0].offset as usize;
        let gap_end = RING_OFFSET + filler[filler.len() - 2].offset as usize;
        pmem.zero(gap_start.next_multiple_of(4096), gap_end - gap_start.next_multiple_of(4096));
        assert!(pmem.written_ranges().len() >= 2, "{:?}", pmem.written_ranges());
        pmem.corrupt(RING_OFFSET + a.offset as usize + 70, 0x04);
        assert!(matches!(UndoLog::open(pmem.boxed(), ID, POLICY), Err(Error::Corruption { .. })));
    }
}
