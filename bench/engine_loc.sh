#!/usr/bin/env bash
# Lines of engine code at two revisions, per crate and per concern, for issue #43's
# before/after report ("what moved down into the space layer, what was deleted").
#
#   bench/engine_loc.sh BEFORE [AFTER]      (AFTER defaults to the working tree's HEAD)
#
# Counts the lines of every .rs file under crates/<crate>/src (unit tests inside src
# included), total and without blank and comment-only lines, and lists the files that exist
# at one revision only. Reads the revisions with git; builds nothing.
set -euo pipefail
before=${1:?usage: bench/engine_loc.sh BEFORE [AFTER]}
after=${2:-HEAD}
cd "$(git rev-parse --show-toplevel)"
crates=(space lsm hash table io)

# lines REV PATH-PREFIX -> "total code"
lines() {
  local rev=$1 prefix=$2 total=0 code=0 t c
  while IFS= read -r f; do
    t=$(git show "$rev:$f" | wc -l)
    c=$(git show "$rev:$f" | grep -cvE '^\s*$|^\s*//' || true)
    total=$((total + t))
    code=$((code + c))
  done < <(git ls-tree -r --name-only "$rev" -- "$prefix" | grep '\.rs$' || true)
  echo "$total $code"
}

printf '%-8s %18s %18s %10s\n' crate "lines $before" "lines $after" change
printf '%-8s %18s %18s %10s\n' '' '(total/code)' '(total/code)' '(code)'
for c in "${crates[@]}"; do
  read -r bt bc < <(lines "$before" "crates/$c/src")
  read -r at ac < <(lines "$after" "crates/$c/src")
  printf '%-8s %18s %18s %+10d\n' "$c" "$bt/$bc" "$at/$ac" $((ac - bc))
done
echo
echo "files only in $before (deleted or moved):"
comm -23 <(git ls-tree -r --name-only "$before" -- crates | grep '/src/.*\.rs$' | sort) \
         <(git ls-tree -r --name-only "$after" -- crates | grep '/src/.*\.rs$' | sort) | sed 's/^/  /'
echo "files only in $after (new):"
comm -13 <(git ls-tree -r --name-only "$before" -- crates | grep '/src/.*\.rs$' | sort) \
         <(git ls-tree -r --name-only "$after" -- crates | grep '/src/.*\.rs$' | sort) | sed 's/^/  /'
