//! Checks of the table engine's decoders (`shale-table`): its blocks (with the row record
//! headers in them) and its undo records. Bad bytes give an error, never a panic or a hang.
//! Shared by the cargo-fuzz targets `table_block` and `table_undo_record` and by
//! `crates/table/tests/fuzz_regressions.rs`, which replays `fuzz/regressions/table_*` on
//! stable Rust. It may use only the public API of `shale_table` (its hidden `fuzz` module
//! included).

use shale_table::undo::{ACTIVE, EXPIRED, UndoRecord};

const TABLE: u32 = 7;
const NUMBER: u64 = 3;

/// `data` as a block: a flags byte (bit 0: recompute the checksum so the field checks
/// behind it are reached), then the block's bytes, checked as block 3 of table 7. A block
/// that passes has its occupancy within the payload and every row header it shows inside
/// it.
pub fn table_block(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else { return };
    let mut b = rest.to_vec();
    if flags & 1 != 0 {
        shale_table::fuzz::reseal_block(&mut b);
    }
    if let Ok(Some(checked)) = shale_table::fuzz::check_block(&b, TABLE, NUMBER) {
        assert!(checked.used <= shale_table::PAYLOAD_BYTES);
        for (at, _, slot, row) in checked.rows {
            assert!(at < checked.used, "a row header past the occupancy");
            assert!(row <= slot, "a row longer than its slot");
        }
    }
}

/// `data` as an undo record: a flags byte (bit 0: recompute the checksum), then the
/// record's bytes. A record that decodes has a state that is active or expired, and
/// re-encodes to itself.
pub fn table_undo_record(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else { return };
    let mut b = rest.to_vec();
    if flags & 1 != 0 {
        shale_table::fuzz::reseal_undo_record(&mut b);
    }
    let _ = UndoRecord::peek_len(&b);
    if let Ok((rec, state)) = UndoRecord::decode(&b) {
        assert!(state == ACTIVE || state == EXPIRED);
        let mut again = rec.encode();
        again[4] = state;
        assert_eq!(UndoRecord::decode(&again), Ok((rec.clone(), state)));
        let len = UndoRecord::peek_len(&b).expect("a decoded record has a length");
        assert_eq!(&again[..len], &b[..len], "a decoded record re-encodes to its bytes");
    }
}

/// The seed inputs of both targets.
pub fn seeds() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    use shale_table::Pos;
    use shale_table::undo::Before;
    let flagged = |flags: u8, bytes: &[u8]| {
        let mut b = vec![flags];
        b.extend_from_slice(bytes);
        b
    };
    let block = shale_table::fuzz::sample_block(TABLE, NUMBER);
    let record = |before: Before| {
        UndoRecord { lsn: 9, txn: 4, table: TABLE, pos: Pos { block: 3, offset: 100 }, before }
            .encode()
    };
    vec![
        ("table_block", "valid", flagged(0, &block)),
        ("table_block", "resealed", flagged(1, &block)),
        ("table_block", "blank", flagged(0, &vec![0; shale_table::BLOCK_BYTES])),
        ("table_undo_record", "image", flagged(0, &record(Before::Image(b"row bytes".to_vec())))),
        ("table_undo_record", "insert", flagged(1, &record(Before::Free { span: 40 }))),
        ("table_undo_record", "commit", flagged(0, &record(Before::Commit))),
    ]
}
