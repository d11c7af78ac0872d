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
//! Recovery reads the anchor, walks the chain from its base and returns the newest base with
//! the deltas that follow it. Only a missing successor ends the walk; if a valid object with a
//! later lsn exists anywhere in the ring, the chain was broken by damage, not by a torn tail,
//! and recovery reports Corruption instead of silently dropping committed versions (P4).

use shale_io::{AlignedBuf, Completion, Op, Queue, QueueExt, Request};

use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::log_object::{LogObject, ObjectKind};
use crate::version_record::{BaseRecord, DeltaRecord};

/// Number of mirrors of the version log.
const MIRRORS: usize = 2;

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
}

impl VersionLog {
    fn ring_bytes(layout: &Layout) -> u64 {
        layout.version_log_bytes - u64::from(layout.sector_bytes)
    }

    /// Device offset of ring position `pos` in mirror `m`.
    fn device_offset(&self, m: usize, pos: u64) -> u64 {
        self.layout.mirror_offset(m) + self.sector + pos
    }

    /// Writes the first base and both anchors of a new volume.
    pub(crate) fn create(
        layout: Layout,
        queue: Box<dyn Queue>,
        base: &BaseRecord,
    ) -> Result<VersionLog> {
        let ring_bytes = Self::ring_bytes(&layout);
        let state = LogState { base_sn: 0, next_lsn: 1, ring_bytes, ..LogState::default() };
        let mut log = VersionLog { sector: u64::from(layout.sector_bytes), layout, state, queue };
        log.append_base(base)?;
        Ok(log)
    }

    /// Recovers the log of an existing volume.
    pub(crate) fn recover(
        layout: Layout,
        mut queue: Box<dyn Queue>,
    ) -> Result<(VersionLog, Versions)> {
        let mirrors: Vec<AlignedBuf> = (0..MIRRORS)
            .map(|m| queue.read_at(layout.mirror_offset(m), layout.version_log_bytes as usize))
            .collect::<shale_io::Result<_>>()?;
        let scan = Scan { layout: &layout, mirrors: &mirrors };
        let (state, versions) = scan.recover()?;
        let log = VersionLog { sector: u64::from(layout.sector_bytes), layout, state, queue };
        Ok((log, versions))
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
        for m in 0..MIRRORS {
            let buf = AlignedBuf::padded_copy(&bytes, self.sector as usize);
            self.queue.write_at(self.layout.mirror_offset(m), buf, true)?;
        }
        Ok(())
    }
}

/// A walk over both mirrors read into memory.
struct Scan<'a> {
    layout: &'a Layout,
    mirrors: &'a [AlignedBuf],
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

    fn recover(&self) -> Result<(LogState, Versions)> {
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

    /// Walks the chain from the base an anchor points at.
    fn walk(&self, base_lsn: u64, base_sn: u64, base_pos: u64) -> Result<(LogState, Versions)> {
        let ring_bytes = VersionLog::ring_bytes(self.layout);
        let sector = self.sector() as u64;
        if base_pos >= ring_bytes || base_pos % sector != 0 {
            return Err(Error::corruption("version log anchor points outside the ring", 0));
        }
        let mut state = LogState { ring_bytes, ..LogState::default() };
        let mut versions = Versions::default();
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
        Ok((state, versions))
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
