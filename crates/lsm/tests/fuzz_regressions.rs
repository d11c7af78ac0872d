//! Replays every input under `fuzz/regressions/{sst_block,wal_page,range_del_block}/` through
//! the same check as the cargo-fuzz target, so inputs a fuzzer once found keep being tested on stable Rust without
//! cargo-fuzz. The check panics when a property breaks, which fails the test.

#[path = "../../../fuzz/src/lsm_checks.rs"]
mod lsm_checks;

/// The lsm fuzz targets, named as in `fuzz/Cargo.toml`.
const TARGETS: [&str; 3] = ["sst_block", "wal_page", "range_del_block"];

#[test]
fn sst_block_regressions() {
    shale_testkit::fuzz_regressions::replay("sst_block", lsm_checks::sst_block);
}

#[test]
fn wal_page_regressions() {
    shale_testkit::fuzz_regressions::replay("wal_page", lsm_checks::wal_page);
}

#[test]
fn range_del_block_regressions() {
    shale_testkit::fuzz_regressions::replay("range_del_block", lsm_checks::range_del_block);
}

/// The committed seed inputs are the ones `lsm_checks::seeds` generates, so a format change
/// that makes them stale is noticed. `SHALE_WRITE_FUZZ_SEEDS=1` (re)writes them instead.
#[test]
fn committed_seeds_match_the_generator() {
    shale_testkit::fuzz_regressions::check_seeds(&TARGETS, lsm_checks::seeds());
}

/// The seeds are worth fuzzing from: each valid one decodes and iterates without error, and
/// the forged one is reported as corruption (its checksums are right, its index entry is not).
#[test]
fn seeds_decode_as_intended() {
    use shale_lsm::iter::InternalIterator;
    use std::sync::Arc;
    for (target, name, bytes) in lsm_checks::seeds() {
        if target == "range_del_block" {
            let ts = shale_lsm::sst::range_del_block::decode(&bytes, 0)
                .unwrap_or_else(|e| panic!("{name}: {e:?}"));
            assert_eq!(ts.len(), if name == "empty" { 0 } else { 4 }, "{name}");
            continue;
        }
        if target == "wal_page" {
            let body = &bytes[1..];
            if name.starts_with("page") {
                let p = shale_lsm::wal::page::decode(body, 3, 0)
                    .unwrap_or_else(|e| panic!("{name}: {e:?}"));
                assert_eq!(p.fragments.len(), 2, "{name}");
            } else {
                assert!(shale_lsm::wal::meta::WalMeta::decode(body).is_some(), "{name}");
            }
            continue;
        }
        if name.starts_with("image") {
            let cache = Arc::new(shale_lsm::cache::BlockCache::new(1 << 20));
            let held = shale_lsm::sst::IndexAndFilter::Held;
            let r = shale_lsm::sst::SstReader::open(Arc::new(bytes), cache, 1, held).unwrap();
            assert_eq!(r.range_tombstones().len(), 4, "{name}");
            assert_eq!(r.verify_range_del_block().unwrap(), 4, "{name}");
            let mut it = r.iter();
            it.seek_to_first();
            let mut n = 0;
            while it.valid() {
                n += 1;
                it.next();
            }
            if name == "image-zero-length-index-key" {
                let e = it.status().unwrap_err();
                assert!(matches!(e, shale_lsm::Error::Corruption { .. }), "{name}: {e}");
                continue;
            }
            it.status().unwrap();
            assert_eq!(n, 80, "{name}");
        } else {
            let block = Arc::new(shale_lsm::sst::block::Block::new(bytes, 0).unwrap());
            let mut it = block.iter();
            it.seek_to_first();
            it.status().unwrap();
        }
    }
}
