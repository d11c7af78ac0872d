//! The version log: a ring of self-describing objects, written twice (mirrors A and B).
//!
//! ```text
//! mirror (A, and B identical):
//! | WOL (1 sector) | ring: base(sn) delta delta ... delta | base(sn+1) delta ... | WOR | free |
//!   anchor: points   ^ live_start: the newest base          objects appended at head; a WOR
//!   at the newest                                           says "continue at ring start"
//!   base
//! ```
//!
//! Ordering invariants of an append:
//! 1. Objects are appended one at a time at `head`; an append returns only when the object is
//!    durable in both mirrors, so at most the last object of the chain can be torn.
//! 2. Every ring object carries `lsn` = previous + 1. Recovery accepts exactly that successor,
//!    from mirror A or else mirror B, so a stale object left by an earlier lap, a torn write or a
//!    flipped bit in one copy is never taken for the next one.
//! 3. A base is followed by rewriting the WOL anchor, A then B, each durable before the next:
//!    a crash leaves at least one anchor valid, pointing at the old base (whose chain runs on
//!    into the new base) or the new one.
//! 4. The ring space before the newest base is reused only after both anchors point at it.
//!
//! Storage. The mirrors take disk space only where the live chain is, as the WAL area does
//! (a volume file leaves both mirrors a hole at creation): ring bytes get storage in chunks (of
//! [`STORAGE_CHUNK_BYTES`] in a ring of 1 MiB or more) before the first object written into
//! them, and one chunk ahead of head
//! ([`shale_io::Device::allocate_range`]; a commit calls [`VersionLog::hold_room`] first, so a
//! full file system refuses the commit before anything is written), and after a trim every
//! chunk that holds no byte of the new live chain is given back in both mirrors
//! ([`shale_io::Device::release_range`]). A released chunk reads as zeros or, on a block
//! device, as its old objects: neither is ever taken for the successor of the live chain
//! (invariant 2), and a crash that undoes a release brings back only objects of earlier laps.
//! Nothing is given back while an anchor names an older base than the newest (after a
//! recovery that found one anchor torn by a crash between the two anchor writes, or a chain
//! that ran on past the base its anchors name): that base is still where recovery would
//! start, so its ring stays until the next trim rewrites both anchors (invariant 4). After a
//! reopen, what an earlier writer left allocated is not known: every chunk counts as held
//! until [`VersionLog::release_dead`] runs (the volume calls it once the engine's recovery is
//! done).
//!
//! Recovery reads the anchor, walks the chain from its base and returns the newest base with
//! the deltas that follow it. Only a missing successor ends the walk; if a valid object with a
//! later lsn exists anywhere in the ring, the chain was broken by damage, not by a torn tail,
//! and recovery reports Corruption instead of silently dropping committed versions (P4).

use std::ops::Range;

use shale_io::{AlignedBuf, Completion, DeviceRef, Op, Queue, QueueExt, Request};

use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::log_object::{LogObject, ObjectKind};
use crate::version_record::{BaseRecord, DeltaRecord};

/// Number of mirrors of the version log.
const MIRRORS: usize = 2;

/// Most ring bytes given storage, or given back, at once: one allocation per 64 KiB of
/// commits (a few hundred deltas) costs nothing measurable, and a store holds at most one
/// chunk past its live chain. Smaller rings use chunks of a sixteenth of the ring (at least a
/// sector), so that the small layouts of the tests give storage back too.
pub const STORAGE_CHUNK_BYTES: u64 = 64 << 10;

/// The chunk size of a ring: a whole number of sectors, so every chunk's bounds are aligned
/// on the device.
fn chunk_bytes(ring_bytes: u64, sector: u64) -> u64 {
    (ring_bytes / 16 / sector * sector).clamp(sector, STORAGE_CHUNK_BYTES.max(sector))
}

/// What recovery found, for the engine and for `shale inspect`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogState {
    /// SN of the newest base.
    pub base_sn: u64,
    /// LSN of the newest base.
    pub base_lsn: u64,
    /// Ring offset of the newest base.
    pub base_pos: u64,
    /// Deltas committed on top of the newest base.
    pub deltas: u64,
    /// Ring offset where the next object goes.
    pub head: u64,
    /// LSN the next object gets.
    pub next_lsn: u64,
    /// Bytes of the ring held by the live chain (newest base to head, wrap waste included).
    pub used_bytes: u64,
    /// Size of the ring in each mirror.
    pub ring_bytes: u64,
    /// WOR objects passed while walking the live chain.
    pub wraps: u64,
    /// Objects read from mirror B because mirror A's copy was invalid.
    pub repaired: u64,
    /// WOR objects written since the volume was opened.
    pub wraps_since_open: u64,
    /// Bases written (trims) since the volume was opened.
    pub trims_since_open: u64,
}

