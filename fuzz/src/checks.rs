//! What each fuzz target checks, in one place.
//!
//! Every check takes arbitrary bytes, runs a decoder of `shale_space` on them and panics if a
//! property is broken. A decoder that panics or hangs on its own is a failure too: libFuzzer
//! reports it, and the regression test (which includes this file) fails on it.
//!
//! This file is compiled twice: as `shale_fuzz::checks` for the fuzz targets, and as a module
//! of `crates/space/tests/fuzz_regressions.rs`. It may use only the public APIs of
//! `shale_space` and `shale_io`.

use std::sync::{Arc, OnceLock};

use shale_io::MemoryDevice;
use shale_space::header::{FORMAT_VERSION, HEADER_BYTES, HEADER_MAGIC, Header, HeaderCopy};
use shale_space::log_object::{LogObject, OBJECT_HEADER_BYTES, OBJECT_MAGIC};
use shale_space::version_record::{BaseRecord, DeltaRecord};
use shale_space::{Edit, LayoutOptions, Volume, VolumeOptions};

/// Sector sizes a log object is decoded at: the smallest and largest a volume may have.
pub const SECTORS: [usize; 2] = [512, 4096];

/// `LogObject::decode` at every sector size; a decoded object re-encodes to exactly the bytes
/// it was decoded from (the checksum covers header, payload and padding, so nothing else may
/// decode).
pub fn log_object(data: &[u8]) {
    for sector in SECTORS {
        let Ok((object, used)) = LogObject::decode(data, sector) else { continue };
        assert!(used <= data.len(), "object claims {used} bytes of {}", data.len());
        assert_eq!(used % sector, 0, "object of {used} bytes is not whole {sector}-byte sectors");
        assert_eq!(used, LogObject::encoded_len(object.payload.len(), sector));
        let encoded = object.encode(sector);
        assert!(encoded == data[..used], "re-encoded object differs from its bytes: {object:?}");
    }
}

/// `BaseRecord::decode` and `DeltaRecord::decode`; a decoded record re-encodes to exactly the
/// input (the encoding is canonical: trailing bytes are refused) and decodes back equal.
pub fn version_record(data: &[u8]) {
    if let Ok(base) = BaseRecord::decode(data) {
        let encoded = base.encode();
        assert!(encoded == data, "re-encoded base differs from its bytes: {base:?}");
        assert_eq!(BaseRecord::decode(&encoded), Ok(base));
    }
    if let Ok(delta) = DeltaRecord::decode(data) {
        let encoded = delta.encode();
        assert!(encoded == data, "re-encoded delta differs from its bytes: {delta:?}");
        assert_eq!(DeltaRecord::decode(&encoded), Ok(delta));
    }
}

/// `Header::decode`: every classification agrees with the bytes, and a valid header re-encodes
/// to the same fields and decodes back equal.
pub fn format_header(data: &[u8]) {
    match Header::decode(data) {
        HeaderCopy::Valid(header) => {
            let encoded = header.encode();
            assert_eq!(encoded.len(), HEADER_BYTES);
            // Every field after the checksum, up to the reserved bytes, must come back as read:
            // bytes [12, 96), and in format 2 the role and partner id [96, 116) too. The
            // reserved bytes after them (format 1: [96, 128), format 2: [116, 128)) are not
            // checked by the decoder, so the checksum and the reserved bytes match the input
            // only when the input's reserved bytes are zero.
            let fields = if header.format_version >= 2 { 116 } else { 96 };
            assert!(
                encoded[12..fields] == data[12..fields],
                "re-encoded header fields differ: {header:?}"
            );
            if data[fields..HEADER_BYTES].iter().all(|&b| b == 0) {
                assert!(encoded == data[..HEADER_BYTES], "re-encoded header differs: {header:?}");
            }
            assert_eq!(Header::decode(&encoded), HeaderCopy::Valid(header));
        }
        HeaderCopy::Blank => assert!(data.iter().all(|&b| b == 0), "non-zero bytes called blank"),
        HeaderCopy::Foreign => assert!(data.len() >= 8 && data[..8] != HEADER_MAGIC[..]),
        HeaderCopy::Newer(found) => assert!(found > FORMAT_VERSION, "version {found} is newer"),
        HeaderCopy::Damaged => {}
    }
}

