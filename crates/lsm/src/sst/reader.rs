//! Reads an SST from any [`BlockSource`]: an extent on a volume, or bytes in memory.
//!
//! Opening runs these stages, in order:
//! 1. Read the image's last 4 KiB (or all of a shorter image) and decode the footer.
//! 2. Load the properties, then the index and filter blocks; blocks that lie inside the tail
//!    already read are taken from it rather than read again. Where the index and filter go
//!    is [`IndexAndFilter`] (RocksDB's `cache_index_and_filter_blocks`): held by the reader,
//!    outside the block cache (the default), or inserted in the block cache and not held, so
//!    that each lookup finds them there or reads and checks them again.
//! 3. Load the range-deletion block, if any, whole and outside the cache: every read of the
//!    SST needs its tombstones, so they stay with the reader, fragmented for lookups.
//!
//! A point lookup ([`SstReader::get`]) checks the bloom filter with the caller's hash, seeks the
//! index for the first data block whose last key is at or after the lookup key, and seeks that
//! block (from the cache, or read, checked and cached). With cached index and filter blocks it
//! fetches those two the same way first. It sees point entries only; the caller asks
//! [`SstReader::max_covering_tombstone_seq`] first, since the filter knows nothing of range
//! tombstones and must not hide them. An iterator fetches the index once, when it is made,
//! and holds it while it lives (RocksDB's iterators pin theirs too).

use std::borrow::Cow;
use std::ops::{Deref, Range};
use std::sync::Arc;

use shale_io::AlignedBuf;

use crate::cache::{BlockCache, BlockKind, Cached};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key;
use crate::range_del::{Fragments, RangeTombstone};
use crate::sst::block::{Block, BlockIter};
use crate::sst::bloom::BloomFilter;
use crate::sst::builder::{BLOCK_ALIGN_BYTES, SstImage};
use crate::sst::footer::{FOOTER_BYTES, Footer};
use crate::sst::format::{BlockHandle, SstProperties, decode_block, decode_block_into};
use crate::sst::range_del_block;

/// Bytes read from the end of an image to find the footer: one 4 KiB block, which often holds
/// the index and properties too.
pub const TAIL_READ_BYTES: u64 = 4096;

/// Where an SST's bytes come from.
pub trait BlockSource: Send + Sync {
    /// Exactly `len` bytes at `offset` from the start of the SST; implementations do any
    /// alignment the device needs.
    ///
    /// # Errors
    /// The device's error; [`Error::InvalidArgument`] for a range past [`BlockSource::len`].
    fn read(&self, offset: u64, len: usize) -> Result<SourceBytes>;
    /// Bytes of the SST image (the extent's length).
    fn len(&self) -> u64;
    /// Whether the image is empty (never, for a real SST).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Starts reading `len` bytes at `offset` without waiting for them, for a scan's
    /// readahead: the device works on the next run while the scan works through the current
    /// one. `None` where the source has no such read, and the caller reads when it needs the
    /// bytes: memory, and the page cache, whose reads return at once when the kernel has the
    /// pages.
    fn start_read(&self, offset: u64, len: usize) -> Option<Box<dyn PendingRead>> {
        let _ = (offset, len);
        None
    }
    /// [`BlockSource::read`] for a compaction's inputs: bytes the page cache holds whole are
    /// taken from it, and the others are read from the device without it (O_DIRECT), where the
    /// source reads through the page cache. A compaction reads each input once and drops it,
    /// so caching its misses only evicted pages that readers use; and a page a compaction is
    /// reading is locked, so a reader wanting it waits for that read, which in the idle I/O
    /// class (`Options::idle_compaction_io`) waits behind every client read: 27 ms in a
    /// YCSB C run (BENCHMARKS-history.md, "Issue #44: compactions in the idle I/O class").
    /// Sources without a page cache just read.
    ///
    /// # Errors
    /// As [`BlockSource::read`].
    fn read_around_page_cache(&self, offset: u64, len: usize) -> Result<SourceBytes> {
        self.read(offset, len)
    }
}

/// A read under way ([`BlockSource::start_read`]). Dropping it without [`PendingRead::finish`]
/// waits for the device (the buffer is the kernel's until then) and discards the bytes.
pub trait PendingRead: Send {
    /// Waits for the read and returns its bytes.
    ///
    /// # Errors
    /// The device's error.
    fn finish(self: Box<Self>) -> Result<SourceBytes>;
}

/// Bytes a [`BlockSource`] read: a vector, or the device blocks of an O_DIRECT read with the
/// range asked for marked in them. The aligned buffer is handed over as it is: copying the
/// range out of it was one of three copies of every block an O_DIRECT scan read (with the
/// copy of each block out of its readahead run, and the decode into a cache buffer), and
/// `memmove` was 19% of that scan's time.
pub struct SourceBytes {
    buf: SourceBuf,
    range: Range<usize>,
}

enum SourceBuf {
    Vec(Vec<u8>),
    Aligned(AlignedBuf),
}

