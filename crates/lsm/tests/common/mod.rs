//! Helpers shared by the scenario tests: small store options, self-describing values, scans.
//!
//! Values name the key and the write that made them (`<key>@<write>.<op>#` then filler bytes
//! derived from both), so a test can tell from a value alone whether it is one that was ever
//! written for its key, and which write wrote it.

#![allow(dead_code)]

use std::collections::BTreeMap;

use shale_lsm::{Db, Options, ReadOptions, WriteBatch, WriteOptions};

/// Options that make scripted work flush, compact and switch WAL groups quickly.
pub fn small_options() -> Options {
    let mut o = Options::small_for_tests();
    o.write_buffer_bytes = 64 << 10;
    o.target_file_size_base = 64 << 10;
    o.max_bytes_for_level_base = 256 << 10;
    o.level0_file_num_compaction_trigger = 2;
    o.volume.layout.version_log_bytes = 128 << 10;
    o.volume.layout.wal_bytes = 256 << 10;
    o
}

/// Bytes of a simulated device for [`small_options`]: room for about a hundred slots.
pub const DEVICE_BYTES: u64 = 8 << 20;

/// The key with number `n`.
pub fn key(n: u16) -> Vec<u8> {
    format!("key{n:03}").into_bytes()
}

/// The key number of a key made by [`key`].
pub fn key_number(k: &[u8]) -> Option<u16> {
    std::str::from_utf8(k.strip_prefix(b"key")?).ok()?.parse().ok()
}

/// Which write made a value: the write's number and the op's index in its batch.
pub type Stamp = (u32, u16);

/// The value write `stamp.0` (op `stamp.1`) puts at key `n`: a header naming both, then
/// filler of a length and content that depend on them.
pub fn value(n: u16, stamp: Stamp, len_max: usize) -> Vec<u8> {
    let mut v = format!("key{n:03}@{}.{}#", stamp.0, stamp.1).into_bytes();
    let h = (u64::from(stamp.0) * 2_654_435_761 + u64::from(stamp.1) * 40_503 + u64::from(n))
        % 1_000_003;
    let len = 16 + (h as usize % len_max.max(1));
    let fill = b'a' + (h % 26) as u8;
    v.resize(v.len() + len, fill);
    v
}

/// Decodes a value made by [`value`] for key `n`; `None` if it is not exactly one of them.
pub fn stamp_of(n: u16, v: &[u8], len_max: usize) -> Option<Stamp> {
    let s = std::str::from_utf8(&v[..v.iter().position(|&b| b == b'#')? + 1]).ok()?;
    let rest = s.strip_prefix(&format!("key{n:03}@"))?.strip_suffix('#')?;
    let (w, op) = rest.split_once('.')?;
    let stamp = (w.parse().ok()?, op.parse().ok()?);
    (value(n, stamp, len_max) == v).then_some(stamp)
}

/// A store's contents by key number and stamp, checking that every entry is a well-formed
/// value of its own key.
pub type State = BTreeMap<u16, Stamp>;

/// Every entry of the store, in order, as a [`State`]; panics on a foreign key or value, an
/// unsorted or repeated key. Returns the iterator's error, if any.
pub fn scan_state(db: &Db, len_max: usize) -> shale_lsm::Result<State> {
    let mut it = db.iter(&ReadOptions::default());
    let mut state = State::new();
    let mut last: Option<u16> = None;
    it.seek_to_first();
    while it.valid() {
        let n = key_number(it.key()).unwrap_or_else(|| panic!("foreign key {:?}", it.key()));
        assert!(last.is_none_or(|l| l < n), "scan not sorted or repeated at key {n}");
        last = Some(n);
        let stamp = stamp_of(n, it.value(), len_max)
            .unwrap_or_else(|| panic!("key {n}: a value never written for it"));
        state.insert(n, stamp);
        it.next();
    }
    it.status()?;
    Ok(state)
}

