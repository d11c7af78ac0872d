//! Round trips, damage and truncation of whole SST images (builder + reader).

use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::footer::{FOOTER_BYTES, Footer};
use super::*;
use crate::cache::{BlockCache, BlockKind};
use crate::error::Error;
use crate::iter::InternalIterator;
use crate::key::{self, Kind};

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Sorted entries: distinct user keys (with gaps between them, so absent keys exist), some with
/// several versions, some tombstones; values from empty to a few hundred bytes, half of them
/// compressible.
fn entries(rng: &mut SmallRng, users: usize) -> Entries {
    let mut out = Vec::new();
    let mut seq = 1_000_000u64;
    for u in 0..users {
        let user = format!("user{:08}", u * 2 + 1).into_bytes();
        for _ in 0..rng.gen_range(1..4) {
            seq -= rng.gen_range(1..50);
            let kind = if rng.gen_bool(0.1) { Kind::Delete } else { Kind::Put };
            let len = rng.gen_range(0..300);
            let value: Vec<u8> = if rng.gen_bool(0.5) {
                (0..len).map(|i| b"abcd"[i % 4]).collect()
            } else {
                (0..len).map(|_| rng.r#gen()).collect()
            };
            out.push((key::encode(&user, seq, kind), value));
        }
        seq = 1_000_000;
    }
    out
}

fn build(e: &Entries, opts: &SstOptions, slot_bytes: u64) -> SstImage {
    let mut b = SstBuilder::new(opts);
    for (k, v) in e {
        b.add(k, v);
    }
    assert!(b.estimated_bytes() > 0);
    b.finish(slot_bytes)
}

fn open(bytes: Vec<u8>) -> crate::Result<SstReader> {
    open_with(bytes, IndexAndFilter::Held)
}

fn open_with(bytes: Vec<u8>, place: IndexAndFilter) -> crate::Result<SstReader> {
    SstReader::open(Arc::new(bytes), Arc::new(BlockCache::new(1 << 20)), 1, place)
}

fn scan_forward(r: &SstReader) -> crate::Result<Entries> {
    let mut it = r.iter();
    it.seek_to_first();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().map(|()| out)
}

fn scan_backward(r: &SstReader) -> crate::Result<Entries> {
    let mut it = r.iter();
    it.seek_to_last();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    out.reverse();
    it.status().map(|()| out)
}

/// The entry a lookup of `user` at `seq` must find: the newest version at or below `seq`.
fn expected_get(e: &Entries, user: &[u8], seq: u64) -> Option<(Vec<u8>, Vec<u8>)> {
    e.iter().find(|(k, _)| key::user_key(k) == user && key::parse(k).unwrap().seq <= seq).cloned()
}

fn check_round_trip(e: &Entries, opts: &SstOptions, slot_bytes: u64, rng: &mut SmallRng) {
    let image = build(e, opts, slot_bytes);
    let len = image.bytes.len();
    assert_eq!(len as u64 % slot_bytes, 0);
    let footer = Footer::decode(&image.bytes[len - FOOTER_BYTES..], len as u64).unwrap();
    assert_eq!(footer.image_bytes, len as u64);
    assert_eq!(footer.filter.is_some(), opts.bloom_bits_per_key > 0);
    let r = open(image.bytes.to_vec()).unwrap();
    let p = r.properties();
    assert_eq!(p, &image.properties);
    assert_eq!(p.entries, e.len() as u64);
    assert_eq!(p.compression, opts.compression);
    if let (Some(first), Some(last)) = (e.first(), e.last()) {
        assert_eq!((&p.smallest, &p.largest), (&first.0, &last.0));
    }
    assert_eq!(&scan_forward(&r).unwrap(), e);
    assert_eq!(&scan_backward(&r).unwrap(), e);

    let mut it = r.iter();
    let step = (e.len() / 200).max(1);
    for (i, (k, v)) in e.iter().enumerate().step_by(step) {
        it.seek(k);
        assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
        it.seek_for_prev(k);
        assert_eq!(it.key(), &k[..]);
        // A target just after this entry (older sequence of the same user key).
        let p = key::parse(k).unwrap();
        let after = key::encode(p.user_key, p.seq - 1, Kind::SEEK);
        it.seek(&after);
        let want = e[i + 1..].iter().find(|(x, _)| key::compare(x, &after).is_ge());
        assert_eq!(it.valid().then(|| it.key().to_vec()), want.map(|w| w.0.clone()));
        it.seek_for_prev(&after);
        let want = e.iter().rev().find(|(x, _)| key::compare(x, &after).is_le()).unwrap();
        assert_eq!(it.key(), &want.0[..]);
        // A user key absent from the SST, between this one and the next.
        let mut between = p.user_key.to_vec();
        between.push(0);
        let target = key::encode(&between, 5, Kind::SEEK);
        it.seek(&target);
        let want = e.iter().find(|(x, _)| key::compare(x, &target).is_gt());
        assert_eq!(it.valid().then(|| it.key().to_vec()), want.map(|w| w.0.clone()));
        it.seek_for_prev(&target);
        let want = e.iter().rev().find(|(x, _)| key::compare(x, &target).is_lt());
        assert_eq!(it.valid().then(|| it.key().to_vec()), want.map(|w| w.0.clone()));

        // Point lookups at several sequence numbers.
        for seq in [key::SEQ_MAX, p.seq, p.seq - 1, p.seq + 1, rng.gen_range(0..1_000_001)] {
            let lookup = key::encode(p.user_key, seq, Kind::SEEK);
            let got = r.get(&lookup, bloom_hash(p.user_key)).unwrap();
            assert_eq!(got, expected_get(e, p.user_key, seq), "get at {seq}");
        }
        let absent = key::encode(&between, key::SEQ_MAX, Kind::SEEK);
        assert_eq!(r.get(&absent, bloom_hash(&between)).unwrap(), None);
    }
    it.status().unwrap();
}

#[test]
fn images_round_trip_in_every_compression_and_size() {
    let mut rng = SmallRng::seed_from_u64(42);
    for compression in [Compression::None, Compression::Lz4, Compression::Zstd] {
        for users in [0, 1, 2, 17, 400, 3000] {
            for (block_bytes, restart_interval, bits) in
                [(4096, 16, 10), (256, 1, 0), (1024, 5, 3), (16384, 16, 10)]
            {
                for block_align in [true, false] {
                    let opts = SstOptions {
                        block_bytes,
                        restart_interval,
                        bloom_bits_per_key: bits,
                        compression,
                        block_align,
                    };
                    let e = entries(&mut rng, users);
                    for slot_bytes in [4096, 64 << 10] {
                        check_round_trip(&e, &opts, slot_bytes, &mut rng);
                    }
                }
            }
        }
    }
}

#[test]
fn compression_is_used_when_it_pays() {
    let e: Entries = (0..2000u32)
        .map(|i| (key::encode(format!("key{i:06}").as_bytes(), 1, Kind::Put), vec![b'x'; 100]))
        .collect();
    let plain = build(&e, &SstOptions::default(), 4096);
    for c in [Compression::Lz4, Compression::Zstd] {
        let packed = build(&e, &SstOptions { compression: c, ..SstOptions::default() }, 4096);
        assert!(
            packed.properties.data_bytes * 4 < plain.properties.data_bytes,
            "{c:?}: {} vs {}",
            packed.properties.data_bytes,
            plain.properties.data_bytes
        );
    }
}

#[test]
fn bloom_filter_skips_absent_keys_without_reading_data() {
    let mut rng = SmallRng::seed_from_u64(5);
    let e = entries(&mut rng, 2000);
    let image = build(&e, &SstOptions::default(), 4096);
    let cache = Arc::new(BlockCache::new(1 << 20));
    let r = SstReader::open(Arc::new(image.bytes.to_vec()), cache.clone(), 9, IndexAndFilter::Held)
        .unwrap();
    let before = cache.hits() + cache.misses();
    let mut passed = 0;
    for i in 0..2000 {
        let user = format!("user{:08}", i * 2); // even numbers are never present
        let lookup = key::encode(user.as_bytes(), key::SEQ_MAX, Kind::SEEK);
        assert_eq!(r.get(&lookup, bloom_hash(user.as_bytes())).unwrap(), None);
        passed += usize::from(cache.hits() + cache.misses() > before + passed as u64);
    }
    assert!(passed < 60, "{passed} of 2000 absent keys passed the filter");
}

#[test]
fn flipped_bytes_give_corruption_never_wrong_data() {
    let mut rng = SmallRng::seed_from_u64(77);
    for compression in [Compression::None, Compression::Lz4, Compression::Zstd] {
        let e = entries(&mut rng, 300);
        let opts = SstOptions { block_bytes: 1024, compression, ..SstOptions::default() };
        let image = build(&e, &opts, 4096);
        let good = image.bytes.to_vec();
        let len = good.len();
        let footer = Footer::decode(&good[len - FOOTER_BYTES..], len as u64).unwrap();
        let blocks_end = (footer.properties.offset + footer.properties.stored_bytes()) as usize;
        // Aligned blocks leave zero bytes between some data blocks, which nothing reads.
        let mut checked = data_block_ranges(&good, &footer);
        let data_end = checked.last().map_or(0, |r| r.end);
        let padded = checked.iter().map(ExactSizeIterator::len).sum::<usize>() < data_end;
        assert_eq!(padded, compression == Compression::None, "only plain blocks are aligned");
        checked.push(data_end.max(footer.filter.unwrap().offset as usize)..blocks_end);
        // Every 97th byte across all blocks, plus every byte of the footer and the first and
        // last bytes of the filter, index and properties blocks and their trailers.
        let mut positions: Vec<usize> = (0..blocks_end).step_by(97).collect();
        positions.extend(len - FOOTER_BYTES..len);
        for h in [footer.filter.unwrap(), footer.index, footer.properties] {
            let (s, end) = (h.offset as usize, (h.offset + h.stored_bytes()) as usize);
            positions.extend([s, s + 1, end - 6, end - 5, end - 1]);
        }
        positions.push(blocks_end + 10); // zero padding: harmless
        for (i, pos) in positions.into_iter().enumerate() {
            let mut bad = good.clone();
            bad[pos] ^= 0x20;
            let must_fail = checked.iter().any(|r| r.contains(&pos)) || pos >= len - FOOTER_BYTES;
            let place = [IndexAndFilter::Held, IndexAndFilter::Cached][i % 2];
            let outcome = damaged_outcome(bad, &e, place);
            match outcome {
                Err(Error::Corruption { .. }) => {}
                Err(other) => panic!("flip at {pos}: {other}, not corruption"),
                Ok(()) => {
                    assert!(!must_fail, "flip at {pos} of {len} went unnoticed ({compression:?})")
                }
            }
        }
    }
}

/// The byte ranges of an image's data blocks with their trailers, in order, from its index.
fn data_block_ranges(image: &[u8], footer: &Footer) -> Vec<std::ops::Range<usize>> {
    let h = footer.index;
    let stored = &image[h.offset as usize..(h.offset + h.stored_bytes()) as usize];
    let index =
        Arc::new(block::Block::new(format::decode_block(stored, h, "index").unwrap(), 0).unwrap());
    let mut it = index.iter();
    it.seek_to_first();
    let mut ranges = Vec::new();
    while it.valid() {
        let d = format::BlockHandle::decode(it.value()).unwrap();
        ranges.push(d.offset as usize..(d.offset + d.stored_bytes()) as usize);
        it.next();
    }
    ranges
}

/// Opens a damaged image and reads all of it every way; any entry returned must be right.
fn damaged_outcome(bad: Vec<u8>, e: &Entries, place: IndexAndFilter) -> crate::Result<()> {
    let r = open_with(bad, place)?;
    let mut first_error = None;
    match scan_forward(&r) {
        Ok(got) => assert_eq!(&got, e, "forward scan returned wrong data"),
        Err(err) => first_error = Some(err),
    }
    match scan_backward(&r) {
        Ok(got) => assert_eq!(&got, e, "backward scan returned wrong data"),
        Err(err) => first_error = first_error.or(Some(err)),
    }
    for (k, _) in e.iter().step_by(5) {
        let user = key::user_key(k);
        let seq = key::parse(k).unwrap().seq;
        match r.get(&key::encode(user, seq, Kind::SEEK), bloom_hash(user)) {
            Ok(got) => assert_eq!(got, expected_get(e, user, seq), "get returned wrong data"),
            Err(err) => first_error = first_error.or(Some(err)),
        }
    }
    first_error.map_or(Ok(()), Err)
}

#[test]
fn truncated_and_foreign_images_are_corruption() {
    let mut rng = SmallRng::seed_from_u64(8);
    let e = entries(&mut rng, 500);
    let good = build(&e, &SstOptions::default(), 4096).bytes.to_vec();
    for cut in [0, 1, 63, 64, 4095, 4096, good.len() - 4096, good.len() - 1] {
        let r = open(good[..cut].to_vec());
        assert!(matches!(r, Err(Error::Corruption { .. })), "cut at {cut}: {r:?}");
    }
    // The same image in a longer extent (a slot of zeros after it).
    let mut longer = good.clone();
    longer.extend_from_slice(&[0; 4096]);
    assert!(matches!(open(longer), Err(Error::Corruption { .. })));
    // A longer extent whose last bytes are the footer, moved: the recorded length differs.
    let mut moved = vec![0; 4096];
    moved.extend_from_slice(&good);
    assert!(matches!(open(moved), Err(Error::Corruption { .. })));
}

#[test]
fn held_index_and_filter_stay_out_of_the_cache() {
    let mut rng = SmallRng::seed_from_u64(1);
    let e = entries(&mut rng, 1000);
    let bytes = build(&e, &SstOptions::default(), 4096).bytes.to_vec();
    let cache = Arc::new(BlockCache::new(1 << 20));
    let r = SstReader::open(Arc::new(bytes), cache.clone(), 3, IndexAndFilter::Held).unwrap();
    assert_eq!((cache.hits(), cache.misses(), cache.usage_bytes()), (0, 0, 0), "open");
    assert!(r.held_bytes() > 0);
    assert_eq!(scan_forward(&r).unwrap(), e);
    for (k, _) in e.iter().step_by(7) {
        let user = key::user_key(k);
        r.get(&key::encode(user, key::SEQ_MAX, Kind::SEEK), bloom_hash(user)).unwrap().unwrap();
    }
    // Only data blocks were looked up, and only data blocks are charged.
    assert!(cache.usage_bytes() > 0);
    assert_eq!(cache.usage_bytes(), cache.usage_bytes_of(BlockKind::Data));
    for kind in [BlockKind::Index, BlockKind::Filter] {
        assert_eq!((cache.hits_of(kind), cache.misses_of(kind)), (0, 0), "{kind:?}");
    }
}

#[test]
fn cached_index_and_filter_go_through_the_cache() {
    let mut rng = SmallRng::seed_from_u64(1);
    let e = entries(&mut rng, 1000);
    let bytes = build(&e, &SstOptions::default(), 4096).bytes.to_vec();
    let cache = Arc::new(BlockCache::new(1 << 20));
    let source: Arc<dyn BlockSource> = Arc::new(bytes);
    let _a = SstReader::open(source.clone(), cache.clone(), 3, IndexAndFilter::Cached).unwrap();
    assert_eq!((cache.hits(), cache.misses()), (0, 2));
    let b = SstReader::open(source, cache.clone(), 3, IndexAndFilter::Cached).unwrap();
    assert_eq!((cache.hits(), cache.misses()), (2, 2));
    assert_eq!(b.held_bytes(), 0);
    assert!(cache.usage_bytes_of(BlockKind::Index) > 0);
    assert!(cache.usage_bytes_of(BlockKind::Filter) > 0);
    assert_eq!(scan_forward(&b).unwrap(), e);
    let misses = cache.misses();
    assert_eq!(scan_forward(&b).unwrap(), e);
    assert_eq!(cache.misses(), misses, "second scan missed the cache");
    // A lookup asks the cache for the filter and the index, then the data block.
    let index_hits = cache.hits_of(BlockKind::Index);
    let filter_hits = cache.hits_of(BlockKind::Filter);
    let user = key::user_key(&e[0].0);
    b.get(&key::encode(user, key::SEQ_MAX, Kind::SEEK), bloom_hash(user)).unwrap().unwrap();
    assert_eq!(cache.hits_of(BlockKind::Index), index_hits + 1);
    assert_eq!(cache.hits_of(BlockKind::Filter), filter_hits + 1);
    assert_eq!(cache.misses(), misses);
}

/// Inserts data blocks of another SST into `cache` until no index or filter block is left.
fn evict_index_and_filter(cache: &BlockCache) {
    let mut b = crate::sst::block::BlockBuilder::new(16);
    b.add(&key::encode(b"filler", 1, Kind::Put), &[0; 1000]);
    let filler = Arc::new(crate::sst::block::Block::new(b.finish(), 0).unwrap());
    for offset in 0.. {
        let meta = cache.usage_bytes_of(BlockKind::Index) + cache.usage_bytes_of(BlockKind::Filter);
        if meta == 0 {
            return;
        }
        assert!(offset < 100_000, "the index and filter were never evicted");
        cache.insert(999, offset, crate::cache::Cached::Data(filler.clone()));
    }
}

/// An image whose bytes a test may damage after the reader opened it.
struct Shared(parking_lot::Mutex<Vec<u8>>, std::sync::atomic::AtomicU64);

impl BlockSource for Shared {
    fn read(&self, offset: u64, len: usize) -> crate::Result<crate::sst::SourceBytes> {
        self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.0.lock().read(offset, len)
    }
    fn len(&self) -> u64 {
        self.0.lock().len() as u64
    }
}

#[test]
fn evicted_index_and_filter_are_read_again_and_checked() {
    use std::sync::atomic::Ordering;
    let mut rng = SmallRng::seed_from_u64(11);
    let e = entries(&mut rng, 1000);
    let image = build(&e, &SstOptions::default(), 4096);
    let len = image.bytes.len();
    let footer = Footer::decode(&image.bytes[len - FOOTER_BYTES..], len as u64).unwrap();
    let (index, filter) = (footer.index, footer.filter.unwrap());
    let source = Arc::new(Shared(parking_lot::Mutex::new(image.bytes.to_vec()), 0.into()));
    // 4 KiB a shard: room for the index (about 2 KiB) and the filter (1.25 KiB), not much more.
    let cache = Arc::new(BlockCache::new(16 * 4096));
    let r = SstReader::open(source.clone(), cache.clone(), 5, IndexAndFilter::Cached).unwrap();
    assert!(index.size < 4096 && filter.size < 4096, "{index:?} {filter:?}: cacheable");
    // Evicted, then read again on the next lookup, with the right answers.
    for (n, (k, _)) in e.iter().step_by(50).enumerate() {
        evict_index_and_filter(&cache);
        let (index_misses, filter_misses) =
            (cache.misses_of(BlockKind::Index), cache.misses_of(BlockKind::Filter));
        let reads = source.1.load(Ordering::Relaxed);
        let user = key::user_key(k);
        let seq = key::parse(k).unwrap().seq;
        let got = r.get(&key::encode(user, seq, Kind::SEEK), bloom_hash(user)).unwrap();
        assert_eq!(got, expected_get(&e, user, seq), "lookup {n} after eviction");
        assert_eq!(cache.misses_of(BlockKind::Index), index_misses + 1);
        assert_eq!(cache.misses_of(BlockKind::Filter), filter_misses + 1);
        assert!(source.1.load(Ordering::Relaxed) >= reads + 3, "filter, index, data read");
    }
    evict_index_and_filter(&cache);
    assert_eq!(scan_forward(&r).unwrap(), e, "a scan after eviction");
    // Damage read after an eviction is Corruption, from a lookup and from an iterator, for
    // either block, whichever byte (first, middle, last of the block, its trailer).
    for h in [index, filter] {
        let end = (h.offset + h.stored_bytes()) as usize;
        for pos in [h.offset as usize, (h.offset as usize + end) / 2, end - 6, end - 1] {
            source.0.lock()[pos] ^= 0x04;
            evict_index_and_filter(&cache);
            let user = key::user_key(&e[0].0);
            let got = r.get(&key::encode(user, key::SEQ_MAX, Kind::SEEK), bloom_hash(user));
            assert!(matches!(got, Err(Error::Corruption { .. })), "flip at {pos}: {got:?}");
            evict_index_and_filter(&cache);
            if h == index {
                let mut it = r.iter();
                it.seek_to_first();
                assert!(!it.valid());
                assert!(matches!(it.status(), Err(Error::Corruption { .. })), "flip at {pos}");
            }
            source.0.lock()[pos] ^= 0x04;
        }
    }
    evict_index_and_filter(&cache);
    assert_eq!(scan_forward(&r).unwrap(), e, "repaired: read again and right");
}

#[test]
fn cached_index_and_filter_with_no_cache_are_read_for_every_lookup() {
    use std::sync::atomic::Ordering;
    let mut rng = SmallRng::seed_from_u64(12);
    let e = entries(&mut rng, 300);
    let image = build(&e, &SstOptions::default(), 4096);
    let source = Arc::new(Shared(parking_lot::Mutex::new(image.bytes.to_vec()), 0.into()));
    let cache = Arc::new(BlockCache::new(0));
    let r = SstReader::open(source.clone(), cache.clone(), 5, IndexAndFilter::Cached).unwrap();
    for (k, _) in e.iter().step_by(3) {
        let reads = source.1.load(Ordering::Relaxed);
        let user = key::user_key(k);
        let seq = key::parse(k).unwrap().seq;
        let got = r.get(&key::encode(user, seq, Kind::SEEK), bloom_hash(user)).unwrap();
        assert_eq!(got, expected_get(&e, user, seq));
        assert_eq!(source.1.load(Ordering::Relaxed), reads + 3, "filter, index, data");
    }
    assert_eq!(scan_backward(&r).unwrap(), e);
    assert_eq!(cache.usage_bytes(), 0);
}

fn tombstones() -> Vec<crate::range_del::RangeTombstone> {
    use crate::range_del::RangeTombstone;
    vec![
        RangeTombstone::new(b"user00000003", b"user00000041", 999_990),
        RangeTombstone::new(b"user00000010", b"user00000020", 999_999),
        // Past the last point: the SST's bounds grow to its (exclusive) end.
        RangeTombstone::new(b"user00000090", b"zzz", 5),
        // Two pieces of one tombstone: joined in the block.
        RangeTombstone::new(b"a", b"b", 7),
        RangeTombstone::new(b"b", b"c", 7),
    ]
}

#[test]
fn range_tombstones_round_trip_and_widen_the_bounds() {
    let mut rng = SmallRng::seed_from_u64(21);
    let e = entries(&mut rng, 30);
    let mut b = SstBuilder::new(&SstOptions { block_bytes: 256, ..SstOptions::default() });
    for t in tombstones() {
        b.add_range_tombstone(t);
    }
    for (k, v) in &e {
        b.add(k, v);
    }
    assert_eq!((b.entries(), b.range_tombstones()), (e.len() as u64, 5));
    let image = b.finish(4096);
    let p = &image.properties;
    assert_eq!((p.format_version, p.range_tombstones), (format::SST_FORMAT_VERSION, 4));
    assert_eq!((&p.smallest, &p.largest), (&e[0].0, &e.last().unwrap().0), "points only");
    assert_eq!(image.smallest, key::range_bound(b"a"));
    assert_eq!(image.largest, key::range_bound(b"zzz"));

    let r = open(image.bytes.to_vec()).unwrap();
    let mut want = crate::range_del::normalize(tombstones());
    want.sort_by(|a, b| a.sst_order(b));
    assert_eq!(r.range_tombstones(), &want[..]);
    assert_eq!(&scan_forward(&r).unwrap(), &e, "tombstones stay out of the entries");
    assert_eq!(r.max_covering_tombstone_seq(b"user00000015", u64::MAX), 999_999);
    assert_eq!(r.max_covering_tombstone_seq(b"user00000015", 999_998), 999_990);
    assert_eq!(r.max_covering_tombstone_seq(b"user00000041", u64::MAX), 0);
    assert_eq!(r.max_covering_tombstone_seq(b"bz", u64::MAX), 7);
    assert_eq!(r.verify_range_del_block().unwrap(), 4);

    // An SST of tombstones only.
    let mut only = SstBuilder::new(&SstOptions::default());
    assert!(only.is_empty());
    only.add_range_tombstone(crate::range_del::RangeTombstone::new(b"k", b"l", 3));
    assert!(!only.is_empty());
    let image = only.finish(4096);
    assert_eq!(
        (image.smallest.clone(), image.largest.clone()),
        (key::range_bound(b"k"), key::range_bound(b"l"))
    );
    let r = open(image.bytes.to_vec()).unwrap();
    assert_eq!(scan_forward(&r).unwrap(), vec![]);
    let hit = r.get(&key::encode(b"k", 9, Kind::SEEK), bloom_hash(b"k")).unwrap();
    assert_eq!(hit, None, "no point entry");
    assert_eq!(r.max_covering_tombstone_seq(b"k", 9), 3, "the filter does not hide tombstones");
}

#[test]
fn a_flipped_byte_in_the_range_deletion_block_is_corruption() {
    let mut rng = SmallRng::seed_from_u64(23);
    let e = entries(&mut rng, 40);
    let mut b = SstBuilder::new(&SstOptions::default());
    for t in tombstones() {
        b.add_range_tombstone(t);
    }
    for (k, v) in &e {
        b.add(k, v);
    }
    let image = b.finish(4096);
    let h = image.properties.range_del.unwrap();
    let good = image.bytes.to_vec();
    for pos in h.offset as usize..(h.offset + h.stored_bytes()) as usize {
        let mut bad = good.clone();
        bad[pos] ^= 0x04;
        let r = open(bad);
        assert!(matches!(r, Err(Error::Corruption { .. })), "flip at {pos}: {r:?}");
    }

    // Damage after the open: `verify_range_del_block` reads the block again, past the copy
    // the reader keeps (what `check` relies on).
    let shared = Arc::new(Shared(parking_lot::Mutex::new(good), 0.into()));
    let cache = Arc::new(BlockCache::new(1 << 20));
    let r = SstReader::open(shared.clone(), cache, 1, IndexAndFilter::Held).unwrap();
    r.verify_range_del_block().unwrap();
    shared.0.lock()[h.offset as usize + 5] ^= 1;
    assert!(matches!(r.verify_range_del_block(), Err(Error::Corruption { .. })));
    assert_eq!(r.max_covering_tombstone_seq(b"user00000015", u64::MAX), 999_999);
}

/// An SST written by the code before range tombstones (format version 1, the fuzz seed
/// `seed-image-uncompressed` of that time: 40 user keys, a put and a delete each, 512-byte
/// slots) still opens and reads, with no tombstones.
#[test]
fn a_format_version_1_sst_still_opens() {
    let v1 = include_bytes!("testdata/format-v1.sst").to_vec();
    let len = v1.len();
    assert_eq!(Footer::decode(&v1[len - FOOTER_BYTES..], len as u64).unwrap().format_version, 1);
    let r = open(v1).unwrap();
    assert_eq!((r.properties().format_version, r.properties().range_tombstones), (1, 0));
    assert!(r.range_tombstones().is_empty());
    assert_eq!(r.verify_range_del_block().unwrap(), 0);
    let got = scan_forward(&r).unwrap();
    assert_eq!(got.len(), 80);
    assert_eq!(key::user_key(&got[0].0), b"key0000");
    let found = r.get(&key::encode(b"key0003", 25, Kind::SEEK), bloom_hash(b"key0003")).unwrap();
    assert_eq!(key::parse(&found.unwrap().0).unwrap().seq, 20);
}

/// A source that counts its reads.
struct Counting {
    bytes: Vec<u8>,
    reads: std::sync::atomic::AtomicU64,
}

impl BlockSource for Counting {
    fn read(&self, offset: u64, len: usize) -> crate::Result<crate::sst::SourceBytes> {
        self.reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.bytes.read(offset, len)
    }
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }
}