impl SourceBytes {
    /// The bytes `range` of an aligned buffer a device read into.
    ///
    /// # Panics
    /// If `range` does not lie in `buf`.
    pub fn aligned(buf: AlignedBuf, range: Range<usize>) -> SourceBytes {
        assert!(range.start <= range.end && range.end <= buf.len(), "range outside the buffer");
        SourceBytes { buf: SourceBuf::Aligned(buf), range }
    }

    /// The bytes as a vector (a copy unless they are one already: a vector always holds
    /// exactly its bytes, since `From<Vec<u8>>` is its only way in).
    pub fn into_vec(self) -> Vec<u8> {
        match self.buf {
            SourceBuf::Vec(v) => v,
            SourceBuf::Aligned(ref b) => b[self.range].to_vec(),
        }
    }
}

impl From<Vec<u8>> for SourceBytes {
    fn from(v: Vec<u8>) -> SourceBytes {
        SourceBytes { range: 0..v.len(), buf: SourceBuf::Vec(v) }
    }
}

impl Deref for SourceBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.buf {
            SourceBuf::Vec(v) => &v[self.range.clone()],
            SourceBuf::Aligned(b) => &b[self.range.clone()],
        }
    }
}

impl std::fmt::Debug for SourceBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceBytes").field("len", &self.len()).finish()
    }
}

/// An SST image held in memory: for tests and tools.
impl BlockSource for Vec<u8> {
    fn read(&self, offset: u64, len: usize) -> Result<SourceBytes> {
        let start = usize::try_from(offset).ok().filter(|&s| s <= self.len());
        match start.and_then(|s| self.get(s..s.checked_add(len)?)) {
            Some(b) => Ok(b.to_vec().into()),
            None => Err(Error::InvalidArgument(format!(
                "read of {len} bytes at {offset} past an image of {} bytes",
                self.len()
            ))),
        }
    }

    fn len(&self) -> u64 {
        self.as_slice().len() as u64
    }
}

/// Where an SST reader keeps its index and filter blocks: RocksDB's
/// `cache_index_and_filter_blocks` (`Options::cache_index_and_filter_blocks`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IndexAndFilter {
    /// Read at open and held by the reader while it lives, outside the block cache: never
    /// charged to it, never evicted, so the cache's budget is all for data blocks (`false`,
    /// RocksDB's default).
    #[default]
    Held,
    /// In the block cache like data blocks: charged to it and evictable. The reader keeps
    /// only their handles; a lookup that finds one evicted reads it again and checks its
    /// checksum (`true`).
    Cached,
}

impl IndexAndFilter {
    /// `Cached` if `cache_index_and_filter_blocks`, else `Held`.
    pub fn from_option(cache_index_and_filter_blocks: bool) -> IndexAndFilter {
        if cache_index_and_filter_blocks { IndexAndFilter::Cached } else { IndexAndFilter::Held }
    }
}

/// The index and filter blocks a reader holds ([`IndexAndFilter::Held`]).
struct HeldBlocks {
    index: Arc<Block>,
    filter: Option<BloomFilter>,
}

struct Inner {
    source: Arc<dyn BlockSource>,
    cache: Arc<BlockCache>,
    cache_id: u64,
    footer: Footer,
    properties: SstProperties,
    /// The index and filter, or `None` when they live in the block cache
    /// ([`IndexAndFilter::Cached`]) and are fetched by their handles in the footer.
    held: Option<HeldBlocks>,
    /// The range tombstones as stored, and fragmented for lookups.
    range_tombstones: Vec<RangeTombstone>,
    range_fragments: Fragments,
}

/// An open SST. Cheap to clone; iterators keep it alive.
#[derive(Clone)]
pub struct SstReader {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SstReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SstReader")
            .field("cache_id", &self.inner.cache_id)
            .field("footer", &self.inner.footer)
            .finish()
    }
}

/// The bytes already read from the end of the image (or the whole image, when the writer
/// still holds it), to spare reads of blocks inside them.
struct Tail<'a> {
    start: u64,
    bytes: Cow<'a, [u8]>,
}

impl Tail<'_> {
    fn get(&self, h: BlockHandle) -> Option<&[u8]> {
        let from = usize::try_from(h.offset.checked_sub(self.start)?).ok()?;
        self.bytes.get(from..from.checked_add(usize::try_from(h.stored_bytes()).ok()?)?)
    }
}

impl SstReader {
    /// Opens the SST in `source`, whose blocks are cached in `cache` under `cache_id` (unique
    /// per SST among the cache's users), its index and filter blocks held or cached as
    /// `index_and_filter` says.
    ///
    /// # Errors
    /// [`Error::Corruption`] for a damaged or foreign image; the source's errors.
    pub fn open(
        source: Arc<dyn BlockSource>,
        cache: Arc<BlockCache>,
        cache_id: u64,
        index_and_filter: IndexAndFilter,
    ) -> Result<SstReader> {
        let image_bytes = source.len();
        if image_bytes < FOOTER_BYTES as u64 {
            return Err(Error::corruption("SST image shorter than its footer", 0));
        }
        let start = image_bytes.saturating_sub(TAIL_READ_BYTES);
        let bytes = Cow::Owned(source.read(start, (image_bytes - start) as usize)?.into_vec());
        Self::open_with_tail(source, cache, cache_id, index_and_filter, Tail { start, bytes })
    }

