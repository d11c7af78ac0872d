//! Reads answered on the caller's thread (`caller_reads.rs`): cached values, proven absences
//! and records read by the caller come back with no hand-off to the worker, by each read path
//! (the simulated device, a file through the page cache, a file with O_DIRECT); no read on
//! any thread ever returns a value older than a store or delete already acknowledged to any
//! caller, with overwrites, deletes, cache evictions and garbage collection moving records
//! and reusing their segments meanwhile; a damaged page read through the page cache is
//! Corruption, never a wrong value.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use common::*;
use rand::{Rng, SeedableRng};
use shale_hash::{
    Error, HashOptions, HashStore, IndexMode, KvRequest, Output, RecordReads, StoreMode,
};
use tempfile::TempDir;

#[test]
fn cached_values_and_absent_keys_are_answered_on_the_callers_thread() {
    each_mode(|| {
        let d = sim(4, 81);
        let store = open(&d, &HashOptions { value_cache_bytes: 1 << 20, ..small_options() });
        // A store fills the cache once the index names its record.
        store.store(b"hot-key", b"hot value", StoreMode::Overwrite).unwrap();
        assert_eq!(store.retrieve(b"hot-key").unwrap().as_deref(), Some(&b"hot value"[..]));
        let s = store.stats();
        assert_eq!((s.caller_reads, s.value_cache_hits), (1, 1));
        // A value over a quarter of the cache is not kept: its record is read, on this
        // thread too (its index entry is in memory), not by the worker.
        let big = vec![7u8; 300 << 10];
        store.store(b"big-key", &big, StoreMode::Overwrite).unwrap();
        assert_eq!(store.retrieve(b"big-key").unwrap(), Some(big));
        let s = store.stats();
        let want = if mode() == shale_hash::IndexMode::InMemory { 2 } else { s.caller_reads };
        assert_eq!((s.caller_reads, s.value_cache_hits), (want, 1));
        // A submission the caller's thread answers is complete when it returns.
        let t = store.submit_retrieve(b"hot-key").unwrap();
        assert!(t.is_done());
        assert_eq!(t.wait().unwrap().as_deref(), Some(&b"hot value"[..]));
        store.submit_tagged(KvRequest::Retrieve { key: b"hot-key" }, 9).unwrap();
        let mut done = Vec::new();
        assert_eq!(store.poll_completions(&mut done, 4), 1, "in the queue already");
        assert_eq!(done[0].tag, 9);
        assert_eq!(
            done[0].result.as_ref().unwrap(),
            &Output::Retrieved(Some(b"hot value".to_vec()))
        );
        // An exist of a cached key and an absent one: the index proves the absence where its
        // page is in memory (always in memory mode).
        let before = store.stats().caller_reads;
        assert_eq!(store.exist(&[b"hot-key", b"cold-key"]).unwrap(), vec![0b01]);
        assert_eq!(store.retrieve(b"cold-key").unwrap(), None);
        if mode() == shale_hash::IndexMode::InMemory {
            assert_eq!(store.stats().caller_reads, before + 2);
        }
        // A delete takes the key out of the cache before it is answered.
        assert!(store.delete(b"hot-key").unwrap());
        assert_eq!(store.retrieve(b"hot-key").unwrap(), None);
        assert_eq!(store.exist(&[b"hot-key"]).unwrap(), vec![0]);
    });
}

/// Keys, each owned by one writer thread.
const KEYS: usize = 8;
const WRITERS: usize = 2;
const READERS: usize = 3;
const STORES_PER_WRITER: u64 = 1_500;

/// Every fifth version of a key is a delete; version 0 is the key never stored.
fn is_delete(version: u64) -> bool {
    version % 5 == 0
}

fn key(k: usize) -> Vec<u8> {
    format!("key-{k:02}").into_bytes()
}

/// Version `v` of key `k`'s value: the version first, then bytes that depend on both.
fn versioned(k: usize, v: u64) -> Vec<u8> {
    let mut out = v.to_le_bytes().to_vec();
    out.extend(value(&key(k), v, 16 + (v as usize * 37) % 600));
    out
}

/// Versions of each key: `issued` is raised before a store or delete is submitted, `acked`
/// after it is answered. A read that starts after `acked` was `a` and ends before `issued` was
/// `i` must find a version in `a..=i`.
struct Versions {
    issued: Vec<AtomicU64>,
    acked: Vec<AtomicU64>,
}

