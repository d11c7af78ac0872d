//! Builds an SST image in memory, ready to be written into an extent.
//!
//! Building runs these stages, in order:
//! 1. `add`: entries arrive in ascending internal key order and go into the current data
//!    block; each new user key's bloom hash is kept for the filter.
//!    Range tombstones (`add_range_tombstone`) may arrive in any order and are kept aside.
//! 2. When the data block reaches `block_bytes` it is compressed (kept only if that saves an
//!    eighth), written with its trailer, and its last key and handle go into the index block.
//! 3. `finish`: the last data block, then the filter, range-deletion (sorted, the pieces of
//!    one tombstone joined), index and properties blocks, then zero padding and the footer, so
//!    that the image is whole slots and the footer ends it.
//!
//! The image need not stay in memory while it grows: `take_written` hands out the bytes of
//! the data blocks written so far (aligned for O_DIRECT) to be written to the device at once,
//! and `finish` returns only what follows them (`SstImage::base`). A flush or compaction
//! output thus holds about one write request of its SST instead of all of it (a 64 MiB SST
//! was 64 MiB of heap, two or three of them at a time: what got the process killed in a
//! 1 GiB memory cgroup, BENCHMARKS.md, regime (c)). `set_block_sink` gives each data block
//! away as it is cut, uncompressed, to fill the block cache from.

use shale_io::SECTOR_SIZE;

use crate::error::{Error, Result};
use crate::key;
use crate::range_del::{self, RangeTombstone};
use crate::sst::block::{BlockBuilder, RESTART_INTERVAL_DEFAULT};
use crate::sst::bloom::{BITS_PER_KEY_DEFAULT, FILTER_BYTES_MIN, bloom_hash, build_filter};
use crate::sst::footer::{FOOTER_BYTES, Footer};
use crate::sst::format::{
    BLOCK_HANDLE_BYTES, BLOCK_RAW_BYTES_MAX, BLOCK_TRAILER_BYTES, BlockHandle, Compression,
    PROPERTIES_FIXED_BYTES, SST_FORMAT_VERSION, SstProperties, write_block,
};
use crate::sst::range_del_block;

/// Options of the SSTs a builder makes. [`SstOptions::validate`] gives each its range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SstOptions {
    /// Uncompressed bytes a data block is cut at (`1..=`[`BLOCK_BYTES_MAX`]).
    pub block_bytes: usize,
    /// Entries between restart points in data blocks (`1..=`[`RESTART_INTERVAL_MAX`]).
    pub restart_interval: usize,
    /// Bloom filter bits per user key; 0 builds no filter (`0..=`[`BLOOM_BITS_PER_KEY_MAX`]).
    pub bloom_bits_per_key: u32,
    /// How data blocks are compressed.
    pub compression: Compression,
    /// Keeps uncompressed data blocks from crossing a [`BLOCK_ALIGN_BYTES`] boundary
    /// (RocksDB's `block_align`, `shale bench --block_align`) where that costs little: with
    /// `block_bytes` of a page or less, a block is cut before the entry that would take it
    /// (and its trailer) past `block_bytes`, and one that would cross a boundary starts at the
    /// next one, the bytes before it left zero. Reading a block then reads one page, not two:
    /// half the device bytes of an O_DIRECT read and half the page cache a buffered one keeps.
    /// The padding is bounded (`ALIGN_PAD_MAX`, an eighth of a page): where it would pass
    /// that (entries of more than about an eighth of a page, such as 1 KB values: three to a
    /// 4 KiB page would leave a quarter of every page empty), the block is not cut early and
    /// crosses the boundary instead, as without the option. Compressed blocks and larger
    /// blocks are never padded.
    pub block_align: bool,
}

/// The boundary [`SstOptions::block_align`] keeps blocks from crossing: a page, and the device
/// block of every device shale runs on.
pub const BLOCK_ALIGN_BYTES: usize = 4096;

