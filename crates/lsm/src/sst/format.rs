//! The SST image: how blocks, their trailers, block handles and the properties are laid out.
//!
//! An SST is written into an extent of whole slots and read knowing only that extent, so the
//! fixed-size footer sits right-aligned at the very end of the image (LDS: a reader reads the
//! last 4 KiB and finds everything else from there).
//!
//! ```text
//! offset           size     what
//! 0                ...      data block 0 | trailer, data block 1 | trailer, ...
//! filter handle    ...      filter block | trailer          (absent when bits per key is 0)
//! range-del handle ...      range-deletion block | trailer  (v2; absent without range
//!                                                            tombstones; see `range_del_block`)
//! index handle     ...      index block | trailer           (last key of each data block ->
//!                                                            data block handle)
//! props handle     ...      properties block | trailer
//! ...              ...      zero padding
//! len - 64         64       footer (see `footer`)
//! ```
//! The image length is a multiple of the volume's slot size, so the footer's last byte is the
//! extent's last byte.
//!
//! Uncompressed data blocks may have zero bytes before them (`SstOptions::block_align`, the
//! default): a block of 4 KiB or less that would cross a 4 KiB boundary of the image starts at
//! the boundary instead, so that reading it reads one page. Only the index says where data
//! blocks are; nothing reads the zero bytes, and readers of any version skip them, since they
//! follow handles, never the bytes after a block.
//! ```text
//! offset  ...  | block 7 | trailer | 0 0 ... 0 | block 8 | trailer | block 9 ...
//!                                  ^ up to the page boundary
//! ```
//!
//! Every block is followed by a 5-byte trailer:
//! ```text
//! offset  size  type    field
//! 0       1     u8      compression of the block bytes (0 none, 1 LZ4, 2 zstd)
//! 1       4     u32 LE  CRC32C of the stored block bytes followed by the compression byte
//! ```
//! A compressed block's stored bytes are `raw length (u32 LE) | codec output`; the length lets
//! the reader allocate once and refuse a block that would decompress to more than
//! [`BLOCK_RAW_BYTES_MAX`].
//!
//! A block handle (the value of an index entry; the footer's handles) is fixed width:
//! ```text
//! offset  size  type    field
//! 0       8     u64 LE  offset of the block in the SST image
//! 8       4     u32 LE  stored bytes of the block, trailer excluded
//! ```
//!
//! The properties block (stored like any block, with a trailer, never compressed):
//! ```text
//! offset  size  type    field
//! 0       4     u32 LE  format version of the SST
//! 4       1     u8      compression asked for (0 none, 1 LZ4, 2 zstd)
//! 5       3     -       zero
//! 8       8     u64 LE  entries
//! 16      8     u64 LE  data blocks
//! 24      8     u64 LE  data bytes: stored data blocks with their trailers
//! 32      8     u64 LE  raw key bytes (sum of internal key lengths)
//! 40      8     u64 LE  raw value bytes
//! 48      4     u32 LE  bloom bits per key (0: no filter)
//! 52      4     u32 LE  smallest key length S
//! 56      S     bytes   smallest internal key (empty when there are no entries)
//! 56+S    4     u32 LE  largest key length L
//! 60+S    L     bytes   largest internal key
//! -- format version 2 on:
//! 60+S+L  8     u64 LE  range tombstones R
//! 68+S+L  12    handle  range-deletion block (all zero when R is 0)
//! ```
//! The smallest and largest keys, and the entry count, are those of the point entries; the
//! bounds the engine records for an SST also cover its range tombstones (`SstImage`).
//!
//! Format versions: 1 had no range tombstones; 2 adds the range-deletion block and the two
//! properties fields. This build writes 2 and reads both. A build that reads only version 1
//! refuses a version 2 SST (its footer check) instead of reading it without its tombstones,
//! which would bring deleted keys back.

use crate::error::{Error, Result};

