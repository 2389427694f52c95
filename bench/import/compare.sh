#!/usr/bin/env bash
# Import speed before/after a change, on one machine in one run: builds `mhc` and
# mhc_bench_import from a base commit (a git worktree in build/bench-base-COMMIT, kept for the
# next run) and from this tree, with this tree's benchmark sources on both sides, then runs, on
# both sides one after the other:
#   - mhc_bench_import EVENTS DIR REPS: a synthetic snapshot, Kineto JSON (parse on one thread and
#     on two) and Kineto gzip (inflated on the parsing thread and on a second one), median of REPS;
#   - `mhc import` of each real public Kineto trace and snapshot in tests/data/public, ROUNDS times
#     each: user + sys and wall summed over the rounds, events from the trace's meta import.events.
# CPU time is what to compare on a shared machine; the load average is printed with each figure.
# Usage: bench/import/compare.sh [BASE=266acf7] [EVENTS=2000000] [REPS=3] [ROUNDS=5]
set -euo pipefail
cd "$(dirname "$0")/../.."
base=${1:-266acf7}
events=${2:-2000000}
reps=${3:-3}
rounds=${4:-5}
root=$(pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mhc-import-compare.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. bench/base_build.sh
build_base_and_this "$base" "import" mhc mhc_bench_import
load() { cut -d' ' -f1-3 /proc/loadavg; }
side_dir() { if [ "$1" = before ]; then echo "$wt"; else echo "$root"; fi; }
echo "base $(git rev-parse --short "$base") vs this tree $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- trace bench || echo +changes)"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(nproc) cores; $(date -u '+%F %H:%M UTC')"
for side in before after; do
  echo "== mhc_bench_import $events, $side"
  "$(side_dir $side)/build/bench/import/mhc_bench_import" "$events" "$tmp" "$reps" | sed "s/^/$side /"
done
echo "== real public traces: $rounds imports each (user + sys and wall summed over them)"
printf '%-7s %-58s %9s %7s %8s %8s %10s %8s %s\n' side file events MB cpu_s wall_s "M ev/s" "MB/s" load
for f in tests/data/public/kineto/*.json* tests/data/public/torch-snapshot/*.pickle*; do
  mb=$(awk -v b="$(stat -c %s "$f")" 'BEGIN { printf "%.2f", b / 1e6 }')
  for side in before after; do
    mhc="$(side_dir $side)/build/cli/mhc"
    cpu=0 wall=0 ev=?
    for _ in $(seq "$rounds"); do
      rm -f "$tmp/p.db"
      if ! /usr/bin/time -f "%U %S %e" -o "$tmp/time" "$mhc" -q import "$f" -o "$tmp/p.db" >/dev/null 2>&1; then
        ev=failed
        break
      fi
      read -r u s e <"$tmp/time"
      cpu=$(awk -v a="$cpu" -v u="$u" -v s="$s" 'BEGIN { print a + u + s }')
      wall=$(awk -v a="$wall" -v e="$e" 'BEGIN { print a + e }')
      ev=$(sqlite3 "$tmp/p.db" "SELECT value FROM meta WHERE key = 'import.events'")
    done
    if [ "$ev" = failed ]; then
      printf '%-7s %-58s import failed\n' "$side" "${f#tests/data/public/}"
      continue
    fi
    awk -v side="$side" -v f="${f#tests/data/public/}" -v ev="$ev" -v mb="$mb" -v cpu="$cpu" -v wall="$wall" \
        -v n="$rounds" -v load="$(load)" 'BEGIN {
      c = cpu > 0 ? cpu : 0.001
      printf "%-7s %-58s %9d %7.2f %8.2f %8.2f %10.2f %8.1f %s\n", side, f, ev, mb, cpu, wall, n * ev / c / 1e6, n * mb / c, load }'
  done
done
