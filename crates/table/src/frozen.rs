//! The committed state a running checkpoint copies, kept while writers go on.
//!
//! The engine changes rows in place and keeps only undo records, which are physical and
//! reclaimed at commit (LATTE): there is no older version of a row to read once a writer
//! has changed it. So a checkpoint (`checkpoint.rs`) keeps the older versions it still
//! needs itself, copy-before-write, at row level:
//!
//! - At the checkpoint's instant no transaction has an uncommitted change (the checkpoint
//!   held every table's shared lock then), and [`Frozen`] is installed in the storage,
//!   under its mutex, with every table's copy at its start.
//! - From then on, a change to a row (insert, update, erase: `Storage`'s public changes)
//!   first asks [`Frozen::needs`]: when the row's table is in the checkpoint, its copy has
//!   not gone past the key, and the row has no image yet, its image as it is now (the
//!   committed state at the instant: every earlier change since then would have left one)
//!   is kept, `None` for a row that did not exist.
//! - The checkpoint reads each batch of keys under the same mutex, taking a row's image
//!   where there is one and the row as it is otherwise (then unchanged since the instant),
//!   adds the images of rows erased since (keys in the batch's span that the index no
//!   longer has), and moves its copy past the batch's last key, so that later changes
//!   there keep nothing.
//!
//! Memory: one image per row changed ahead of the copy while it runs, released as the copy
//! passes it; a checkpoint under a heavy write load holds up to the rows written during it.
//! Rollbacks (aborts) write before-images back without asking: a transaction that began
//! after the instant rolls back to states whose instant image is kept already.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

use crate::schema::Row;

/// How far a table's copy has gone.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Copied {
    /// Nothing copied yet.
    Nothing,
    /// Every key up to and including this one.
    Through(Vec<u8>),
    /// The whole table.
    All,
}

impl Copied {
    fn covers(&self, key: &[u8]) -> bool {
        match self {
            Copied::Nothing => false,
            Copied::Through(last) => key <= last.as_slice(),
            Copied::All => true,
        }
    }
}

/// The state of a running checkpoint: see the module comment.
#[derive(Debug)]
pub(crate) struct Frozen {
    copied: HashMap<u32, Copied>,
    /// The rows' images at the instant, per table, by key: `None` for a row that did not
    /// exist then.
    images: HashMap<u32, BTreeMap<Vec<u8>, Option<Row>>>,
    /// Images kept since the instant (the gauge of what it costs).
    pub kept: u64,
}

impl Frozen {
    /// A checkpoint of `tables`, none copied yet.
    pub fn new(tables: impl IntoIterator<Item = u32>) -> Frozen {
        let copied: HashMap<u32, Copied> =
            tables.into_iter().map(|t| (t, Copied::Nothing)).collect();
        let images = copied.keys().map(|&t| (t, BTreeMap::new())).collect();
        Frozen { copied, images, kept: 0 }
    }

    /// Whether the row of `key` in `table`, about to change, must leave its image first.
    pub fn needs(&self, table: u32, key: &[u8]) -> bool {
        match self.copied.get(&table) {
            Some(c) => !c.covers(key) && !self.images[&table].contains_key(key),
            None => false,
        }
    }

    /// Keeps `image` as the instant's row of `key` in `table` (after [`Frozen::needs`]).
    pub fn keep(&mut self, table: u32, key: &[u8], image: Option<Row>) {
        self.images.get_mut(&table).expect("a table in the checkpoint").insert(key.to_vec(), image);
        self.kept += 1;
    }

    /// The rows at the instant of a batch the checkpoint read from `table`: `rows`, each
    /// with its key, in key order, as the index and the blocks have them now, read under
    /// the storage's mutex in the same hold as this call; `through` the span they cover
    /// (the batch's last key, or `None` for the rest of the table). Each row with an image
    /// gives way to it, the images of rows erased since in that span are added, and the
    /// copy moves past the span. The result is in no particular order.
    pub fn settle(
        &mut self,
        table: u32,
        rows: Vec<(Vec<u8>, Row)>,
        through: Option<Vec<u8>>,
    ) -> Vec<Row> {
        let images = self.images.get_mut(&table).expect("a table in the checkpoint");
        let mut out = Vec::with_capacity(rows.len());
        for (key, row) in rows {
            match images.remove(&key) {
                Some(Some(image)) => out.push(image),
                // Inserted since the instant.
                Some(None) => {}
                None => out.push(row),
            }
        }
        // What is left in the span: rows erased since the instant (or inserted and erased).
        let upper = match &through {
            Some(last) => Bound::Included(last.clone()),
            None => Bound::Unbounded,
        };
        let erased: Vec<Vec<u8>> =
            images.range::<Vec<u8>, _>((Bound::Unbounded, upper)).map(|(k, _)| k.clone()).collect();
        for key in erased {
            if let Some(Some(image)) = images.remove(&key) {
                out.push(image);
            }
        }
        self.copied.insert(table, through.map_or(Copied::All, Copied::Through));
        out
    }

    /// Images kept now and not yet copied.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.images.values().map(BTreeMap::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(v: &str) -> Row {
        vec![v.as_bytes().to_vec()]
    }

    fn k(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }

    #[test]
    fn changes_ahead_of_the_copy_keep_the_instants_rows_and_behind_it_nothing() {
        let mut f = Frozen::new([1, 2]);
        // Table 3 came after the instant: nothing of it is kept.
        assert!(!f.needs(3, b"a"));
        // "b" updated, "d" erased, "e" inserted, all before the copy reached them.
        for (key, image) in [("b", Some(row("b0"))), ("d", Some(row("d0"))), ("e", None)] {
            assert!(f.needs(1, key.as_bytes()));
            f.keep(1, key.as_bytes(), image);
            assert!(!f.needs(1, key.as_bytes()), "one image per row: the first change's");
        }
        // The copy reads "a".."c" as they are now: "b" gives way to its image.
        let got = f.settle(1, vec![(k("a"), row("a0")), (k("b"), row("b1"))], Some(k("c")));
        assert_eq!(got, vec![row("a0"), row("b0")]);
        assert!(!f.needs(1, b"b") && !f.needs(1, b"c"), "behind the copy");
        assert!(f.needs(1, b"z"), "ahead of it");
        // The rest: "d" is gone from the index (its image is copied), "e" is new (skipped).
        let mut got = f.settle(1, vec![(k("e"), row("e1")), (k("f"), row("f0"))], None);
        got.sort();
        assert_eq!(got, vec![row("d0"), row("f0")]);
        assert!(!f.needs(1, b"zz"), "the whole table is copied");
        assert_eq!(f.held(), 0, "every image was released as the copy passed it");
        assert_eq!(f.kept, 3);
        // The other table is untouched by the first's copy.
        assert!(f.needs(2, b"a"));
    }
}