/// What one reader saw: the lowest version each key's next read may return.
fn check_read(
    v: &Versions,
    seen: &mut [u64],
    k: usize,
    read: impl FnOnce() -> Option<Option<Vec<u8>>>,
) {
    let floor = v.acked[k].load(Ordering::SeqCst).max(seen[k]);
    let Some(got) = read() else { return };
    let ceiling = v.issued[k].load(Ordering::SeqCst);
    match got {
        Some(val) => {
            let x = u64::from_le_bytes(val[..8].try_into().unwrap());
            assert!(
                (floor..=ceiling).contains(&x) && !is_delete(x),
                "key {k}: version {x} read, acknowledged or seen {floor}, issued {ceiling}"
            );
            assert_eq!(val, versioned(k, x), "key {k} version {x}: the bytes");
            seen[k] = x;
        }
        None => {
            let delete = (floor..=ceiling).find(|&d| is_delete(d));
            assert!(
                delete.is_some(),
                "key {k}: absent, but no delete in {floor}..={ceiling} (acknowledged or seen)"
            );
            seen[k] = delete.unwrap();
        }
    }
}

/// Where a scenario's store lives, and how it reads records that miss the value cache.
#[derive(Clone, Copy, Debug)]
enum Backend {
    /// The simulated device: O_DIRECT-like reads on queues of the volume's pool.
    Sim,
    /// A volume file, read through the page cache (the default of `HashStore::open`).
    FilePageCache,
    /// A volume file, read with O_DIRECT only.
    FileDirect,
}

const BACKENDS: [Backend; 3] = [Backend::Sim, Backend::FilePageCache, Backend::FileDirect];

/// A store on `backend` with `opts`; the directory, where there is one, lives as long as it.
fn open_on(backend: Backend, opts: &HashOptions, seed: u64) -> (HashStore, Option<TempDir>) {
    let reads = match backend {
        Backend::Sim => return (open(&sim(4, seed), opts), None),
        Backend::FilePageCache => RecordReads::PageCache,
        Backend::FileDirect => RecordReads::Direct,
    };
    let dir = tempfile::tempdir().unwrap();
    let store = HashStore::open_with_reads(dir.path(), opts.clone(), reads).unwrap();
    (store, Some(dir))
}

/// Checkouts of the volume's pooled queues so far: a record read directly on a caller's
/// thread takes one; one through the page cache does not.
fn checkouts(store: &HashStore) -> u64 {
    let q = store.volume().queues().stats();
    q.opened + q.reused
}

#[test]
fn records_are_read_on_the_callers_thread_by_each_read_path() {
    each_mode(|| {
        for backend in BACKENDS {
            eprintln!("{backend:?}");
            // No value cache: every read of a present key reads its record.
            let opts = HashOptions { value_cache_bytes: 0, ..small_options() };
            let (store, _dir) = open_on(backend, &opts, 83);
            let keys: Vec<Vec<u8>> =
                (0..40u32).map(|i| format!("key-{i:03}").into_bytes()).collect();
            for (i, k) in keys.iter().enumerate() {
                store.store(k, &value(k, 1, 4096 + i * 13), StoreMode::Overwrite).unwrap();
            }
            let (before, taken) = (store.stats(), checkouts(&store));
            for (i, k) in keys.iter().enumerate() {
                assert_eq!(store.retrieve(k).unwrap(), Some(value(k, 1, 4096 + i * 13)));
            }
            let s = store.stats();
            let answered = s.caller_reads - before.caller_reads;
            assert_eq!(s.value_cache_hits, 0);
            if mode() == IndexMode::InMemory {
                assert_eq!(answered, keys.len() as u64, "every record read by its caller");
            } else {
                // A bounded index of four cached pages: a key whose page is not in memory
                // goes to the worker, which reads the page.
                assert!(answered <= keys.len() as u64);
            }
            let direct = checkouts(&store) - taken;
            match backend {
                Backend::Sim | Backend::FileDirect => {
                    assert_eq!(direct, answered, "one pooled queue per direct read")
                }
                Backend::FilePageCache => assert_eq!(direct, 0, "no O_DIRECT read by a caller"),
            }
            // An exist of present keys whose values are not cached reads their records on
            // the caller's thread too, to tell whose each digest entry is; an absent key
            // needs no read.
            let before = store.stats().caller_reads;
            let got = store.exist(&[&keys[1], b"no-such-key", &keys[2]]).unwrap();
            assert_eq!(got, vec![0b101]);
            if mode() == IndexMode::InMemory {
                assert_eq!(store.stats().caller_reads, before + 1, "answered by the caller");
            }
            // A submission never waits for the device on its caller's thread: through the
            // page cache, which holds the records now, it is answered at once; otherwise the
            // worker reads the record.
            let before = store.stats().caller_reads;
            let t = store.submit_retrieve(&keys[0]).unwrap();
            let at_once = t.is_done();
            assert_eq!(t.wait().unwrap(), Some(value(&keys[0], 1, 4096)));
            let answered = store.stats().caller_reads - before;
            match backend {
                Backend::Sim | Backend::FileDirect => assert_eq!(answered, 0, "the worker read it"),
                Backend::FilePageCache if mode() == IndexMode::InMemory => {
                    assert!(at_once && answered == 1)
                }
                Backend::FilePageCache => {}
            }
        }
    });
}

