//! Checkpoints of the table engine (`TableStore::checkpoint`): a copy taken while
//! transactions go on holds the committed state after a prefix of each writer's commits,
//! with no part of any other transaction, in every table, with the tables' schemas; a
//! destination that holds anything is refused untouched.

mod common;

use std::sync::Arc;
use std::time::Duration;

use shale_table::{Column, Error, Isolation, Schema, TableOptions, TableStore};
use shale_testkit::prefix_writers::{self, Plan, Writers, check_copy};

/// The tables' options: longer lock waits than the other scenarios', so that writers seldom
/// give up on a lock the checkpoint holds (one that does retries its transaction).
fn options() -> TableOptions {
    TableOptions { lock_timeout: Duration::from_secs(5), ..common::small_options() }
}

fn kv_schema() -> Schema {
    Schema::new(vec![Column::var("key", 32), Column::var("value", 64)]).unwrap()
}

/// Filler rows of each of the writers' tables.
const FILLER_ROWS: u64 = 600;

/// Filler key `i`: a writer's key with a suffix (see [`FILLER_ROWS`]).
fn filler_key(i: u64) -> Vec<u8> {
    let mut key = prefix_writers::key((i % 3) as usize, ((i / 3) % 20) as usize);
    key.extend_from_slice(format!("/{i:04}").as_bytes());
    key
}

fn filler_value(i: u64) -> Vec<u8> {
    common::text(&filler_key(i), 0, (i % 64) as usize)
}

#[test]
fn a_checkpoint_taken_while_transactions_go_on_holds_only_whole_commits() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(TableStore::open(dir.path().join("live"), options()).unwrap());
    // Two tables: every writer transaction writes both, so a copy that takes one table's
    // state before a commit and the other's after is seen.
    let (a, b) = (
        store.create_table("a", kv_schema()).unwrap(),
        store.create_table("b", kv_schema()).unwrap(),
    );
    // Filler rows in both tables, with keys that sort among the writers' keys: a copy reads
    // each writer's rows over the whole span of its scan, not in one batch.
    for i in 0..FILLER_ROWS {
        for t in [a, b] {
            store.insert(t, &[filler_key(i), filler_value(i)]).unwrap();
        }
    }
    let filler = store.create_table("filler", common::schema()).unwrap();
    for i in 0..600u64 {
        let k = common::key(i);
        let text = common::text(&k, 1, (i as usize * 37) % 3000);
        store.insert(filler, &common::row(&k, &text, i)).unwrap();
    }
    let plan = Plan { writers: 3, keys_per_writer: 20, group: 2 };
    let writer_store = store.clone();
    let writers = Writers::start(plan, move |_, group| {
        let mut txn = writer_store.begin(Isolation::ReadCommitted);
        let applied = group.iter().try_for_each(|(k, v)| {
            for t in [a, b] {
                match txn.update(t, k, "value", v) {
                    Err(Error::KeyNotFound) => txn.insert(t, &[k.as_slice(), v.as_slice()])?,
                    other => other?,
                }
            }
            Ok(())
        });
        match applied.and_then(|()| txn.commit()) {
            Ok(()) => true,
            // The checkpoint held a table past the wait: the transaction is tried again.
            Err(Error::LockTimeout) => false,
            Err(e) => panic!("writer: {e}"),
        }
    });
    writers.wait_for_acked(40);
    let before = writers.acked();
    let dst = dir.path().join("copy");
    let copied = store.checkpoint(&dst).unwrap();
    let after = writers.started();
    writers.wait_for_acked(after.iter().copied().max().unwrap() + 10);
    writers.stop();

    let copy = TableStore::open(&dst, options()).unwrap();
    let (ca, cb) = (copy.table_id("a").unwrap(), copy.table_id("b").unwrap());
    let prefixes_a =
        check_copy(plan, &before, &after, |k| copy.select_cell(ca, k, "value").unwrap());
    let prefixes_b =
        check_copy(plan, &before, &after, |k| copy.select_cell(cb, k, "value").unwrap());
    assert_eq!(prefixes_a, prefixes_b, "both tables hold the same commits");
    assert_eq!(copy.schema(ca).unwrap(), kv_schema());
    let cf = copy.table_id("filler").unwrap();
    assert_eq!(copy.schema(cf).unwrap(), common::schema());
    for i in 0..600u64 {
        let k = common::key(i);
        let text = common::text(&k, 1, (i as usize * 37) % 3000);
        assert_eq!(copy.select(cf, &k).unwrap(), Some(common::row(&k, &text, i)));
    }
    for i in 0..FILLER_ROWS {
        for t in [ca, cb] {
            assert_eq!(
                copy.select_cell(t, &filler_key(i), "value").unwrap(),
                Some(filler_value(i))
            );
        }
    }
    let writer_rows: u64 = prefixes_a.iter().map(|&p| p.min(plan.keys_per_writer as u64)).sum();
    assert_eq!(copied, 600 + 2 * (FILLER_ROWS + writer_rows), "rows copied");
    assert_eq!(copy.stats().rows as u64, copied, "and nothing else");
}

