//! The index: from a fixed-size digest of each key to where its newest record lies.
//!
//! Each live key costs one entry of a table of `u64 -> u64` pairs ([`DigestTable`], 19 to 23
//! bytes a key): the key's 64-bit digest and its packed [`Location`]. The key itself is not kept in memory: a hit is confirmed by
//! reading the record and comparing its key (the full key is checked on every hit), so two
//! keys whose digests collide are told apart. The second of two colliding keys goes to a
//! small map keyed by its full key; lookups consult it only while it is not empty.

use rustc_hash::FxHashMap;

use crate::digest_table::DigestTable;

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

/// Digest and key-confirmed maps.
#[derive(Debug, Default)]
pub struct Index {
    by_digest: DigestTable,
    /// Keys whose digest another live key holds in `by_digest`.
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
    /// Live keys.
    pub fn len(&self) -> usize {
        self.by_digest.len() + self.collided.len()
    }

    /// Whether no key is live.
    pub fn is_empty(&self) -> bool {
        self.by_digest.is_empty() && self.collided.is_empty()
    }

    /// Bytes the maps hold in memory (their tables, not counting the allocator's overhead).
    pub fn memory_bytes(&self) -> usize {
        let digest_map = self.by_digest.memory_bytes();
        let collided: usize = self.collided.keys().map(|k| k.capacity() + 8 + 24 + 1).sum();
        digest_map + collided
    }

    /// Where `key` (of digest `d`) may be.
    pub fn probe(&self, d: u64, key: &[u8]) -> Probe {
        if !self.collided.is_empty() {
            if let Some(&v) = self.collided.get(key) {
                return Probe::Exact(Location::unpack(v));
            }
        }
        match self.by_digest.get(d) {
            Some(v) => Probe::Candidate(Location::unpack(v)),
            None => Probe::Absent,
        }
    }

    /// Points `key` at `loc`; returns where it pointed before, if anywhere. `digest_owner`
    /// says whether the digest entry (if any) belongs to `key` (the caller read its record):
    /// if another key holds the digest, `key` goes to the collision map.
    pub fn insert(
        &mut self,
        d: u64,
        key: &[u8],
        loc: Location,
        digest_owner: bool,
    ) -> Option<Location> {
        if let Some(v) = self.collided.get_mut(key) {
            return Some(Location::unpack(std::mem::replace(v, loc.pack())));
        }
        match self.by_digest.get_mut(d) {
            Some(v) if digest_owner => Some(Location::unpack(std::mem::replace(v, loc.pack()))),
            Some(_) => {
                self.collided.insert(key.to_vec(), loc.pack());
                None
            }
            None => {
                self.by_digest.insert(d, loc.pack());
                None
            }
        }
    }

    /// Removes `key`: from the collision map if it is there, else the digest entry, which
    /// the caller confirmed is the key's. Returns where it pointed.
    pub fn remove(&mut self, d: u64, key: &[u8], digest_owner: bool) -> Option<Location> {
        if let Some(v) = self.collided.remove(key) {
            return Some(Location::unpack(v));
        }
        if digest_owner {
            // A colliding key of the same digest may take the freed entry; it stays in the
            // collision map instead, where lookups find it first.
            return self.by_digest.remove(d).map(Location::unpack);
        }
        None
    }

    /// Whether `key`'s entry points at exactly `loc`: a record at `loc` is then live, with
    /// no read needed (a location holds one record).
    pub fn points_at(&self, d: u64, key: &[u8], loc: Location) -> bool {
        if !self.collided.is_empty() {
            if let Some(&v) = self.collided.get(key) {
                return v == loc.pack();
            }
        }
        self.by_digest.get(d) == Some(loc.pack())
    }

