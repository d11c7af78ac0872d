//! `shale bench` run as a program: db_bench's output shape, exit codes, and flag errors.

mod common;

fn shale_bench(flags: &[&str]) -> (bool, String, String) {
    let args: Vec<&str> = std::iter::once("bench").chain(flags.iter().copied()).collect();
    common::shale(&args)
}

/// db_bench's result line: `%-12s : %11.3f micros/op %ld ops/sec %.3f seconds %ld operations;`
/// then optional ` %6.1f MB/s` and ` (N of M found)`.
const RESULT_LINE: &str = r"^[a-z]+ {0,11} : [ 0-9]{7,}\.[0-9]{3} micros/op [0-9]+ ops/sec [0-9]+\.[0-9]{3} seconds [0-9]+ operations;( [ 0-9]{4,}\.[0-9] MB/s)?( \([0-9]+ of [0-9]+ found\))?$";

fn result_line<'a>(out: &'a str, name: &str) -> &'a str {
    let prefix = format!("{name:<12} : ");
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with(&prefix)).collect();
    assert_eq!(lines.len(), 1, "one result line for {name}:\n{out}");
    let re = regex::Regex::new(RESULT_LINE).unwrap();
    assert!(re.is_match(lines[0]), "db_bench's shape: {:?}", lines[0]);
    lines[0]
}

#[test]
fn fill_read_scan_and_stats_print_db_bench_lines() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("--db={}", dir.path().display());
    let (ok, out, err) = shale_bench(&[
        "--benchmarks=fillrandom,readrandom,readseq,stats",
        "--num=2000",
        "--key_size",
        "16",
        "--value_size=100",
        "--histogram=1",
        &db,
    ]);
    assert!(ok, "exit status; stderr:\n{err}");
    assert!(
        out.contains("Keys:       16 bytes each (+ 0 bytes user-defined timestamp)\n"),
        "{out}"
    );
    assert!(out.contains("Values:     100 bytes each (50 bytes after compression)\n"), "{out}");
    assert!(out.contains("Entries:    2000\n"), "{out}");
    let fill = result_line(&out, "fillrandom");
    assert!(fill.contains(" 2000 operations;") && fill.ends_with(" MB/s"), "{fill}");
    // fillrandom draws keys with repeats, so some of readrandom's keys were never written.
    let read = result_line(&out, "readrandom");
    let found = regex::Regex::new(r"\(([0-9]+) of 2000 found\)$").unwrap();
    let n: u64 = found.captures(read).expect(read)[1].parse().unwrap();
    assert!((1000..2000).contains(&n), "{read}");
    // readseq visits each distinct key once: as many as fillrandom wrote, about 63% of --num.
    let seq = result_line(&out, "readseq");
    let visited: u64 =
        seq.split(" operations;").next().unwrap().rsplit(' ').next().unwrap().parse().unwrap();
    assert!((1000..2000).contains(&visited), "{seq}");
    assert_eq!(out.matches("Microseconds per ").count(), 3, "{out}");
    assert!(out.contains("Percentiles: P50: "), "{out}");
    assert!(out.contains("** shale stats **") && out.contains("Level Files Size(MB)"), "{out}");
    assert!(dir.path().join("volume.shale").exists(), "--db keeps the store");
}

#[test]
fn use_existing_db_reads_what_an_earlier_run_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("--db={}", dir.path().display());
    let (ok, _, err) = shale_bench(&["--benchmarks=fillseq", "--num=500", &db]);
    assert!(ok, "{err}");
    let (ok, out, err) =
        shale_bench(&["--benchmarks=fillseq,readrandom", "--num=500", "--use_existing_db", &db]);
    assert!(ok, "{err}");
    assert!(out.contains("fillseq      : skipped"), "{out}");
    assert!(result_line(&out, "readrandom").ends_with("(500 of 500 found)"), "{out}");
}

#[test]
fn unknown_flag_fails_naming_it() {
    let (ok, out, err) = shale_bench(&["--num=10", "--frobnicate=3"]);
    assert!(!ok);
    assert!(err.contains("--frobnicate"), "{err}");
    assert!(!out.contains("micros/op"), "nothing ran: {out}");
}