/// Format version written by this code. Only ever goes forward.
pub const SST_FORMAT_VERSION: u32 = 2;
/// The oldest format version this code reads.
pub const SST_FORMAT_VERSION_MIN: u32 = 1;
/// The first format version with a range-deletion block.
pub const SST_FORMAT_VERSION_RANGE_DEL: u32 = 2;
/// Bytes of the trailer after every block.
pub const BLOCK_TRAILER_BYTES: usize = 5;
/// Bytes of an encoded [`BlockHandle`].
pub const BLOCK_HANDLE_BYTES: usize = 12;
/// The largest block a reader decompresses: far above any configured block size, low enough
/// that a forged length cannot make a reader allocate gigabytes.
pub const BLOCK_RAW_BYTES_MAX: usize = 64 << 20;
/// zstd level: the library's default, a fair trade of speed and size for flush and compaction.
const ZSTD_LEVEL: i32 = 3;

/// How block bytes are compressed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Compression {
    /// Stored as is.
    #[default]
    None = 0,
    /// LZ4 block format (lz4_flex).
    Lz4 = 1,
    /// Zstandard.
    Zstd = 2,
}

impl Compression {
    /// Decodes a compression byte.
    pub fn from_u8(v: u8) -> Option<Compression> {
        match v {
            0 => Some(Compression::None),
            1 => Some(Compression::Lz4),
            2 => Some(Compression::Zstd),
            _ => None,
        }
    }

    /// Compresses `raw` into the stored form (raw length prefix + codec output); `None` for
    /// [`Compression::None`].
    pub fn compress(self, raw: &[u8]) -> Option<Vec<u8>> {
        let codec = match self {
            Compression::None => return None,
            Compression::Lz4 => lz4_flex::block::compress(raw),
            // Compressing into a Vec fails only on allocation failure inside the library.
            Compression::Zstd => zstd::bulk::compress(raw, ZSTD_LEVEL).ok()?,
        };
        let len = u32::try_from(raw.len()).ok()?;
        let mut out = Vec::with_capacity(4 + codec.len());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&codec);
        Some(out)
    }

    /// Undoes [`Compression::compress`] into `out` (cleared first, its capacity reused);
    /// `None` when the stored bytes are damaged.
    fn decompress_into(self, stored: &[u8], out: &mut Vec<u8>) -> Option<()> {
        out.clear();
        if self == Compression::None {
            out.extend_from_slice(stored);
            return Some(());
        }
        let (len, codec) = stored.split_first_chunk::<4>()?;
        let len = u32::from_le_bytes(*len) as usize;
        if len > BLOCK_RAW_BYTES_MAX {
            return None;
        }
        match self {
            Compression::None => unreachable!("handled above"),
            Compression::Lz4 => {
                out.resize(len, 0);
                let n = lz4_flex::block::decompress_into(codec, out).ok()?;
                (n == len).then_some(())
            }
            Compression::Zstd => {
                out.resize(len, 0);
                let n = zstd::bulk::decompress_to_buffer(codec, out).ok()?;
                (n == len).then_some(())
            }
        }
    }
}

/// Where a block lies in the SST image.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockHandle {
    /// Byte offset of the block in the image.
    pub offset: u64,
    /// Stored bytes of the block, trailer excluded.
    pub size: u32,
}

impl BlockHandle {
    /// Appends the 12-byte encoding.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
    }

    /// The 12-byte encoding.
    pub fn encode(&self) -> [u8; BLOCK_HANDLE_BYTES] {
        let mut out = [0; BLOCK_HANDLE_BYTES];
        out[..8].copy_from_slice(&self.offset.to_le_bytes());
        out[8..].copy_from_slice(&self.size.to_le_bytes());
        out
    }

    /// Decodes exactly 12 bytes; `None` for any other length.
    pub fn decode(b: &[u8]) -> Option<BlockHandle> {
        let b: &[u8; BLOCK_HANDLE_BYTES] = b.try_into().ok()?;
        Some(BlockHandle {
            offset: u64::from_le_bytes(b[..8].try_into().ok()?),
            size: u32::from_le_bytes(b[8..].try_into().ok()?),
        })
    }

    /// Bytes the block and its trailer take.
    pub fn stored_bytes(&self) -> u64 {
        u64::from(self.size) + BLOCK_TRAILER_BYTES as u64
    }

    /// Whether the block and its trailer lie within the first `limit` bytes of the image.
    pub fn fits_before(&self, limit: u64) -> bool {
        self.offset.checked_add(self.stored_bytes()).is_some_and(|end| end <= limit)
    }
}

