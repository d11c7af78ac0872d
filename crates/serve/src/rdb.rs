//! Redis's RDB snapshot format, for replication (issue #46): a master's full resync sends its
//! keys as an RDB file before the command stream, and a replica loads one. This module writes
//! the string keys shale serve keeps, with their expiries, and reads a snapshot from a Redis 7
//! master: its string keys whole, every key of another type reported by name and type and
//! skipped (never silently dropped), and anything it cannot walk past refused with a typed
//! error.
//!
//! ```text
//! file:    "REDIS" | version (4 ASCII digits; written: 0010, Redis 7.0's, which Redis 7.0 and
//!          later load) | items | 0xFF | crc64 (8 bytes LE; CRC-64/Redis, "Jones", of every
//!          byte before it; zero means "not computed" and is accepted)
//! items:   0xFA aux: name string | value string          (metadata, e.g. "redis-ver")
//!          0xFE select db: length
//!          0xFB resize db: length (keys) | length (keys with an expiry)
//!          0xFC expiry: 8 bytes LE, Unix milliseconds     (applies to the next key)
//!          0xFD expiry: 4 bytes LE, Unix seconds          (older files)
//!          0xF8 idle time: length;  0xF9 LFU frequency: 1 byte   (apply to the next key)
//!          0xF5 function library: string                  (Redis 7 functions; skipped)
//!          type byte | key string | value                 (a key)
//! length:  00xxxxxx: 6 bits; 01xxxxxx yyyyyyyy: 14 bits (big-endian);
//!          0x80 + 4 bytes BE; 0x81 + 8 bytes BE;
//!          11xxxxxx: a special string encoding (below), only where a string is read
//! string:  length | bytes;  or 0xC0 int8, 0xC1 int16 LE, 0xC2 int32 LE (the decimal text
//!          of the integer); or 0xC3 LZF: compressed length | plain length | LZF bytes
//! values:  0 string; 1 list, 2 set: length | strings; 4 hash: length | field, value strings;
//!          3 zset: length | member string | score (1 byte length, then ASCII; 253 NaN,
//!          254 +inf, 255 -inf); 5 zset: length | member string | 8-byte LE double;
//!          9-13, 16, 17, 20 (zipmap, ziplist, intset, listpack encodings): one string;
//!          14 quicklist: length | strings; 18 quicklist 2: length | (container length |
//!          string); 15, 19, 21 streams (walked below); 6, 7 module values: refused.
//! ```

use std::fmt;

/// The version written: Redis 7.0's, so that a Redis 7.0 replica loads what shale sends.
pub const VERSION_WRITTEN: u32 = 10;
/// The newest version read (Redis 7.2 and 7.4 write 11 and 12; their string keys and the
/// types above are laid out the same).
pub const VERSION_READ_MAX: u32 = 12;

const OP_FUNCTION2: u8 = 0xF5;
const OP_MODULE_AUX: u8 = 0xF7;
const OP_IDLE: u8 = 0xF8;
const OP_FREQ: u8 = 0xF9;
const OP_AUX: u8 = 0xFA;
const OP_RESIZEDB: u8 = 0xFB;
const OP_EXPIRETIME_MS: u8 = 0xFC;
const OP_EXPIRETIME: u8 = 0xFD;
const OP_SELECTDB: u8 = 0xFE;
const OP_EOF: u8 = 0xFF;

const TYPE_STRING: u8 = 0;
/// The largest string read (Redis's `proto-max-bulk-len` default, 512 MiB).
const STRING_BYTES_MAX: usize = 512 << 20;

static CRC64: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_REDIS);

/// A string key of a snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StringKey {
    /// The database it is in (`SELECT`).
    pub db: u64,
    /// Its name.
    pub key: Vec<u8>,
    /// Its value.
    pub value: Vec<u8>,
    /// When it expires, in Unix milliseconds.
    pub expires_at_ms: Option<u64>,
}

