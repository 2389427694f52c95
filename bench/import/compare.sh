#!/usr/bin/env bash
# Import speed before/after a change, on one machine in one run: builds `mhc` and
# mhc_bench_import from a base commit (a git worktree in build/bench-base-COMMIT, kept for the
# next run) and from this tree, with this tree's benchmark sources on both sides. It writes the
# synthetic inputs once (mhc_bench_import EVENTS: a snapshot pickle, a Kineto JSON and its gzip),
# then imports each input on the base and on this tree in turn, ROUNDS times (so that both sides
# see the same load), with `mhc_bench_import time`:
#   - the synthetic snapshot; the Kineto JSON and gzip with their parse on one thread and on two
#     (plain: each parses one half; gzip: one inflates, one parses; the base parses on one);
#   - each real public Kineto trace and snapshot in tests/data/public.
# Each import's line is printed, then a table of medians: events and input MB per second of CPU
# time (user + sys, every thread) and of wall time, with the load average of the round. CPU time
# is what to compare on a shared machine.
# Usage: bench/import/compare.sh [BASE=266acf7] [EVENTS=2000000] [ROUNDS=5]
set -euo pipefail
base=${1:-266acf7}
events=${2:-2000000}
rounds=${3:-5}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/../lib.sh"
bench_tmp import-compare
build_base_and_this "$base" "import" mhc_bench_import
compare_header "trace bench" "$(nproc) cores; $(date -u '+%F %H:%M UTC')"
bench() { echo "$(side_dir "$1")/build/bench/import/mhc_bench_import"; }
MHC_BENCH_KEEP=1 "$(bench after)" "$events" "$tmp" 1 >/dev/null   # writes the inputs (and times them once)
runs=("$tmp/bench-snapshot.pickle 0" "$tmp/bench-kineto.json 1" "$tmp/bench-kineto.json 2"
      "$tmp/bench-kineto.json.gz 1" "$tmp/bench-kineto.json.gz 2")
for f in tests/data/public/kineto/*.json* tests/data/public/torch-snapshot/*.pickle*; do runs+=("$f 0"); done
for run in "${runs[@]}"; do
  read -r file threads <<<"$run"
  for _ in $(seq "$rounds"); do
    for side in before after; do
      "$(bench $side)" time "$file" "$tmp/out.db" 1 "$threads" | sed "s/^/$side /"
    done
  done
done | tee "$tmp/lines"
echo "== medians of $rounds rounds (M ev/s and MB/s of CPU time | of wall time; load: the median round's)"
awk '
  $1 != "before" && $1 != "after" { next }
  { side = $1; label = $2; for (i = 3; i <= NF && $(i + 1) != "events"; i++) label = label " " $i
    for (i = 1; i <= NF; i++) {
      if ($i == "events" && !ev[label]) { ev[label] = $(i - 1); mb[label] = $(i + 1) }
      if ($i == "cpu" && $(i + 2) == "s" && !c) c = $(i + 1)
      if ($i == "wall" && $(i + 2) == "s") w = $(i + 1)
      if ($i == "load") ld = $(i + 1) " " $(i + 2) " " $(i + 3)
    }
    k = label SUBSEP side; n[k]++; cpu[k, n[k]] = c; wall[k, n[k]] = w; load[k, n[k]] = ld; c = 0
    if (!(label in seen)) { seen[label] = 1; order[++m] = label } }
  function median(arr, k, cnt,   i, j, t, v) {
    for (i = 1; i <= cnt; i++) v[i] = arr[k, i]
    for (i = 1; i <= cnt; i++) for (j = i + 1; j <= cnt; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
    return v[int((cnt + 1) / 2)] }
  END {
    printf "%-62s %-6s %9s %7s %7s %8s %7s %8s %7s %s\n", "input", "side", "events", "MB", "cpu s", "M ev/s", "MB/s", "wall s", "M ev/s", "MB/s | load"
    for (o = 1; o <= m; o++) for (s = 1; s <= 2; s++) {
      side = s == 1 ? "before" : "after"; k = order[o] SUBSEP side; if (!n[k]) continue
      c = median(cpu, k, n[k]); w = median(wall, k, n[k]); c = c > 0 ? c : 0.005; w = w > 0 ? w : 0.005
      printf "%-62s %-6s %9d %7.1f %7.3f %8.2f %7.0f %8.3f %7.2f %7.0f | %s\n", order[o], side, ev[order[o]], mb[order[o]],
             c, ev[order[o]] / c / 1e6, mb[order[o]] / c, w, ev[order[o]] / w / 1e6, mb[order[o]] / w, load[k, int((n[k] + 1) / 2)] }
  }' "$tmp/lines"