/// The versions recovery hands to the volume: the newest base and the deltas after it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Versions {
    /// The newest base.
    pub base: BaseRecord,
    /// Deltas committed since, oldest first.
    pub deltas: Vec<DeltaRecord>,
}

/// The live version log of an open volume.
pub(crate) struct VersionLog {
    layout: Layout,
    sector: u64,
    state: LogState,
    queue: Box<dyn Queue>,
    /// Where storage is given and taken back (the queue only reads and writes).
    device: DeviceRef,
    /// Bytes of a chunk of the ring ([`chunk_bytes`]).
    chunk: u64,
    /// Per chunk of the ring (the same in both mirrors): whether it may hold storage.
    held: Vec<bool>,
    /// Whether the anchor sectors may hold storage.
    anchors_held: bool,
    /// Whether both anchors name the newest base, so that nothing before it is ever read
    /// again (invariant 4) and its ring may be given back. Not so after a recovery that found
    /// one anchor torn or older (a crash between the two anchor writes, or a walk that passed
    /// a newer base than the anchors name), until the next trim rewrites both.
    anchors_current: bool,
    /// Copies found damaged by recovery, with the good copy's bytes to write over them: what
    /// [`VersionLog::repair`] writes on a read-write open, and what `shale check` reports.
    damaged: Vec<Repair>,
}

/// One damaged copy of a mirrored sector run (an anchor, or an object of the live chain)
/// whose other copy is valid.
#[derive(Clone, Debug)]
pub(crate) struct Repair {
    /// What the copy is, for reports: "version log mirror A anchor", ...
    pub(crate) what: String,
    /// Device offset of the damaged copy.
    pub(crate) offset: u64,
    /// The valid copy's bytes, a whole number of sectors.
    pub(crate) good: Vec<u8>,
}

/// A mirror's name in reports.
fn mirror_name(m: usize) -> &'static str {
    if m == 0 { "A" } else { "B" }
}

impl VersionLog {
    fn ring_bytes(layout: &Layout) -> u64 {
        layout.version_log_bytes - u64::from(layout.sector_bytes)
    }

    /// Device offset of ring position `pos` in mirror `m`.
    fn device_offset(&self, m: usize, pos: u64) -> u64 {
        self.layout.mirror_offset(m) + self.sector + pos
    }

    /// Writes the first base and both anchors of a new volume. The mirrors may be a hole
    /// (a new volume file): storage is given to what is written.
    pub(crate) fn create(
        layout: Layout,
        queue: Box<dyn Queue>,
        device: DeviceRef,
        base: &BaseRecord,
    ) -> Result<VersionLog> {
        let ring_bytes = Self::ring_bytes(&layout);
        let state = LogState { base_sn: 0, next_lsn: 1, ring_bytes, ..LogState::default() };
        let mut log = VersionLog::assemble(layout, state, queue, device, false, false);
        log.append_base(base)?;
        Ok(log)
    }

    /// A log over `state`, every chunk and the anchors `held` or not, the anchors naming the
    /// newest base (`anchors_current`) or not.
    fn assemble(
        layout: Layout,
        state: LogState,
        queue: Box<dyn Queue>,
        device: DeviceRef,
        held: bool,
        anchors_current: bool,
    ) -> VersionLog {
        let sector = u64::from(layout.sector_bytes);
        let chunk = chunk_bytes(state.ring_bytes, sector);
        let chunks = state.ring_bytes.div_ceil(chunk) as usize;
        VersionLog {
            sector,
            layout,
            state,
            queue,
            device,
            chunk,
            held: vec![held; chunks],
            anchors_held: held,
            anchors_current,
            damaged: Vec::new(),
        }
    }

