//! The catalog: the tables, their schemas and their segments, kept in the volume's version
//! log as this engine's payloads.
//!
//! ```text
//! every payload: magic b"SHTABL01" (8 bytes) | kind (u8)
//! kind 0, base:   next table id (u32 LE) | tables (u32 LE) | per table:
//!                 id (u32 LE) | name length (u16 LE) | name | schema (`schema.rs`) |
//!                 segments (u32 LE) | per segment: tier (u8) | first slot (u32 LE) |
//!                 slots (u32 LE)
//! kind 1, the store created: nothing more (marks the volume as a table store's)
//! kind 2, a table created: id (u32 LE) | name length (u16 LE) | name | schema; its first
//!                 segment is the delta's one added extent
//! kind 3, a segment added: table id (u32 LE); the delta's one added extent
//! kind 4, a table dropped: table id (u32 LE); its segments are the delta's removed extents
//! kind 5, base with a spill area: kind 0's fields, then the undo log's spill area (`spill.rs`):
//!                 tier (u8) | first slot (u32 LE) | slots (u32 LE)
//! kind 6, the spill area added: nothing more; it is the delta's one added extent
//! kind 7, the undo log bound to a persistent memory file (`undo_file.rs`): the file (below)
//! kind 8, the undo log no longer in a file (back on the volume): nothing more
//! kind 9, base with an undo log file: kind 0's fields | spill present (u8, 0 or 1) |
//!                 [the spill area as in kind 5] | the file (below)
//! the file:       path length (u16 LE) | path (bytes; relative to the store's directory
//!                 unless absolute) | the file's identity (16 bytes, `undo_file.rs`):
//!                 inode (u64 LE) | birth time in ns, or device | 1 << 63 (u64 LE)
//! kind 10, the spill area added, in the page log format (`volume_undo.rs`): nothing more;
//!                 it is the delta's one added extent
//! kind 11, the spill area rewritten in the page log format (it was the `SHPM` ring of
//!                 `undo_log.rs`): nothing more
//! kind 12, base with a spill area in the page log format: kind 0's fields | the spill area
//!                 as in kind 5 | file present (u8, 0 or 1) | [the file]
//! ```
//! Kinds 5, 6 and 9 name a spill area in the ring format of persistent memory (`SHPM`,
//! written before the page log format); kinds 10, 11 and 12 one in the page log format. The
//! catalog, never the area's bytes, says which: a damaged area is never taken for the other
//! format.
//! A store without a spill area writes kind 0 bases, and one whose undo log is in no file
//! kind 0 or 5 bases, so stores made before the spill area or the file binding existed read
//! as they did.
//! A table's segments are its blocks in order: segment `i` holds blocks
//! `i * blocks_per_segment ..`. The magic tells a table store's volume from the other
//! engines': this engine refuses a volume whose payloads lack it (writing nothing), and the
//! hash engine refuses one whose payloads lack its own; the lsm engine refuses it as a
//! volume without a WAL area.

use shale_space::codec::u32_at;
use shale_space::{Extent, Tier, Versions};

use crate::error::{Error, Result};
use crate::schema::Schema;
use crate::undo_file::{FileId, UndoFile};

const MAGIC: &[u8; 8] = b"SHTABL01";
const BASE: u8 = 0;
const CREATED: u8 = 1;
const TABLE_CREATED: u8 = 2;
const SEGMENT_ADDED: u8 = 3;
const TABLE_DROPPED: u8 = 4;
const BASE_WITH_SPILL: u8 = 5;
const SPILL_ADDED: u8 = 6;
const UNDO_FILE_BOUND: u8 = 7;
const UNDO_FILE_UNBOUND: u8 = 8;
const BASE_WITH_UNDO_FILE: u8 = 9;
const SPILL_ADDED_PAGED: u8 = 10;
const SPILL_PAGED: u8 = 11;
const BASE_WITH_PAGED_SPILL: u8 = 12;

/// A table as the catalog holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableMeta {
    /// Its id, never used again once dropped.
    pub id: u32,
    /// Its name.
    pub name: String,
    /// Its schema.
    pub schema: Schema,
    /// Its segments, in block order.
    pub segments: Vec<Extent>,
}

