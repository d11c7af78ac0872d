#!/usr/bin/env bash
# The public Rust API's semver check (issue #13 part 5, issue #43 part 3): cargo-semver-checks
# compares the public API of the three engines (shale-lsm, shale-hash, shale-table) and of the
# `shale` facade with their API at the baseline commit named in .ci/api-baseline, with the
# crates' default features (the `internals` feature of the project's own tools is outside
# semver; so are the `#[doc(hidden)]` fuzz modules). A breaking change fails the check: bump the
# crates' major version (0.x: minor) and move the baseline to the commit that does.
#
# Installs cargo-semver-checks with cargo when it is missing (about 15 minutes on 2 cores).
# Needs the baseline commit in the checkout's history: a shallow clone is deepened first.
# Exit status: 0 compatible, 1 a breaking change or a failure, 2 skipped because the tree is
# not a git checkout (an exported tarball has no baseline to compare with; it says so).
set -euo pipefail
cd "$(dirname "$0")/.."
baseline=$(grep -v '^#' .ci/api-baseline | head -n 1)
if ! git rev-parse --git-dir >/dev/null 2>&1; then
  echo "semver: SKIPPED: $(pwd) is not a git checkout, so the baseline commit $baseline cannot be read"
  exit 2
fi
if ! command -v cargo-semver-checks >/dev/null; then
  echo "semver: installing cargo-semver-checks"
  cargo install --locked --quiet cargo-semver-checks
fi
if ! git cat-file -e "$baseline^{commit}" 2>/dev/null; then
  git fetch --quiet --unshallow 2>/dev/null || git fetch --quiet origin "$baseline" 2>/dev/null || true
fi
if ! git cat-file -e "$baseline^{commit}" 2>/dev/null; then
  echo "semver: FAILED: the baseline commit $baseline (.ci/api-baseline) is not in this checkout" >&2
  exit 1
fi
cargo semver-checks check-release -p shale-lsm -p shale-hash -p shale-table -p shale \
  --default-features --baseline-rev "$baseline"
echo "semver: the public API of shale-lsm, shale-hash, shale-table and shale is compatible with $baseline"
