//! The index: from a fixed-size digest of each key to where its newest record lies.
//!
//! Each live key costs one entry of a table of `u64 -> u64` pairs (`DigestTable`, 19 to 23
//! bytes a key): the key's 64-bit digest and its packed [`Location`]. The key itself is not kept in memory: a hit is confirmed by
//! reading the record and comparing its key (the full key is checked on every hit), so two
//! keys whose digests collide are told apart. The second of two colliding keys goes to a
//! small map keyed by its full key; lookups consult it only while it is not empty.

use rustc_hash::FxHashMap;

use crate::digest_table::DigestTable;
use crate::error::Result;
use crate::paged_table::PagedTable;

/// Where a record lies: its segment (by the segment's slot in the store's table), the log
/// page its first fragment is on, the byte offset of that fragment in the page, and how many
/// pages the record spans, packed in 64 bits:
///
/// ```text
/// bits   field
/// 0-23   segment table slot (u24)
/// 24-41  page index in the segment (u18: segments are one slot, at most 1 GiB of 4 KiB pages)
/// 42-53  offset of the first fragment's header in the page (u12, < 4096)
/// 54-63  pages spanned (u10: a 2 MiB record spans at most 517)
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Location {
    /// The segment's slot in the store's segment table.
    pub segment: u32,
    /// The page of the record's first fragment.
    pub page: u32,
    /// Byte offset of that fragment's header in its page.
    pub offset: u16,
    /// Pages the record spans, at least 1.
    pub pages: u16,
}

/// Most segment table slots a [`Location`] can name.
pub const SEGMENTS_MAX: u32 = 1 << 24;
/// Most pages a segment can have.
pub const SEGMENT_PAGES_MAX: u32 = 1 << 18;

impl Location {
    /// Packs the location.
    ///
    /// # Panics
    /// If a field does not fit (the store's limits keep them in range).
    pub fn pack(self) -> u64 {
        assert!(self.segment < SEGMENTS_MAX && self.page < SEGMENT_PAGES_MAX);
        assert!(self.offset < 4096 && (1..1024).contains(&self.pages));
        u64::from(self.segment)
            | u64::from(self.page) << 24
            | u64::from(self.offset) << 42
            | u64::from(self.pages) << 54
    }

    /// Unpacks a location.
    pub fn unpack(v: u64) -> Location {
        Location {
            segment: (v & 0xFF_FFFF) as u32,
            page: ((v >> 24) & 0x3_FFFF) as u32,
            offset: ((v >> 42) & 0xFFF) as u16,
            pages: (v >> 54) as u16,
        }
    }
}

/// Bits of a digest that hold the key's first two bytes: its iterator bucket.
pub const BUCKET_BITS: u32 = 16;

/// The 64-bit digest of a key: its first two bytes (big-endian) in the top 16 bits, so that
/// an iterator over a key prefix finds its candidates in the index without reading anything
/// (KV-SSD's iterator buckets by key prefix), then 48 bits of the key's xxh3 hash, of which
/// `bits - 16` are kept (all in use; fewer only in tests, to make collisions common).
pub fn digest(key: &[u8], bits: u32) -> u64 {
    let bucket = u64::from(u16::from_be_bytes([key[0], key[1]]));
    let hash_bits = bits.saturating_sub(BUCKET_BITS).min(64 - BUCKET_BITS);
    let hash = xxhash_rust::xxh3::xxh3_64(key) & ((1u64 << hash_bits) - 1);
    bucket << (64 - BUCKET_BITS) | hash
}

/// The iterator bucket (first two key bytes) a digest holds.
pub fn bucket_of(digest: u64) -> u16 {
    (digest >> (64 - BUCKET_BITS)) as u16
}

/// An entry of the collision map: the full key and its packed location.
pub type KeyedEntry = (Vec<u8>, u64);

/// Where the digest entries live: a table in memory, or pages on the volume behind a
/// fixed cache (`IndexMode::Bounded`).
#[derive(Debug)]
enum Digests {
    Memory(DigestTable),
    Paged(Box<PagedTable>),
}

