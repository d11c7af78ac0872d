//! The format header: what a volume is and how it is laid out.
//!
//! Written when the volume is created, in two copies (sector 0 of byte 0 and of byte 4096),
//! and otherwise only to repair a damaged copy from the valid one (`Volume`'s open, read-write
//! only): a crash can tear at most the copy being written, and the other still names the same
//! volume. Everything else on the volume is found from it.
//!
//! ```text
//! offset size field                    notes
//! 0      8    magic                    b"SHALEVOL"
//! 8      4    crc32c                   of bytes [12, 128), little-endian
//! 12     4    format version           u32; its position never changes, so a newer format is
//!                                      recognised before its checksum rules are known
//! 16     4    sector bytes             u32, the device's logical block size at creation
//! 20     4    flags                    u32, zero
//! 24     16   volume id                random bytes, names the volume in logs and tools
//! 40     8    version log offset       u64, mirror A; mirror B follows it
//! 48     8    version log bytes        u64, size of each mirror
//! 56     8    WAL offset               u64
//! 64     8    WAL bytes                u64
//! 72     8    slot offset              u64, slot 0
//! 80     8    slot bytes               u64
//! 88     8    created                  u64, seconds since the Unix epoch
//! 96     4    role                     u32 (format 2): 0 single, 1 fast, 2 capacity (`Role`)
//! 100    16   partner volume id        (format 2) fast: its capacity volume's id;
//!                                      capacity: its fast volume's id
//! 116    4    engine kind              u32 (format 3): 1 lsm, 2 hash, 3 table (`EngineKind`)
//! 120    8    reserved                 zero
//! 128    ..   zero to the sector's end (not covered by the checksum)
//! ```
//! All integers are little-endian. Format 1 has zeros at 96..128 and is a single volume;
//! format 2 added the role and partner (tiered stores); format 3 the engine kind. Every volume
//! is now written as format 3, so a shale that cannot tell engines apart refuses it as newer
//! rather than opening one engine's store with another (and wiping it). Formats 1 and 2 are
//! still read: their engine kind is `None`, and the engines recognise them by their payloads
//! (`engine_kind`'s module comment).

use crate::codec::{PutLe, le_u32, le_u64};
use crate::engine_kind::EngineKind;
use crate::layout::Layout;
use crate::tier::Role;

/// First bytes of every header copy.
pub const HEADER_MAGIC: &[u8; 8] = b"SHALEVOL";
/// The newest format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 3;
/// The first format version with a role and partner (tiered stores).
pub const FORMAT_VERSION_TIERS: u32 = 2;
/// The first format version with an engine kind.
pub const FORMAT_VERSION_ENGINE_KIND: u32 = 3;
/// Bytes of a header covered by its checksum, from the start of the copy.
pub const HEADER_BYTES: usize = 128;

/// The decoded header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Format version the volume was written with.
    pub format_version: u32,
    /// Random identity of the volume.
    pub volume_id: [u8; 16],
    /// Where the areas lie.
    pub layout: Layout,
    /// Creation time, seconds since the Unix epoch.
    pub created_unix_secs: u64,
    /// What the volume is in its store.
    pub role: Role,
    /// The other volume of a tiered store (zero for a single volume).
    pub partner_id: [u8; 16],
    /// The engine whose store this is; `None` in a header older than format 3.
    pub engine: Option<EngineKind>,
}

/// What one header copy turned out to be.
#[derive(Debug, PartialEq, Eq)]
pub enum HeaderCopy {
    /// A valid header.
    Valid(Header),
    /// All zero: nothing was ever written there.
    Blank,
    /// Not ours: no magic.
    Foreign,
    /// Our magic, a newer format version.
    Newer(u32),
    /// Our magic, but the checksum or the layout is wrong.
    Damaged,
}