    /// [`SstReader::open`] for an SST just written from `image`, which `source` holds: what
    /// the open reads (footer, properties, index, filter, range deletions) comes from the
    /// image's tail in memory (every meta block is in it) instead of the device. A flush or
    /// compaction output is opened so while the version that names it is installed, under the
    /// store's state lock, where a device read of a large SST's index and filter (hundreds of
    /// KiB each) would hold up every reader.
    ///
    /// # Errors
    /// As [`SstReader::open`]; [`Error::InvalidArgument`] if `image` is not as long as
    /// `source`.
    pub fn open_image(
        source: Arc<dyn BlockSource>,
        cache: Arc<BlockCache>,
        cache_id: u64,
        index_and_filter: IndexAndFilter,
        image: &SstImage,
    ) -> Result<SstReader> {
        if image.len() != source.len() {
            return Err(Error::InvalidArgument(format!(
                "SST image of {} bytes for an extent of {}",
                image.len(),
                source.len()
            )));
        }
        let tail = Tail { start: image.base, bytes: Cow::Borrowed(&image.bytes) };
        Self::open_with_tail(source, cache, cache_id, index_and_filter, tail)
    }

    fn open_with_tail(
        source: Arc<dyn BlockSource>,
        cache: Arc<BlockCache>,
        cache_id: u64,
        index_and_filter: IndexAndFilter,
        tail: Tail<'_>,
    ) -> Result<SstReader> {
        let image_bytes = source.len();
        let footer = Footer::decode(&tail.bytes, image_bytes)?;
        let read = |h: BlockHandle, what: &str| -> Result<Vec<u8>> {
            match tail.get(h) {
                Some(b) => decode_block(b, h, what),
                None => decode_block(&source.read(h.offset, h.stored_bytes() as usize)?, h, what),
            }
        };
        let properties = SstProperties::decode(
            &read(footer.properties, "properties")?,
            footer.properties.offset,
        )?;
        if properties.format_version != footer.format_version {
            return Err(Error::corruption(
                "SST properties: format version differs from the footer's",
                footer.properties.offset,
            ));
        }
        let held = match index_and_filter {
            IndexAndFilter::Held => Some(HeldBlocks {
                index: Arc::new(Block::new(
                    read(footer.index, "index block")?,
                    footer.index.offset,
                )?),
                filter: match footer.filter {
                    None => None,
                    Some(h) => Some(BloomFilter::new(read(h, "filter block")?, h.offset)?),
                },
            }),
            IndexAndFilter::Cached => {
                // Loaded now all the same, through the cache: damage is found at open either
                // way, and the first reads find both cached (RocksDB prefetches them too).
                load_cached(&cache, cache_id, footer.index, BlockKind::Index, |h| {
                    Ok(Cached::Index(Arc::new(Block::new(read(h, "index block")?, h.offset)?)))
                })?;
                if let Some(fh) = footer.filter {
                    load_cached(&cache, cache_id, fh, BlockKind::Filter, |h| {
                        Ok(Cached::Filter(Arc::new(BloomFilter::new(
                            read(h, "filter block")?,
                            h.offset,
                        )?)))
                    })?;
                }
                None
            }
        };
        let range_tombstones = match properties.range_del {
            None => Vec::new(),
            Some(h) => {
                // The handle comes from the properties, not the footer: check it lies before
                // the footer even when the tail holds it.
                let stored = match tail.get(h) {
                    Some(b) if h.fits_before(image_bytes - FOOTER_BYTES as u64) => {
                        b.to_vec().into()
                    }
                    _ => read_stored(&*source, &footer, h)?,
                };
                decode_range_del(&stored, h, properties.range_tombstones)?
            }
        };
        let range_fragments = Fragments::new(&range_tombstones);
        let inner = Inner {
            source,
            cache,
            cache_id,
            footer,
            properties,
            held,
            range_tombstones,
            range_fragments,
        };
        Ok(SstReader { inner: Arc::new(inner) })
    }

    /// The range tombstones, sorted by start, then newest first.
    pub fn range_tombstones(&self) -> &[RangeTombstone] {
        &self.inner.range_tombstones
    }

    /// The sequence number of the newest range tombstone over `user_key` that a reader at
    /// `snapshot` sees, or 0. In memory: the tombstones were read when the SST opened.
    pub fn max_covering_tombstone_seq(&self, user_key: &[u8], snapshot: u64) -> u64 {
        self.inner.range_fragments.max_covering_seq(user_key, snapshot)
    }

    /// Reads the range-deletion block from the source again, past every cache, and checks its
    /// checksum, its structure and that it still holds the tombstones read at open (what
    /// `check` does). Returns the number of tombstones.
    ///
    /// # Errors
    /// [`Error::Corruption`] for a damaged block; the source's errors.
    pub fn verify_range_del_block(&self) -> Result<u64> {
        let inner = &self.inner;
        let Some(h) = inner.properties.range_del else { return Ok(0) };
        let stored = read_stored(&*inner.source, &inner.footer, h)?;
        let found = decode_range_del(&stored, h, inner.properties.range_tombstones)?;
        if found != inner.range_tombstones {
            return Err(Error::corruption(
                "SST range-deletion block: differs from what was read at open",
                h.offset,
            ));
        }
        Ok(found.len() as u64)
    }

