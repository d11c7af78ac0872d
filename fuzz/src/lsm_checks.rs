//! What the lsm fuzz targets check.
//!
//! Kept apart from `checks.rs` because that file is also compiled into `shale-space`'s tests,
//! which cannot depend on `shale-lsm` (the lsm crate depends on the space crate). This file is
//! compiled twice: as `shale_fuzz::lsm_checks` for the fuzz targets, and as a module of
//! `crates/lsm/tests/fuzz_regressions.rs`. It may use only the public API of `shale_lsm`.

use std::sync::Arc;

use shale_lsm::cache::BlockCache;
use shale_lsm::iter::InternalIterator;
use shale_lsm::key::{self, Kind};
use shale_lsm::range_del::{self, Fragments, RangeTombstone};
use shale_lsm::sst::block::{Block, BlockBuilder};
use shale_lsm::sst::footer::{FOOTER_BYTES, SST_MAGIC};
use shale_lsm::sst::format::{BLOCK_TRAILER_BYTES, BlockHandle};
use shale_lsm::sst::range_del_block;
use shale_lsm::sst::{
    BlockSource, Compression, IndexAndFilter, SstBuilder, SstOptions, SstProperties, SstReader,
    bloom_hash,
};
use shale_lsm::wal::meta::WalMeta;
use shale_lsm::wal::page::{self, FragmentType, PAGE_BYTES, PAGE_PAYLOAD_BYTES, PageBuf};

/// Most moves one iterator makes over a fuzz input; every block holds far fewer entries, so
/// reaching it means an iterator failed to advance.
const STEPS_MAX: usize = 1 << 20;

/// Walks `it` forward from the first entry and backward from the last, collecting the keys
/// met going forward; every key an iterator shows is a whole internal key.
fn walk(it: &mut dyn InternalIterator) -> Vec<Vec<u8>> {
    let mut keys = Vec::new();
    it.seek_to_first();
    while it.valid() {
        assert!(it.key().len() >= key::TRAILER_BYTES, "key without a trailer");
        let _ = it.value();
        keys.push(it.key().to_vec());
        assert!(keys.len() < STEPS_MAX, "forward iteration does not end");
        it.next();
    }
    let _ = it.status();
    it.seek_to_last();
    let mut steps = 0;
    while it.valid() {
        assert!(it.key().len() >= key::TRAILER_BYTES, "key without a trailer");
        steps += 1;
        assert!(steps < STEPS_MAX, "backward iteration does not end");
        it.prev();
    }
    let _ = it.status();
    keys
}

/// Seeks at every key met, and just before and after it.
fn seek_around(it: &mut dyn InternalIterator, keys: &[Vec<u8>]) {
    for k in keys.iter().take(256) {
        let user = key::user_key(k);
        for target in [
            k.clone(),
            key::encode(user, 0, Kind::Delete),
            key::encode(user, key::SEQ_MAX, Kind::SEEK),
        ] {
            it.seek(&target);
            it.seek_for_prev(&target);
            if it.valid() {
                it.prev();
            }
        }
    }
    let _ = it.status();
}

/// Decodes `data` as a data or index block and as a whole SST image, then once more as an SST
/// image whose checksums were recomputed ([`forge_checksums`]), so that damaged handles, keys
/// and lengths reach the decoders behind the checksums; each is iterated and queried every
/// way: each step gives an error or data, never a panic or a hang.
pub fn sst_block(data: &[u8]) {
    if let Ok(block) = Block::new(data.to_vec(), 0) {
        let block = Arc::new(block);
        let mut it = block.iter();
        let keys = walk(&mut it);
        seek_around(&mut it, &keys);
    }
    read_image(data.to_vec());
    let mut forged = data.to_vec();
    if forge_checksums(&mut forged) {
        read_image(forged);
    }
}

/// Opens an SST image and reads all of it every way, with its index and filter held by the
/// reader and again with them in a cache so small that every lookup reads them again.
fn read_image(image: Vec<u8>) {
    let source: Arc<dyn BlockSource> = Arc::new(image);
    for (place, cache_bytes) in [(IndexAndFilter::Held, 1 << 20), (IndexAndFilter::Cached, 0)] {
        read_image_with(source.clone(), Arc::new(BlockCache::new(cache_bytes)), place);
    }
}

fn read_image_with(source: Arc<dyn BlockSource>, cache: Arc<BlockCache>, place: IndexAndFilter) {
    if let Ok(reader) = SstReader::open(source, cache, 1, place) {
        let mut it = reader.iter();
        let keys = walk(&mut it);
        seek_around(&mut it, &keys);
        for k in keys.iter().take(256) {
            let user = key::user_key(k);
            let _ = reader.get(k, bloom_hash(user));
            let _ = reader.max_covering_tombstone_seq(user, key::SEQ_MAX);
        }
        let _ = reader.verify_range_del_block();
    }
}