/// Most zero bytes [`SstOptions::block_align`] leaves before a block (or at the end of one cut
/// early): an eighth of a page, so that aligned SSTs are at most about 1/8 larger than
/// unaligned ones and, for the small entries alignment is for, a few percent. Past it a block
/// crosses the page boundary instead: 1 KB values aligned at three a page made every SST a
/// third larger than RocksDB's, and compactions wrote a third more.
pub const ALIGN_PAD_MAX: usize = BLOCK_ALIGN_BYTES / 8;

/// Largest data block size: the largest block a reader decompresses (the SST format's
/// `BLOCK_RAW_BYTES_MAX`, 64 MiB). A block is cut once it reaches the size, so it may pass it by
/// one entry; such a block is stored uncompressed (`finish_data_block`).
pub const BLOCK_BYTES_MAX: usize = BLOCK_RAW_BYTES_MAX;
/// Largest restart interval: a block holds fewer entries than bytes, so any larger interval
/// means what this one does (one restart point per block).
pub const RESTART_INTERVAL_MAX: usize = BLOCK_BYTES_MAX;
/// Most bloom filter bits per key. The probe count stops growing at 30 (44 bits per key,
/// false positives under one in a billion), and at 8 bytes a key the filter of the largest
/// SST (`options::SST_BYTES_MAX`, at least 8 bytes an entry) stays within a block's u32 length.
pub const BLOOM_BITS_PER_KEY_MAX: u32 = 64;

impl SstOptions {
    /// Checks every field against its range; the message names the field as a field of
    /// `Options` (`sst.block_bytes`), its value and the range.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for the first field out of range.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(Error::InvalidArgument(what));
        if !(1..=BLOCK_BYTES_MAX).contains(&self.block_bytes) {
            return bad(format!(
                "sst.block_bytes {} outside 1..={BLOCK_BYTES_MAX}",
                self.block_bytes
            ));
        }
        if !(1..=RESTART_INTERVAL_MAX).contains(&self.restart_interval) {
            return bad(format!(
                "sst.restart_interval {} outside 1..={RESTART_INTERVAL_MAX}",
                self.restart_interval
            ));
        }
        if self.bloom_bits_per_key > BLOOM_BITS_PER_KEY_MAX {
            return bad(format!(
                "sst.bloom_bits_per_key {} outside 0..={BLOOM_BITS_PER_KEY_MAX}",
                self.bloom_bits_per_key
            ));
        }
        Ok(())
    }
}

impl Default for SstOptions {
    fn default() -> SstOptions {
        SstOptions {
            block_bytes: 4096,
            restart_interval: RESTART_INTERVAL_DEFAULT,
            bloom_bits_per_key: BITS_PER_KEY_DEFAULT,
            compression: Compression::None,
            block_align: true,
        }
    }
}

/// Index blocks restart at every entry: they are searched far more often than scanned, and
/// their keys share little.
const INDEX_RESTART_INTERVAL: usize = 1;
/// Longest encoding of a u32 varint.
const VARINT32_BYTES_MAX: usize = 5;
/// A block entry's overhead beyond its key and value: three varints and a restart point.
const ENTRY_OVERHEAD_MAX: usize = 3 * VARINT32_BYTES_MAX + U32_BYTES;
/// Bytes of a restart point, and of a block's restart count.
const U32_BYTES: usize = 4;

/// A finished SST, or the part of it not yet handed out by [`SstBuilder::take_written`].
#[derive(Debug)]
pub struct SstImage {
    /// Offset of `bytes` in the SST: the bytes before it were taken out while building.
    /// Always a multiple of the alignment they were taken at.
    pub base: u64,
    /// The image from `base` on: its end is a whole number of slots, the footer in its last
    /// bytes, and it holds every block but data blocks before `base`. A plain vector: the
    /// builder's own buffer, padded in place (the O_DIRECT writer copies it a request at a
    /// time into aligned buffers, the buffered writer needs no alignment), so a finished
    /// image is never held twice.
    pub bytes: Vec<u8>,
    /// SST offsets of the whole 4 KiB pages between the last block and the footer's page:
    /// zeros that nothing reads. The writer leaves them unwritten and gives their storage
    /// back (an SST uses half a slot of them on average). Empty when there are none.
    pub zeros: std::ops::Range<u64>,
    /// What it holds.
    pub properties: SstProperties,
    /// The smallest internal key the SST covers: of its point entries and range tombstones
    /// (a [`key::range_bound`] when a tombstone starts first). Empty for an empty SST.
    pub smallest: Vec<u8>,
    /// The largest internal key the SST covers; when a tombstone's end comes last, the
    /// exclusive [`key::range_bound`] of that end. Empty for an empty SST.
    pub largest: Vec<u8>,
}

