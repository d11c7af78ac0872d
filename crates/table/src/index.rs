//! The primary hash index of a table: a hash of the primary key to the positions of the
//! row records with that hash. Only the hash is kept, so every hit is confirmed by reading
//! the row's key from its block (the paper's <hash, block, offset>; an erased row's entry is
//! removed rather than flagged).
//!
//! Entries live in memory up to a threshold (`TableOptions::index_memory_entries`); past
//! it, new entries go to *index pages* on the volume (the space layer's one index-page
//! format, entries as `index_page.rs` says), as the paper's metafiles do, and lookups of
//! keys whose hash lands there read a page or more. The pages form a hash table of their
//! own: an entry goes to page `hash % pages`, or, when that page is full, to the next one
//! with room, the pages it passes marked "overflowed" so that lookups go on past them. When
//! the pages are 60% full, a new area of twice as many is written and the old one given
//! back.
//!
//! The index is rebuilt at every open by scanning the table's blocks (the row records are
//! the truth), pages included: an index area is a pending extent of the space layer, never
//! committed, so a crash forgets it, and its pages are written without being made durable.
//! A page read back is checked (checksum, table, number, area and its size), and damage
//! is [`Error::Corruption`].

use std::collections::HashMap;

use shale_io::{AlignedBuf, QueueExt};
use shale_space::{Extent, Volume, VolumeQueue};
use xxhash_rust::xxh3::xxh3_64;

use crate::block::Pos;
use crate::error::Result;
use crate::index_page::{ENTRIES_MAX, IndexPage, PAGE_BYTES, PageId};

/// What the index reaches the volume through.
pub struct PageIo<'a> {
    /// The volume (to allocate and give back index areas).
    pub volume: &'a Volume,
    /// The queue for index pages.
    pub queue: &'a mut VolumeQueue,
}

/// A table's primary index.
#[derive(Debug)]
pub struct Index {
    table: u32,
    mask: u64,
    map: HashMap<u64, Vec<Pos>>,
    /// Entries in `map`.
    memory_entries: usize,
    entries: usize,
    /// Entries kept in memory before new ones go to pages; `usize::MAX`: no pages.
    memory_max: usize,
    pages: Option<PagedArea>,
}

/// An index area: index pages on one extent, with what memory keeps of each page.
#[derive(Debug)]
struct PagedArea {
    extent: Extent,
    /// Device address of page 0.
    start: u64,
    generation: u64,
    /// Entries in each page.
    counts: Vec<u16>,
    /// Each page's "overflowed" flag.
    overflowed: Vec<bool>,
    entries: usize,
}

impl Index {
    /// An empty index of `table` keeping `hash_bits` bits of each key's hash (64; fewer only
    /// in tests, to make collisions common) and at most `memory_max` entries in memory.
    pub fn new(table: u32, hash_bits: u32, memory_max: Option<usize>) -> Index {
        let mask = if hash_bits >= 64 { u64::MAX } else { (1u64 << hash_bits) - 1 };
        Index {
            table,
            mask,
            map: HashMap::new(),
            memory_entries: 0,
            entries: 0,
            memory_max: memory_max.unwrap_or(usize::MAX),
            pages: None,
        }
    }

    fn hash(&self, key: &[u8]) -> u64 {
        xxh3_64(key) & self.mask
    }

    /// Positions of the rows whose key hashes as `key` does.
    ///
    /// # Errors
    /// A device error, or [`crate::Error::Corruption`] of an index page.
    pub fn candidates(&self, key: &[u8], io: &mut PageIo) -> Result<Vec<Pos>> {
        let h = self.hash(key);
        let mut out = self.map.get(&h).cloned().unwrap_or_default();
        if let Some(area) = &self.pages {
            area.visit(self.table, h, io, |page, _| {
                out.extend(page.entries.iter().filter(|e| e.0 == h).map(|e| e.1));
                false
            })?;
        }
        Ok(out)
    }

    /// Adds `key` at `pos` (no-op if there already): in memory below the threshold, else
    /// in a page.
    ///
    /// # Errors
    /// A device error, [`crate::Error::Corruption`] of an index page, no room for pages.
    pub fn insert(&mut self, key: &[u8], pos: Pos, io: &mut PageIo) -> Result<()> {
        let h = self.hash(key);
        if self.map.get(&h).is_some_and(|v| v.contains(&pos)) {
            return Ok(());
        }
        if let Some(area) = &self.pages {
            let mut found = false;
            area.visit(self.table, h, io, |page, _| {
                found = page.entries.contains(&(h, pos));
                found
            })?;
            if found {
                return Ok(());
            }
        }
        if self.memory_entries < self.memory_max {
            self.map.entry(h).or_default().push(pos);
            self.memory_entries += 1;
        } else {
            if self.pages.is_none() {
                self.pages = Some(PagedArea::create(self.table, 0, &[], io)?);
            }
            let area = self.pages.as_mut().expect("made above");
            area.insert(self.table, h, pos, io)?;
            if area.entries * 10 > area.counts.len() * ENTRIES_MAX * 6 {
                self.grow(io)?;
            }
        }
        self.entries += 1;
        Ok(())
    }