/// Sector size of the scan target's volume: small sectors give the most objects per mirror.
pub const SCAN_SECTOR_BYTES: u32 = 512;
/// Slots of the scan target's volume.
const SCAN_SLOTS: u64 = 16;
/// Commits made on the scan target's volume before its image is taken.
const SCAN_COMMITS: u32 = 12;

/// The layout of the scan target's volume: the smallest version log allowed.
pub fn scan_layout() -> LayoutOptions {
    LayoutOptions { slot_bytes: 4096, version_log_bytes: 64 << 10, wal_bytes: 8192 }
}

/// The image of a small volume with a base and a chain of deltas, made once per process.
pub fn scan_template() -> &'static [u8] {
    static TEMPLATE: OnceLock<Vec<u8>> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let layout = scan_layout();
        let capacity =
            8192 + 2 * layout.version_log_bytes + layout.wal_bytes + SCAN_SLOTS * layout.slot_bytes;
        let device = Arc::new(MemoryDevice::new(capacity, SCAN_SECTOR_BYTES).expect("device"));
        let opts = VolumeOptions {
            layout,
            engine: Some(shale_space::EngineKind::Lsm),
            ..VolumeOptions::default()
        };
        let volume = Volume::open(device.clone(), &opts).expect("create volume").volume;
        let mut live = Vec::new();
        for n in 0..SCAN_COMMITS {
            // Add an extent each commit and drop the oldest every third one, so the records
            // hold both lists; pad the engine bytes so some objects span several sectors.
            let added = vec![volume.allocate(1 + n % 2).expect("allocate")];
            let removed = if n % 3 == 2 { vec![live.remove(0)] } else { Vec::new() };
            live.extend_from_slice(&added);
            let engine = vec![n as u8; 8 + 200 * (n as usize % 4)];
            let full = engine.clone();
            let edit = Edit { removed, added, engine, ..Edit::default() };
            volume.commit(&edit, &mut || full.clone()).expect("commit");
        }
        drop(volume);
        device.snapshot()
    })
}

/// Flag bits of a scan input's first byte.
pub const SCAN_TO_MIRROR_A: u8 = 1;
/// Also (or only) write the bytes into mirror B.
pub const SCAN_TO_MIRROR_B: u8 = 2;
/// Recompute the checksum of every object whose magic starts a sector after writing, so
/// forged objects pass the CRC and reach the walk's field checks.
pub const SCAN_FIX_CHECKSUMS: u8 = 4;

/// Builds the device image a scan input describes.
///
/// Input: `flags: u8`, `offset: u16 LE` (a byte offset into each mirror), then the bytes to
/// write there (cut at the mirror's end). With neither mirror flag, mirror A is written.
pub fn scan_image(data: &[u8]) -> Vec<u8> {
    let mut image = scan_template().to_vec();
    let (flags, offset, bytes) = match data {
        [flags, lo, hi, rest @ ..] => (*flags, usize::from(u16::from_le_bytes([*lo, *hi])), rest),
        _ => return image,
    };
    let layout = scan_layout();
    let mirror_bytes = layout.version_log_bytes as usize;
    let mut mirrors = Vec::new();
    if flags & SCAN_TO_MIRROR_A != 0 || flags & SCAN_TO_MIRROR_B == 0 {
        mirrors.push(0);
    }
    if flags & SCAN_TO_MIRROR_B != 0 {
        mirrors.push(1);
    }
    for m in mirrors {
        let start = 8192 + m * mirror_bytes;
        let mirror = &mut image[start..start + mirror_bytes];
        let offset = offset % mirror_bytes;
        let n = bytes.len().min(mirror_bytes - offset);
        mirror[offset..offset + n].copy_from_slice(&bytes[..n]);
        if flags & SCAN_FIX_CHECKSUMS != 0 {
            fix_checksums(mirror, SCAN_SECTOR_BYTES as usize);
        }
    }
    image
}

/// Recomputes the CRC of every object that starts on a sector boundary of `mirror` and fits.
fn fix_checksums(mirror: &mut [u8], sector: usize) {
    for pos in (0..mirror.len()).step_by(sector) {
        let b = &mut mirror[pos..];
        if b.len() < OBJECT_HEADER_BYTES || b[..4] != OBJECT_MAGIC[..] {
            continue;
        }
        let payload_len = u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize;
        let total = LogObject::encoded_len(payload_len, sector);
        if total <= b.len() {
            let crc = crc32c(&b[8..total]);
            b[4..8].copy_from_slice(&crc.to_le_bytes());
        }
    }
}