impl SstImage {
    /// Bytes of the whole SST: whole slots.
    pub fn len(&self) -> u64 {
        self.base + self.bytes.len() as u64
    }

    /// Whether the image has no bytes (never, for a finished one: it has a footer).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Receives each data block as it is cut: its offset in the SST and its uncompressed bytes.
pub type BlockSink = Box<dyn FnMut(u64, &[u8]) + Send>;

/// Builds one SST from entries in ascending internal key order.
pub struct SstBuilder {
    opts: SstOptions,
    /// Bytes of the image handed out by `take_written`; `image` holds what follows.
    taken: u64,
    image: Vec<u8>,
    block_sink: Option<BlockSink>,
    data: BlockBuilder,
    index: BlockBuilder,
    hashes: Vec<u64>,
    last_key: Vec<u8>,
    props: SstProperties,
    range_tombstones: Vec<RangeTombstone>,
    range_tombstone_bytes: usize,
}

impl std::fmt::Debug for SstBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SstBuilder")
            .field("opts", &self.opts)
            .field("taken", &self.taken)
            .field("held", &self.image.len())
            .field("entries", &self.props.entries)
            .field("block_sink", &self.block_sink.is_some())
            .finish_non_exhaustive()
    }
}

impl SstBuilder {
    /// An empty builder.
    ///
    /// # Panics
    /// If `block_bytes` or `restart_interval` is zero: `Options::validate` refuses both at open,
    /// so a builder never sees them from a store.
    pub fn new(opts: &SstOptions) -> SstBuilder {
        assert!(opts.block_bytes > 0, "block_bytes of zero");
        SstBuilder {
            opts: opts.clone(),
            taken: 0,
            image: Vec::new(),
            block_sink: None,
            data: BlockBuilder::new(opts.restart_interval),
            index: BlockBuilder::new(INDEX_RESTART_INTERVAL),
            hashes: Vec::new(),
            last_key: Vec::new(),
            props: SstProperties {
                format_version: SST_FORMAT_VERSION,
                compression: opts.compression,
                bloom_bits_per_key: opts.bloom_bits_per_key,
                ..SstProperties::default()
            },
            range_tombstones: Vec::new(),
            range_tombstone_bytes: 0,
        }
    }

    /// Has every data block cut from now on given to `sink` as well, uncompressed, with its
    /// offset in the SST (to prepopulate the block cache without decoding the image again).
    pub fn set_block_sink(&mut self, sink: BlockSink) {
        self.block_sink = Some(sink);
    }

    /// Bytes of the image so far that no later block changes: the written blocks, whether
    /// still held or taken out.
    pub fn written_bytes(&self) -> u64 {
        self.taken + self.image.len() as u64
    }

    /// Bytes of the image held by the builder: written blocks not taken out yet.
    pub fn held_bytes(&self) -> usize {
        self.image.len()
    }