    /// Reads the index and filter blocks from the source again, past the reader's copies and
    /// the block cache, and checks their checksums and structure (what `check` does: with
    /// [`IndexAndFilter::Held`] no lookup reads them after the open).
    ///
    /// # Errors
    /// [`Error::Corruption`] for a damaged block; the source's errors.
    pub fn verify_index_and_filter(&self) -> Result<()> {
        let h = self.inner.footer.index;
        Block::new(decode_block(&self.read_meta_block(h)?, h, "index block")?, h.offset)?;
        if let Some(h) = self.inner.footer.filter {
            BloomFilter::new(
                decode_block(&self.read_meta_block(h)?, h, "filter block")?,
                h.offset,
            )?;
        }
        Ok(())
    }

    /// The id its blocks are cached under (the SST's id, in a store).
    pub fn cache_id(&self) -> u64 {
        self.inner.cache_id
    }

    /// What the SST holds.
    pub fn properties(&self) -> &SstProperties {
        &self.inner.properties
    }

    /// Bytes of the index and filter blocks this reader holds outside the block cache (0 when
    /// they live in the cache): memory that no cache budget bounds.
    pub fn held_bytes(&self) -> usize {
        self.inner
            .held
            .as_ref()
            .map_or(0, |h| h.index.bytes() + h.filter.as_ref().map_or(0, BloomFilter::bytes))
    }