#[test]
fn a_repeated_flag_overrides_as_in_db_bench() {
    let (ok, out, err) =
        shale_bench(&["--benchmarks=readrandom", "--num=50", "--benchmarks=fillseq"]);
    assert!(ok, "{err}");
    result_line(&out, "fillseq");
    assert!(!out.contains("readrandom"), "{out}");
}

#[test]
fn unknown_benchmark_fails_naming_it() {
    let (ok, _, err) = shale_bench(&["--num=10", "--benchmarks=fillseq,readfast"]);
    assert!(!ok);
    assert!(err.contains("unknown benchmark 'readfast'"), "{err}");
}

#[test]
fn flags_without_an_engine_knob_warn_and_run() {
    let (ok, out, err) = shale_bench(&[
        "--num=100",
        "--benchmarks=fillseq",
        "--disable_wal=1",
        "--max_background_jobs",
        "4",
    ]);
    assert!(ok, "{err}");
    assert!(err.contains("--disable_wal is not supported yet and has no effect"), "{err}");
    // --max_background_jobs is a knob now: quiet within the engine's bounds, a warning below.
    assert!(!err.contains("--max_background_jobs"), "{err}");
    result_line(&out, "fillseq");
    let (ok, out, err) =
        shale_bench(&["--num=100", "--benchmarks=fillseq", "--max_background_jobs=1"]);
    assert!(ok, "{err}");
    assert!(err.contains("--max_background_jobs=1: the engine runs one flush thread"), "{err}");
    result_line(&out, "fillseq");
}