    /// Takes the held bytes of the image written so far, in a multiple of `align` bytes, out of
    /// the builder, with their offset in the SST, when there are at least `min` of them. The
    /// caller writes them at that offset; the image `finish` returns starts after them.
    ///
    /// # Panics
    /// If `align` is zero.
    pub fn take_written(&mut self, min: usize, align: usize) -> Option<(u64, Vec<u8>)> {
        assert!(align > 0, "alignment of zero");
        let n = self.image.len() / align * align;
        if n == 0 || n < min {
            return None;
        }
        // The rest (less than `align`) moves to a new buffer sized for the next take, so the
        // taken one is handed out as it is, without a copy.
        let mut rest = Vec::with_capacity(n.max(min) + self.opts.block_bytes);
        rest.extend_from_slice(&self.image[n..]);
        let mut taken = std::mem::replace(&mut self.image, rest);
        taken.truncate(n);
        let at = self.taken;
        self.taken += n as u64;
        Some((at, taken))
    }

    /// Appends a block to the image, returning its handle (offsets count the bytes taken).
    fn put_block(&mut self, raw: &[u8], compression: Compression) -> BlockHandle {
        let mut handle = write_block(&mut self.image, raw, compression);
        handle.offset += self.taken;
        handle
    }

    /// Adds a range tombstone, in any order relative to entries and other tombstones. It is
    /// not checked against the bloom filter: readers look at tombstones before the filter.
    pub fn add_range_tombstone(&mut self, t: RangeTombstone) {
        self.range_tombstone_bytes += t.start.len() + t.end.len() + 16;
        self.range_tombstones.push(t);
    }

    /// Range tombstones added so far.
    pub fn range_tombstones(&self) -> usize {
        self.range_tombstones.len()
    }

    /// Whether nothing was added: no entry and no range tombstone.
    pub fn is_empty(&self) -> bool {
        self.props.entries == 0 && self.range_tombstones.is_empty()
    }

    /// Adds an entry. `internal_key` must sort after every key added before.
    ///
    /// # Panics
    /// If `internal_key` is shorter than a trailer; (debug builds) if keys come out of order.
    pub fn add(&mut self, internal_key: &[u8], value: &[u8]) {
        assert!(internal_key.len() >= key::TRAILER_BYTES, "internal key without a trailer");
        let first = self.props.entries == 0;
        debug_assert!(
            first || key::compare(&self.last_key, internal_key).is_lt(),
            "SST keys out of order"
        );
        if first || key::user_key(&self.last_key) != key::user_key(internal_key) {
            self.hashes.push(bloom_hash(key::user_key(internal_key)));
        }
        if first {
            self.props.smallest = internal_key.to_vec();
        }
        if self.cuts_before(internal_key.len() + value.len()) {
            self.finish_data_block();
        }
        self.data.add(internal_key, value);
        self.last_key.clear();
        self.last_key.extend_from_slice(internal_key);
        self.props.entries += 1;
        self.props.raw_key_bytes += internal_key.len() as u64;
        self.props.raw_value_bytes += value.len() as u64;
        if self.data.estimated_bytes() >= self.opts.block_bytes {
            self.finish_data_block();
        }
    }

    /// Whether the open data block is cut before an entry of `entry_bytes` (key and value):
    /// with [`SstOptions::block_align`], where the entry would take the stored block past
    /// `block_bytes` (which is at most a page there).
    /// The early cut is taken only when the room it leaves unused in the block's budget is at
    /// most [`ALIGN_PAD_MAX`]; otherwise the block takes the entry and is cut once it reaches
    /// `block_bytes`, as without alignment.
    fn cuts_before(&self, entry_bytes: usize) -> bool {
        if !self.aligns_blocks() || self.data.is_empty() {
            return false;
        }
        let stored = self.data.estimated_bytes() + BLOCK_TRAILER_BYTES;
        stored + entry_bytes + ENTRY_OVERHEAD_MAX > self.opts.block_bytes
            && self.opts.block_bytes.saturating_sub(stored) <= ALIGN_PAD_MAX
    }

    /// Whether data blocks are kept within pages: asked for, uncompressed, a page at most.
    fn aligns_blocks(&self) -> bool {
        self.opts.block_align
            && self.opts.compression == Compression::None
            && self.opts.block_bytes <= BLOCK_ALIGN_BYTES
    }

