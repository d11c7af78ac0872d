//! Format fixtures: small stores written by an earlier build, committed, and opened by every
//! later one (docs/testing.md, "Format fixtures").
//!
//! A fixture is one directory of volume files packed as a GNU tar archive with its holes
//! recorded (`tar --sparse`, holes found by reading: `--hole-detection=raw`), compressed with
//! zstd: `<crate>/tests/fixtures/format-<volume format>/<name>.tar.zst`. The archive is
//! deterministic (entries sorted by name, times, owners and modes fixed), so a regenerated
//! fixture differs only where the engine wrote different bytes. By hand:
//! `zstd -dc lsm.tar.zst | tar -xf - -C DIR`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// zstd's level for fixtures: they are written once and read by every test run.
const ZSTD_LEVEL: i32 = 19;

/// The directory of a crate's fixtures of volume format `format`:
/// `<manifest_dir>/tests/fixtures/format-<format>`.
pub fn dir(manifest_dir: &str, format: u32) -> PathBuf {
    Path::new(manifest_dir).join("tests/fixtures").join(format!("format-{format}"))
}

/// Packs the directory `src` (its files and directories, recursively) into the archive
/// `archive`, and returns the archive's size in bytes. Refuses to replace an archive that
/// exists: a committed fixture is never rewritten (a new format gets a new fixture beside
/// it), so one that is there must be removed by hand, knowingly.
///
/// # Panics
/// When the archive exists, `tar` cannot be run or fails, or a write fails (this is a test
/// helper: the panic is the report).
pub fn pack(src: &Path, archive: &Path) -> u64 {
    assert!(
        !archive.exists(),
        "{} exists: a committed fixture is never regenerated; a format change adds a new fixture \
         beside it (docs/testing.md, \"Format fixtures\")",
        archive.display()
    );
    let out = Command::new("tar")
        .args([
            "--create",
            "--file=-",
            "--format=gnu",
            "--sparse",
            "--hole-detection=raw",
            "--sort=name",
            "--mtime=@0",
            "--owner=0",
            "--group=0",
            "--numeric-owner",
            "--mode=u=rwX,go=rX",
            "--directory",
        ])
        .arg(src)
        .arg(".")
        .stderr(Stdio::inherit())
        .output()
        .expect("run tar (GNU tar is needed to pack a fixture)");
    assert!(out.status.success(), "tar --create of {} failed: {}", src.display(), out.status);
    let packed = zstd::encode_all(&out.stdout[..], ZSTD_LEVEL).expect("zstd");
    if let Some(parent) = archive.parent() {
        std::fs::create_dir_all(parent).expect("create the fixture directory");
    }
    std::fs::write(archive, &packed).expect("write the fixture");
    packed.len() as u64
}

/// Unpacks the archive `archive` into the directory `dest` (which must exist), holes as holes.
///
/// # Panics
/// When the archive cannot be read or decompressed, or `tar` cannot be run or fails.
pub fn unpack(archive: &Path, dest: &Path) {
    let packed = std::fs::read(archive)
        .unwrap_or_else(|e| panic!("read the fixture {}: {e}", archive.display()));
    let tar = zstd::decode_all(&packed[..])
        .unwrap_or_else(|e| panic!("decompress the fixture {}: {e}", archive.display()));
    let mut child = Command::new("tar")
        .args(["--extract", "--file=-", "--no-same-owner", "--directory"])
        .arg(dest)
        .stdin(Stdio::piped())
        .spawn()
        .expect("run tar (GNU tar or bsdtar is needed to unpack a fixture)");
    child.stdin.take().expect("tar's stdin").write_all(&tar).expect("feed tar");
    let status = child.wait().expect("wait for tar");
    assert!(status.success(), "tar --extract of {} failed: {status}", archive.display());
}

/// Every archive under `<crate>/tests/fixtures/format-<N>/` as (N, name), sorted: what a
/// crate's fixture list must name in full (an archive nobody reads protects nothing).
///
/// # Panics
/// On a directory there that is not `format-<N>`.
pub fn all_archives(crate_dir: &str) -> Vec<(u32, String)> {
    let root = Path::new(crate_dir).join("tests/fixtures");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&root).unwrap() {
        let dir = entry.unwrap().path();
        let format: u32 = dir
            .file_name()
            .and_then(|n| n.to_str()?.strip_prefix("format-")?.parse().ok())
            .unwrap_or_else(|| panic!("{}: not a format-<N> directory", dir.display()));
        found.extend(archives_in(&dir).into_iter().map(|n| (format, n)));
    }
    found.sort();
    found
}

/// The names of the archives (`*.tar.zst`) in `dir`, sorted; none when it does not exist.
pub fn archives_in(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".tar.zst"))
        .collect();
    names.sort();
    names
}
