//! The process's memory, measured for INFO's memory section: the resident set from
//! `/proc/self/statm`, its peak from `/proc/self/status`, the machine's memory from
//! `sysconf`.

/// Bytes of this process resident in memory now (`/proc/self/statm`'s second field, in
/// pages); `None` where it cannot be read.
pub fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * page_bytes()?)
}

/// The most bytes this process has had resident (`VmHWM`); `None` where it cannot be read.
pub fn peak_resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line["VmHWM:".len()..].trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(kib * 1024)
}

/// The machine's memory in bytes.
pub fn total_system_bytes() -> Option<u64> {
    // SAFETY: sysconf only reads a system setting.
    let pages = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
    u64::try_from(pages).ok().and_then(|p| Some(p * page_bytes()?))
}

fn page_bytes() -> Option<u64> {
    // SAFETY: sysconf only reads a system setting.
    u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()
}

/// Bytes as Redis writes them for people (`bytesToHuman`): `1003B`, `4.03K`, `100.00M`,
/// `2.32G`, with binary units.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["K", "M", "G", "T", "P"];
    if bytes < 1024 {
        return format!("{bytes}B");
    }
    let mut d = bytes as f64 / 1024.0;
    for unit in UNITS {
        if d < 1024.0 || unit == "P" {
            return format!("{d:.2}{unit}");
        }
        d /= 1024.0;
    }
    unreachable!("the last unit returns")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_read_as_redis_writes_them() {
        assert_eq!(human(0), "0B");
        assert_eq!(human(1003), "1003B");
        assert_eq!(human(4130), "4.03K");
        assert_eq!(human(100 << 20), "100.00M");
        assert_eq!(human(5 << 40), "5.00T");
    }

    #[test]
    fn the_process_is_measured() {
        let rss = resident_bytes().unwrap();
        assert!(rss > 0);
        // The peak is a running maximum read after the resident set: at least what it was.
        assert!(peak_resident_bytes().unwrap() >= rss);
        assert!(total_system_bytes().unwrap() > rss);
    }
}
