//! Reads answered on the caller's thread, with no hand-off to the worker.
//!
//! A read the worker answers still costs two thread hand-offs: the submission wakes the
//! worker, and the ticket wakes the caller (measured: a zipfian 4 KiB get through the worker
//! at queue depth 1 spent more time in those wake-ups than in the lookup). So the calls look
//! here first, and only what this cannot answer goes to the worker:
//! - a value in the value cache is the key's current value (`value_cache.rs`: the worker
//!   removes a key before the index changes, and so before any answer, and fills it only
//!   from records the index still names);
//! - an index lookup that finds no entry for the key proves it absent. The worker changes
//!   the index before it answers a store or delete, under the index's write lock, so a read
//!   after the answer sees the change. The lookup must need no device read (the bounded
//!   index's page is cached) and no wait (the index and the bounded table's locks are free:
//!   the worker may hold them across a page read or a doubling), or the worker answers;
//! - an index entry for the key names the record's location without a device read (the
//!   same lookup); the caller reads the record itself, checks it and compares its key
//!   ([`read_value`]; an exist reads it the same way to tell whose the entry is, unless the
//!   collision map, which holds full keys, already says). The synchronous retrieve may wait for the device: it reads with
//!   `pread` through the page cache (`RecordReads::PageCache`) or with O_DIRECT on a queue
//!   checked out of the volume's pool. A submission must not block its caller, so it reads
//!   only what the page cache holds (`preadv2(RWF_NOWAIT)`), and never directly: a device
//!   read on the submitting thread would serialise what the worker keeps in flight together.
//!
//! Whatever fails on this path (a busy lock, a page not resident, a read error, a page that
//! fails its checks, another key's record at a shared digest) sends the request to the
//! worker, which answers as it always did: an error or a Corruption is only ever reported by
//! the worker's own read, made afresh from the device.
//!
//! **Why a record read here is never stale, although garbage collection may free and reuse
//! its segment meanwhile.** The caller takes the index's read lock, finds the location (a
//! segment table slot, a page, an offset), and, still under that lock, reads the segment
//! table's entry for the slot: its generation and address. While the index names a location
//! in a slot, that slot holds the segment the record was written into, because the worker
//! frees a segment (`Worker::finish_gc`) only after every copy out of it is applied to the
//! index (no batch in flight), and it never makes a new entry point into a sealed segment; a
//! freed slot is taken by a new segment only after that. So the pair (location, generation)
//! read under the lock names the key's current record at that instant, the read's
//! linearisation point: every store and delete acknowledged before the call began had changed
//! the index by then (the worker changes it before it answers).
//!
//! Then the caller reads the pages with no lock held, and the segment may be collected, its
//! slots freed and written by a newer segment, or (through the page cache) a page cached
//! from an earlier user of the slots may be served. None of that can yield a wrong value:
//! `record_at` (the page log's check) accepts a page only if its checksum holds, its
//! generation is the segment's and its index is the page's; generations are never reused
//! (segments and checkpoints draw from one counter), and a page of a segment is written
//! once (a batch never rewrites its last page, and a carried page is written only once, with
//! the next batch). So a page that passes is the very page written for that location, and
//! its record is the one the index named at the linearisation point, whatever happened to the
//! slots after it. A page that fails is dropped from the page cache (it may be a stale copy
//! that the kernel failed to invalidate, or one cached by a read that raced an O_DIRECT
//! write of the slot) and the worker reads it again.
//!
//! A value read here enters the value cache as one the worker read would ([`remember`]), so
//! hot keys are answered from memory whichever thread read them first.

use std::sync::atomic::Ordering;

use shale_io::QueueExt;
use shale_space::log_page::PAGE_BYTES;

use crate::index::{Location, Probe};
use crate::log::{self, Segment};
use crate::record::{HEADER_BYTES, Kind, Record};
use crate::shard::Shard;

/// Whether the caller's thread may wait for the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    /// A synchronous retrieve: it waits for its answer anyway.
    Device,
    /// A submission: it returns at once; only memory (the page cache included) may answer.
    Never,
}

/// Most keys of a synchronous exist whose records the caller's thread reads from the device
/// itself (more go to the worker unless the page cache holds their records).
const EXIST_DEVICE_KEYS_MAX: usize = 4;

/// What the index says of a key, read without a device read or a wait.
enum Located {
    Absent,
    /// The key's entry (or a candidate of its digest), and the segment in its slot, read
    /// under one hold of the index's lock; `exact` where the entry is the key's own (the
    /// collision map holds full keys), so the key is present without a read.
    At {
        loc: Location,
        seg: Segment,
        exact: bool,
    },
}

/// `key`'s value, or its absence, where known without the worker; `None` where not.
pub(crate) fn retrieve(shard: &Shard, key: &[u8], wait: Wait) -> Option<Option<Vec<u8>>> {
    if let Some(value) = shard.values.get(key) {
        shard.counters.cache_hits.fetch_add(1, Ordering::Relaxed);
        shard.counters.caller_reads.fetch_add(1, Ordering::Relaxed);
        return Some(Some(value));
    }
    let answer = match locate(shard, key)? {
        Located::Absent => None,
        Located::At { loc, seg, .. } => {
            let value = read_value(shard, key, loc, &seg, wait)?;
            remember(shard, key, loc, &value);
            Some(value)
        }
    };
    shard.counters.caller_reads.fetch_add(1, Ordering::Relaxed);
    Some(answer)
}