/// What reading a snapshot meets, in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// A string key.
    String(StringKey),
    /// A key of another type, walked past.
    Skipped {
        /// The database it is in.
        db: u64,
        /// Its name.
        key: Vec<u8>,
        /// Its type, as Redis's `TYPE` names it ("list", "set", "zset", "hash", "stream").
        kind: &'static str,
    },
}

/// Why bytes are not a snapshot this module can read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RdbError {
    /// Not "REDIS" and four digits.
    NotRdb,
    /// A version newer than [`VERSION_READ_MAX`].
    Version(u32),
    /// The bytes end inside an item, or before the end marker and checksum.
    Truncated,
    /// The checksum at the end does not match the bytes.
    Checksum {
        /// The checksum the file carries.
        stored: u64,
        /// The checksum of its bytes.
        computed: u64,
    },
    /// A value of a type that cannot be walked past (a module's value, an unknown type byte),
    /// at this byte offset.
    Unsupported {
        /// What it is.
        what: String,
        /// Where it starts.
        offset: usize,
    },
    /// A malformed length or string encoding, or compressed data that does not decompress to
    /// its stated length, at this byte offset.
    Malformed {
        /// What is wrong.
        what: &'static str,
        /// Where.
        offset: usize,
    },
}

impl fmt::Display for RdbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RdbError::NotRdb => write!(f, "not an RDB file (no REDIS header)"),
            RdbError::Version(v) => {
                write!(f, "RDB version {v} is newer than this build reads ({VERSION_READ_MAX})")
            }
            RdbError::Truncated => write!(f, "the RDB file ends early"),
            RdbError::Checksum { stored, computed } => {
                write!(f, "RDB checksum {stored:#018x} does not match its bytes ({computed:#018x})")
            }
            RdbError::Unsupported { what, offset } => {
                write!(f, "RDB {what} at byte {offset} cannot be read")
            }
            RdbError::Malformed { what, offset } => write!(f, "RDB {what} at byte {offset}"),
        }
    }
}

impl std::error::Error for RdbError {}

/// Writes a snapshot of `keys` (database 0), with the header, the end marker and the
/// checksum.
pub fn encode<'a>(keys: impl IntoIterator<Item = (&'a [u8], &'a [u8], Option<u64>)>) -> Vec<u8> {
    let mut w = Writer::new();
    let mut out = w.take();
    for (key, value, expires_at_ms) in keys {
        w.key(key, value, expires_at_ms);
        out.extend_from_slice(&w.take());
    }
    out.extend_from_slice(&w.finish());
    out
}

/// A snapshot written piece by piece, for a master that streams its keys to a replica
/// without holding the whole file: the bytes so far are taken with [`Writer::take`] as they
/// gather, and the checksum is kept over every byte taken.
pub struct Writer {
    buf: Vec<u8>,
    digest: crc::Digest<'static, u64>,
}

impl Default for Writer {
    fn default() -> Writer {
        Writer::new()
    }
}

impl Writer {
    /// The header (version, auxiliary fields, database 0) written.
    pub fn new() -> Writer {
        let mut buf = format!("REDIS{VERSION_WRITTEN:04}").into_bytes();
        aux(&mut buf, b"redis-ver", b"7.0.0");
        aux(&mut buf, b"redis-bits", b"64");
        aux(&mut buf, b"shale", env!("CARGO_PKG_VERSION").as_bytes());
        buf.push(OP_SELECTDB);
        put_length(&mut buf, 0);
        Writer { buf, digest: CRC64.digest() }
    }

    /// Writes a string key, with its expiry (Unix milliseconds) if it has one.
    pub fn key(&mut self, key: &[u8], value: &[u8], expires_at_ms: Option<u64>) {
        if let Some(ms) = expires_at_ms {
            self.buf.push(OP_EXPIRETIME_MS);
            self.buf.extend_from_slice(&ms.to_le_bytes());
        }
        self.buf.push(TYPE_STRING);
        put_string(&mut self.buf, key);
        put_string(&mut self.buf, value);
    }

    /// Bytes written and not yet taken.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// The bytes written since the last take.
    pub fn take(&mut self) -> Vec<u8> {
        self.digest.update(&self.buf);
        std::mem::take(&mut self.buf)
    }

