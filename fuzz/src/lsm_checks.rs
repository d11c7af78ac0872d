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
use shale_lsm::sst::block::{Block, BlockBuilder};
use shale_lsm::sst::{BlockSource, Compression, SstBuilder, SstOptions, SstReader, bloom_hash};

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

/// Decodes `data` as a data or index block and as a whole SST image, and iterates and queries
/// both every way: each step gives an error or data, never a panic or a hang.
pub fn sst_block(data: &[u8]) {
    if let Ok(block) = Block::new(data.to_vec(), 0) {
        let block = Arc::new(block);
        let mut it = block.iter();
        let keys = walk(&mut it);
        seek_around(&mut it, &keys);
    }
    let cache = Arc::new(BlockCache::new(1 << 20));
    let source: Arc<dyn BlockSource> = Arc::new(data.to_vec());
    if let Ok(reader) = SstReader::open(source, cache, 1) {
        let mut it = reader.iter();
        let keys = walk(&mut it);
        seek_around(&mut it, &keys);
        for k in keys.iter().take(256) {
            let user = key::user_key(k);
            let _ = reader.get(k, bloom_hash(user));
        }
    }
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
    b.finish(512).bytes.to_vec()
}

/// Inputs the target starts from: blocks and small SST images (512-byte slots).
/// `crates/lsm/tests/fuzz_regressions.rs` checks they are committed under `fuzz/regressions/`.
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
    ]
}
