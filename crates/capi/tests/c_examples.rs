//! The C examples, compiled with the system's C compiler (`$CC`, else `cc`) against the
//! header build.rs generated and the library this very `cargo test` built, then run on a
//! temporary directory: their exit code and what they print are checked.
//!
//! Where the library is: `cargo test` compiles the crate's library unit once for all its
//! crate types, into the folder of the test binary itself (`target/<profile>/deps/`, where
//! a cdylib and a staticlib get no hash in their names: `libshale.so`, `libshale.a`), as
//! fresh as the rlib the tests link. (`cargo build` writes the same names there and copies
//! them up to `target/<profile>/`.) Every example links the cdylib, with an rpath to it; the
//! lsm and table examples also link the staticlib, with the native libraries rustc names
//! for it (`--print native-static-libs`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The header build.rs generated for this build (the committed `include/shale.h` is
/// checked against it in `header.rs`).
const HEADER_DIR: &str = env!("OUT_DIR");

/// The test binary's folder, `target/<profile>/deps/`, where this build's library lies.
fn deps_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent().expect("target/<profile>/deps/<test>").to_path_buf()
}

fn library(name: &str) -> PathBuf {
    let path = deps_dir().join(name);
    assert!(
        path.exists(),
        "{} is missing: cargo builds it with the crate's library for the tests",
        path.display()
    );
    path
}

fn example_source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/c").join(format!("{name}.c"))
}

enum Link {
    Dynamic,
    Static,
}

/// Compiles `examples/c/<name>.c` into `dir`; returns the executable.
fn compile(name: &str, link: Link, dir: &Path) -> PathBuf {
    let exe = dir.join(name);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let mut cmd = Command::new(&cc);
    cmd.args(["-std=c11", "-D_DEFAULT_SOURCE", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(HEADER_DIR)
        .arg(example_source(name))
        .arg("-o")
        .arg(&exe);
    match link {
        Link::Dynamic => {
            let lib_dir = library("libshale.so").parent().unwrap().to_path_buf();
            cmd.arg("-L")
                .arg(&lib_dir)
                .arg("-lshale")
                .arg(format!("-Wl,-rpath,{}", lib_dir.display()));
        }
        Link::Static => {
            cmd.arg(library("libshale.a"));
            cmd.args(["-lgcc_s", "-lutil", "-lrt", "-lpthread", "-lm", "-ldl", "-lc"]);
        }
    }
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run the C compiler {cc}: {e}"));
    assert!(
        out.status.success(),
        "{cc} failed on {name}.c:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Runs an example on a new store directory; returns its standard output.
fn run(exe: &Path, dir: &Path) -> String {
    let store = dir.join("store");
    let out = Command::new(exe).arg(&store).output().expect("the example runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{} exited with {}:\nstdout:\n{stdout}\nstderr:\n{}",
        exe.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn assert_lines(stdout: &str, lines: &[&str]) {
    for line in lines {
        assert!(stdout.lines().any(|l| l == *line), "no line {line:?} in:\n{stdout}");
    }
}

#[test]
fn kvs_example_runs_against_the_cdylib() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile("kvs_example", Link::Dynamic, dir.path());
    let stdout = run(&exe, dir.path());
    assert_lines(
        &stdout,
        &[
            "retrieve user:1: ada lovelace",
            "buffer too small: 8 bytes needed",
            "retrieve user:1 from 4: lovelace",
            "exist user:1 user:2: bits 0x01",
            "delete user:1: existed 1",
            "async stores: 16 ok",
            "async retrieve tag 100: value-7",
            "async exist tag 102: bits 0x05",
            "async delete tag 103: existed 1",
            "async: 3 ok, 1 not found",
            "iterate item: 15 keys, 111 value bytes",
            "bounded index: key:042=value-42, in-memory open refused",
            "set of 2, round 0: set:17=v17, 39 keys",
            "set of 2, round 1: set:17=v17, 39 keys",
            "kvs example: ok",
        ],
    );
}

const DB_LINES: &[&str] = &[
    "get banana: yellow",
    "get durian: (absent)",
    "batch of 2",
    "get apple: (absent)",
    "get durian: green",
    "get elderberry at snapshot: (absent)",
    "get banana at snapshot: yellow",
    "get banana: (absent)",
    "snapshot: banana=yellow cherry=dark red durian=green",
    "now: cherry=dark red durian=green elderberry=black",
    "now backward: elderberry=black durian=green cherry=dark red",
    "seek d: durian",
    "bounded: cherry=dark red durian=green",
    "db example: ok",
];

#[test]
fn db_example_runs_against_the_cdylib() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile("db_example", Link::Dynamic, dir.path());
    assert_lines(&run(&exe, dir.path()), DB_LINES);
}

#[test]
fn db_example_runs_against_the_staticlib() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile("db_example", Link::Static, dir.path());
    assert_lines(&run(&exe, dir.path()), DB_LINES);
}

const TABLE_LINES: &[&str] = &[
    "create cities again: SHALE_TABLE_EXISTS",
    "insert 0001 again: SHALE_KEY_EXISTS",
    "insert a 5-byte id: SHALE_WRONG_SIZE",
    "select 0002: 1 row, city Kyoto",
    "select 0009: (absent)",
    "city of 0001: Lyon (Rhone)",
    "update a missing column: SHALE_NO_SUCH_COLUMN",
    "city of 0003: Quito",
    "city of 0005: (absent)",
    "population of 0003: 02011388",
    "scan ..: 0001=Lyon (Rhone) 0002=Kyoto 0003=Quito 0006=Accra",
    "scan 0002..0004: 0002=Kyoto 0003=Quito",
    "drop scratch again: SHALE_NO_SUCH_TABLE",
    "reopened: cities is table 1",
    "population of 0002: 01464890",
    "table example: ok",
];

#[test]
fn table_example_runs_against_the_cdylib() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile("table_example", Link::Dynamic, dir.path());
    assert_lines(&run(&exe, dir.path()), TABLE_LINES);
}

#[test]
fn table_example_runs_against_the_staticlib() {
    let dir = tempfile::tempdir().unwrap();
    let exe = compile("table_example", Link::Static, dir.path());
    assert_lines(&run(&exe, dir.path()), TABLE_LINES);
}