    /// Moves `key`'s entry from `from` to `to` if it still points at `from` (a record copied
    /// by garbage collection); returns whether it did.
    pub fn relocate(&mut self, d: u64, key: &[u8], from: Location, to: Location) -> bool {
        if let Some(v) = self.collided.get_mut(key) {
            if *v == from.pack() {
                *v = to.pack();
                return true;
            }
            return false;
        }
        match self.by_digest.get_mut(d) {
            Some(v) if *v == from.pack() => {
                *v = to.pack();
                true
            }
            _ => false,
        }
    }

    /// The raw entries, for a checkpoint: (digest, packed location) and (key, packed
    /// location) of the collision map.
    pub fn entries(&self) -> (Vec<(u64, u64)>, Vec<KeyedEntry>) {
        let by_digest = self.by_digest.iter().collect();
        let collided = self.collided.iter().map(|(k, &l)| (k.clone(), l)).collect();
        (by_digest, collided)
    }

    /// Puts back a checkpoint's entries (into an empty index).
    pub fn load(&mut self, by_digest: Vec<(u64, u64)>, collided: Vec<KeyedEntry>) {
        self.by_digest.reserve(self.by_digest.len() + by_digest.len());
        for (d, l) in by_digest {
            self.by_digest.insert(d, l);
        }
        self.collided.extend(collided);
    }

    /// The locations of every entry whose bucket `b` satisfies `b & mask == want & mask`.
    pub fn in_buckets(&self, want: u16, mask: u16) -> Vec<Location> {
        let hit = |d: u64| bucket_of(d) & mask == want & mask;
        let mut out: Vec<Location> = self
            .by_digest
            .iter()
            .filter(|&(d, _)| hit(d))
            .map(|(_, l)| Location::unpack(l))
            .collect();
        for (key, &l) in &self.collided {
            if hit(digest(key, 64)) {
                out.push(Location::unpack(l));
            }
        }
        out
    }

    /// Every live location (for garbage collection's accounting and for checks).
    pub fn locations(&self) -> impl Iterator<Item = Location> + '_ {
        self.by_digest
            .iter()
            .map(|(_, v)| v)
            .chain(self.collided.values().copied())
            .map(Location::unpack)
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
        assert_eq!(ix.insert(5, b"aaaa", at(1), false), None);
        // Same digest, the caller read the record and found another key.
        assert_eq!(ix.insert(5, b"bbbb", at(2), false), None);
        assert_eq!(ix.len(), 2);
        assert_eq!(ix.probe(5, b"bbbb"), Probe::Exact(at(2)));
        assert_eq!(ix.probe(5, b"aaaa"), Probe::Candidate(at(1)));
        assert_eq!(ix.insert(5, b"aaaa", at(3), true), Some(at(1)));
        assert_eq!(ix.probe(5, b"aaaa"), Probe::Candidate(at(3)));
        assert!(ix.points_at(5, b"aaaa", at(3)) && !ix.points_at(5, b"aaaa", at(1)));
        assert!(ix.points_at(5, b"bbbb", at(2)));
        assert!(!ix.relocate(5, b"aaaa", at(1), at(4)), "a stale location is not moved");
        assert!(ix.relocate(5, b"bbbb", at(2), at(5)));
        assert_eq!(ix.probe(5, b"bbbb"), Probe::Exact(at(5)));
        assert_eq!(ix.remove(5, b"bbbb", false), Some(at(5)));
        assert_eq!(ix.probe(5, b"bbbb"), Probe::Candidate(at(3)), "only a candidate is left");
        assert_eq!(ix.remove(5, b"aaaa", true), Some(at(3)));
        assert_eq!(ix.probe(5, b"aaaa"), Probe::Absent);
        assert!(ix.is_empty());
        assert_eq!(
            digest(b"xyzw", 20),
            digest(b"xyzw", 64) & !((1u64 << 48) - 1) | (digest(b"xyzw", 64) & 0xF)
        );
        assert_eq!(bucket_of(digest(b"\x12\x34zw", 64)), 0x1234);
    }
}
