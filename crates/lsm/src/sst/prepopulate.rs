//! Filling the block cache from an SST as it is written (RocksDB's `prepopulate_block_cache`,
//! for flush and compaction outputs).
//!
//! Why: with O_DIRECT SST writes (`use_direct_io_for_flush_and_compaction`), or direct reads,
//! shale finds none of a new SST in the page cache, unlike an engine on buffered files, and a
//! compaction also retires the cached blocks of its inputs.
//! Without this, every read after a compaction goes to the device until the cache warms again,
//! although the writer held each block in memory a moment before. The builder hands each data
//! block to [`data_block_sink`] as it cuts it, uncompressed, so caching it costs one insert and
//! no copy (the SST is streamed to the device and never whole in memory); the index and filter
//! come from the finished image's tail ([`prepopulate_meta_blocks`]). The cache evicts what
//! does not fit, as the page cache would; or, for outputs the page cache will hold anyway (a
//! compaction's, written and read through it), the blocks fill only free room
//! (`data_block_sink`'s `evict`), so that a compaction does not sweep out what readers use.

use std::sync::Arc;

use crate::cache::{BlockCache, Cached};
use crate::error::Result;
use crate::sst::block::Block;
use crate::sst::bloom::BloomFilter;
use crate::sst::builder::{BlockSink, SstImage};
use crate::sst::footer::{FOOTER_BYTES, Footer};
use crate::sst::format::{BlockHandle, decode_block};
use crate::sst::reader::IndexAndFilter;

/// A sink for [`SstBuilder::set_block_sink`] that caches every data block under `cache_id`, at
/// the offset the reader will look it up by; `None` for a cache of no capacity. With `evict`
/// false a block is cached only where its shard has room without evicting
/// ([`BlockCache::insert_if_room`]): free room is filled, what readers use stays.
///
/// [`SstBuilder::set_block_sink`]: crate::sst::SstBuilder::set_block_sink
pub fn data_block_sink(cache: Arc<BlockCache>, cache_id: u64, evict: bool) -> Option<BlockSink> {
    if cache.capacity_bytes() == 0 {
        return None;
    }
    Some(Box::new(move |offset, raw: &[u8]| {
        if !evict && !cache.has_room(cache_id, offset, raw.len()) {
            return;
        }
        // Copied into a buffer the cache hands out (one of a block it evicted, when it has
        // one): the builder's own buffer has room to spare, and a block allocated here would
        // be freed by whichever reader thread evicts it (see `cache`).
        let mut data = cache.buffer(cache_id, offset, raw.len());
        data.extend_from_slice(raw);
        match Block::new(data, offset) {
            Ok(block) if evict => {
                cache.insert(cache_id, offset, Cached::Data(Arc::new(block)));
            }
            Ok(block) => {
                cache.insert_if_room(cache_id, offset, Cached::Data(Arc::new(block)));
            }
            // The builder made the block a moment ago: a bug, and only the cache loses it.
            Err(e) => debug_assert!(false, "a block the builder cut does not decode: {e}"),
        }
    }))
}