    /// Removes the entry of `key` at `pos`, if any.
    ///
    /// # Errors
    /// A device error, or [`crate::Error::Corruption`] of an index page.
    pub fn remove(&mut self, key: &[u8], pos: Pos, io: &mut PageIo) -> Result<()> {
        let h = self.hash(key);
        if let Some(v) = self.map.get_mut(&h) {
            if let Some(i) = v.iter().position(|p| *p == pos) {
                v.swap_remove(i);
                if v.is_empty() {
                    self.map.remove(&h);
                }
                self.memory_entries -= 1;
                self.entries -= 1;
                return Ok(());
            }
        }
        if let Some(area) = &mut self.pages {
            if area.remove(self.table, h, pos, io)? {
                self.entries -= 1;
            }
        }
        Ok(())
    }

    /// Every position in the index (for tests: scans walk the ordered index).
    ///
    /// # Errors
    /// A device error, or [`crate::Error::Corruption`] of an index page.
    #[cfg(test)]
    pub fn positions(&self, io: &mut PageIo) -> Result<Vec<Pos>> {
        let mut out: Vec<Pos> = self.map.values().flatten().copied().collect();
        if let Some(area) = &self.pages {
            out.extend(area.all(self.table, io)?.into_iter().map(|e| e.1));
        }
        Ok(out)
    }

    /// Entries (rows, committed or not).
    pub fn entries(&self) -> usize {
        self.entries
    }

    /// Entries in index pages.
    pub fn paged_entries(&self) -> usize {
        self.pages.as_ref().map_or(0, |a| a.entries)
    }

    /// The device address of index page `n`, if the index has pages.
    pub fn page_address(&self, n: u64) -> Option<u64> {
        let area = self.pages.as_ref()?;
        (n < area.counts.len() as u64).then(|| area.start + n * PAGE_BYTES as u64)
    }

    /// Gives the index area back to the volume (the table is dropped).
    pub fn release(&mut self, volume: &Volume) {
        if let Some(area) = self.pages.take() {
            volume.release(area.extent);
        }
    }

    /// Moves the paged entries to an area of twice as many pages.
    fn grow(&mut self, io: &mut PageIo) -> Result<()> {
        let old = self.pages.take().expect("an area to grow");
        let entries = match old.all(self.table, io) {
            Ok(e) => e,
            Err(e) => {
                self.pages = Some(old);
                return Err(e);
            }
        };
        match PagedArea::create(self.table, old.generation + 1, &entries, io) {
            Ok(new) => {
                io.volume.release(old.extent);
                self.pages = Some(new);
                Ok(())
            }
            Err(e) => {
                self.pages = Some(old);
                Err(e)
            }
        }
    }
}

impl PagedArea {
    /// Writes a new area holding `entries`, of enough slots for them to fill it to at most
    /// 30% (and at least one slot).
    fn create(
        table: u32,
        generation: u64,
        entries: &[(u64, Pos)],
        io: &mut PageIo,
    ) -> Result<PagedArea> {
        let slot = io.volume.layout().slot_bytes;
        let pages_per_slot = (slot / PAGE_BYTES as u64).max(1);
        let pages_needed = (entries.len() * 10 / 3).div_ceil(ENTRIES_MAX).max(1) as u64;
        let slots = pages_needed.div_ceil(pages_per_slot) as u32;
        let extent = io.volume.allocate(slots)?;
        let range = io.volume.extent_range(extent);
        let n = ((range.end - range.start) / PAGE_BYTES as u64) as usize;
        let mut pages = vec![IndexPage::default(); n];
        for &(h, pos) in entries {
            let mut p = (h % n as u64) as usize;
            while pages[p].entries.len() >= ENTRIES_MAX {
                pages[p].overflowed = true;
                p = (p + 1) % n;
            }
            pages[p].entries.push((h, pos));
        }
        let mut buf = AlignedBuf::zeroed(n * PAGE_BYTES);
        for (i, page) in pages.iter().enumerate() {
            let id = PageId { table, number: i as u64, pages: n as u64, generation };
            buf[i * PAGE_BYTES..(i + 1) * PAGE_BYTES].copy_from_slice(&page.encode(id));
        }
        if let Err(e) = io.queue.write_at(range.start, buf, false) {
            io.volume.release(extent);
            return Err(e.into());
        }
        Ok(PagedArea {
            extent,
            start: range.start,
            generation,
            counts: pages.iter().map(|p| p.entries.len() as u16).collect(),
            overflowed: pages.iter().map(|p| p.overflowed).collect(),
            entries: entries.len(),
        })
    }

    fn id(&self, table: u32, n: usize) -> PageId {
        PageId {
            table,
            number: n as u64,
            pages: self.counts.len() as u64,
            generation: self.generation,
        }
    }

    fn address(&self, n: usize) -> u64 {
        self.start + (n * PAGE_BYTES) as u64
    }

