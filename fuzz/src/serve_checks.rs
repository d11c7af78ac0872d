//! Checks of the `shale-serve` fuzz targets. `resp` is `crates/serve/src/resp.rs`, included
//! by path in `lib.rs` (the file depends on nothing but std, so the fuzz crate needs no tokio),
//! and imported from `shale_serve` by `crates/serve/tests/fuzz_regressions.rs`, which replays
//! `fuzz/regressions/resp_request/` through the same check on stable Rust.

use super::resp::{Limits, ProtocolError, Request, RequestParser};

/// Requests parsed from `input` fed in two pieces, split at `split`: every request taken,
/// then the first error if one came (parsing stops there, as a connection closes).
fn parse_in_two(
    input: &[u8],
    split: usize,
    limits: Limits,
) -> (Vec<Request>, Option<ProtocolError>) {
    let mut parser = RequestParser::new(limits);
    let mut buf = input[..split].to_vec();
    let mut got = Vec::new();
    for rest in [&input[split..], &[][..]] {
        // Every call takes bytes or ends the loop: bounded by the input's length.
        for _ in 0..=input.len() + 1 {
            let mut took = 0;
            let parsed = parser.next(&buf, &mut took);
            assert!(took <= buf.len(), "took {took} of {} bytes", buf.len());
            buf.drain(..took);
            match parsed {
                Ok(Some(request)) => {
                    assert!(!request.is_empty(), "a request without a command name");
                    got.push(request);
                }
                Ok(None) => break,
                Err(e) => return (got, Some(e)),
            }
        }
        buf.extend_from_slice(rest);
    }
    (got, None)
}

/// Fuzz target `resp_request`: the first byte picks the parser's limits and where the rest is
/// split. Parsing never panics or loops; the requests and the error are the same whether the
/// input arrives whole or in two pieces; every request parsed within the limits; and each
/// request, encoded again as an array of bulk strings, parses back to itself.
pub fn resp_request(data: &[u8]) {
    let Some((&flags, input)) = data.split_first() else { return };
    let limits = Limits {
        array_len_max: 1 + usize::from(flags & 7) * 3,
        bulk_bytes_max: 8 << ((flags >> 3) & 3),
        request_bytes_max: 48 << ((flags >> 5) & 3),
    };
    let (whole, whole_error) = parse_in_two(input, input.len(), limits);
    let split = (usize::from(flags) * 31 + input.len() / 2) % (input.len() + 1);
    let (pieces, pieces_error) = parse_in_two(input, split, limits);
    assert_eq!(whole, pieces, "split at {split}");
    assert_eq!(whole_error, pieces_error, "split at {split}");
    for request in &whole {
        assert!(request.len() <= limits.array_len_max, "{} arguments", request.len());
        let mut encoded = format!("*{}\r\n", request.len()).into_bytes();
        for arg in request {
            encoded.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            encoded.extend_from_slice(arg);
            encoded.extend_from_slice(b"\r\n");
        }
        let (again, error) = parse_in_two(&encoded, encoded.len(), Limits::default());
        assert_eq!(error, None);
        assert_eq!(again, std::slice::from_ref(request));
    }
}

/// Seed inputs: well-formed pipelines, inline commands, and each kind of malformed input.
pub fn seeds() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let with = |flags: u8, body: &[u8]| [&[flags][..], body].concat();
    vec![
        (
            "resp_request",
            "pipeline",
            with(0xff, b"*2\r\n$3\r\nGET\r\n$1\r\na\r\n*1\r\n$4\r\nPING\r\n"),
        ),
        ("resp_request", "inline", with(0x12, b"SET a b\r\n\r\nGET a\nPING")),
        ("resp_request", "empty-arrays", with(0x07, b"*0\r\n*-1\r\n*1\r\n$0\r\n\r\n")),
        ("resp_request", "bulk-too-long", with(0x00, b"*1\r\n$536870912\r\n")),
        ("resp_request", "array-too-long", with(0x00, b"*9\r\n")),
        ("resp_request", "not-a-bulk", with(0x3f, b"*1\r\n:1\r\n")),
        ("resp_request", "missing-crlf", with(0x3f, b"*1\r\n$1\r\nabc")),
        ("resp_request", "bad-length", with(0x3f, b"*1\r\n$-5\r\nabc\r\n")),
        ("resp_request", "long-header", with(0x3f, &[b'*'; 40])),
    ]
}