    /// Recovers the log of an existing volume. Every chunk counts as held (see the module
    /// comment) until [`VersionLog::release_dead`].
    pub(crate) fn recover(
        layout: Layout,
        mut queue: Box<dyn Queue>,
        device: DeviceRef,
    ) -> Result<(VersionLog, Versions)> {
        let mirrors: Vec<AlignedBuf> = (0..MIRRORS)
            .map(|m| queue.read_at(layout.mirror_offset(m), layout.version_log_bytes as usize))
            .collect::<shale_io::Result<_>>()?;
        let scan = Scan { layout: &layout, mirrors: &mirrors };
        let (state, versions, chain) = scan.recover()?;
        let anchors_current = scan.anchors_name(&state);
        let damaged = scan.damaged_copies(&chain);
        let mut log = VersionLog::assemble(layout, state, queue, device, true, anchors_current);
        log.damaged = damaged;
        Ok((log, versions))
    }

    /// The damaged copies recovery found (each with a valid copy in the other mirror).
    pub(crate) fn damaged(&self) -> &[Repair] {
        &self.damaged
    }

    /// Rewrites every damaged copy recovery found from its valid copy, each durable before
    /// the next. Only copies of the anchors and of the live chain are rewritten, with the
    /// bytes recovery read from the other mirror, so a crash during a repair leaves that copy
    /// torn (found and repaired again next time) and the valid one untouched.
    ///
    /// # Errors
    /// The device's error for a write; the copies not yet rewritten stay damaged.
    pub(crate) fn repair(&mut self) -> Result<usize> {
        let mut repaired = 0;
        for r in std::mem::take(&mut self.damaged) {
            let buf = AlignedBuf::padded_copy(&r.good, self.sector as usize);
            self.queue.write_at(r.offset, buf, true)?;
            log::warn!("repaired {} at byte offset {} from the other mirror", r.what, r.offset);
            repaired += 1;
        }
        Ok(repaired)
    }

    /// Ring bytes of chunk `c`.
    fn chunk_range(&self, c: usize) -> Range<u64> {
        let start = c as u64 * self.chunk;
        start..(start + self.chunk).min(self.state.ring_bytes)
    }

    /// Bytes of each mirror's ring that may hold storage: the chunks held.
    pub(crate) fn held_bytes(&self) -> u64 {
        (0..self.held.len())
            .filter(|&c| self.held[c])
            .map(|c| self.chunk_range(c))
            .map(|r| r.end - r.start)
            .sum()
    }

