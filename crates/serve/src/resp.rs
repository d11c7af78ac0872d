//! RESP, the Redis serialization protocol: an incremental, bounded parser of requests and an
//! encoder of replies in RESP2 and RESP3.
//!
//! Requests (what clients send; RESP2 and RESP3 alike):
//! ```text
//! array of bulk strings        *<n>\r\n  then n times  $<len>\r\n<len bytes>\r\n
//!                              n in 0 ..= array_len_max (*0 and *-1 are skipped, as Redis does)
//!                              len in 0 ..= bulk_bytes_max, and the whole request (headers and
//!                              data) at most request_bytes_max bytes
//! inline command (telnet)      <word> <word> ...\r\n   (or \n), words split on spaces and tabs,
//!                              no quoting; at most INLINE_BYTES_MAX bytes; empty lines skipped
//! ```
//! A header line (`*<n>` or `$<len>`) is at most [`HEADER_BYTES_MAX`] bytes before its CRLF.
//! Lengths are decimal, without sign or leading `+`.
//!
//! Before a client has authenticated (a password is set and not yet given), Redis's tighter
//! bounds apply on top ([`RequestParser::before_auth`]): at most
//! [`UNAUTHENTICATED_ARRAY_LEN_MAX`] elements and [`UNAUTHENTICATED_BULK_BYTES_MAX`] bytes a
//! bulk string, so a stranger can make the server hold at most a few hundred KiB.
//!
//! Replies (what the server sends):
//! ```text
//! type            RESP2                      RESP3
//! simple string   +<text>\r\n                 same
//! error           -<CODE> <text>\r\n          same
//! integer         :<i64>\r\n                  same
//! bulk string     $<len>\r\n<bytes>\r\n       same
//! null            $-1\r\n                     _\r\n
//! null array      *-1\r\n                     _\r\n
//! array           *<n>\r\n<n replies>         same
//! map             *<2n>\r\n<k v k v ...>      %<n>\r\n<k v k v ...>
//! double          $<len>\r\n<decimal>\r\n     ,<decimal>\r\n
//! ```
//!
//! The parser never allocates what a header claims: a bulk string's bytes are taken only once
//! they have all arrived, so a header claiming 512 MB costs nothing until its bytes come, and a
//! claim over the limits is refused at the header. Malformed input is a [`ProtocolError`],
//! never a panic.

use std::fmt;

/// Longest `*<n>` or `$<len>` line, CRLF excluded: 20 digits and a sign fit with room to spare.
/// Longer is malformed (Redis: "too big count string").
pub const HEADER_BYTES_MAX: usize = 32;

/// Longest inline command line (Redis's `PROTO_INLINE_MAX_SIZE`).
pub const INLINE_BYTES_MAX: usize = 64 << 10;

/// Default bound on the elements of one request's array: 1 Mi arguments (an MSET of half a
/// million keys). Redis allows `INT_MAX`; an array header is cheap to send and each element
/// costs a `Vec`, so the bound is what keeps a header from costing memory.
pub const ARRAY_LEN_MAX_DEFAULT: usize = 1 << 20;

/// Default bound on one bulk string and on one whole request: one byte under 512 MiB, so 512
/// MiB (Redis's `proto-max-bulk-len`, which Redis still accepts) is the first length refused.
/// The engine refuses far smaller values anyway (a batch is at most half a memtable): lower
/// it with `Limits` to stop a client making the server buffer what cannot be stored.
pub const REQUEST_BYTES_MAX_DEFAULT: usize = (512 << 20) - 1;

/// Most elements of one request from a client that has not authenticated: Redis's bound (10),
/// enough for `AUTH`, `HELLO 3 AUTH user pass SETNAME name` and `QUIT`.
pub const UNAUTHENTICATED_ARRAY_LEN_MAX: usize = 10;

/// Most bytes of one bulk string from a client that has not authenticated: Redis's bound
/// (16 KiB), far above any password.
pub const UNAUTHENTICATED_BULK_BYTES_MAX: usize = 16 << 10;