    fn read(&self, table: u32, n: usize, io: &mut PageIo) -> Result<IndexPage> {
        let address = self.address(n);
        let raw = io.queue.read_at(address, PAGE_BYTES)?;
        IndexPage::decode(&raw, self.id(table, n), address)
    }

    fn write(&self, table: u32, n: usize, page: &IndexPage, io: &mut PageIo) -> Result<()> {
        let buf = AlignedBuf::padded_copy(&page.encode(self.id(table, n)), PAGE_BYTES);
        io.queue.write_at(self.address(n), buf, false)?;
        Ok(())
    }

    /// Reads the pages a lookup of `h` visits, in order, until `f` says stop (true): the
    /// home page, and on past every overflowed one. Pages memory knows to be empty are not
    /// read.
    fn visit(
        &self,
        table: u32,
        h: u64,
        io: &mut PageIo,
        mut f: impl FnMut(&IndexPage, usize) -> bool,
    ) -> Result<()> {
        let n = self.counts.len();
        let home = (h % n as u64) as usize;
        for step in 0..n {
            let p = (home + step) % n;
            if self.counts[p] > 0 && f(&self.read(table, p, io)?, p) {
                break;
            }
            if !self.overflowed[p] {
                break;
            }
        }
        Ok(())
    }

    fn insert(&mut self, table: u32, h: u64, pos: Pos, io: &mut PageIo) -> Result<()> {
        let n = self.counts.len();
        let mut p = (h % n as u64) as usize;
        while self.counts[p] as usize >= ENTRIES_MAX {
            if !self.overflowed[p] {
                let mut page = self.read(table, p, io)?;
                page.overflowed = true;
                self.write(table, p, &page, io)?;
                self.overflowed[p] = true;
            }
            p = (p + 1) % n;
        }
        let mut page = self.read(table, p, io)?;
        page.entries.push((h, pos));
        self.write(table, p, &page, io)?;
        self.counts[p] += 1;
        self.entries += 1;
        Ok(())
    }

    /// Removes the entry (h, pos); whether it was there.
    fn remove(&mut self, table: u32, h: u64, pos: Pos, io: &mut PageIo) -> Result<bool> {
        let mut at = None;
        self.visit(table, h, io, |page, p| {
            if let Some(i) = page.entries.iter().position(|e| *e == (h, pos)) {
                let mut page = page.clone();
                page.entries.swap_remove(i);
                at = Some((p, page));
            }
            at.is_some()
        })?;
        let Some((p, page)) = at else { return Ok(false) };
        self.write(table, p, &page, io)?;
        self.counts[p] -= 1;
        self.entries -= 1;
        Ok(true)
    }

    /// Every entry of the area.
    fn all(&self, table: u32, io: &mut PageIo) -> Result<Vec<(u64, Pos)>> {
        let mut out = Vec::with_capacity(self.entries);
        for p in 0..self.counts.len() {
            if self.counts[p] > 0 {
                out.extend(self.read(table, p, io)?.entries);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn entries_past_the_threshold_go_to_pages_that_grow() {
        let device = Arc::new(shale_io::MemoryDevice::new(64 << 20, 4096).unwrap());
        let mut vopts = shale_space::VolumeOptions::small_for_tests();
        vopts.layout.slot_bytes = 64 << 10;
        let volume = Volume::open(device, &vopts).unwrap().volume;
        let mut queue =
            volume.queue(shale_space::IoClass::Slot, &shale_io::QueueOptions::default()).unwrap();
        let mut io = PageIo { volume: &volume, queue: &mut queue };
        // 4 bits of hash: each hash has ~300 keys, more than a page holds, so pages
        // overflow into their neighbours.
        let mut index = Index::new(1, 4, Some(100));
        let key = |i: u64| format!("key{i}").into_bytes();
        let pos = |i: u64| Pos { block: i, offset: (i % 4000) as u32 };
        for i in 0..5000 {
            index.insert(&key(i), pos(i), &mut io).unwrap();
            index.insert(&key(i), pos(i), &mut io).unwrap();
        }
        assert_eq!(index.entries(), 5000);
        assert_eq!(index.paged_entries(), 4900);
        let area = index.pages.as_ref().unwrap();
        assert!(area.generation > 0, "the area grew");
        assert!(area.overflowed.iter().any(|&o| o));
        for i in (0..5000).step_by(7) {
            assert!(index.candidates(&key(i), &mut io).unwrap().contains(&pos(i)), "key {i}");
        }
        for i in (0..5000).filter(|i| i % 3 == 0) {
            index.remove(&key(i), pos(i), &mut io).unwrap();
        }
        let mut all = index.positions(&mut io).unwrap();
        all.sort();
        let want: Vec<Pos> = (0..5000).filter(|i| i % 3 != 0).map(pos).collect();
        assert_eq!(all, want);
        for i in 0..5000 {
            let found = index.candidates(&key(i), &mut io).unwrap().contains(&pos(i));
            assert_eq!(found, i % 3 != 0, "key {i}");
        }
    }
}