/// The entries of keys `0..keys` as [`State`], read by [`Db::multi_get`] in batches of
/// `batch` keys (each key twice in a batch when `batch` is even, in shuffled order: a block
/// two keys need, and a key asked twice, must each be answered once and right); panics on a
/// value never written for its key.
pub fn multi_get_state(
    db: &Db,
    keys: u16,
    batch: usize,
    len_max: usize,
) -> shale_lsm::Result<State> {
    let mut order: Vec<u16> = (0..keys).collect();
    // A fixed shuffle: batches span SSTs and levels in no order.
    order.sort_by_key(|n| u32::from(*n).wrapping_mul(2_654_435_761).rotate_left(7));
    let mut state = State::new();
    for chunk in order.chunks(batch.div_ceil(2).max(1)) {
        let mut asked: Vec<Vec<u8>> = chunk.iter().map(|&n| key(n)).collect();
        if batch % 2 == 0 {
            asked.extend(chunk.iter().rev().map(|&n| key(n)));
        }
        let refs: Vec<&[u8]> = asked.iter().map(Vec::as_slice).collect();
        let got = db.multi_get(&refs, &ReadOptions::default())?;
        assert_eq!(got.len(), asked.len(), "one answer per key asked");
        for (k, v) in asked.iter().zip(got) {
            let n = key_number(k).expect("a key of ours");
            let Some(v) = v else { continue };
            let stamp = stamp_of(n, &v, len_max)
                .unwrap_or_else(|| panic!("key {n}: a value never written for it"));
            if let Some(before) = state.insert(n, stamp) {
                assert_eq!(before, stamp, "key {n}: two answers in one batch");
            }
        }
    }
    Ok(state)
}

/// The entries of keys `0..keys` as [`State`], each found by a seek of one iterator to the
/// key (in a fixed shuffled order) and read there: the seeks read the data blocks of every
/// sorted run they land in together (`DbIterator::with_batched_seeks`) when the cache lacks
/// them. Panics on a value never written for its key.
pub fn seek_state(db: &Db, keys: u16, len_max: usize) -> shale_lsm::Result<State> {
    let mut order: Vec<u16> = (0..keys).collect();
    order.sort_by_key(|n| u32::from(*n).wrapping_mul(2_246_822_519).rotate_left(11));
    let mut it = db.iter(&ReadOptions::default());
    let mut state = State::new();
    for n in order {
        it.seek(&key(n));
        if !it.valid() {
            it.status()?;
            continue;
        }
        let found = key_number(it.key()).unwrap_or_else(|| panic!("foreign key {:?}", it.key()));
        assert!(found >= n, "a seek to key {n} landed before it, on key {found}");
        if found == n {
            let stamp = stamp_of(n, it.value(), len_max)
                .unwrap_or_else(|| panic!("key {n}: a value never written for it"));
            state.insert(n, stamp);
        }
    }
    Ok(state)
}

/// Runs the tests of one file one at a time (hold the guard for the whole test). A process
/// forked by another test thread (`Command::spawn`: mount, mkfifo, losetup, a child store)
/// holds a duplicate of every descriptor until its exec closes them. A store's OFD locks are
/// let go explicitly and do not linger (`store_lock::unlock`), but a block device a writer
/// opened with `O_EXCL` stays claimed until that duplicate closes too: for that moment a
/// device store just dropped in this thread still looks in use. Tests that spawn processes
/// and reopen stores serialise on this.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Writes `batches` batches of `per_batch` unsynced puts of `len_max`-byte values to keys
/// drawn from `0..keys` (xorshift from `seed`), calling `after_write` after each batch;
/// returns each key's last write (its number, op 0), the model to read back with
/// [`assert_reads_back`]. A failed write panics with the store's stats.
pub fn random_overwrites(
    db: &Db,
    keys: u32,
    batches: u32,
    per_batch: u32,
    len_max: usize,
    seed: u64,
    mut after_write: impl FnMut(&Db),
) -> BTreeMap<u16, u32> {
    random_overwrites_while(db, keys, batches, per_batch, len_max, seed, |db| {
        after_write(db);
        true
    })
}

/// [`random_overwrites`], ending early once `after_write` returns false.
pub fn random_overwrites_while(
    db: &Db,
    keys: u32,
    batches: u32,
    per_batch: u32,
    len_max: usize,
    seed: u64,
    mut after_write: impl FnMut(&Db) -> bool,
) -> BTreeMap<u16, u32> {
    let mut model = BTreeMap::new();
    let mut rng = seed;
    for g in 0..batches {
        let mut b = WriteBatch::new();
        for i in 0..per_batch {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let n = (rng % u64::from(keys)) as u16;
            b.put(&key(n), &value(n, (g * per_batch + i, 0), len_max));
            model.insert(n, g * per_batch + i);
        }
        db.write(&b, &WriteOptions { sync: false }).unwrap_or_else(|e| {
            panic!("write {g} failed: {e}; {:?}", db.stats());
        });
        if !after_write(db) {
            break;
        }
    }
    model
}

/// Every key of `model` (from [`random_overwrites`]) reads back as its last write.
pub fn assert_reads_back(db: &Db, model: &BTreeMap<u16, u32>, len_max: usize) {
    for (&n, &w) in model {
        let v = db.get(&key(n)).unwrap().unwrap_or_else(|| panic!("key {n} lost"));
        assert_eq!(stamp_of(n, &v, len_max), Some((w, 0)), "key {n}");
    }
}