    /// The zero bytes written before a data block of `stored` bytes (trailer included) that
    /// would start at `at`: with [`SstOptions::block_align`], up to the next page boundary
    /// when a block that fits in a page would cross it and the boundary is at most
    /// [`ALIGN_PAD_MAX`] bytes away. The amount depends on `at` only, so a bound for every
    /// block up to some size is the pad of a block of that size ([`SstBuilder::pad_bound`]).
    fn pad_bytes(&self, at: u64, stored: usize) -> usize {
        if !self.aligns_blocks() || stored > BLOCK_ALIGN_BYTES {
            return 0;
        }
        let in_page = (at % BLOCK_ALIGN_BYTES as u64) as usize;
        let pad = BLOCK_ALIGN_BYTES - in_page;
        if in_page + stored > BLOCK_ALIGN_BYTES && pad <= ALIGN_PAD_MAX { pad } else { 0 }
    }

    /// At least [`SstBuilder::pad_bytes`] for any block of at most `upper` bytes at `at`.
    fn pad_bound(&self, at: u64, upper: usize) -> usize {
        self.pad_bytes(at, upper.min(BLOCK_ALIGN_BYTES))
    }

    fn finish_data_block(&mut self) {
        if self.data.is_empty() {
            return;
        }
        let raw = self.data.finish();
        // A block passes `block_bytes` by its last entry, which may be large; a reader refuses
        // to decompress more than BLOCK_RAW_BYTES_MAX, so such a block is stored as it is.
        let compression =
            if raw.len() > BLOCK_RAW_BYTES_MAX { Compression::None } else { self.opts.compression };
        if compression == Compression::None {
            let pad = self.pad_bytes(self.written_bytes(), raw.len() + BLOCK_TRAILER_BYTES);
            self.image.resize(self.image.len() + pad, 0);
        }
        let handle = self.put_block(&raw, compression);
        self.index.add(&self.last_key, &handle.encode());
        self.props.data_blocks += 1;
        self.props.data_bytes += handle.stored_bytes();
        if let Some(sink) = &mut self.block_sink {
            sink(handle.offset, &raw);
        }
    }

    /// Entries added so far.
    pub fn entries(&self) -> u64 {
        self.props.entries
    }

    /// Bytes the image would have now, before padding to slots: written blocks, the open data
    /// block, the index, filter and range tombstones so far, and the footer.
    pub fn estimated_bytes(&self) -> usize {
        let filter = self.hashes.len() * self.opts.bloom_bits_per_key as usize / 8;
        self.written_bytes() as usize
            + self.data.estimated_bytes()
            + self.index.estimated_bytes()
            + filter
            + self.range_tombstone_bytes
            + FOOTER_BYTES
    }

