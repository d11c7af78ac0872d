#!/usr/bin/env bash
# Builds shale's Python package (crates/python) into an abi3 wheel and runs its tests:
#   1. a virtual environment in target/python-venv (made once, with $PYTHON or python3),
#   2. maturin, pytest and hypothesis installed in it (pip skips what is there already),
#   3. `maturin build --release`: the wheel into target/wheels/,
#   4. the wheel installed in the environment (replacing any earlier build),
#   5. pytest over crates/python/tests (skipped with --no-tests).
# Every step says what it does; any failure stops the script with a non-zero exit. Run it
# again at will: each step redoes only what changed (cargo and pip keep their work).
#
# Usage: bash bench/python/build_wheel.sh [--no-tests] [pytest arguments...]
set -euo pipefail
cd "$(dirname "$0")/../.."

venv=target/python-venv
wheels=target/wheels
run_tests=1
if [ "${1:-}" = "--no-tests" ]; then
    run_tests=0
    shift
fi

step() { printf '== build_wheel: %s\n' "$*"; }

if [ -x "$venv/bin/python" ]; then
    step "using the virtual environment $venv ($("$venv/bin/python" --version))"
else
    python=${PYTHON:-python3}
    step "creating the virtual environment $venv with $python ($("$python" --version))"
    "$python" -m venv "$venv"
fi

step "pip install maturin pytest hypothesis (into $venv)"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check maturin pytest hypothesis

step "maturin build --release (crates/python, abi3 wheel into $wheels/)"
"$venv/bin/maturin" build --release --manifest-path crates/python/Cargo.toml \
    --interpreter "$venv/bin/python" --out "$wheels"

wheel=$(ls -t "$wheels"/shale-*-abi3-*.whl | head -n 1)
step "pip install $wheel"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall \
    --no-deps "$wheel"

if [ "$run_tests" = 1 ]; then
    # From crates/python, where pytest's and hypothesis's caches are ignored by git.
    step "pytest crates/python/tests $*"
    cd crates/python
    "../../$venv/bin/python" -m pytest tests "$@"
fi