/// The bounds a [`RequestParser`] enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most elements of one request's array.
    pub array_len_max: usize,
    /// Most bytes of one bulk string.
    pub bulk_bytes_max: usize,
    /// Most bytes of one request, headers and CRLFs included.
    pub request_bytes_max: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            array_len_max: ARRAY_LEN_MAX_DEFAULT,
            bulk_bytes_max: REQUEST_BYTES_MAX_DEFAULT,
            request_bytes_max: REQUEST_BYTES_MAX_DEFAULT,
        }
    }
}

/// Why a request could not be parsed. The connection answers it as an error (`-ERR Protocol
/// error: ...`) and is closed, as Redis does: after malformed input nothing later in the
/// stream can be trusted to start at a request boundary.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProtocolError {
    /// A byte other than the one the grammar requires.
    Unexpected {
        /// What the grammar required ("'$'", "CRLF").
        expected: &'static str,
        /// The byte found.
        found: u8,
    },
    /// An array or bulk length that is not a decimal number in range, or a header line longer
    /// than [`HEADER_BYTES_MAX`].
    BadLength {
        /// "multibulk" or "bulk".
        what: &'static str,
    },
    /// An array with more elements than allowed.
    ArrayTooLong {
        /// Elements claimed.
        len: u64,
        /// The limit.
        max: usize,
    },
    /// A bulk string longer than allowed.
    BulkTooLong {
        /// Bytes claimed.
        len: u64,
        /// The limit.
        max: usize,
    },
    /// A request (headers and data) longer than allowed.
    RequestTooLarge {
        /// The limit.
        max: usize,
    },
    /// An inline command line longer than allowed: [`INLINE_BYTES_MAX`], or the request
    /// limit where that is lower.
    InlineTooLong {
        /// The limit.
        max: usize,
    },
    /// An array or bulk string over the bounds of a client that has not authenticated
    /// ([`UNAUTHENTICATED_ARRAY_LEN_MAX`], [`UNAUTHENTICATED_BULK_BYTES_MAX`]). Redis's words.
    Unauthenticated {
        /// "multibulk" or "bulk".
        what: &'static str,
    },
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtocolError::Unexpected { expected, found } => {
                write!(f, "expected {expected}, got '{}'", char::from(*found).escape_default())
            }
            ProtocolError::BadLength { what } => write!(f, "invalid {what} length"),
            ProtocolError::ArrayTooLong { len, max } => {
                write!(f, "array of {len} elements is over the {max}-element limit")
            }
            ProtocolError::BulkTooLong { len, max } => {
                write!(f, "bulk string of {len} bytes is over the {max}-byte limit")
            }
            ProtocolError::RequestTooLarge { max } => {
                write!(f, "request is over the {max}-byte limit")
            }
            ProtocolError::InlineTooLong { max } => {
                write!(f, "inline request is over the {max}-byte limit")
            }
            ProtocolError::Unauthenticated { what } => write!(f, "unauthenticated {what} length"),
        }
    }
}

impl std::error::Error for ProtocolError {}

/// One request: the command name and its arguments, as bytes.
pub type Request = Vec<Vec<u8>>;

/// An array request partly taken: its elements so far.
#[derive(Debug)]
struct Partial {
    remaining: usize,
    args: Vec<Vec<u8>>,
    bytes: usize,
}

/// Parses requests out of a connection's read buffer as bytes arrive. Whole elements are taken
/// into the parser's state as they arrive, so a request of many arguments arriving in many
/// reads is walked once, not once per read.
#[derive(Debug)]
pub struct RequestParser {
    limits: Limits,
    /// Whether the client has yet to authenticate: the unauthenticated bounds apply on top
    /// of `limits` until [`RequestParser::authenticated`].
    before_auth: bool,
    partial: Option<Partial>,
}