#[test]
fn use_direct_io_for_flush_and_compaction_is_accepted_both_ways_and_reported() {
    for (value, shown, path) in [
        ("false", "SST writes: page cache (synced before commit)\n", "buffered"),
        ("true", "SST writes: direct (O_DIRECT)\n", "direct"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let db = format!("--db={}", dir.path().display());
        let flag = format!("--use_direct_io_for_flush_and_compaction={value}");
        let (ok, out, err) = shale_bench(&[
            "--benchmarks=fillrandom,compact,readrandom",
            "--num=3000",
            "--statistics",
            &flag,
            &db,
        ]);
        assert!(ok, "{flag}: {err}");
        assert!(!err.contains("use_direct_io_for_flush_and_compaction"), "{flag}: {err}");
        assert!(out.contains(shown), "{flag}: {out}");
        result_line(&out, "readrandom");
        // The counters say which path wrote the SSTs.
        let counter = |name: &str| -> u64 {
            let line = out.lines().find(|l| l.starts_with(&format!("{name} COUNT : ")));
            line.unwrap_or_else(|| panic!("{name} in:\n{out}"))
                .rsplit(' ')
                .next()
                .unwrap()
                .parse()
                .unwrap()
        };
        let other = if path == "direct" { "buffered" } else { "direct" };
        assert!(counter(&format!("shale.sst.bytes.written.{path}")) > 0, "{flag}: {out}");
        assert_eq!(counter(&format!("shale.sst.bytes.written.{other}")), 0, "{flag}: {out}");
    }
}

#[test]
fn memory_limit_is_shown_in_the_header_and_the_statistics_and_zero_is_refused() {
    let counter = |out: &str, name: &str| -> u64 {
        let prefix = format!("{name} COUNT : ");
        let line = out.lines().find(|l| l.starts_with(&prefix)).expect(name);
        line[prefix.len()..].parse().unwrap()
    };
    let run = |flag: &str| {
        let (ok, out, err) =
            shale_bench(&["--benchmarks=fillrandom", "--num=2000", "--statistics", flag]);
        assert!(ok, "{flag}: exit status; stderr:\n{err}");
        out
    };
    let set = run("--memory_limit=1073741824");
    assert!(set.contains("Memory limit: 1024.0 MB (--memory_limit; "), "{set}");
    assert_eq!(counter(&set, "shale.memory.limit"), 1 << 30, "{set}");
    let none = run("--memory_limit=none");
    assert!(none.contains("Memory limit: none (--memory_limit=none)\n"), "{none}");
    assert_eq!(counter(&none, "shale.memory.limit"), 0, "{none}");
    // A limit the default write buffer would not fit: the store opens with a smaller one,
    // (128 MiB - the 32 MiB cache) / (2 memtables x 2 with their WAL tail), and says so.
    let tight = run("--memory_limit=268435456");
    assert!(tight.contains("write buffer 24.0 MB, lowered from 64.0 MB)"), "{tight}");
    assert_eq!(counter(&tight, "shale.write.buffer.bytes"), 24 << 20, "{tight}");
    // The default reads the host: some limit, at most the machine's RAM.
    let host = run("--memory_limit=host");
    assert!(host.contains("Memory limit: ") && host.contains("(the host's: "), "{host}");
    assert!(counter(&host, "shale.memory.limit") > 0, "{host}");
    // A limit the cache and memtables outgrow by themselves: said once, at open.
    let (ok, _, err) =
        shale_bench(&["--benchmarks=fillrandom", "--num=10", "--memory_limit=1000000"]);
    assert!(ok, "{err}");
    assert_eq!(err.matches("take more than half the memory limit of 0 MiB").count(), 1, "{err}");
    for bad in ["--memory_limit=0", "--memory_limit=lots"] {
        let (ok, _, err) = shale_bench(&["--benchmarks=fillrandom", "--num=10", bad]);
        assert!(!ok && err.contains("is no memory limit"), "{bad}: {err}");
    }
}

#[test]
fn cache_index_and_filter_blocks_is_an_engine_knob_shown_in_the_report() {
    let run = |flag: &str| {
        let (ok, out, err) = shale_bench(&[
            "--benchmarks=fillrandom,flush,readrandom,stats",
            "--num=2000",
            "--statistics",
            flag,
        ]);
        assert!(ok, "{flag}: exit status; stderr:\n{err}");
        assert!(!err.contains("cache_index_and_filter_blocks"), "{flag}: no warning: {err}");
        result_line(&out, "readrandom");
        out
    };
    let counter = |out: &str, name: &str| -> u64 {
        let prefix = format!("{name} COUNT : ");
        let line = out.lines().find(|l| l.starts_with(&prefix)).expect(name);
        line[prefix.len()..].parse().unwrap()
    };
    let cached = run("--cache_index_and_filter_blocks=true");
    assert!(
        cached.contains(
            "Index and filter blocks: in the block cache (cache_index_and_filter_blocks=true)\n"
        ),
        "{cached}"
    );
    assert!(counter(&cached, "shale.block.cache.index.hit") > 0, "{cached}");
    assert!(cached.contains("held by SST readers outside the block cache: 0.0 MB"), "{cached}");
    for flag in ["--cache_index_and_filter_blocks=false", "--cache_index_and_filter_blocks=0"] {
        let held = run(flag);
        assert!(held.contains("Index and filter blocks: held by SST readers, outside the block cache (cache_index_and_filter_blocks=false)\n"), "{held}");
        assert_eq!(counter(&held, "shale.block.cache.index.hit"), 0, "{held}");
        assert_eq!(counter(&held, "shale.block.cache.filter.miss"), 0, "{held}");
        let line = held.lines().find(|l| l.starts_with("Block cache: ")).expect("cache line");
        assert!(line.contains(" MB (0.0 MB index and filter), "), "{line}");
        // The budget is named beside what the cache holds: the owner's, far within the host.
        let budget = counter(&held, "shale.block.cache.capacity.bytes");
        assert!(
            line.contains(&format!(" MB held of {:.1} MB (", budget as f64 / 1_048_576.0)),
            "{line}"
        );
    }
}

#[test]
fn async_runs_fills_and_reads_through_tickets_and_finds_what_sync_finds() {
    let run = |extra: &[&str]| {
        let mut flags = vec![
            "--benchmarks=fillrandom,overwrite,fillsync,readrandom,readmissing",
            "--num=4000",
            "--threads=2",
            "--statistics",
            // The same seeds in every run (0, the default, takes the clock).
            "--seed=12345",
        ];
        flags.extend_from_slice(extra);
        let (ok, out, err) = shale_bench(&flags);
        assert!(ok, "{extra:?}: exit status; stderr:\n{err}");
        for name in ["fillrandom", "overwrite", "fillsync", "readrandom", "readmissing"] {
            result_line(&out, name);
        }
        out
    };
    let counter = |out: &str, name: &str| -> u64 {
        let prefix = format!("{name} COUNT : ");
        let line = out.lines().find(|l| l.starts_with(&prefix)).expect(name);
        line[prefix.len()..].parse().unwrap()
    };
    let found = |out: &str, name: &str| -> String {
        let line = result_line(out, name);
        line[line.rfind('(').expect(line)..].to_string()
    };
    let sync = run(&[]);
    assert!(!sync.contains("Async API:"), "{sync}");
    assert_eq!(counter(&sync, "shale.async.submitted"), 0, "{sync}");
    for flag in ["--async", "--async=true"] {
        let out = run(&[flag]);
        assert!(out.contains("Async API:  on (up to 32 tickets outstanding per thread"), "{out}");
        // The same seeds: the async reads find exactly what the synchronous ones found.
        assert_eq!(found(&out, "readrandom"), found(&sync, "readrandom"), "{flag}");
        assert_eq!(found(&out, "readmissing"), "(0 of 8000 found)", "{out}");
        let submitted = counter(&out, "shale.async.submitted");
        // The counters are the last store's: fillsync starts a fresh one. Its 2 x 4000
        // writes, then 2 x 4000 gets of each read benchmark.
        assert_eq!(submitted, 3 * 8000, "{out}");
        assert_eq!(counter(&out, "shale.async.completed"), submitted, "{out}");
        assert!(counter(&out, "shale.async.write.batches") > 0, "{out}");
    }
    let (ok, out, err) = shale_bench(&["--num=10", "--benchmarks=fillseq", "--noasync"]);
    assert!(ok, "{err}");
    assert!(!out.contains("Async API:"), "{out}");
}

/// `--timeline`: a row per second with the header the charts read, the tuner's flags taken.
#[test]
fn timeline_writes_a_row_per_second_and_the_tuner_runs() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("timeline.csv");
    let db = dir.path().join("db");
    let (ok, out, err) = shale_bench(&[
        &format!("--db={}", db.display()),
        "--benchmarks=fillrandom",
        "--num=1000000",
        "--duration=2",
        "--write_buffer_size=1048576",
        "--tuner=adoc",
        "--tuner_window_ms=100",
        &format!("--timeline={}", csv.display()),
        "--statistics",
    ]);
    assert!(ok, "{err}");
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    assert!(header.starts_with("second,ops,p99_write_us,background_jobs,write_buffer_bytes,"));
    assert!(header.ends_with(",tuner"), "{header}");
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(rows.len() >= 2, "{text}");
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r.len(), header.split(',').count(), "{text}");
        assert_eq!(r[0], (i + 1).to_string(), "seconds count up: {text}");
    }
    let ops: u64 = rows.iter().map(|r| r[1].parse::<u64>().unwrap()).sum();
    assert!(ops > 0, "{text}");
    assert!(out.contains("fillrandom"), "{out}");
    // A bad mode is refused by name.
    let (ok, _, err) = shale_bench(&["--tuner=fastest", "--benchmarks=fillseq", "--num=10"]);
    assert!(!ok && err.contains("no tuner mode"), "{err}");
}

