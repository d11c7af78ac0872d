#!/usr/bin/env bash
# Every test of the repository, the README's test command (`bash test.sh`), which .ci/run runs on
# a clean checkout of main: `cargo fmt --check` and
# clippy with warnings denied, then the tests. Cargo fetches every crate;
# the toolchain is the machine's rustup stable. Then the Python package: bench/python/build_wheel.sh
# makes target/python-venv (pip fetches maturin, pytest and hypothesis from PyPI), builds the
# abi3 wheel and runs its pytest suite (docs/python.md). Then the public API's semver check
# (.ci/semver_check.sh, cargo-semver-checks). The last line totals every `test
# result` line and pytest's summary, because the workspace's last test binary (a crate
# without tests of its own) reports 0 tests: `total: X passed, Y failed, Z ignored`, where
# ignored counts cargo's ignored tests, pytest's skipped ones and a semver check that could
# not run. Any check failing fails the run.
#
# No skip counts as a pass. Some tests need more of the machine than the build: root, loop
# devices (losetup), mounts, io_uring with O_DIRECT, a writable /dev/shm, and Debian's
# nutcracker (twemproxy), redis-cli and redis-benchmark (redis-tools), redis-server (the RDB
# snapshot interoperability test), redis-sentinel (the failover test). Run by hand, such a
# test prints `skipped: ...` and returns where its prerequisite is missing; with
# SHALE_REQUIRE_PREREQS=1, which this script exports, it fails instead
# (crates/testkit/src/prerequisite.rs). So CI runs as root on Linux with io_uring, installs
# the packages when they are missing, and fails when it cannot. The tests that are
# `#[ignore]`d are child-process entry points: each is run by its parent test, as a child
# process of the test binary, and counts only in the parent's result.
set -uo pipefail
cd "$(dirname "$0")"
cargo --version
export SHALE_REQUIRE_PREREQS=1
# A run builds everything from clean once: incremental state would only add gigabytes to the
# target directory (a developer who wants it back sets CARGO_INCREMENTAL=1). The free space
# is printed first, because a disk filling up fails the build in ways that name no cause
# (a linker's bus error).
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
df -h . | awk 'NR == 2 { print "disk: " $4 " free of " $2 " under the checkout" }'

# The machine's prerequisites: one check, passed or failed (a failure fails the run; the
# tests that need what is missing fail too, each saying what).
prereq_missing=()
if [ "$(id -u)" != 0 ]; then
    prereq_missing+=("root (loop devices, mounts, apt-get)")
fi
if [ "$(id -u)" = 0 ] && { ! command -v nutcracker >/dev/null || ! command -v redis-cli >/dev/null \
    || ! command -v redis-benchmark >/dev/null || ! command -v redis-server >/dev/null \
    || ! command -v redis-sentinel >/dev/null; }; then
    echo "prerequisites: apt-get install nutcracker redis-tools redis-server redis-sentinel"
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q nutcracker redis-tools redis-server redis-sentinel; } >/dev/null 2>&1 \
        || echo "prerequisites: apt-get install nutcracker redis-tools redis-server redis-sentinel failed" >&2
fi
for program in losetup mount umount nutcracker redis-cli redis-benchmark redis-server redis-sentinel; do
    command -v "$program" >/dev/null || prereq_missing+=("$program")
done
if [ -d /dev/shm ] && [ -w /dev/shm ]; then :; else prereq_missing+=("a writable /dev/shm"); fi
if [ "${#prereq_missing[@]}" -eq 0 ]; then
    prereq_passed=1 prereq_failed=0
    echo "prerequisites: 1 passed, 0 failed (io_uring with O_DIRECT is checked by its tests)"
else
    prereq_passed=0 prereq_failed=1
    printf 'prerequisites: missing: %s\n' "${prereq_missing[@]}" >&2
    echo "prerequisites: 0 passed, 1 failed"
fi
# Formatting and lints first (issue #42): the workspace denies undocumented unsafe blocks and
# every clippy warning, and CI checks what it claims. Then the API docs, built with rustdoc's
# warnings denied, so that a doc link to a private or missing item fails here rather than
# rendering as dead text (shale-capi's library is also named `shale`, whose docs would
# overwrite the main crate's: it is left out). Each counts as one check in the total; any
# failing fails the run.
lint_passed=0
lint_failed=0
if cargo fmt --all -- --check; then lint_passed=$((lint_passed + 1)); else lint_failed=$((lint_failed + 1)); fi
if cargo clippy --workspace --all-targets -- -D warnings; then
    lint_passed=$((lint_passed + 1))
