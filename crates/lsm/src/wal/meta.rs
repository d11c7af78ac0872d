//! The WAL metadata page (SpanDB): which memtable generation (LTN) uses each log group and in
//! which state. Written in two copies (pages 0 and 1 of the WAL area), alternately, each write
//! with a higher generation, so a write torn by a crash leaves the previous copy intact.
//!
//! ```text
//! offset size   field
//! 0      4      magic b"SHWM"
//! 4      4      crc32c (u32 LE) of bytes [8, 4096)
//! 8      8      generation (u64 LE), +1 per metadata write
//! 16     4      group count G (u32 LE)
//! 20     4      pages per group (u32 LE)
//! 24     16*G   groups: LTN (u64 LE; 0 = never used) | state (u8: 0 free, 1 active,
//!               2 sealed) | 3 reserved zero bytes | sealed end page (u32 LE; pages written
//!               when the group was sealed, 0 otherwise)
//! ..     ..     zero to the end of the page (covered by the checksum)
//! ```

use super::page::PAGE_BYTES;

/// Magic of a metadata page.
pub const META_MAGIC: &[u8; 4] = b"SHWM";
/// Bytes of the metadata header.
const META_HEADER_BYTES: usize = 24;
/// Bytes of one group entry.
const GROUP_ENTRY_BYTES: usize = 16;
/// Most groups a metadata page can describe.
pub const GROUPS_MAX: u32 = ((PAGE_BYTES - META_HEADER_BYTES) / GROUP_ENTRY_BYTES) as u32;

/// What a log group is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupState {
    /// Holds no unflushed log.
    Free = 0,
    /// The log of the active memtable.
    Active = 1,
    /// The log of a sealed memtable waiting for its flush; `end` pages are durable.
    Sealed = 2,
}

/// One group's entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupEntry {
    /// Generation using the group (0 = never used).
    pub ltn: u64,
    /// State.
    pub state: GroupState,
    /// Pages written, for a sealed group.
    pub end: u32,
}

/// The decoded metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalMeta {
    /// Write generation of this copy.
    pub generation: u64,
    /// Pages in each group.
    pub pages_per_group: u32,
    /// One entry per group.
    pub groups: Vec<GroupEntry>,
}

impl WalMeta {
    /// Metadata of a WAL area no generation has used.
    pub fn empty(groups: u32, pages_per_group: u32) -> WalMeta {
        let free = GroupEntry { ltn: 0, state: GroupState::Free, end: 0 };
        WalMeta { generation: 0, pages_per_group, groups: vec![free; groups as usize] }
    }

    /// Encodes into one page.
    pub fn encode(&self) -> Vec<u8> {
        assert!(self.groups.len() as u32 <= GROUPS_MAX, "too many WAL groups");
        let mut b = vec![0u8; PAGE_BYTES];
        b[..4].copy_from_slice(META_MAGIC);
        b[8..16].copy_from_slice(&self.generation.to_le_bytes());
        b[16..20].copy_from_slice(&(self.groups.len() as u32).to_le_bytes());
        b[20..24].copy_from_slice(&self.pages_per_group.to_le_bytes());
        for (i, g) in self.groups.iter().enumerate() {
            let at = META_HEADER_BYTES + i * GROUP_ENTRY_BYTES;
            b[at..at + 8].copy_from_slice(&g.ltn.to_le_bytes());
            b[at + 8] = g.state as u8;
            b[at + 12..at + 16].copy_from_slice(&g.end.to_le_bytes());
        }
        let crc = crc32c::crc32c(&b[8..]);
        b[4..8].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes one copy; `None` if it is not a valid metadata page.
    pub fn decode(b: &[u8]) -> Option<WalMeta> {
        if b.len() != PAGE_BYTES || &b[..4] != META_MAGIC {
            return None;
        }
        if u32::from_le_bytes(b[4..8].try_into().ok()?) != crc32c::crc32c(&b[8..]) {
            return None;
        }
        let generation = u64::from_le_bytes(b[8..16].try_into().ok()?);
        let count = u32::from_le_bytes(b[16..20].try_into().ok()?);
        let pages_per_group = u32::from_le_bytes(b[20..24].try_into().ok()?);
        if count > GROUPS_MAX {
            return None;
        }
        let mut groups = Vec::with_capacity(count as usize);
        for i in 0..count as usize {
            let at = META_HEADER_BYTES + i * GROUP_ENTRY_BYTES;
            let state = match b[at + 8] {
                0 => GroupState::Free,
                1 => GroupState::Active,
                2 => GroupState::Sealed,
                _ => return None,
            };
            if b[at + 9..at + 12] != [0, 0, 0] {
                return None;
            }
            let end = u32::from_le_bytes(b[at + 12..at + 16].try_into().ok()?);
            if end > pages_per_group {
                return None;
            }
            let ltn = u64::from_le_bytes(b[at..at + 8].try_into().ok()?);
            groups.push(GroupEntry { ltn, state, end });
        }
        Some(WalMeta { generation, pages_per_group, groups })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> WalMeta {
        let mut m = WalMeta::empty(4, 100);
        m.generation = 17;
        m.groups[1] = GroupEntry { ltn: 5, state: GroupState::Sealed, end: 40 };
        m.groups[2] = GroupEntry { ltn: 6, state: GroupState::Active, end: 0 };
        m
    }

    #[test]
    fn round_trip() {
        assert_eq!(WalMeta::decode(&sample().encode()), Some(sample()));
    }

    #[test]
    fn every_flipped_byte_is_caught() {
        let enc = sample().encode();
        for i in 0..PAGE_BYTES {
            let mut b = enc.clone();
            b[i] ^= 0x01;
            assert_eq!(WalMeta::decode(&b), None, "flip at {i} accepted");
        }
        assert_eq!(WalMeta::decode(&enc[..100]), None);
    }
}
