//! db_bench's flags that `shale bench` accepts without a knob to turn: each is named once in a
//! warning and otherwise ignored, so a db_bench command line runs unchanged.
//!
//! The list is every `DEFINE_*` of RocksDB 11.8.1's `tools/db_bench_tool.cc` that `shale
//! bench` does not map to the engine ([`super::Args`] holds those), plus `max_open_files`,
//! RocksDB's option name for db_bench's `--open_files`. docs/cli.md tables them.

use std::collections::BTreeSet;
use std::ffi::OsString;

/// How an ignored flag takes its value (gflags' rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `--flag`, `--noflag`, `--flag=true|false|1|0`.
    Bool,
    /// `--flag=VALUE` or `--flag VALUE`.
    Value,
}

/// An ignored flag: its name, how it takes a value, and, for a behaviour shale has built in,
/// the value that asks for exactly that behaviour (given it, the flag is silent) and why.
pub type Ignored = (&'static str, Kind, Option<(&'static str, &'static str)>);

/// db_bench's flags without a shale knob, sorted by name.
pub const IGNORED: &[Ignored] = &[
    ("adaptive_readahead", Kind::Bool, None),
    ("advise_random_on_open", Kind::Bool, None),
    ("allow_concurrent_memtable_write", Kind::Bool, None),
    ("allow_data_in_errors", Kind::Bool, None),
    ("arena_block_size", Kind::Value, None),
    ("async_io", Kind::Bool, None),
    ("async_wal_precreate", Kind::Bool, None),
    ("auto_prefix_mode", Kind::Bool, None),
    ("auto_readahead_size", Kind::Bool, None),
    ("auto_refresh_iterator_with_snapshot", Kind::Bool, None),
    ("avoid_flush_during_recovery", Kind::Bool, None),
    ("avoid_flush_during_shutdown", Kind::Bool, None),
    ("backup_dir", Kind::Value, None),
    ("backup_rate_limit", Kind::Value, None),
    ("benchmark_read_rate_limit", Kind::Value, None),
    ("bgwriter_num", Kind::Value, None),
    ("blob_cache_numshardbits", Kind::Value, None),
    ("blob_cache_size", Kind::Value, None),
    ("blob_compaction_readahead_size", Kind::Value, None),
    ("blob_compression_type", Kind::Value, None),
    ("blob_db_enable_gc", Kind::Bool, None),
    ("blob_db_file_size", Kind::Value, None),
    ("blob_db_max_db_size", Kind::Value, None),
    ("blob_db_max_ttl_range", Kind::Value, None),
    ("blob_db_ttl_range_secs", Kind::Value, None),
    ("blob_direct_write_partitions", Kind::Value, None),
    ("blob_file_size", Kind::Value, None),
    ("blob_file_starting_level", Kind::Value, None),
    ("blob_garbage_collection_age_cutoff", Kind::Value, None),
    ("blob_garbage_collection_force_threshold", Kind::Value, None),
    ("block_cache_trace_file", Kind::Value, None),
    ("block_cache_trace_max_trace_file_size_in_bytes", Kind::Value, None),
    ("block_cache_trace_sampling_frequency", Kind::Value, None),
    ("block_protection_bytes_per_key", Kind::Value, None),
    ("block_restart_interval", Kind::Value, None),
    ("bloom_locality", Kind::Value, None),
    ("build_info", Kind::Bool, None),
    ("bytes_per_sync", Kind::Value, None),
    ("cache_high_pri_pool_ratio", Kind::Value, None),
    ("cache_low_pri_pool_ratio", Kind::Value, None),
    ("cache_numshardbits", Kind::Value, None),
    ("cache_type", Kind::Value, None),
    ("cache_uri", Kind::Value, None),
    ("charge_blob_cache", Kind::Bool, None),
    ("charge_compression_dictionary_building_buffer", Kind::Bool, None),
    ("charge_file_metadata", Kind::Bool, None),
    ("charge_filter_construction", Kind::Bool, None),
    ("charge_table_reader", Kind::Bool, None),
    ("checksum_type", Kind::Value, None),
    ("column_family_distribution", Kind::Value, None),
    ("compaction_pri", Kind::Value, None),
    ("compaction_readahead_size", Kind::Value, None),
    ("compaction_style", Kind::Value, None),
    ("compressed_cache_size", Kind::Value, None),
    ("compressed_secondary_cache_compression_level", Kind::Value, None),
    ("compressed_secondary_cache_compression_type", Kind::Value, None),
    ("compressed_secondary_cache_high_pri_pool_ratio", Kind::Value, None),
    ("compressed_secondary_cache_low_pri_pool_ratio", Kind::Value, None),
    ("compressed_secondary_cache_numshardbits", Kind::Value, None),
    ("compressed_secondary_cache_size", Kind::Value, None),
    ("compression_level", Kind::Value, None),
    ("compression_manager", Kind::Value, None),
    ("compression_max_dict_buffer_bytes", Kind::Value, None),
    ("compression_max_dict_bytes", Kind::Value, None),
    ("compression_parallel_threads", Kind::Value, None),
    ("compression_ratio", Kind::Value, None),
    ("compression_use_zstd_dict_trainer", Kind::Bool, None),
    ("compression_zstd_max_train_bytes", Kind::Value, None),
    ("confidence_interval_only", Kind::Bool, None),
    ("coro_jobs_per_thread", Kind::Value, None),
    ("cost_write_buffer_to_cache", Kind::Bool, None),
    ("cuckoo_hash_ratio", Kind::Value, None),
    ("data_block_hash_table_util_ratio", Kind::Value, None),
    ("db_write_buffer_size", Kind::Value, None),
    ("decouple_partitioned_filters", Kind::Bool, None),
    ("delayed_write_rate", Kind::Value, None),
    ("delete_obsolete_files_period_micros", Kind::Value, None),
    ("deletepercent", Kind::Value, None),
    ("deletes", Kind::Value, None),
    ("disable_auto_compactions", Kind::Bool, None),
    ("disable_seek_compaction", Kind::Value, None),
    ("disposable_entries_batch_size", Kind::Value, None),
    ("disposable_entries_delete_delay", Kind::Value, None),
    ("disposable_entries_value_size", Kind::Value, None),
    ("dump_malloc_stats", Kind::Bool, None),
    ("embedded_blob_min_size", Kind::Value, None),
    ("enable_blob_direct_write", Kind::Bool, None),
    ("enable_blob_files", Kind::Bool, None),
    ("enable_blob_garbage_collection", Kind::Bool, None),
    ("enable_cpu_prio", Kind::Bool, None),
    ("enable_index_compression", Kind::Bool, None),
    ("enable_io_prio", Kind::Bool, None),
    ("enable_numa", Kind::Bool, None),
    ("enable_pipelined_write", Kind::Bool, None),
    ("enable_write_thread_adaptive_yield", Kind::Bool, None),
    ("env_uri", Kind::Value, None),
    ("expand_range_tombstones", Kind::Bool, None),
    ("experimental_mempurge_threshold", Kind::Value, None),
    ("expire_style", Kind::Value, None),
    ("explicit_snapshot", Kind::Bool, None),
    ("fatal_shutdown_watchdog_seconds", Kind::Value, None),
    ("fault_injection_read_after_reads", Kind::Value, None),
    ("fifo_age_for_warm", Kind::Value, None),
    ("fifo_compaction_allow_compaction", Kind::Bool, None),
    ("fifo_compaction_max_data_files_size_mb", Kind::Value, None),
    ("fifo_compaction_max_table_files_size_mb", Kind::Value, None),
    ("fifo_compaction_ttl", Kind::Value, None),
    ("fifo_compaction_use_kv_ratio_compaction", Kind::Bool, None),
    ("file_checksum", Kind::Bool, None),
    ("file_opening_threads", Kind::Value, None),
    ("finish_after_writes", Kind::Bool, None),
    ("force_consistency_checks", Kind::Bool, None),
    ("format_version", Kind::Value, None),
    ("fs_uri", Kind::Value, None),
    ("hash_bucket_count", Kind::Value, None),
    ("identity_as_first_hash", Kind::Bool, None),
    ("index_block_restart_interval", Kind::Value, None),
    ("index_block_search_type", Kind::Value, None),
    ("index_shortening_mode", Kind::Value, None),
    ("index_with_first_key", Kind::Bool, None),
    ("ingest_external_file_batch_size", Kind::Value, None),
    ("ingest_external_file_file_opening_threads", Kind::Value, None),
    ("ingest_external_file_fill_cache", Kind::Bool, None),
    ("ingest_external_file_num_batches", Kind::Value, None),
    ("ingest_external_file_prefetch_lmax_index_and_filter_blocks", Kind::Bool, None),
    ("ingest_external_file_use_file_info", Kind::Bool, None),
    ("initial_auto_readahead_size", Kind::Value, None),
    ("inplace_update_num_locks", Kind::Value, None),
    ("inplace_update_support", Kind::Bool, None),
    ("io_dispatcher_max_prefetch_memory_bytes", Kind::Value, None),
    ("io_uring_enabled", Kind::Bool, None),
    ("iter_k", Kind::Value, None),
    ("iter_sigma", Kind::Value, None),
    ("iter_theta", Kind::Value, None),
    ("key_dist_a", Kind::Value, None),
    ("key_dist_b", Kind::Value, None),
    ("key_id_range", Kind::Value, None),
    ("keyrange_dist_a", Kind::Value, None),
    ("keyrange_dist_b", Kind::Value, None),
    ("keyrange_dist_c", Kind::Value, None),
    ("keyrange_dist_d", Kind::Value, None),
    ("keyrange_num", Kind::Value, None),
    ("keys_per_prefix", Kind::Value, None),
    ("leader_path", Kind::Value, None),
    ("log_readahead_size", Kind::Value, None),
    ("manual_wal_flush", Kind::Bool, None),
    ("max_auto_readahead_size", Kind::Value, None),
    ("max_background_compactions", Kind::Value, None),
    ("max_background_flushes", Kind::Value, None),
    ("max_bytes_for_level_multiplier_additional", Kind::Value, None),
    ("max_compaction_bytes", Kind::Value, None),
    ("max_compaction_trigger_wakeup_seconds", Kind::Value, None),
    ("max_manifest_file_size", Kind::Value, None),
    ("max_manifest_space_amp_pct", Kind::Value, None),
    ("max_num_range_tombstones", Kind::Value, None),
    ("max_open_files", Kind::Value, None),
    ("max_scan_distance", Kind::Value, None),
    ("max_successive_merges", Kind::Value, None),
    ("max_total_wal_size", Kind::Value, None),
    ("max_write_buffer_size_to_maintain", Kind::Value, None),
    ("memtable_batch_lookup_optimization", Kind::Bool, None),
    ("memtable_bloom_size_ratio", Kind::Value, None),
    ("memtable_insert_with_hint_prefix_size", Kind::Value, None),
    ("memtable_op_scan_flush_trigger", Kind::Value, None),
    ("memtable_protection_bytes_per_key", Kind::Value, None),
    ("memtable_use_huge_page", Kind::Bool, None),
    ("memtable_verify_per_key_checksum_on_seek", Kind::Bool, None),
    ("memtable_whole_key_filtering", Kind::Bool, None),
    ("memtablerep", Kind::Value, None),
    ("merge_keys", Kind::Value, None),
    ("merge_operator", Kind::Value, None),
    ("mergereadpercent", Kind::Value, None),
    ("metadata_block_size", Kind::Value, None),
    ("min_blob_size", Kind::Value, None),
    ("min_level_to_compress", Kind::Value, None),
    ("min_tombstones_for_range_conversion", Kind::Value, None),
    ("min_write_buffer_number_to_merge", Kind::Value, None),
    ("mix_accesses", Kind::Value, None),
    ("mix_get_ratio", Kind::Value, None),
    ("mix_max_scan_len", Kind::Value, None),
    ("mix_max_value_size", Kind::Value, None),
    ("mix_put_ratio", Kind::Value, None),
    ("mix_seek_ratio", Kind::Value, None),
    ("mmap_read", Kind::Bool, Some(("false", "shale never reads through mmap"))),
    ("mmap_write", Kind::Bool, Some(("false", "shale never writes through mmap"))),
    ("multiread_batched", Kind::Bool, None),
    ("multiread_stride", Kind::Value, None),
    ("multiscan_coalesce_threshold", Kind::Value, None),
    ("multiscan_max_prefetch_size", Kind::Value, None),
    ("multiscan_size", Kind::Value, None),
    ("multiscan_stride", Kind::Value, None),
    ("multiscan_use_async_io", Kind::Bool, None),
    ("num_bottom_pri_threads", Kind::Value, None),
    ("num_column_families", Kind::Value, None),
    ("num_deletion_threads", Kind::Value, None),
    ("num_file_reads_for_auto_readahead", Kind::Value, None),
    ("num_high_pri_threads", Kind::Value, None),
    ("num_hot_column_families", Kind::Value, None),
    ("num_levels", Kind::Value, None),
    ("num_low_pri_threads", Kind::Value, None),
    ("num_multi_db", Kind::Value, None),
    ("num_short_wide_columns", Kind::Value, None),
    ("num_wide_columns", Kind::Value, None),
    ("numdistinct", Kind::Value, None),
    ("open_as_follower", Kind::Bool, None),
    ("open_files", Kind::Value, None),
    ("open_files_async", Kind::Bool, None),
    ("openandcompact_allow_resumption", Kind::Bool, None),
    ("openandcompact_cancel_after_millseconds", Kind::Value, None),
    ("openandcompact_test_cancel_on_odd", Kind::Bool, None),
    ("ops_between_duration_checks", Kind::Value, None),
    ("optimistic_transaction_db", Kind::Bool, None),
    ("optimize_filters_for_hits", Kind::Bool, None),
    ("optimize_filters_for_memory", Kind::Bool, None),
    ("optimize_multiget_for_io", Kind::Bool, None),
    ("options_file", Kind::Value, None),
    ("overwrite_probability", Kind::Value, None),
    ("overwrite_window_size", Kind::Value, None),
    ("paranoid_checks", Kind::Bool, None),
    ("paranoid_memory_checks", Kind::Bool, None),
    ("partition_index", Kind::Bool, None),
    ("partition_index_and_filters", Kind::Bool, None),
    ("perf_level", Kind::Value, None),
    ("periodic_compaction_seconds", Kind::Value, None),
    ("persist_stats_to_disk", Kind::Bool, None),
    ("persistent_entries_batch_size", Kind::Value, None),
    ("persistent_entries_value_size", Kind::Value, None),
    ("pin_l0_filter_and_index_blocks_in_cache", Kind::Bool, None),
    ("pin_top_level_index_and_filter", Kind::Bool, None),
    ("preclude_last_level_data_seconds", Kind::Value, None),
    ("prefix_same_as_start", Kind::Bool, None),
    ("prefix_size", Kind::Value, None),
    ("prepopulate_blob_cache", Kind::Value, None),
    ("preserve_internal_time_seconds", Kind::Value, None),
    ("print_malloc_stats", Kind::Bool, None),
    ("progress_reports", Kind::Bool, None),
    ("range_tombstone_width", Kind::Value, None),
    ("rate_limit_auto_wal_flush", Kind::Bool, None),
    ("rate_limit_bg_reads", Kind::Bool, None),
    ("rate_limit_user_ops", Kind::Bool, None),
    ("rate_limiter_auto_tuned", Kind::Bool, None),
    ("rate_limiter_bytes_per_sec", Kind::Value, None),
    ("rate_limiter_refill_period_us", Kind::Value, None),
    ("rate_limiter_single_burst_bytes", Kind::Value, None),
    ("read_amp_bytes_per_bit", Kind::Value, None),
    ("read_cache_direct_read", Kind::Bool, None),
    ("read_cache_direct_write", Kind::Bool, None),
    ("read_cache_path", Kind::Value, None),
    ("read_cache_size", Kind::Value, None),
    ("read_random_exp_range", Kind::Value, None),
    ("read_triggered_compaction_threshold", Kind::Value, None),
    ("read_with_latest_user_timestamp", Kind::Bool, None),
    ("readahead_size", Kind::Value, None),
    ("readonly", Kind::Bool, None),
    ("readwritepercent", Kind::Value, None),
    ("report_bg_io_stats", Kind::Bool, None),
    ("report_file", Kind::Value, None),
    ("report_file_operations", Kind::Bool, None),
    ("report_interval_seconds", Kind::Value, None),
    ("report_open_timing", Kind::Bool, None),
    ("restore_dir", Kind::Value, None),
    ("restore_rate_limit", Kind::Value, None),
    ("reverse_iterator", Kind::Bool, None),
    ("row_cache_size", Kind::Value, None),
    ("same_value_percentage", Kind::Value, None),
    ("sample_for_compression", Kind::Value, None),
    ("secondary_cache_uri", Kind::Value, None),
    ("secondary_path", Kind::Value, None),
    ("secondary_update_interval", Kind::Value, None),
    ("seek_missing_prefix", Kind::Bool, None),
    ("seek_nexts", Kind::Value, None),
    ("seek_nexts_to_delete", Kind::Value, None),
    ("separate_key_value_in_data_block", Kind::Bool, None),
    ("show_table_properties", Kind::Bool, None),
    ("simcache_size", Kind::Value, None),
    ("simulate_hdd", Kind::Bool, None),
    ("simulate_hybrid_fs_file", Kind::Value, None),
    ("simulate_hybrid_hdd_multipliers", Kind::Value, None),
    ("sine_a", Kind::Value, None),
    ("sine_b", Kind::Value, None),
    ("sine_c", Kind::Value, None),
    ("sine_d", Kind::Value, None),
    ("sine_mix_rate", Kind::Bool, None),
    ("sine_mix_rate_interval_milliseconds", Kind::Value, None),
    ("sine_mix_rate_noise", Kind::Value, None),
    ("sine_write_rate", Kind::Bool, None),
    ("sine_write_rate_interval_milliseconds", Kind::Value, None),
    ("skip_list_lookahead", Kind::Value, None),
    ("skip_stats_update_on_db_open", Kind::Bool, None),
    ("slow_usecs", Kind::Value, None),
    ("statistics_string", Kind::Value, None),
    ("stats_dump_period_sec", Kind::Value, None),
    ("stats_history_buffer_size", Kind::Value, None),
    ("stats_interval", Kind::Value, None),
    ("stats_level", Kind::Value, None),
    ("stats_per_interval", Kind::Value, None),
    ("stats_persist_period_sec", Kind::Value, None),
    ("stddev", Kind::Value, None),
    ("strict_max_successive_merges", Kind::Bool, None),
    ("subcompactions", Kind::Value, None),
    ("super_block_alignment_size", Kind::Value, None),
    ("super_block_alignment_space_overhead_ratio", Kind::Value, None),
    ("table_cache_numshardbits", Kind::Value, None),
    ("target_file_size_multiplier", Kind::Value, None),
    ("thread_status_per_interval", Kind::Value, None),
    ("tiered_adm_policy", Kind::Value, None),
    ("time_range", Kind::Value, None),
    ("tolerate_io_errors_for_remote_dbs", Kind::Bool, None),
    ("total_order_seek", Kind::Bool, None),
    ("trace_file", Kind::Value, None),
    ("trace_replay_fast_forward", Kind::Value, None),
    ("trace_replay_threads", Kind::Value, None),
    ("track_and_verify_wals", Kind::Bool, None),
    ("track_and_verify_wals_in_manifest", Kind::Bool, None),
    ("transaction_db", Kind::Bool, None),
    ("transaction_lock_timeout", Kind::Value, None),
    ("transaction_set_snapshot", Kind::Bool, None),
    ("transaction_sets", Kind::Value, None),
    ("transaction_sleep", Kind::Value, None),
    ("truth_db", Kind::Value, None),
    ("ttl_seconds", Kind::Value, None),
    ("uncache_aggressiveness", Kind::Value, None),
    ("uniform_cv_threshold", Kind::Value, None),
    ("universal_allow_trivial_move", Kind::Bool, None),
    ("universal_compression_size_percent", Kind::Value, None),
    ("universal_incremental", Kind::Bool, None),
    ("universal_max_merge_width", Kind::Value, None),
    ("universal_max_read_amp", Kind::Value, None),
    ("universal_max_size_amplification_percent", Kind::Value, None),
    ("universal_min_merge_width", Kind::Value, None),
    ("universal_reduce_file_locking", Kind::Bool, None),
    ("universal_size_ratio", Kind::Value, None),
    ("universal_stop_style", Kind::Value, None),
    ("unordered_write", Kind::Bool, None),
    ("use_adaptive_mutex", Kind::Bool, None),
    ("use_blob_cache", Kind::Bool, None),
    ("use_blob_db", Kind::Bool, None),
    ("use_cache_jemalloc_no_dump_allocator", Kind::Bool, None),
    ("use_cache_memkind_kmem_allocator", Kind::Bool, None),
    ("use_compressed_secondary_cache", Kind::Bool, None),
    ("use_cuckoo_table", Kind::Bool, None),
    ("use_data_block_hash_index", Kind::Bool, None),
    ("use_direct_io_for_compaction_reads", Kind::Bool, None),
    ("use_existing_keys", Kind::Bool, None),
    ("use_fsync", Kind::Bool, None),
    ("use_hash_search", Kind::Bool, None),
    ("use_keep_filter", Kind::Bool, None),
    ("use_multiscan", Kind::Bool, None),
    ("use_plain_table", Kind::Bool, None),
    ("use_ribbon_filter", Kind::Bool, None),
    ("use_secondary_db", Kind::Bool, None),
    ("use_shared_block_and_blob_cache", Kind::Bool, None),
    ("use_single_deletes", Kind::Bool, None),
    ("use_stderr_info_logger", Kind::Bool, None),
    ("use_tailing_iterator", Kind::Bool, None),
    ("use_tiered_cache", Kind::Bool, None),
    ("use_trie_index", Kind::Bool, None),
    ("use_uint64_comparator", Kind::Bool, None),
    ("user_timestamp_size", Kind::Value, None),
    ("value_k", Kind::Value, None),
    ("value_sigma", Kind::Value, None),
    ("value_size_distribution_type", Kind::Value, None),
    ("value_size_max", Kind::Value, None),
    ("value_size_min", Kind::Value, None),
    ("value_theta", Kind::Value, None),
    ("verify_checksum", Kind::Bool, Some(("true", "shale verifies every block checksum it reads"))),
    ("verify_compression", Kind::Bool, None),
    ("verify_manifest_content_on_close", Kind::Bool, None),
    ("wal_bytes_per_sync", Kind::Value, None),
    ("wal_compression", Kind::Value, None),
    ("wal_dir", Kind::Value, None),
    ("wal_size_limit_MB", Kind::Value, None),
    ("wal_ttl_seconds", Kind::Value, None),
    ("whole_key_filtering", Kind::Bool, None),
    ("writable_file_max_buffer_size", Kind::Value, None),
    ("write_batch_protection_bytes_per_key", Kind::Value, None),
    ("write_thread_max_yield_usec", Kind::Value, None),
    ("write_thread_slow_yield_usec", Kind::Value, None),
    ("writes_before_delete_range", Kind::Value, None),
    ("writes_per_range_tombstone", Kind::Value, None),
];

/// db_bench's boolean flags that `shale bench` maps ([`super::Args`]), sorted: gflags'
/// `--noflag` of each reaches the parser as `--flag=false`.
pub const MAPPED_BOOLS: &[&str] = &[
    "async",
    "block_align",
    "cache_index_and_filter_blocks",
    "contention",
    "disable_wal",
    "histogram",
    "idle_compaction_io",
    "level_compaction_dynamic_level_bytes",
    "statistics",
    "sync",
    "tier_adaptive",
    "use_direct_io_for_flush_and_compaction",
    "use_direct_reads",
    "use_existing_db",
];

/// The ignored flags given in `flags` (the arguments after `bench`), removed: returns the
/// arguments left for the parser, and one warning per ignored flag given (once however often
/// it is repeated), in the order first given. A `--noflag` of a mapped boolean flag is
/// handed on as `--flag=false`.
///
/// # Errors
/// An ignored flag without the value it needs, or a boolean one with a value that is no
/// boolean, named.
pub fn strip_ignored(flags: Vec<OsString>) -> Result<(Vec<OsString>, Vec<String>), String> {
    let mut kept = Vec::with_capacity(flags.len());
    let mut warned = BTreeSet::new();
    let mut warnings = Vec::new();
    let mut rest = flags.into_iter().peekable();
    while let Some(arg) = rest.next() {
        if arg == "--" {
            // Everything after a bare `--` is the parser's, untouched.
            kept.push(arg);
            kept.extend(rest);
            break;
        }
        let Some((entry, inline, negated)) = arg.to_str().and_then(lookup) else {
            match arg.to_str().and_then(negated_mapped_bool) {
                Some(name) => kept.push(format!("--{name}=false").into()),
                None => kept.push(arg),
            }
            continue;
        };
        let (name, kind, builtin) = *entry;
        let value = match (kind, inline) {
            (_, Some(v)) => v.to_string(),
            (Kind::Bool, None) if negated => "false".into(),
            (Kind::Bool, None) => match rest.peek().and_then(|n| n.to_str()).map(parse_bool) {
                Some(Some(_)) => rest.next().and_then(|n| n.into_string().ok()).unwrap_or_default(),
                _ => "true".into(),
            },
            (Kind::Value, None) => match rest.next() {
                Some(v) => v.to_string_lossy().into_owned(),
                None => return Err(format!("--{name} needs a value")),
            },
        };
        let as_bool = if kind == Kind::Bool {
            let b = parse_bool(&value)
                .ok_or_else(|| format!("--{name}={value}: {value:?} is not a boolean"))?;
            // `--noflag` already reads as "false" here.
            Some(b)
        } else {
            None
        };
        if !warned.insert(name) {
            continue;
        }
        match builtin {
            Some((same, _)) if as_bool.map(|b| b.to_string()).as_deref() == Some(same) => {}
            Some((_, why)) => warnings.push(format!("--{name}={value} has no effect: {why}")),
            None => warnings.push(format!(
                "--{name} has no effect: the engine has no such knob (docs/cli.md lists \
                 db_bench's flags shale ignores)"
            )),
        }
    }
    Ok((kept, warnings))
}

/// The mapped boolean flag that `arg` turns off, if it is its gflags `--noflag` form.
fn negated_mapped_bool(arg: &str) -> Option<&'static str> {
    let name = arg.strip_prefix("--no")?;
    MAPPED_BOOLS.binary_search(&name).ok().map(|i| MAPPED_BOOLS[i])
}

