#!/usr/bin/env bash
# Writing speed before/after a change, on one machine in one run: builds `mhc` and the write
# benchmarks from a base commit (a git worktree in build/bench-base-COMMIT, kept for the next run;
# `git worktree remove --force build/bench-base-COMMIT` drops it) and from this tree, with this
# tree's benchmark sources on both sides, then runs each figure on both sides one after the other:
#   - bench_store ROWS: write a training-shaped trace of ROWS rows (and read it back);
#   - bench_store run: store a simulated run of 3.9 M events and 1.4 M kernel times, twice;
#   - mhc generate --preset gpt2-small --steps STEPS (about 10 M rows at 2985): user + sys, and
#     rows per second of CPU (the trace's rows: every table's count, strings included), twice;
#   - bench_viewer --open on the generated trace (this tree only): the viewer's open time and
#     its accesses by allocation, from the file's index (a copy with it made), from the rows, and
#     after the end-to-end rounds from the trace's cache;
#   - bench_sim end-to-end on that trace, twice (the first builds the trace's cache, the second
#     reads it): load, prepare, simulate and store (3.9 M events, 1.4 M kernel times at 2985 steps);
#   - mhc simulate TRACE --capacity 60% as users run it (stores into the trace): user + sys;
#   - mhc_bench_import IMPORT_EVENTS: snapshot, Kineto JSON and Kineto gzip (median of 3).
# CPU time is what to compare on a shared machine; the load average is printed with each figure.
# Usage: bench/trace/store_compare.sh [BASE=3551a05] [STEPS=2985] [ROWS=10000000] [IMPORT_EVENTS=2000000]
set -euo pipefail
base=${1:-3551a05}
steps=${2:-2985}
rows=${3:-10000000}
events=${4:-2000000}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/../lib.sh"
bench_tmp store-compare
build_base_and_this "$base" "trace import datasets sim" mhc bench_store bench_sim bench_datasets mhc_bench_import
cmake --build build -j"${MHC_JOBS:-2}" --target bench_viewer >/dev/null 2>&1 || true   # where the viewer builds
compare_header "trace datasets bench" "$(nproc) cores"
for side in before after; do
  echo "== bench_store $rows, $side (load $(load))"
  "$(side_dir $side)/build/bench/trace/bench_store" "$rows" "$tmp/store.db" | sed "s/^/$side /"
done
for side in before after; do
  echo "== bench_store run, $side"
  "$(side_dir $side)/build/bench/trace/bench_store" run 3900000 1400000 "$tmp/run.db" | sed "s/^/$side /"
done
trace_rows() {
  sqlite3 "$1" "SELECT (SELECT count(*) FROM allocations) + (SELECT count(*) FROM kernels) + (SELECT count(*) FROM accesses)
    + (SELECT count(*) FROM copies) + (SELECT count(*) FROM markers) + (SELECT count(*) FROM strings)"
}
for r in 1 2; do
  for side in before after; do
    rm -f "$tmp/$side.db"
    /usr/bin/time -o "$tmp/time" -f "%e %U %S" \
      "$(side_dir $side)/build/cli/mhc" -q generate --preset gpt2-small --steps "$steps" -o "$tmp/$side.db" >/dev/null
    read -r wall user sys < "$tmp/time"
    n=$(trace_rows "$tmp/$side.db")
    awk -v s="$side" -v st="$steps" -v w="$wall" -v u="$user" -v y="$sys" -v n="$n" -v l="$(load)" 'BEGIN {
      printf "%s mhc generate --preset gpt2-small --steps %s: %d rows, wall %.2f s, cpu %.2f s user + %.2f s sys: %.2f M rows/s of CPU, %.2f M rows/s wall (load %s)\n",
        s, st, n, w, u, y, n / (u + y) / 1e6, n / w / 1e6, l }'
  done
done
for side in before after; do
  echo "trace, $side: $(du -m "$tmp/$side.db" | cut -f1) MB"
done
viewer="$root/build/bench/viewer/bench_viewer"
if [ -x "$viewer" ]; then
  cp "$tmp/after.db" "$tmp/indexed.db"
  sqlite3 "$tmp/indexed.db" "CREATE INDEX accesses_by_allocation ON accesses (allocation)"
  for f in indexed after; do
    echo "== viewer open, $f (load $(load))"
    "$viewer" --open "$tmp/$f.db" | sed -n '1,/^span/p' | grep -v '^span'
  done
  rm -f "$tmp/indexed.db"
fi
for r in 1 2; do
  for side in before after; do
    echo "== end to end, round $r, $side (load $(load))"
    "$(side_dir $side)/build/bench/sim/bench_sim" end-to-end "$tmp/$side.db" "$tmp/$side-runs.db" | sed "s/^/$side /"
  done
done
if [ -x "$viewer" ]; then
  echo "== viewer open, after, with the trace's cache (load $(load))"
  "$viewer" --open "$tmp/after.db" | sed -n '1,/^span/p' | grep -v '^span'
fi
for side in before after; do
  /usr/bin/time -f "$side mhc simulate --capacity 60%%: wall %e s, cpu %U s user + %S s sys (load $(load))" \
    "$(side_dir $side)/build/cli/mhc" -q simulate "$tmp/$side.db" --capacity 60% >/dev/null
done
rm -f "$tmp"/*.db
for side in before after; do
  echo "== import, $side"
  "$(side_dir $side)/build/bench/import/mhc_bench_import" "$events" "$tmp" 3 | sed "s/^/$side /"
done
