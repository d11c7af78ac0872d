#!/usr/bin/env bash
# Regime (c)'s random group, shale alone, as bench/compare.sh runs it (the command line is the
# harness's, from its log), each run in a fresh 1 GiB cgroup v1 memory group: peak RSS, the
# group's peak with page cache, and the OOM kills the group counted. Root; run from the
# repository root after `cargo build --release -p shale-cli`. RUNS=2 by default.
set -euo pipefail
out=bench/results/2026-12-03-regime-c-memory-limit
runs=${RUNS:-2}
for r in $(seq 1 "$runs"); do
  cg=/sys/fs/cgroup/memory/shale-memlimit-$$-$r
  mkdir "$cg"
  echo 1073741824 > "$cg/memory.limit_in_bytes"
  rm -rf target/compare-work/shale-random
  mkdir -p target/compare-work/shale-random "$out/raw"
  bash -c "echo \$\$ > $cg/cgroup.procs; exec /usr/bin/time -v target/release/shale bench \
    --benchmarks=fillrandom,flush,waitforcompaction,readrandom,seekrandom,readseq,overwrite,flush,waitforcompaction \
    --num=50000000 --threads=1 --key_size=16 --value_size=100 --compression_type=none \
    --bloom_bits=10 --level_compaction_dynamic_level_bytes=true --write_buffer_size=67108864 \
    --cache_size=268435456 --prepopulate_block_cache=1 --seed=1 --histogram=1 --statistics=1 \
    --db=target/compare-work/shale-random/store --reads=500000" \
    > "$out/raw/shale-only-$r.stdout" 2> "$out/raw/shale-only-$r.stderr" || echo "run $r: exit $?"
  echo "run $r: peak RSS $(grep 'Maximum resident' "$out/raw/shale-only-$r.stderr" | awk '{print $NF}') kB," \
    "group peak $(cat "$cg/memory.max_usage_in_bytes") B, oom kills $(awk '$1 == "oom_kill" {print $2}' "$cg/memory.oom_control")," \
    "$(grep -E '^(fillrandom|overwrite) +:' "$out/raw/shale-only-$r.stdout" | awk '{print $1 " " $5}' | tr '\n' ' ')" \
    "batch $(grep 'shale.write.buffer.bytes' "$out/raw/shale-only-$r.stdout" | awk '{print $NF}')"
  rm -rf target/compare-work/shale-random
  rmdir "$cg"
done
