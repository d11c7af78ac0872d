//! Appending to the active log group (see the module doc for the stages of an append).

use shale_io::{AlignedBuf, Completion, Op, Queue, QueueExt, Request};

use super::WalLayout;
use super::meta::{GroupEntry, GroupState, WalMeta};
use super::page::{FRAGMENT_HEADER_BYTES, FragmentType, PAGE_BYTES, PageBuf};
use crate::error::{Error, Result};

/// Why an append did not happen.
#[derive(Debug)]
pub enum AppendError {
    /// The records do not fit in the active group's remaining pages; nothing was written.
    /// The engine seals the memtable, starts a new group and retries.
    GroupFull,
    /// A device write or flush failed; the log must not be used again (P5).
    Failed(Error),
}

impl From<Error> for AppendError {
    fn from(e: Error) -> AppendError {
        AppendError::Failed(e)
    }
}

/// Pages an append will write, and the partial page it leaves.
struct Packed {
    /// (page index, contents) to write, in order.
    pages: Vec<(u32, PageBuf)>,
    /// Index of the partial page left after the append.
    last_index: u32,
    /// Its contents (possibly empty).
    last: PageBuf,
}

/// The group being appended to.
#[derive(Clone, Copy, Debug)]
struct Active {
    group: u32,
    ltn: u64,
}

/// Writes the WAL. Owned by one thread at a time (the engine's commit leader).
pub struct WalWriter {
    layout: WalLayout,
    queue: Box<dyn Queue>,
    meta: WalMeta,
    active: Option<Active>,
    /// Index of the page `page` will be written as.
    next_page: u32,
    /// The last, partially filled page (possibly empty).
    page: PageBuf,
    /// Pages `[0, synced_through)` of the active group are durable.
    synced_through: u32,
    /// Some completed page write of the active group is not durable yet.
    unsynced: bool,
    /// Checksum of page `next_page - 1` as written (0 before page 0).
    prev_crc: u32,
}

impl WalWriter {
    /// A writer continuing from recovered (or empty) metadata. No group is active.
    pub fn new(layout: WalLayout, queue: Box<dyn Queue>, meta: WalMeta) -> WalWriter {
        WalWriter {
            layout,
            queue,
            meta,
            active: None,
            next_page: 0,
            page: PageBuf::new(),
            synced_through: 0,
            unsynced: false,
            prev_crc: 0,
        }
    }

    /// The metadata as last written.
    pub fn meta(&self) -> &WalMeta {
        &self.meta
    }

    /// The group and generation being appended to.
    pub fn active(&self) -> Option<(u32, u64)> {
        self.active.map(|a| (a.group, a.ltn))
    }

    /// Whether a group is free for a new generation.
    pub fn has_free_group(&self) -> bool {
        self.meta.groups.iter().any(|g| g.state == GroupState::Free)
    }

    /// Starts logging generation `ltn` in a free group and records it durably in the metadata
    /// before any page of it is written. Returns the group, or `None` when every group still
    /// holds an unflushed log (the engine must wait for a flush: a write stall).
    ///
    /// # Errors
    /// The metadata write's error.
    ///
    /// # Panics
    /// If a group is still active (seal it first) or `ltn` does not grow.
    pub fn start_group(&mut self, ltn: u64) -> Result<Option<u32>> {
        assert!(self.active.is_none(), "start_group with a group still active");
        assert!(self.meta.groups.iter().all(|g| g.ltn < ltn), "LTN {ltn} does not grow");
        let Some(group) = self.meta.groups.iter().position(|g| g.state == GroupState::Free) else {
            return Ok(None);
        };
        self.meta.groups[group] = GroupEntry { ltn, state: GroupState::Active, end: 0 };
        self.write_meta()?;
        self.active = Some(Active { group: group as u32, ltn });
        self.next_page = 0;
        self.page = PageBuf::new();
        self.synced_through = 0;
        self.unsynced = false;
        self.prev_crc = 0;
        Ok(Some(group as u32))
    }

    /// Seals the active group: makes its pages durable and records how many there are, so
    /// recovery can tell damage inside it from a torn tail.
    ///
    /// # Errors
    /// The flush's or metadata write's error.
    pub fn seal_group(&mut self) -> Result<()> {
        let active = self.active.take().expect("seal_group without an active group");
        if self.unsynced {
            self.queue.flush()?;
            self.unsynced = false;
        }
        let end = self.next_page + u32::from(!self.page.is_empty());
        self.meta.groups[active.group as usize] =
            GroupEntry { ltn: active.ltn, state: GroupState::Sealed, end };
        self.write_meta()
    }

    /// Marks the group of generation `ltn` free once its memtable's flush has committed. The
    /// change reaches the device with the next metadata write; until then recovery skips the
    /// group anyway, because the engine passes it the oldest unflushed LTN.
    pub fn free_group(&mut self, ltn: u64) {
        for g in &mut self.meta.groups {
            if g.ltn == ltn && g.state == GroupState::Sealed {
                *g = GroupEntry { ltn: g.ltn, state: GroupState::Free, end: 0 };
            }
        }
    }