/// The catalog.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Catalog {
    /// Tables by id order.
    pub tables: Vec<TableMeta>,
    /// The id the next table gets.
    pub next_id: u32,
    /// Whether the volume holds any payload of this engine (false: a new volume).
    pub marked: bool,
    /// The undo log's spill area, once the log has spilled.
    pub spill: Option<Extent>,
    /// Whether the spill area is in the page log format (`volume_undo.rs`), not the ring
    /// format of persistent memory.
    pub spill_paged: bool,
    /// The persistent memory file the undo log is in, if it is in one.
    pub undo_file: Option<UndoFile>,
}

fn prefix(kind: u8) -> Vec<u8> {
    let mut b = MAGIC.to_vec();
    b.push(kind);
    b
}

/// The payload that marks a new volume as a table store's.
pub fn encode_created() -> Vec<u8> {
    prefix(CREATED)
}

/// The payload of a full catalog.
pub fn encode_base(c: &Catalog) -> Vec<u8> {
    let kind = match (c.spill, &c.undo_file) {
        (Some(_), _) if c.spill_paged => BASE_WITH_PAGED_SPILL,
        (_, Some(_)) => BASE_WITH_UNDO_FILE,
        (Some(_), None) => BASE_WITH_SPILL,
        (None, None) => BASE,
    };
    let mut b = prefix(kind);
    b.extend_from_slice(&c.next_id.to_le_bytes());
    b.extend_from_slice(&(c.tables.len() as u32).to_le_bytes());
    for t in &c.tables {
        encode_table(&mut b, t.id, &t.name, &t.schema);
        b.extend_from_slice(&(t.segments.len() as u32).to_le_bytes());
        for e in &t.segments {
            encode_extent(&mut b, *e);
        }
    }
    if kind == BASE_WITH_UNDO_FILE {
        b.push(u8::from(c.spill.is_some()));
    }
    if let Some(e) = c.spill {
        encode_extent(&mut b, e);
    }
    if kind == BASE_WITH_PAGED_SPILL {
        b.push(u8::from(c.undo_file.is_some()));
    }
    if let Some(f) = &c.undo_file {
        encode_undo_file(&mut b, f);
    }
    b
}

fn encode_undo_file(b: &mut Vec<u8>, f: &UndoFile) {
    use std::os::unix::ffi::OsStrExt;
    let path = f.path.as_os_str().as_bytes();
    b.extend_from_slice(&(path.len() as u16).to_le_bytes());
    b.extend_from_slice(path);
    b.extend_from_slice(&f.file.encode());
}

/// Decodes an undo log file from the front of `b`; returns it and the bytes past it.
fn decode_undo_file(b: &[u8]) -> Option<(UndoFile, &[u8])> {
    let n = u16::from_le_bytes(b.get(..2)?.try_into().ok()?) as usize;
    let path = b.get(2..2 + n)?;
    let file = FileId::decode(b.get(2 + n..2 + n + 16)?.try_into().ok()?);
    use std::os::unix::ffi::OsStrExt;
    let path = std::path::PathBuf::from(std::ffi::OsStr::from_bytes(path));
    Some((UndoFile { path, file }, &b[2 + n + 16..]))
}

/// The payload of a delta binding the undo log to a persistent memory file.
pub fn encode_undo_file_bound(f: &UndoFile) -> Vec<u8> {
    let mut b = prefix(UNDO_FILE_BOUND);
    encode_undo_file(&mut b, f);
    b
}

/// The payload of a delta saying the undo log is in no file any more.
pub fn encode_undo_file_unbound() -> Vec<u8> {
    prefix(UNDO_FILE_UNBOUND)
}

fn encode_extent(b: &mut Vec<u8>, e: Extent) {
    b.push(e.tier.index() as u8);
    b.extend_from_slice(&e.first.to_le_bytes());
    b.extend_from_slice(&e.count.to_le_bytes());
}