    /// The first entry at or after `lookup_ikey` whose user key is the lookup's: the newest
    /// version visible at the lookup's sequence. `bloom_hash` is
    /// [`crate::sst::bloom_hash`] of the lookup's user key, computed once by the caller for
    /// every SST it asks.
    ///
    /// # Errors
    /// [`Error::Corruption`] for damaged blocks; the source's errors.
    pub fn get(&self, lookup_ikey: &[u8], bloom_hash: u64) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        match self.probe(lookup_ikey, bloom_hash)? {
            Probe::Absent => Ok(None),
            Probe::Found(entry) => Ok(entry),
            Probe::NeedsBlock(h) => {
                let stored = self.inner.source.read(h.offset, h.stored_bytes() as usize)?;
                self.search_read_block(lookup_ikey, h, &stored)
            }
        }
    }

    /// Whether this reader holds its index and filter (read at open, outside the block
    /// cache), so that [`SstReader::probe`] reads nothing from the device before the data
    /// block.
    pub fn holds_index_and_filter(&self) -> bool {
        self.inner.held.is_some()
    }

    /// A point lookup as far as it goes without the device: the filter, the index, then the
    /// data block if the cache holds it. [`Probe::NeedsBlock`] names the block to read
    /// (its stored bytes: [`BlockHandle::stored_bytes`] at [`BlockHandle::offset`] of the
    /// SST), which [`SstReader::search_read_block`] then searches; a multi-get reads the
    /// blocks of many lookups at once in between.
    ///
    /// # Errors
    /// [`Error::Corruption`] for a damaged index or block handle; the source's errors.
    pub fn probe(&self, lookup_ikey: &[u8], bloom_hash: u64) -> Result<Probe> {
        if !self.filter_may_contain(bloom_hash)? {
            return Ok(Probe::Absent);
        }
        let mut index = self.index_block()?.iter();
        index.seek(lookup_ikey);
        if !index.valid() {
            return index.status().map(|()| Probe::Absent);
        }
        let h = decode_handle(index.value(), self.inner.footer.index.offset)?;
        let readable = self.inner.footer.image_bytes - FOOTER_BYTES as u64;
        if !h.fits_before(readable) {
            return Err(Error::corruption("SST index: data block outside the image", h.offset));
        }
        match self.inner.cache.get(self.inner.cache_id, h.offset, BlockKind::Data) {
            Some(block) => Ok(Probe::Found(search_block(&block, h, lookup_ikey)?)),
            None => Ok(Probe::NeedsBlock(h)),
        }
    }

    /// Searches the data block at `h` whose stored bytes (with the trailer) the caller read,
    /// after checking them ([`Error::Corruption`] on a bad checksum or structure, never
    /// another entry), and caches it.
    ///
    /// # Errors
    /// [`Error::Corruption`] for a damaged block.
    pub fn search_read_block(
        &self,
        lookup_ikey: &[u8],
        h: BlockHandle,
        stored: &[u8],
    ) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        search_block(&self.cache_read_block(h, stored)?, h, lookup_ikey)
    }

    /// Checks the stored data block at `h` that the caller read (with its trailer) and caches
    /// it.
    ///
    /// # Errors
    /// [`Error::Corruption`] for a damaged block (nothing is cached then).
    pub fn cache_read_block(&self, h: BlockHandle, stored: &[u8]) -> Result<Cached> {
        let inner = &self.inner;
        let block = decode_data_block(&inner.cache, inner.cache_id, h, stored, true)?;
        Ok(inner.cache.insert(inner.cache_id, h.offset, Cached::Data(Arc::new(block))))
    }

    /// The data block that a seek to `target` (an internal key) starts in, when the block
    /// cache does not hold it: the block [`SstIter::seek`] would read. `None` when the seek
    /// reads none (the block is cached, or every block ends before the target), and where
    /// telling would itself take a read (an index in the block cache rather than held) or
    /// the index is damaged: the seek then reads, and reports the damage, itself.
    pub fn seek_block_to_read(&self, target: &[u8]) -> Option<BlockHandle> {
        let inner = &*self.inner;
        let mut index = inner.held.as_ref()?.index.iter();
        index.seek(target);
        if !index.valid() {
            return None;
        }
        let h = BlockHandle::decode(index.value())?;
        let readable = inner.footer.image_bytes - FOOTER_BYTES as u64;
        let wanted = h.fits_before(readable) && !inner.cache.contains(inner.cache_id, h.offset);
        wanted.then_some(h)
    }

    /// An iterator over every entry, unpositioned. It holds the index block while it lives;
    /// if a cached index cannot be read, the iterator is empty and its status is the error.
    pub fn iter(&self) -> SstIter {
        let (index, error) = match self.index_block() {
            Ok(index) => (index.iter(), None),
            Err(e) => (Block::empty().iter(), Some(e)),
        };
        SstIter {
            reader: self.clone(),
            index,
            data: None,
            error,
            readahead: Readahead::default(),
            fill_cache: true,
        }
    }

    /// [`SstReader::iter`] for a compaction: data blocks the cache holds are used, those it
    /// does not are read (with readahead) and not cached, as RocksDB's compactions read
    /// (`fill_cache = false`). A compaction reads each block of its inputs once, and the
    /// inputs are dropped when it commits: caching them evicted the blocks readers use, and
    /// churned a cache's worth of memory per compaction.
    ///
    /// With `around_page_cache` (a compaction in the idle I/O class) its reads go around the
    /// page cache ([`BlockSource::read_around_page_cache`]).
    pub fn iter_for_compaction(&self, around_page_cache: bool) -> SstIter {
        let readahead = Readahead { around_page_cache, ..Readahead::default() };
        SstIter { fill_cache: false, readahead, ..self.iter() }
    }

    /// The index block: held, else from the cache, else read from the source, checked and
    /// cached.
    fn index_block(&self) -> Result<Arc<Block>> {
        let inner = &*self.inner;
        if let Some(held) = &inner.held {
            return Ok(held.index.clone());
        }
        let cached =
            load_cached(&inner.cache, inner.cache_id, inner.footer.index, BlockKind::Index, |h| {
                let raw = decode_block(&self.read_meta_block(h)?, h, "index block")?;
                Ok(Cached::Index(Arc::new(Block::new(raw, h.offset)?)))
            })?;
        match &cached {
            Cached::Index(index) => Ok(index.clone()),
            _ => Err(cached_as_other_kind("index", inner.footer.index.offset)),
        }
    }

    /// Whether the filter lets a key of hash `bloom_hash` through (always, without a filter).
    /// The filter is held, else from the cache, else read from the source, checked and cached.
    fn filter_may_contain(&self, bloom_hash: u64) -> Result<bool> {
        let inner = &*self.inner;
        if let Some(held) = &inner.held {
            return Ok(held.filter.as_ref().is_none_or(|f| f.may_contain_hash(bloom_hash)));
        }
        let Some(fh) = inner.footer.filter else { return Ok(true) };
        let cached = load_cached(&inner.cache, inner.cache_id, fh, BlockKind::Filter, |h| {
            let raw = decode_block(&self.read_meta_block(h)?, h, "filter block")?;
            Ok(Cached::Filter(Arc::new(BloomFilter::new(raw, h.offset)?)))
        })?;
        match &cached {
            Cached::Filter(filter) => Ok(filter.may_contain_hash(bloom_hash)),
            _ => Err(cached_as_other_kind("filter", fh.offset)),
        }
    }

    /// The stored bytes of an index or filter block evicted from the cache: read alone, from
    /// the source (the footer checked at open that it lies before the footer).
    fn read_meta_block(&self, h: BlockHandle) -> Result<SourceBytes> {
        self.inner.source.read(h.offset, h.stored_bytes() as usize)
    }

    /// The data block at `h`, from the cache, else from `readahead` when it holds the block,
    /// else read alone; a block read is cached when `fill_cache` says so.
    fn data_block_via(
        &self,
        h: BlockHandle,
        readahead: Option<&mut Readahead>,
        fill_cache: bool,
    ) -> Result<Cached> {
        let inner = &self.inner;
        let readable = inner.footer.image_bytes - FOOTER_BYTES as u64;
        if !h.fits_before(readable) {
            return Err(Error::corruption("SST index: data block outside the image", h.offset));
        }
        let len = h.stored_bytes() as usize;
        if let Some(hit) = inner.cache.get(inner.cache_id, h.offset, BlockKind::Data) {
            if let Some(ra) = readahead {
                ra.passed(h.offset, len);
            }
            return Ok(hit);
        }
        let stored = match readahead {
            // Runs stop at the blocks' end: the padding after it holds nothing to read.
            Some(ra) => {
                let ahead_end = inner.footer.blocks_end().clamp(h.offset + len as u64, readable);
                ra.read(&*inner.source, h.offset, len, ahead_end)?
            }
            None => Stored::Alone(inner.source.read(h.offset, len)?),
        };
        let block = decode_data_block(&inner.cache, inner.cache_id, h, &stored, fill_cache)?;
        let block = Cached::Data(Arc::new(block));
        Ok(if fill_cache { inner.cache.insert(inner.cache_id, h.offset, block) } else { block })
    }
}

