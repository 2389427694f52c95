#!/usr/bin/env bash
# What the trace's content digest costs the write, before/after a change, on one machine in one
# run (docs/trace-format.md, "Content digest"): builds `mhc` from a base commit (a git worktree in
# build/bench-base-COMMIT, kept for the next run) and from this tree, then, ROUNDS times, runs
# `mhc generate ARGS` on each side in turn (the side that goes first alternates, so that both see
# the same load), and `mhc check` of the trace each side wrote (CHECK=0 leaves it out). Prints
# each run's line (wall, user + sys, load), then per command and side the median with the
# smallest and largest of the rounds, and after/before of the medians.
# Base e753d4c: the v1 digest, a second scan of every row at close; this tree: v2, summed as the
# rows are written.
# Usage: bench/trace/digest_compare.sh [BASE=e753d4c] [ROUNDS=3] [GENERATE ARGS...]
#   (default ARGS: --preset llama2-7b --steps 64 --micro-batches 8 --layers 256: 19.5 M rows)
# Env: CHECK=0, MHC_CMAKE_ARGS (e.g. the compiler launchers), MHC_JOBS.
set -euo pipefail
base=${1:-e753d4c}
rounds=${2:-3}
shift $(($# < 2 ? $# : 2))
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--preset llama2-7b --steps 64 --micro-batches 8 --layers 256)
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/../lib.sh"
bench_tmp digest-compare
build_base_and_this "$base" "trace" mhc
compare_header "trace" "$(nproc) cores; $(date -u '+%F %H:%M UTC'); mhc generate ${args[*]}"
mhc() { echo "$(side_dir "$1")/build/cli/mhc"; }
timed() {   # SIDE WHAT COMMAND...: one line "SIDE WHAT wall W cpu C (load L)"
  local side=$1 what=$2
  shift 2
  /usr/bin/time -o "$tmp/time" -f "%e %U %S" "$@" >/dev/null
  read -r wall user sys <"$tmp/time"
  awk -v s="$side" -v w="$what" -v a="$wall" -v u="$user" -v y="$sys" -v l="$(load)" \
    'BEGIN { printf "%s %s wall %.2f cpu %.2f (load %s)\n", s, w, a, u + y, l }'
}
for r in $(seq "$rounds"); do
  if [ $((r % 2)) = 1 ]; then sides="before after"; else sides="after before"; fi
  for side in $sides; do
    rm -f "$tmp/$side.db"
    timed "$side" generate "$(mhc "$side")" -q generate "${args[@]}" -o "$tmp/$side.db"
  done
  if [ "${CHECK:-1}" != 0 ]; then
    for side in $sides; do timed "$side" check "$(mhc "$side")" -q check "$tmp/$side.db"; done
  fi
done | tee "$tmp/lines"
for side in before after; do
  echo "$side: $(sqlite3 "$tmp/$side.db" "SELECT value FROM meta WHERE key = 'content_digest'"), $(du -m "$tmp/$side.db" | cut -f1) MB"
done
echo "== $rounds rounds: median [smallest, largest], seconds; after/before of the medians"
awk '
  { k = $2 SUBSEP $1; n[k]++; wall[k, n[k]] = $4; cpu[k, n[k]] = $6; if (!($2 in seen)) { seen[$2] = 1; order[++m] = $2 } }
  function sorted(arr, k, cnt, v,   i, j, t) {
    for (i = 1; i <= cnt; i++) v[i] = arr[k, i]
    for (i = 1; i <= cnt; i++) for (j = i + 1; j <= cnt; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t } }
  function stat(arr, k,   v, c) { c = n[k]; sorted(arr, k, c, v); med = v[int((c + 1) / 2)]; return sprintf("%6.2f [%6.2f, %6.2f]", med, v[1], v[c]) }
  END {
    printf "%-9s %-7s %-28s %-28s\n", "command", "side", "wall s", "cpu s (user + sys)"
    for (o = 1; o <= m; o++) {
      for (s = 1; s <= 2; s++) {
        side = s == 1 ? "before" : "after"; k = order[o] SUBSEP side
        w = stat(wall, k); mw[side] = med; c = stat(cpu, k); mc[side] = med
        printf "%-9s %-7s %-28s %-28s\n", order[o], side, w, c
      }
      printf "%-9s %-7s %-28.2f %-28.2f\n", order[o], "ratio", mw["after"] / mw["before"], mc["after"] / mc["before"]
    }
  }' "$tmp/lines"
