//! Every `shale bench` and `shale ycsb` option at zero, negative, one past its limit and
//! absurdly large, run as a program: a named error (exit 1, or clap's exit 2 for a value of
//! the wrong type) or a correct run (exit 0), never a panic or a hang. The parser and the
//! checks alone are covered in process by `src/bench/options_props.rs`; this file adds that
//! the values the checks let through really run.

#[path = "common/child.rs"]
mod child;

const U64_MAX: &str = "18446744073709551615";
const I64_MIN: &str = "-9223372036854775808";

/// Runs one case: `base` flags plus `extra`, then checks how it ended.
fn case(base: &[&str], flag: &str, extra: &[&str]) {
    let mut args = base.to_vec();
    args.extend_from_slice(extra);
    let what = args.join(" ");
    let o = child::run(&args);
    o.assert_no_panic(&what);
    match o.code {
        Some(0) => {}
        Some(1 | 2) => assert!(
            o.stderr.contains(&format!("--{flag}")),
            "{what}: the error should name --{flag}:\n{}",
            o.stderr
        ),
        _ => panic!("{what}: {o:?}"),
    }
}

#[test]
fn every_bench_option_at_its_edges() {
    let base = ["bench", "--num=20", "--benchmarks=fillseq,readrandom"];
    // (flag, values); a value runs with `--duration=1` where it would otherwise ask for a run
    // that never ends (as db_bench's would), which is not a hang of the tool.
    let table: &[(&str, &[&str])] = &[
        ("num", &["0", "-1", U64_MAX]),
        ("reads", &["0", "-1", I64_MIN, "9223372036854775807"]),
        ("threads", &["0", "-1", "1025", U64_MAX]),
        ("duration", &["0", "-1", "4294967297", U64_MAX]),
        ("key_size", &["0", "-1", "65537", U64_MAX]),
        ("value_size", &["0", "-1", "33554433", U64_MAX]),
        ("batch_size", &["0", "-1", "1000000", U64_MAX]),
        ("seed", &["0", "-1", U64_MAX]),
        ("write_buffer_size", &["0", "-1", "65535", "4294967297", "1000000000000000"]),
        ("max_write_buffer_number", &["0", "-1", "1", "65", U64_MAX]),
        ("max_background_jobs", &["0", "-1", "65", "9223372036854775807"]),
        ("target_file_size_base", &["0", "-1", "65535", "68719476737", U64_MAX]),
        ("max_bytes_for_level_base", &["0", "-1", "65535", "1125899906842625", U64_MAX]),
        ("max_bytes_for_level_multiplier", &["0", "-1", "1001", "1e300", "NaN"]),
        ("soft_pending_compaction_bytes_limit", &["0", "-1", U64_MAX]),
        ("hard_pending_compaction_bytes_limit", &["0", "-1", U64_MAX]),
        ("delayed_write_rate", &["0", "-1", "16383", U64_MAX]),
        ("level0_file_num_compaction_trigger", &["0", "-1", U64_MAX]),
        ("level0_slowdown_writes_trigger", &["0", "-1", U64_MAX]),
        ("level0_stop_writes_trigger", &["0", "-1", U64_MAX]),
        ("bloom_bits", &["0", "-1", "101", "1e300", "NaN", "inf"]),
        ("cache_size", &["0", "-1", U64_MAX]),
        ("prepopulate_block_cache", &["0", "-1", "2", U64_MAX]),
        ("block_size", &["0", "-1", "255", "16777217", U64_MAX]),
        ("compression_type", &["", "snappy"]),
        ("stats_interval_seconds", &["0", "-1", "4294967297", U64_MAX]),
        ("benchmark_write_rate_limit", &["0", "-1", U64_MAX]),
        ("benchmarks", &["", "nosuchbench", ","]),
    ];
    let endless = |flag: &str, v: &str| {
        (flag == "num" && v == U64_MAX) || (flag == "reads" && v.starts_with("922"))
    };
    for (flag, values) in table {
        for v in *values {
            let set = format!("--{flag}={v}");
            let mut extra = vec![set.as_str()];
            if endless(flag, v) {
                extra.push("--duration=1");
            }
            case(&base, flag, &extra);
        }
    }
}

#[test]
fn every_ycsb_option_at_its_edges() {
    let base = ["ycsb", "--records=20", "--operations=20"];
    // An absurd --operations or --records asks for a run that never ends, as YCSB's own
    // would: only the values the checks refuse are tried absurdly large.
    let table: &[(&str, &[&str])] = &[
        ("records", &["0", "-1", U64_MAX]),
        ("operations", &["0", "-1"]),
        ("threads", &["0", "-1", "1025", U64_MAX]),
        ("fieldcount", &["0", "-1", "33554433", U64_MAX]),
        ("fieldlength", &["0", "-1", "33554433", U64_MAX]),
        ("readproportion", &["0", "-1", "1e300", "NaN"]),
        ("updateproportion", &["0", "-1", "1e300", "NaN"]),
        ("insertproportion", &["0", "-1", "1e300", "NaN"]),
        ("scanproportion", &["0", "-1", "1e300", "NaN"]),
        ("readmodifywriteproportion", &["0", "-1", "1e300", "NaN"]),
        ("minscanlength", &["0", "-1", U64_MAX]),
        ("maxscanlength", &["0", "-1", U64_MAX]),
        ("zeropadding", &["0", "-1", "65533", U64_MAX]),
        ("seed", &["0", "-1", U64_MAX]),
        ("cache_size", &["0", "-1", U64_MAX]),
        ("write_buffer_size", &["0", "-1", "65535", "4294967297", "1000000000000000"]),
        ("max_write_buffer_number", &["0", "-1", "1", "65", U64_MAX]),
        ("target_file_size_base", &["0", "-1", "65535", "68719476737", U64_MAX]),
        ("max_bytes_for_level_base", &["0", "-1", "65535", U64_MAX]),
        ("bloom_bits", &["0", "-1", "101", U64_MAX]),
        ("compression_type", &["", "snappy"]),
    ];
    for (flag, values) in table {
        for v in *values {
            let set = format!("--{flag}={v}");
            // The scan lengths only matter in a workload that scans.
            let workload = if flag.contains("scan") { "--workload=e" } else { "--workload=a" };
            case(&base, flag, &[set.as_str(), workload]);
        }
    }
}