/// Checks and decodes the stored data block at `h`. A block `to_cache` goes into a buffer the
/// cache hands out (one of a block it evicted, see [`BlockCache::buffer`]); one read for a
/// single use (a compaction's input) into a new one.
fn decode_data_block(
    cache: &BlockCache,
    cache_id: u64,
    h: BlockHandle,
    stored: &[u8],
    to_cache: bool,
) -> Result<Block> {
    let mut raw =
        if to_cache { cache.buffer(cache_id, h.offset, h.size as usize) } else { Vec::new() };
    decode_block_into(stored, h, "data block", &mut raw)?;
    Block::new(raw, h.offset)
}

/// Reads the stored bytes of the block at `h` (with its trailer), which must lie before the
/// footer.
fn read_stored(source: &dyn BlockSource, footer: &Footer, h: BlockHandle) -> Result<SourceBytes> {
    if !h.fits_before(footer.image_bytes - FOOTER_BYTES as u64) {
        return Err(Error::corruption("SST properties: block outside the image", h.offset));
    }
    source.read(h.offset, h.stored_bytes() as usize)
}

/// Checks and decodes a stored range-deletion block that should hold `count` tombstones.
fn decode_range_del(stored: &[u8], h: BlockHandle, count: u64) -> Result<Vec<RangeTombstone>> {
    let raw = decode_block(stored, h, "range-deletion block")?;
    let tombstones = range_del_block::decode(&raw, h.offset)?;
    if tombstones.len() as u64 != count {
        return Err(Error::corruption(
            "SST range-deletion block: tombstone count differs from the properties'",
            h.offset,
        ));
    }
    Ok(tombstones)
}

/// An iterator over the data block the cache gave for offset `at`.
fn block_iter(cached: &Cached, at: u64) -> Result<BlockIter> {
    match cached {
        Cached::Data(block) => Ok(block.iter()),
        _ => Err(cached_as_other_kind("data", at)),
    }
}

/// A block looked up as one kind and cached as another: only a damaged (checksum-forged)
/// image names one offset for two blocks.
fn cached_as_other_kind(what: &str, offset: u64) -> Error {
    Error::corruption(format!("SST {what} block: its offset holds another kind of block"), offset)
}

/// The block at `h` from the cache, counted as a lookup for a block of `kind`, else loaded and
/// cached.
fn load_cached(
    cache: &BlockCache,
    cache_id: u64,
    h: BlockHandle,
    kind: BlockKind,
    load: impl FnOnce(BlockHandle) -> Result<Cached>,
) -> Result<Cached> {
    if let Some(hit) = cache.get(cache_id, h.offset, kind) {
        return Ok(hit);
    }
    Ok(cache.insert(cache_id, h.offset, load(h)?))
}

/// How far [`SstReader::probe`] got.
#[derive(Debug)]
pub enum Probe {
    /// The filter or the index rules the key out of this SST.
    Absent,
    /// The newest visible entry of the key (internal key, value), or none, from a cached
    /// data block.
    Found(Option<(Vec<u8>, Vec<u8>)>),
    /// The data block at this handle decides, and the cache does not hold it.
    NeedsBlock(BlockHandle),
}

/// The first entry of `block` (at `h`) at or after `lookup_ikey`, if its user key is the
/// lookup's.
fn search_block(
    block: &Cached,
    h: BlockHandle,
    lookup_ikey: &[u8],
) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
    let mut it = block_iter(block, h.offset)?;
    it.seek(lookup_ikey);
    if !it.valid() {
        // The index key (this block's last key) is at or after the lookup key, so a block
        // with no such entry is damaged.
        it.status()?;
        return Err(Error::corruption("SST data block ends before its index key", h.offset));
    }
    if key::user_key(it.key()) == key::user_key(lookup_ikey) {
        Ok(Some((it.key().to_vec(), it.value().to_vec())))
    } else {
        Ok(None)
    }
}

fn decode_handle(b: &[u8], index_offset: u64) -> Result<BlockHandle> {
    BlockHandle::decode(b)
        .ok_or_else(|| Error::corruption("SST index: bad block handle", index_offset))
}

