//! A store that `shale bench` filled, given to `shale serve --db`, is refused at start with
//! a message saying it is not serve's, instead of answering every command with a corruption
//! error; it is left as it was: a second start is refused the same way (no marker was
//! written), and bench still reads it.

mod common;

use common::shale;

#[test]
fn a_bench_store_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("bench");
    let db = db.to_str().unwrap();
    let sock = dir.path().join("s.sock");
    let sock = sock.to_str().unwrap();
    let (ok, _, err) =
        shale(&["bench", &format!("--db={db}"), "--num=3000", "--benchmarks=fillseq"]);
    assert!(ok, "{err}");
    for _ in 0..2 {
        let (ok, out, err) = shale(&["serve", "--db", db, "--port", "0", "--unixsocket", sock]);
        assert!(!ok, "served a bench store: {out}");
        assert!(err.contains(&format!("--db {db}")), "{err}");
        assert!(err.contains("not a store of shale serve"), "{err}");
        assert!(err.contains("left untouched"), "{err}");
        assert!(!err.contains("ERR corruption"), "{err}");
    }
    let (ok, out, err) = shale(&[
        "bench",
        &format!("--db={db}"),
        "--num=3000",
        "--use_existing_db",
        "--benchmarks=readseq",
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("readseq"), "{out}");
}