/// A header line: its digits, and the bytes it takes with its CRLF; `None` when its CRLF has
/// not arrived yet.
fn header_line<'a>(
    input: &'a [u8],
    what: &'static str,
) -> Result<Option<(&'a [u8], usize)>, ProtocolError> {
    let window = &input[..input.len().min(HEADER_BYTES_MAX + 2)];
    match window.windows(2).position(|w| w == b"\r\n") {
        Some(end) => Ok(Some((&input[1..end], end + 2))),
        None if window.len() >= HEADER_BYTES_MAX + 2 => Err(ProtocolError::BadLength { what }),
        None => Ok(None),
    }
}

/// A non-negative decimal length; `-1` (a null) as `None`.
fn parse_len(digits: &[u8], what: &'static str) -> Result<Option<u64>, ProtocolError> {
    if digits == b"-1" {
        return Ok(None);
    }
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(ProtocolError::BadLength { what });
    }
    let text = std::str::from_utf8(digits).map_err(|_| ProtocolError::BadLength { what })?;
    text.parse::<u64>().map(Some).map_err(|_| ProtocolError::BadLength { what })
}

impl RequestParser {
    /// A parser enforcing `limits`.
    pub fn new(limits: Limits) -> RequestParser {
        RequestParser { limits, before_auth: false, partial: None }
    }

    /// A parser for a client that must authenticate first: until
    /// [`RequestParser::authenticated`] is called, an array over
    /// [`UNAUTHENTICATED_ARRAY_LEN_MAX`] elements or a bulk string over
    /// [`UNAUTHENTICATED_BULK_BYTES_MAX`] bytes is refused at its header
    /// ([`ProtocolError::Unauthenticated`]), as well as anything over `limits`.
    pub fn before_auth(limits: Limits) -> RequestParser {
        RequestParser { limits, before_auth: true, partial: None }
    }

    /// The client has authenticated: from the next header on, only `limits` apply. Requests
    /// are parsed one at a time between commands, so the request after a pipelined `AUTH` is
    /// held to the bounds of an authenticated client, as in Redis.
    pub fn authenticated(&mut self) {
        self.before_auth = false;
    }

    /// The array bound now: the configured one, or the unauthenticated one where lower.
    fn array_len_max(&self) -> usize {
        if self.before_auth {
            self.limits.array_len_max.min(UNAUTHENTICATED_ARRAY_LEN_MAX)
        } else {
            self.limits.array_len_max
        }
    }

    /// The next whole request at the start of `input`, or `None` until more bytes arrive. On
    /// return, `*consumed` bytes of `input` have been taken (into the request returned, or into
    /// the parser's state for one still arriving): the caller drops them from its buffer before
    /// calling again with what follows.
    ///
    /// # Errors
    /// [`ProtocolError`] for malformed input or input over the limits; the connection should
    /// answer it and close.
    pub fn next(
        &mut self,
        input: &[u8],
        consumed: &mut usize,
    ) -> Result<Option<Request>, ProtocolError> {
        *consumed = 0;
        loop {
            let rest = &input[*consumed..];
            if self.partial.is_none() {
                let Some(&first) = rest.first() else { return Ok(None) };
                if first != b'*' {
                    let limits = Limits { array_len_max: self.array_len_max(), ..self.limits };
                    let parsed = inline(rest, consumed, &limits).map_err(|e| match e {
                        ProtocolError::ArrayTooLong { len, .. }
                            if len <= self.limits.array_len_max as u64 =>
                        {
                            ProtocolError::Unauthenticated { what: "multibulk" }
                        }
                        e => e,
                    })?;
                    match parsed {
                        // An empty line (a telnet user pressing return) is skipped, as Redis
                        // skips it.
                        Some(args) if args.is_empty() => continue,
                        other => return Ok(other),
                    }
                }
                let Some((digits, took)) = header_line(rest, "multibulk")? else {
                    return Ok(None);
                };
                let len = parse_len(digits, "multibulk")?.unwrap_or(0);
                if len > self.array_len_max() as u64 && len <= self.limits.array_len_max as u64 {
                    return Err(ProtocolError::Unauthenticated { what: "multibulk" });
                }
                if len > self.limits.array_len_max as u64 {
                    return Err(ProtocolError::ArrayTooLong {
                        len,
                        max: self.limits.array_len_max,
                    });
                }
                *consumed += took;
                if len == 0 {
                    // Redis skips empty and null arrays: nothing to answer.
                    continue;
                }
                let len = len as usize;
                // Capacity for the arguments, not their bytes, and at most what a read could
                // hold, so a claimed count costs little until its elements arrive.
                let args = Vec::with_capacity(len.min(1024));
                self.partial = Some(Partial { remaining: len, args, bytes: took });
                continue;
            }
            match self.bulk(rest)? {
                None => return Ok(None),
                Some((arg, took)) => {
                    *consumed += took;
                    let Some(partial) = self.partial.as_mut() else {
                        unreachable!("an element is only taken into a partial request")
                    };
                    partial.args.push(arg);
                    partial.remaining -= 1;
                    if partial.remaining == 0 {
                        let done = self.partial.take().map(|p| p.args);
                        return Ok(done);
                    }
                }
            }
        }
    }