/// Fuzz target `range_del_block`: the bytes as a range-deletion block (behind its checksum).
/// Decoding gives an error or tombstones; decoded tombstones are well formed, re-encode to
/// exactly the input, and their fragments answer every lookup as a linear scan does.
pub fn range_del_block(data: &[u8]) {
    let Ok(tombstones) = range_del_block::decode(data, 0) else { return };
    assert!(tombstones.iter().all(|t| t.start < t.end && t.seq <= key::SEQ_MAX));
    assert_eq!(range_del_block::encode(&tombstones), data, "does not re-encode to the input");
    let fragments = Fragments::new(&tombstones);
    let newest = Fragments::newest_only(&tombstones);
    let mut seqs: Vec<u64> = tombstones.iter().map(|t| t.seq).take(16).collect();
    seqs.extend([0, key::SEQ_MAX, u64::MAX]);
    for t in tombstones.iter().take(64) {
        for user in [&t.start[..], &t.end[..], &[t.start.as_slice(), &[0]].concat()[..]] {
            for &snap in &seqs {
                let want = range_del::max_covering_seq(&tombstones, user, snap);
                assert_eq!(fragments.max_covering_seq(user, snap), want, "fragments disagree");
            }
            let want = range_del::max_covering_seq(&tombstones, user, u64::MAX);
            assert_eq!(newest.max_covering_seq(user, u64::MAX), want, "newest disagrees");
        }
    }
    let joined = range_del::normalize(tombstones.clone());
    assert!(joined.len() <= tombstones.len());
}

/// The CRC32C a block trailer holds (see `shale_lsm::sst::format`).
fn trailer_crc(body: &[u8], kind: u8) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(body), &[kind])
}

/// Recomputes the checksum of the block at `h` in `image`, if it lies inside.
fn forge_block(image: &mut [u8], h: BlockHandle) {
    let (Ok(start), Ok(size)) = (usize::try_from(h.offset), usize::try_from(h.size)) else {
        return;
    };
    let Some(end) = start.checked_add(size).filter(|&e| e + BLOCK_TRAILER_BYTES <= image.len())
    else {
        return;
    };
    let crc = trailer_crc(&image[start..end], image[end]);
    image[end + 1..end + BLOCK_TRAILER_BYTES].copy_from_slice(&crc.to_le_bytes());
}

/// If `image` ends in something with the SST magic, recomputes the footer's checksum, the
/// checksums of the blocks its handles name, and those of the data blocks an uncompressed index
/// names. Returns whether it changed anything.
pub fn forge_checksums(image: &mut [u8]) -> bool {
    let Some(at) = image.len().checked_sub(FOOTER_BYTES) else { return false };
    if image[at..at + 8] != SST_MAGIC {
        return false;
    }
    let before = image.to_vec();
    let crc = crc32c::crc32c(&image[at..at + FOOTER_BYTES - 4]);
    image[at + FOOTER_BYTES - 4..].copy_from_slice(&crc.to_le_bytes());
    let handle = |image: &[u8], i: usize| {
        let s = at + 16 + 12 * i;
        BlockHandle::decode(&image[s..s + 12]).expect("12 bytes")
    };
    for i in 0..3 {
        let h = handle(image, i);
        forge_block(image, h);
    }
    // The range-deletion block is named by the properties, not the footer.
    let props = handle(image, 2);
    let body = usize::try_from(props.offset)
        .ok()
        .and_then(|s| image.get(s..s.checked_add(props.size as usize)?));
    if let Some(Ok(p)) = body.map(|b| SstProperties::decode(b, props.offset)) {
        if let Some(h) = p.range_del {
            forge_block(image, h);
        }
    }
    let index = handle(image, 1);
    let body = usize::try_from(index.offset)
        .ok()
        .and_then(|s| image.get(s..s.checked_add(index.size as usize)?));
    let kind = body.and_then(|_| image.get(index.offset as usize + index.size as usize));
    if let (Some(body), Some(&0)) = (body, kind) {
        if let Ok(block) = Block::new(body.to_vec(), index.offset) {
            let mut it = Arc::new(block).iter();
            it.seek_to_first();
            let mut data_blocks = Vec::new();
            while it.valid() && data_blocks.len() < STEPS_MAX {
                data_blocks.extend(BlockHandle::decode(it.value()));
                it.next();
            }
            for h in data_blocks {
                forge_block(image, h);
            }
        }
    }
    image[..] != before[..]
}

fn seed_entries(n: u32) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..n)
        .flat_map(|i| {
            let user = format!("key{:04}", i * 3).into_bytes();
            let value = format!("value-{i}-{}", "ab".repeat(i as usize % 9)).into_bytes();
            [
                (key::encode(&user, 20, Kind::Put), value),
                (key::encode(&user, 10, Kind::Delete), Vec::new()),
            ]
        })
        .collect()
}

fn seed_image(compression: Compression, block_bytes: usize) -> Vec<u8> {
    let opts =
        SstOptions { block_bytes, restart_interval: 4, compression, ..SstOptions::default() };
    let mut b = SstBuilder::new(&opts);
    for (k, v) in seed_entries(40) {
        b.add(&k, &v);
    }
    for t in seed_tombstones() {
        b.add_range_tombstone(t);
    }
    b.finish(512).bytes.to_vec()
}