    /// Marks free every group of a generation below `ltn`, whatever its state: at open, once
    /// the recovered groups are flushed, including the group a crash or close left active.
    pub fn free_generations_below(&mut self, ltn: u64) {
        for g in &mut self.meta.groups {
            if g.ltn < ltn && g.state != GroupState::Free {
                *g = GroupEntry { ltn: g.ltn, state: GroupState::Free, end: 0 };
            }
        }
    }

    fn write_meta(&mut self) -> Result<()> {
        self.meta.generation += 1;
        let copy = self.meta.generation % 2;
        let buf = AlignedBuf::padded_copy(&self.meta.encode(), PAGE_BYTES);
        self.queue.write_at(self.layout.meta_offset(copy), buf, true)?;
        Ok(())
    }

    /// Appends records (encoded write batches) to the active group, durably if `sync`.
    /// Returns when every page holding them, and every earlier page, has completed (and, for
    /// `sync`, is durable).
    ///
    /// # Errors
    /// [`AppendError::GroupFull`] when they do not fit (nothing written);
    /// [`AppendError::Failed`] when the device fails.
    ///
    /// # Panics
    /// If no group is active.
    pub fn append(
        &mut self,
        records: &[&[u8]],
        sync: bool,
    ) -> std::result::Result<(), AppendError> {
        let active = self.active.expect("append without an active group");
        let Packed { pages, last_index, last } =
            self.pack(records).ok_or(AppendError::GroupFull)?;
        let durable_writes = sync && !self.unsynced;
        let synced_through = self.synced_through;
        let mut prev_crc = self.prev_crc;
        let mut crcs = Vec::with_capacity(pages.len());
        let writes: Vec<(u64, AlignedBuf)> = pages
            .into_iter()
            .map(|(index, mut page)| {
                let (image, crc) = page.seal(active.ltn, index, synced_through, prev_crc);
                prev_crc = crc;
                crcs.push((index, crc));
                (
                    self.layout.page_offset(active.group, index),
                    AlignedBuf::padded_copy(image, PAGE_BYTES),
                )
            })
            .collect();
        self.write_all(writes, durable_writes)?;
        if sync && !durable_writes {
            self.queue.flush().map_err(Error::from)?;
        }
        self.unsynced = !sync;
        let crc_of = |i: u32| crcs.iter().find(|(index, _)| *index == i).map(|&(_, c)| c);
        if last_index > self.next_page {
            self.prev_crc =
                crc_of(last_index - 1).expect("the page before the partial one was written");
        }
        self.next_page = last_index;
        self.page = last;
        if sync {
            self.synced_through = self.next_page + u32::from(!self.page.is_empty());
            if !self.page.is_empty() {
                // The page holds synced data now: never rewrite it.
                self.prev_crc = crc_of(self.next_page).expect("the partial page was written");
                self.next_page += 1;
                self.page = PageBuf::new();
            }
        }
        Ok(())
    }

    /// Makes every completed write of the active group durable.
    ///
    /// # Errors
    /// The flush's error.
    pub fn sync(&mut self) -> Result<()> {
        if self.unsynced {
            self.queue.flush()?;
            self.unsynced = false;
        }
        Ok(())
    }

    /// Packs records into pages, starting with the current partial page; `None` if they do
    /// not fit in the group.
    fn pack(&self, records: &[&[u8]]) -> Option<Packed> {
        let limit = self.layout.pages_per_group;
        let mut out = Vec::new();
        let mut index = self.next_page;
        let mut page = self.page.clone();
        for rec in records {
            let mut rest: &[u8] = rec;
            let mut first = true;
            loop {
                if index >= limit {
                    return None;
                }
                if page.room() <= FRAGMENT_HEADER_BYTES {
                    out.push((index, std::mem::take(&mut page)));
                    index += 1;
                    continue;
                }
                let n = rest.len().min(page.room() - FRAGMENT_HEADER_BYTES);
                let last = n == rest.len();
                let kind = match (first, last) {
                    (true, true) => FragmentType::Full,
                    (true, false) => FragmentType::First,
                    (false, false) => FragmentType::Middle,
                    (false, true) => FragmentType::Last,
                };
                page.push(kind, &rest[..n]);
                rest = &rest[n..];
                first = false;
                if last {
                    break;
                }
            }
        }
        if index >= limit {
            return None;
        }
        if !page.is_empty() {
            out.push((index, page.clone()));
        }
        Some(Packed { pages: out, last_index: index, last: page })
    }

    /// Writes pages with up to the queue's depth in flight, waiting for all of them.
    fn write_all(&mut self, writes: Vec<(u64, AlignedBuf)>, durable: bool) -> Result<()> {
        let total = writes.len();
        let mut pending = writes.into_iter();
        let mut done: Vec<Completion> = Vec::with_capacity(total);
        let mut first_error = None;
        let mut reaped = 0;
        while reaped < total {
            while self.queue.in_flight() < self.queue.depth() {
                let Some((offset, buf)) = pending.next() else { break };
                let req = Request { tag: offset, op: Op::Write { offset, buf, durable } };
                self.queue.submit(req).map_err(|(e, _)| e)?;
            }
            done.clear();
            reaped += self.queue.reap(1, &mut done)?;
            for c in done.drain(..) {
                if let Err(e) = c.result {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }
}