    /// One bulk string of a partial request, with the bytes it takes; `None` until it is whole.
    fn bulk(&mut self, rest: &[u8]) -> Result<Option<(Vec<u8>, usize)>, ProtocolError> {
        let Some(&first) = rest.first() else { return Ok(None) };
        if first != b'$' {
            return Err(ProtocolError::Unexpected { expected: "'$'", found: first });
        }
        let Some((digits, header)) = header_line(rest, "bulk")? else { return Ok(None) };
        let Some(len) = parse_len(digits, "bulk")? else {
            return Err(ProtocolError::BadLength { what: "bulk" });
        };
        if len > self.limits.bulk_bytes_max as u64 {
            return Err(ProtocolError::BulkTooLong { len, max: self.limits.bulk_bytes_max });
        }
        if self.before_auth && len > UNAUTHENTICATED_BULK_BYTES_MAX as u64 {
            return Err(ProtocolError::Unauthenticated { what: "bulk" });
        }
        let len = len as usize;
        let Some(partial) = self.partial.as_mut() else {
            unreachable!("bulk strings are parsed only inside an array")
        };
        // Checked against the header's claim before the bytes arrive, so an oversized request
        // is refused without buffering it.
        let request_bytes = partial.bytes + header + len + 2;
        if request_bytes > self.limits.request_bytes_max {
            return Err(ProtocolError::RequestTooLarge { max: self.limits.request_bytes_max });
        }
        let total = header + len + 2;
        if rest.len() < total {
            return Ok(None);
        }
        if &rest[header + len..total] != b"\r\n" {
            let found =
                if rest[header + len] == b'\r' { rest[total - 1] } else { rest[header + len] };
            return Err(ProtocolError::Unexpected { expected: "CRLF", found });
        }
        partial.bytes = request_bytes;
        Ok(Some((rest[header..header + len].to_vec(), total)))
    }
}

/// An inline command: one line split on spaces and tabs (empty for an empty line), within the
/// same bounds as an array request: its line at most [`INLINE_BYTES_MAX`] (or the request
/// limit where lower), its words at most the array limit.
fn inline(
    rest: &[u8],
    consumed: &mut usize,
    limits: &Limits,
) -> Result<Option<Request>, ProtocolError> {
    let max = INLINE_BYTES_MAX.min(limits.request_bytes_max);
    let window = &rest[..rest.len().min(max + 1)];
    let Some(end) = window.iter().position(|&b| b == b'\n') else {
        if window.len() > max {
            return Err(ProtocolError::InlineTooLong { max });
        }
        return Ok(None);
    };
    let line = rest[..end].strip_suffix(b"\r").unwrap_or(&rest[..end]);
    let words = line.split(|&b| b == b' ' || b == b'\t').filter(|w| !w.is_empty());
    let len = words.clone().count();
    if len > limits.array_len_max {
        return Err(ProtocolError::ArrayTooLong { len: len as u64, max: limits.array_len_max });
    }
    *consumed += end + 1;
    Ok(Some(words.map(<[u8]>::to_vec).collect()))
}

