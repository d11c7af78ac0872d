//! fio's random-read IOPS beside a store: the device's limit that a many-reader readrandom is
//! held against (issue #14, regime (c): 16 readers reach at least 70% of fio's 4 KiB random
//! reads at the same queue depth on the same file).
//!
//! fio does not read the store's own file: shale's volume file is sparse (free slots have no
//! storage, and a file device grows without giving its new range any), and a read of a hole
//! or of an unwritten extent returns zeros without touching the device. On a 2.1 GB volume
//! holding 0.9 GB of SSTs, fio read at 154k IOPS, against 71k on a file written whole on the
//! same file system. So fio reads a file written whole beside the store, as large as the
//! storage the store's largest file holds (at least 64 MiB), and deletes it after.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::Error;

/// Seconds fio reads for.
const SECONDS: u32 = 20;
/// The smallest file fio reads.
const BYTES_MIN: u64 = 64 << 20;
/// The file fio writes and reads, in the store's directory.
const SCRATCH_NAME: &str = "fio-randread.data";

/// 4 KiB random reads with O_DIRECT through io_uring at queue depth `depth`, for
/// [`SECONDS`], on a file written whole in `store` as large as the storage of its largest
/// file (shale's volume file).
///
/// # Errors
/// No file under `store`, fio missing or failing, or output without a read IOPS figure.
pub fn random_read_iops(store: &Path, depth: usize) -> Result<f64, Error> {
    random_read_iops_for(store, depth, SECONDS)
}

fn random_read_iops_for(store: &Path, depth: usize, seconds: u32) -> Result<f64, Error> {
    let file = largest_file(store)?.ok_or_else(|| format!("no file under {}", store.display()))?;
    // st_blocks counts 512-byte units whatever the file system's block size.
    let stored = std::fs::metadata(&file)?.blocks() * 512;
    let bytes = (stored >> 20 << 20).max(BYTES_MIN);
    let scratch = store.join(SCRATCH_NAME);
    let result = write_then_read(&scratch, bytes, depth, seconds);
    let _ = std::fs::remove_file(&scratch);
    result
}

fn write_then_read(scratch: &Path, bytes: u64, depth: usize, seconds: u32) -> Result<f64, Error> {
    let path = format!("--filename={}", scratch.display());
    let size = format!("--size={bytes}");
    fio(
        &["--name=write", "--rw=write", "--bs=1M", "--direct=1", "--ioengine=io_uring"],
        &["--iodepth=4", &size, &path],
    )?;
    let out = fio(
        &[
            "--name=randread",
            "--readonly",
            "--rw=randread",
            "--bs=4k",
            "--direct=1",
            "--ioengine=io_uring",
            "--time_based",
            "--output-format=json",
        ],
        &[&format!("--iodepth={depth}"), &format!("--runtime={seconds}"), &size, &path],
    )?;
    read_iops(&String::from_utf8_lossy(&out.stdout))
        .ok_or_else(|| "fio printed no read IOPS".into())
}

fn fio(fixed: &[&str], args: &[&str]) -> Result<Output, Error> {
    let out = Command::new("fio")
        .args(fixed)
        .args(args)
        .output()
        .map_err(|e| format!("fio: {e} (bench/compare.sh installs it)"))?;
    if !out.status.success() {
        return Err(format!("fio: {}", String::from_utf8_lossy(&out.stderr).trim()).into());
    }
    Ok(out)
}

/// The first job's `"read": {... "iops": N ...}` from fio's JSON output.
fn read_iops(json: &str) -> Option<f64> {
    let read = &json[json.find("\"read\"")?..];
    let iops = &read[read.find("\"iops\"")? + "\"iops\"".len()..];
    let value = iops.trim_start().strip_prefix(':')?.trim_start();
    let end = value.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(value.len());
    value[..end].parse().ok()
}

/// The largest file under `dir`, fio's own scratch file left by a killed run excepted.
fn largest_file(dir: &Path) -> Result<Option<PathBuf>, Error> {
    let mut best: Option<(u64, PathBuf)> = None;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        let candidate = if meta.is_dir() {
            largest_file(&entry.path())?.map(|p| (std::fs::metadata(&p).map_or(0, |m| m.len()), p))
        } else if entry.file_name() == SCRATCH_NAME {
            None
        } else {
            Some((meta.len(), entry.path()))
        };
        if let Some(c) = candidate
            && best.as_ref().is_none_or(|b| c.0 > b.0)
        {
            best = Some(c);
        }
    }
    Ok(best.map(|(_, p)| p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_iops_comes_from_the_read_section() {
        let json = r#"{"jobs":[{"jobname":"randread","read":{"io_bytes":1,"bw":10,"iops":23456.789012,"runtime":20},"write":{"iops":0.0}}]}"#;
        assert_eq!(read_iops(json), Some(23456.789012));
        assert_eq!(read_iops(r#"{"write":{"iops":5}}"#), None);
    }

    #[test]
    fn fio_reads_a_written_file_as_large_as_the_stores_storage_and_removes_it() {
        if Command::new("fio").arg("--version").output().is_err() {
            eprintln!("fio is not installed (bench/compare.sh installs it): skipped");
            return;
        }
        let dir = std::env::temp_dir().join(format!("shale-compare-fio-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A sparse 1 GiB "volume" with 80 MiB written.
        let volume = std::fs::File::create(dir.join("volume.shale")).unwrap();
        volume.set_len(1 << 30).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&volume, &vec![7u8; 80 << 20], 0).unwrap();
        volume.sync_all().unwrap();
        let stored = volume.metadata().unwrap().blocks() * 512;
        assert!(stored < 128 << 20, "the volume is sparse: {stored}");
        let iops = random_read_iops_for(&dir, 4, 1);
        let left: Vec<_> =
            std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(iops.unwrap() > 0.0);
        assert_eq!(left, vec![std::ffi::OsString::from("volume.shale")]);
    }
}