    /// The last bytes: what was not taken, the end marker and the checksum.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(OP_EOF);
        self.digest.update(&self.buf);
        let crc = self.digest.finalize();
        self.buf.extend_from_slice(&crc.to_le_bytes());
        self.buf
    }
}

fn aux(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(OP_AUX);
    put_string(out, name);
    put_string(out, value);
}

fn put_length(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if n <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// A string, plainly: Redis reads every encoding, and the integer and LZF forms only save
/// bytes.
fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    put_length(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// Reads a snapshot, handing each key to `item` in file order; returns the snapshot's
/// version.
///
/// # Errors
/// [`RdbError`]: nothing of a file with a bad checksum should be trusted, so the caller
/// applies what it was handed only once this returns `Ok`.
pub fn decode(bytes: &[u8], mut item: impl FnMut(Item)) -> Result<u32, RdbError> {
    if bytes.len() < 9 || &bytes[..5] != b"REDIS" {
        return Err(RdbError::NotRdb);
    }
    let version: u32 = std::str::from_utf8(&bytes[5..9])
        .ok()
        .and_then(|v| v.parse().ok())
        .ok_or(RdbError::NotRdb)?;
    if version > VERSION_READ_MAX {
        return Err(RdbError::Version(version));
    }
    let mut r = Reader { bytes, at: 9 };
    let mut db = 0;
    let mut expires_at_ms = None;
    loop {
        let start = r.at;
        let op = r.byte()?;
        match op {
            OP_EOF => break,
            OP_AUX => {
                r.string()?;
                r.string()?;
            }
            OP_SELECTDB => db = r.length()?,
            OP_RESIZEDB => {
                r.length()?;
                r.length()?;
            }
            OP_EXPIRETIME_MS => expires_at_ms = Some(u64::from_le_bytes(r.array()?)),
            OP_EXPIRETIME => {
                expires_at_ms = Some(u64::from(u32::from_le_bytes(r.array()?)) * 1000);
            }
            OP_IDLE => {
                r.length()?;
            }
            OP_FREQ => {
                r.byte()?;
            }
            OP_FUNCTION2 => {
                r.string()?;
            }
            OP_MODULE_AUX => {
                return Err(RdbError::Unsupported { what: "module data".into(), offset: start });
            }
            kind => {
                let key = r.string()?;
                if kind == TYPE_STRING {
                    let value = r.string()?;
                    item(Item::String(StringKey { db, key, value, expires_at_ms }));
                } else {
                    let name = r.skip_value(kind, start)?;
                    item(Item::Skipped { db, key, kind: name });
                }
                expires_at_ms = None;
            }
        }
    }
    let body_end = r.at;
    if version >= 5 {
        let stored = u64::from_le_bytes(r.array()?);
        let computed = CRC64.checksum(&bytes[..body_end]);
        if stored != 0 && stored != computed {
            return Err(RdbError::Checksum { stored, computed });
        }
    }
    Ok(version)
}

/// A cursor over a snapshot's bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

/// A length, or the special encoding of a string.
enum Length {
    Plain(u64),
    Special(u8),
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], RdbError> {
        let end =
            self.at.checked_add(n).filter(|e| *e <= self.bytes.len()).ok_or(RdbError::Truncated)?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn byte(&mut self) -> Result<u8, RdbError> {
        Ok(self.take(1)?[0])
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], RdbError> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    fn raw_length(&mut self) -> Result<Length, RdbError> {
        let start = self.at;
        let b = self.byte()?;
        Ok(match b >> 6 {
            0 => Length::Plain(u64::from(b & 0x3F)),
            1 => Length::Plain(u64::from(b & 0x3F) << 8 | u64::from(self.byte()?)),
            2 => match b {
                0x80 => Length::Plain(u64::from(u32::from_be_bytes(self.array()?))),
                0x81 => Length::Plain(u64::from_be_bytes(self.array()?)),
                _ => return Err(RdbError::Malformed { what: "length encoding", offset: start }),
            },
            _ => Length::Special(b & 0x3F),
        })
    }

    fn length(&mut self) -> Result<u64, RdbError> {
        let start = self.at;
        match self.raw_length()? {
            Length::Plain(n) => Ok(n),
            Length::Special(_) => Err(RdbError::Malformed {
                what: "string encoding where a length belongs",
                offset: start,
            }),
        }
    }

    /// A length used to size a read: no more than the bytes left can hold.
    fn count(&mut self) -> Result<usize, RdbError> {
        let n = self.length()?;
        usize::try_from(n).ok().filter(|n| *n <= self.bytes.len()).ok_or(RdbError::Truncated)
    }

    fn string(&mut self) -> Result<Vec<u8>, RdbError> {
        let start = self.at;
        match self.raw_length()? {
            Length::Plain(n) => {
                let n = usize::try_from(n).map_err(|_| RdbError::Truncated)?;
                Ok(self.take(n)?.to_vec())
            }
            Length::Special(0) => Ok((self.byte()? as i8).to_string().into_bytes()),
            Length::Special(1) => Ok(i16::from_le_bytes(self.array()?).to_string().into_bytes()),
            Length::Special(2) => Ok(i32::from_le_bytes(self.array()?).to_string().into_bytes()),
            Length::Special(3) => {
                let compressed = self.count()?;
                // The plain length may pass the file's (it is compressed), not Redis's
                // largest string.
                let plain = usize::try_from(self.length()?)
                    .ok()
                    .filter(|n| *n <= STRING_BYTES_MAX)
                    .ok_or(RdbError::Malformed { what: "LZF string length", offset: start })?;
                let data = self.take(compressed)?;
                lzf_decompress(data, plain)
                    .ok_or(RdbError::Malformed { what: "LZF string", offset: start })
            }
            Length::Special(_) => {
                Err(RdbError::Malformed { what: "string encoding", offset: start })
            }
        }
    }

    fn skip_strings(&mut self, n: usize) -> Result<(), RdbError> {
        for _ in 0..n {
            self.string()?;
        }
        Ok(())
    }

    /// Walks past a value of type `kind` (a key's type byte at `offset`); its type's name.
    fn skip_value(&mut self, kind: u8, offset: usize) -> Result<&'static str, RdbError> {
        Ok(match kind {
            1 | 2 => {
                let n = self.count()?;
                self.skip_strings(n)?;
                if kind == 1 { "list" } else { "set" }
            }
            3 => {
                for _ in 0..self.count()? {
                    self.string()?;
                    let len = self.byte()?;
                    if len < 253 {
                        self.take(usize::from(len))?;
                    }
                }
                "zset"
            }
            4 => {
                let n = self.count()?;
                self.skip_strings(2 * n)?;
                "hash"
            }
            5 => {
                for _ in 0..self.count()? {
                    self.string()?;
                    self.take(8)?;
                }
                "zset"
            }
            9 | 13 | 16 => {
                self.string()?;
                "hash"
            }
            10 => {
                self.string()?;
                "list"
            }
            11 | 20 => {
                self.string()?;
                "set"
            }
            12 | 17 => {
                self.string()?;
                "zset"
            }
            14 => {
                let n = self.count()?;
                self.skip_strings(n)?;
                "list"
            }
            18 => {
                for _ in 0..self.count()? {
                    self.length()?;
                    self.string()?;
                }
                "list"
            }
            15 | 19 | 21 => {
                self.skip_stream(kind)?;
                "stream"
            }
            6 | 7 => return Err(RdbError::Unsupported { what: "module value".into(), offset }),
            other => {
                return Err(RdbError::Unsupported { what: format!("value type {other}"), offset });
            }
        })
    }

    /// A stream (types 15, 19 and 21: listpacks, then the stream's metadata, then its
    /// consumer groups, each version adding fields).
    fn skip_stream(&mut self, kind: u8) -> Result<(), RdbError> {
        let nodes = self.count()?;
        self.skip_strings(2 * nodes)?;
        // Length, last id (ms, seq); from version 2 also the first id, the max deleted id
        // (ms, seq each) and the entries added.
        let ids = if kind >= 19 { 8 } else { 3 };
        for _ in 0..ids {
            self.length()?;
        }
        for _ in 0..self.count()? {
            self.string()?; // group name
            self.length()?; // last id ms
            self.length()?; // last id seq
            if kind >= 19 {
                self.length()?; // entries read
            }
            for _ in 0..self.count()? {
                self.take(16 + 8)?; // raw id, delivery time
                self.length()?; // delivery count
            }
            for _ in 0..self.count()? {
                self.string()?; // consumer name
                self.take(8)?; // seen time
                if kind >= 21 {
                    self.take(8)?; // active time
                }
                let pending = self.count()?;
                self.take(16usize.checked_mul(pending).ok_or(RdbError::Truncated)?)?;
            }
        }
        Ok(())
    }
}

/// LZF's decompression (the format Redis compresses strings with): literal runs (a control
/// byte below 32: that many plus one bytes follow) and back references (the control byte's
/// top three bits the length less two, 7 meaning a next byte adds to it; its low five bits and
/// the next byte the distance less one). `None` unless it makes exactly `plain` bytes.
fn lzf_decompress(data: &[u8], plain: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(plain);
    let mut i = 0;
    while i < data.len() {
        let ctrl = usize::from(data[i]);
        i += 1;
        if ctrl < 32 {
            let run = ctrl + 1;
            out.extend_from_slice(data.get(i..i + run)?);
            i += run;
        } else {
            let mut len = ctrl >> 5;
            if len == 7 {
                len += usize::from(*data.get(i)?);
                i += 1;
            }
            len += 2;
            let back = ((ctrl & 0x1F) << 8 | usize::from(*data.get(i)?)) + 1;
            i += 1;
            let from = out.len().checked_sub(back)?;
            // Byte by byte: a reference may overlap what it copies (a repeated run).
            for k in 0..len {
                let b = out[from + k];
                out.push(b);
            }
        }
        if out.len() > plain {
            return None;
        }
    }
    (out.len() == plain).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(bytes: &[u8]) -> Result<Vec<Item>, RdbError> {
        let mut items = Vec::new();
        decode(bytes, |i| items.push(i))?;
        Ok(items)
    }

    #[test]
    fn written_keys_read_back_with_their_expiries() {
        let big = vec![b'x'; 20_000];
        let keys: Vec<(&[u8], &[u8], Option<u64>)> = vec![
            (b"a", b"1", None),
            (b"", b"", Some(1_700_000_000_123)),
            (b"big", &big, None),
            (&[0xFF, 0x00, 0xFE], b"binary", Some(u64::MAX)),
        ];
        let file = encode(keys.iter().copied());
        assert_eq!(&file[..9], b"REDIS0010");
        let items = strings(&file).unwrap();
        let back: Vec<_> = items
            .iter()
            .map(|i| match i {
                Item::String(s) => (s.key.as_slice(), s.value.as_slice(), s.expires_at_ms),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(back, keys);
    }

    #[test]
    fn lengths_of_every_width_round_trip() {
        for n in [0u64, 63, 64, 16_383, 16_384, u64::from(u32::MAX), u64::from(u32::MAX) + 1] {
            let mut out = Vec::new();
            put_length(&mut out, n);
            assert_eq!(Reader { bytes: &out, at: 0 }.length().unwrap(), n);
        }
    }

    /// A file made of `body` (items after the header), the end marker and its checksum.
    fn file(body: &[u8]) -> Vec<u8> {
        let mut f = b"REDIS0011".to_vec();
        f.extend_from_slice(body);
        f.push(OP_EOF);
        let crc = CRC64.checksum(&f);
        f.extend_from_slice(&crc.to_le_bytes());
        f
    }

    #[test]
    fn integer_and_lzf_strings_are_read_as_their_text() {
        let mut body = vec![TYPE_STRING, 1, b'i', 0xC0, 0xFB]; // int8 -5
        body.extend([TYPE_STRING, 1, b'j', 0xC1, 0x39, 0x30]); // int16 12345
        body.extend([TYPE_STRING, 1, b'k', 0xC2, 0x15, 0xCD, 0x5B, 0x07]); // int32 123456789
        // "abcabcabcabc": literal "abc", then a back reference of 9 bytes at distance 3.
        body.extend([TYPE_STRING, 1, b'l', 0xC3, 7, 12, 2, b'a', b'b', b'c', 0xE0, 0, 2]);
        let items = strings(&file(&body)).unwrap();
        let values: Vec<_> = items
            .iter()
            .map(|i| match i {
                Item::String(s) => s.value.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(values, [&b"-5"[..], b"12345", b"123456789", b"abcabcabcabc"]);
    }

    #[test]
    fn keys_of_other_types_are_reported_and_walked_past() {
        let mut body =
            vec![OP_AUX, 3, b'x', b'y', b'z', 1, b'1', OP_SELECTDB, 2, OP_RESIZEDB, 5, 1];
        body.extend([1, 1, b'L', 2, 1, b'a', 1, b'b']); // list of two
        body.extend([2, 1, b'S', 1, 1, b'm']); // set of one
        body.extend([4, 1, b'H', 1, 1, b'f', 1, b'v']); // hash of one pair
        body.extend([5, 1, b'Z', 1, 1, b'm']);
        body.extend(1.5f64.to_le_bytes()); // zset of one
        body.extend([3, 1, b'z', 2, 1, b'a', 3, b'1', b'.', b'5', 1, b'b', 254]); // old zset
        body.extend([16, 1, b'P', 3, 1, 2, 3]); // a hash as one listpack blob
        body.extend([18, 1, b'Q', 1, 2, 2, 9, 9]); // quicklist 2: one node
        body.extend([OP_EXPIRETIME_MS]);
        body.extend(42u64.to_le_bytes());
        body.extend([TYPE_STRING, 1, b's', 1, b'v']);
        let items = strings(&file(&body)).unwrap();
        let skipped: Vec<_> = items
            .iter()
            .filter_map(|i| match i {
                Item::Skipped { db, key, kind } => Some((*db, key.clone(), *kind)),
                Item::String(_) => None,
            })
            .collect();
        assert_eq!(
            skipped,
            [
                (2, b"L".to_vec(), "list"),
                (2, b"S".to_vec(), "set"),
                (2, b"H".to_vec(), "hash"),
                (2, b"Z".to_vec(), "zset"),
                (2, b"z".to_vec(), "zset"),
                (2, b"P".to_vec(), "hash"),
                (2, b"Q".to_vec(), "list"),
            ]
        );
        let Item::String(s) = items.last().unwrap() else { panic!() };
        assert_eq!(
            (s.db, &s.key[..], &s.value[..], s.expires_at_ms),
            (2, &b"s"[..], &b"v"[..], Some(42))
        );
    }

    #[test]
    fn damage_is_refused_never_a_panic() {
        let whole = encode([(&b"key"[..], &b"value"[..], Some(7))]);
        for cut in 0..whole.len() {
            assert!(strings(&whole[..cut]).is_err(), "cut at {cut} read as whole");
        }
        for at in 9..whole.len() {
            let mut bad = whole.clone();
            bad[at] ^= 0x41;
            // A flipped byte either breaks the walk or fails the checksum.
            assert!(strings(&bad).is_err(), "byte {at} flipped read as whole");
        }
        assert_eq!(strings(b"REDIS0099"), Err(RdbError::Version(99)));
        assert_eq!(strings(b"RUBY00010"), Err(RdbError::NotRdb));
        let module = file(&[7, 1, b'm']);
        assert!(matches!(strings(&module), Err(RdbError::Unsupported { .. })));
    }

    #[test]
    fn lzf_refuses_references_before_the_start_and_wrong_lengths() {
        assert_eq!(lzf_decompress(&[0, b'a', 0x20, 5], 4), None, "distance past the start");
        assert_eq!(lzf_decompress(&[1, b'a', b'b'], 3), None, "fewer bytes than stated");
        assert_eq!(lzf_decompress(&[1, b'a', b'b'], 2).unwrap(), b"ab");
    }
}