/// The operations of `name`'s result line.
fn operations(out: &str, name: &str) -> u64 {
    let line = result_line(out, name);
    line.split(" operations;").next().unwrap().rsplit(' ').next().unwrap().parse().unwrap()
}

/// The seed a run with `--seed=0` says it took.
fn seed_taken(out: &str) -> u64 {
    let line = out
        .lines()
        .find(|l| l.starts_with("Set seed to "))
        .unwrap_or_else(|| panic!("no seed line:\n{out}"));
    line["Set seed to ".len()..].split(' ').next().unwrap().parse().unwrap()
}

/// Was: `--seed=0` (the default) seeded every run alike, so a readrandom in a later
/// invocation drew the fill's keys again and found every one. As db_bench, 0 takes the
/// clock and prints the seed, which replays the run when given back.
#[test]
fn seed_zero_takes_the_clock_and_prints_a_seed_that_replays_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("--db={}", dir.path().display());
    let (ok, out, err) = shale_bench(&["--benchmarks=fillrandom", "--num=2000", &db]);
    assert!(ok, "{err}");
    let fill_seed = seed_taken(&out);
    // Another invocation draws other keys: fillrandom wrote about 63% of the 2000.
    let read = ["--benchmarks=readrandom", "--num=2000", "--use_existing_db", &db];
    let (ok, again, err) = shale_bench(&read);
    assert!(ok, "{err}");
    assert_ne!(seed_taken(&again), fill_seed, "{again}");
    let found = regex::Regex::new(r"\(([0-9]+) of 2000 found\)$").unwrap();
    let line = result_line(&again, "readrandom");
    let n: u64 = found.captures(line).expect(line)[1].parse().unwrap();
    assert!((1000..2000).contains(&n), "a new seed finds only the keys written: {line}");
    // The printed seed replays the fill's draws: every key it draws was written.
    let seed = format!("--seed={fill_seed}");
    let (ok, replay, err) = shale_bench(&[read[0], read[1], read[2], read[3], &seed]);
    assert!(ok, "{err}");
    assert!(!replay.contains("Set seed to"), "a given seed is used as it is:\n{replay}");
    assert!(result_line(&replay, "readrandom").ends_with("(2000 of 2000 found)"), "{replay}");
}