/// Overlapping tombstones over the seed entries, one past their last key.
fn seed_tombstones() -> Vec<RangeTombstone> {
    vec![
        RangeTombstone::new(b"key0010", b"key0040", 15),
        RangeTombstone::new(b"key0030", b"key0031", 25),
        RangeTombstone::new(b"key0030", b"key0090", 5),
        RangeTombstone::new(b"key0200", b"\xff\xff", 30),
    ]
}

/// Inputs the target starts from: blocks and small SST images (512-byte slots).
/// `crates/lsm/tests/fuzz_regressions.rs` checks they are committed under `fuzz/regressions/`.
/// Fuzz target `wal_page`: the first byte chooses which checksums to recompute (bit 0: the
/// page's, bit 1: the metadata page's) so the decoders behind them are reached; the rest is a
/// WAL page (zero-padded to 4 KiB), also read as a metadata page and as a WAL record. Every
/// decoder answers with an error or data, never a panic; a page or metadata page that decodes
/// describes only bytes inside itself, and metadata re-encodes to what it decoded from.
pub fn wal_page(data: &[u8]) {
    let Some((&flags, body)) = data.split_first() else { return };
    let mut bytes = vec![0u8; PAGE_BYTES];
    let n = body.len().min(PAGE_BYTES);
    bytes[..n].copy_from_slice(&body[..n]);
    let mut as_page = bytes.clone();
    if flags & 1 != 0 {
        let crc = crc32c::crc32c(&as_page[12..]);
        as_page[8..12].copy_from_slice(&crc.to_le_bytes());
    }
    let ltn = u64::from_le_bytes(as_page[..8].try_into().unwrap());
    let index = u32::from_le_bytes(as_page[12..16].try_into().unwrap());
    if let Ok(p) = page::decode(&as_page, ltn, index) {
        let used: usize = p.fragments.iter().map(|f| f.data.len() + 3).sum();
        assert!(used <= PAGE_PAYLOAD_BYTES, "fragments run past the payload area");
    }
    let _ = page::claimed(&as_page);
    let mut as_meta = bytes;
    if flags & 2 != 0 {
        as_meta[..4].copy_from_slice(shale_lsm::wal::meta::META_MAGIC);
        let crc = crc32c::crc32c(&as_meta[8..]);
        as_meta[4..8].copy_from_slice(&crc.to_le_bytes());
    }
    if let Some(m) = WalMeta::decode(&as_meta) {
        assert_eq!(WalMeta::decode(&m.encode()), Some(m), "metadata does not round-trip");
    }
    let _ = shale_lsm::batch::decode(body, 0);
}

/// A sealed WAL page holding two records, the second spanning into the next page.
fn seed_wal_page() -> Vec<u8> {
    let mut p = PageBuf::new();
    let mut batch = shale_lsm::batch::WriteBatch::new();
    batch.put(b"key", b"value");
    batch.delete(b"gone");
    p.push(FragmentType::Full, &batch.encode(7));
    p.push(FragmentType::First, &[9u8; 200]);
    let mut out = vec![1u8];
    out.extend_from_slice(p.seal(3, 0, 0, 0).0);
    out
}

pub fn seeds() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let block = |n: u32, interval: usize| {
        let mut b = BlockBuilder::new(interval);
        for (k, v) in seed_entries(n) {
            b.add(&k, &v);
        }
        b.finish()
    };
    vec![
        ("sst_block", "block-empty", block(0, 16)),
        ("sst_block", "block-restart-2", block(12, 2)),
        ("sst_block", "block-restart-16", block(30, 16)),
        ("sst_block", "image-uncompressed", seed_image(Compression::None, 256)),
        ("sst_block", "image-lz4", seed_image(Compression::Lz4, 512)),
        ("sst_block", "image-zero-length-index-key", forged_short_index_key()),
        ("range_del_block", "empty", range_del_block::encode(&[])),
        ("range_del_block", "four-overlapping", {
            let mut ts = seed_tombstones();
            ts.sort_by(|a, b| a.sst_order(b));
            range_del_block::encode(&ts)
        }),
        ("wal_page", "page-two-records", seed_wal_page()),
        ("wal_page", "metadata-three-groups", {
            let mut out = vec![2u8];
            out.extend_from_slice(&WalMeta::empty(3, 100).encode());
            out
        }),
    ]
}

/// A forged image (checksums recomputed) whose first index entry claims a zero-length unshared
/// key: the index decoder must call it corruption.
fn forged_short_index_key() -> Vec<u8> {
    let mut image = seed_image(Compression::None, 256);
    let at = image.len() - FOOTER_BYTES;
    let index = BlockHandle::decode(&image[at + 28..at + 40]).expect("12 bytes");
    // Entry 0 of the index starts at its first byte: shared (0), unshared, value length.
    image[index.offset as usize + 1] = 0;
    assert!(forge_checksums(&mut image));
    image
}
