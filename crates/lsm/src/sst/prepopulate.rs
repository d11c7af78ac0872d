//! Filling the block cache from an SST image as it is written (RocksDB's
//! `prepopulate_block_cache`, for flush and compaction outputs alike).
//!
//! Why: with O_DIRECT SST writes (`use_direct_io_for_flush_and_compaction`), or direct reads,
//! shale finds none of a new SST in the page cache, unlike an engine on buffered files, and a
//! compaction also retires the cached blocks of its inputs.
//! Without this, every read after a compaction goes to the device until the cache warms again,
//! although the writer held each block in memory a moment before. Decoding the image's blocks
//! here costs a copy of the image and one cache insert per block; the LRU evicts what does not
//! fit, as the page cache would.

use std::sync::Arc;

use crate::cache::{BlockCache, Cached};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::sst::block::Block;
use crate::sst::bloom::BloomFilter;
use crate::sst::footer::Footer;
use crate::sst::format::{BlockHandle, decode_block};
use crate::sst::reader::{IndexAndFilter, TAIL_READ_BYTES};

/// Caches every data block of `image` (a finished SST, footer in its last bytes) under
/// `cache_id`, at the offsets the reader will look them up by, and its index and filter too
/// where the reader looks for them in the cache ([`IndexAndFilter::Cached`]). Returns the
/// number of data blocks cached (or offered, for blocks larger than a cache shard).
///
/// # Errors
/// [`Error::Corruption`] if the image does not decode: it was built by this process, so that is
/// a bug, and the caller must not commit the SST.
pub fn prepopulate_block_cache(
    cache: &BlockCache,
    cache_id: u64,
    image: &[u8],
    index_and_filter: IndexAndFilter,
) -> Result<usize> {
    if cache.capacity_bytes() == 0 {
        return Ok(0);
    }
    let image_bytes = image.len() as u64;
    let tail_start = image.len().saturating_sub(TAIL_READ_BYTES as usize);
    let footer = Footer::decode(&image[tail_start..], image_bytes)?;
    let stored = |h: BlockHandle, what: &str| -> Result<Vec<u8>> {
        let bytes = usize::try_from(h.offset)
            .ok()
            .and_then(|s| image.get(s..s.checked_add(usize::try_from(h.stored_bytes()).ok()?)?))
            .ok_or_else(|| Error::corruption("SST image: block outside the image", h.offset))?;
        decode_block(bytes, h, what)
    };
    let index = Arc::new(Block::new(stored(footer.index, "index block")?, footer.index.offset)?);
    let cache_meta = index_and_filter == IndexAndFilter::Cached;
    if let Some(fh) = footer.filter.filter(|_| cache_meta) {
        let filter = BloomFilter::new(stored(fh, "filter block")?, fh.offset)?;
        cache.insert(cache_id, fh.offset, Cached::Filter(filter));
    }
    let mut blocks = 0;
    let mut it = index.iter();
    it.seek_to_first();
    while it.valid() {
        let h = BlockHandle::decode(it.value())
            .ok_or_else(|| Error::corruption("SST index: bad block handle", footer.index.offset))?;
        let data = Block::new(stored(h, "data block")?, h.offset)?;
        cache.insert(cache_id, h.offset, Cached::Data(Arc::new(data)));
        blocks += 1;
        it.next();
    }
    it.status()?;
    if cache_meta {
        cache.insert(cache_id, footer.index.offset, Cached::Index(index));
    }
    Ok(blocks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{self, Kind};
    use crate::sst::{SstBuilder, SstOptions, SstReader, bloom_hash};

    fn image(entries: u32) -> Vec<u8> {
        let mut b = SstBuilder::new(&SstOptions::default());
        for i in 0..entries {
            b.add(&key::encode(format!("key{i:06}").as_bytes(), 1, Kind::Put), &[7u8; 100]);
        }
        b.finish(4096).bytes.to_vec()
    }

    #[test]
    fn every_block_a_reader_needs_is_cached() {
        for place in [IndexAndFilter::Held, IndexAndFilter::Cached] {
            every_block_a_reader_needs_is_cached_with(place);
        }
    }

    fn every_block_a_reader_needs_is_cached_with(place: IndexAndFilter) {
        use crate::cache::BlockKind;
        let img = image(2000);
        let cache = Arc::new(BlockCache::new(64 << 20));
        let blocks = prepopulate_block_cache(&cache, 9, &img, place).unwrap();
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
    fn a_zero_cache_is_left_alone_and_a_damaged_image_is_refused() {
        let img = image(100);
        assert_eq!(
            prepopulate_block_cache(&BlockCache::new(0), 1, &img, IndexAndFilter::Cached).unwrap(),
            0
        );
        let mut bad = img.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        assert!(matches!(
            prepopulate_block_cache(&BlockCache::new(1 << 20), 1, &bad, IndexAndFilter::Held),
            Err(Error::Corruption { .. })
        ));
    }
}
