//! The SST footer: fixed size, right-aligned at the very end of the SST image, so a reader that
//! knows only the extent finds it by reading the extent's last bytes.
//!
//! ```text
//! offset  size  type    field
//! 0       8     bytes   magic "shaleSST"
//! 8       4     u32 LE  format version (1 or 2, see `format`; the properties repeat it)
//! 12      4     u32 LE  zero (reserved for flags)
//! 16      12    handle  filter block (offset u64 LE, size u32 LE; size 0 = no filter)
//! 28      12    handle  index block
//! 40      12    handle  properties block
//! 52      8     u64 LE  image bytes: the whole SST image, footer included
//! 60      4     u32 LE  CRC32C of bytes 0..60
//! ```
//! The image length lets a reader check that it was handed the extent the SST was written to,
//! not a longer or shorter one whose last bytes happen to hold a footer.

use crate::error::{Error, Result};
use crate::sst::format::{
    BLOCK_HANDLE_BYTES, BlockHandle, SST_FORMAT_VERSION, SST_FORMAT_VERSION_MIN,
};

/// Bytes of the footer.
pub const FOOTER_BYTES: usize = 64;
/// The footer's first bytes.
pub const SST_MAGIC: [u8; 8] = *b"shaleSST";
/// Where the checksum starts.
const CRC_AT: usize = FOOTER_BYTES - 4;

/// The decoded footer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footer {
    /// Format version of the SST.
    pub format_version: u32,
    /// The filter block, `None` when the SST has no filter.
    pub filter: Option<BlockHandle>,
    /// The index block.
    pub index: BlockHandle,
    /// The properties block.
    pub properties: BlockHandle,
    /// Bytes of the whole image.
    pub image_bytes: u64,
}

impl Footer {
    /// Where the SST's blocks end: the properties block is written last, and the zero padding
    /// to the footer follows it (given back as a hole in a volume file, so never cached).
    pub fn blocks_end(&self) -> u64 {
        self.properties.offset + self.properties.stored_bytes()
    }

    /// The footer's bytes.
    pub fn encode(&self) -> [u8; FOOTER_BYTES] {
        let mut out = Vec::with_capacity(FOOTER_BYTES);
        out.extend_from_slice(&SST_MAGIC);
        out.extend_from_slice(&self.format_version.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        self.filter.unwrap_or_default().encode_into(&mut out);
        self.index.encode_into(&mut out);
        self.properties.encode_into(&mut out);
        out.extend_from_slice(&self.image_bytes.to_le_bytes());
        out.extend_from_slice(&crc32c::crc32c(&out).to_le_bytes());
        out.try_into().expect("footer is FOOTER_BYTES long")
    }

    /// Decodes the footer from the last [`FOOTER_BYTES`] of `tail`, the end of an image that
    /// ends at byte `image_end`, and checks every handle lies before the footer.
    ///
    /// # Errors
    /// [`Error::Corruption`] for a short tail, a wrong magic or checksum, a newer format version,
    /// a wrong image length or a handle outside the image.
    pub fn decode(tail: &[u8], image_end: u64) -> Result<Footer> {
        let at = image_end.saturating_sub(FOOTER_BYTES as u64);
        let bad = |why: &str| Error::corruption(format!("SST footer: {why}"), at);
        let b =
            tail.len().checked_sub(FOOTER_BYTES).map(|s| &tail[s..]).ok_or_else(|| bad("short"))?;
        if b[..8] != SST_MAGIC {
            return Err(bad("no SST magic"));
        }
        let crc = u32::from_le_bytes(b[CRC_AT..].try_into().expect("4 bytes"));
        if crc32c::crc32c(&b[..CRC_AT]) != crc {
            return Err(bad("checksum mismatch"));
        }
        let format_version = u32::from_le_bytes(b[8..12].try_into().expect("4 bytes"));
        if !(SST_FORMAT_VERSION_MIN..=SST_FORMAT_VERSION).contains(&format_version) {
            return Err(bad(&format!(
                "format version {format_version}, this build reads \
                 {SST_FORMAT_VERSION_MIN} to {SST_FORMAT_VERSION}"
            )));
        }
        if b[12..16] != [0; 4] {
            return Err(bad("reserved bytes set"));
        }
        let handle = |i: usize| {
            let s = 16 + i * BLOCK_HANDLE_BYTES;
            BlockHandle::decode(&b[s..s + BLOCK_HANDLE_BYTES]).expect("12 bytes")
        };
        let (filter, index, properties) = (handle(0), handle(1), handle(2));
        let image_bytes = u64::from_le_bytes(b[52..60].try_into().expect("8 bytes"));
        if image_bytes != image_end {
            return Err(bad(&format!("written for {image_bytes} bytes, found in {image_end}")));
        }
        let filter = (filter != BlockHandle::default()).then_some(filter);
        let blocks_end = image_end - FOOTER_BYTES as u64;
        if !filter.iter().chain([&index, &properties]).all(|h| h.fits_before(blocks_end)) {
            return Err(bad("block handle outside the image"));
        }
        Ok(Footer { format_version, filter, index, properties, image_bytes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn footer() -> Footer {
        Footer {
            format_version: SST_FORMAT_VERSION,
            filter: Some(BlockHandle { offset: 100, size: 20 }),
            index: BlockHandle { offset: 125, size: 40 },
            properties: BlockHandle { offset: 170, size: 70 },
            image_bytes: 4096,
        }
    }

    #[test]
    fn round_trips_from_the_end_of_a_tail() {
        let f = footer();
        let mut tail = vec![0xee; 4096 - FOOTER_BYTES];
        tail.extend_from_slice(&f.encode());
        assert_eq!(Footer::decode(&tail, 4096).unwrap(), f);
        let none = Footer { filter: None, ..f };
        assert_eq!(Footer::decode(&none.encode(), 4096).unwrap(), none);
    }

    #[test]
    fn every_flipped_byte_and_wrong_length_is_corruption() {
        let b = footer().encode();
        for i in 0..FOOTER_BYTES {
            let mut bad = b;
            bad[i] ^= 0x10;
            assert!(matches!(Footer::decode(&bad, 4096), Err(Error::Corruption { .. })));
        }
        assert!(Footer::decode(&b[1..], 4096).is_err());
        assert!(Footer::decode(&b, 8192).is_err());
        let outside = Footer { index: BlockHandle { offset: 4000, size: 40 }, ..footer() };
        assert!(Footer::decode(&outside.encode(), 4096).is_err());
        let newer = Footer { format_version: SST_FORMAT_VERSION + 1, ..footer() };
        assert!(Footer::decode(&newer.encode(), 4096).is_err());
        let older = Footer { format_version: SST_FORMAT_VERSION_MIN, ..footer() };
        assert_eq!(Footer::decode(&older.encode(), 4096).unwrap(), older);
        let zero = Footer { format_version: 0, ..footer() };
        assert!(Footer::decode(&zero.encode(), 4096).is_err());
    }
}
