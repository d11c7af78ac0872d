//! Index checkpoints: the index, the segment table and the per-segment counts written to an
//! extent of the volume and named by the version log, so that an open reads the checkpoint
//! and only the log written after it instead of every segment.
//!
//! A checkpoint is written as records in shared log pages (`shale_space::log_page`) coloured
//! with the checkpoint's own generation, from page 0 of its extent, with one durable write; the
//! version log names it only after that (kind 3 in `meta.rs`), so every page up to its end
//! record must be valid: anything else is damage.
//!
//! ```text
//! records, in order (integers little-endian):
//! header:  b"SHCKPT01" | max_seq u64 | segments n u32
//!          | n x (table slot u32, generation u64, pages checkpointed u32, records u64, live u64)
//! entries: kind u8 = 1 | count u32 | count x (digest u64, packed location u64)
//! keyed:   kind u8 = 2 | count u32 | count x (key length u8, key, packed location u64)
//! bounded: kind u8 = 4 | table generation u64 | buckets u32 | table entries u64
//!          (only in a bounded store's checkpoint, whose digest entries are in the
//!          table's pages, so it has no kind 1 record)
//! end:     kind u8 = 3 | digest entries u64 | keyed entries u64
//! ```
//! Locations name segments by their table slot at checkpoint time; the header maps each slot
//! to its segment's generation, which is what an open matches them by.

use shale_space::codec::Reader;
use std::ops::ControlFlow;

use shale_space::page_log::{self, PageCursor, ScanError};

use crate::index::Location;
use crate::shard::Usage;

const MAGIC: &[u8; 8] = b"SHCKPT01";
const ENTRIES: u8 = 1;
const KEYED: u8 = 2;
const END: u8 = 3;
const BOUNDED: u8 = 4;
/// Entries per record: records stay well under a megabyte.
const ENTRIES_PER_RECORD: usize = 32 << 10;

/// A segment as the checkpoint saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SegmentAt {
    pub slot: u32,
    pub generation: u64,
    /// Pages of its log the checkpoint covers.
    pub pages: u32,
    pub usage: Usage,
}

/// A bounded store's table as its checkpoint saw it (the extent is in the version log).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BoundedAt {
    pub table_generation: u64,
    pub buckets: u32,
    pub entries: u64,
}

/// A decoded checkpoint.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Checkpoint {
    pub max_seq: u64,
    pub segments: Vec<SegmentAt>,
    pub entries: Vec<(u64, u64)>,
    pub keyed: Vec<(Vec<u8>, u64)>,
    pub bounded: Option<BoundedAt>,
}

impl Checkpoint {
    /// The checkpoint's records.
    pub fn records(&self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut h = MAGIC.to_vec();
        h.extend_from_slice(&self.max_seq.to_le_bytes());
        h.extend_from_slice(&(self.segments.len() as u32).to_le_bytes());
        for s in &self.segments {
            h.extend_from_slice(&s.slot.to_le_bytes());
            h.extend_from_slice(&s.generation.to_le_bytes());
            h.extend_from_slice(&s.pages.to_le_bytes());
            h.extend_from_slice(&s.usage.records.to_le_bytes());
            h.extend_from_slice(&s.usage.live.to_le_bytes());
        }
        out.push(h);
        for chunk in self.entries.chunks(ENTRIES_PER_RECORD) {
            let mut r = vec![ENTRIES];
            r.extend_from_slice(&(chunk.len() as u32).to_le_bytes());
            for (d, loc) in chunk {
                r.extend_from_slice(&d.to_le_bytes());
                r.extend_from_slice(&loc.to_le_bytes());
            }
            out.push(r);
        }
        for chunk in self.keyed.chunks(ENTRIES_PER_RECORD) {
            let mut r = vec![KEYED];
            r.extend_from_slice(&(chunk.len() as u32).to_le_bytes());
            for (key, loc) in chunk {
                r.push(key.len() as u8);
                r.extend_from_slice(key);
                r.extend_from_slice(&loc.to_le_bytes());
            }
            out.push(r);
        }
        if let Some(b) = self.bounded {
            let mut r = vec![BOUNDED];
            r.extend_from_slice(&b.table_generation.to_le_bytes());
            r.extend_from_slice(&b.buckets.to_le_bytes());
            r.extend_from_slice(&b.entries.to_le_bytes());
            out.push(r);
        }
        let mut end = vec![END];
        end.extend_from_slice(&(self.entries.len() as u64).to_le_bytes());
        end.extend_from_slice(&(self.keyed.len() as u64).to_le_bytes());
        out.push(end);
        out
    }

    /// The page image of the checkpoint, coloured with `generation`.
    pub fn image(&self, generation: u64) -> Vec<u8> {
        let mut image = Vec::new();
        let mut cursor = PageCursor::new(generation, 0, 0);
        // Written with one durable write: no page is durable before another.
        for rec in self.records() {
            cursor.add(&rec, 0, |page| image.extend_from_slice(page));
        }
        cursor.close(0, |page| image.extend_from_slice(page));
        image
    }