/// CRC-32C (Castagnoli), bitwise: this file may not depend on more than the space crate.
fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
        }
    }
    !crc
}

/// Overwrites part of the version log of a valid volume and opens it: `Volume::open` returns
/// Ok or Err, never panics or hangs, and a volume it opens passes its own slot-map check.
pub fn version_log_scan(data: &[u8]) {
    let image = scan_image(data);
    let device = Arc::new(MemoryDevice::from_bytes(image, SCAN_SECTOR_BYTES).expect("device"));
    let opts = VolumeOptions {
        layout: scan_layout(),
        create_if_blank: false,
        grow_slots_min: 1,
        ..VolumeOptions::default()
    };
    if let Ok(opened) = Volume::open(device, &opts) {
        assert!(!opened.created, "a damaged volume was created anew");
        if let Err(e) = opened.volume.check_slots() {
            panic!("recovered volume breaks the slot map invariants: {e}");
        }
    }
}

/// Bytes before the page in an `index_page` input.
const INDEX_PAGE_PREFIX: usize = 21;

/// `data` as an index page (`shale_space::index_page`): a flags byte (bit 0: reseal the page
/// so the checks behind the checksum are reached; bit 1: accept the hash engine's legacy
/// `SHIXPG01` page), the entry bytes (u8, 1 to 255), the flag bits the owner defines (u8),
/// the generation (u64 LE), page number (u32 LE) and pages (u32 LE) expected, then the page
/// (cut or zero-padded to 4096 bytes). The decoder answers, never panics; an accepted page
/// of the one format re-encodes to the same bytes, and one of the legacy format to the same
/// bytes through the legacy encoder.
pub fn index_page(data: &[u8]) {
    use shale_space::index_page::{self as page, Format, Legacy, PAGE_BYTES, PageId, PageShape};
    if data.len() < INDEX_PAGE_PREFIX || data[1] == 0 {
        return;
    }
    let legacy = (data[0] & 2 != 0).then_some(Legacy::HashBucketV1);
    let shape = PageShape { entry_bytes: u16::from(data[1]), flags_known: data[2], legacy };
    let id = PageId {
        generation: u64::from_le_bytes(data[3..11].try_into().unwrap()),
        number: u32::from_le_bytes(data[11..15].try_into().unwrap()),
        pages: u32::from_le_bytes(data[15..19].try_into().unwrap()),
    };
    // Two bytes of the prefix are spare, so seeds can grow without moving the page.
    let mut bytes = data[INDEX_PAGE_PREFIX..].to_vec();
    bytes.resize(PAGE_BYTES, 0);
    if data[0] & 1 != 0 {
        page::seal(&mut bytes);
    }
    let Ok(p) = page::decode(&bytes, &shape, id) else { return };
    assert_eq!(p.flags & !shape.flags_known, 0, "flags the owner does not define");
    let entries: Vec<&[u8]> = p.entries().collect();
    assert!(entries.iter().all(|e| e.len() == usize::from(shape.entry_bytes)));
    let mut again = vec![0u8; PAGE_BYTES];
    match p.format {
        Format::Current => {
            page::encode(&mut again, &shape, id, p.flags, entries.len(), |i, e| {
                e.copy_from_slice(entries[i])
            });
        }
        Format::Legacy(Legacy::HashBucketV1) => {
            page::legacy::encode_hash_bucket_v1(&mut again, id, &entries.concat());
        }
        Format::Legacy(other) => panic!("a legacy format the check does not know: {other:?}"),
    }
    assert_eq!(again, bytes, "a decoded index page re-encodes to itself");
}

/// An `index_page` input: flags, entry bytes, flag bits, generation 7, page 3 of 8, then
/// `page`.
fn index_page_input(flags: u8, entry_bytes: u8, flags_known: u8, page: &[u8]) -> Vec<u8> {
    let mut b = vec![flags, entry_bytes, flags_known];
    b.extend_from_slice(&7u64.to_le_bytes());
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&8u32.to_le_bytes());
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(page);
    b
}

