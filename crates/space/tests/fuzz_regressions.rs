//! Replays every input under `fuzz/regressions/<target>/` through the same checks as the
//! cargo-fuzz targets, so inputs a fuzzer once found keep being tested on stable Rust without
//! cargo-fuzz. A check panics when a property breaks, which fails the test.

#[path = "../../../fuzz/src/checks.rs"]
mod checks;

use std::path::{Path, PathBuf};

/// The fuzz targets, named as in `fuzz/Cargo.toml`.
const TARGETS: [&str; 4] = ["log_object", "version_record", "format_header", "version_log_scan"];

fn regressions_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions").join(target)
}

/// The files of a target's regression directory, sorted by name.
fn inputs(target: &str) -> Vec<PathBuf> {
    let dir = regressions_dir(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

fn replay(target: &str, check: fn(&[u8])) {
    let files = inputs(target);
    assert!(!files.is_empty(), "no regression inputs for fuzz target {target}");
    for file in files {
        let data = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        eprintln!("{target}: {}", file.display());
        check(&data);
    }
}

#[test]
fn log_object_regressions() {
    replay("log_object", checks::log_object);
}

#[test]
fn version_record_regressions() {
    replay("version_record", checks::version_record);
}

#[test]
fn format_header_regressions() {
    replay("format_header", checks::format_header);
}

#[test]
fn version_log_scan_regressions() {
    replay("version_log_scan", checks::version_log_scan);
}

/// The committed seed inputs are the ones `checks::seeds` generates, so a format change that
/// makes them stale is noticed. `SHALE_WRITE_FUZZ_SEEDS=1` (re)writes them instead.
#[test]
fn committed_seeds_match_the_generator() {
    let write = std::env::var_os("SHALE_WRITE_FUZZ_SEEDS").is_some();
    for (target, name, bytes) in checks::seeds() {
        assert!(TARGETS.contains(&target), "seed for unknown target {target}");
        let path = regressions_dir(target).join(format!("seed-{name}"));
        if write {
            std::fs::create_dir_all(path.parent().unwrap()).expect("create regressions dir");
            std::fs::write(&path, &bytes).expect("write seed");
            continue;
        }
        let committed = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            committed == bytes,
            "{} is stale; rerun with SHALE_WRITE_FUZZ_SEEDS=1",
            path.display()
        );
    }
}