/// A flag byte (0 or 1) taken off the front of `b`; `None` for any other byte or none.
fn take_flag(b: &mut &[u8]) -> Option<bool> {
    let (&flag, rest) = b.split_first()?;
    *b = rest;
    match flag {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

fn decode_extent(r: &[u8]) -> Option<Extent> {
    let tier = match *r.first()? {
        0 => Tier::Fast,
        1 => Tier::Capacity,
        _ => return None,
    };
    Some(Extent::on(tier, u32_at(r, 1)?, u32_at(r, 5)?))
}

/// The payload of a delta adding the undo log's spill area in the page log format (the
/// delta's added extent).
pub fn encode_spill_added() -> Vec<u8> {
    prefix(SPILL_ADDED_PAGED)
}

/// The payload of a delta saying the spill area was rewritten in the page log format.
pub fn encode_spill_paged() -> Vec<u8> {
    prefix(SPILL_PAGED)
}

fn encode_table(b: &mut Vec<u8>, id: u32, name: &str, schema: &Schema) {
    b.extend_from_slice(&id.to_le_bytes());
    b.extend_from_slice(&(name.len() as u16).to_le_bytes());
    b.extend_from_slice(name.as_bytes());
    schema.encode(b);
}

/// The payload of a delta creating a table (its first segment the delta's added extent).
pub fn encode_table_created(id: u32, name: &str, schema: &Schema) -> Vec<u8> {
    let mut b = prefix(TABLE_CREATED);
    encode_table(&mut b, id, name, schema);
    b
}

/// The payload of a delta adding a segment to table `id`.
pub fn encode_segment_added(id: u32) -> Vec<u8> {
    let mut b = prefix(SEGMENT_ADDED);
    b.extend_from_slice(&id.to_le_bytes());
    b
}

/// The payload of a delta dropping table `id`.
pub fn encode_table_dropped(id: u32) -> Vec<u8> {
    let mut b = prefix(TABLE_DROPPED);
    b.extend_from_slice(&id.to_le_bytes());
    b
}

fn bad(what: &str) -> Error {
    Error::Corruption { what: format!("table catalog: {what}"), offset: 0 }
}

/// Decodes id, name and schema from the front of `b`.
fn decode_table(b: &[u8]) -> Option<(u32, String, Schema, &[u8])> {
    let id = u32_at(b, 0)?;
    let n = u16::from_le_bytes(b.get(4..6)?.try_into().ok()?) as usize;
    let name = std::str::from_utf8(b.get(6..6 + n)?).ok()?.to_string();
    let (schema, rest) = Schema::decode(&b[6 + n..])?;
    Some((id, name, schema, rest))
}

/// The catalog a recovered version names.
///
/// # Errors
/// [`Error::NotTableStore`] when a payload lacks the magic (another engine's volume), or
/// extents live with no payload of this engine; [`Error::Corruption`] when a payload of this
/// engine does not parse or names extents the version does not hold.
pub fn decode(versions: &Versions) -> Result<Catalog> {
    let mut c = Catalog { next_id: 1, ..Catalog::default() };
    let base = &versions.base.engine;
    if !base.is_empty() {
        let body = strip_magic(base)?;
        c.marked = true;
        decode_base(body, &mut c).ok_or_else(|| bad("base record"))?;
        for t in &c.tables {
            for e in &t.segments {
                if !versions.base.extents.contains(e) {
                    return Err(bad("a segment the base does not hold"));
                }
            }
        }
        if c.spill.is_some_and(|e| !versions.base.extents.contains(&e)) {
            return Err(bad("a spill area the base does not hold"));
        }
    } else if !versions.base.extents.is_empty() {
        return Err(Error::NotTableStore("live extents with no table-engine state".into()));
    }
    for delta in &versions.deltas {
        let body = strip_magic(&delta.engine)?;
        c.marked = true;
        let (&kind, rest) = body.split_first().ok_or_else(|| bad("empty delta"))?;
        match (kind, delta.added.as_slice()) {
            (CREATED, []) if rest.is_empty() => {}
            (TABLE_CREATED, [e]) => {
                let (id, name, schema, tail) =
                    decode_table(rest).ok_or_else(|| bad("table created"))?;
                if !tail.is_empty() || id < c.next_id {
                    return Err(bad("table created"));
                }
                c.next_id = id + 1;
                c.tables.push(TableMeta { id, name, schema, segments: vec![*e] });
            }
            (SEGMENT_ADDED, [e]) if rest.len() == 4 => {
                let id = u32_at(rest, 0).unwrap();
                let t = c.tables.iter_mut().find(|t| t.id == id);
                t.ok_or_else(|| bad("a segment of no table"))?.segments.push(*e);
            }
            (SPILL_ADDED, [e]) if rest.is_empty() && c.spill.is_none() => {
                c.spill = Some(*e);
            }
            (SPILL_ADDED_PAGED, [e]) if rest.is_empty() && c.spill.is_none() => {
                c.spill = Some(*e);
                c.spill_paged = true;
            }
            (SPILL_PAGED, []) if rest.is_empty() && c.spill.is_some() && !c.spill_paged => {
                c.spill_paged = true;
            }
            (UNDO_FILE_BOUND, []) => {
                let (f, tail) = decode_undo_file(rest).ok_or_else(|| bad("undo log file"))?;
                if !tail.is_empty() {
                    return Err(bad("undo log file"));
                }
                c.undo_file = Some(f);
            }
            (UNDO_FILE_UNBOUND, []) if rest.is_empty() => c.undo_file = None,
            (TABLE_DROPPED, []) if rest.len() == 4 => {
                let id = u32_at(rest, 0).unwrap();
                let i = c.tables.iter().position(|t| t.id == id);
                let i = i.ok_or_else(|| bad("a drop of no table"))?;
                if c.tables[i].segments != delta.removed {
                    return Err(bad("a drop that does not free the table's segments"));
                }
                c.tables.remove(i);
            }
            _ => return Err(bad("delta record")),
        }
    }
    Ok(c)
}

fn decode_base(body: &[u8], c: &mut Catalog) -> Option<()> {
    let (&kind, b) = body.split_first()?;
    if ![BASE, BASE_WITH_SPILL, BASE_WITH_UNDO_FILE, BASE_WITH_PAGED_SPILL].contains(&kind) {
        return None;
    }
    c.next_id = u32_at(b, 0)?;
    let n = u32_at(b, 4)? as usize;
    let mut b = &b[8..];
    for _ in 0..n {
        let (id, name, schema, rest) = decode_table(b)?;
        let segs = u32_at(rest, 0)? as usize;
        let mut r = &rest[4..];
        let mut segments = Vec::new();
        for _ in 0..segs {
            segments.push(decode_extent(r)?);
            r = &r[9..];
        }
        if id >= c.next_id {
            return None;
        }
        c.tables.push(TableMeta { id, name, schema, segments });
        b = r;
    }
    let spill = match kind {
        BASE_WITH_SPILL | BASE_WITH_PAGED_SPILL => true,
        BASE_WITH_UNDO_FILE => take_flag(&mut b)?,
        _ => false,
    };
    if spill {
        c.spill = Some(decode_extent(b)?);
        c.spill_paged = kind == BASE_WITH_PAGED_SPILL;
        b = &b[9..];
    }
    let file = match kind {
        BASE_WITH_UNDO_FILE => true,
        BASE_WITH_PAGED_SPILL => take_flag(&mut b)?,
        _ => false,
    };
    if file {
        let (f, rest) = decode_undo_file(b)?;
        c.undo_file = Some(f);
        b = rest;
    }
    b.is_empty().then_some(())
}

fn strip_magic(payload: &[u8]) -> Result<&[u8]> {
    payload.strip_prefix(MAGIC.as_slice()).ok_or_else(|| {
        Error::NotTableStore(
            "the version log holds another engine's records (an lsm or hash-engine store?)".into(),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Column;
    use shale_space::{BaseRecord, DeltaRecord};

    fn schema() -> Schema {
        Schema::new(vec![Column::fixed("k", 4), Column::var("v", 100)]).unwrap()
    }

    #[test]
    fn deltas_and_a_base_give_the_same_catalog() {
        let (a, b, c) = (Extent::fast(1, 1), Extent::fast(2, 1), Extent::fast(3, 1));
        let spill = Extent::fast(5, 2);
        let d = |added: Vec<Extent>, removed: Vec<Extent>, engine| DeltaRecord {
            removed,
            added,
            engine,
        };
        let versions = Versions {
            base: BaseRecord::default(),
            deltas: vec![
                d(vec![], vec![], encode_created()),
                d(vec![a], vec![], encode_table_created(1, "t", &schema())),
                d(vec![b], vec![], encode_table_created(2, "u", &schema())),
                d(vec![c], vec![], encode_segment_added(1)),
                d(vec![spill], vec![], encode_spill_added()),
                d(vec![], vec![b], encode_table_dropped(2)),
            ],
        };
        let cat = decode(&versions).unwrap();
        assert_eq!(cat.next_id, 3);
        assert_eq!(cat.tables.len(), 1);
        assert_eq!(cat.tables[0].segments, vec![a, c]);
        assert_eq!(cat.spill, Some(spill));
        for (cat, extents) in [
            (cat.clone(), vec![a, c, spill]),
            (Catalog { spill: None, spill_paged: false, ..cat }, vec![a, c]),
        ] {
            let base = Versions {
                base: BaseRecord { extents: extents.clone(), engine: encode_base(&cat) },
                deltas: vec![],
            };
            assert_eq!(decode(&base).unwrap(), cat);
            let enc = encode_base(&cat);
            for cut in MAGIC.len()..enc.len() {
                let v = Versions {
                    base: BaseRecord { extents: extents.clone(), engine: enc[..cut].to_vec() },
                    deltas: vec![],
                };
                assert!(decode(&v).is_err(), "cut at {cut}");
            }
        }
    }

    #[test]
    fn the_undo_log_file_round_trips_through_deltas_and_bases() {
        let a = Extent::fast(1, 1);
        let file = |p: &str, ino| UndoFile { path: p.into(), file: FileId { ino, born: 7 } };
        let d = |added: Vec<Extent>, engine| DeltaRecord { removed: vec![], added, engine };
        let versions = |deltas| Versions { base: BaseRecord::default(), deltas };
        let bound = versions(vec![
            d(vec![], encode_created()),
            d(vec![a], encode_table_created(1, "t", &schema())),
            d(vec![], encode_undo_file_bound(&file("/dev/shm/x.pmem", 3))),
            d(vec![], encode_undo_file_bound(&file("undo.pmem", 4))),
        ]);
        let cat = decode(&bound).unwrap();
        assert_eq!(cat.undo_file, Some(file("undo.pmem", 4)));
        let mut unbound = bound.deltas.clone();
        unbound.push(d(vec![], encode_undo_file_unbound()));
        assert_eq!(decode(&versions(unbound)).unwrap().undo_file, None);
        let spill = Extent::fast(5, 2);
        let ring = Catalog { spill: Some(spill), ..cat.clone() };
        let paged = Catalog { spill_paged: true, ..ring.clone() };
        for (cat, extents) in [(cat, vec![a]), (ring, vec![a, spill]), (paged, vec![a, spill])] {
            let enc = encode_base(&cat);
            let base = |engine: Vec<u8>| Versions {
                base: BaseRecord { extents: extents.clone(), engine },
                deltas: vec![],
            };
            assert_eq!(decode(&base(enc.clone())).unwrap(), cat);
            for cut in MAGIC.len()..enc.len() {
                assert!(decode(&base(enc[..cut].to_vec())).is_err(), "cut at {cut}");
            }
        }
    }

    /// A spill area of the ring format (kinds 6, 5, 9) reads as such, kind 11 marks it
    /// rewritten in the page log format, and only once; kind 10 adds one in that format.
    #[test]
    fn the_spill_areas_format_is_named_by_the_catalog() {
        let spill = Extent::fast(5, 2);
        let d = |added: Vec<Extent>, engine| DeltaRecord { removed: vec![], added, engine };
        let versions = |deltas| Versions { base: BaseRecord::default(), deltas };
        let mut deltas = vec![d(vec![], encode_created()), d(vec![spill], prefix(SPILL_ADDED))];
        let cat = decode(&versions(deltas.clone())).unwrap();
        assert_eq!((cat.spill, cat.spill_paged), (Some(spill), false));
        let base = Versions {
            base: BaseRecord { extents: vec![spill], engine: encode_base(&cat) },
            deltas: vec![],
        };
        assert_eq!(encode_base(&cat)[MAGIC.len()], BASE_WITH_SPILL);
        assert_eq!(decode(&base).unwrap(), cat);
        deltas.push(d(vec![], encode_spill_paged()));
        let cat = decode(&versions(deltas.clone())).unwrap();
        assert_eq!((cat.spill, cat.spill_paged), (Some(spill), true));
        deltas.push(d(vec![], encode_spill_paged()));
        assert!(decode(&versions(deltas)).is_err(), "rewritten twice");
        let added = vec![d(vec![], encode_created()), d(vec![spill], encode_spill_added())];
        assert_eq!(decode(&versions(added)).unwrap(), cat);
        assert!(decode(&versions(vec![d(vec![], encode_spill_paged())])).is_err());
    }

    #[test]
    fn another_engines_payload_is_refused() {
        let versions = Versions {
            base: BaseRecord::default(),
            deltas: vec![DeltaRecord {
                removed: vec![],
                added: vec![],
                engine: b"SHHASH01\x01".to_vec(),
            }],
        };
        assert!(matches!(decode(&versions), Err(Error::NotTableStore(_))));
    }
}
