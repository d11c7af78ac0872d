//! Issue #42: one spelling rule for the flags (docs/cli.md, "Flag names"); a flag renamed to
//! follow it still runs under its old spelling, with a warning naming the new one.

#[path = "common/child.rs"]
mod child;

#[test]
fn old_spellings_run_with_a_warning_and_new_ones_without() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f").display().to_string();
    let common = [
        "--path",
        &file,
        "--pattern",
        "randwrite",
        "--seconds",
        "0.1",
        "--size",
        "1m",
        "--overwrite",
    ];
    let old = child::run(
        &[&["iobench"][..], &common[..], &["--queue-depth", "2", "--block-size=8k"][..]].concat(),
    );
    old.assert_ok("iobench with the old spellings");
    for (was, now) in [("--queue-depth", "--queue_depth"), ("--block-size", "--block_size")] {
        let warning = format!("{was} is spelled {now} now");
        assert_eq!(old.stderr.matches(&warning).count(), 1, "{}", old.stderr);
    }
    let new = child::run(
        &[&["iobench"][..], &common[..], &["--queue_depth", "2", "--block_size=8k"][..]].concat(),
    );
    new.assert_ok("iobench with the new spellings");
    assert!(!new.stderr.contains("is spelled"), "{}", new.stderr);
    // The same request either way: 8 KiB blocks (its MB/s over its IOPS, both rounded:
    // within a fifth, which tells 8 KiB from the default 4 KiB).
    for out in [&old.stdout, &new.stdout] {
        let number_before = |unit: &str| -> f64 {
            let at = out.find(unit).unwrap_or_else(|| panic!("no {unit} in {out}"));
            out[..at].trim_end().rsplit([' ', ',', ':']).next().unwrap().parse().unwrap()
        };
        let bytes = number_before(" MB/s") * 1e6 / number_before(" IOPS");
        assert!((bytes - 8192.0).abs() < 8192.0 * 0.2, "{bytes} bytes per request: {out}");
    }
}