impl Default for Digests {
    fn default() -> Digests {
        Digests::Memory(DigestTable::default())
    }
}

impl Digests {
    fn get(&self, d: u64) -> Result<Option<u64>> {
        match self {
            Digests::Memory(t) => Ok(t.get(d)),
            Digests::Paged(t) => t.get(d),
        }
    }

    fn insert(&mut self, d: u64, loc: u64) -> Result<Option<u64>> {
        match self {
            Digests::Memory(t) => Ok(t.insert(d, loc)),
            Digests::Paged(t) => t.insert(d, loc),
        }
    }

    fn remove(&mut self, d: u64) -> Result<Option<u64>> {
        match self {
            Digests::Memory(t) => Ok(t.remove(d)),
            Digests::Paged(t) => t.remove(d),
        }
    }

    fn replace_if(&mut self, d: u64, from: u64, to: u64) -> Result<bool> {
        match self {
            Digests::Memory(t) => match t.get_mut(d) {
                Some(v) if *v == from => {
                    *v = to;
                    Ok(true)
                }
                _ => Ok(false),
            },
            Digests::Paged(t) => t.replace_if(d, from, to),
        }
    }

    fn len(&self) -> usize {
        match self {
            Digests::Memory(t) => t.len(),
            Digests::Paged(t) => t.len() as usize,
        }
    }

    fn memory_bytes(&self) -> usize {
        match self {
            Digests::Memory(t) => t.memory_bytes(),
            Digests::Paged(t) => t.memory_bytes(),
        }
    }

    fn for_each(&self, mut each: impl FnMut(u64, u64)) -> Result<()> {
        match self {
            Digests::Memory(t) => {
                t.iter().for_each(|(d, l)| each(d, l));
                Ok(())
            }
            Digests::Paged(t) => t.for_each(each),
        }
    }
}

/// Digest and key-confirmed maps.
#[derive(Debug, Default)]
pub struct Index {
    by_digest: Digests,
    /// Keys whose digest another live key holds in `by_digest`. Kept in memory in both
    /// modes: it holds only keys whose 64-bit digest collides with another live key's, rare
    /// enough (about one pair at 20 million keys) not to grow with the keys.
    collided: FxHashMap<Vec<u8>, u64>,
}

/// What a lookup in the digest map found, for the caller to confirm by reading the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// The key is in the collision map at this location (confirmed: that map holds keys).
    Exact(Location),
    /// The digest's entry points here; the record's key must be compared.
    Candidate(Location),
    /// Nothing with this digest or key.
    Absent,
}

impl Index {
    /// An index whose digest entries live in `table`, on the volume.
    pub(crate) fn paged(table: PagedTable) -> Index {
        Index { by_digest: Digests::Paged(Box::new(table)), collided: FxHashMap::default() }
    }

    /// The on-volume table, in bounded mode.
    pub(crate) fn paged_table(&self) -> Option<&PagedTable> {
        match &self.by_digest {
            Digests::Paged(t) => Some(t),
            Digests::Memory(_) => None,
        }
    }

    /// Live keys.
    pub fn len(&self) -> usize {
        self.by_digest.len() + self.collided.len()
    }

    /// Whether no key is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the index holds in memory (its tables or its page cache, not counting the
    /// allocator's overhead).
    pub fn memory_bytes(&self) -> usize {
        let digest_map = self.by_digest.memory_bytes();
        let collided: usize = self.collided.keys().map(|k| k.capacity() + 8 + 24 + 1).sum();
        digest_map + collided
    }

    /// Where `key` (of digest `d`) may be.
    ///
    /// # Errors
    /// In bounded mode, a page that does not decode ([`crate::Error::Corruption`]) or the
    /// device's error.
    pub fn probe(&self, d: u64, key: &[u8]) -> Result<Probe> {
        if !self.collided.is_empty() {
            if let Some(&v) = self.collided.get(key) {
                return Ok(Probe::Exact(Location::unpack(v)));
            }
        }
        Ok(match self.by_digest.get(d)? {
            Some(v) => Probe::Candidate(Location::unpack(v)),
            None => Probe::Absent,
        })
    }

