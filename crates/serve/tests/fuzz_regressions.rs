//! Replays every input under `fuzz/regressions/resp_request/` through the check of the
//! cargo-fuzz target `resp_request` (the same file), on stable Rust, plus inputs made here
//! from a seeded generator. The check panics when a property breaks, which fails the test.

use shale_serve::resp;

#[path = "../../../fuzz/src/serve_checks.rs"]
mod serve_checks;

#[test]
fn resp_request_regressions() {
    shale_testkit::fuzz_regressions::replay("resp_request", serve_checks::resp_request);
}

/// The committed seed inputs are the ones `serve_checks::seeds` generates.
/// `SHALE_WRITE_FUZZ_SEEDS=1` (re)writes them instead.
#[test]
fn committed_seeds_match_the_generator() {
    shale_testkit::fuzz_regressions::check_seeds(&["resp_request"], serve_checks::seeds());
}

/// Inputs built from RESP's own bytes, so that most reach deep into the grammar.
#[test]
fn generated_inputs_keep_the_properties() {
    let pieces: [&[u8]; 12] =
        [b"*", b"$", b"\r\n", b"1", b"3", b"-1", b"0", b"GET", b"a", b" ", b"\n", b"99"];
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for _ in 0..20_000 {
        let mut input = Vec::new();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        input.push(x as u8);
        for _ in 0..(x >> 8) % 24 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            input.extend_from_slice(pieces[(x % pieces.len() as u64) as usize]);
        }
        serve_checks::resp_request(&input);
    }
}