/// Caches the index and filter of the finished `image` (of which only the tail from
/// `image.base` is in memory: every meta block is there) under `cache_id`, where the reader
/// looks for them ([`IndexAndFilter::Cached`]); with [`IndexAndFilter::Held`] the reader holds
/// them itself, and nothing is done.
///
/// # Errors
/// [`Error::Corruption`](crate::Error::Corruption) if the tail does not decode: the image was
/// built by this process, so that is a bug, and the caller must not commit the SST.
pub fn prepopulate_meta_blocks(
    cache: &BlockCache,
    cache_id: u64,
    image: &SstImage,
    index_and_filter: IndexAndFilter,
) -> Result<()> {
    if cache.capacity_bytes() == 0 || index_and_filter == IndexAndFilter::Held {
        return Ok(());
    }
    let tail = &image.bytes;
    let footer = Footer::decode(&tail[tail.len().saturating_sub(FOOTER_BYTES)..], image.len())?;
    let stored = |h: BlockHandle, what: &str| -> Result<Vec<u8>> {
        let bytes = h
            .offset
            .checked_sub(image.base)
            .and_then(|s| usize::try_from(s).ok())
            .and_then(|s| tail.get(s..s.checked_add(usize::try_from(h.stored_bytes()).ok()?)?))
            .ok_or_else(|| {
                crate::Error::corruption("SST image: meta block outside its tail", h.offset)
            })?;
        decode_block(bytes, h, what)
    };
    let index = Block::new(stored(footer.index, "index block")?, footer.index.offset)?;
    if let Some(fh) = footer.filter {
        let filter = BloomFilter::new(stored(fh, "filter block")?, fh.offset)?;
        cache.insert(cache_id, fh.offset, Cached::Filter(Arc::new(filter)));
    }
    cache.insert(cache_id, footer.index.offset, Cached::Index(Arc::new(index)));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::InternalIterator;
    use crate::key::{self, Kind};
    use crate::sst::{SstBuilder, SstOptions, SstReader, bloom_hash};

    /// An SST of `entries` entries built with the cache's sink, its data blocks taken out as
    /// they are written (as a flush streams them), and the meta blocks cached from its tail;
    /// returns the whole image.
    fn build_into(cache: &Arc<BlockCache>, entries: u32, place: IndexAndFilter) -> Vec<u8> {
        let mut b = SstBuilder::new(&SstOptions::default());
        if let Some(sink) = data_block_sink(cache.clone(), 9, true) {
            b.set_block_sink(sink);
        }
        let mut whole = Vec::new();
        for i in 0..entries {
            b.add(&key::encode(format!("key{i:06}").as_bytes(), 1, Kind::Put), &[7u8; 100]);
            if let Some((_, bytes)) = b.take_written(16 << 10, 4096) {
                whole.extend_from_slice(&bytes);
            }
        }
        let image = b.finish(4096);
        assert!(entries < 1000 || image.base > 0, "part of the image was taken out");
        prepopulate_meta_blocks(cache, 9, &image, place).unwrap();
        whole.extend_from_slice(&image.bytes);
        whole
    }

    #[test]
    fn every_block_a_reader_needs_is_cached() {
        for place in [IndexAndFilter::Held, IndexAndFilter::Cached] {
            every_block_a_reader_needs_is_cached_with(place);
        }
    }

    fn every_block_a_reader_needs_is_cached_with(place: IndexAndFilter) {
        use crate::cache::BlockKind;
        let cache = Arc::new(BlockCache::new(64 << 20));
        let img = build_into(&cache, 2000, place);
        let blocks = cache.usage_bytes_of(BlockKind::Data) / 4096;
        assert!(blocks > 50, "2000 entries of ~120 B fill many 4 KiB blocks: {blocks}");
        // The index and filter are cached only where the reader will look for them.
        let meta = cache.usage_bytes_of(BlockKind::Index) + cache.usage_bytes_of(BlockKind::Filter);
        assert_eq!(meta > 0, place == IndexAndFilter::Cached, "{place:?}");
        assert_eq!(cache.usage_bytes(), cache.usage_bytes_of(BlockKind::Data) + meta);
        // Open, read every key and scan: nothing may miss the cache (a data block left out
        // would be read from the image and counted as a miss; so would a cached index or
        // filter at open).
        let misses = cache.misses();
        let reader = SstReader::open(Arc::new(img.clone()), cache.clone(), 9, place).unwrap();
        for i in 0..2000 {
            let k = format!("key{i:06}");
            let got =
                reader.get(&key::encode(k.as_bytes(), 5, Kind::SEEK), bloom_hash(k.as_bytes()));
            assert!(got.unwrap().is_some(), "{k}");
        }
        let mut it = reader.iter();
        it.seek_to_first();
        let mut n = 0;
        while it.valid() {
            n += 1;
            it.next();
        }
        it.status().unwrap();
        assert_eq!(n, 2000);
        assert_eq!(cache.misses(), misses, "{place:?}: no lookup missed the cache");
    }

    #[test]
    fn a_zero_cache_is_left_alone_and_a_damaged_tail_is_refused() {
        let none = Arc::new(BlockCache::new(0));
        assert!(data_block_sink(none.clone(), 1, true).is_none());
        build_into(&none, 100, IndexAndFilter::Cached);
        assert_eq!(none.usage_bytes(), 0);
        let mut b = SstBuilder::new(&SstOptions::default());
        b.add(&key::encode(b"k", 1, Kind::Put), b"v");
        let mut image = b.finish(4096);
        let last = image.bytes.len() - 1;
        image.bytes[last] ^= 0xff;
        let cache = BlockCache::new(1 << 20);
        assert!(matches!(
            prepopulate_meta_blocks(&cache, 1, &image, IndexAndFilter::Cached),
            Err(crate::Error::Corruption { .. })
        ));
        prepopulate_meta_blocks(&cache, 1, &image, IndexAndFilter::Held).unwrap();
    }

    #[test]
    fn a_sink_that_may_not_evict_fills_only_free_room() {
        use crate::cache::BlockKind;
        let cache = Arc::new(BlockCache::new(256 << 10));
        let fill = |id: u64, evict: bool| {
            let mut b = SstBuilder::new(&SstOptions::default());
            b.set_block_sink(data_block_sink(cache.clone(), id, evict).unwrap());
            for i in 0..4000u32 {
                b.add(&key::encode(format!("key{i:06}").as_bytes(), 1, Kind::Put), &[1u8; 100]);
            }
            b.finish(4096);
        };
        // Into an empty cache, it fills the room there is and stops short of the budget.
        fill(1, false);
        let used = cache.usage_bytes_of(BlockKind::Data);
        assert!(used > (256 << 10) / 2 && used <= 256 << 10, "{used}");
        // A full cache keeps its blocks: a second SST adds none of its own.
        let adds = cache.adds();
        fill(2, false);
        assert_eq!(cache.adds(), adds);
        // A sink that may evict puts its blocks in all the same.
        fill(3, true);
        assert!(cache.adds() > adds);
    }
}