impl Header {
    /// Encodes one copy into `HEADER_BYTES` bytes.
    pub fn encode(&self) -> Vec<u8> {
        let l = &self.layout;
        let mut b = Vec::with_capacity(HEADER_BYTES);
        b.extend_from_slice(HEADER_MAGIC);
        b.put_u32(0); // checksum, filled in below
        b.put_u32(self.format_version);
        b.put_u32(l.sector_bytes);
        b.put_u32(0);
        b.extend_from_slice(&self.volume_id);
        for v in [
            l.version_log_offset,
            l.version_log_bytes,
            l.wal_offset,
            l.wal_bytes,
            l.slot_offset,
            l.slot_bytes,
            self.created_unix_secs,
        ] {
            b.put_u64(v);
        }
        if self.format_version >= FORMAT_VERSION_TIERS {
            b.put_u32(self.role.code());
            b.extend_from_slice(&self.partner_id);
        }
        if self.format_version >= FORMAT_VERSION_ENGINE_KIND {
            let kind = self.engine.expect("a format 3 header names its engine");
            b.put_u32(kind.code());
        }
        b.resize(HEADER_BYTES, 0);
        let crc = crc32c::crc32c(&b[12..HEADER_BYTES]);
        b[8..12].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Classifies one copy (at least `HEADER_BYTES` long).
    pub fn decode(b: &[u8]) -> HeaderCopy {
        if b.len() < HEADER_BYTES {
            return HeaderCopy::Damaged;
        }
        if &b[..8] != HEADER_MAGIC {
            return if b.iter().all(|&x| x == 0) { HeaderCopy::Blank } else { HeaderCopy::Foreign };
        }
        let format_version = le_u32(b, 12);
        if format_version > FORMAT_VERSION {
            return HeaderCopy::Newer(format_version);
        }
        if le_u32(b, 8) != crc32c::crc32c(&b[12..HEADER_BYTES]) || format_version == 0 {
            return HeaderCopy::Damaged;
        }
        let layout = Layout {
            sector_bytes: le_u32(b, 16),
            version_log_offset: le_u64(b, 40),
            version_log_bytes: le_u64(b, 48),
            wal_offset: le_u64(b, 56),
            wal_bytes: le_u64(b, 64),
            slot_offset: le_u64(b, 72),
            slot_bytes: le_u64(b, 80),
        };
        if !layout.is_consistent() || le_u32(b, 20) != 0 {
            return HeaderCopy::Damaged;
        }
        let (role, partner_id) = if format_version >= FORMAT_VERSION_TIERS {
            match Role::from_code(le_u32(b, 96)) {
                Some(role) => (role, b[100..116].try_into().unwrap()),
                None => return HeaderCopy::Damaged,
            }
        } else {
            (Role::Single, [0; 16])
        };
        let engine = if format_version >= FORMAT_VERSION_ENGINE_KIND {
            match EngineKind::from_code(le_u32(b, 116)) {
                Some(kind) => Some(kind),
                None => return HeaderCopy::Damaged,
            }
        } else {
            None
        };
        HeaderCopy::Valid(Header {
            format_version,
            volume_id: b[24..40].try_into().unwrap(),
            layout,
            created_unix_secs: le_u64(b, 88),
            role,
            partner_id,
            engine,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::LayoutOptions;

    fn sample() -> Header {
        Header {
            format_version: FORMAT_VERSION,
            volume_id: *b"0123456789abcdef",
            layout: Layout::new(&LayoutOptions::default(), 4096),
            created_unix_secs: 1_800_000_000,
            role: Role::Single,
            partner_id: [0; 16],
            engine: Some(EngineKind::Lsm),
        }
    }

    fn tiered(role: Role) -> Header {
        Header { role, partner_id: *b"fedcba9876543210", ..sample() }
    }

    #[test]
    fn round_trip() {
        for engine in EngineKind::ALL {
            let h = Header { engine: Some(engine), ..sample() };
            assert_eq!(Header::decode(&h.encode()), HeaderCopy::Valid(h));
        }
        for role in [Role::Fast, Role::Capacity] {
            let h = tiered(role);
            assert_eq!(Header::decode(&h.encode()), HeaderCopy::Valid(h));
        }
    }

    /// Volumes written before engine kinds still read, with no kind: format 1 (a single
    /// volume, zeros past byte 96) and format 2 (a tiered one).
    #[test]
    fn older_formats_read_without_an_engine_kind() {
        let v1 = Header { format_version: 1, engine: None, ..sample() };
        let enc = v1.encode();
        assert!(enc[96..].iter().all(|&b| b == 0));
        assert_eq!(Header::decode(&enc), HeaderCopy::Valid(v1));
        let v2 = Header { format_version: 2, engine: None, ..tiered(Role::Fast) };
        let enc = v2.encode();
        assert!(enc[116..].iter().all(|&b| b == 0));
        assert_eq!(Header::decode(&enc), HeaderCopy::Valid(v2));
    }

    #[test]
    fn an_unknown_engine_kind_is_damaged() {
        let mut enc = sample().encode();
        for code in [0u32, 9] {
            enc[116..120].copy_from_slice(&code.to_le_bytes());
            let crc = crc32c::crc32c(&enc[12..HEADER_BYTES]);
            enc[8..12].copy_from_slice(&crc.to_le_bytes());
            assert_eq!(Header::decode(&enc), HeaderCopy::Damaged);
        }
    }

    #[test]
    fn an_unknown_role_is_damaged() {
        let mut enc = tiered(Role::Fast).encode();
        enc[96..100].copy_from_slice(&7u32.to_le_bytes());
        let crc = crc32c::crc32c(&enc[12..HEADER_BYTES]);
        enc[8..12].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(Header::decode(&enc), HeaderCopy::Damaged);
    }

    #[test]
    fn every_flipped_byte_is_caught() {
        for enc in [sample().encode(), tiered(Role::Capacity).encode()] {
            for i in 0..HEADER_BYTES {
                let mut b = enc.clone();
                b[i] ^= 0x10;
                let got = Header::decode(&b);
                assert!(
                    matches!(got, HeaderCopy::Damaged | HeaderCopy::Foreign | HeaderCopy::Newer(_)),
                    "flip at {i} gave {got:?}"
                );
            }
        }
    }

    /// Found while writing the fuzz targets (fuzz/regressions/format_header/
    /// version-log-size-overflows-layout-sum): a checksummed header whose version log size doubled overflows u64
    /// made the layout check panic (debug) or wrap and accept the layout (release).
    #[test]
    fn area_sizes_that_overflow_u64_are_damaged() {
        let mut h = sample();
        h.layout.version_log_bytes = 1 << 63;
        // 2 * 2^63 wraps to 0, so the wrapped sum would put the WAL right after the headers.
        h.layout.wal_offset = h.layout.version_log_offset;
        h.layout.slot_offset = h.layout.wal_offset + h.layout.wal_bytes;
        assert_eq!(Header::decode(&h.encode()), HeaderCopy::Damaged);
        let mut h = sample();
        h.layout.wal_bytes = u64::MAX - 4095;
        h.layout.slot_offset = h.layout.wal_offset.wrapping_add(h.layout.wal_bytes);
        assert_eq!(Header::decode(&h.encode()), HeaderCopy::Damaged);
    }

    #[test]
    fn truncated_blank_foreign_and_newer() {
        let enc = sample().encode();
        assert_eq!(Header::decode(&enc[..100]), HeaderCopy::Damaged);
        assert_eq!(Header::decode(&[0u8; 512]), HeaderCopy::Blank);
        let mut ext4ish = vec![0u8; 512];
        ext4ish[56] = 0x53;
        assert_eq!(Header::decode(&ext4ish), HeaderCopy::Foreign);
        let mut newer = enc.clone();
        newer[12..16].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
        assert_eq!(Header::decode(&newer), HeaderCopy::Newer(FORMAT_VERSION + 1));
    }
}