/// The protocol a connection speaks: RESP2 until `HELLO 3`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// RESP2 (Redis before 6, and every connection at first).
    Resp2,
    /// RESP3 (after `HELLO 3`).
    Resp3,
}

/// A reply, encoded by [`Reply::encode`] for the connection's protocol.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// `+OK`.
    Simple(&'static str),
    /// A simple string made at run time (no CR or LF in it).
    Status(String),
    /// `-CODE text`: the text starts with its code (`ERR`, `WRONGTYPE`, `NOAUTH`, ...).
    Error(String),
    /// `:n`.
    Int(i64),
    /// A bulk string.
    Bulk(Vec<u8>),
    /// A missing value: a null bulk string in RESP2, `_` in RESP3.
    Null,
    /// A missing array (RESP2 `*-1`), `_` in RESP3.
    NullArray,
    /// An array.
    Array(Vec<Reply>),
    /// A map: RESP3's `%`, a flat array of keys and values in RESP2.
    Map(Vec<(Reply, Reply)>),
    /// A double: RESP3's `,`, a bulk string in RESP2.
    Double(f64),
    /// Out-of-band data (a pub/sub message, a subscription's confirmation): RESP3's push
    /// type `>`, an array in RESP2.
    Push(Vec<Reply>),
}

impl Reply {
    /// `+OK`.
    pub const OK: Reply = Reply::Simple("OK");

    /// An error reply `ERR <text>`.
    pub fn err(text: impl fmt::Display) -> Reply {
        Reply::Error(format!("ERR {text}"))
    }

    /// A bulk string of text.
    pub fn text(text: impl Into<String>) -> Reply {
        Reply::Bulk(text.into().into_bytes())
    }

    /// Whether this is an error reply.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    /// Appends the reply's bytes in `protocol` to `out`.
    pub fn encode(&self, protocol: Protocol, out: &mut Vec<u8>) {
        match self {
            Reply::Simple(s) => line(out, b'+', s.as_bytes()),
            Reply::Status(s) => line(out, b'+', &sanitized(s)),
            Reply::Error(s) => line(out, b'-', &sanitized(s)),
            Reply::Int(n) => line(out, b':', n.to_string().as_bytes()),
            Reply::Bulk(b) => bulk(out, b),
            Reply::Null => match protocol {
                Protocol::Resp2 => out.extend_from_slice(b"$-1\r\n"),
                Protocol::Resp3 => out.extend_from_slice(b"_\r\n"),
            },
            Reply::NullArray => match protocol {
                Protocol::Resp2 => out.extend_from_slice(b"*-1\r\n"),
                Protocol::Resp3 => out.extend_from_slice(b"_\r\n"),
            },
            Reply::Array(items) | Reply::Push(items) => {
                let kind = match (self, protocol) {
                    (Reply::Push(_), Protocol::Resp3) => b'>',
                    _ => b'*',
                };
                line(out, kind, items.len().to_string().as_bytes());
                for item in items {
                    item.encode(protocol, out);
                }
            }
            Reply::Map(pairs) => {
                match protocol {
                    Protocol::Resp2 => line(out, b'*', (2 * pairs.len()).to_string().as_bytes()),
                    Protocol::Resp3 => line(out, b'%', pairs.len().to_string().as_bytes()),
                }
                for (k, v) in pairs {
                    k.encode(protocol, out);
                    v.encode(protocol, out);
                }
            }
            Reply::Double(d) => {
                let text = format_double(*d);
                match protocol {
                    Protocol::Resp2 => bulk(out, text.as_bytes()),
                    Protocol::Resp3 => line(out, b',', text.as_bytes()),
                }
            }
        }
    }
}

fn line(out: &mut Vec<u8>, kind: u8, body: &[u8]) {
    out.push(kind);
    out.extend_from_slice(body);
    out.extend_from_slice(b"\r\n");
}

fn bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    line(out, b'$', bytes.len().to_string().as_bytes());
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// A simple string or error must not hold CR or LF (they would end it early and the rest would
/// read as another reply): an error quoting client input has them replaced by spaces, as Redis
/// does.
fn sanitized(s: &str) -> Vec<u8> {
    s.bytes().map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }).collect()
}

