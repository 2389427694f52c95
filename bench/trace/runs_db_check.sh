#!/usr/bin/env bash
# What the page check before a store costs on runs databases of several sizes, two binaries in
# one run (same machine, same load): BEFORE and AFTER (e.g. a build of the base commit and this
# tree's build/cli/mhc). For each size N it builds a runs database of N + 1 runs of a tiny trace
# (bench/lib.sh runs_db: runs, config, metrics and events rows copied by SQL), then ROUNDS times,
# alternately, each binary runs
#   - `mhc simulate T --capacity 90% --no-store` (the work alone) and
#   - `mhc simulate T --capacity 90% --runs-db DB` (the check before the work, the work, the store),
# under /usr/bin/time. Last, per size, the medians and before / after of the --runs-db command's
# wall and CPU seconds, and what it costs over --no-store.
# Usage: bench/trace/runs_db_check.sh BEFORE AFTER [SIZES="10000 30000 100000"] [ROUNDS=3]
set -euo pipefail
before=$(realpath "$1")
after=$(realpath "$2")
sizes=${3:-10000 30000 100000}
rounds=${4:-3}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/../lib.sh"
bench_tmp runs-db-check
tiny_trace "$after" "$tmp/t.db"
echo "before $before, after $after; $(nproc) cores, $(date -u '+%F %H:%M UTC'), load $(load)"
for n in $sizes; do
  rm -f "$tmp/big.db"
  runs_db "$after" "$tmp/t.db" "$tmp/big.db" "$n"
  echo "== $((n + 1)) runs, $(sqlite3 "$tmp/big.db" 'SELECT count(*) FROM run_events') event rows, $(du -m "$tmp/big.db" | cut -f1) MB"
  for r in $(seq 1 "$rounds"); do
    echo "  round $r (load $(load))"
    for side in before after; do
      bin=$before; [ "$side" = after ] && bin=$after
      measure "  round $r $side --no-store" "$bin" -q simulate "$tmp/t.db" --capacity 90% --no-store
      cat "$tmp/last" >>"$tmp/$n.$side.work"
      measure "  round $r $side --runs-db" "$bin" -q simulate "$tmp/t.db" --capacity 90% --runs-db "$tmp/big.db"
      cat "$tmp/last" >>"$tmp/$n.$side.store"
    done
  done
  echo "$n $(du -m "$tmp/big.db" | cut -f1)" >>"$tmp/sizes"
done
echo "== medians of $rounds rounds: mhc simulate T --capacity 90% --runs-db DB (wall s / CPU s; over --no-store in brackets)"
printf '%8s %6s | %-22s | %-22s | %s\n' runs MB before after "before / after (wall, CPU)"
while read -r n mb; do
  for side in before after; do
    for col in 1 2; do
      cut -d' ' -f$col "$tmp/$n.$side.store" >"$tmp/col"; eval "${side}_$col=$(median "$tmp/col")"
      cut -d' ' -f$col "$tmp/$n.$side.work" >"$tmp/col"; eval "${side}_w$col=$(median "$tmp/col")"
    done
  done
  # shellcheck disable=SC2154 # set by the eval above
  awk -v n=$((n + 1)) -v mb="$mb" -v b1="$before_1" -v b2="$before_2" -v a1="$after_1" -v a2="$after_2" \
      -v bw1="$before_w1" -v aw1="$after_w1" 'BEGIN {
    # /usr/bin/time counts hundredths: a 0.00 is under 0.01, and its ratio a lower bound
    rw = a1 >= 0.01 ? sprintf("%.1fx", b1 / a1) : sprintf(">%.0fx", b1 / 0.01)
    rc = a2 >= 0.01 ? sprintf("%.1fx", b2 / a2) : sprintf(">%.0fx", b2 / 0.01)
    printf "%8d %6d | %5.2f / %5.2f (+%5.2f) | %5.2f / %5.2f (+%5.2f) | %s, %s\n", n, mb, b1, b2, b1 - bw1,
      a1, a2, a1 - aw1, rw, rc }'
done <"$tmp/sizes"