/// The CRC32C a trailer holds for `stored` block bytes and their compression byte.
fn block_crc(stored: &[u8], compression: u8) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(stored), &[compression])
}

/// Appends a block to the image: compressed when that saves at least an eighth, then the
/// trailer. Returns its handle.
pub fn write_block(image: &mut Vec<u8>, raw: &[u8], compression: Compression) -> BlockHandle {
    let compressed = compression.compress(raw).filter(|c| c.len() <= raw.len() - raw.len() / 8);
    let (stored, kind) = match &compressed {
        Some(c) => (&c[..], compression),
        None => (raw, Compression::None),
    };
    let handle = BlockHandle {
        offset: image.len() as u64,
        size: u32::try_from(stored.len()).expect("block over 4 GiB"),
    };
    image.extend_from_slice(stored);
    image.push(kind as u8);
    image.extend_from_slice(&block_crc(stored, kind as u8).to_le_bytes());
    handle
}

/// Checks a block's trailer and decompresses it. `stored` holds the block and its trailer, read
/// from `handle`; `what` names the block in errors.
///
/// # Errors
/// [`Error::Corruption`] for a short read, a checksum mismatch, an unknown compression byte or
/// bytes that do not decompress to their recorded length.
pub fn decode_block(stored: &[u8], handle: BlockHandle, what: &str) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    decode_block_into(stored, handle, what, &mut out)?;
    Ok(out)
}

/// [`decode_block`] into `out`, whose allocation is reused: the block cache hands out the
/// buffers of blocks it evicted ([`BlockCache::buffer`](crate::cache::BlockCache::buffer)).
/// On an error `out` holds nothing of use.
///
/// # Errors
/// As [`decode_block`].
pub fn decode_block_into(
    stored: &[u8],
    handle: BlockHandle,
    what: &str,
    out: &mut Vec<u8>,
) -> Result<()> {
    let bad = |why: &str| Error::corruption(format!("SST {what}: {why}"), handle.offset);
    let size = handle.size as usize;
    if stored.len() != size + BLOCK_TRAILER_BYTES {
        return Err(bad("short block"));
    }
    let (body, trailer) = stored.split_at(size);
    let kind = trailer[0];
    let crc = u32::from_le_bytes(trailer[1..].try_into().expect("four bytes"));
    if block_crc(body, kind) != crc {
        return Err(bad("checksum mismatch"));
    }
    let compression = Compression::from_u8(kind).ok_or_else(|| bad("unknown compression"))?;
    compression.decompress_into(body, out).ok_or_else(|| bad("does not decompress"))
}

/// What an SST holds, summed up when it was built.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SstProperties {
    /// Format version of the SST.
    pub format_version: u32,
    /// Compression asked for (blocks that did not shrink enough are stored uncompressed).
    pub compression: Compression,
    /// Entries (every version of every key counts).
    pub entries: u64,
    /// Data blocks.
    pub data_blocks: u64,
    /// Stored bytes of the data blocks, trailers included.
    pub data_bytes: u64,
    /// Sum of the internal key lengths.
    pub raw_key_bytes: u64,
    /// Sum of the value lengths.
    pub raw_value_bytes: u64,
    /// Bloom bits per key (0: no filter).
    pub bloom_bits_per_key: u32,
    /// The smallest internal key (empty when there are no entries).
    pub smallest: Vec<u8>,
    /// The largest internal key (empty when there are no entries).
    pub largest: Vec<u8>,
    /// Range tombstones in the range-deletion block (always 0 in format version 1).
    pub range_tombstones: u64,
    /// The range-deletion block, `None` without range tombstones.
    pub range_del: Option<BlockHandle>,
}

/// Bytes of the properties before the smallest key.
pub(crate) const PROPERTIES_FIXED_BYTES: usize = 56;