    /// As [`Index::probe`], where that needs no device read and no wait on the bounded
    /// table's lock; `None` where it would.
    pub fn probe_resident(&self, d: u64, key: &[u8]) -> Option<Probe> {
        if !self.collided.is_empty() {
            if let Some(&v) = self.collided.get(key) {
                return Some(Probe::Exact(Location::unpack(v)));
            }
        }
        let found = match &self.by_digest {
            Digests::Memory(t) => t.get(d),
            Digests::Paged(t) => t.get_resident(d)?,
        };
        Some(match found {
            Some(v) => Probe::Candidate(Location::unpack(v)),
            None => Probe::Absent,
        })
    }

    /// Points `key` at `loc`; returns where it pointed before, if anywhere. `digest_owner`
    /// says whether the digest entry (if any) belongs to `key` (the caller read its record):
    /// if another key holds the digest, `key` goes to the collision map.
    ///
    /// # Errors
    /// As [`Index::probe`].
    pub fn insert(
        &mut self,
        d: u64,
        key: &[u8],
        loc: Location,
        digest_owner: bool,
    ) -> Result<Option<Location>> {
        if let Some(v) = self.collided.get_mut(key) {
            return Ok(Some(Location::unpack(std::mem::replace(v, loc.pack()))));
        }
        match self.by_digest.get(d)? {
            Some(_) if digest_owner => {
                Ok(self.by_digest.insert(d, loc.pack())?.map(Location::unpack))
            }
            Some(_) => {
                self.collided.insert(key.to_vec(), loc.pack());
                Ok(None)
            }
            None => {
                self.by_digest.insert(d, loc.pack())?;
                Ok(None)
            }
        }
    }

    /// Removes `key`: from the collision map if it is there, else the digest entry, which
    /// the caller confirmed is the key's. Returns where it pointed.
    ///
    /// # Errors
    /// As [`Index::probe`].
    pub fn remove(&mut self, d: u64, key: &[u8], digest_owner: bool) -> Result<Option<Location>> {
        if let Some(v) = self.collided.remove(key) {
            return Ok(Some(Location::unpack(v)));
        }
        if digest_owner {
            // A colliding key of the same digest may take the freed entry; it stays in the
            // collision map instead, where lookups find it first.
            return Ok(self.by_digest.remove(d)?.map(Location::unpack));
        }
        Ok(None)
    }

    /// Whether `key`'s entry points at exactly `loc`: a record at `loc` is then live, with
    /// no read needed (a location holds one record).
    ///
    /// # Errors
    /// As [`Index::probe`].
    pub fn points_at(&self, d: u64, key: &[u8], loc: Location) -> Result<bool> {
        if !self.collided.is_empty() {
            if let Some(&v) = self.collided.get(key) {
                return Ok(v == loc.pack());
            }
        }
        Ok(self.by_digest.get(d)? == Some(loc.pack()))
    }

    /// Moves `key`'s entry from `from` to `to` if it still points at `from` (a record copied
    /// by garbage collection); returns whether it did.
    ///
    /// # Errors
    /// As [`Index::probe`].
    pub fn relocate(&mut self, d: u64, key: &[u8], from: Location, to: Location) -> Result<bool> {
        if let Some(v) = self.collided.get_mut(key) {
            if *v == from.pack() {
                *v = to.pack();
                return Ok(true);
            }
            return Ok(false);
        }
        self.by_digest.replace_if(d, from.pack(), to.pack())
    }

    /// The raw entries, for a checkpoint: (digest, packed location), which are empty in
    /// bounded mode (they are in the pages), and (key, packed location) of the collision map.
    pub fn entries(&self) -> (Vec<(u64, u64)>, Vec<KeyedEntry>) {
        let by_digest = match &self.by_digest {
            Digests::Memory(t) => t.iter().collect(),
            Digests::Paged(_) => Vec::new(),
        };
        let collided = self.collided.iter().map(|(k, &l)| (k.clone(), l)).collect();
        (by_digest, collided)
    }