    /// An upper bound on the bytes the finished image would use (before padding to slots) if an
    /// entry with a `key_len`-byte internal key and a `value_len`-byte value were added next
    /// and the SST finished after it. Compaction cuts its output before the entry that would
    /// take it past whole slots, as LDS packs a chunk when "adding one more key-value pair
    /// would cause the package to overflow the slot size": cutting only once the estimate has
    /// passed the target leaves every SST a nearly empty last slot.
    pub fn bytes_after_adding(&self, key_len: usize, value_len: usize) -> usize {
        // The entry joins the open data block, which is then written with its trailer.
        let data = self.data.estimated_bytes() + ENTRY_OVERHEAD_MAX + key_len + value_len;
        // The open block's index entry: its last key would be this one, then its handle.
        let index = self.index.estimated_bytes()
            + ENTRY_OVERHEAD_MAX
            + key_len
            + BLOCK_HANDLE_BYTES
            + BLOCK_TRAILER_BYTES;
        let filter = match self.opts.bloom_bits_per_key {
            0 => 0,
            bits => {
                let bytes = ((self.hashes.len() + 1) * bits as usize).div_ceil(8);
                bytes.max(FILTER_BYTES_MIN) + 1 + BLOCK_TRAILER_BYTES
            }
        };
        let smallest = if self.props.entries == 0 { key_len } else { self.props.smallest.len() };
        let properties = PROPERTIES_FIXED_BYTES + smallest + 4 + key_len + BLOCK_TRAILER_BYTES;
        // Kept within pages: the zero bytes before the blocks still to be written; and when
        // the entry starts a block of its own, that block's restart array and trailer, and
        // the index entry of the block cut before it (whose last key is the last one added).
        let entry = ENTRY_OVERHEAD_MAX + key_len + value_len;
        let aligned = if !self.aligns_blocks() {
            0
        } else if self.cuts_before(key_len + value_len) {
            let open = self.data.estimated_bytes() + BLOCK_TRAILER_BYTES;
            let at = self.written_bytes();
            let open_pad = self.pad_bytes(at, open);
            let next = 2 * U32_BYTES + entry + BLOCK_TRAILER_BYTES;
            open_pad
                + self.pad_bound(at + (open_pad + open) as u64, next)
                + 2 * U32_BYTES
                + BLOCK_TRAILER_BYTES
                + ENTRY_OVERHEAD_MAX
                + self.last_key.len()
                + BLOCK_HANDLE_BYTES
        } else {
            let block = self.data.estimated_bytes() + entry + BLOCK_TRAILER_BYTES;
            // A block that certainly passes a page (its value alone takes it there) is never
            // padded; one that may fit is bounded by the pad of the largest it may be.
            let block_min = self.data.estimated_bytes() + value_len + BLOCK_TRAILER_BYTES;
            if block_min > BLOCK_ALIGN_BYTES {
                0
            } else {
                self.pad_bound(self.written_bytes(), block)
            }
        };
        self.written_bytes() as usize
            + aligned
            + data
            + BLOCK_TRAILER_BYTES
            + index
            + filter
            + properties
            + FOOTER_BYTES
    }

    /// Finishes the image, padded with zeros to a multiple of `slot_bytes` so that the footer
    /// ends exactly at the end of the last slot.
    ///
    /// # Panics
    /// If `slot_bytes` is not a positive multiple of 512 (the volume's slots always are).
    pub fn finish(mut self, slot_bytes: u64) -> SstImage {
        assert!(
            slot_bytes > 0 && slot_bytes % SECTOR_SIZE as u64 == 0,
            "slot size {slot_bytes} not a positive multiple of {SECTOR_SIZE}"
        );
        self.finish_data_block();
        self.props.largest =
            if self.props.entries > 0 { self.last_key.clone() } else { Vec::new() };
        let filter = (self.opts.bloom_bits_per_key > 0).then(|| {
            let block = build_filter(&self.hashes, self.opts.bloom_bits_per_key);
            self.put_block(&block, Compression::None)
        });
        let tombstones = range_del::normalize(std::mem::take(&mut self.range_tombstones));
        if !tombstones.is_empty() {
            let block = range_del_block::encode(&tombstones);
            self.props.range_tombstones = tombstones.len() as u64;
            self.props.range_del = Some(self.put_block(&block, Compression::None));
        }
        let (smallest, largest) = self.bounds(&tombstones);
        let index_raw = self.index.finish();
        let index = self.put_block(&index_raw, Compression::None);
        let props = self.props.encode();
        let properties = self.put_block(&props, Compression::None);
        let used = self.written_bytes() + FOOTER_BYTES as u64;
        let image_bytes = used.div_ceil(slot_bytes) * slot_bytes;
        let footer =
            Footer { format_version: SST_FORMAT_VERSION, filter, index, properties, image_bytes };
        let mut bytes = std::mem::take(&mut self.image);
        bytes.resize(usize::try_from(image_bytes - self.taken).expect("image fits memory"), 0);
        let footer_at = bytes.len() - FOOTER_BYTES;
        bytes[footer_at..].copy_from_slice(&footer.encode());
        debug_assert!(filter.is_none_or(|f| f != BlockHandle::default()));
        // Zeros from the first whole page after the last block to the footer's page.
        let page = BLOCK_ALIGN_BYTES as u64;
        let zeros_start = (used - FOOTER_BYTES as u64).div_ceil(page) * page;
        let zeros_end = (image_bytes - FOOTER_BYTES as u64) / page * page;
        let zeros = zeros_start..zeros_end.max(zeros_start);
        SstImage { base: self.taken, bytes, zeros, properties: self.props, smallest, largest }
    }