    /// Gives storage, in both mirrors, to every chunk that ring bytes `[pos, pos + len)` touch
    /// and to the chunk after them (the ring's first after its last), so that one chunk past
    /// head always has storage: a store reopened on a full file system can still commit
    /// (its open commits before it gives anything back).
    fn hold(&mut self, pos: u64, len: u64) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let n = self.held.len();
        let first = (pos / self.chunk) as usize;
        let last = (((pos + len - 1) / self.chunk) as usize).min(n - 1);
        for c in (first..=last).chain([(last + 1) % n]) {
            if self.held[c] {
                continue;
            }
            let r = self.chunk_range(c);
            for m in 0..MIRRORS {
                self.device.allocate_range(self.device_offset(m, r.start), r.end - r.start)?;
            }
            self.held[c] = true;
        }
        Ok(())
    }

    /// Gives storage to the ring bytes the next append of an object with this payload would
    /// write (a WOR at head and the object at the ring's start, if it must wrap), so that a
    /// full file system refuses the commit before anything of it is written.
    ///
    /// # Errors
    /// [`Error::NoSpace`] when the file system has no room; the device's other errors.
    pub(crate) fn hold_room(&mut self, payload_len: usize) -> Result<()> {
        let len = self.object_len(payload_len);
        let (head, ring) = (self.state.head, self.state.ring_bytes);
        if head + len > ring {
            if head < ring {
                self.hold(head, self.sector)?;
            }
            self.hold(0, len)
        } else {
            self.hold(head, len)
        }
    }

    /// Gives back, in both mirrors, the storage of every held chunk that holds no byte of the
    /// live chain (the newest base to head). Call it only once both anchors point at the
    /// newest base (invariant 4): the chunks before it are then never read again.
    ///
    /// # Errors
    /// The device's error for a release; the chunk stays counted as held.
    pub(crate) fn release_dead(&mut self) -> Result<()> {
        if !self.anchors_current {
            return Ok(());
        }
        let (base, head, ring) = (self.state.base_pos, self.state.head, self.state.ring_bytes);
        // The chain runs from the base to head, past the ring's end when head is not after
        // the base (a chain never fills the ring, so head == base means it wrapped).
        let live: [Range<u64>; 2] =
            if head > base { [base..head, 0..0] } else { [base..ring, 0..head] };
        // The chunk head is in and the one after it stay too (see `hold`).
        let n = self.held.len();
        let at_head = ((head / self.chunk) as usize).min(n - 1);
        let ahead = [at_head, (at_head + 1) % n];
        for c in 0..n {
            let r = self.chunk_range(c);
            let in_chain = live.iter().any(|l| l.start < r.end && r.start < l.end);
            if !self.held[c] || in_chain || ahead.contains(&c) {
                continue;
            }
            for m in 0..MIRRORS {
                self.device.release_range(self.device_offset(m, r.start), r.end - r.start)?;
            }
            self.held[c] = false;
        }
        Ok(())
    }

    /// Current state.
    pub(crate) fn state(&self) -> &LogState {
        &self.state
    }

    /// Bytes an object with this payload occupies.
    fn object_len(&self, payload_len: usize) -> u64 {
        LogObject::encoded_len(payload_len, self.sector as usize) as u64
    }

    /// Ring bytes an append of `len` bytes at head would consume, wrap waste included.
    fn append_cost(&self, len: u64) -> u64 {
        let s = &self.state;
        if s.head + len > s.ring_bytes { s.ring_bytes - s.head + len } else { len }
    }

    /// Whether a delta of this payload size may be appended without trimming: the live chain
    /// stays within half the ring, so a base of up to half the ring always fits after it.
    pub(crate) fn delta_fits(&self, payload_len: usize) -> bool {
        let cost = self.append_cost(self.object_len(payload_len));
        self.state.used_bytes + cost <= self.state.ring_bytes / 2
    }

    /// Appends a delta.
    pub(crate) fn append_delta(&mut self, delta: &DeltaRecord) -> Result<()> {
        let payload = delta.encode();
        debug_assert!(self.delta_fits(payload.len()));
        let sn = self.state.base_sn;
        self.append(ObjectKind::Delta, sn, payload)?;
        self.state.deltas += 1;
        Ok(())
    }

    /// Checks that a base with this payload size can be appended.
    ///
    /// Bases are capped at a quarter of the ring: the chain before a trim holds at most half
    /// of it (see `delta_fits`), and a base costs at most twice its length (wrap waste is
    /// shorter than the object), so a base within the cap always finds room.
    pub(crate) fn check_base_fits(&self, payload_len: usize) -> Result<()> {
        let len = self.object_len(payload_len);
        let free = self.state.ring_bytes - self.state.used_bytes;
        if self.append_cost(len) > free || len > self.state.ring_bytes / 4 {
            return Err(Error::NoSpace(format!(
                "version log mirror of {} bytes is too small for a base version of {len} bytes \
                 (it must hold four); create the volume with a larger version log",
                self.layout.version_log_bytes
            )));
        }
        Ok(())
    }

    /// Appends a base (a trim) and moves the anchors to it.
    pub(crate) fn append_base(&mut self, base: &BaseRecord) -> Result<()> {
        let payload = base.encode();
        let len = self.object_len(payload.len());
        self.check_base_fits(payload.len())?;
        let sn = self.state.base_sn + 1;
        let pos = self.append(ObjectKind::Base, sn, payload)?;
        let lsn = self.state.next_lsn - 1;
        self.write_anchors(pos, lsn, sn)?;
        let s = &mut self.state;
        s.base_sn = sn;
        s.base_lsn = lsn;
        s.base_pos = pos;
        s.deltas = 0;
        s.used_bytes = len;
        s.wraps = 0;
        s.trims_since_open += 1;
        Ok(())
    }

    /// Appends one object at head (after a WOR if it does not fit before the ring's end) and
    /// returns its ring position.
    fn append(&mut self, kind: ObjectKind, sn: u64, payload: Vec<u8>) -> Result<u64> {
        let len = self.object_len(payload.len());
        if self.state.head + len > self.state.ring_bytes {
            if self.state.head < self.state.ring_bytes {
                let waste = self.state.ring_bytes - self.state.head;
                self.write_object(ObjectKind::WrapRight, sn, Vec::new())?;
                self.state.used_bytes += waste - self.sector;
                self.state.wraps_since_open += 1;
            }
            self.state.head = 0;
            self.state.wraps += 1;
        }
        self.write_object(kind, sn, payload)
    }

    /// Writes one object at head in both mirrors, durably, and advances head.
    fn write_object(&mut self, kind: ObjectKind, sn: u64, payload: Vec<u8>) -> Result<u64> {
        let object = LogObject { kind, lsn: self.state.next_lsn, sn, payload };
        let bytes = object.encode(self.sector as usize);
        let pos = self.state.head;
        self.hold(pos, bytes.len() as u64)?;
        let offsets = [self.device_offset(0, pos), self.device_offset(1, pos)];
        self.write_mirrored(&bytes, offsets)?;
        // An object that ends exactly at the ring's end wraps without a WOR.
        self.state.head = (pos + bytes.len() as u64) % self.state.ring_bytes;
        self.state.used_bytes += bytes.len() as u64;
        self.state.next_lsn += 1;
        Ok(pos)
    }

    /// Writes the same bytes at two offsets with both writes in flight, durably.
    fn write_mirrored(&mut self, bytes: &[u8], offsets: [u64; MIRRORS]) -> Result<()> {
        for (tag, &offset) in offsets.iter().enumerate() {
            let buf = AlignedBuf::padded_copy(bytes, self.sector as usize);
            let op = Op::Write { offset, buf, durable: true };
            self.queue.submit(Request { tag: tag as u64, op }).map_err(|(e, _)| e)?;
        }
        let mut done: Vec<Completion> = Vec::with_capacity(MIRRORS);
        while done.len() < MIRRORS {
            let want = MIRRORS - done.len();
            self.queue.reap(want, &mut done)?;
        }
        for c in done {
            c.result?;
        }
        Ok(())
    }

    /// Rewrites the anchor of mirror A, then of mirror B, each durable before the next.
    fn write_anchors(&mut self, base_pos: u64, base_lsn: u64, sn: u64) -> Result<()> {
        let anchor = LogObject {
            kind: ObjectKind::WrapLeft,
            lsn: base_lsn,
            sn,
            payload: base_pos.to_le_bytes().to_vec(),
        };
        let bytes = anchor.encode(self.sector as usize);
        if !self.anchors_held {
            for m in 0..MIRRORS {
                self.device.allocate_range(self.layout.mirror_offset(m), self.sector)?;
            }
            self.anchors_held = true;
        }
        self.anchors_current = false;
        for m in 0..MIRRORS {
            let buf = AlignedBuf::padded_copy(&bytes, self.sector as usize);
            self.queue.write_at(self.layout.mirror_offset(m), buf, true)?;
        }
        self.anchors_current = true;
        Ok(())
    }
}

