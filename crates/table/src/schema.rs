//! Schemas (named columns of fixed or bounded variable length; column 0 is the primary key)
//! and the encoding of a row against its schema.
//!
//! ```text
//! an encoded row: the columns in schema order, each
//!   Fixed(len):     len bytes
//!   Var(max_len):   length (u32 LE, at most max_len) | that many bytes
//! an encoded schema (in the catalog): columns (u16 LE) | per column:
//!   name length (u16 LE) | name (UTF-8) | type (u8: 0 fixed, 1 variable) | len (u32 LE)
//! ```
//! The encoding carries no checksum of its own: rows live in checksummed blocks, schemas in
//! the checksummed version log.

use crate::error::{Error, Result};

/// Longest encoded row a schema may allow: a row's before-image must fit in the undo log
/// next to others, and one row is read and written whole.
pub const ROW_BYTES_MAX: usize = 256 << 10;
/// Most columns in a schema.
pub const COLUMNS_MAX: usize = 1024;
/// Longest table or column name, in bytes.
pub const NAME_BYTES_MAX: usize = 255;

/// A column's type: its length rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnType {
    /// Exactly this many bytes.
    Fixed(u32),
    /// Up to this many bytes.
    Var(u32),
}

/// A named column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    /// Its name, unique in the schema.
    pub name: String,
    /// Its type.
    pub ty: ColumnType,
}

impl Column {
    /// A column of exactly `len` bytes.
    pub fn fixed(name: &str, len: u32) -> Column {
        Column { name: name.to_string(), ty: ColumnType::Fixed(len) }
    }

    /// A column of up to `max_len` bytes.
    pub fn var(name: &str, max_len: u32) -> Column {
        Column { name: name.to_string(), ty: ColumnType::Var(max_len) }
    }

    fn encoded_max(&self) -> usize {
        match self.ty {
            ColumnType::Fixed(n) => n as usize,
            ColumnType::Var(n) => 4 + n as usize,
        }
    }

    /// Checks `value` against the column's type.
    fn check(&self, value: &[u8]) -> Result<()> {
        let ok = match self.ty {
            ColumnType::Fixed(n) => value.len() == n as usize,
            ColumnType::Var(n) => value.len() <= n as usize,
        };
        if ok {
            Ok(())
        } else {
            let expected = match self.ty {
                ColumnType::Fixed(n) | ColumnType::Var(n) => n as usize,
            };
            Err(Error::WrongSize { column: self.name.clone(), expected, got: value.len() })
        }
    }
}

/// A table's columns; column 0 is the primary key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schema {
    columns: Vec<Column>,
}

/// A row as the API passes it: one value per column, in schema order.
pub type Row = Vec<Vec<u8>>;

impl Schema {
    /// A schema of `columns`, the first being the primary key.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for no columns, more than [`COLUMNS_MAX`], an empty,
    /// over-long or repeated name, or rows that could encode to more than
    /// [`ROW_BYTES_MAX`] bytes.
    pub fn new(columns: Vec<Column>) -> Result<Schema> {
        if columns.is_empty() || columns.len() > COLUMNS_MAX {
            return Err(Error::InvalidArgument(format!(
                "a schema has 1 to {COLUMNS_MAX} columns, not {}",
                columns.len()
            )));
        }
        for (i, c) in columns.iter().enumerate() {
            if c.name.is_empty() || c.name.len() > NAME_BYTES_MAX {
                return Err(Error::InvalidArgument(format!(
                    "column name {:?}: names are 1 to {NAME_BYTES_MAX} bytes",
                    c.name
                )));
            }
            if columns[..i].iter().any(|o| o.name == c.name) {
                return Err(Error::InvalidArgument(format!("column {:?} named twice", c.name)));
            }
        }
        let max: usize = columns.iter().map(Column::encoded_max).sum();
        if max > ROW_BYTES_MAX {
            return Err(Error::InvalidArgument(format!(
                "rows of this schema may encode to {max} bytes; at most {ROW_BYTES_MAX}"
            )));
        }
        Ok(Schema { columns })
    }

    /// The columns, key first.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// The index of the column named `name`.
    ///
    /// # Errors
    /// [`Error::NoSuchColumn`].
    pub fn column_index(&self, name: &str) -> Result<usize> {
        self.columns
            .iter()
            .position(|c| c.name == name)
            .ok_or_else(|| Error::NoSuchColumn(name.to_string()))
    }

    /// Checks a primary key against column 0.
    ///
    /// # Errors
    /// [`Error::WrongSize`].
    pub fn check_key(&self, key: &[u8]) -> Result<()> {
        self.columns[0].check(key)
    }

    /// Checks a value against column `index`.
    ///
    /// # Errors
    /// [`Error::WrongSize`].
    pub fn check_value(&self, index: usize, value: &[u8]) -> Result<()> {
        self.columns[index].check(value)
    }