/// An uncompressed SST of 20,000 random entries in a [`Counting`] source: the entries, its
/// data block count and the source.
fn counted_sst(seed: u64) -> (Entries, u64, Arc<Counting>) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let e = entries(&mut rng, 20_000);
    let opts = SstOptions { compression: crate::sst::Compression::None, ..SstOptions::default() };
    let image = build(&e, &opts, 4096);
    let blocks = image.properties.data_blocks;
    (e, blocks, Arc::new(Counting { bytes: image.bytes.to_vec(), reads: 0.into() }))
}

#[test]
fn a_forward_scan_reads_ahead_and_a_random_one_does_not() {
    use std::sync::atomic::Ordering;
    let (e, blocks, source) = counted_sst(7);
    // A cache too small to hold the scan: every block is a miss.
    let cache = Arc::new(BlockCache::new(64 << 10));
    let r = SstReader::open(source.clone(), cache, 1, IndexAndFilter::Held).unwrap();
    let opened = source.reads.load(Ordering::Relaxed);
    assert!(scan_forward(&r).unwrap() == e, "readahead changed what a scan returns");
    let scan_reads = source.reads.load(Ordering::Relaxed) - opened;
    assert!(scan_reads * 8 < blocks, "{scan_reads} reads for {blocks} data blocks: no readahead");
    // Seeks to scattered keys are not sequential: one read per block they need.
    let before = source.reads.load(Ordering::Relaxed);
    let mut it = r.iter();
    for i in 0..50 {
        let (k, _) = &e[(i * 7919) % e.len()];
        it.seek(k);
        assert!(it.valid());
    }
    let seek_reads = source.reads.load(Ordering::Relaxed) - before;
    assert!(seek_reads <= 50, "{seek_reads} reads for 50 scattered seeks");
    assert!(scan_backward(&r).unwrap() == e, "a backward scan after readahead differs");
}

