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
}