impl SstProperties {
    /// The properties block's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(PROPERTIES_FIXED_BYTES + 4 + self.smallest.len());
        out.extend_from_slice(&self.format_version.to_le_bytes());
        out.extend_from_slice(&[self.compression as u8, 0, 0, 0]);
        for v in [
            self.entries,
            self.data_blocks,
            self.data_bytes,
            self.raw_key_bytes,
            self.raw_value_bytes,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&self.bloom_bits_per_key.to_le_bytes());
        for k in [&self.smallest, &self.largest] {
            out.extend_from_slice(&u32::try_from(k.len()).expect("key over 4 GiB").to_le_bytes());
            out.extend_from_slice(k);
        }
        if self.format_version >= SST_FORMAT_VERSION_RANGE_DEL {
            out.extend_from_slice(&self.range_tombstones.to_le_bytes());
            self.range_del.unwrap_or_default().encode_into(&mut out);
        } else {
            assert!(self.range_tombstones == 0, "format version 1 has no range tombstones");
        }
        out
    }

    /// Decodes a properties block found at `offset`.
    ///
    /// # Errors
    /// [`Error::Corruption`] for a short, overlong or inconsistent block.
    pub fn decode(b: &[u8], offset: u64) -> Result<SstProperties> {
        let bad = |why: &str| Error::corruption(format!("SST properties: {why}"), offset);
        let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
        if b.len() < PROPERTIES_FIXED_BYTES {
            return Err(bad("short"));
        }
        let compression = Compression::from_u8(b[4]).ok_or_else(|| bad("unknown compression"))?;
        if b[5..8] != [0, 0, 0] {
            return Err(bad("reserved bytes set"));
        }
        let mut pos = PROPERTIES_FIXED_BYTES - 4;
        let mut key = || -> Result<Vec<u8>> {
            if b.len() < pos + 4 {
                return Err(bad("short key length"));
            }
            let len = u32_at(pos) as usize;
            pos += 4;
            let k = b.get(pos..pos.saturating_add(len)).ok_or_else(|| bad("short key"))?;
            pos += len;
            Ok(k.to_vec())
        };
        let (smallest, largest) = (key()?, key()?);
        let format_version = u32_at(0);
        if !(SST_FORMAT_VERSION_MIN..=SST_FORMAT_VERSION).contains(&format_version) {
            return Err(bad(&format!("unknown format version {format_version}")));
        }
        let (mut range_tombstones, mut range_del) = (0, None);
        if format_version >= SST_FORMAT_VERSION_RANGE_DEL {
            let fields = b.get(pos..pos + 8 + BLOCK_HANDLE_BYTES).ok_or_else(|| bad("short"))?;
            range_tombstones = u64::from_le_bytes(fields[..8].try_into().expect("8 bytes"));
            let h = BlockHandle::decode(&fields[8..]).expect("12 bytes");
            range_del = (h != BlockHandle::default()).then_some(h);
            if (range_tombstones == 0) != range_del.is_none() {
                return Err(bad("range tombstone count and block disagree"));
            }
            pos += fields.len();
        }
        if pos != b.len() {
            return Err(bad("trailing bytes"));
        }
        let props = SstProperties {
            format_version,
            compression,
            entries: u64_at(8),
            data_blocks: u64_at(16),
            data_bytes: u64_at(24),
            raw_key_bytes: u64_at(32),
            raw_value_bytes: u64_at(40),
            bloom_bits_per_key: u32_at(48),
            smallest,
            largest,
            range_tombstones,
            range_del,
        };
        let keys_ok = if props.entries == 0 {
            props.smallest.is_empty() && props.largest.is_empty()
        } else {
            props.smallest.len() >= crate::key::TRAILER_BYTES
                && props.largest.len() >= crate::key::TRAILER_BYTES
                && crate::key::compare(&props.smallest, &props.largest).is_le()
        };
        if !keys_ok {
            return Err(bad("smallest and largest keys do not fit the entry count"));
        }
        Ok(props)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_round_trip_in_every_compression() {
        let compressible = b"abcdefgh".repeat(200);
        let mut rng = <rand::rngs::SmallRng as rand::SeedableRng>::seed_from_u64(3);
        let random: Vec<u8> = (0..1600).map(|_| rand::Rng::r#gen(&mut rng)).collect();
        for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
            for raw in [&compressible[..], &random[..], b"x"] {
                let mut image = vec![9; 3];
                let h = write_block(&mut image, raw, c);
                assert_eq!(h.offset, 3);
                assert!(h.fits_before(image.len() as u64));
                let stored = &image[3..];
                let kind = stored[h.size as usize];
                if c != Compression::None && raw.len() > 100 && raw == &compressible[..] {
                    assert_eq!(kind, c as u8, "compressible block stored uncompressed");
                }
                if raw == &random[..] || raw.len() == 1 {
                    assert_eq!(kind, 0, "incompressible block kept compressed");
                }
                assert_eq!(decode_block(stored, h, "test").unwrap(), raw);
                for i in 0..stored.len() {
                    let mut bad = stored.to_vec();
                    bad[i] ^= 0x40;
                    assert!(matches!(decode_block(&bad, h, "test"), Err(Error::Corruption { .. })));
                }
                assert!(decode_block(&stored[1..], h, "test").is_err());
            }
        }
    }

    #[test]
    fn forged_decompressed_lengths_are_refused() {
        // The output buffer starts with stale bytes, as a recycled cache buffer does.
        let mut out = vec![9u8; 3000];
        for c in [Compression::Lz4, Compression::Zstd] {
            let mut stored = c.compress(&[7; 1000]).unwrap();
            assert_eq!(c.decompress_into(&stored, &mut out), Some(()));
            assert_eq!(out, vec![7; 1000]);
            stored[..4].copy_from_slice(&999u32.to_le_bytes());
            assert_eq!(c.decompress_into(&stored, &mut out), None);
            stored[..4].copy_from_slice(&u32::MAX.to_le_bytes());
            assert_eq!(c.decompress_into(&stored, &mut out), None);
            assert_eq!(c.decompress_into(&[1, 0], &mut out), None);
        }
    }

    #[test]
    fn decoding_into_a_used_buffer_leaves_only_the_block() {
        let raw: Vec<u8> = (0..5000u32).map(|i| (i % 7) as u8).collect();
        for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
            let mut img = Vec::new();
            let h = write_block(&mut img, &raw, c);
            // Larger and smaller than the block, full of other bytes.
            for stale in [vec![0xAB; 9000], vec![0xCD; 10]] {
                let mut out = stale;
                decode_block_into(&img, h, "test", &mut out).unwrap();
                assert_eq!(out, raw, "{c:?}");
            }
        }
    }

    #[test]
    fn properties_round_trip_and_refuse_damage() {
        let p = SstProperties {
            format_version: SST_FORMAT_VERSION,
            compression: Compression::Zstd,
            entries: 3,
            data_blocks: 1,
            data_bytes: 100,
            raw_key_bytes: 30,
            raw_value_bytes: 40,
            bloom_bits_per_key: 10,
            smallest: crate::key::encode(b"a", 5, crate::key::Kind::Put),
            largest: crate::key::encode(b"b", 1, crate::key::Kind::Delete),
            range_tombstones: 2,
            range_del: Some(BlockHandle { offset: 4000, size: 60 }),
        };
        let v1 =
            SstProperties { format_version: 1, range_tombstones: 0, range_del: None, ..p.clone() };
        let none = SstProperties { range_tombstones: 0, range_del: None, ..p.clone() };
        for p in [&p, &v1, &none] {
            let b = p.encode();
            assert_eq!(&SstProperties::decode(&b, 0).unwrap(), p);
            for cut in 0..b.len() {
                assert!(SstProperties::decode(&b[..cut], 0).is_err());
            }
            let mut long = b.clone();
            long.push(0);
            assert!(SstProperties::decode(&long, 0).is_err());
        }
        // Version 1 properties are 20 bytes shorter: no count, no handle.
        assert_eq!(p.encode().len(), v1.encode().len() + 8 + BLOCK_HANDLE_BYTES);
        let disagree = SstProperties { range_tombstones: 0, ..p.clone() };
        assert!(SstProperties::decode(&disagree.encode(), 0).is_err());
        let newer = SstProperties { format_version: SST_FORMAT_VERSION + 1, ..none };
        assert!(SstProperties::decode(&newer.encode(), 0).is_err());
        let swapped =
            SstProperties { smallest: p.largest.clone(), largest: p.smallest.clone(), ..p };
        assert!(SstProperties::decode(&swapped.encode(), 0).is_err());
    }
}