else
    lint_failed=$((lint_failed + 1))
fi
if RUSTDOCFLAGS="-D warnings" cargo doc --workspace --exclude shale-capi --no-deps -q; then
    lint_passed=$((lint_passed + 1))
else
    lint_failed=$((lint_failed + 1))
fi
echo "lint: $lint_passed passed, $lint_failed failed"

log=$(mktemp)
# The tests' temporary directories in one of the run's own, so that what their stores leave
# outside it is found afterwards: a store whose process a test killed (the SIGKILL and
# failover scenarios) leaves its WAL tail in /dev/shm, holding memory until a reboot, once
# its directory is gone. `shale orphans --under` removes those, and only those.
test_tmp=$(mktemp -d "${TMPDIR:-/tmp}/shale-test.XXXXXX")
# --no-fail-fast: a failing test binary does not keep the ones after it from running (one
# failure once left half the suite unrun, and its total counted only what ran before it).
TMPDIR=$test_tmp cargo test --workspace --no-fail-fast 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
rm -rf "$test_tmp"
"${CARGO_TARGET_DIR:-target}/debug/shale" orphans --under "$test_tmp" --remove | tail -n 1
# libtest's "test result: ok. 5 passed; 0 failed; 2 ignored; 0 measured; 0 filtered out; ..."
cargo_passed=$(awk '/^test result:/ { n += $4 } END { print n + 0 }' "$log")
cargo_failed=$(awk '/^test result:/ { n += $6 } END { print n + 0 }' "$log")
cargo_ignored=$(awk '/^test result:/ { n += $8 } END { print n + 0 }' "$log")
echo "cargo: $cargo_passed passed, $cargo_failed failed, $cargo_ignored ignored"

pylog=$(mktemp)
bash bench/python/build_wheel.sh 2>&1 | tee "$pylog"
py_status=${PIPESTATUS[0]}
# pytest's summary, e.g. "===== 1 failed, 61 passed, 2 skipped in 24.10s =====" (errors count
# as failed, skipped as ignored).
summary=$(grep -E '^=+ .*[0-9]+ (passed|failed|error|skipped).* in [0-9.]+s' "$pylog" | tail -n 1)
py_passed=$(grep -oE '[0-9]+ passed' <<<"$summary" | awk '{ n += $1 } END { print n + 0 }')
py_failed=$(grep -oE '[0-9]+ (failed|errors?)' <<<"$summary" | awk '{ n += $1 } END { print n + 0 }')
py_skipped=$(grep -oE '[0-9]+ skipped' <<<"$summary" | awk '{ n += $1 } END { print n + 0 }')
rm -f "$log" "$pylog"
if [ "$py_status" -ne 0 ] && [ "$py_failed" -eq 0 ]; then
    # The build failed, or pytest ran nothing (exit 5): one failure, so the total says so.
    py_failed=1
fi
echo "python: $py_passed passed, $py_failed failed, $py_skipped skipped"

# The public API's semver check (README): one check, passed or failed.
bash .ci/semver_check.sh
semver_status=$?
semver_passed=$((semver_status == 0 ? 1 : 0))
semver_failed=$((semver_status != 0 && semver_status != 2 ? 1 : 0))
semver_ignored=0
if [ "$semver_status" -eq 2 ]; then
    # Not a git checkout: the script said why; nothing to compare with, so not a failure,
    # but not a pass either: it counts as ignored.
    semver_status=0
    semver_ignored=1
    echo "semver: 0 passed, 0 failed, 1 ignored (no git history)"
else
    echo "semver: $semver_passed passed, $semver_failed failed"
fi
total_passed=$((prereq_passed + lint_passed + cargo_passed + py_passed + semver_passed))
total_failed=$((prereq_failed + lint_failed + cargo_failed + py_failed + semver_failed))
total_ignored=$((cargo_ignored + py_skipped + semver_ignored))
echo "total: $total_passed passed, $total_failed failed, $total_ignored ignored"
if [ "$prereq_failed" -ne 0 ] || [ "$lint_failed" -ne 0 ]; then
    exit 1
fi
if [ "$status" -ne 0 ]; then
    exit "$status"
fi
if [ "$py_status" -ne 0 ]; then
    exit "$py_status"
fi
exit "$semver_status"