/// The `index_page` seeds: a table-shaped page (20-byte entries, the "overflowed" flag) and
/// a hash-shaped one, in the one format, and the hash-shaped one in the legacy format.
pub fn index_page_seeds() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    use shale_space::index_page::{self as page, PAGE_BYTES, PageId, PageShape};
    let id = PageId { generation: 7, number: 3, pages: 8 };
    let entry = |i: usize, e: &mut [u8]| {
        for (k, b) in e.iter_mut().enumerate() {
            *b = (i * 13 + k + 1) as u8;
        }
    };
    let table = PageShape { entry_bytes: 20, flags_known: 1, legacy: None };
    let mut table_page = vec![0u8; PAGE_BYTES];
    page::encode(&mut table_page, &table, id, 1, 30, entry);
    let hash = PageShape { entry_bytes: 16, flags_known: 0, legacy: None };
    let mut hash_page = vec![0u8; PAGE_BYTES];
    page::encode(&mut hash_page, &hash, id, 0, 40, entry);
    let mut legacy_page = vec![0u8; PAGE_BYTES];
    page::legacy::encode_hash_bucket_v1(&mut legacy_page, id, &hash_page[32..32 + 40 * 16]);
    vec![
        ("index_page", "table-shaped", index_page_input(0, 20, 1, &table_page)),
        ("index_page", "table-shaped-resealed", index_page_input(1, 20, 1, &table_page)),
        ("index_page", "hash-shaped", index_page_input(2, 16, 0, &hash_page)),
        ("index_page", "hash-legacy", index_page_input(2, 16, 0, &legacy_page)),
    ]
}

/// Inputs every target starts from, by target: valid encodings of each kind and a few
/// damaged ones. `fuzz_regressions.rs` checks they are committed under `fuzz/regressions/`.
pub fn seeds() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    use shale_space::Extent;
    use shale_space::log_object::ObjectKind;
    let base = BaseRecord {
        extents: vec![Extent::fast(0, 2), Extent::fast(7, 1)],
        engine: b"levels".to_vec(),
    };
    let delta = DeltaRecord {
        removed: vec![Extent::fast(0, 2)],
        added: vec![Extent::fast(9, 3)],
        engine: b"L0 +sst".to_vec(),
    };
    let object =
        |kind, payload: Vec<u8>, sector| LogObject { kind, lsn: 7, sn: 3, payload }.encode(sector);
    let header = Header {
        format_version: shale_space::header::FORMAT_VERSION,
        volume_id: *b"0123456789abcdef",
        layout: shale_space::Layout::new(&scan_layout(), 4096),
        created_unix_secs: 1_800_000_000,
        role: shale_space::Role::Single,
        partner_id: [0; 16],
        engine: Some(shale_space::EngineKind::Lsm),
    };
    let template = scan_template();
    // The mirror A anchor sector, as a scan input: rewriting it unchanged must open fine.
    let mut anchor = vec![SCAN_TO_MIRROR_A, 0, 0];
    anchor.extend_from_slice(&template[8192..8192 + SCAN_SECTOR_BYTES as usize]);
    // The first ring sector of both mirrors zeroed, where the first base was written.
    let mut no_base = vec![SCAN_TO_MIRROR_A | SCAN_TO_MIRROR_B, 0, 2];
    no_base.extend_from_slice(&[0; SCAN_SECTOR_BYTES as usize]);
    vec![
        ("log_object", "base-512", object(ObjectKind::Base, base.encode(), 512)),
        ("log_object", "delta-4096", object(ObjectKind::Delta, delta.encode(), 4096)),
        ("log_object", "wrap-right-512", object(ObjectKind::WrapRight, Vec::new(), 512)),
        (
            "log_object",
            "wrap-left-512",
            object(ObjectKind::WrapLeft, 512u64.to_le_bytes().to_vec(), 512),
        ),
        ("version_record", "base", base.encode()),
        ("version_record", "delta", delta.encode()),
        ("version_record", "empty-base", BaseRecord::default().encode()),
        ("format_header", "valid", header.encode()),
        ("format_header", "blank", vec![0; 512]),
        ("version_log_scan", "unchanged", vec![SCAN_TO_MIRROR_A, 0, 0]),
        ("version_log_scan", "anchor-rewritten", anchor),
        ("version_log_scan", "base-zeroed-in-both-mirrors", no_base),
    ]
    .into_iter()
    .chain(index_page_seeds())
    .collect()
}
