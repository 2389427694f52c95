#!/usr/bin/env bash
# `mhc sweep` as the demo runs it (scripts/demo: 5 eviction policies x 3 prefetchers x 4
# capacities over PCIe 4, then the bisections of its answers), before/after a change, on one
# machine in one run: builds `mhc` from a base commit (bench/base_build.sh: build/bench-base-COMMIT,
# kept) and from this tree, generates the demo's 3-step traces of the mhc-27b and llama2-70b-slice
# presets, then ROUNDS times, alternately, each side sweeps its own copy (--no-store, one thread:
# CPU time is what to compare on a shared machine) and prints its user CPU seconds; each round
# checks that both sides printed the same output (timings aside). Last, per preset, the median of
# the rounds and after / before.
# Usage: bench/sim/sweep_compare.sh [ROUNDS=3] [BASE=06087073 (main before the scored records)]
set -euo pipefail
rounds=${1:-3}
base=${2:-06087073}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/../lib.sh"
bench_tmp sweep-compare
build_base_and_this "$base" sim mhc
presets="mhc-27b llama2-70b-slice"
grid=(--policies lru,largest,belady,dtr,cost_aware --prefetchers none,periodic,lookahead:500
      --capacities 90%,75%,63%,50% --links pcie4 --no-store -j 1)
for p in $presets; do "$root/build/cli/mhc" -q generate --preset "$p" --steps 3 -o "$tmp/$p.db" >/dev/null; done
compare_header "sim" "$(nproc) cores; demo grid, 3 steps"
for p in $presets; do
  for side in before after; do   # the first run of each side writes its prepared cache
    cp "$tmp/$p.db" "$tmp/$p.$side.db"
    "$(side_dir "$side")/build/cli/mhc" -q sweep "$tmp/$p.$side.db" "${grid[@]}" >/dev/null
  done
done
for r in $(seq 1 "$rounds"); do
  for p in $presets; do
    for side in before after; do
      /usr/bin/time -o "$tmp/time" -f "%U %e" "$(side_dir "$side")/build/cli/mhc" sweep "$tmp/$p.$side.db" "${grid[@]}" \
        | sed -E 's/ in [0-9.]+ s:/:/' >"$tmp/$side.out"
      read -r cpu wall <"$tmp/time"
      echo "$cpu" >>"$tmp/$p.$side.cpu"
      echo "round $r $p $side: $cpu s user, $wall s wall, load $(load)"
    done
    cmp -s "$tmp/before.out" "$tmp/after.out" || { echo "round $r $p: outputs differ"; diff "$tmp/before.out" "$tmp/after.out" | head; exit 1; }
  done
done
echo "outputs identical in every round"
for p in $presets; do
  b=$(median "$tmp/$p.before.cpu"); a=$(median "$tmp/$p.after.cpu")
  echo "$p sweep, median user CPU s: before $b, after $a, after / before $(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", a / b}')"
done