    /// The union of the point entries' keys and the tombstones' bounds.
    fn bounds(&self, tombstones: &[RangeTombstone]) -> (Vec<u8>, Vec<u8>) {
        let points = (self.props.entries > 0)
            .then(|| (self.props.smallest.clone(), self.props.largest.clone()));
        match (points, range_del::bounds(tombstones)) {
            (None, None) => (Vec::new(), Vec::new()),
            (Some(b), None) | (None, Some(b)) => b,
            (Some((ps, pl)), Some((ts, tl))) => (
                std::cmp::min_by(ps, ts, |a, b| key::compare(a, b)),
                std::cmp::max_by(pl, tl, |a, b| key::compare(a, b)),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::key::Kind;

    /// Bytes a finished image uses before its padding: up to the end of its last block (the
    /// properties), plus the footer.
    fn used_bytes(image: &SstImage) -> usize {
        let end = image.bytes.len();
        let footer = Footer::decode(&image.bytes[end - FOOTER_BYTES..], end as u64).unwrap();
        let p = footer.properties;
        p.offset as usize + p.size as usize + BLOCK_TRAILER_BYTES + FOOTER_BYTES
    }

    #[test]
    fn bytes_after_adding_bounds_the_finished_image_closely() {
        let mut rng = SmallRng::seed_from_u64(7);
        for (bloom, compression, block) in [
            (10, Compression::None, 4096),
            (0, Compression::None, 512),
            (6, Compression::Lz4, 1024),
        ] {
            let opts = SstOptions {
                block_bytes: block,
                bloom_bits_per_key: bloom,
                compression,
                ..SstOptions::default()
            };
            let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..120u32)
                .map(|i| {
                    let user = format!("key{:06}{}", i * 3, "x".repeat(rng.gen_range(0..40)));
                    let value = vec![b'a' + (i % 26) as u8; rng.gen_range(0..700)];
                    (crate::key::encode(user.as_bytes(), 1000 - u64::from(i), Kind::Put), value)
                })
                .collect();
            for n in 1..=entries.len() {
                let mut b = SstBuilder::new(&opts);
                for (k, v) in &entries[..n - 1] {
                    b.add(k, v);
                }
                let (k, v) = &entries[n - 1];
                let bound = b.bytes_after_adding(k.len(), v.len());
                b.add(k, v);
                let used = used_bytes(&b.finish(512));
                assert!(used <= bound, "{n} entries: {used} bytes used, bound {bound}");
                // Close enough that cutting by it wastes little of a slot (compressed blocks
                // may come out far below it). An aligned block that may or may not end within
                // its page is bounded by the padding it would need if it did.
                if compression == Compression::None {
                    let slack = 96 + 2 * k.len() + ALIGN_PAD_MAX;
                    assert!(bound - used <= slack, "{n} entries: {used} used, {bound}");
                }
            }
        }
    }

    #[test]
    fn a_compressed_block_past_the_readers_limit_is_stored_raw_and_reads_back() {
        // One value larger than a reader would decompress: compressed, it was unreadable.
        let opts = SstOptions { compression: Compression::Lz4, ..SstOptions::default() };
        let value = vec![7u8; BLOCK_RAW_BYTES_MAX + 1];
        let ikey = crate::key::encode(b"big", 1, Kind::Put);
        let mut b = SstBuilder::new(&opts);
        b.add(&ikey, &value);
        let image = b.finish(4096);
        let cache = std::sync::Arc::new(crate::cache::BlockCache::new(0));
        let source = std::sync::Arc::new(image.bytes.to_vec());
        let held = crate::sst::IndexAndFilter::Held;
        let reader = crate::sst::SstReader::open(source, cache, 1, held).unwrap();
        let lookup = crate::key::encode(b"big", 1, Kind::SEEK);
        let (_, got) = reader.get(&lookup, bloom_hash(b"big")).unwrap().unwrap();
        assert!(got == value);
    }

    #[test]
    fn an_image_taken_out_while_building_is_the_image_built_whole() {
        let opts =
            SstOptions { block_bytes: 700, compression: Compression::Lz4, ..SstOptions::default() };
        let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..3000u32)
            .map(|i| {
                let user = format!("key{i:08}");
                let value = format!("{i}-{}", "v".repeat((i % 97) as usize)).into_bytes();
                (crate::key::encode(user.as_bytes(), u64::from(i) + 1, Kind::Put), value)
            })
            .collect();
        let mut whole = SstBuilder::new(&opts);
        let mut streamed = SstBuilder::new(&opts);
        let blocks = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
        let sink_blocks = blocks.clone();
        streamed
            .set_block_sink(Box::new(move |at, raw| sink_blocks.lock().push((at, raw.to_vec()))));
        let mut taken = Vec::new();
        for (i, (k, v)) in entries.iter().enumerate() {
            whole.add(k, v);
            streamed.add(k, v);
            if i % 50 == 0 {
                if let Some((at, bytes)) = streamed.take_written(4096, 512) {
                    assert_eq!(at, taken.len() as u64, "taken bytes follow each other");
                    assert!(bytes.len() >= 4096 && bytes.len() % 512 == 0, "{}", bytes.len());
                    taken.extend_from_slice(&bytes);
                }
            }
        }
        let whole = whole.finish(4096);
        let streamed = streamed.finish(4096);
        assert!(streamed.base > 0 && streamed.base == taken.len() as u64);
        assert_eq!(streamed.len(), whole.len());
        taken.extend_from_slice(&streamed.bytes);
        assert!(taken == whole.bytes, "the streamed image differs from the whole one");
        // Every data block reached the sink, at its offset, as the reader decodes it.
        let blocks = blocks.lock();
        assert_eq!(blocks.len() as u64, whole.properties.data_blocks);
        let footer = Footer::decode(&taken[taken.len() - FOOTER_BYTES..], whole.len()).unwrap();
        let stored = |h: BlockHandle| {
            let bytes = &taken[h.offset as usize..(h.offset + h.stored_bytes()) as usize];
            crate::sst::format::decode_block(bytes, h, "block").unwrap()
        };
        use crate::iter::InternalIterator;
        let index =
            std::sync::Arc::new(crate::sst::block::Block::new(stored(footer.index), 0).unwrap());
        let mut it = index.iter();
        let mut n = 0;
        it.seek_to_first();
        while it.valid() {
            let h = BlockHandle::decode(it.value()).unwrap();
            assert_eq!(blocks[n].0, h.offset);
            assert!(stored(h) == blocks[n].1, "block {n} differs");
            n += 1;
            it.next();
        }
        assert_eq!(n, blocks.len());
    }

    #[test]
    fn sst_options_out_of_range_are_refused() {
        let ok = SstOptions::default();
        ok.validate().unwrap();
        let bad = [
            SstOptions { block_bytes: 0, ..ok.clone() },
            SstOptions { block_bytes: BLOCK_BYTES_MAX + 1, ..ok.clone() },
            SstOptions { block_bytes: usize::MAX, ..ok.clone() },
            SstOptions { restart_interval: 0, ..ok.clone() },
            SstOptions { restart_interval: RESTART_INTERVAL_MAX + 1, ..ok.clone() },
            SstOptions { bloom_bits_per_key: BLOOM_BITS_PER_KEY_MAX + 1, ..ok.clone() },
            SstOptions { bloom_bits_per_key: u32::MAX, ..ok.clone() },
        ];
        for o in bad {
            let Err(Error::InvalidArgument(why)) = o.validate() else { panic!("{o:?} accepted") };
            assert!(why.starts_with("sst."), "{why}");
        }
    }
}