#[test]
fn a_scan_reads_ahead_past_blocks_that_point_reads_cached() {
    use std::sync::atomic::Ordering;
    let (e, blocks, source) = counted_sst(11);
    let cache = Arc::new(BlockCache::new(64 << 20));
    let r = SstReader::open(source.clone(), cache.clone(), 1, IndexAndFilter::Held).unwrap();
    // Point reads cache about one block in four, scattered over the SST.
    let step = (e.len() as u64 * 4 / blocks) as usize;
    for (k, _) in e.iter().step_by(step) {
        let user = key::user_key(k);
        assert!(r.get(&key::encode(user, key::SEQ_MAX, Kind::SEEK), bloom_hash(user)).is_ok());
    }
    let cached = cache.adds();
    assert!(cached * 6 > blocks && cached * 3 < blocks, "{cached} of {blocks} blocks cached");
    let before = source.reads.load(Ordering::Relaxed);
    assert!(scan_forward(&r).unwrap() == e, "readahead changed what a scan returns");
    let scan_reads = source.reads.load(Ordering::Relaxed) - before;
    // Runs growing to 512 KiB take about 15 reads for the 1,644 blocks here; counted as breaks
    // in the scan's sequence, the cached blocks kept the runs at their smallest and took 166.
    assert!(scan_reads * 40 < blocks, "{scan_reads} reads for {blocks} data blocks");
}