fn format_double(d: f64) -> String {
    if d.is_infinite() {
        if d > 0.0 { "inf".into() } else { "-inf".into() }
    } else if d.is_nan() {
        "nan".into()
    } else {
        format!("{d}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(input: &[u8], limits: Limits) -> Result<Vec<Request>, ProtocolError> {
        let mut p = RequestParser::new(limits);
        let mut out = Vec::new();
        let mut at = 0;
        loop {
            let mut took = 0;
            let r = p.next(&input[at..], &mut took)?;
            at += took;
            match r {
                Some(req) => out.push(req),
                None => return Ok(out),
            }
        }
    }

    fn args(words: &[&str]) -> Request {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    #[test]
    fn arrays_and_inline_commands_parse() {
        let input = b"*2\r\n$3\r\nGET\r\n$1\r\na\r\nPING\r\n\r\n*0\r\n*-1\r\nSET  k\tv\n";
        let got = parse_all(input, Limits::default()).unwrap();
        assert_eq!(got, [args(&["GET", "a"]), args(&["PING"]), args(&["SET", "k", "v"])]);
    }

    #[test]
    fn every_split_point_gives_the_same_requests() {
        let input = b"*3\r\n$3\r\nSET\r\n$5\r\nhello\r\n$0\r\n\r\n*1\r\n$4\r\nPING\r\n";
        for split in 0..=input.len() {
            let mut p = RequestParser::new(Limits::default());
            let mut buf = input[..split].to_vec();
            let mut got = Vec::new();
            for chunk in [&input[split..], &[][..]] {
                loop {
                    let mut took = 0;
                    let r = p.next(&buf, &mut took).unwrap();
                    buf.drain(..took);
                    match r {
                        Some(req) => got.push(req),
                        None => break,
                    }
                }
                buf.extend_from_slice(chunk);
            }
            assert_eq!(got, [args(&["SET", "hello", ""]), args(&["PING"])], "split at {split}");
        }
    }

    #[test]
    fn malformed_input_is_a_typed_error() {
        let cases: &[(&[u8], ProtocolError)] = &[
            (b"*1\r\n+OK\r\n", ProtocolError::Unexpected { expected: "'$'", found: b'+' }),
            (b"*x\r\n", ProtocolError::BadLength { what: "multibulk" }),
            (b"*1\r\n$-1\r\n", ProtocolError::BadLength { what: "bulk" }),
            (b"*1\r\n$+3\r\nabc\r\n", ProtocolError::BadLength { what: "bulk" }),
            (b"*1\r\n$3\r\nabcXY", ProtocolError::Unexpected { expected: "CRLF", found: b'X' }),
            (b"*99999999999999999999999\r\n", ProtocolError::BadLength { what: "multibulk" }),
            (&[b'*'; 40], ProtocolError::BadLength { what: "multibulk" }),
        ];
        for (input, want) in cases {
            assert_eq!(parse_all(input, Limits::default()).unwrap_err(), *want, "{input:?}");
        }
    }

    #[test]
    fn claims_over_the_limits_are_refused_at_the_header() {
        let huge = format!("*2\r\n$3\r\nSET\r\n${}\r\n", 512u64 << 20);
        assert_eq!(
            parse_all(huge.as_bytes(), Limits::default()).unwrap_err(),
            ProtocolError::BulkTooLong { len: 512 << 20, max: REQUEST_BYTES_MAX_DEFAULT }
        );
        let limits = Limits { array_len_max: 4, bulk_bytes_max: 100, request_bytes_max: 40 };
        assert!(matches!(
            parse_all(b"*5\r\n", limits).unwrap_err(),
            ProtocolError::ArrayTooLong { len: 5, max: 4 }
        ));
        assert!(matches!(
            parse_all(b"*2\r\n$3\r\nGET\r\n$30\r\n", limits).unwrap_err(),
            ProtocolError::RequestTooLarge { max: 40 }
        ));
        assert!(matches!(
            parse_all(&[b'a'; INLINE_BYTES_MAX + 1], limits).unwrap_err(),
            ProtocolError::InlineTooLong { max: 40 }
        ));
        assert!(matches!(
            parse_all(b"a b c d e\r\n", limits).unwrap_err(),
            ProtocolError::ArrayTooLong { len: 5, max: 4 }
        ));
    }

    #[test]
    fn before_auth_the_bounds_are_redis_s_until_lifted() {
        let limits = Limits::default();
        let parse = |p: &mut RequestParser, input: &[u8]| {
            let mut took = 0;
            p.next(input, &mut took)
        };
        let mut p = RequestParser::before_auth(limits);
        let eleven = format!("*{}\r\n", UNAUTHENTICATED_ARRAY_LEN_MAX + 1);
        assert_eq!(
            parse(&mut p, eleven.as_bytes()).unwrap_err(),
            ProtocolError::Unauthenticated { what: "multibulk" }
        );
        let mut p = RequestParser::before_auth(limits);
        let words = ["a"; UNAUTHENTICATED_ARRAY_LEN_MAX + 1].join(" ") + "\r\n";
        assert_eq!(
            parse(&mut p, words.as_bytes()).unwrap_err(),
            ProtocolError::Unauthenticated { what: "multibulk" }
        );
        let mut p = RequestParser::before_auth(limits);
        let big = format!("*2\r\n$4\r\nAUTH\r\n${}\r\n", UNAUTHENTICATED_BULK_BYTES_MAX + 1);
        assert_eq!(
            parse(&mut p, big.as_bytes()).unwrap_err(),
            ProtocolError::Unauthenticated { what: "bulk" }
        );
        // At the bounds, and past them once lifted.
        let mut p = RequestParser::before_auth(limits);
        let value = vec![b'x'; UNAUTHENTICATED_BULK_BYTES_MAX];
        let mut ok = format!("*2\r\n$4\r\nAUTH\r\n${}\r\n", value.len()).into_bytes();
        ok.extend_from_slice(&value);
        ok.extend_from_slice(b"\r\n");
        assert!(parse(&mut p, &ok).unwrap().is_some());
        p.authenticated();
        assert!(parse(&mut p, big.as_bytes()).unwrap().is_none(), "waits for the bytes");
        // The configured bounds still win where they are lower.
        let small = Limits { array_len_max: 4, bulk_bytes_max: 100, request_bytes_max: 400 };
        let mut p = RequestParser::before_auth(small);
        assert!(matches!(
            parse(&mut p, b"*5\r\n").unwrap_err(),
            ProtocolError::ArrayTooLong { len: 5, max: 4 }
        ));
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let alphabet = b"*$\r\n0123-9abc ";
        for _ in 0..20_000 {
            let mut input = Vec::new();
            for _ in 0..(x % 40) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                input.push(alphabet[(x % alphabet.len() as u64) as usize]);
            }
            let _ = parse_all(&input, Limits::default());
        }
    }

    #[test]
    fn replies_encode_per_protocol() {
        let reply = Reply::Array(vec![
            Reply::OK,
            Reply::Int(-3),
            Reply::Bulk(b"a\r\nb".to_vec()),
            Reply::Null,
            Reply::Map(vec![(Reply::text("k"), Reply::Double(1.5))]),
            Reply::err("bad\r\nline"),
        ]);
        let mut two = Vec::new();
        reply.encode(Protocol::Resp2, &mut two);
        assert_eq!(
            two,
            b"*6\r\n+OK\r\n:-3\r\n$4\r\na\r\nb\r\n$-1\r\n*2\r\n$1\r\nk\r\n$3\r\n1.5\r\n-ERR bad  line\r\n"
        );
        let mut three = Vec::new();
        reply.encode(Protocol::Resp3, &mut three);
        assert_eq!(
            three,
            b"*6\r\n+OK\r\n:-3\r\n$4\r\na\r\nb\r\n_\r\n%1\r\n$1\r\nk\r\n,1.5\r\n-ERR bad  line\r\n"
        );
    }
}