/// Was: `--num=1000 --batch_size=100000` wrote 100,000 entries: a batch went past the
/// benchmark's count. The last batch is cut to what is left: with one seed, fillrandom then
/// writes the same 1000 draws in one batch as one at a time (about 632 distinct keys, where
/// 100,000 draws would have written all 1000).
#[test]
fn a_batch_never_goes_past_num() {
    let distinct_keys = |batch: &str| {
        let (ok, out, err) = shale_bench(&[
            "--benchmarks=fillrandom,readseq,deleterandom",
            "--num=1000",
            "--seed=7",
            batch,
        ]);
        assert!(ok, "{err}");
        assert_eq!(operations(&out, "fillrandom"), 1000, "{out}");
        assert_eq!(operations(&out, "deleterandom"), 1000, "{out}");
        operations(&out, "readseq")
    };
    let one_batch = distinct_keys("--batch_size=100000");
    assert!(one_batch < 1000, "only 1000 draws were written: {one_batch} keys");
    assert_eq!(one_batch, distinct_keys("--batch_size=1"), "the same draws, batched or not");
    // Batches of 300 cover 1000 three times, then 100 entries.
    assert_eq!(one_batch, distinct_keys("--batch_size=300"));
}

/// Was: `--duration=2` with a low `--benchmark_write_rate_limit` ran past 60 s: the rate
/// limiter's wait ignored the deadline, and the deadline was looked at every 1000 writes.
/// Here each write waits half a second for the rate: without the fix the run would take
/// 500 s (the child's hang limit ends it first and the test fails).
#[test]
fn the_duration_cuts_the_rate_limiters_wait() {
    let (ok, out, err) = shale_bench(&[
        "--benchmarks=fillrandom",
        "--num=1000",
        "--value_size=1000",
        "--duration=2",
        "--benchmark_write_rate_limit=2000",
    ]);
    assert!(ok, "{err}");
    let ops = operations(&out, "fillrandom");
    assert!((1..1000).contains(&ops), "the deadline ended the run after a few writes: {out}");
}

/// db_bench takes `--cache_size=-1` (or 0) for "no block cache"; it was refused with
/// "invalid digit".
#[test]
fn a_negative_cache_size_means_no_block_cache() {
    let (ok, out, err) =
        shale_bench(&["--benchmarks=fillseq,readrandom", "--num=500", "--cache_size=-1"]);
    assert!(ok, "{err}");
    assert!(result_line(&out, "readrandom").ends_with("(500 of 500 found)"), "{out}");
}