#[test]
fn an_sst_opened_from_its_image_reads_nothing_until_a_data_block_is_needed() {
    use std::sync::atomic::Ordering;
    let mut rng = SmallRng::seed_from_u64(13);
    let e = entries(&mut rng, 2000);
    let image = build(&e, &SstOptions::default(), 4096);
    let bytes = image.bytes.to_vec();
    let mut b = SstBuilder::new(&SstOptions::default());
    for (k, v) in &e {
        b.add(k, v);
    }
    for t in tombstones() {
        b.add_range_tombstone(t);
    }
    let with_tombstones = b.finish(4096);
    // Streamed: the data blocks taken out as they were written, only the tail kept.
    let mut b = SstBuilder::new(&SstOptions::default());
    let mut taken = Vec::new();
    for (k, v) in &e {
        b.add(k, v);
        if let Some((_, chunk)) = b.take_written(8192, 4096) {
            taken.extend_from_slice(&chunk);
        }
    }
    let streamed = b.finish(4096);
    assert!(streamed.base > 0);
    taken.extend_from_slice(&streamed.bytes);
    assert!(taken == bytes, "a streamed image is the image built whole");
    for place in [IndexAndFilter::Held, IndexAndFilter::Cached] {
        for (whole, img) in
            [(&bytes, &image), (&with_tombstones.bytes, &with_tombstones), (&taken, &streamed)]
        {
            let source = Arc::new(Counting { bytes: whole.clone(), reads: 0.into() });
            let cache = Arc::new(BlockCache::new(1 << 20));
            let r = SstReader::open_image(source.clone(), cache, 1, place, img).unwrap();
            assert_eq!(source.reads.load(Ordering::Relaxed), 0, "{place:?}: the open read");
            let tombstones = usize::from(std::ptr::eq(img, &with_tombstones)) * 4;
            assert_eq!(r.range_tombstones().len(), tombstones);
            assert_eq!(scan_forward(&r).unwrap(), e, "{place:?}");
            assert!(source.reads.load(Ordering::Relaxed) > 0, "data blocks come from the source");
        }
    }
    let short = Arc::new(bytes[..bytes.len() - 4096].to_vec());
    let cache = Arc::new(BlockCache::new(1 << 20));
    let wrong = SstReader::open_image(short, cache, 1, IndexAndFilter::Held, &image);
    assert!(matches!(wrong, Err(Error::InvalidArgument(_))), "{wrong:?}");
}

