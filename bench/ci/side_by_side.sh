#!/usr/bin/env bash
# Two commands started at the same moment on one machine, each timed (wall, and the CPU of all
# it started): on a machine shared with other jobs their ratio means more than either figure.
#   bench/ci/side_by_side.sh 'COMMAND A' 'COMMAND B'
# Prints one line per command; their output goes to side-by-side.{a,b}.log in $TMPDIR (or /tmp).
# What docs/results.md's "Building and testing" compared with it, e.g. the fuzzers' build:
#   git show HEAD~1:tests/import/fuzz/run-fuzzers.sh >tests/import/fuzz/run-fuzzers-old.sh
#   bench/ci/side_by_side.sh 'MHC_FUZZ_BUILD=/tmp/f-old bash tests/import/fuzz/run-fuzzers-old.sh 1' \
#                            'MHC_FUZZ_BUILD=/tmp/f-new tests/import/fuzz/run-fuzzers.sh 1'
set -uo pipefail
[ $# = 2 ] || { sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
dir=${TMPDIR:-/tmp}
for k in a b; do
  cmd=$1; shift
  /usr/bin/time -f "%e %U %S %x" -o "$dir/side-by-side.$k.time" bash -c "$cmd" >"$dir/side-by-side.$k.log" 2>&1 &
  eval "pid_$k=$!"
  eval "cmd_$k=\$cmd"
done
wait "$pid_a" "$pid_b"
for k in a b; do
  read -r wall user sys rc < <(tail -n 1 "$dir/side-by-side.$k.time")
  eval "cmd=\$cmd_$k"
  printf '%s: %8.1f s wall %8.1f s user %6.1f s system, exit %s: %s\n' "$k" "$wall" "$user" "$sys" "$rc" "$cmd"
done