    /// Puts back a checkpoint's entries (into an empty index; in bounded mode the digest
    /// entries are in the pages and the checkpoint holds none).
    ///
    /// # Errors
    /// As [`Index::probe`].
    pub fn load(&mut self, by_digest: Vec<(u64, u64)>, collided: Vec<KeyedEntry>) -> Result<()> {
        if let Digests::Memory(t) = &mut self.by_digest {
            t.reserve(t.len() + by_digest.len());
        }
        for (d, l) in by_digest {
            self.by_digest.insert(d, l)?;
        }
        self.collided.extend(collided);
        Ok(())
    }

    /// The locations of every entry whose bucket `b` satisfies `b & mask == want & mask`.
    /// In bounded mode this reads every page of the table once.
    ///
    /// # Errors
    /// As [`Index::probe`].
    pub fn in_buckets(&self, want: u16, mask: u16) -> Result<Vec<Location>> {
        let hit = |d: u64| bucket_of(d) & mask == want & mask;
        let mut out: Vec<Location> = Vec::new();
        self.by_digest.for_each(|d, l| {
            if hit(d) {
                out.push(Location::unpack(l));
            }
        })?;
        for (key, &l) in &self.collided {
            if hit(digest(key, 64)) {
                out.push(Location::unpack(l));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_pack_and_unpack_at_their_limits() {
        for loc in [
            Location { segment: 0, page: 0, offset: 0, pages: 1 },
            Location {
                segment: SEGMENTS_MAX - 1,
                page: SEGMENT_PAGES_MAX - 1,
                offset: 4095,
                pages: 1023,
            },
            Location { segment: 77, page: 1234, offset: 28, pages: 517 },
        ] {
            assert_eq!(Location::unpack(loc.pack()), loc);
        }
    }

    #[test]
    fn colliding_keys_are_kept_apart() {
        let mut ix = Index::default();
        let at = |n| Location { segment: n, page: 0, offset: 28, pages: 1 };
        assert_eq!(ix.insert(5, b"aaaa", at(1), false).unwrap(), None);
        // Same digest, the caller read the record and found another key.
        assert_eq!(ix.insert(5, b"bbbb", at(2), false).unwrap(), None);
        assert_eq!(ix.len(), 2);
        assert_eq!(ix.probe(5, b"bbbb").unwrap(), Probe::Exact(at(2)));
        assert_eq!(ix.probe(5, b"aaaa").unwrap(), Probe::Candidate(at(1)));
        assert_eq!(ix.insert(5, b"aaaa", at(3), true).unwrap(), Some(at(1)));
        assert_eq!(ix.probe(5, b"aaaa").unwrap(), Probe::Candidate(at(3)));
        assert!(
            ix.points_at(5, b"aaaa", at(3)).unwrap() && !ix.points_at(5, b"aaaa", at(1)).unwrap()
        );
        assert!(ix.points_at(5, b"bbbb", at(2)).unwrap());
        assert!(!ix.relocate(5, b"aaaa", at(1), at(4)).unwrap(), "a stale location is not moved");
        assert!(ix.relocate(5, b"bbbb", at(2), at(5)).unwrap());
        assert_eq!(ix.probe(5, b"bbbb").unwrap(), Probe::Exact(at(5)));
        assert_eq!(ix.remove(5, b"bbbb", false).unwrap(), Some(at(5)));
        assert_eq!(
            ix.probe(5, b"bbbb").unwrap(),
            Probe::Candidate(at(3)),
            "only a candidate is left"
        );
        assert_eq!(ix.remove(5, b"aaaa", true).unwrap(), Some(at(3)));
        assert_eq!(ix.probe(5, b"aaaa").unwrap(), Probe::Absent);
        assert!(ix.is_empty());
        assert_eq!(
            digest(b"xyzw", 20),
            digest(b"xyzw", 64) & !((1u64 << 48) - 1) | (digest(b"xyzw", 64) & 0xF)
        );
        assert_eq!(bucket_of(digest(b"\x12\x34zw", 64)), 0x1234);
    }
}
