//! Each engine's error names a cause once: `Display` says what failed, `source()` gives the
//! cause, and a chain printed whole (`shale::io::Chain`) shows the operating system's error
//! exactly once. Was: the engines' `Space`/`Io` variants printed the lower layer's message in
//! `Display` and returned that same error from `source()`, and the io layer printed the OS
//! error in `Display` and returned it from `source()`, so an anyhow-style report named the
//! OS error up to three times.

use std::error::Error as StdError;

use shale::io::Chain;

/// Every message in the chain of `e`, outermost first.
fn messages(e: &(dyn StdError + 'static)) -> Vec<String> {
    let mut out = vec![e.to_string()];
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push(c.to_string());
        cause = c.source();
    }
    out
}

/// The OS error's text appears in exactly one message of the chain, and the whole chain names
/// the path once.
fn assert_cause_once(engine: &str, e: &(dyn StdError + 'static), path: &std::path::Path) {
    let os = std::io::Error::from_raw_os_error(libc_enotdir()).to_string();
    let chain = messages(e);
    let with_os = chain.iter().filter(|m| m.contains(&os)).count();
    assert_eq!(with_os, 1, "{engine}: the OS error once in the chain {chain:?}");
    let line = Chain(e).to_string();
    assert_eq!(line.matches(&os).count(), 1, "{engine}: {line}");
    assert_eq!(line.matches(&path.display().to_string()).count(), 1, "{engine}: {line}");
    assert!(!e.to_string().contains(&os), "{engine}: Display names what failed only: {e}");
}

/// ENOTDIR, without a libc dependency: Linux's number.
fn libc_enotdir() -> i32 {
    20
}

#[test]
fn each_engine_names_the_os_error_once() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    // A store under a regular file: creating its directory fails with ENOTDIR.
    let path = file.join("store");

    let e = shale::Db::open(&path, shale::Options::small_for_tests()).err().expect("lsm refuses");
    assert_cause_once("lsm", &e, &path);

    let e = shale::hash::HashStore::open(&path, shale::hash::HashOptions::default())
        .expect_err("hash refuses");
    assert_cause_once("hash", &e, &path);

    let e = shale::table::TableStore::open(&path, shale::table::TableOptions::default())
        .expect_err("table refuses");
    assert_cause_once("table", &e, &path);
}