    /// Encodes `row` after checking it against the schema.
    ///
    /// # Errors
    /// [`Error::WrongSize`] for a row of the wrong column count or a value of the wrong size.
    pub fn encode_row<V: AsRef<[u8]>>(&self, row: &[V]) -> Result<Vec<u8>> {
        if row.len() != self.columns.len() {
            return Err(Error::WrongSize {
                column: "(row)".into(),
                expected: self.columns.len(),
                got: row.len(),
            });
        }
        let mut out = Vec::new();
        for (c, v) in self.columns.iter().zip(row) {
            let v = v.as_ref();
            c.check(v)?;
            if let ColumnType::Var(_) = c.ty {
                out.extend_from_slice(&(v.len() as u32).to_le_bytes());
            }
            out.extend_from_slice(v);
        }
        Ok(out)
    }

    /// Decodes an encoded row, or `None` when the bytes do not follow the schema (the caller
    /// names the damage).
    pub fn decode_row(&self, mut b: &[u8]) -> Option<Row> {
        let mut row = Vec::with_capacity(self.columns.len());
        for c in &self.columns {
            let len = match c.ty {
                ColumnType::Fixed(n) => n as usize,
                ColumnType::Var(max) => {
                    let n = u32::from_le_bytes(b.get(..4)?.try_into().ok()?);
                    if n > max {
                        return None;
                    }
                    b = &b[4..];
                    n as usize
                }
            };
            row.push(b.get(..len)?.to_vec());
            b = &b[len..];
        }
        b.is_empty().then_some(row)
    }

    /// The length of every primary key, when the key column is fixed.
    pub fn fixed_key_len(&self) -> Option<usize> {
        match self.columns[0].ty {
            ColumnType::Fixed(n) => Some(n as usize),
            ColumnType::Var(_) => None,
        }
    }

    /// The primary key of an encoded row, without decoding the rest.
    pub fn key_of<'a>(&self, b: &'a [u8]) -> Option<&'a [u8]> {
        match self.columns[0].ty {
            ColumnType::Fixed(n) => b.get(..n as usize),
            ColumnType::Var(max) => {
                let n = u32::from_le_bytes(b.get(..4)?.try_into().ok()?);
                if n > max {
                    return None;
                }
                b.get(4..4 + n as usize)
            }
        }
    }

    /// Encodes the schema for the catalog.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.columns.len() as u16).to_le_bytes());
        for c in &self.columns {
            out.extend_from_slice(&(c.name.len() as u16).to_le_bytes());
            out.extend_from_slice(c.name.as_bytes());
            let (ty, n) = match c.ty {
                ColumnType::Fixed(n) => (0u8, n),
                ColumnType::Var(n) => (1u8, n),
            };
            out.push(ty);
            out.extend_from_slice(&n.to_le_bytes());
        }
    }

    /// Decodes a schema from the front of `b`, returning it and the bytes after it, or
    /// `None` when the bytes are not a valid schema.
    pub fn decode(b: &[u8]) -> Option<(Schema, &[u8])> {
        let n = u16::from_le_bytes(b.get(..2)?.try_into().ok()?) as usize;
        let mut b = &b[2..];
        let mut columns = Vec::with_capacity(n.min(COLUMNS_MAX));
        for _ in 0..n {
            let len = u16::from_le_bytes(b.get(..2)?.try_into().ok()?) as usize;
            let name = std::str::from_utf8(b.get(2..2 + len)?).ok()?.to_string();
            b = &b[2 + len..];
            let ty = *b.first()?;
            let n = u32::from_le_bytes(b.get(1..5)?.try_into().ok()?);
            b = &b[5..];
            let ty = match ty {
                0 => ColumnType::Fixed(n),
                1 => ColumnType::Var(n),
                _ => return None,
            };
            columns.push(Column { name, ty });
        }
        Some((Schema::new(columns).ok()?, b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Schema {
        Schema::new(vec![Column::fixed("id", 8), Column::var("name", 20), Column::fixed("n", 2)])
            .unwrap()
    }

    #[test]
    fn rows_round_trip_and_every_truncation_fails() {
        let s = schema();
        let row: Row = vec![b"12345678".to_vec(), b"ada".to_vec(), b"xy".to_vec()];
        let enc = s.encode_row(&row).unwrap();
        assert_eq!(enc.len(), 8 + 4 + 3 + 2);
        assert_eq!(s.decode_row(&enc), Some(row));
        assert_eq!(s.key_of(&enc), Some(&b"12345678"[..]));
        for cut in 0..enc.len() {
            assert_eq!(s.decode_row(&enc[..cut]), None, "cut at {cut}");
        }
        let mut long = enc.clone();
        long.push(0);
        assert_eq!(s.decode_row(&long), None);
    }

    #[test]
    fn schemas_round_trip() {
        let s = schema();
        let mut b = Vec::new();
        s.encode(&mut b);
        b.push(7);
        let (back, rest) = Schema::decode(&b).unwrap();
        assert_eq!(back, s);
        assert_eq!(rest, &[7]);
        for cut in 0..b.len() - 1 {
            assert!(Schema::decode(&b[..cut]).is_none(), "cut at {cut}");
        }
    }
}
