#!/usr/bin/env bash
# What the reserved-peak warning costs `mhc sweep` per configuration. On a Kineto trace whose
# recorded Total Reserved peak the caching model misses by more than 5% (the kept H100 TimeSformer
# trace: the model 6.04 GiB, the profiler 4.27 GiB), each run's warning offers the expandable-segments
# what-if. It is computed once per prepared trace; before, every simulate() of a sweep (grid runs and
# bisection probes) ran one more simulation for it. The control is the same trace with the
# profiler's reserved peak removed from its meta (no warning, no what-if; the same runs): the seconds per simulation
# with the figure over those without it are about 1 when the sweep does not pay the what-if per
# configuration, and about 2 when it does.
# Usage: bench/sim/reserved_whatif.sh [MHC=build/cli/mhc ...] (several binaries: each is measured;
#        an older build shows the cost it had) [REPS=3 in $REPS]
set -euo pipefail
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/../lib.sh"
[[ $# -gt 0 ]] || set -- "$root/build/cli/mhc"
reps=${REPS:-3}
bench_tmp reserved-whatif
trace=tests/data/public/kineto/tracelens-h100-timesformer-k400.json.gz
grid=(--policies lru,largest,belady,dtr,cost_aware --prefetchers none,lookahead:8,periodic,capuchin,forecast
      --capacities 98%,96%,94%,92%,90%,88%,86%,84%,82%,80%,78%,76%,74%,72%,70%,68%,66%,64%,62%,60%,58%,56%,54%,52%,50%,48%,46%,44%,42%,40%,38%,36%,34%,32%,30%,28%,26%,24%,22%,20%
      --links pcie3,pcie4,pcie5 --bisect-steps 16 -j 1 --no-store)
export MHC_TRACE_CACHE=0   # both copies prepared the same way, every time
# Seconds per simulation, the best of $reps sweeps (mhc sweep's own "N simulations in S s" line).
per_sim() {
  local best=""
  for _ in $(seq 1 "$reps"); do
    line=$("$1" sweep "$2" "${grid[@]}" 2>/dev/null | grep -E '^[0-9]+ simulations in ' | head -1)
    n=$(awk '{print $1}' <<<"$line")
    s=$(awk '{print $4}' <<<"$line")
    v=$(awk -v s="$s" -v n="$n" 'BEGIN { printf "%.9f", s / n }')
    if [[ -z "$best" ]] || awk -v a="$v" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$v; fi
  done
  echo "$best $n"
}
echo "== mhc sweep on $(basename "$trace"): seconds per simulation, with and without the profiler's reserved peak =="
echo "load average $(load), $(nproc) cores, best of $reps"
for mhc in "$@"; do
  "$mhc" -q import "$trace" -o "$tmp/with.db" --force >/dev/null 2>&1
  cp "$tmp/with.db" "$tmp/without.db"
  sqlite3 "$tmp/without.db" "DELETE FROM meta WHERE key LIKE 'kineto.reserved_peak.%'"
  read -r with n < <(per_sim "$mhc" "$tmp/with.db")
  read -r without _ < <(per_sim "$mhc" "$tmp/without.db")
  ratio=$(awk -v a="$with" -v b="$without" 'BEGIN { printf "%.2f", a / b }')
  printf '%s: %s simulations; %.1f us each with the figure (warned), %.1f us without: %+.1f us, ratio %s\n' \
    "$mhc" "$n" "$(awk -v x="$with" 'BEGIN { print x * 1e6 }')" "$(awk -v x="$without" 'BEGIN { print x * 1e6 }')" \
    "$(awk -v a="$with" -v b="$without" 'BEGIN { print (a - b) * 1e6 }')" "$ratio"
done