/// Readahead of a forward scan: after `SEQUENTIAL_BEFORE_READAHEAD` data blocks missed the
/// cache one right after the other, blocks are read in runs of 64 KiB, doubling up to 512 KiB
/// (RocksDB's automatic readahead does the same). Without it a scan pays one device read per
/// 4 KiB block: `readseq` of a million keys ran at a fifth of RocksDB's, whose page cache reads
/// ahead.
///
/// Where the source can read in the background ([`BlockSource::start_read`]: O_DIRECT), the
/// run after the one being consumed is always in flight, so the device reads it while the
/// scan (or a compaction's merge) works through this one, as the kernel's asynchronous
/// readahead does for buffered files. Read one run at a time, an O_DIRECT `readseq` waited
/// for every run: 0.73x RocksDB's buffered-and-readahead scan in regime (d).
#[derive(Debug)]
struct Readahead {
    /// Stored bytes read ahead, from offset `start` of the SST.
    start: u64,
    bytes: SourceBytes,
    /// The run right after `bytes`, being read in the background.
    pending: Option<PendingRun>,
    /// Where the last block missed ended: the next miss there is sequential.
    last_end: u64,
    sequential: u32,
    next_len: usize,
    /// A compaction's: reads go around the page cache ([`BlockSource::read_around_page_cache`]).
    around_page_cache: bool,
}

/// A run of [`Readahead`] under way.
struct PendingRun {
    start: u64,
    len: usize,
    read: Box<dyn PendingRead>,
}

impl std::fmt::Debug for PendingRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingRun").field("start", &self.start).field("len", &self.len).finish()
    }
}

impl Default for Readahead {
    fn default() -> Readahead {
        Readahead {
            start: 0,
            bytes: Vec::new().into(),
            pending: None,
            last_end: 0,
            sequential: 0,
            next_len: 0,
            around_page_cache: false,
        }
    }
}

/// The stored bytes of one block: inside the readahead run that holds them, or read alone.
enum Stored<'a> {
    InRun(&'a [u8]),
    Alone(SourceBytes),
}

impl Deref for Stored<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Stored::InRun(b) => b,
            Stored::Alone(b) => b,
        }
    }
}

const SEQUENTIAL_BEFORE_READAHEAD: u32 = 2;
const READAHEAD_MIN: usize = 64 << 10;
const READAHEAD_MAX: usize = 512 << 10;

impl Readahead {
    /// The `len` stored bytes at `offset`, which no cached block holds, of an SST whose
    /// blocks end before `readable`.
    fn read(
        &mut self,
        source: &dyn BlockSource,
        offset: u64,
        len: usize,
        readable: u64,
    ) -> Result<Stored<'_>> {
        let end = offset + len as u64;
        self.passed(offset, len);
        if !self.holds(offset, end) && !self.take_pending(offset, end)? {
            // Neither run holds the block: the scan moved elsewhere (a run read for the old
            // place is waited for and dropped), or it is not sequential yet.
            self.pending = None;
            if self.sequential < SEQUENTIAL_BEFORE_READAHEAD {
                return Ok(Stored::Alone(self.fetch(source, offset, len)?));
            }
            let run = self.next_len.max(READAHEAD_MIN);
            let want = (run.max(len) as u64).min(readable - offset);
            self.bytes = self.fetch(source, offset, want as usize)?;
            self.start = offset;
            self.next_len = (run * 2).min(READAHEAD_MAX);
        }
        if self.pending.is_none() && self.sequential >= SEQUENTIAL_BEFORE_READAHEAD {
            self.start_next(source, readable);
        }
        let from = (offset - self.start) as usize;
        Ok(Stored::InRun(&self.bytes[from..from + len]))
    }

    /// `len` bytes at `offset`, read as this readahead's scan reads.
    fn fetch(&self, source: &dyn BlockSource, offset: u64, len: usize) -> Result<SourceBytes> {
        if self.around_page_cache {
            source.read_around_page_cache(offset, len)
        } else {
            source.read(offset, len)
        }
    }

    /// Notes that the scan passed the `len` stored bytes at `offset`: read through
    /// [`Readahead::read`], or found in the block cache. A cached block continues the scan's
    /// sequence: counted as a break, every block that earlier point reads had cached sent the
    /// scan back to single-block reads and dropped the run read in the background (an O_DIRECT
    /// `readseq` ran at half its speed on a cache that random reads had filled).
    fn passed(&mut self, offset: u64, len: usize) {
        // Aligned blocks (`SstOptions::block_align`) may start at the page boundary after the
        // last one's end.
        if (self.last_end..self.last_end + BLOCK_ALIGN_BYTES as u64).contains(&offset) {
            self.sequential = self.sequential.saturating_add(1);
        } else {
            self.sequential = 0;
            self.next_len = READAHEAD_MIN;
        }
        self.last_end = offset + len as u64;
    }

    /// Whether the run read holds `offset..end`.
    fn holds(&self, offset: u64, end: u64) -> bool {
        offset >= self.start && end <= self.start + self.bytes.len() as u64
    }

    /// Makes the pending run the one read, if it holds `offset..end` (or its end, for a block
    /// that starts in the run read and ends in the pending one), waiting for it.
    fn take_pending(&mut self, offset: u64, end: u64) -> Result<bool> {
        let Some(p) = &self.pending else { return Ok(false) };
        let straddles = offset >= self.start && offset < p.start;
        if end > p.start + p.len as u64 || !(offset >= p.start || straddles) {
            return Ok(false);
        }
        let p = self.pending.take().expect("checked above");
        let fresh = p.read.finish()?;
        if straddles {
            let mut joined = self.bytes[(offset - self.start) as usize..].to_vec();
            joined.extend_from_slice(&fresh);
            self.start = offset;
            self.bytes = joined.into();
        } else {
            self.start = p.start;
            self.bytes = fresh;
        }
        Ok(true)
    }

    /// Starts reading the run after the one read, where the source reads in the background.
    fn start_next(&mut self, source: &dyn BlockSource, readable: u64) {
        let start = self.start + self.bytes.len() as u64;
        if start >= readable {
            return;
        }
        let run = self.next_len.max(READAHEAD_MIN);
        let len = (run as u64).min(readable - start) as usize;
        if let Some(read) = source.start_read(start, len) {
            self.pending = Some(PendingRun { start, len, read });
            self.next_len = (run * 2).min(READAHEAD_MAX);
        }
    }
}