/// A walk over both mirrors read into memory.
struct Scan<'a> {
    layout: &'a Layout,
    mirrors: &'a [AlignedBuf],
}

/// Where one object of the live chain lies, and which mirror's copy recovery used.
struct ChainSpan {
    pos: u64,
    used: u64,
    lsn: u64,
    from_b: bool,
}

/// Outcome of reading one position of the ring.
enum Found {
    /// A valid object with the expected lsn, and the bytes it occupies.
    Object(LogObject, u64, bool),
    /// No valid successor here: the chain ends.
    End,
}

impl Scan<'_> {
    fn sector(&self) -> usize {
        self.layout.sector_bytes as usize
    }

    fn ring(&self, m: usize) -> &[u8] {
        &self.mirrors[m][self.sector()..]
    }

    /// Device offset of ring position `pos` in mirror A, for error messages.
    fn offset(&self, pos: u64) -> u64 {
        self.layout.mirror_offset(0) + self.sector() as u64 + pos
    }

    /// The object with `lsn` at ring position `pos`, from mirror A or else B.
    fn successor(&self, pos: u64, lsn: u64) -> Found {
        for m in 0..MIRRORS {
            let ring = self.ring(m);
            if let Ok((obj, used)) = LogObject::decode(&ring[pos as usize..], self.sector()) {
                if obj.lsn == lsn && obj.kind != ObjectKind::WrapLeft {
                    return Found::Object(obj, used as u64, m > 0);
                }
            }
        }
        Found::End
    }

    /// Whether the anchors of both mirrors are valid and name the newest base of `state`.
    fn anchors_name(&self, state: &LogState) -> bool {
        let newest = (state.base_lsn, state.base_sn, state.base_pos);
        (0..MIRRORS).all(|m| {
            let sector = &self.mirrors[m][..self.sector()];
            matches!(LogObject::decode(sector, self.sector()), Ok((obj, _))
                if obj.kind == ObjectKind::WrapLeft
                    && obj.payload.len() == 8
                    && (obj.lsn, obj.sn, u64::from_le_bytes(obj.payload[..8].try_into().unwrap()))
                        == newest)
        })
    }

    /// The valid anchors, newest first.
    fn anchors(&self) -> Vec<(u64, u64, u64)> {
        let mut found = Vec::new();
        for m in 0..MIRRORS {
            let sector = &self.mirrors[m][..self.sector()];
            if let Ok((obj, _)) = LogObject::decode(sector, self.sector()) {
                if obj.kind == ObjectKind::WrapLeft && obj.payload.len() == 8 {
                    let pos = u64::from_le_bytes(obj.payload[..8].try_into().unwrap());
                    found.push((obj.lsn, obj.sn, pos));
                }
            }
        }
        found.sort_unstable_by(|a, b| b.cmp(a));
        found.dedup();
        found
    }

    fn recover(&self) -> Result<(LogState, Versions, Vec<ChainSpan>)> {
        let anchors = self.anchors();
        if anchors.is_empty() {
            return Err(Error::corruption(
                "version log anchor (WOL): no valid copy in either mirror",
                self.layout.mirror_offset(0),
            ));
        }
        let mut last_err = None;
        for (lsn, sn, pos) in anchors {
            match self.walk(lsn, sn, pos) {
                Ok(found) => return Ok(found),
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.expect("at least one anchor was tried"))
    }

    /// Copies of the anchors and of the live chain's objects (`chain`) that are damaged in
    /// one mirror while the other holds a valid copy. Two valid anchors naming different
    /// bases are no damage (a crash between the two anchor writes leaves that); an invalid
    /// one is, whatever tore it.
    fn damaged_copies(&self, chain: &[ChainSpan]) -> Vec<Repair> {
        let sector = self.sector();
        let mut found = Vec::new();
        let anchor_ok = |m: usize| {
            let sector_bytes = &self.mirrors[m][..sector];
            matches!(LogObject::decode(sector_bytes, sector), Ok((obj, _))
                if obj.kind == ObjectKind::WrapLeft && obj.payload.len() == 8)
        };
        for m in 0..MIRRORS {
            let other = 1 - m;
            if !anchor_ok(m) && anchor_ok(other) {
                found.push(Repair {
                    what: format!("version log mirror {} anchor", mirror_name(m)),
                    offset: self.layout.mirror_offset(m),
                    good: self.mirrors[other][..sector].to_vec(),
                });
            }
        }
        for span in chain {
            let (good, bad) = if span.from_b { (1, 0) } else { (0, 1) };
            let range = span.pos as usize..(span.pos + span.used) as usize;
            if self.ring(good)[range.clone()] != self.ring(bad)[range.clone()] {
                found.push(Repair {
                    what: format!(
                        "version log mirror {} object lsn {}",
                        mirror_name(bad),
                        span.lsn
                    ),
                    offset: self.layout.mirror_offset(bad) + sector as u64 + span.pos,
                    good: self.ring(good)[range].to_vec(),
                });
            }
        }
        found
    }

    /// Walks the chain from the base an anchor points at.
    fn walk(
        &self,
        base_lsn: u64,
        base_sn: u64,
        base_pos: u64,
    ) -> Result<(LogState, Versions, Vec<ChainSpan>)> {
        let ring_bytes = VersionLog::ring_bytes(self.layout);
        let sector = self.sector() as u64;
        if base_pos >= ring_bytes || base_pos % sector != 0 {
            return Err(Error::corruption("version log anchor points outside the ring", 0));
        }
        let mut state = LogState { ring_bytes, ..LogState::default() };
        let mut versions = Versions::default();
        let mut chain = Vec::new();
        let (mut pos, mut lsn, mut sn) = (base_pos, base_lsn, base_sn);
        let mut started = false;
        loop {
            if pos == ring_bytes {
                pos = 0;
            }
            let (obj, used, from_b) = match self.successor(pos, lsn) {
                Found::Object(obj, used, from_b) => (obj, used, from_b),
                Found::End if !started => {
                    return Err(Error::corruption(
                        format!("base version {base_sn} (lsn {base_lsn}) named by the anchor"),
                        self.offset(pos),
                    ));
                }
                Found::End => break,
            };
            state.repaired += u64::from(from_b);
            chain.push(ChainSpan { pos, used, lsn, from_b });
            match obj.kind {
                ObjectKind::Base => {
                    let expected = if started { sn.checked_add(1) } else { Some(base_sn) };
                    if Some(obj.sn) != expected {
                        return Err(self.bad_field("base version SN out of order", pos));
                    }
                    versions.base =
                        BaseRecord::decode(&obj.payload).map_err(|e| self.bad_field(e.0, pos))?;
                    versions.deltas.clear();
                    sn = obj.sn;
                    state.base_sn = sn;
                    state.base_lsn = obj.lsn;
                    state.base_pos = pos;
                    state.used_bytes = 0;
                    state.wraps = 0;
                }
                _ if !started => {
                    return Err(self.bad_field("anchor points at an object that is no base", pos));
                }
                ObjectKind::Delta => {
                    if obj.sn != sn {
                        return Err(self.bad_field("delta version of another base", pos));
                    }
                    let d =
                        DeltaRecord::decode(&obj.payload).map_err(|e| self.bad_field(e.0, pos))?;
                    versions.deltas.push(d);
                }
                ObjectKind::WrapRight => {
                    state.used_bytes += ring_bytes - pos;
                    state.wraps += 1;
                    pos = 0;
                    lsn = self.next_lsn(lsn, pos)?;
                    continue;
                }
                ObjectKind::WrapLeft => unreachable!("successor() never returns a WOL"),
            }
            started = true;
            state.used_bytes += used;
            pos += used;
            lsn = self.next_lsn(lsn, pos)?;
        }
        state.deltas = versions.deltas.len() as u64;
        state.head = pos;
        state.next_lsn = lsn;
        self.check_no_later_object(lsn)?;
        Ok((state, versions, chain))
    }

    /// The lsn after `lsn`; an lsn at its maximum can only come from damage (or forgery).
    fn next_lsn(&self, lsn: u64, pos: u64) -> Result<u64> {
        lsn.checked_add(1).ok_or_else(|| self.bad_field("lsn at its maximum", pos))
    }

    fn bad_field(&self, what: &str, pos: u64) -> Error {
        Error::corruption(format!("version log object: {what}"), self.offset(pos))
    }

    /// After the walk ended before `lsn`: a valid object with a later lsn means a committed
    /// object in the middle of the chain is damaged in both mirrors.
    fn check_no_later_object(&self, lsn: u64) -> Result<()> {
        let sector = self.sector();
        for m in 0..MIRRORS {
            let ring = self.ring(m);
            for pos in (0..ring.len()).step_by(sector) {
                if let Ok((obj, _)) = LogObject::decode(&ring[pos..], sector) {
                    if obj.lsn >= lsn && obj.kind != ObjectKind::WrapLeft {
                        return Err(Error::corruption(
                            format!(
                                "version log object lsn {lsn} is damaged in both mirrors \
                                 (lsn {} follows it)",
                                obj.lsn
                            ),
                            self.offset(pos as u64),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::LayoutOptions;

    /// Found while writing the fuzz targets (fuzz/regressions/version_log_scan/
    /// anchor-lsn-at-u64-max): an anchor and a base with lsn u64::MAX (checksums valid) made the
    /// walk's `lsn += 1` overflow and panic instead of reporting Corruption.
    #[test]
    fn lsn_at_u64_max_is_corruption_not_overflow() {
        let opts = LayoutOptions { slot_bytes: 4096, version_log_bytes: 64 << 10, wal_bytes: 8192 };
        let layout = Layout::new(&opts, 512);
        let object =
            |kind, payload: Vec<u8>| LogObject { kind, lsn: u64::MAX, sn: 1, payload }.encode(512);
        let anchor = object(ObjectKind::WrapLeft, 0u64.to_le_bytes().to_vec());
        let base = object(ObjectKind::Base, BaseRecord::default().encode());
        let mirror = || {
            let mut m = AlignedBuf::zeroed(layout.version_log_bytes as usize);
            m[..512].copy_from_slice(&anchor);
            m[512..1024].copy_from_slice(&base);
            m
        };
        let mirrors = [mirror(), mirror()];
        let scan = Scan { layout: &layout, mirrors: &mirrors };
        assert!(matches!(scan.recover(), Err(Error::Corruption { .. })));
    }
}