/// The log is written with O_DIRECT, around the page cache: a sealed segment is read back
/// into it, so a record's first read after it left the value cache finds it in memory, as
/// with an engine writing buffered files. With O_DIRECT reads nothing is read back.
#[test]
fn sealed_segments_are_read_into_the_page_cache() {
    for reads in [RecordReads::PageCache, RecordReads::Direct] {
        let dir = tempfile::tempdir().unwrap();
        let opts = HashOptions {
            value_cache_bytes: 0,
            segment_bytes: shale_hash::SEGMENT_BYTES_MIN,
            ..HashOptions::default()
        };
        let store = HashStore::open_with_reads(dir.path(), opts, reads).unwrap();
        // 40 records of 12 KiB (four pages each with its header), 16 to a 64 KiB segment:
        // two segments sealed, the third being appended to.
        for i in 0..40u32 {
            store.store(&i.to_be_bytes(), &[i as u8; 12 << 10], StoreMode::Overwrite).unwrap();
        }
        let layout = store.volume().layout();
        let mut segments = store.volume().live_extents();
        segments.sort_by_key(|e| e.first);
        assert!(segments.len() >= 3, "{segments:?}");
        let file = shale_space::volume_file(dir.path());
        let range = |e: &shale_space::Extent| {
            (layout.slot_offset + u64::from(e.first) * layout.slot_bytes, layout.slot_bytes)
        };
        let sealed = &segments[..2];
        let cached = || -> u64 {
            sealed
                .iter()
                .map(&range)
                .map(|(at, len)| shale_testkit::cached_bytes(&file, at, len))
                .sum()
        };
        match reads {
            RecordReads::PageCache => {
                // The kernel reads in the background: wait for the event, not for a time.
                let want = 120 << 10; // of the two sealed segments' 128 KiB
                let mut seen = cached();
                for _ in 0..2_000 {
                    if seen >= want {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    seen = cached();
                }
                assert!(seen >= want, "{seen} bytes of the sealed segments cached");
                // Read from memory: every record of the sealed segments, on this thread.
                let before = store.stats().caller_reads;
                for i in 0..32u32 {
                    assert_eq!(
                        store.retrieve(&i.to_be_bytes()).unwrap(),
                        Some(vec![i as u8; 12 << 10])
                    );
                }
                assert_eq!(store.stats().caller_reads, before + 32);
            }
            _ => {
                std::thread::sleep(std::time::Duration::from_millis(200));
                assert_eq!(cached(), 0, "O_DIRECT writes and reads leave nothing cached");
            }
        }
    }
}

#[test]
fn a_flipped_byte_read_through_the_page_cache_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let opts = HashOptions { value_cache_bytes: 0, ..small_options() };
    let store = HashStore::open_with_reads(dir.path(), opts, RecordReads::PageCache).unwrap();
    // One page per record (each durable store writes its own): records 0, 1, 2 on pages 0,
    // 1, 2 of the first segment.
    for i in 0..3u8 {
        store.store(&[b'k', b'e', b'y', i], &[i; 100], StoreMode::Overwrite).unwrap();
    }
    // Read once, so the page cache holds the pages.
    for i in 0..3u8 {
        assert_eq!(store.retrieve(&[b'k', b'e', b'y', i]).unwrap(), Some(vec![i; 100]));
    }
    let layout = store.volume().layout();
    let slot = store.volume().live_extents()[0].first;
    let page = layout.slot_offset + u64::from(slot) * layout.slot_bytes + 4096;
    // A buffered write of one byte of record 1's page: the page cache holds the damage (and
    // the device, once written back).
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(shale_space::volume_file(dir.path()))
        .unwrap();
    let mut byte = [0u8; 1];
    std::os::unix::fs::FileExt::read_exact_at(&file, &mut byte, page + 60).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, &[byte[0] ^ 0x10], page + 60).unwrap();
    let before = store.stats().caller_reads;
    for _ in 0..3 {
        let got = store.retrieve(b"key\x01");
        assert!(matches!(got, Err(Error::Corruption { .. })), "{got:?}");
        let got = store.submit_retrieve(b"key\x01").unwrap().wait();
        assert!(matches!(got, Err(Error::Corruption { .. })), "{got:?}");
    }
    for _ in 0..3 {
        // An exist reads the record to tell whose it is: the damage is the worker's to report.
        let got = store.exist(&[b"key\x01"]);
        assert!(matches!(got, Err(Error::Corruption { .. })), "{got:?}");
        let got = store.submit_exist(&[b"key\x01"]).unwrap().wait();
        assert!(matches!(got, Err(Error::Corruption { .. })), "{got:?}");
    }
    assert_eq!(store.stats().caller_reads, before, "a damaged record is the worker's to report");
    for i in [0u8, 2] {
        assert_eq!(store.retrieve(&[b'k', b'e', b'y', i]).unwrap(), Some(vec![i; 100]));
    }
}

