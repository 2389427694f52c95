#!/usr/bin/env bash
# Loading into the simulator before/after a change, on one machine in one run: builds `mhc` and
# bench_sim from a base commit (a temporary git worktree, removed at the end) and from this tree,
# generates one gpt2-small trace of about 10 M rows (STEPS steps), then ROUNDS times, each side on
# its own copy of the trace:
#   - bench_sim end-to-end: thread CPU and wall seconds of load, prepare, simulate (lru, 60%,
#     events recorded) and storing the run (into a runs database beside the copy);
#   - `mhc simulate COPY --capacity 60%` as users run it (stores into the trace), and the same with
#     --no-store, under /usr/bin/time (CPU, peak memory, minor page faults).
# This tree's first round builds its cache (trace_cache); later rounds read it. CPU time is what
# to compare on a shared machine; the load average is printed with each figure. The base is built
# once, in build/bench-base-COMMIT (a git worktree inside this tree's ignored build folder, so that
# a compiler cache with CCACHE_BASEDIR above the tree reuses the objects of any checkout of that
# commit), and kept for the next run; `git worktree remove --force build/bench-base-COMMIT` drops it.
# Usage: bench/sim/load_compare.sh [ROUNDS=2] [BASE=6ce197b (main before the cache)] [STEPS=2985]
set -euo pipefail
rounds=${1:-2}
base=${2:-6ce197b}
steps=${3:-2985}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/../lib.sh"
bench_tmp load-compare
# The same benchmark program on both sides: this tree's bench_sim.cpp (it uses the cache where
# the code has one) and its argument checking.
build_base_and_this "$base" sim mhc bench_sim
compare_trace "$steps" "trace sim bench"
for r in $(seq 1 "$rounds"); do
  for side in before after; do
    dir=$(side_dir "$side")
    echo "== round $r $side (load $(load))"
    "$dir/build/bench/sim/bench_sim" end-to-end "$tmp/$side.db" "$tmp/$side-runs.db" | sed "s/^/$side /"
    /usr/bin/time -f "$side mhc simulate --capacity 60%%: wall %e s, cpu %U s user + %S s sys, peak RSS %M KB, %R minor faults" \
      "$dir/build/cli/mhc" -q simulate "$tmp/$side.db" --capacity 60% >/dev/null
    /usr/bin/time -f "$side mhc simulate --capacity 60%% --no-store: wall %e s, cpu %U s user + %S s sys, peak RSS %M KB, %R minor faults" \
      "$dir/build/cli/mhc" -q simulate "$tmp/$side.db" --capacity 60% --no-store >/dev/null
  done
done
echo "file sizes after the rounds (MB): before $(du -m "$tmp/before.db" | cut -f1), after $(du -m "$tmp/after.db" | cut -f1)" \
     "(runs stored by mhc simulate in both; the cache in after)"
