//! fio's random-read IOPS on a store's own file: the device's limit that a many-reader
//! readrandom is held against (issue #14, regime (c): 16 readers reach at least 70% of fio's
//! 4 KiB random reads at the same queue depth on the same file).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Error;

/// Seconds fio reads for.
const SECONDS: u32 = 20;

/// 4 KiB random reads with O_DIRECT through io_uring at queue depth `depth`, for
/// [`SECONDS`], on the largest file under `store` (shale's volume file), read-only.
///
/// # Errors
/// No file under `store`, fio missing or failing, or output without a read IOPS figure.
pub fn random_read_iops(store: &Path, depth: usize) -> Result<f64, Error> {
    let file = largest_file(store)?.ok_or_else(|| format!("no file under {}", store.display()))?;
    let out = Command::new("fio")
        .args([
            "--name=randread",
            "--readonly",
            "--rw=randread",
            "--bs=4k",
            "--direct=1",
            "--ioengine=io_uring",
            &format!("--iodepth={depth}"),
            &format!("--runtime={SECONDS}"),
            "--time_based",
            "--output-format=json",
        ])
        .arg(format!("--filename={}", file.display()))
        .output()
        .map_err(|e| format!("fio: {e} (bench/compare.sh installs it)"))?;
    if !out.status.success() {
        return Err(format!("fio: {}", String::from_utf8_lossy(&out.stderr).trim()).into());
    }
    read_iops(&String::from_utf8_lossy(&out.stdout))
        .ok_or_else(|| "fio printed no read IOPS".into())
}

/// The first job's `"read": {... "iops": N ...}` from fio's JSON output.
fn read_iops(json: &str) -> Option<f64> {
    let read = &json[json.find("\"read\"")?..];
    let iops = &read[read.find("\"iops\"")? + "\"iops\"".len()..];
    let value = iops.trim_start().strip_prefix(':')?.trim_start();
    let end = value.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(value.len());
    value[..end].parse().ok()
}

fn largest_file(dir: &Path) -> Result<Option<PathBuf>, Error> {
    let mut best: Option<(u64, PathBuf)> = None;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        let candidate = if meta.is_dir() {
            largest_file(&entry.path())?.map(|p| (std::fs::metadata(&p).map_or(0, |m| m.len()), p))
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
}