#[test]
fn concurrent_overwrites_deletes_and_reads_never_go_back_in_time() {
    for backend in BACKENDS {
        eprintln!("{backend:?}");
        never_back_in_time(backend);
    }
}

/// Writers overwrite and delete, readers read by every path, while garbage collection
/// moves records and frees their segments: no read is older than what was acknowledged
/// before it began, or than what its reader saw before, and none is a value never written.
fn never_back_in_time(backend: Backend) {
    each_mode(|| {
        let opts = HashOptions {
            // 16-page segments and collection on: records move while they are read.
            segment_bytes: shale_hash::SEGMENT_BYTES_MIN,
            gc_live_ratio: 0.5,
            // A cache of a few values: hits, misses and evictions all happen.
            value_cache_bytes: 3 << 10,
            ..small_options()
        };
        let (store, _dir) = open_on(backend, &opts, 82);
        let store = Arc::new(store);
        let versions = Arc::new(Versions {
            issued: (0..KEYS).map(|_| AtomicU64::new(0)).collect(),
            acked: (0..KEYS).map(|_| AtomicU64::new(0)).collect(),
        });
        let done = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (store, v) = (store.clone(), versions.clone());
                std::thread::spawn(move || {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(w as u64);
                    for _ in 0..STORES_PER_WRITER {
                        let k = w + WRITERS * rng.gen_range(0..KEYS / WRITERS);
                        let next = v.issued[k].load(Ordering::SeqCst) + 1;
                        v.issued[k].store(next, Ordering::SeqCst);
                        if is_delete(next) {
                            store.delete(&key(k)).unwrap();
                        } else {
                            store
                                .store(&key(k), &versioned(k, next), StoreMode::Overwrite)
                                .unwrap();
                        }
                        v.acked[k].store(next, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        let readers: Vec<_> = (0..READERS)
            .map(|r| {
                let (store, v, done) = (store.clone(), versions.clone(), done.clone());
                std::thread::spawn(move || reader(&store, &v, &done, r as u64))
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, Ordering::SeqCst);
        let reads: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
        let s = store.stats();
        eprintln!(
            "{reads} reads, {} on the callers' threads, {} cache hits, {} segments freed",
            s.caller_reads, s.value_cache_hits, s.segments_freed
        );
        assert!(s.caller_reads > s.value_cache_hits && s.value_cache_hits > 0);
        assert!(s.segments_freed > 0, "records moved under the reads");
        for k in 0..KEYS {
            let last = versions.acked[k].load(Ordering::SeqCst);
            let want = (!is_delete(last) && last > 0).then(|| versioned(k, last));
            assert_eq!(store.retrieve(&key(k)).unwrap(), want, "key {k}");
        }
    });
}

/// Reads random keys by each kind of read until `done`; returns how many it made.
fn reader(store: &HashStore, v: &Versions, done: &AtomicBool, seed: u64) -> u64 {
    let mut rng = rand::rngs::StdRng::seed_from_u64(100 + seed);
    let mut seen = vec![0u64; KEYS];
    let mut reads = 0;
    while !done.load(Ordering::SeqCst) {
        let k = rng.gen_range(0..KEYS);
        let kk = key(k);
        match rng.gen_range(0..4) {
            0 | 1 => check_read(v, &mut seen, k, || Some(store.retrieve(&kk).unwrap())),
            2 => check_read(v, &mut seen, k, || {
                Some(store.submit_retrieve(&kk).unwrap().wait().unwrap())
            }),
            _ => {
                // An exist says present or absent: checked against the versions alone.
                let floor = v.acked[k].load(Ordering::SeqCst).max(seen[k]);
                let present = store.exist(&[&kk]).unwrap()[0] & 1 == 1;
                let ceiling = v.issued[k].load(Ordering::SeqCst);
                let fits = (floor..=ceiling).any(|x| is_delete(x) != present);
                assert!(
                    fits,
                    "key {k}: exist {present}, acknowledged or seen {floor}, issued {ceiling}"
                );
            }
        }
        reads += 1;
    }
    reads
}
