#!/usr/bin/env bash
# The caching allocator model's cost before/after a change, on one machine in one run: builds
# `mhc` and bench_sim from a base commit (bench/base_build.sh: build/bench-base-COMMIT, kept) and
# from this tree, generates one gpt2-small trace (STEPS steps; 2985: about 10 M rows), then
# ROUNDS times, each side on its own copy of the trace:
#   - bench_sim allocators: thread CPU of the simulation alone (lru, 60%, events recorded), ideal
#     and caching allocator, best of 3;
#   - `mhc simulate COPY --capacity 60%` (the caching model, the command's default) and with
#     `--allocator ideal`, as users run them (--no-store), /usr/bin/time.
# CPU time is what to compare on a shared machine; the load average is printed with each figure.
# Usage: bench/sim/allocator_compare.sh [ROUNDS=2] [BASE=ebbb9d5 (the allocator model before its whole-segment set)] [STEPS=2985]
set -euo pipefail
rounds=${1:-2}
base=${2:-ebbb9d5}
steps=${3:-2985}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/../lib.sh"
bench_tmp allocator-compare
build_base_and_this "$base" sim mhc bench_sim
compare_trace "$steps" "sim bench"
for side in before after; do   # the first run of each side writes its prepared cache where it has one
  dir=$(side_dir "$side")
  "$dir/build/cli/mhc" -q simulate "$tmp/$side.db" --capacity 60% --allocator ideal --no-store >/dev/null
done
for r in $(seq 1 "$rounds"); do
  for side in before after; do
    dir=$(side_dir "$side")
    echo "== round $r $side (load $(load))"
    "$dir/build/bench/sim/bench_sim" allocators "$tmp/$side.db" 3 | sed "s/^/$side /"
    for allocator in caching ideal; do
      /usr/bin/time -f "$side mhc simulate --capacity 60%% --allocator $allocator: cpu %U s user + %S s sys, wall %e s, load $(load)" \
        "$dir/build/cli/mhc" -q simulate "$tmp/$side.db" --capacity 60% --allocator "$allocator" --no-store >/dev/null
    done
  done
done