/// The bits of an exist (bit `i % 8` of byte `i / 8` for `keys[i]`), where every key's
/// presence is known without the worker; `None` where one is not.
///
/// A key is present where its value is cached or the collision map holds it, absent where
/// the index has no entry for its digest, and otherwise decided by the record its digest's
/// entry names, read here as a retrieve reads it (`wait` says whether from the device): the
/// key's own store means present, another key's store at the shared digest absent (a key
/// sharing a digest with another is in the collision map). Each key's linearisation point
/// is its index lookup, as a retrieve's; the call as a whole answers what each key was at
/// some instant during the call, as the worker's exist does (it reads its keys one by one
/// too).
pub(crate) fn exist(shard: &Shard, keys: &[&[u8]], wait: Wait) -> Option<Vec<u8>> {
    // Device reads one after another here would serialise what the worker keeps in flight
    // together: past a few keys only the page cache may answer on this thread.
    let wait = if keys.len() > EXIST_DEVICE_KEYS_MAX { Wait::Never } else { wait };
    let mut bits = vec![0u8; keys.len().div_ceil(8)];
    for (i, key) in keys.iter().enumerate() {
        if shard.values.contains(key) || present(shard, key, wait)? {
            bits[i / 8] |= 1 << (i % 8);
        }
    }
    shard.counters.caller_reads.fetch_add(1, Ordering::Relaxed);
    Some(bits)
}

/// Whether `key` is present, by the index and at most one record read; `None` where the
/// worker must answer (a busy lock, a page that may not be waited for or fails its checks,
/// a record that is not a store: the worker reports that as damage).
fn present(shard: &Shard, key: &[u8], wait: Wait) -> Option<bool> {
    match locate(shard, key)? {
        Located::Absent => Some(false),
        Located::At { exact: true, .. } => Some(true),
        Located::At { loc, seg, exact: false } => {
            let rec = read_record(shard, loc, &seg, wait)?;
            let r = Record::decode(&rec)?;
            (r.kind == Kind::Store).then(|| r.key == key)
        }
    }
}

/// What the index, read without a device read or a wait, says of `key`; `None` where it
/// cannot tell that way.
fn locate(shard: &Shard, key: &[u8]) -> Option<Located> {
    let index = shard.index.try_read()?;
    let (loc, exact) = match index.probe_resident(shard.digest(key), key)? {
        Probe::Absent => return Some(Located::Absent),
        Probe::Exact(loc) => (loc, true),
        Probe::Candidate(loc) => (loc, false),
    };
    // Under the index's lock: the slot holds the record's segment (module comment).
    let seg = shard.segment_at(loc.segment)?;
    Some(Located::At { loc, seg, exact })
}

/// Keeps `value`, read from `key`'s record at `loc`, in the value cache if the index still
/// names `loc`: the check and the insert under one hold of the index's read lock. The worker
/// removes a key from the cache under the index's write lock, just before it changes the
/// key's entry (`worker.rs`, applying a store or delete), so this insert comes before that
/// removal, which takes the value out again, or after the change, and then the check fails.
/// A copy by garbage collection moves the entry without changing the value: a check that
/// fails on it only skips the insert. A lock not free at once skips it too.
fn remember(shard: &Shard, key: &[u8], loc: Location, value: &[u8]) {
    let Some(index) = shard.index.try_read() else { return };
    let current = matches!(
        index.probe_resident(shard.digest(key), key),
        Some(Probe::Exact(at) | Probe::Candidate(at)) if at == loc
    );
    if current {
        shard.values.insert(key.to_vec(), value.to_vec());
    }
}

/// The value of `key`'s record at `loc` in `seg`, read on this thread and checked; `None`
/// where the worker must answer (module comment).
fn read_value(
    shard: &Shard,
    key: &[u8],
    loc: Location,
    seg: &Segment,
    wait: Wait,
) -> Option<Vec<u8>> {
    let mut rec = read_record(shard, loc, seg, wait)?;
    let r = Record::decode(&rec)?;
    if r.kind != Kind::Store || r.key != key {
        // Another key's record at a shared digest, or something the worker must report.
        return None;
    }
    Some(rec.split_off(HEADER_BYTES + key.len()))
}

/// The encoded record at `loc` in `seg`, its pages checked; `None` where it cannot be had
/// here (a miss of the page cache that may not wait, a read error, a page that fails).
fn read_record(shard: &Shard, loc: Location, seg: &Segment, wait: Wait) -> Option<Vec<u8>> {
    let at = seg.page_address(loc.page);
    let len = usize::from(loc.pages) * PAGE_BYTES;
    if let Some(reader) = &shard.reader {
        let image = match wait {
            Wait::Device => reader.read_at(at, len).ok()?,
            Wait::Never => reader.read_at_cached(at, len)?,
        };
        return match log::record_at(&image, seg, loc) {
            Ok(rec) => Some(rec),
            Err(_) => {
                // Perhaps a stale page: it goes, and the worker reads the record afresh.
                shard.counters.cached_pages_dropped.fetch_add(1, Ordering::Relaxed);
                let _ = reader.drop_cached(at, len as u64);
                None
            }
        };
    }
    if wait == Wait::Never {
        return None;
    }
    let image = shard.open_queue().ok()?.read_at(at, len).ok()?;
    log::record_at(&image, seg, loc).ok()
}
