#!/usr/bin/env bash
# Simulator speed before/after a change, on one machine in one run: builds bench_sim from a
# base commit (bench/base_build.sh: a worktree kept in build/bench-base-COMMIT) and from this
# tree, with this tree's bench_sim.cpp on both sides, then runs
# the two alternately, ROUNDS times: `bench_sim 4` (CPU rows/s of lru/belady with none and
# lookahead:8 on 1.2 M and 4.7 M rows), `bench_sim one lru P 4 3` for the other prefetchers P
# (periodic, capuchin, forecast: 4.7 M rows, best of 3; forecast also without early swap-out, what
# its learning and prefetching cost) and `bench_sim recompute 2` (CPU seconds of the
# dtr/cost_aware sweeps). Thread CPU time, not wall time, is what to compare on a shared
# machine; the load average is printed with each figure.
# Usage: bench/sim/compare.sh [ROUNDS=4] [BASE=d56dbab (main before the hot loop's bitmap and FIFOs)]
set -euo pipefail
rounds=${1:-4}
base=${2:-d56dbab}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/../lib.sh"
build_base_and_this "$base" sim bench_sim
old="$wt/build/bench/sim/bench_sim"
new="$root/build/bench/sim/bench_sim"
compare_header "sim bench" "load $(load)"
for r in $(seq 1 "$rounds"); do
  for side in before after; do
    bin=$old; [ "$side" = after ] && bin=$new
    echo "== round $r $side (load $(load))"
    "$bin" 4 "${TMPDIR:-/tmp}" | grep -E '^ +[0-9]+ .*(none|lookahead:8) ' | sed "s/^/$side /"
    for pf in periodic capuchin forecast; do "$bin" one lru "$pf" 4 3 | sed "s/^/$side /"; done
    "$bin" one lru forecast 4 3 no-early | sed "s/^/$side /"   # forecast without its early eviction
    "$bin" recompute 2 | grep -E 'rows (dtr|cost_aware)' | sed "s/^/$side /"   # totals, then by prefetcher
  done
done