#[test]
fn a_destination_that_holds_anything_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let store = TableStore::open(dir.path().join("live"), options()).unwrap();
    let t = store.create_table("t", kv_schema()).unwrap();
    store.insert(t, &[&b"key-000001"[..], b"v"]).unwrap();

    let full = dir.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("theirs"), b"keep me").unwrap();
    assert!(store.checkpoint(&full).is_err());
    assert_eq!(std::fs::read(full.join("theirs")).unwrap(), b"keep me");
    assert_eq!(std::fs::read_dir(&full).unwrap().count(), 1);

    let file = dir.path().join("file");
    std::fs::write(&file, b"a file").unwrap();
    assert!(store.checkpoint(&file).is_err());
    assert_eq!(std::fs::read(&file).unwrap(), b"a file");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3, "no staging directory left");

    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert_eq!(store.checkpoint(&empty).unwrap(), 1);
    let copy = TableStore::open(&empty, options()).unwrap();
    let t = copy.table_id("t").unwrap();
    assert_eq!(copy.select_cell(t, b"key-000001", "value").unwrap(), Some(b"v".to_vec()));
}

/// Writers are not held up by the copy: once the instant is taken, transactions commit
/// while the checkpoint copies (here, from its progress callback, between the copy of one
/// table and the next, on the store's own lock timeout of 200 ms, which a writer waiting
/// for the copy would run out of), and the copy still holds the rows as they were at the
/// instant: an update, an erase and an insert into the table not yet copied, and an update
/// of the one already copied, all absent from it. A table cannot be dropped meanwhile.
#[test]
fn writers_commit_while_the_copy_runs_and_the_copy_keeps_the_instant() {
    let dir = tempfile::tempdir().unwrap();
    let store = TableStore::open(dir.path().join("live"), common::small_options()).unwrap();
    let (a, b) = (
        store.create_table("a", kv_schema()).unwrap(),
        store.create_table("b", kv_schema()).unwrap(),
    );
    // More rows than a scan batch, so the copy of each table takes several batches.
    let rows = 250u64;
    for i in 0..rows {
        for t in [a, b] {
            store.insert(t, &[filler_key(i), filler_value(i)]).unwrap();
        }
    }
    let mut calls = 0;
    let mut during = |copied: u64| {
        calls += 1;
        if calls != 1 {
            return;
        }
        // Table "a" (the lower id) is copied, "b" not yet.
        assert_eq!(copied, rows);
        let mut txn = store.begin(Isolation::ReadCommitted);
        txn.update(b, &filler_key(7), "value", b"changed after").unwrap();
        txn.erase(b, &filler_key(8)).unwrap();
        txn.insert(b, &[&b"new after the instant"[..], b"x"]).unwrap();
        txn.update(b, &filler_key(rows - 1), "value", b"changed after").unwrap();
        txn.update(a, &filler_key(9), "value", b"changed after").unwrap();
        txn.commit().expect("a writer commits while the copy runs");
        assert!(matches!(store.drop_table("b"), Err(Error::LockTimeout)), "dropped under the copy");
    };
    let copied = store.checkpoint_with(&dir.path().join("copy"), &mut during).unwrap();
    assert_eq!(calls, 2, "a call after each table");
    assert_eq!(copied, 2 * rows);

    let copy = TableStore::open(dir.path().join("copy"), common::small_options()).unwrap();
    for name in ["a", "b"] {
        let t = copy.table_id(name).unwrap();
        for i in 0..rows {
            let got = copy.select_cell(t, &filler_key(i), "value").unwrap();
            assert_eq!(got, Some(filler_value(i)), "table {name}, row {i}");
        }
        assert_eq!(copy.select(t, b"new after the instant").unwrap(), None);
    }
    // The live store has every change.
    assert_eq!(store.select_cell(b, &filler_key(8), "value").unwrap(), None);
    let changed = store.select_cell(a, &filler_key(9), "value").unwrap();
    assert_eq!(changed.as_deref(), Some(&b"changed after"[..]));
}