    /// Decodes the checkpoint of `generation` from its pages.
    ///
    /// # Errors
    /// What is wrong, for a Corruption error: the version log names the checkpoint only once
    /// it was durable, so any invalid page before its end record is damage.
    pub fn decode(image: &[u8], generation: u64) -> std::result::Result<Checkpoint, String> {
        let mut records = Vec::new();
        let mut ended = false;
        let scanned = page_log::scan::scan(&mut &image[..], generation, None, |r| {
            ended = r.bytes.first() == Some(&END);
            records.push(r.bytes);
            if ended { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
        });
        match scanned {
            Ok(_) if ended => Checkpoint::from_records(&records),
            Ok(end) => Err(format!("checkpoint ends at page {} before its end record", end.pages)),
            Err(ScanError::Source(never)) => match never {},
            Err(ScanError::OutOfOrder { page, kind }) => {
                Err(format!("checkpoint page {page}: fragment {kind:?} out of order"))
            }
            Err(ScanError::DurableInvalid { page, why }) => {
                Err(format!("checkpoint page {page}: {why}"))
            }
        }
    }

    fn from_records(records: &[Vec<u8>]) -> std::result::Result<Checkpoint, String> {
        let mut ck = Checkpoint::default();
        let header = records.first().ok_or("no header")?;
        let mut r =
            Reader::new(header.strip_prefix(MAGIC.as_slice()).ok_or("no checkpoint magic")?);
        ck.max_seq = r.u64().ok_or(SHORT)?;
        let n = r.u32().ok_or(SHORT)? as usize;
        for _ in 0..n {
            let slot = r.u32().ok_or(SHORT)?;
            let generation = r.u64().ok_or(SHORT)?;
            let pages = r.u32().ok_or(SHORT)?;
            let usage = Usage { records: r.u64().ok_or(SHORT)?, live: r.u64().ok_or(SHORT)? };
            ck.segments.push(SegmentAt { slot, generation, pages, usage });
        }
        done(&r)?;
        for rec in &records[1..] {
            let Some((&kind, body)) = rec.split_first() else {
                return Err("an empty record".into());
            };
            let mut r = Reader::new(body);
            match kind {
                BOUNDED if ck.bounded.is_none() => {
                    ck.bounded = Some(BoundedAt {
                        table_generation: r.u64().ok_or(SHORT)?,
                        buckets: r.u32().ok_or(SHORT)?,
                        entries: r.u64().ok_or(SHORT)?,
                    });
                }
                ENTRIES => {
                    for _ in 0..r.u32().ok_or(SHORT)? {
                        ck.entries.push((r.u64().ok_or(SHORT)?, r.u64().ok_or(SHORT)?));
                    }
                }
                KEYED => {
                    for _ in 0..r.u32().ok_or(SHORT)? {
                        let len = r.u8().ok_or(SHORT)? as usize;
                        let key = r.take(len).ok_or(SHORT)?.to_vec();
                        ck.keyed.push((key, r.u64().ok_or(SHORT)?));
                    }
                }
                END => {
                    if r.u64().ok_or(SHORT)? != ck.entries.len() as u64
                        || r.u64().ok_or(SHORT)? != ck.keyed.len() as u64
                    {
                        return Err("entry counts differ from the end record's".into());
                    }
                }
                k => return Err(format!("record kind {k}")),
            }
            done(&r)?;
        }
        for loc in ck.entries.iter().map(|(_, l)| l).chain(ck.keyed.iter().map(|(_, l)| l)) {
            let l = Location::unpack(*loc);
            if !ck.segments.iter().any(|s| s.slot == l.segment) || l.pages == 0 {
                return Err(format!("an entry names segment slot {} the header lacks", l.segment));
            }
        }
        Ok(ck)
    }
}

/// What a record too short for its fields is called.
const SHORT: &str = "record too short";

fn done(r: &Reader<'_>) -> std::result::Result<(), String> {
    if r.is_empty() { Ok(()) } else { Err("trailing bytes in a record".into()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shale_space::log_page::PAGE_BYTES;

    fn sample(n: usize) -> Checkpoint {
        let loc = |i: usize| {
            Location { segment: (i % 3) as u32, page: i as u32 % 100, offset: 28, pages: 1 }.pack()
        };
        Checkpoint {
            max_seq: 77,
            segments: (0..3)
                .map(|s| SegmentAt {
                    slot: s,
                    generation: u64::from(s) + 10,
                    pages: 5,
                    usage: Usage { records: 9, live: 4 },
                })
                .collect(),
            entries: (0..n).map(|i| (i as u64 * 7919, loc(i))).collect(),
            keyed: vec![(b"collided".to_vec(), loc(1)), (vec![9; 255], loc(2))],
            bounded: Some(BoundedAt { table_generation: 4, buckets: 1024, entries: 99 }),
        }
    }

    #[test]
    fn round_trip_across_many_pages() {
        let ck = sample(100_000);
        let image = ck.image(5);
        assert!(image.len() > 100 * PAGE_BYTES);
        assert_eq!(Checkpoint::decode(&image, 5).unwrap(), ck);
        assert!(Checkpoint::decode(&image, 6).is_err(), "another generation's pages");
    }

    #[test]
    fn a_flipped_byte_or_a_missing_end_is_refused() {
        let ck = sample(2_000);
        let image = ck.image(5);
        for at in (0..image.len()).step_by(997) {
            let mut bad = image.clone();
            bad[at] ^= 0x10;
            assert!(Checkpoint::decode(&bad, 5).is_err(), "flip at {at} accepted");
        }
        let short = &image[..image.len() - PAGE_BYTES];
        assert!(Checkpoint::decode(short, 5).is_err());
    }
}
