#!/usr/bin/env bash
# CPU of mhc's start: `mhc --version` and `mhc info TRACE`, each run N times under `perf stat -r N`
# (task-clock: user + system milliseconds a run, page faults a run), two builds in turn for
# ROUNDS rounds, then the median of the rounds per build and command. On a shared machine one
# round moves with the load; taking the two builds in turn and the median keeps the comparison fair.
# Usage: bench/ci/mhc_start_cpu.sh OLD_MHC NEW_MHC TRACE [N=200] [ROUNDS=5]
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 OLD_MHC NEW_MHC TRACE [N] [ROUNDS]" >&2; exit 2; }
old=$1 new=$2 trace=$3 n=${4:-200} rounds=${5:-5}
command -v perf >/dev/null || { echo "$0: perf is not installed" >&2; exit 2; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for _r in $(seq "$rounds"); do
  for build in old new; do
    exe=$old; [ "$build" = new ] && exe=$new
    for what in version info; do
      args=(--version); [ "$what" = info ] && args=(info "$trace")
      perf stat -r "$n" -x, -e task-clock,page-faults "$exe" "${args[@]}" 2>&1 >/dev/null |
        awk -F, -v b="$build" -v w="$what" '$3 == "task-clock" {ms = $1} $3 == "page-faults" {pf = $1}
          END {print b, w, ms, pf}' >>"$out"
    done
  done
done
echo "build command task-clock_ms(median) page_faults(median) rounds=$rounds runs_each=$n"
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
for build in old new; do
  for what in version info; do
    ms=$(awk -v b="$build" -v w="$what" '$1 == b && $2 == w {print $3}' "$out" | median)
    pf=$(awk -v b="$build" -v w="$what" '$1 == b && $2 == w {print $4}' "$out" | median)
    echo "$build $what $ms $pf"
  done
done