/// A two-level iterator: the index block picks data blocks, a block iterator walks each.
pub struct SstIter {
    reader: SstReader,
    index: BlockIter,
    data: Option<BlockIter>,
    error: Option<Error>,
    readahead: Readahead,
    /// Whether data blocks read go into the block cache (not for compactions).
    fill_cache: bool,
}

impl SstIter {
    fn fail(&mut self, e: Error) {
        if self.error.is_none() {
            self.error = Some(e);
        }
        self.data = None;
    }

    /// Opens the data block the index is on; `data` is `None` if the index is invalid or the
    /// block cannot be loaded (the error is kept).
    fn load_data_block(&mut self) {
        self.data = None;
        if !self.index.valid() {
            if let Err(e) = self.index.status() {
                self.fail(e);
            }
            return;
        }
        let (readahead, fill) = (&mut self.readahead, self.fill_cache);
        let loaded = decode_handle(self.index.value(), self.reader.inner.footer.index.offset)
            .and_then(|h| {
                block_iter(&self.reader.data_block_via(h, Some(readahead), fill)?, h.offset)
            });
        match loaded {
            Ok(block) => self.data = Some(block),
            Err(e) => self.fail(e),
        }
    }

    /// Checks the data iterator after a move: keeps its error, or moves to the next block
    /// (forward) or previous block (backward) while the current one is exhausted.
    fn settle(&mut self, forward: bool) {
        loop {
            let Some(data) = &self.data else { return };
            if data.valid() {
                return;
            }
            if let Err(e) = data.status() {
                self.fail(e);
                return;
            }
            if !self.index.valid() {
                self.data = None;
                return;
            }
            if forward {
                self.index.next();
            } else {
                self.index.prev();
            }
            self.load_data_block();
            if let Some(d) = &mut self.data {
                if forward {
                    d.seek_to_first();
                } else {
                    d.seek_to_last();
                }
            }
        }
    }
}

impl InternalIterator for SstIter {
    fn valid(&self) -> bool {
        self.error.is_none() && self.data.as_ref().is_some_and(|d| d.valid())
    }

    fn seek_to_first(&mut self) {
        self.index.seek_to_first();
        self.load_data_block();
        if let Some(d) = &mut self.data {
            d.seek_to_first();
        }
        self.settle(true);
    }

    fn seek_to_last(&mut self) {
        self.index.seek_to_last();
        self.load_data_block();
        if let Some(d) = &mut self.data {
            d.seek_to_last();
        }
        self.settle(false);
    }

    fn seek(&mut self, target: &[u8]) {
        self.index.seek(target);
        self.load_data_block();
        if let Some(d) = &mut self.data {
            d.seek(target);
        }
        self.settle(true);
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        // The first block whose last key is at or after the target holds the answer or ends
        // just after it; past every block's last key, the answer is the SST's last entry.
        self.index.seek(target);
        if !self.index.valid() && self.index.status().is_ok() {
            self.index.seek_to_last();
        }
        self.load_data_block();
        if let Some(d) = &mut self.data {
            d.seek_for_prev(target);
        }
        self.settle(false);
    }

    fn next(&mut self) {
        assert!(self.valid(), "next() on an invalid SST iterator");
        if let Some(d) = &mut self.data {
            d.next();
        }
        self.settle(true);
    }

    fn prev(&mut self) {
        assert!(self.valid(), "prev() on an invalid SST iterator");
        if let Some(d) = &mut self.data {
            d.prev();
        }
        self.settle(false);
    }

    fn key(&self) -> &[u8] {
        self.data.as_ref().expect("valid iterator").key()
    }

    fn value(&self) -> &[u8] {
        self.data.as_ref().expect("valid iterator").value()
    }

    fn status(&self) -> Result<()> {
        match &self.error {
            None => Ok(()),
            Some(e) => Err(super::duplicate_error(e)),
        }
    }
}