#[test]
fn alignment_never_pads_more_than_its_bound() {
    // Entries of about 1 KB: three fill three quarters of a page, so cutting before the
    // fourth would leave a quarter of every page zero. Past ALIGN_PAD_MAX the blocks are cut
    // as without alignment, and the image is no larger than an unaligned one's.
    let e: Entries = (0..3000u32)
        .map(|i| (key::encode(format!("user{i:012}").as_bytes(), 7, Kind::Put), vec![b'v'; 1000]))
        .collect();
    let size = |block_align| {
        let image = build(&e, &SstOptions { block_align, ..SstOptions::default() }, 4096);
        let bytes = image.bytes.to_vec();
        let footer =
            Footer::decode(&bytes[bytes.len() - FOOTER_BYTES..], bytes.len() as u64).unwrap();
        let ranges = data_block_ranges(&bytes, &footer);
        // Every gap before a block is padding; none passes the bound.
        for w in ranges.windows(2) {
            assert!(w[1].start - w[0].end <= builder::ALIGN_PAD_MAX, "{w:?}");
        }
        let r = open(bytes).unwrap();
        assert!(scan_forward(&r).unwrap() == e);
        ranges.last().unwrap().end
    };
    let (aligned, unaligned) = (size(true), size(false));
    // A block that ends just short of a boundary still moves the next one to it.
    assert!(aligned * 100 <= unaligned * 101, "aligned data {aligned} B, unaligned {unaligned} B");
}