/// The ignored flag `arg` gives, with its inline value and whether it is a `--noflag`.
fn lookup(arg: &str) -> Option<(&'static Ignored, Option<&str>, bool)> {
    let body = arg.strip_prefix("--")?;
    let (name, inline) = match body.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (body, None),
    };
    let find = |n: &str| IGNORED.binary_search_by(|e| e.0.cmp(n)).ok().map(|i| &IGNORED[i]);
    if let Some(e) = find(name) {
        return Some((e, inline, false));
    }
    // gflags' `--noflag` for a boolean flag, without a value of its own.
    let e = find(name.strip_prefix("no")?)?;
    (e.1 == Kind::Bool && inline.is_none()).then_some((e, None, true))
}

/// gflags' booleans, as `shale bench` parses its own.
fn parse_bool(text: &str) -> Option<bool> {
    match text.to_ascii_lowercase().as_str() {
        "1" | "true" | "t" | "yes" | "y" => Some(true),
        "0" | "false" | "f" | "no" | "n" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strip(flags: &[&str]) -> Result<(Vec<String>, Vec<String>), String> {
        let os = flags.iter().map(OsString::from).collect();
        strip_ignored(os)
            .map(|(k, w)| (k.into_iter().map(|a| a.into_string().unwrap()).collect(), w))
    }

    #[test]
    fn the_table_is_sorted_and_holds_none_of_the_mapped_flags() {
        assert!(IGNORED.windows(2).all(|w| w[0].0 < w[1].0), "binary search needs order");
        for mapped in ["num", "benchmarks", "db", "write_buffer_size", "use_existing_db"] {
            assert!(IGNORED.iter().all(|e| e.0 != mapped), "{mapped}");
        }
        for issue_9 in ["max_open_files", "open_files", "mmap_read"] {
            assert!(IGNORED.iter().any(|e| e.0 == issue_9), "{issue_9}");
        }
        // Mapped since issue 14: `--use_direct_reads` chooses the engine's read path,
        // `--use_direct_io_for_flush_and_compaction` its SST write path and
        // `--cache_index_and_filter_blocks` where SSTs' index and filter blocks live.
        for mapped in [
            "use_direct_reads",
            "use_direct_io_for_flush_and_compaction",
            "cache_index_and_filter_blocks",
        ] {
            assert!(IGNORED.iter().all(|e| e.0 != mapped), "{mapped}");
        }
        assert!(MAPPED_BOOLS.windows(2).all(|w| w[0] < w[1]), "binary search needs order");
        for mapped in MAPPED_BOOLS {
            assert!(IGNORED.iter().all(|e| e.0 != *mapped), "{mapped}");
        }
    }

    #[test]
    fn noflag_of_a_mapped_boolean_reaches_the_parser_as_false() {
        let (kept, warnings) = strip(&[
            "--nocache_index_and_filter_blocks",
            "--nouse_direct_reads",
            "--nohistogram=1",
            "--nosuch_flag",
            "--",
            "--nosync",
        ])
        .unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(
            kept,
            [
                "--cache_index_and_filter_blocks=false",
                "--use_direct_reads=false",
                "--nohistogram=1",
                "--nosuch_flag",
                "--",
                "--nosync"
            ]
        );
    }

    #[test]
    fn ignored_flags_leave_with_one_warning_each() {
        let (kept, warnings) = strip(&[
            "--num=5",
            "--max_open_files=-1",
            "--open_files",
            "100",
            "--mmap_read=1",
            "--mmap_read",
            "--nouse_fsync",
            "--use_direct_reads",
            "true",
            "--sync",
            "--",
            "--open_files=3",
        ])
        .unwrap();
        // `--use_direct_reads` is shale's own flag now: it stays, with its value.
        assert_eq!(
            kept,
            ["--num=5", "--use_direct_reads", "true", "--sync", "--", "--open_files=3"]
        );
        assert_eq!(warnings.len(), 4, "{warnings:?}");
        let (_, w) = strip(&["--noverify_checksum", "--verify_checksum=1"]).unwrap();
        assert_eq!(
            w,
            ["--verify_checksum=false has no effect: shale verifies every block checksum it reads"]
        );
        let (_, w) = strip(&["--nommap_read"]).unwrap();
        assert!(w.is_empty(), "shale never maps: {w:?}");
        assert!(warnings[0].starts_with("--max_open_files has no effect"), "{warnings:?}");
        assert!(warnings[1].starts_with("--open_files has no effect"), "{warnings:?}");
        assert!(warnings[2].contains("never reads through mmap"), "{warnings:?}");
        assert!(warnings[3].starts_with("--use_fsync has no effect"), "{warnings:?}");
        for v in ["true", "false"] {
            let flag = format!("--use_direct_io_for_flush_and_compaction={v}");
            let (kept, w) = strip(&[flag.as_str()]).unwrap();
            assert!(w.is_empty() && kept == [flag.as_str()], "a flag of shale's own: {w:?}");
        }
    }

    #[test]
    fn an_ignored_flag_without_its_value_is_named() {
        assert!(strip(&["--open_files"]).unwrap_err().contains("--open_files needs a value"));
        let err = strip(&["--mmap_read=perhaps"]).unwrap_err();
        assert!(err.contains("--mmap_read") && err.contains("not a boolean"), "{err}");
    }
}
