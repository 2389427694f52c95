#!/usr/bin/env bash
# Simulator speed before/after a change, on one machine in one run: builds bench_sim from a
# base commit (a temporary git worktree, removed at the end) and from this tree, then runs
# the two alternately, ROUNDS times: `bench_sim 4` (CPU rows/s of lru/belady with none and
# lookahead:8 on 1.2 M and 4.7 M rows), `bench_sim one lru P 4 3` for the other prefetchers P
# (periodic, capuchin, forecast: 4.7 M rows, best of 3) and `bench_sim recompute 2` (CPU seconds of the
# dtr/cost_aware sweeps). Thread CPU time, not wall time, is what to compare on a shared
# machine; the load average is printed with each figure.
# Usage: bench/sim/compare.sh [ROUNDS=4] [BASE=d426aad^1 (main before the prefetcher refactor)]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-4}
base=${2:-d426aad^1}
root=$(pwd)
wt=$(mktemp -d "${MHC_BENCH_WORKTREE_DIR:-${TMPDIR:-/tmp}}/mhc-bench-base.XXXXXX")   # the base worktree
cleanup() { git -C "$root" worktree remove --force "$wt" >/dev/null 2>&1 || true; rm -rf "$wt"; }
trap cleanup EXIT
git worktree add --detach "$wt" "$base" >/dev/null
# The same benchmark program on both sides: this tree's bench_sim.cpp.
cp bench/sim/bench_sim.cpp "$wt/bench/sim/bench_sim.cpp"
args=(-G Ninja -DCMAKE_BUILD_TYPE=Release ${MHC_CMAKE_ARGS:-})
for dir in "$wt" "$root"; do
  cmake -S "$dir" -B "$dir/build" "${args[@]}" >/dev/null
  cmake --build "$dir/build" -j"${MHC_JOBS:-2}" --target bench_sim >/dev/null
done
old="$wt/build/bench/sim/bench_sim"
new="$root/build/bench/sim/bench_sim"
echo "base $(git rev-parse --short "$base") vs this tree $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- sim bench || echo +changes)"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$rounds"); do
  for side in before after; do
    bin=$old; [ "$side" = after ] && bin=$new
    echo "== round $r $side (load $(cut -d' ' -f1-3 /proc/loadavg))"
    "$bin" 4 "${TMPDIR:-/tmp}" | grep -E '^ +[0-9]+ .*(none|lookahead:8) ' | sed "s/^/$side /"
    for pf in periodic capuchin forecast; do "$bin" one lru "$pf" 4 3 | sed "s/^/$side /"; done
    "$bin" recompute 2 | grep -E 'rows (dtr|cost_aware)' | sed "s/^/$side /"   # totals, then by prefetcher
  done
done