#[test]
fn aligned_data_blocks_stay_within_pages_and_fill_them() {
    let mut rng = SmallRng::seed_from_u64(21);
    let e = entries(&mut rng, 5000);
    let page = builder::BLOCK_ALIGN_BYTES;
    let within = |r: &std::ops::Range<usize>| r.start / page == (r.end - 1) / page;
    for block_align in [true, false] {
        let opts = SstOptions { block_align, ..SstOptions::default() };
        let image = build(&e, &opts, 4096);
        let bytes = image.bytes.to_vec();
        let footer =
            Footer::decode(&bytes[bytes.len() - FOOTER_BYTES..], bytes.len() as u64).unwrap();
        let ranges = data_block_ranges(&bytes, &footer);
        assert!(ranges.len() > 100);
        let crossing = ranges.iter().filter(|r| !within(r)).count();
        if block_align {
            assert_eq!(crossing, 0, "an aligned block crosses a page boundary");
            // Cut before the entry that would not fit, each block fills most of its page.
            let data_end = ranges.last().unwrap().end;
            let used: usize = ranges.iter().map(ExactSizeIterator::len).sum();
            assert!(used * 100 > data_end * 95, "{used} of {data_end} bytes hold blocks");
        } else {
            assert!(crossing * 2 > ranges.len(), "{crossing} of {} cross", ranges.len());
        }
        // Either way every entry reads back, by scan and by point lookup.
        let r = open_with(bytes, IndexAndFilter::Held).unwrap();
        assert!(scan_forward(&r).unwrap() == e);
        for (k, v) in e.iter().step_by(97) {
            let (_, got) = r.get(k, bloom_hash(key::user_key(k))).unwrap().unwrap();
            assert_eq!(&got, v);
        }
    }
}
